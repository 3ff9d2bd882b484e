"""t.rollback_to(snapshot_id= | tag=) and `lakelog rollback`: Paimon's semantics, files cleaned."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import SnapshotNotFoundError, TagError
from lakelog.jobs.cli import main as cli

from .conftest import ORDERS, MakeTable


def orders(ids: list[int], name: str = "x") -> pa.Table:
    n = len(ids)
    return pa.table({"dt": ["d"] * n, "id": ids, "name": [name] * n, "amount": [1.0] * n}, schema=ORDERS)


def files(t: lakelog.Table) -> set[str]:
    return {str(p.relative_to(t.path)) for p in Path(t.path).rglob("*") if p.is_file()}


def ids(t: lakelog.Table, **kw: int) -> list[int]:
    return sorted(t.to_arrow(**kw).column("id").to_pylist())


def test_rollback_removes_later_snapshots_and_their_files(make_table: MakeTable) -> None:
    t = make_table(options={"bucket": "1", "changelog-producer": "input"})
    t.write(orders([1, 2]))
    t.write(orders([3]))
    t.create_tag("two")
    at_two = files(t)
    for i in range(4, 8):
        t.write(orders([i], name=f"v{i}"))
    t.compact(full=True)
    t.delete(pa.table({"dt": ["d"], "id": [1]}))
    assert t.latest_snapshot().id > 6
    assert t.rollback_to(2) == 2
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert ids(t) == [1, 2, 3]
    assert t.tags() == {"two": 2}
    assert files(t) - at_two <= {"snapshot/LATEST"}  # every later data, changelog and manifest file is gone
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []
    assert t.write(orders([9])) == 3  # the next commit takes the id after the target
    assert ids(t) == [1, 2, 3, 9]
    assert [r["id"] for r in t.changes(2).to_pylist()] == [9]


def test_rollback_to_a_tag_brings_its_expired_snapshot_back(make_table: MakeTable) -> None:
    t = make_table()
    t.write(orders([1]))
    t.create_tag("first")
    for i in range(2, 6):
        t.write(orders([i]))
    t.expire_snapshots(retain_min=1, retain_max=1)
    assert [s.id for s in t.snapshots()] == [5]
    assert t.rollback_to(tag="first") == 1
    assert [s.id for s in t.snapshots()] == [1]
    assert ids(t) == [1]
    assert t.rollback_to(1) == 1  # already there: nothing to do
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []


def test_rollback_is_refused_while_a_tag_holds_a_later_snapshot(make_table: MakeTable) -> None:
    t = make_table()
    for i in range(1, 4):
        t.write(orders([i]))
    t.create_tag("three")
    with pytest.raises(TagError, match=r"\['three'\]"):
        t.rollback_to(1)
    assert t.latest_snapshot().id == 3
    with pytest.raises(SnapshotNotFoundError):
        t.rollback_to(7)
    with pytest.raises(ValueError):
        t.rollback_to(1, tag="three")


def test_consumers_that_read_past_the_target_go_on_after_it(make_table: MakeTable) -> None:
    t = make_table()
    for i in range(1, 6):
        t.write(orders([i]))
    t.store.consumer_manager.reset("reader", 5)
    t.store.consumer_manager.reset("slow", 2)
    t.rollback_to(3)
    assert t.store.consumer_manager.list() == {"reader": 4, "slow": 2}


def test_the_command_line_rolls_back(make_table: MakeTable, warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_table("db.t")
    for i in range(1, 4):
        t.write(orders([i]))
    assert cli(["rollback", "--warehouse", warehouse, "db.t", "--snapshot", "1"]) == 0
    assert "rolled back to snapshot 1 (latest was 3)" in capsys.readouterr().out
    assert ids(t) == [1]
    t.create_tag("one")
    t.write(orders([5]))
    assert cli(["rollback", "--warehouse", warehouse, "--table", "db.t", "--tag", "one"]) == 0
    assert ids(t) == [1]
