"""Optimistic concurrency: racing committers, conflicting compactions, idempotent re-commits."""

from __future__ import annotations

import multiprocessing as mp

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.compaction import compact_split
from lakelog.connector.table.scan import plan_splits
from lakelog.connector.table.write import TableWrite

from .conftest import ORDERS

WRITERS = 3
COMMITS = 6


def _writer_process(warehouse: str, writer: int) -> None:
    t = lakelog.Catalog(warehouse).get_table("db.t")
    for i in range(COMMITS):
        ids = [writer * 1000 + i * 10 + j for j in range(5)]
        t.write(
            pa.table(
                {"dt": [f"p{writer}"] * 5, "id": ids, "name": ["w"] * 5, "amount": [1.0] * 5}, schema=ORDERS
            )
        )


@pytest.mark.parametrize("primary_key", [True, False], ids=["pk", "append"])
def test_processes_committing_at_once_all_commit(
    catalog: lakelog.Catalog, warehouse: str, primary_key: bool
) -> None:
    catalog.create_table(
        "db.t",
        ORDERS,
        primary_key=["dt", "id"] if primary_key else None,
        partition_by=["dt"],
        options={"bucket": "2"} if primary_key else None,
    )
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(warehouse, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    t = catalog.get_table("db.t")
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    appends = [s for s in snaps if s.commit_kind == "APPEND"]
    assert len(appends) == WRITERS * COMMITS  # writers' own compactions add COMPACT snapshots
    assert len({s.commit_user for s in appends}) == WRITERS * COMMITS  # each write() is its own commit user
    assert t.to_arrow().num_rows == WRITERS * COMMITS * 5
    assert snaps[-1].total_record_count == WRITERS * COMMITS * 5


def _table_with_runs(catalog: lakelog.Catalog) -> lakelog.Table:
    t = catalog.create_table("db.c", ORDERS, primary_key=["dt", "id"], options={"bucket": "1"})
    for i in range(3):
        t.write(
            pa.table(
                {"dt": ["a"] * 3, "id": [i, i + 1, i + 2], "name": [str(i)] * 3, "amount": [1.0] * 3},
                schema=ORDERS,
            )
        )
    return t


def test_compaction_deleting_removed_files_conflicts(catalog: lakelog.Catalog) -> None:
    t = _table_with_runs(catalog)
    store = t.store
    snap = store.snapshot_manager.latest()
    (split,) = plan_splits(store, snap)
    first = compact_split(store, split)
    second = compact_split(store, split)  # planned on the same snapshot
    assert first is not None and second is not None
    TableCommit(store).commit([first])
    before = t.to_arrow()
    with pytest.raises(CommitConflictError, match="no longer in the latest snapshot"):
        TableCommit(store).commit([second])
    assert t.to_arrow().equals(before)
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND"] * 3 + ["COMPACT"]


def test_append_racing_a_compaction_both_commit(catalog: lakelog.Catalog) -> None:
    t = _table_with_runs(catalog)
    store = t.store
    (split,) = plan_splits(store, store.snapshot_manager.latest())
    compaction = compact_split(store, split)
    assert compaction is not None
    t.write(pa.table({"dt": ["a"], "id": [100], "name": ["late"], "amount": [2.0]}, schema=ORDERS))
    TableCommit(store).commit([compaction])  # files it removes are still live: no conflict
    ids = sorted(t.to_arrow().column("id").to_pylist())
    assert ids == [0, 1, 2, 3, 4, 100]


def test_recommitting_the_same_identifier_is_skipped(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.i", ORDERS, primary_key=["dt", "id"])
    store = t.store
    committer = TableCommit(store, commit_user="flink-job-1")
    batch = pa.table({"dt": ["a"], "id": [1], "name": ["x"], "amount": [1.0]}, schema=ORDERS)
    w = TableWrite(store)
    w.write(batch)
    msgs = w.prepare_commit()
    assert committer.commit(msgs, 7) == 1
    assert committer.commit(msgs, 7) == 1  # a replay after a failover: skipped
    assert len(t.snapshots()) == 1
    w.write(batch)
    assert committer.commit(w.prepare_commit(), 8) == 2
    # a new committer object of the same user (restarted job) also recognises old identifiers
    assert TableCommit(store, commit_user="flink-job-1").commit(msgs, 7) == 1
    assert [(s.commit_user, s.commit_identifier) for s in t.snapshots()] == [
        ("flink-job-1", 7),
        ("flink-job-1", 8),
    ]


def test_writer_compaction_losing_a_race_keeps_the_appended_data(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.r",
        ORDERS,
        primary_key=["dt", "id"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "2", "compaction.max-size-amplification-percent": "10"},
    )
    t.write(pa.table({"dt": ["a"] * 2, "id": [1, 2], "name": ["x", "x"], "amount": [1.0, 1.0]}, schema=ORDERS))
    store = t.store
    w = TableWrite(store)
    w.write(pa.table({"dt": ["a"], "id": [3], "name": ["y"], "amount": [2.0]}, schema=ORDERS))
    msgs = w.prepare_commit()  # two runs: the writer compacted the committed file with its new one
    assert any(m.compact_before for m in msgs)
    assert t.compact(full=True) is not None  # meanwhile a dedicated compaction removes that file
    committer = TableCommit(store)
    sid = committer.commit(msgs)
    assert committer.compaction_discarded
    assert t.snapshot(sid).commit_kind == "APPEND"
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    t.remove_orphan_files(older_than_seconds=0)  # the dropped compaction output is gone, data stays
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 3]
