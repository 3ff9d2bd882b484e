"""pypaimon 2.1 as the oracle of dynamic-bucket, rescaled, overwritten and cross-partition tables:
it reads every snapshot lakelog writes, writes into lakelog's dynamic-bucket tables (its assigner
loads lakelog's hash index), and places keys as lakelog does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

import lakelog
from lakelog.connector.format.index_file import read_hash_index
from lakelog.connector.format.schema_changes import SetOption

from .buckets_util import assert_keys_in_their_buckets
from .interop_util import assert_same_rows, pp_create_table, pp_read, pp_write

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def every_snapshot_reads_the_same(warehouse: str, name: str, t: lakelog.Table) -> None:
    for s in t.snapshots():
        assert_same_rows(pp_read(warehouse, name, snapshot_id=s.id), t.to_arrow(snapshot_id=s.id),
                         f"pypaimon reading snapshot {s.id} ({s.commit_kind}) of {name}")


def hash_buckets(t: lakelog.Table) -> dict[tuple[Any, int], list[int]]:
    store = t.store
    out = {}
    for e in store.index_entries(t.latest_snapshot()):
        out[(store.partition_values(e.partition), e.bucket)] = sorted(
            read_hash_index(store.file_io, store.index_file_path(e)).tolist()
        )
    return out


def test_pypaimon_reads_lakelog_dynamic_bucket_tables(warehouse: str) -> None:
    t = lakelog.Catalog(warehouse).create_table(
        "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "40"},
    )
    rng = np.random.default_rng(5)
    for step in range(5):
        t.write(pa.concat_tables([rows(dt, rng.choice(300, 80, replace=False).tolist(), f"{dt}{step}")
                                  for dt in ("a", "b")]))
    t.delete(rows("a", range(0, 300, 5), ""))
    t.compact(full=True)
    t.overwrite(rows("b", range(10), "ow"))
    every_snapshot_reads_the_same(warehouse, "db.d", t)


def test_pypaimon_and_lakelog_write_one_dynamic_bucket_table_in_turns(warehouse: str) -> None:
    t = lakelog.Catalog(warehouse).create_table(
        "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "7"},
    )
    t.write(rows("a", range(20), "ll1"))
    pp_write(warehouse, "db.d", rows("a", range(10, 35), "pp1"))  # known keys stay, new ones fill up
    t.write(rows("a", range(30, 45), "ll2"))
    pp_write(warehouse, "db.d", rows("a", range(0, 50, 3), "pp2"), rows("b", range(5), "pp2"))
    want = {i: "ll1" for i in range(10)} | {i: "pp1" for i in range(10, 30)} | {i: "ll2" for i in range(30, 45)}
    want |= {i: "pp2" for i in range(0, 50, 3)}
    got = {(r["dt"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}
    assert got == {("a", i): v for i, v in want.items()} | {("b", i): "pp2" for i in range(5)}
    assert t.to_arrow().num_rows == len(got)
    assert_same_rows(pp_read(warehouse, "db.d"), t.to_arrow(), "pypaimon after both wrote")
    assert_keys_in_their_buckets(t)


def test_dynamic_bucket_assignment_agrees_with_pypaimon(tmp_path: Any) -> None:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    opts = {"bucket": "-1", "dynamic-bucket.target-row-num": "5"}
    t = lakelog.Catalog(ours).create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts)
    pp_create_table(theirs, "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts)
    rng = np.random.default_rng(11)
    for step in range(4):
        batch = pa.concat_tables([rows(dt, rng.choice(60, 12, replace=False).tolist(), str(step)) for dt in ("x", "y")])
        t.write(batch)
        pp_write(theirs, "db.d", batch)
    pt = lakelog.Catalog(theirs).get_table("db.d")
    assert hash_buckets(t) == hash_buckets(pt)
    assert_same_rows(t.to_arrow(), pt.to_arrow(), "the same rows")


def test_lakelog_compaction_keeps_a_pypaimon_tables_hash_index(warehouse: str) -> None:
    """Regression: a lakelog commit wrote snapshots without 'indexManifest', so after a lakelog
    compaction pypaimon's assigner found no index and placed known keys in other buckets
    (duplicate keys on read)."""
    opts = {"bucket": "-1", "dynamic-bucket.target-row-num": "3"}
    pp_create_table(warehouse, "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts)
    pp_write(warehouse, "db.d", rows("a", range(9), "pp"))
    t = lakelog.Catalog(warehouse).get_table("db.d")
    sid = t.compact(full=True)
    assert t.snapshot(sid).index_manifest == t.snapshot(sid - 1).index_manifest
    pp_write(warehouse, "db.d", rows("a", range(3, 12), "pp2"))
    got = pp_read(warehouse, "db.d")
    assert sorted(got.column("id").to_pylist()) == list(range(12))
    assert_keys_in_their_buckets(t)


def test_pypaimon_reads_rescaled_tables(warehouse: str) -> None:
    t = lakelog.Catalog(warehouse).create_table(
        "db.r", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    t.write(pa.concat_tables([rows("a", range(50), "a"), rows("b", range(50), "b")]))
    t.alter(SetOption("bucket", "5"))
    t.write(rows("c", range(50), "c"))
    t.write(rows("a", range(40, 60), "a2"))
    t.rescale(partitions=[{"dt": "a"}])
    t.rescale(buckets=3, partitions=[{"dt": "b"}])
    assert t.bucket_counts() == {("a",): 5, ("b",): 3, ("c",): 5}
    every_snapshot_reads_the_same(warehouse, "db.r", t)
    # pypaimon writes the new partition with the table's count, as lakelog placed its keys
    pp_write(warehouse, "db.r", rows("c", [1, 99], "pp"))
    got = {(r["dt"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}
    assert len(got) == 161 and got[("c", 1)] == "pp" and got[("a", 45)] == "a2"
    assert_keys_in_their_buckets(t)


def test_pypaimon_reads_cross_partition_tables(warehouse: str) -> None:
    t = lakelog.Catalog(warehouse).create_table("db.x", SCHEMA, primary_key=["id"], partition_by=["dt"])
    t.write(rows("a", range(30), "a"))
    t.write(rows("b", range(20, 40), "b"))
    t.write(rows("a", range(35, 38), "back"))
    every_snapshot_reads_the_same(warehouse, "db.x", t)
    got = pp_read(warehouse, "db.x")
    assert sorted(got.column("id").to_pylist()) == list(range(40))
