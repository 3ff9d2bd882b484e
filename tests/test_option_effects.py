"""Options that are read in one place each, with a test that fails when that place ignores them:
file and manifest layout, write-side row kinds, partition names, append compaction, and the
Flink-free parts of the sink and the streaming source."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog

from .conftest import ORDERS, MakeTable


def _orders(dt: str, ids: list[int], name: str = "x") -> pa.Table:
    n = len(ids)
    return pa.table({"dt": [dt] * n, "id": ids, "name": [name] * n, "amount": [1.0] * n}, schema=ORDERS)


def _data_files(t: lakelog.Table) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(t.path) for f in fs if f.endswith(".parquet"))


# ---- data files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["snappy", "gzip", "zstd", "none"])
def test_file_compression_is_the_parquet_codec(make_table: MakeTable, codec: str) -> None:
    t = make_table(options={"file.compression": codec})
    t.write(_orders("a", list(range(100))))
    path = _data_files(t)[0]
    got = pq.ParquetFile(path).metadata.row_group(0).column(0).compression
    assert got == {"none": "UNCOMPRESSED"}.get(codec, codec.upper())


def test_file_compression_zstd_level_changes_the_encoding(catalog: lakelog.Catalog) -> None:
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"])
    data = pa.table({"id": np.arange(100_000), "s": [" ".join(x) for x in rng.choice(words, (100_000, 12))]})
    sizes = {}
    for level in ("1", "19"):
        t = catalog.create_table(f"db.z{level}", data.schema, options={"file.compression.zstd-level": level})
        t.write(data)
        (path,) = _data_files(t)
        sizes[level] = os.path.getsize(path)
    assert sizes["19"] < sizes["1"] * 0.8, sizes  # about 1.48 MB at level 1, 0.98 MB at 19


def test_target_file_size_rolls_data_files(catalog: lakelog.Catalog) -> None:
    data = pa.table({"id": np.arange(300_000), "v": np.arange(300_000) * 7})
    default = catalog.create_table("db.big", data.schema)
    default.write(data)
    small = catalog.create_table("db.small", data.schema, options={"target-file-size": "100 kb"})
    small.write(data)
    assert len(_data_files(default)) == 1
    assert len(_data_files(small)) >= 3  # a new file after each written chunk past the target
    assert small.to_arrow().num_rows == 300_000


# ---- manifests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec,avro", [("deflate", "deflate"), ("none", "null"), (None, "zstandard")])
def test_manifest_compression_is_the_avro_codec(make_table: MakeTable, codec: str | None, avro: str) -> None:
    t = make_table(options={"manifest.compression": codec} if codec else None)
    t.write(_orders("a", [1]))
    mdir = Path(t.path) / "manifest"
    for name in os.listdir(mdir):
        with open(mdir / name, "rb") as f:
            assert fastavro.reader(f).codec == avro, name


def test_manifest_target_file_size_rolls_manifest_files(make_table: MakeTable) -> None:
    t = make_table(options={"manifest.target-file-size": "4 kb"})
    t.write(_orders("a", [1]))
    store = t.store
    assert store.manifest_file.target_file_size == 4 * 1024
    (entry,) = store.live_entries(t.latest_snapshot())
    entries = [dataclasses.replace(entry, file=dataclasses.replace(entry.file, file_name=f"data-{i}.parquet"))
               for i in range(5000)]
    assert len(store.manifest_file.write(entries, store.partition_types)) > 1
    default = make_table("db.default")
    assert len(default.store.manifest_file.write(entries, store.partition_types)) == 1


@pytest.mark.parametrize("min_count", [None, "3"])
def test_manifest_merge_min_count_bounds_the_manifests_a_snapshot_reads(
    make_table: MakeTable, min_count: str | None
) -> None:
    t = make_table(options={"write-only": "true", **({"manifest.merge-min-count": min_count} if min_count else {})})
    for i in range(8):
        t.write(_orders("a", [i]))
    metas = t.store.manifest_metas(t.latest_snapshot())
    if min_count is None:
        assert len(metas) == 8  # Paimon's default (30): one more manifest per commit
    else:
        assert len(metas) <= 3  # merged whenever the previous snapshot had 3
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(8))


# ---- rows --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ignore", [True, False])
def test_ignore_update_before_drops_minus_u_rows(make_table: MakeTable, ignore: bool) -> None:
    t = make_table(options={"ignore-update-before": "true"} if ignore else None)
    t.write(_orders("a", [1, 2], name="old"))
    with t.stream_writer() as w:
        w.write_changes(_orders("a", [1, 2], name="old"), [1, 1])  # two -U, no +U (yet)
        w.write_changes(_orders("a", [2], name="new"), [2])
        w.commit()
    got = {r["id"]: r["name"] for r in t.to_arrow().to_pylist()}
    assert got == ({1: "old", 2: "new"} if ignore else {2: "new"})


@pytest.mark.parametrize("name", [None, "NULL_PART"])
def test_partition_default_name_names_the_directory_of_null_values(catalog: lakelog.Catalog, name: str | None) -> None:
    schema = pa.schema([("p", pa.string()), pa.field("id", pa.int64(), False)])
    opts = {"bucket": "-1", **({"partition.default-name": name} if name else {})}
    t = catalog.create_table("db.t", schema, partition_by=["p"], options=opts)
    t.write(pa.table({"p": [None, ""], "id": [1, 2]}, schema=schema))
    expected = name or "__DEFAULT_PARTITION__"
    assert sorted(os.listdir(t.path)) == sorted(["manifest", "schema", "snapshot", f"p={expected}"])
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]


# ---- append compaction -------------------------------------------------------------------------------
@pytest.mark.parametrize("min_files,compacts", [(None, False), ("3", True), ("4", False)])
def test_compaction_min_file_num_decides_when_an_append_bucket_compacts(
    catalog: lakelog.Catalog, min_files: str | None, compacts: bool
) -> None:
    from lakelog.operators.compact_buckets import plan_compaction

    opts = {"bucket": "1", "bucket-key": "id", **({"compaction.min.file-num": min_files} if min_files else {})}
    t = catalog.create_table("db.app", ORDERS, options=opts)
    for i in range(3):
        t.write(_orders("a", [i]))
    assert bool(plan_compaction(t.store)) is compacts
    assert (t.compact(full=False) is not None) is compacts
    assert len(t.files().to_pylist()) == (1 if compacts else 3)
    assert t.compact(full=True) is None or not compacts  # full compacts any two or more files


# ---- the Flink sink and source, without Flink -------------------------------------------------------------
def test_sink_flush_interval_is_the_default_flush_interval(make_table: MakeTable) -> None:
    from lakelog.operators.sink import _flush_ms

    assert _flush_ms(make_table("db.plain").store, None) is None
    t = make_table(options={"sink.flush-interval": "2 s"})
    assert _flush_ms(t.store, None) == 2000
    assert _flush_ms(t.store, 500) == 500  # an explicit argument wins


def test_streaming_read_options_consumer_and_discovery_interval(make_table: MakeTable) -> None:
    from lakelog.operators.source import follow_settings, follow_start
    from lakelog.operators.source_plan import ReadPlan as _Plan

    t = make_table(options={"continuous.discovery-interval": "3 s"})
    for i in range(4):
        t.write(_orders("a", [i]))
    assert follow_settings(_Plan(t.path, None, None, {})) == (3.0, None, False)
    plan = _Plan(t.path, None, None, {"consumer-id": "c1", "continuous.discovery-interval": "100 ms"})
    interval, consumer, ignore = follow_settings(plan)
    assert (interval, consumer, ignore) == (0.1, "c1", False)
    store = t.store
    assert follow_start(plan, store, consumer, ignore).next_snapshot == 5  # no progress yet: latest-full
    store.consumer_manager.reset("c1", 2)
    start = follow_start(plan, store, consumer, ignore)
    assert (start.full_snapshot, start.next_snapshot) == (None, 2)  # resumes where c1 stopped
    ignoring = _Plan(t.path, None, None, {"consumer-id": "c1", "consumer.ignore-progress": "true"})
    interval, consumer, ignore = follow_settings(ignoring)
    assert ignore is True
    start = follow_start(ignoring, store, consumer, ignore)
    assert (start.full_snapshot, start.next_snapshot) == (4, 5)
