"""``table-read.sequence-number.enabled`` (issue 24): the audit_log and binlog reads of a primary-key
table carry each row's ``_SEQUENCE_NUMBER`` after ``rowkind``. Checked against the numbers the
writer gave (one per input row of a bucket, in arrival order), and, over random writes,
deletes and compactions, change reads against the batch reads before and after them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.operators.source_plan import ReadPlan

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
SEQ = "_SEQUENCE_NUMBER"
ENGINES = {
    "deduplicate": {},
    "partial-update": {"partial-update.remove-record-on-delete": "true"},
    "aggregation": {"fields.v.aggregate-function": "listagg", "aggregation.remove-record-on-delete": "true"},
    "first-row": {},
}


def make(tmp_path: Path, engine: str = "deduplicate", **options: str) -> lakelog.Table:
    opts = {"bucket": "1", "merge-engine": engine, "table-read.sequence-number.enabled": "true",
            **ENGINES[engine], **options}  # fmt: skip
    return lakelog.Catalog(str(tmp_path)).create_table("db.t", SCHEMA, primary_key=["k"], options=opts)


def put(t: lakelog.Table, items: dict[int, str]) -> None:
    t.write(pa.table({"k": list(items), "v": list(items.values())}, schema=SCHEMA))


def batch(t: lakelog.Table, shape: str = "audit_log", snapshot: Optional[int] = None) -> pa.Table:
    """A batch read of ``t$audit_log`` (or ``t$binlog``) as the Flink source makes it."""
    from lakelog.operators.source import _audit

    plan = ReadPlan(t.path, None, None, {}, shape=shape)
    store = plan.store()
    read = plan.reader(store)
    snap = snapshot if snapshot is not None else store.snapshot_manager.latest_id()
    parts = [_audit(x) for s in plan.splits(store, snap) for x in read.read_split(s)]
    out = plan.shaped(pa.concat_tables(parts) if parts else _audit(read.output_schema.empty_table()),
                      streaming=False)
    assert out.schema.names == plan.output_schema.names
    return out.sort_by("k") if shape == "audit_log" else out


def by_key(audit: pa.Table) -> dict[int, tuple[int, Any]]:
    return {r["k"]: (r[SEQ], r["v"]) for r in audit.to_pylist()}


def test_batch_reads_carry_the_sequence_number_of_each_keys_row(tmp_path: Path) -> None:
    t = make(tmp_path)
    put(t, {1: "a", 2: "b", 3: "c"})  # sequence numbers 0, 1, 2
    # one number per input row, a key written twice in a batch too: 3 (k=2), 4, 5 (k=2 again), 6
    t.write(pa.table({"k": [2, 4, 2, 5], "v": ["B", "d", "BB", "e"]}, schema=SCHEMA))
    t.delete(pa.table({"k": [3]}))  # 7
    audit = batch(t)
    assert audit.schema.names == ["rowkind", SEQ, "k", "v"]
    assert audit.schema.field(SEQ).type == pa.int64()
    assert audit.to_pylist() == [
        {"rowkind": "+I", SEQ: 0, "k": 1, "v": "a"},
        {"rowkind": "+I", SEQ: 5, "k": 2, "v": "BB"},
        {"rowkind": "+I", SEQ: 4, "k": 4, "v": "d"},
        {"rowkind": "+I", SEQ: 6, "k": 5, "v": "e"},
    ]
    # the binlog keeps the number a plain column: every other column is an array
    binlog = batch(t, "binlog")
    assert binlog.schema.field(SEQ).type == pa.int64()
    assert sorted((r["k"][0], r[SEQ]) for r in binlog.to_pylist()) == [(1, 0), (2, 5), (4, 4), (5, 6)]
    # the same after a full compaction, and through the table's own change read
    t.compact(full=True)
    assert batch(t).to_pylist() == audit.to_pylist()
    assert t.changes(0).sort_by("k").select(["rowkind", SEQ, "k", "v"]).to_pylist() == audit.to_pylist()
    # an old snapshot reads its own numbers
    assert by_key(batch(t, snapshot=1)) == {1: (0, "a"), 2: (1, "b"), 3: (2, "c")}
    # a row written again with the same values is no change, though its number moved on
    latest = t.latest_snapshot()
    assert latest is not None
    put(t, {1: "a", 4: "D"})
    # (the writer goes on after the largest number its files hold: the full compaction dropped
    # the delete's 7, so these get 7 and 8, as Paimon's writers restore)
    assert t.changes(latest.id).select(["rowkind", SEQ, "k", "v"]).to_pylist() == [
        {"rowkind": "-U", SEQ: 4, "k": 4, "v": "d"},
        {"rowkind": "+U", SEQ: 8, "k": 4, "v": "D"},
    ]
    assert by_key(batch(t))[1] == (7, "a")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_merge_engines_give_the_newest_number_they_merged(tmp_path: Path, engine: str) -> None:
    t = make(tmp_path, engine)
    put(t, {1: "a", 2: "b"})  # 0, 1
    put(t, {2: "c"})  # 2
    put(t, {1: "d"})  # 3
    got = by_key(batch(t))
    if engine == "first-row":  # the first row stays, with its own number (as Paimon keeps it)
        assert got == {1: (0, "a"), 2: (1, "b")}
    else:
        values = {"deduplicate": ("d", "c"), "partial-update": ("d", "c"), "aggregation": ("a,d", "b,c")}[engine]
        assert got == {1: (3, values[0]), 2: (2, values[1])}


def test_deletion_vector_tables_and_filters_read_the_numbers_too(tmp_path: Path) -> None:
    t = make(tmp_path, **{"deletion-vectors.enabled": "true"})
    put(t, {k: f"v{k}" for k in range(20)})  # 0..19
    put(t, {k: f"w{k}" for k in range(0, 20, 3)})  # 20..26
    before = by_key(batch(t))
    t.compact(full=False)  # the new file moves up and marks the old one's rows: files read alone
    from lakelog.connector.table.scan import deletion_vectors_of

    latest = t.latest_snapshot()
    assert latest is not None and any(deletion_vectors_of(t.store, latest).values())
    got = by_key(batch(t))
    rewritten = {k: (20 + i, f"w{k}") for i, k in enumerate(range(0, 20, 3))}
    assert got == before == {k: rewritten.get(k, (k, f"v{k}")) for k in range(20)}
    plan = ReadPlan(t.path, ["v"], "k = 3", {}, shape="audit_log")
    store = plan.store()
    read = plan.reader(store)
    rows = [r for s in plan.splits(store, store.snapshot_manager.latest_id())
            for x in read.read_split(s) for r in x.to_pylist()]
    assert rows == [{SEQ: got[3][0], "v": "w3"}]


def test_change_reads_agree_with_the_batch_reads_around_them(tmp_path: Path) -> None:
    """Random upserts, deletes and compactions: each snapshot's changes (the diff read of a table
    without a changelog producer, and the changelog of one with ``input``) give ``-U``/``-D`` the
    number the key had in the batch read before and ``+I``/``+U`` the number it has after; values
    that stay the same are no change, whatever their number."""
    rnd = random.Random(7)
    for producer in ("none", "input"):
        t = make(tmp_path / producer, **{"changelog-producer": producer, "bucket": "2"})
        before: dict[int, tuple[int, Any]] = {}
        last_id = 0
        for step in range(12):
            op = rnd.random()
            if op < 0.6:
                put(t, {rnd.randrange(30): f"{step}-{rnd.randrange(3)}" for _ in range(8)})
            elif op < 0.8 and before:
                t.delete(pa.table({"k": rnd.sample(sorted(before), min(3, len(before)))}))
            else:
                t.compact(full=True)
            latest = t.latest_snapshot()
            after = by_key(batch(t)) if latest is not None else {}
            if latest is None or latest.id == last_id:  # nothing to compact: no snapshot
                assert after == before
                continue
            plan = ReadPlan(t.path, None, None, {}, shape="audit_log")
            # a write may commit twice (APPEND, then its inline COMPACT)
            changes = plan.changes(plan.store(), last_id, latest.id).to_pylist()
            last_id = latest.id
            assert all(list(r) == ["rowkind", SEQ, "k", "v"] for r in changes)
            state = dict(before)
            for r in changes:
                if r["rowkind"] in ("-U", "-D"):
                    if producer == "none":  # the diff: exactly the row the key had
                        assert before[r["k"]] == (r[SEQ], r["v"]), (step, r)
                    state.pop(r["k"], None)
                else:
                    state[r["k"]] = (r[SEQ], r["v"])
            if producer == "none":
                assert state == after, step
            else:  # the input changelog: every row written, with the number it was written with
                assert {k: v for k, (_, v) in state.items()} == {k: v for k, (_, v) in after.items()}
                assert all(after[k][0] == s for k, (s, _) in state.items()), step
            before = after


def test_refusals_and_tables_it_does_not_apply_to(tmp_path: Path) -> None:
    t = make(tmp_path / "pk")
    put(t, {1: "a"})
    with pytest.raises(OptionError, match="cannot be set by a read's dynamic options"):
        ReadPlan(t.path, None, None, {"table-read.sequence-number.enabled": "false"}, shape="audit_log")
    # plain reads of the table have no such column
    assert ReadPlan(t.path, None, None, {}).output_schema.names == ["k", "v"]
    assert t.to_arrow().schema.names == ["k", "v"]
    # append tables have no sequence numbers (Paimon: primary-key tables only)
    a = lakelog.Catalog(str(tmp_path / "a")).create_table(
        "db.a", SCHEMA, options={"table-read.sequence-number.enabled": "true"})
    a.write(pa.table({"k": [1], "v": ["x"]}, schema=SCHEMA))
    assert ReadPlan(a.path, None, None, {}, shape="audit_log").output_schema.names == ["rowkind", "k", "v"]
    # a table with a Kafka log: the log's rows carry none, so a streaming read from the log is
    # refused (the source asks before it follows the log; batch reads and streaming-read-mode =
    # file read the files)
    with pytest.raises(OptionError, match="Kafka log carry no sequence numbers"):
        ReadPlan(t.path, None, None, {}, shape="binlog").check_log_read()
    ReadPlan(t.path, None, None, {}, shape="rows").check_log_read()
