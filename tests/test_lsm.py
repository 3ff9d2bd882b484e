"""The LSM tree: universal compaction picking, writer-side compaction, stop trigger, write-only,
spilling write buffer and the merge-on-read pushdown rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.format.manifest import DataFileMeta, SimpleStats
from lakelog.connector.lsm.levels import Levels, SortedRun, UniversalCompaction, make_unit

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("s", pa.string())])


def _file(name: str, level: int, size: int, seq: int = 0) -> DataFileMeta:
    empty = SimpleStats(b"", b"", [])
    return DataFileMeta(name, size, 1, b"", b"", empty, empty, seq, seq, 0, level)


def _runs(*spec: tuple[int, int]) -> list[SortedRun]:
    return [SortedRun(level, [_file(f"f{i}", level, size)]) for i, (level, size) in enumerate(spec)]


def test_picker_size_amplification_compacts_everything() -> None:
    picker = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_trigger=3)
    unit = picker.pick(6, _runs((0, 100), (0, 100), (5, 50)))
    assert unit is not None and unit.full and unit.output_level == 5 and len(unit.files) == 3


def test_picker_size_ratio_takes_similar_newest_runs() -> None:
    picker = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_trigger=3)
    # 10 + 10 + 10 grow to 30, and 1000 is far bigger: the three newest go one level below level 5
    unit = picker.pick(6, _runs((0, 10), (0, 10), (0, 10), (5, 1000)))
    assert unit is not None and not unit.full
    assert [f.file_name for f in unit.files] == ["f0", "f1", "f2"] and unit.output_level == 4


def test_picker_waits_below_the_trigger_then_forces_on_run_count() -> None:
    picker = UniversalCompaction(max_size_amp=10_000, size_ratio=0, num_run_trigger=3)
    assert picker.pick(6, _runs((0, 1), (3, 100))) is None
    # sizes that never fit the ratio: the run count forces the newest runs down to the trigger
    unit = picker.pick(6, _runs((0, 1), (0, 10), (0, 100), (3, 5000), (5, 100000)))
    assert unit is not None and [f.file_name for f in unit.files] == ["f0", "f1", "f2"]
    assert unit.output_level == 2


def test_output_level_never_zero() -> None:
    unit = make_unit(_runs((0, 1), (0, 1), (0, 1), (4, 9), (5, 99)), max_level=5, count=1)
    assert unit.output_level == 4 and len(unit.files) == 4 and not unit.full
    # when every run ends up in the unit it becomes a full compaction into the top level
    unit = make_unit(_runs((0, 1), (0, 1), (4, 9)), max_level=5, count=1)
    assert unit.full and unit.output_level == 5


def test_levels_order_runs_newest_first() -> None:
    lv = Levels.of([_file("a", 0, 1, seq=1), _file("b", 0, 1, seq=9), _file("c", 3, 1), _file("d", 5, 1)], 6)
    assert [(r.level, r.files[0].file_name) for r in lv.sorted_runs()] == [(0, "b"), (0, "a"), (3, "c"), (5, "d")]
    assert lv.non_empty_highest_level() == 5 and lv.number_of_sorted_runs() == 4


def _batch(rng: np.random.Generator, n: int, keys: int) -> pa.Table:
    ids = rng.integers(0, keys, n)
    return pa.table({"id": ids, "v": ids * 2, "s": [f"s{i % 97}" for i in ids]}, schema=SCHEMA)


def _max_runs(t: lakelog.Table) -> int:
    by_bucket: dict[tuple[str, int], set[tuple[int, str]]] = {}
    for f in t.files().to_pylist():
        run = (0, f["file_path"]) if f["level"] == 0 else (f["level"], "")
        by_bucket.setdefault((f["partition"], f["bucket"]), set()).add(run)
    return max((len(r) for r in by_bucket.values()), default=0)


def test_writer_compacts_and_never_exceeds_the_stop_trigger(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.t", SCHEMA, primary_key=["id"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3", "num-sorted-run.stop-trigger": "4"},
    )
    rng = np.random.default_rng(1)
    expected: dict[int, int] = {}
    for _ in range(25):
        b = _batch(rng, 300, 2000)
        t.write(b)
        expected.update(zip(b.column("id").to_pylist(), b.column("v").to_pylist()))
        assert _max_runs(t) <= 4
    kinds = [s.commit_kind for s in t.snapshots()]
    assert "COMPACT" in kinds and kinds.count("APPEND") == 25
    got = t.to_arrow()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == expected
    assert {f["level"] for f in t.files().to_pylist()} - {0} != set()  # compaction moved data up


def test_write_only_writers_never_compact_and_a_compaction_run_does(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.w", SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    rng = np.random.default_rng(2)
    for _ in range(12):
        t.write(_batch(rng, 100, 500))
    assert all(s.commit_kind == "APPEND" for s in t.snapshots())
    assert {f["level"] for f in t.files().to_pylist()} == {0} and _max_runs(t) == 12
    before = t.to_arrow().sort_by("id")
    sid = t.compact(full=False)  # the dedicated run: universal compaction
    assert sid is not None and t.snapshot(sid).commit_kind == "COMPACT"
    assert _max_runs(t) <= 5
    assert t.to_arrow().sort_by("id").equals(before)


def test_full_compaction_every_n_delta_commits(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.f", SCHEMA, primary_key=["id"], options={"bucket": "1", "full-compaction.delta-commits": "3"}
    )
    rng = np.random.default_rng(3)
    for i in range(1, 7):
        t.write(_batch(rng, 50, 200))
        levels = {f["level"] for f in t.files().to_pylist()}
        if i % 3 == 0:
            assert levels == {5}, f"commit {i} should end with a full compaction"


def test_value_filter_never_skips_a_file_holding_an_older_version(catalog: lakelog.Catalog) -> None:
    """Merge-on-read: file A holds id=1 with v=1; file B the newer v=100. A filter v < 10 must not
    use B's value statistics to skip B, or the stale v=1 would come back from A."""
    t = catalog.create_table("db.p", SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    t.write(pa.table({"id": [1, 2], "v": [1, 5], "s": ["a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"id": [1], "v": [100], "s": ["new"]}, schema=SCHEMA))
    assert len(t.files().to_pylist()) == 2
    got = t.to_arrow(filter=pc.field("v") < 10)
    assert got.column("id").to_pylist() == [2]
    # key filters may skip files: the plan for id == 2 opens only the file holding that key range
    assert t.to_arrow(filter=pc.field("id") == 1).column("v").to_pylist() == [100]
    assert sum(len(s.files) for s in t.plan(filter=pc.field("id") > 1)) == 1


@pytest.mark.parametrize("spill", [True, False], ids=["spillable", "flushing"])
def test_write_buffer_flushes_or_spills_when_full(catalog: lakelog.Catalog, spill: bool) -> None:
    """A full write buffer becomes a level-0 file, or a spilled chunk merged into one level-0 run at
    commit. (Its memory bound is a benchmark: benchmarks/bench_hot_paths.py --only buffer.)"""
    t = catalog.create_table("db.m", SCHEMA, primary_key=["id"], options={
        "bucket": "1", "write-buffer-size": "256 kb", "write-buffer-spillable": str(spill).lower(),
        "write-only": "true"})
    rng = np.random.default_rng(0)
    with t.writer() as w:
        for _ in range(12):  # 12 x ~160 kb of Arrow data: most of them fill the buffer
            ids = rng.integers(0, 10**9, 4000)
            w.write(pa.table({"id": ids, "v": ids, "s": pa.array(["x" * 30] * len(ids))}, schema=SCHEMA))
    files = len(t.files().to_pylist())
    assert t.to_arrow().num_rows == len(np.unique(np.random.default_rng(0).integers(0, 10**9, 48000)))
    if spill:
        assert files == 1  # spilled sorted chunks merged into one level-0 run at commit
    else:
        assert files > 5  # without spilling, every full buffer became a level-0 file


def test_projection_reads_what_the_merge_engine_needs(catalog: lakelog.Catalog) -> None:
    """A projected read of an engine keyed on other columns (here a sequence field) still merges
    whole rows: projecting ``id`` alone must neither fail nor pick the wrong version."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("ts", pa.int64())])
    t = catalog.create_table(
        "db.seq", schema, primary_key=["id"], options={"bucket": "1", "sequence.field": "ts", "write-only": "true"}
    )
    t.write(pa.table({"id": [1, 2], "v": [10, 20], "ts": [5, 5]}, schema=schema))
    t.write(pa.table({"id": [1], "v": [11], "ts": [1]}, schema=schema))  # older by its sequence field
    assert t.to_arrow(columns=["id"]).column("id").to_pylist() == [1, 2]
    assert t.to_arrow(columns=["v"]).column("v").to_pylist() == [10, 20]
    assert t.to_arrow(columns=["v"], filter=pc.field("id") == 1).column("v").to_pylist() == [10]


def test_cli_universal_compaction_for_write_only_tables(catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    from lakelog.jobs.cli import main

    t = catalog.create_table("db.cli", SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    rng = np.random.default_rng(5)
    for _ in range(8):
        t.write(_batch(rng, 50, 300))
    assert main(["--warehouse", warehouse, "compact", "--universal", "--table", "db.cli"]) == 0
    assert "compaction committed snapshot" in capsys.readouterr().out
    assert _max_runs(t) <= 5 and {f["level"] for f in t.files().to_pylist()} != {0}


@pytest.mark.parametrize("float_type", [pa.float64(), pa.float32()])
def test_nan_and_signed_zero_keys_merge_as_paimon_compares_them(tmp_path: Any, float_type: pa.DataType) -> None:
    """Regression: each write of a NaN key added a row (NaN != NaN), and delete / full compaction
    removed none. Paimon compares float keys like Java's Double.compare: every NaN is the same key,
    and -0.0 and 0.0 are two keys."""
    schema = pa.schema([pa.field("k", float_type, False), pa.field("p", pa.int32(), False), ("v", pa.string())])
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", schema, primary_key=["k", "p"], options={"bucket": "1", "num-sorted-run.compaction-trigger": "10"}
    )
    nan = float("nan")
    for i in range(5):
        t.write(pa.table({"k": [nan, -0.0, 0.0, 1.5], "p": [1, 1, 1, 1], "v": [f"n{i}", f"m{i}", f"z{i}", f"o{i}"]},
                         schema=schema))
    def state() -> list[tuple[str, str]]:
        return sorted((repr(r["k"]), r["v"]) for r in t.to_arrow().to_pylist())
    assert state() == [("-0.0", "m4"), ("0.0", "z4"), ("1.5", "o4"), ("nan", "n4")]
    assert t.changes(4, 5).num_rows == 8  # -U/+U for each of the four keys
    t.delete(pa.table({"k": [nan], "p": [1]}, schema=schema.remove(2)))
    assert state() == [("-0.0", "m4"), ("0.0", "z4"), ("1.5", "o4")]
    t.compact(full=True)
    assert state() == [("-0.0", "m4"), ("0.0", "z4"), ("1.5", "o4")]
    assert t.to_arrow().num_rows == 3
@pytest.mark.parametrize("limit", [None, "200 kb"])
def test_write_buffer_spill_max_disk_size_flushes_once_the_spill_budget_is_used(
    catalog: lakelog.Catalog, limit: str | None
) -> None:
    opts = {"bucket": "1", "write-buffer-size": "16 kb", "write-buffer-spillable": "true", "write-only": "true"}
    if limit:
        opts["write-buffer-spill.max-disk-size"] = limit
    t = catalog.create_table("db.spill", SCHEMA, primary_key=["id"], options=opts)
    rng = np.random.default_rng(3)
    with t.writer() as w:
        for i in range(12):  # each batch (~30 kb) fills the buffer: one spill (or flush) per batch
            ids = rng.integers(0, 10**9, 1000)
            w.write(pa.table({"id": ids, "v": ids, "s": [f"r{i}"] * len(ids)}, schema=SCHEMA))
    files = len(t.files().to_pylist())
    if limit is None:
        assert files == 1  # everything spilled, merged into one level-0 run at commit
    else:
        assert 2 < files < 12  # a few batches fit the budget; the rest became level-0 files at once
    assert t.to_arrow().num_rows == len({int(x) for x in np.random.default_rng(3).integers(0, 10**9, 12000)})


# ---- the compaction options, through a table's store ----------------------------------------------------
def _picked(catalog: lakelog.Catalog, options: dict[str, str], *spec: tuple[int, int]) -> list[str] | None:
    from lakelog.connector.lsm.compaction import BucketCompactor, num_levels

    t = catalog.create_table(f"db.p{len(catalog.list_tables('db')) if catalog.database_exists('db') else 0}",
                             SCHEMA, primary_key=["id"], options={"bucket": "1", **options})
    files = [_file(f"f{i}", level, size, seq=100 - i) for i, (level, size) in enumerate(spec)]
    comp = BucketCompactor(t.store, b"", 0, Levels.of(files, num_levels(t.store)))
    unit = comp.pick()
    return None if unit is None else sorted(f.file_name for f in unit.files)


def test_compaction_size_ratio_decides_which_newest_runs_merge(catalog: lakelog.Catalog) -> None:
    runs = ((0, 10), (0, 12), (3, 1000))
    three = {"num-sorted-run.compaction-trigger": "3"}  # 4 levels
    assert _picked(catalog, three, *runs) is None  # 10 * 1.01 < 12: the runs are not alike
    assert _picked(catalog, {**three, "compaction.size-ratio": "30"}, *runs) == ["f0", "f1"]


def test_compaction_incremental_size_threshold_forces_a_full_compaction(catalog: lakelog.Catalog) -> None:
    runs = ((0, 100), (5, 1000))  # two runs, far below the trigger: universal picks nothing
    assert _picked(catalog, {}, *runs) is None
    assert _picked(catalog, {"compaction.incremental-size-threshold": "50 b"}, *runs) == ["f0", "f1"]
    assert _picked(catalog, {"compaction.incremental-size-threshold": "500 b"}, *runs) is None


@pytest.mark.parametrize("levels", [None, "3"])
def test_num_levels_sets_the_top_level_of_a_full_compaction(catalog: lakelog.Catalog, levels: str | None) -> None:
    opts = {"bucket": "1", **({"num-levels": levels} if levels else {})}
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=opts)
    for i in range(3):
        t.write(pa.table({"id": [i], "v": [i], "s": ["x"]}, schema=SCHEMA))
    t.compact(full=True)
    top = int(levels) - 1 if levels else 5  # default: num-sorted-run.compaction-trigger + 1 levels
    assert {f["level"] for f in t.files().to_pylist()} == {top}


def test_compaction_max_size_amplification_percent_decides_a_full_compaction(catalog: lakelog.Catalog) -> None:
    runs = ((0, 100), (0, 300), (3, 100))  # 400 bytes above a 100-byte oldest run: 400 % amplification
    three = {"num-sorted-run.compaction-trigger": "3"}
    assert _picked(catalog, three, *runs) == ["f0", "f1", "f2"]  # default 200 %: compact everything
    assert _picked(catalog, {**three, "compaction.max-size-amplification-percent": "500"}, *runs) is None


@pytest.mark.parametrize("newest_first", [False, True])
def test_deduplicating_an_integer_key_keeps_the_highest_sequence_whatever_the_run_order(newest_first: bool) -> None:
    """A merge takes its runs by key range, not age: the newer version may come first in the
    concatenation. The winner of each key is still its highest sequence number, and the result is
    what the general sort gives."""
    from lakelog.connector.lsm.kv import DEDUPLICATE, merge_sorted, sort_indices

    rng = np.random.default_rng(11)
    runs = []
    seq = 0
    for r in range(5):
        keys = np.sort(rng.choice(1000, 300, replace=False))
        runs.append(pa.table({"_KEY_k": keys, "_SEQUENCE_NUMBER": np.arange(seq, seq + 300, dtype=np.int64),
                              "_VALUE_KIND": np.zeros(300, dtype=np.int8), "v": np.full(300, r)}))
        seq += 300
    both = pa.concat_tables(runs[::-1] if newest_first else runs)
    got = merge_sorted(both, ["_KEY_k"], DEDUPLICATE)
    order = sort_indices(both, ["_KEY_k"], then=["_SEQUENCE_NUMBER"])
    s = both.take(pa.array(order))
    k = s.column("_KEY_k").to_numpy()
    want = s.filter(pa.array(np.append(k[1:] != k[:-1], True)))
    assert got.to_pylist() == want.to_pylist()
