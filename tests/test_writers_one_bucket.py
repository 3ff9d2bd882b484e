"""Several writers of one bucket: the later commit wins, or the commit fails naming the bucket.

Each writer numbers its rows from the bucket's highest sequence number when it started, so two
writers started from the same snapshot use the same numbers. Regression tests for the issue that
found the later value hidden in 4 of 5 such scenarios; and a model-based test that interleaves a
long-lived writer, one-shot writes and deletes on one bucket against a dict oracle applied in
commit order.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string())])


def make(tmp: Path, **options: str) -> lakelog.Table:
    """A one-bucket table whose writers flush every write() at once (so a writer fixes its
    sequence numbers when it writes, not when it commits)."""
    return lakelog.Catalog(str(tmp)).create_table(
        "db.t", SCHEMA, primary_key=["k"], options={"bucket": "1", "write-buffer-size": "1 b", **options}
    )


@pytest.fixture()
def rebases(caplog: pytest.LogCaptureFixture) -> Any:
    """How many commits rebased their files so far."""
    caplog.set_level(logging.INFO, logger="lakelog.connector.table.commit")
    return lambda: sum("rebased new files" in r.getMessage() for r in caplog.records)


def rows(keys: list[int], value: str) -> pa.Table:
    return pa.table({"k": keys, "v": [value] * len(keys)}, schema=SCHEMA)


def state(t: lakelog.Table) -> dict[int, Optional[str]]:
    return {r["k"]: r["v"] for r in t.to_arrow().to_pylist()}


def test_a_stream_writer_committing_after_a_write_wins(tmp_path: Path, rebases: Any) -> None:
    t = make(tmp_path)
    t.write(rows([1, 2], "old"))
    with t.stream_writer() as w:
        w.write(rows([1], "stream"))  # numbered from the snapshot it started on
        t.write(rows([1, 2], "write"))  # committed first, same sequence numbers
        w.commit()
        assert rebases() == 1
        assert state(t) == {1: "stream", 2: "write"}
        w.write(rows([2], "stream2")).commit()  # the writer goes on after the rebase
    assert state(t) == {1: "stream", 2: "stream2"}
    t.compact(full=True)
    assert state(t) == {1: "stream", 2: "stream2"}
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []


def test_a_write_committing_after_a_stream_writer_wins(tmp_path: Path, rebases: Any) -> None:
    t = make(tmp_path)
    t.write(rows([1], "old"))
    w = t.writer()
    w.write(rows([1], "early"))  # flushed into a file now, committed last
    with t.stream_writer() as s:
        s.write(rows([1], "stream")).commit()
    w.commit()
    assert rebases() == 1
    assert state(t) == {1: "early"}


def test_a_reinsert_after_a_delete_stays_after_full_compaction(tmp_path: Path, rebases: Any) -> None:
    t = make(tmp_path)
    t.write(rows([1], "first"))
    with t.stream_writer() as w:
        w.write(rows([1], "again"))
        t.delete(pa.table({"k": [1]}))
        w.commit()
    assert rebases() == 1
    assert state(t) == {1: "again"}
    t.compact(full=True)
    assert state(t) == {1: "again"}


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_changelog_from_compaction_refuses_a_second_writer_by_bucket(tmp_path: Path, producer: str) -> None:
    t = make(tmp_path, **{"changelog-producer": producer, "full-compaction.delta-commits": "1"})
    t.write(rows([1], "old"))
    with t.stream_writer() as w:
        w.write(rows([1], "stream"))
        t.write(rows([1], "write"))
        with pytest.raises(CommitConflictError, match="bucket 0 .*another writer"):
            w.commit()
    assert state(t) == {1: "write"}  # nothing of the refused commit was published
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []


def test_input_changelog_is_rebased_with_its_rows(tmp_path: Path, rebases: Any) -> None:
    t = make(tmp_path, **{"changelog-producer": "input"})
    with t.stream_writer() as w:
        w.write(rows([1], "stream"))
        t.write(rows([1], "write"))
        w.commit()
    assert rebases() == 1
    assert state(t) == {1: "stream"}
    changes = t.changes(0).to_pylist()
    assert [(c["rowkind"], c["v"]) for c in changes] == [("+I", "write"), ("+I", "stream")]


@pytest.mark.parametrize("seed", range(6))
def test_interleaved_writers_of_one_bucket_match_a_commit_order_oracle(
    tmp_path: Path, seed: int, rebases: Any
) -> None:
    """A long-lived writer, one-shot writes and deletes, interleaved at random; the oracle applies
    each writer's changes in commit order, so the later commit always wins."""
    rng = random.Random(seed)
    t = make(tmp_path, **{"num-sorted-run.compaction-trigger": "3"})
    oracle: dict[int, Any] = {}
    pending: list[tuple[str, list[int], str]] = []  # the stream writer's uncommitted changes
    with t.stream_writer() as w:
        for step in range(40):
            keys = rng.sample(range(12), rng.randint(1, 4))
            op = rng.random()
            if op < 0.35:
                w.write(rows(keys, f"s{step}"))
                pending.append(("w", keys, f"s{step}"))
            elif op < 0.45:
                w.delete(pa.table({"k": keys}))
                pending.append(("d", keys, ""))
            elif op < 0.7:
                t.write(rows(keys, f"t{step}"))
                oracle.update({k: f"t{step}" for k in keys})
            elif op < 0.8:
                t.delete(pa.table({"k": keys}))
                for k in keys:
                    oracle.pop(k, None)
            else:
                w.commit()
                for kind, ks, v in pending:
                    for k in ks:
                        if kind == "w":
                            oracle[k] = v
                        else:
                            oracle.pop(k, None)
                pending = []
                assert state(t) == oracle, f"seed {seed} step {step}"
        w.commit()
        for kind, ks, v in pending:
            for k in ks:
                if kind == "w":
                    oracle[k] = v
                else:
                    oracle.pop(k, None)
    assert state(t) == oracle
    t.compact(full=True)
    assert state(t) == oracle
    assert rebases() > 0  # the interleaving did make writers overlap
