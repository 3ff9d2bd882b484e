"""``rollback_to_as_latest`` (issue 24): an earlier snapshot's files published as a new latest
snapshot, with every snapshot in between kept. Checked against a dict oracle over random writes,
deletes, compactions and rollbacks on every kind of table whose files it must restore (hash
indexes of dynamic buckets, deletion vectors)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import MissingFileError, SnapshotNotFoundError, TagError
from lakelog.operators.sql.procedures import CallContext, call_procedure, parse_call

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
KEYS = pa.schema([pa.field("k", pa.int64(), False)])


def call(ctx: CallContext, stmt: str) -> list[tuple[Any, ...]]:
    parts, positional, named = parse_call(stmt)
    return list(call_procedure(ctx, parts[-1], positional, named).rows)


def test_the_doc_example_keeps_the_snapshots_between(tmp_path: Path) -> None:
    cat = lakelog.Catalog(str(tmp_path))
    t = cat.create_table("test.T", pa.schema([("id", pa.int32()), ("name", pa.string())]))
    for i, name in ((1, "a"), (2, "b"), (3, "c")):
        t.write(pa.table({"id": [i], "name": [name]}, schema=t.schema))
    ctx = CallContext(cat, "lk", "test")
    # Non-destructive: roll snapshot 1 forward as the new latest (snapshot 4); 2 and 3 stay
    assert call(ctx, "CALL sys.rollback_to_as_latest(`table` => 'test.T', snapshot_id => 1)") == [(3, 1, 4)]
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4] and t.latest_snapshot().commit_kind == "OVERWRITE"
    assert t.to_arrow().to_pylist() == [{"id": 1, "name": "a"}]
    assert call(ctx, "CALL sys.rollback_to_as_latest(`table` => 'test.T', snapshot_id => 3)") == [(4, 3, 5)]
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 2, 3]
    t.create_tag("one", 1)
    assert call(ctx, "CALL sys.rollback_to_as_latest('test.T', 'one')") == [(5, 1, 6)]
    assert t.to_arrow().num_rows == 1
    t.write(pa.table({"id": [9], "name": ["after"]}, schema=t.schema))  # writes go on from there
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 9]
    with pytest.raises(SnapshotNotFoundError, match="99"):
        t.rollback_to_as_latest(99)
    with pytest.raises(TagError, match="nope"):
        t.rollback_to_as_latest(tag="nope")
    assert t.to_arrow(snapshot_id=3).num_rows == 3  # time travel to the kept snapshots works


def test_a_target_whose_files_were_cleaned_is_refused_naming_the_file(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=SCHEMA))
    t.write(pa.table({"k": [1], "v": ["b"]}, schema=SCHEMA))
    t.compact(full=True)
    gone = t.files(1).column("file_path").to_pylist()[0]
    Path(gone).unlink()  # as if a cleanup had removed it
    with pytest.raises(MissingFileError, match=Path(gone).name):
        t.rollback_to_as_latest(1)
    assert t.latest_snapshot().id == 3  # nothing was committed


SHAPES = {
    "pk": {"bucket": "2"},
    "pk-dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8"},
    "pk-dv": {"bucket": "2", "deletion-vectors.enabled": "true"},
    "append": {"bucket": "-1"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rollbacks_to_as_latest_against_the_model(tmp_path: Path, shape: str) -> None:
    rng = random.Random(shape)
    pk = shape != "append"
    opts = {**SHAPES[shape], "snapshot.num-retained.min": "1000", "snapshot.num-retained.max": "1000"}
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", SCHEMA, primary_key=["k"] if pk else None, options=opts
    )
    model: list[tuple[int, str]] = []  # the rows (an append table keeps duplicates)
    history: dict[int, list[tuple[int, str]]] = {}

    def state() -> list[tuple[int, str]]:
        return sorted((r["k"], r["v"]) for r in t.to_arrow().to_pylist())

    for step in range(40):
        op = rng.choice(["write"] * 4 + ["delete", "compact", "rollback", "rollback"])
        if op == "write":
            items = {rng.randrange(30): f"s{step}-{i}" for i in range(rng.randint(1, 6))}
            t.write(pa.table({"k": list(items), "v": list(items.values())}, schema=SCHEMA))
            if pk:
                model = [(k, v) for k, v in model if k not in items]
            model += list(items.items())
        elif op == "delete" and pk and model:
            gone = {k for k, _ in rng.sample(model, min(3, len(model)))}
            t.delete(pa.table({"k": sorted(gone)}, schema=KEYS))
            model = [(k, v) for k, v in model if k not in gone]
        elif op == "compact":
            t.compact(full=True)
        elif op == "rollback" and history:
            target = rng.choice(sorted(history))
            t.rollback_to_as_latest(target)
            model = list(history[target])
        snap = t.latest_snapshot()
        if snap is not None:
            history[snap.id] = sorted(model)
        assert state() == sorted(model), f"step {step} ({op})"
    for sid, rows in history.items():  # every kept snapshot still reads as it did
        assert sorted((r["k"], r["v"]) for r in t.to_arrow(snapshot_id=sid).to_pylist()) == rows, sid
    t.write(pa.table({"k": [100], "v": ["last"]}, schema=SCHEMA))  # and writers go on
    assert (100, "last") in state()
