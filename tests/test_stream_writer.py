"""Long-lived writers (``Table.stream_writer``): many commits, compaction in the background.

A streaming job keeps one writer per bucket and commits at every checkpoint; compaction must not
hold up writing, yet every commit must leave a table that reads right, and the changelog of the
lookup producer must stay exact even when it lags behind the data (``lookup-wait=false``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.lsm import levels as lsm
from lakelog.connector.lsm.compaction import num_levels
from lakelog.connector.lsm.levels import Levels

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64()), pa.field("s", pa.string())])


def make(tmp: Path, **options: str) -> lakelog.Table:
    opts = {"bucket": "1", "num-sorted-run.compaction-trigger": "3", "num-sorted-run.stop-trigger": "5", **options}
    return lakelog.Catalog(str(tmp / "wh")).create_table("db.t", SCHEMA, primary_key=["k"], options=opts)


def batch(rng: np.random.Generator, n: int, nkeys: int) -> pa.Table:
    keys = rng.integers(0, nkeys, n)
    vals = rng.integers(0, 1000, n)
    return pa.table({"k": keys, "v": vals, "s": [f"s{v % 7}" for v in vals]}, schema=SCHEMA)


def apply(oracle: dict[int, dict[str, Any]], t: pa.Table) -> None:
    for r in t.to_pylist():
        oracle[r["k"]] = r


def read(t: lakelog.Table, **kw: Any) -> dict[int, dict[str, Any]]:
    return {r["k"]: r for r in t.to_arrow(**kw).to_pylist()}


def replay(changes: pa.Table) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for r in changes.to_pylist():
        kind = r.pop("rowkind")
        if kind in ("+I", "+U"):
            state[r["k"]] = r
        else:
            state.pop(r["k"], None)
    return state


def max_runs(t: lakelog.Table) -> int:
    by_bucket: dict[tuple[str, int], list[Any]] = {}
    for e in t.store.live_entries(t.store.snapshot_manager.latest()):
        by_bucket.setdefault((e.partition.hex(), e.bucket), []).append(e.file)
    return max(Levels.of(fs, num_levels(t.store)).number_of_sorted_runs() for fs in by_bucket.values())


def files_on_disk(t: lakelog.Table) -> set[str]:
    out = set()
    for root, _, names in os.walk(t.path):
        if "bucket-" in os.path.basename(root):
            out |= {n for n in names if n.endswith(".parquet")}
    return out


def referenced_files(t: lakelog.Table) -> set[str]:
    """Data and changelog files that some snapshot references (none expired in these tests)."""
    store = t.store
    names: set[str] = set()
    for s in t.snapshots():
        names |= {e.file.file_name for e in store.live_entries(s)}
        if s.changelog_manifest_list:
            names |= {e.file.file_name for e in store.entries_of(store.manifest_list.read(s.changelog_manifest_list))}
    return names


@pytest.mark.parametrize("seed", [1, 2])
def test_many_commits_read_right_and_compact_in_background(tmp_path: Path, seed: int) -> None:
    t = make(tmp_path, bucket="2")
    rng = np.random.default_rng(seed)
    oracle: dict[int, dict[str, Any]] = {}
    with t.stream_writer() as w:
        for i in range(30):
            b = batch(rng, int(rng.integers(1, 400)), 300)
            w.write(b)
            apply(oracle, b)
            if rng.random() < 0.2:
                gone = sorted({int(k) for k in rng.integers(0, 300, 5)})
                w.delete(pa.table({"k": pa.array(gone, pa.int64())}))
                for k in gone:
                    oracle.pop(k, None)
            w.commit()
            assert read(t) == oracle, f"commit {i}"
            assert max_runs(t) <= 5 + 1  # a commit may carry one flush above the stop trigger
        w.commit(wait_compaction=True)
    assert read(t) == oracle
    kinds = [s.commit_kind for s in t.snapshots()]
    assert "COMPACT" in kinds, kinds
    # identifiers increase under one commit user
    ids = [s.commit_identifier for s in t.snapshots() if s.commit_kind == "APPEND"]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # nothing half-done is left behind: every data file on disk belongs to a snapshot
    assert files_on_disk(t) <= referenced_files(t)


def test_close_discards_compaction_in_flight(tmp_path: Path) -> None:
    t = make(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    rng = np.random.default_rng(3)
    w = t.stream_writer()
    for _ in range(6):
        w.write(batch(rng, 2000, 1000))
        w.commit()
    w.write(batch(rng, 2000, 1000))  # not committed: dropped with any compaction still running
    w.close()
    assert files_on_disk(t) <= referenced_files(t)
    with pytest.raises(RuntimeError, match="closed"):
        w.commit()


def test_a_stall_keeps_sorted_runs_at_the_stop_trigger(tmp_path: Path) -> None:
    t = make(tmp_path, **{"num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "3"})
    rng = np.random.default_rng(4)
    with t.stream_writer() as w:
        for _ in range(20):
            w.write(batch(rng, 500, 5000))
            w.commit()
            assert max_runs(t) <= 4


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_lookup_wait_false_changelog_lags_but_stays_exact(tmp_path: Path, engine: str) -> None:
    """Without lookup-wait a commit does not wait for level 0 to be compacted: the changelog lags
    the data, but replaying it always gives the table as of an earlier commit, and catches up."""
    t = make(tmp_path, **{"changelog-producer": "lookup", "lookup-wait": "false", "merge-engine": engine})
    rng = np.random.default_rng(5)
    oracle: dict[int, dict[str, Any]] = {}
    states = [dict(oracle)]
    lagged = 0
    with t.stream_writer() as w:
        for i in range(25):
            b = batch(rng, int(rng.integers(50, 3000)), 400)
            if engine == "partial-update":
                b = b.set_column(2, "s", pa.array([None if x % 3 else f"p{x}" for x in b.column("v").to_pylist()]))
                for r in b.to_pylist():
                    old = oracle.get(r["k"], {})
                    oracle[r["k"]] = {c: (r[c] if r[c] is not None else old.get(c)) for c in ("k", "v", "s")}
            else:
                apply(oracle, b)
            w.write(b)
            w.commit()
            states.append({k: dict(v) for k, v in oracle.items()})
            assert read(t) == oracle
            got = replay(t.changes(0))
            assert got in states, f"commit {i}: the changelog is not the state of any earlier commit"
            lagged += got != oracle
        w.commit(wait_compaction=True)
    assert replay(t.changes(0)) == oracle == read(t)
    assert any(s.commit_kind == "COMPACT" for s in t.snapshots())
    print(f"changelog lagged at {lagged} of 25 commits")


def test_lookup_wait_true_changelog_follows_every_commit(tmp_path: Path) -> None:
    t = make(tmp_path, **{"changelog-producer": "lookup"})
    rng = np.random.default_rng(6)
    oracle: dict[int, dict[str, Any]] = {}
    with t.stream_writer() as w:
        for _ in range(8):
            b = batch(rng, 300, 200)
            w.write(b)
            apply(oracle, b)
            w.commit()
            assert replay(t.changes(0)) == oracle == read(t)


def test_dedicated_compaction_produces_lookup_changelog_of_write_only_writers(tmp_path: Path) -> None:
    t = make(tmp_path, **{"changelog-producer": "lookup", "write-only": "true"})
    rng = np.random.default_rng(7)
    oracle: dict[int, dict[str, Any]] = {}
    for _ in range(3):
        b = batch(rng, 200, 100)
        t.write(b)
        apply(oracle, b)
    assert replay(t.changes(0)) == {}  # write-only: nothing compacted, no changelog yet
    t.compact(full=False)
    assert replay(t.changes(0)) == oracle
    b = batch(rng, 200, 100)
    t.write(b)
    apply(oracle, b)
    t.compact(full=True)
    assert replay(t.changes(0)) == oracle == read(t)


def test_optimization_interval_runs_full_compactions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(lsm, "_now", lambda: clock[0])
    t = make(tmp_path, **{"compaction.optimization-interval": "10 min", "num-sorted-run.compaction-trigger": "10",
                          "num-sorted-run.stop-trigger": "12"})
    rng = np.random.default_rng(8)
    with t.stream_writer() as w:
        for _ in range(3):
            w.write(batch(rng, 100, 1000))
            w.commit(wait_compaction=True)
            clock[0] += 60
        assert max_runs(t) == 3  # under the run trigger, too early for the timer
        clock[0] += 600
        w.write(batch(rng, 100, 1000))
        w.commit(wait_compaction=True)
        assert max_runs(t) == 1
        for _ in range(2):  # the timer restarted with that full compaction
            w.write(batch(rng, 100, 1000))
            w.commit(wait_compaction=True)
        assert max_runs(t) == 3


def test_total_size_threshold_keeps_small_buckets_in_one_run(tmp_path: Path) -> None:
    t = make(tmp_path, **{"compaction.total-size-threshold": "64 mb"})
    rng = np.random.default_rng(9)
    for _ in range(4):
        t.write(batch(rng, 100, 1000))
        assert max_runs(t) == 1


def test_bad_duration_option_is_named(tmp_path: Path) -> None:
    with pytest.raises(lakelog.LakelogError, match="compaction.optimization-interval"):
        make(tmp_path, **{"compaction.optimization-interval": "soon"})


def test_a_writer_restarted_under_the_same_commit_user_loses_nothing(tmp_path: Path) -> None:
    """Regression: a second writer with the same commit user numbered its commits from 1 again,
    so they were taken for repeats of the first writer's and skipped (rows lost, files orphaned)."""
    t = make(tmp_path)
    with t.stream_writer(commit_user="job-1") as w:
        for k in range(3):
            w.write(pa.table({"k": [k], "v": [k], "s": ["a"]}, schema=SCHEMA)).commit()
    batch_id = t.write(pa.table({"k": [10], "v": [10], "s": ["batch"]}, schema=SCHEMA))
    assert batch_id is not None
    with t.stream_writer(commit_user="job-1") as w:  # a restart of the same job
        ids = [w.write(pa.table({"k": [k], "v": [100 + k], "s": ["b"]}, schema=SCHEMA)).commit() for k in range(3)]
        assert w.commit_user == "job-1"
    assert ids[0] == batch_id + 1 and ids == sorted(set(ids))  # new snapshots, none skipped (a COMPACT may follow)
    got = read(t)
    assert {k: r["v"] for k, r in got.items()} == {0: 100, 1: 101, 2: 102, 10: 10}
    idents = sorted({s.commit_identifier for s in t.snapshots() if s.commit_user == "job-1"})
    assert idents == [1, 2, 3, 4, 5, 6]  # an APPEND and its COMPACT share one identifier
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []
@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
@pytest.mark.parametrize("ignore", [True, False])
def test_row_deduplicate_ignore_fields_leave_columns_out_of_the_comparison(
    catalog: lakelog.Catalog, producer: str, ignore: bool
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("ts", pa.int64())])
    opts = {"bucket": "1", "changelog-producer": producer, "changelog-producer.row-deduplicate": "true"}
    if ignore:
        opts["changelog-producer.row-deduplicate-ignore-fields"] = "ts"
    t = catalog.create_table("db.t", schema, primary_key=["id"], options=opts)

    def step(v: str, ts: int) -> list[str]:
        sid = t.write(pa.table({"id": [1], "v": [v], "ts": [ts]}, schema=schema))
        if producer == "full-compaction":
            sid = t.compact(full=True) or sid
        return t.changes(sid - 1, sid).column("rowkind").to_pylist() if sid else []

    assert step("a", 1) == ["+I"]
    assert step("a", 2) == ([] if ignore else ["-U", "+U"])  # only an ignored field changed
    assert step("b", 3) == ["-U", "+U"]
    with pytest.raises(lakelog.connector.errors.OptionError, match="unknown column"):
        t.alter(lakelog.SetOption("changelog-producer.row-deduplicate-ignore-fields", "nope"))
