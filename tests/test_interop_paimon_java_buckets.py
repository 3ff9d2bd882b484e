"""Paimon's Java code (paimon-bundle 1.3.0) as the oracle of dynamic-bucket, rescaled, overwritten
and cross-partition tables: it reads every snapshot lakelog writes, writes lakelog's dynamic-bucket
tables with its own HashBucketAssigner (the oracle's write command, as Paimon's engines do), places
keys as lakelog does, refuses to write a rescaled partition with the wrong count, and its streaming
scan skips lakelog's OVERWRITE snapshots."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.format.index_file import read_hash_index
from lakelog.connector.format.schema_changes import SetOption
from lakelog.connector.table.system_tables import system_table

from .buckets_util import assert_keys_in_their_buckets
from .paimon_java.oracle import PaimonOracle, PaimonOracleError, arrow_to_rows, canonical, session_fixture

pytestmark = pytest.mark.interop

paimon_java = session_fixture()

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def java_reads_every_snapshot(pj: PaimonOracle, wh: str, name: str, t: lakelog.Table) -> None:
    for s in t.snapshots():
        got = pj.read(wh, name, snapshot=s.id)
        assert canonical(got) == canonical(arrow_to_rows(t.to_arrow(snapshot_id=s.id))), (
            f"Paimon Java reading snapshot {s.id} ({s.commit_kind}) of {name}"
        )


def hash_buckets(t: lakelog.Table) -> dict[tuple[Any, int], list[int]]:
    store = t.store
    return {
        (store.partition_values(e.partition), e.bucket): sorted(
            read_hash_index(store.file_io, store.index_file_path(e)).tolist()
        )
        for e in store.index_entries(t.latest_snapshot())
    }


def test_paimon_java_reads_dynamic_rescaled_and_cross_partition_tables(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    d = cat.create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                         options={"bucket": "-1", "dynamic-bucket.target-row-num": "30"})
    rng = np.random.default_rng(2)
    for step in range(4):
        d.write(pa.concat_tables([rows(p, rng.choice(200, 50, replace=False).tolist(), f"{step}") for p in "ab"]))
    d.delete(rows("a", range(0, 200, 3), ""))
    d.compact(full=True)
    d.overwrite(rows("b", range(7), "ow"))
    java_reads_every_snapshot(paimon_java, wh, "db.d", d)

    r = cat.create_table("db.r", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"})
    r.write(pa.concat_tables([rows("a", range(60), "a"), rows("b", range(60), "b")]))
    r.alter(SetOption("bucket", "4"))
    r.write(rows("c", range(60), "c"))
    r.rescale(partitions=[{"dt": "a"}])
    r.write(rows("b", range(50, 70), "b2"))
    java_reads_every_snapshot(paimon_java, wh, "db.r", r)

    x = cat.create_table("db.x", SCHEMA, primary_key=["id"], partition_by=["dt"])
    x.write(rows("a", range(30), "a"))
    x.write(rows("b", range(20, 40), "b"))
    java_reads_every_snapshot(paimon_java, wh, "db.x", x)


def test_paimon_java_and_lakelog_write_one_dynamic_bucket_table(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                                         options={"bucket": "-1", "dynamic-bucket.target-row-num": "6"})
    t.write(rows("a", range(20), "ll1"))
    paimon_java.write(wh, "db.d", rows("a", range(10, 30), "pj1"))
    t.write(rows("a", range(25, 40), "ll2"))
    paimon_java.delete(wh, "db.d", rows("a", [0, 35], ""))
    paimon_java.write(wh, "db.d", rows("b", range(8), "pj2"))
    got = {(r["dt"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}
    want = {("a", i): "ll1" for i in range(1, 10)} | {("a", i): "pj1" for i in range(10, 25)}
    want |= {("a", i): "ll2" for i in range(25, 40) if i != 35} | {("b", i): "pj2" for i in range(8)}
    assert got == want and t.to_arrow().num_rows == len(want)
    assert canonical(paimon_java.read(wh, "db.d")) == canonical(arrow_to_rows(t.to_arrow()))
    assert_keys_in_their_buckets(t)
    # $table_indexes (issue 24): the same HASH index files as Paimon lists them
    ours = arrow_to_rows(system_table(lakelog.Catalog(wh).get_table("db.d").store, "table_indexes"))
    assert ours and {r["index_type"] for r in ours} == {"HASH"}
    assert canonical(paimon_java.read(wh, "db.d$table_indexes")) == canonical(ours)


def test_dynamic_bucket_assignment_agrees_with_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    opts = {"bucket": "-1", "dynamic-bucket.target-row-num": "5"}
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    t = lakelog.Catalog(ours).create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts)
    paimon_java.create_table(theirs, "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts)
    rng = np.random.default_rng(4)
    for step in range(4):
        batch = pa.concat_tables([rows(p, rng.choice(80, 15, replace=False).tolist(), str(step)) for p in "xy"])
        t.write(batch)
        paimon_java.write(theirs, "db.d", batch)
    assert hash_buckets(t) == hash_buckets(lakelog.Catalog(theirs).get_table("db.d"))


def test_paimon_java_writes_rescaled_tables_as_their_files_say(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Java checks a partition's files' bucket count before writing it: a partition lakelog left at
    its old count is refused with Java's message (lakelog writes it with its own count instead); a
    rescaled or new partition is written with the new count."""
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table("db.r", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                                         options={"bucket": "2"})
    t.write(pa.concat_tables([rows("a", range(30), "a"), rows("b", range(30), "b")]))
    t.alter(SetOption("bucket", "3"))
    t.rescale(partitions=[{"dt": "a"}])
    with pytest.raises(PaimonOracleError, match=r"Try to write partition \{dt=b\} with a new bucket num 3, but the previous bucket num is 2"):
        paimon_java.write(wh, "db.r", rows("b", [1], "pj"))
    paimon_java.write(wh, "db.r", rows("a", range(25, 35), "pj"))
    paimon_java.write(wh, "db.r", rows("c", range(10), "pj"))
    t.write(rows("b", [1], "ll"))  # lakelog writes b with b's own count
    assert t.bucket_counts() == {("a",): 3, ("b",): 2, ("c",): 3}
    assert_keys_in_their_buckets(t)
    got = {(r["dt"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}
    assert got[("a", 30)] == "pj" and got[("a", 3)] == "a" and got[("b", 1)] == "ll" and len(got) == 75
    assert canonical(paimon_java.read(wh, "db.r")) == canonical(arrow_to_rows(t.to_arrow()))


def test_paimon_java_streaming_skips_lakelog_rescales(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table("db.s", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                                         options={"bucket": "2", "changelog-producer": "input"})
    first = t.write(rows("a", range(20), "v1"))
    t.alter(SetOption("bucket", "5"))
    t.rescale()
    t.write(rows("a", range(10, 25), "v2"))
    assert first is not None
    java = paimon_java.changelog(wh, "db.s", from_snapshot=first + 1)
    for r in java:
        r["rowkind"] = r.pop("_rowkind")
        del r["_snapshot"]
    assert canonical(java) == canonical(arrow_to_rows(t.changes(first)))
    assert {r["rowkind"] for r in java} == {"+I"} and len(java) == 15  # the rescale showed nothing
