"""Paimon compatibility checked by Apache Paimon's own Java code (paimon-bundle 1.3.0).

pypaimon (tests/test_interop_pypaimon.py) is a Python port; Flink, Spark and Trino run the Java code,
so these tests ask it directly through the oracle in tests/paimon_java (one JVM per session). Each
test compares rows in the oracle's exact encoding (decimals as strings, nine-digit timestamps, base64
bytes): Paimon Java reads what lakelog writes and gets lakelog's own rows, snapshot by snapshot, and
lakelog reads what Paimon Java writes. Known failures are strict xfails, so they turn red when fixed.

The fixture skips only without a JDK, loudly; LAKELOG_REQUIRE_PAIMON_JAVA=1 (set by .ci/run) turns
that skip into a failure.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
import random
from collections.abc import Callable
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.connector.format import parquet_layout
from lakelog.connector.table.system_tables import system_table

from .merge_reference import MergeMapWithKeyTime
from .paimon_java.oracle import (
    JDBC_JARS,
    PaimonOracle,
    PaimonOracleError,
    arrow_to_rows,
    canonical,
    session_fixture,
)

pytestmark = pytest.mark.interop

paimon_java = session_fixture()
paimon_14 = session_fixture("paimon_14", JDBC_JARS)  # Paimon 1.4.2, for what 1.3 lacks (one shared JVM)

D = decimal.Decimal
KEY = [pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False)]
COMMON = pa.schema(
    [
        *KEY,
        ("b", pa.bool_()),
        ("i", pa.int32()),
        ("f64", pa.float64()),
        ("s", pa.string()),
        ("d10", pa.decimal128(10, 2)),
        ("d38", pa.decimal128(38, 10)),
        ("day", pa.date32()),
        ("ts3", pa.timestamp("ms")),
        ("ts6", pa.timestamp("us")),
        ("ltz3", pa.timestamp("ms", tz="UTC")),
        ("ltz6", pa.timestamp("us", tz="UTC")),
        ("by", pa.binary()),
        ("b4", pa.binary(4)),
    ]
)
NANOS = [pa.field("ts9", pa.timestamp("ns")), pa.field("ltz9", pa.timestamp("ns", tz="UTC"))]
WITH_NANOS = pa.schema([*COMMON, *NANOS])


# ---- data ----------------------------------------------------------------------------------------------
def _value(rnd: random.Random, field: pa.Field, i: int) -> Any:
    """One value of ``field`` for row ``i``: nulls, extremes and sub-unit digits mixed in."""
    t = field.type
    if field.nullable and rnd.random() < 0.1:
        return None
    edge = i % 11 == 0
    if pa.types.is_boolean(t):
        return rnd.random() < 0.5
    if pa.types.is_int32(t):
        return rnd.choice([-(2**31), 2**31 - 1, 0]) if edge else rnd.randrange(-(2**31), 2**31)
    if pa.types.is_float64(t):
        return rnd.choice([float("nan"), float("inf"), -0.0, 5e-324]) if edge else rnd.uniform(-1e12, 1e12)
    if pa.types.is_string(t):
        return rnd.choice(["", "ü€😀" * 9, "x" * 100]) if edge else f"s-{rnd.randrange(10**6)}"
    if pa.types.is_decimal(t):
        top = 10**t.precision - 1
        unscaled = rnd.choice([top, -top, 0]) if edge else rnd.randrange(-top, top + 1)
        return D(f"{unscaled}e-{t.scale}")  # exact: scaleb would round to 28 digits
    if pa.types.is_date32(t):
        return dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randrange(-25_000, 50_000))
    if pa.types.is_timestamp(t):
        per_second = {"ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
        # 1685..2255: inside Arrow's nanosecond range (1677-09-21 .. 2262-04-11) for every unit
        return rnd.randrange(-9 * 10**9, 9 * 10**9) * per_second + rnd.randrange(per_second)
    if pa.types.is_fixed_size_binary(t):
        return bytes(rnd.randrange(256) for _ in range(t.byte_width))
    if pa.types.is_binary(t):
        return bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 7, 40])))
    raise AssertionError(f"no generator for {t}")


def sample(schema: pa.Schema, ids: range | list[int], version: int) -> pa.Table:
    """Rows for ``ids`` (partition ``dt`` from the id); ``version`` changes every non-key value."""
    columns: dict[str, list[Any]] = {f.name: [] for f in schema}
    for i in ids:
        rnd = random.Random(i * 1000 + version)
        for f in schema:
            if f.name == "id":
                v: Any = i
            elif f.name == "dt":
                v = f"2024-01-0{i % 3 + 1}"
            else:
                v = _value(rnd, f, i)
            columns[f.name].append(v)
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in schema}, schema=schema)


def keys(ids: range | list[int]) -> pa.Table:
    return pa.table({"dt": [f"2024-01-0{i % 3 + 1}" for i in ids], "id": list(ids)}, schema=pa.schema(KEY))


def assert_same(got: list[dict], want: list[dict], what: str) -> None:
    g, w = canonical(got), canonical(want)
    if g != w:
        missing = [r for r in w if r not in set(g)][:3]
        extra = [r for r in g if r not in set(w)][:3]
        raise AssertionError(f"{what}: {len(g)} rows, {len(w)} expected\n missing {missing}\n unexpected {extra}")


def java_read(pj: PaimonOracle, warehouse: str, name: str, snapshot: Optional[int] = None) -> list[dict]:
    """Paimon Java's rows; its failure to read becomes an assertion failure (a wrong answer, not a
    broken oracle), so strict xfails with ``raises=AssertionError`` cover both ways of getting it wrong."""
    try:
        return pj.read(warehouse, name, snapshot=snapshot)
    except PaimonOracleError as e:
        raise AssertionError(f"Paimon Java cannot read {name}: {e.java_message}") from e


def assert_java_reads_every_snapshot(pj: PaimonOracle, warehouse: str, name: str, table: Any) -> None:
    """Paimon Java's read of every snapshot equals lakelog's read of it."""
    ids = [s.id for s in table.snapshots()]
    assert ids, "no snapshots"
    for sid in ids:
        want = arrow_to_rows(table.to_arrow(snapshot_id=sid))
        assert_same(pj.read(warehouse, name, snapshot=sid), want, f"Paimon Java reading snapshot {sid} of {name}")


# ---- Paimon Java reads what lakelog writes ---------------------------------------------------------------
def test_paimon_java_reads_lakelog_primary_key_table(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table(
        "db.pk", COMMON, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "3"}
    )
    t.write(sample(COMMON, range(0, 300), 0))
    t.write(sample(COMMON, range(150, 400), 1))  # updates half, inserts more
    t.delete(keys(range(0, 400, 7)))
    t.compact(full=True)
    t.write(sample(COMMON, range(0, 60), 2))  # level-0 files over the compacted level
    assert_java_reads_every_snapshot(paimon_java, wh, "db.pk", t)
    kinds = [r["commit_kind"] for r in paimon_java.read(wh, "db.pk$snapshots", columns=["commit_kind"])]
    assert "COMPACT" in kinds and kinds[0] == "APPEND"


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "id"}], ids=["unaware", "fixed-bucket"])
def test_paimon_java_reads_lakelog_append_table(
    paimon_java: PaimonOracle, tmp_path: Any, options: dict[str, str]
) -> None:
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table("db.log", COMMON, partition_by=["dt"], options=options)
    for v in range(3):
        t.write(sample(COMMON, range(v * 100, v * 100 + 150), v))  # overlapping ids: append keeps both
    t.compact(full=True)
    assert_java_reads_every_snapshot(paimon_java, wh, "db.log", t)


@pytest.mark.parametrize("primary_key", [["dt", "id"], None], ids=["pk", "append"])
@pytest.mark.parametrize("column", NANOS, ids=["TIMESTAMP(9)", "TIMESTAMP_LTZ(9)"])
def test_paimon_java_reads_lakelog_nanosecond_timestamps(
    paimon_java: PaimonOracle, tmp_path: Any, primary_key: Optional[list[str]], column: pa.Field
) -> None:
    """lakelog wrote INT64 nanoseconds before, which Paimon 1.3 read as milliseconds (TIMESTAMP(9),
    year +53872825) or failed on (TIMESTAMP_LTZ(9), ClassCastException); it writes INT96 now."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([*KEY, column])
    t = lakelog.Catalog(wh).create_table("db.ns", schema, primary_key=primary_key, options={"bucket": "2"}
                                         if primary_key else {})
    t.write(sample(schema, range(100), 0))
    assert_same(java_read(paimon_java, wh, "db.ns"), arrow_to_rows(t.to_arrow()), "TIMESTAMP(9) written by lakelog")


# ---- lakelog reads what Paimon Java writes ---------------------------------------------------------------
def test_lakelog_reads_paimon_java_primary_key_table(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Every common type and TIMESTAMP(9)/TIMESTAMP_LTZ(9) (which Paimon writes as INT96)."""
    wh, name = str(tmp_path / "wh"), "db.pk"
    pj = paimon_java
    pj.create_table(wh, name, WITH_NANOS, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "3"})
    pj.write(wh, name, sample(WITH_NANOS, range(0, 300), 0))
    pj.write(wh, name, sample(WITH_NANOS, range(150, 400), 1))
    pj.delete(wh, name, keys(range(0, 400, 7)))
    pj.compact(wh, name)
    pj.write(wh, name, sample(WITH_NANOS, range(0, 60), 2))
    t = lakelog.Catalog(wh).get_table(name)
    assert len(t.snapshots()) == 5
    for s in t.snapshots():
        assert_same(arrow_to_rows(t.to_arrow(snapshot_id=s.id)), pj.read(wh, name, snapshot=s.id),
                    f"lakelog reading snapshot {s.id} written by Paimon Java")
    # and what lakelog read is what was written, to the nanosecond
    want = canonical(arrow_to_rows(sample(WITH_NANOS, range(0, 60), 2)))
    assert canonical(r for r in arrow_to_rows(t.to_arrow()) if r["id"] < 60) == want


@pytest.mark.parametrize("options", [{}, {"bucket": "2", "bucket-key": "id"}], ids=["unaware", "fixed-bucket"])
def test_lakelog_reads_paimon_java_append_table(
    paimon_java: PaimonOracle, tmp_path: Any, options: dict[str, str]
) -> None:
    wh, name = str(tmp_path / "wh"), "db.log"
    paimon_java.create_table(wh, name, WITH_NANOS, partition_by=["dt"], options=options)
    for v in range(3):
        paimon_java.write(wh, name, sample(WITH_NANOS, range(v * 100, v * 100 + 150), v))
    t = lakelog.Catalog(wh).get_table(name)
    assert_same(arrow_to_rows(t.to_arrow()), paimon_java.read(wh, name), "append table written by Paimon Java")


@pytest.mark.parametrize(
    "instant",
    ["3000-01-01T00:00:00.000000001", "1000-06-01T12:00:00.500000000", "1600-01-01T00:00:01.000000000",
     "2262-04-12T00:00:00.000000000"],
)
def test_lakelog_never_misreads_paimon_timestamp_9_outside_the_nanosecond_range(
    paimon_java: PaimonOracle, tmp_path: Any, instant: str
) -> None:
    """Arrow's timestamp[ns] ends in 1677 and 2262, and pyarrow's readings of INT96 turn values outside
    into other instants (1600-01-01 00:00:01 into 2184-07-20 in both of them). lakelog reads the
    stored bytes and refuses such a value, naming the file, the column and the value."""
    wh, name = str(tmp_path / "wh"), "db.far"
    paimon_java.create_table(wh, name, [("id", "INT NOT NULL"), ("ts9", "TIMESTAMP(9)")], primary_key=["id"],
                             options={"bucket": "1"})
    rows = [{"id": 1, "ts9": instant}, {"id": 2, "ts9": "2000-01-01T00:00:00.000000007"}]
    paimon_java.write(wh, name, rows)
    assert canonical(paimon_java.read(wh, name)) == canonical(rows)
    t = lakelog.Catalog(wh).get_table(name)
    with pytest.raises(lakelog.LakelogError) as e:
        t.to_arrow()
    assert isinstance(e.value, ValueError)
    message = str(e.value)
    assert ".parquet" in message and "'ts9'" in message and instant[:19] in message, message
    assert sorted(t.to_arrow(columns=["id"]).column("id").to_pylist()) == [1, 2]  # other columns still read


# ---- both, in turns --------------------------------------------------------------------------------------
@pytest.mark.parametrize("schema", [COMMON, WITH_NANOS], ids=["common", "with-nanos"])
def test_lakelog_and_paimon_java_write_the_same_table_in_turns(
    paimon_java: PaimonOracle, tmp_path: Any, schema: pa.Schema
) -> None:
    """With nanoseconds, each side compacts files the other wrote, INT96 columns included."""
    wh, name, pj = str(tmp_path / "wh"), "db.turns", paimon_java
    t = lakelog.Catalog(wh).create_table(
        name, schema, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "4"}
    )
    t.write(sample(schema, range(0, 200), 0))
    pj.write(wh, name, sample(schema, range(100, 300), 1))
    t.delete(keys(range(0, 300, 5)))
    pj.delete(wh, name, keys(range(1, 300, 5)))
    pj.compact(wh, name)
    t.write(sample(schema, range(250, 350), 2))
    t.compact(full=True)
    pj.write(wh, name, sample(schema, range(0, 20), 3))
    t = lakelog.Catalog(wh).get_table(name)
    for s in t.snapshots():
        assert_same(pj.read(wh, name, snapshot=s.id), arrow_to_rows(t.to_arrow(snapshot_id=s.id)),
                    f"snapshot {s.id}")
    live = {r["id"] for r in arrow_to_rows(t.to_arrow(), ["id"])}
    assert live == {i for i in range(350) if i % 5 not in (0, 1) or i < 20 or i >= 250}


# ---- branches ------------------------------------------------------------------------------------------------
def test_branches_in_turns_with_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: Paimon's Java code reads and writes a branch lakelog made from a tag (its own
    ``db.t$branch_b`` identifier), lakelog reads what it wrote there, and after lakelog's
    fast-forward Paimon reads main as the branch was."""
    wh, name, pj = str(tmp_path / "wh"), "db.br", paimon_java
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(wh).create_table(
        name, schema, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )

    def batch(ids: range, v: str) -> pa.Table:
        return pa.table({"dt": [f"d{i % 2}" for i in ids], "id": list(ids), "v": [v] * len(ids)}, schema=schema)

    t.write(batch(range(0, 50), "main-1"))
    t.create_tag("base")
    t.write(batch(range(25, 75), "main-2"))
    b = t.create_branch("b", tag="base")
    b.write(batch(range(40, 60), "branch-1"))
    b.delete(pa.table({"dt": ["d0"], "id": [0]}, schema=schema.remove(2)))
    branch = f"{name}$branch_b"
    assert_same(pj.read(wh, branch), arrow_to_rows(b.to_arrow()), "Paimon Java reading the branch")
    assert_same(pj.read(wh, name), arrow_to_rows(t.to_arrow()), "Paimon Java reading main")
    pj.write(wh, branch, batch(range(55, 65), "paimon-on-branch"))
    b = lakelog.Catalog(wh).get_table(branch)
    want = {**{i: "main-1" for i in range(1, 50)}, **{i: "branch-1" for i in range(40, 60)},
            **{i: "paimon-on-branch" for i in range(55, 65)}}  # fmt: skip
    assert {r["id"]: r["v"] for r in arrow_to_rows(b.to_arrow())} == want
    t.fast_forward("b")
    assert_same(pj.read(wh, name), arrow_to_rows(b.to_arrow()), "Paimon Java reading main after fast-forward")
    b.compact(full=True)  # the branch's compaction keeps what main now reads
    assert_same(pj.read(wh, name), arrow_to_rows(b.to_arrow(snapshot_id=b.latest_snapshot().id - 1)),
                "Paimon Java reading main after the branch compacted")  # fmt: skip


def test_column_default_values_mean_the_same_to_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: a field's ``defaultValue`` (``alter_column_default_value``) that lakelog writes is
    Paimon's: Paimon parses the schema, fills a null in its own write with it, and reads lakelog's
    filled rows; lakelog reads Paimon's."""
    wh, name, pj = str(tmp_path / "wh"), "db.dv", paimon_java
    schema = pa.schema([pa.field("k", pa.int64(), False), ("s", pa.string()), ("c", pa.int32())])
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options={"bucket": "1"})
    t.alter(lakelog.UpdateColumnDefaultValue("s", "my_value"), lakelog.UpdateColumnDefaultValue("c", "5"))
    fields = pj.schema(wh, name)["fields"]
    assert [f.get("defaultValue") for f in fields] == [None, "my_value", "5"]
    t.write(pa.table({"k": [1]}, schema=pa.schema([schema.field("k")])))
    pj.write(wh, name, pa.table({"k": [2], "s": [None], "c": [None]}, schema=schema))
    want = [{"k": 1, "s": "my_value", "c": 5}, {"k": 2, "s": "my_value", "c": 5}]
    assert_same(pj.read(wh, name), want, "Paimon Java's read")
    assert arrow_to_rows(lakelog.Catalog(wh).get_table(name).to_arrow()) == want


@pytest.mark.parametrize("options", [{"bucket": "2"}, {"bucket": "2", "deletion-vectors.enabled": "true"},
                                     {"bucket": "-1"}], ids=["fixed", "dv", "dynamic"])  # fmt: skip
def test_paimon_java_reads_rollbacks_to_as_latest(paimon_java: PaimonOracle, tmp_path: Any, options: dict) -> None:
    """Issue 24: after lakelog's rollback_to_as_latest (an OVERWRITE snapshot re-adding the target's
    files with its index), Paimon's Java code reads every snapshot as lakelog does and writes on."""
    wh, name, pj = str(tmp_path / "wh"), "db.rb", paimon_java
    t = lakelog.Catalog(wh).create_table(name, COMMON, primary_key=["dt", "id"], partition_by=["dt"],
                                         options=options)  # fmt: skip
    t.write(sample(COMMON, range(0, 100), 0))
    t.write(sample(COMMON, range(50, 150), 1))
    t.delete(keys(range(0, 150, 7)))
    t.compact(full=True)
    t.rollback_to_as_latest(1)
    pj.write(wh, name, sample(COMMON, range(90, 110), 2))
    t.rollback_to_as_latest(3)
    t.compact(full=True)
    t.rollback_to_as_latest(t.latest_snapshot().id)  # nothing to change: the same files again
    t = lakelog.Catalog(wh).get_table(name)
    dv = "deletion-vectors.enabled" in options
    compared = 0
    for s in t.snapshots():
        if dv and 0 in t.files(s.id).column("level").to_pylist():
            continue  # Paimon reads no level-0 file of a deletion-vector table (see the test below)
        want = arrow_to_rows(t.to_arrow(snapshot_id=s.id))
        assert_same(pj.read(wh, name, snapshot=s.id), want, f"Paimon Java reading snapshot {s.id}")
        compared += 1
    assert compared >= (4 if dv else 8)
    assert_same(pj.read(wh, name), arrow_to_rows(t.to_arrow(snapshot_id=3)), "the latest, as snapshot 3")


def test_paimon_java_reads_the_fallback_branch_as_lakelog_does(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: ``scan.fallback-branch`` set by lakelog; Paimon's Java reader fills the same
    missing partitions from the branch (whose bucket layout differs) as lakelog's."""
    wh, name, pj = str(tmp_path / "wh"), "db.fb", paimon_java
    t = lakelog.Catalog(wh).create_table(name, COMMON, primary_key=["dt", "id"], partition_by=["dt"],
                                         options={"bucket": "2"})  # fmt: skip
    b = t.create_branch("stream")
    b.alter(lakelog.SetOption("bucket", "3"))
    b.write(sample(COMMON, range(0, 120), 0))
    t.alter(lakelog.SetOption("scan.fallback-branch", "stream"))
    t = lakelog.Catalog(wh).get_table(name)
    t.write(sample(COMMON, range(0, 120, 3), 1))  # some partitions only
    ours = arrow_to_rows(t.to_arrow())
    assert any(s.branch == "stream" for s in t.plan()) and any(s.branch is None for s in t.plan())
    assert_same(pj.read(wh, name), ours, "Paimon Java reading with the fallback branch")


# ---- set unions: rbm32, hll_sketch, theta_sketch ---------------------------------------------------------
def _sets_by_key(rows: list[dict]) -> dict[int, tuple[list[int], int, int]]:
    """Each key's bitmap as values and its two sketches' estimates, rounded (exact at these sizes)."""
    import base64

    from lakelog import sketches as sk

    def raw(v: Any) -> Optional[bytes]:
        return None if v is None else base64.b64decode(v) if isinstance(v, str) else v

    out = {}
    for r in rows:
        bm, uv, th = raw(r["bm"]), raw(r["uv"]), raw(r["th"])
        out[r["id"]] = (sk.bitmap32_values(bm).tolist() if bm is not None else [],
                        round(sk.hll_estimate(uv)) if uv is not None else 0,
                        round(sk.theta_estimate(th)) if th is not None else 0)  # fmt: skip
    return out


def test_set_unions_merge_the_same_in_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: ``rbm32``, ``hll_sketch`` and ``theta_sketch`` values written by both sides, united by
    both sides' merges and compactions in turns: each side reads the other's unions, every key holds
    the union of all its sets, and a bitmap united by Paimon has the very bytes lakelog writes."""
    from lakelog import sketches as sk

    wh, name, pj = str(tmp_path / "wh"), "db.sets", paimon_java
    schema = pa.schema([pa.field("id", pa.int32(), False), ("bm", pa.binary()), ("uv", pa.binary()),
                        ("th", pa.binary())])  # fmt: skip
    options = {"bucket": "1", "merge-engine": "aggregation", "fields.bm.aggregate-function": "rbm32",
               "fields.uv.aggregate-function": "hll_sketch", "fields.th.aggregate-function": "theta_sketch"}
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["id"], options=options)
    rnd = random.Random(24)
    union: dict[int, set[int]] = {}

    def batch(ids: range) -> pa.Table:
        rows: dict[str, list[Any]] = {"id": [], "bm": [], "uv": [], "th": []}
        for i in ids:
            # dense runs and scattered values, so bitmaps hold run, array and bitmap containers
            vals = set(rnd.sample(range(0, 70_000), 5)) | set(range(rnd.randrange(9) * 1000, 9000))
            if rnd.random() < 0.2:
                vals = set()  # a null: the key's sets stay as they are
            union.setdefault(i, set()).update(vals)
            small = sorted(vals)[:4] + sorted(vals)[-3:]  # sketches: exact at these sizes
            for c, v in (("bm", sk.bitmap32(sorted(vals))), ("uv", sk.hll_sketch(small)),
                         ("th", sk.theta_sketch(small))):  # fmt: skip
                rows[c].append(v if vals else None)
            rows["id"].append(i)
        return pa.table(rows, schema=schema)

    sketched: dict[int, set[int]] = {}

    def expect() -> dict[int, tuple[list[int], int, int]]:
        return {i: (sorted(v), len(sketched.get(i, ())), len(sketched.get(i, ()))) for i, v in union.items()}

    def write(side: str, ids: range) -> None:
        b = batch(ids)
        for r in b.to_pylist():
            if r["uv"] is not None:
                vals = sk.bitmap32_values(r["bm"]).tolist()
                sketched.setdefault(r["id"], set()).update(vals[:4] + vals[-3:])
        if side == "lakelog":
            lakelog.Catalog(wh).get_table(name).write(b)
        else:
            pj.write(wh, name, b)

    def check(what: str) -> None:
        ours = _sets_by_key(arrow_to_rows(lakelog.Catalog(wh).get_table(name).to_arrow()))
        java = _sets_by_key(pj.read(wh, name))
        assert ours == expect(), f"lakelog's read {what}"
        assert java == expect(), f"Paimon Java's read {what}"

    write("lakelog", range(0, 30))
    write("java", range(0, 30, 2))
    check("after one write by each side")
    pj.compact(wh, name, full=True)  # Paimon unites lakelog's values
    write("lakelog", range(10, 40))
    t = lakelog.Catalog(wh).get_table(name)
    t.compact(full=True)  # lakelog unites Paimon's unions
    check("after both sides compacted")
    write("java", range(0, 40, 3))
    pj.compact(wh, name, full=True)
    check("after Paimon compacted lakelog's unions")
    for r in pj.read(wh, name):
        bm = r["bm"]
        if bm is not None:
            import base64

            assert base64.b64decode(bm) == sk.bitmap32(sorted(union[r["id"]])), r["id"]


def test_rbm64_bitmaps_merge_the_same_in_paimon_java(paimon_14: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: ``rbm64`` values (the Java library's dump of a ``Roaring64Bitmap``) written by both
    sides and united by both sides' merges and compactions in turns. The sets reach over the whole
    range of a long, so the trees hold every node type (up to 80 keys differing in their first byte)
    and leaves at every depth, and the containers are runs, arrays and bitmaps."""
    from lakelog import sketches as sk

    wh, name, pj = str(tmp_path / "wh"), "db.rbm64", paimon_14
    schema = pa.schema([pa.field("id", pa.int32(), False), ("b", pa.binary())])
    options = {"bucket": "1", "merge-engine": "aggregation", "fields.b.aggregate-function": "rbm64"}
    lakelog.Catalog(wh).create_table(name, schema, primary_key=["id"], options=options)
    rnd = random.Random(64)
    union: dict[int, set[int]] = {}

    def values() -> set[int]:
        base = rnd.choice([0, -(2**40), 2**33 + 7 * 2**16, 2**62])
        dense = set(range(base + rnd.randrange(9) * 1000, base + 9000))  # a run, or a bitmap container
        scattered = {rnd.randrange(-(2**63), 2**63) for _ in range(rnd.randrange(80))}
        near = {base + rnd.randrange(2**20) for _ in range(rnd.randrange(30))}  # keys sharing a prefix
        return set() if rnd.random() < 0.15 else dense | scattered | near

    def write(side: str, ids: range) -> None:
        data: dict[str, list[Any]] = {"id": [], "b": []}
        for i in ids:
            vals = values()
            union.setdefault(i, set()).update(vals)
            data["id"].append(i)
            data["b"].append(sk.bitmap64(sorted(vals)) if vals else None)
        batch = pa.table(data, schema=schema)
        if side == "lakelog":
            lakelog.Catalog(wh).get_table(name).write(batch)
        else:
            pj.write(wh, name, batch)

    def sets(rows: list[dict]) -> dict[int, list[int]]:
        import base64

        def raw(v: Any) -> bytes:
            return base64.b64decode(v) if isinstance(v, str) else v

        return {r["id"]: [] if r["b"] is None else sk.bitmap64_values(raw(r["b"])).tolist() for r in rows}

    def check(what: str) -> None:
        want = {i: sorted(v) for i, v in union.items()}
        assert sets(arrow_to_rows(lakelog.Catalog(wh).get_table(name).to_arrow())) == want, f"lakelog's read {what}"
        assert sets(pj.read(wh, name)) == want, f"Paimon Java's read {what}"

    write("lakelog", range(0, 20))
    write("java", range(0, 20, 2))
    check("after one write by each side")  # Paimon's merge read unites lakelog's values
    pj.compact(wh, name, full=True)  # its files now hold Java's own serialization
    write("lakelog", range(5, 25))
    lakelog.Catalog(wh).get_table(name).compact(full=True)  # lakelog unites Java's bitmaps
    check("after both sides compacted")
    write("java", range(0, 25, 3))
    pj.compact(wh, name, full=True)
    check("after Paimon compacted lakelog's unions")


def _in_turns(
    pj: PaimonOracle, wh: str, name: str, write: Callable[[str], None], check: Callable[[list[dict], str], None]
) -> None:
    """Each side (``write("lakelog")``, ``write("java")``) writes and both reads are checked; then
    each side compacts between two more writes, and both reads are checked again."""
    def both(after: str) -> None:
        check(pj.read(wh, name), f"Paimon Java's read{after}")
        check(arrow_to_rows(lakelog.Catalog(wh).get_table(name).to_arrow()), f"lakelog's read{after}")

    write("lakelog")
    write("java")
    both("")
    pj.compact(wh, name, full=True)
    write("lakelog")
    lakelog.Catalog(wh).get_table(name).compact(full=True)
    write("java")
    both(" after both compacted")


def test_nested_update_merges_the_same_in_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: ``nested_update`` with and without ``nested-key``, written and compacted by both
    sides in turns. Without a key the nested rows keep their order; with one, Paimon's rows come in
    its hash map's order, so those are compared as sets."""
    wh, name, pj = str(tmp_path / "wh"), "db.nested", paimon_java
    row = pa.struct([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    schema = pa.schema([pa.field("k", pa.int32(), False), ("keyed", pa.list_(row)), ("log", pa.list_(row))])
    options = {"bucket": "1", "merge-engine": "aggregation", "fields.keyed.aggregate-function": "nested_update",
               "fields.keyed.nested-key": "id", "fields.log.aggregate-function": "nested_update"}
    lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options=options)
    rnd = random.Random(7)
    keyed: dict[int, dict[int, dict]] = {}
    log: dict[int, list[dict]] = {}
    written: set[int] = set()

    def write(side: str) -> None:
        data: dict[str, list[Any]] = {"k": [], "keyed": [], "log": []}
        for k in rnd.sample(range(12), 8):
            # distinct ids within one array: Paimon 1.3 keeps a key's first array as written, repeats
            # and all, where later versions (and lakelog) keep one row per nested key
            ids = rnd.sample(range(5), rnd.randrange(4))
            nested = [{"id": i, "name": f"{side}-{rnd.randrange(100)}"} for i in ids]
            value = None if rnd.random() < 0.2 else nested
            data["k"].append(k)
            data["keyed"].append(value)
            data["log"].append(value)
            written.add(k)
            if value is not None:
                kept = keyed.setdefault(k, {})
                for r in value:
                    kept[r["id"]] = r
                log.setdefault(k, []).extend(value)
        batch = pa.table(data, schema=schema)
        if side == "lakelog":
            lakelog.Catalog(wh).get_table(name).write(batch)
        else:
            pj.write(wh, name, batch)

    def check(got: list[dict], what: str) -> None:
        by_key = {r["k"]: r for r in got}
        assert sorted(by_key) == sorted(written), what
        for k in written:
            if k not in keyed:  # only nulls were written
                assert by_key[k]["keyed"] is None and by_key[k]["log"] is None, (what, k)
                continue
            assert sorted(by_key[k]["keyed"], key=repr) == sorted(keyed[k].values(), key=repr), (what, k)
            assert by_key[k]["log"] == log[k], (what, k)

    _in_turns(pj, wh, name, write, check)


def test_nested_partial_update_merges_the_same_in_paimon_java(paimon_14: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: ``nested_partial_update`` (Paimon 1.4): nested rows updated field by field, written
    and compacted by both sides in turns (Paimon's rows in hash map order: compared as sets)."""
    wh, name, pj = str(tmp_path / "wh"), "db.npu", paimon_14
    row = pa.struct([pa.field("id", pa.int64()), pa.field("a", pa.string()), pa.field("b", pa.int64())])
    schema = pa.schema([pa.field("k", pa.int32(), False), ("sub", pa.list_(row))])
    options = {"bucket": "1", "merge-engine": "aggregation", "fields.sub.aggregate-function": "nested_partial_update",
               "fields.sub.nested-key": "id"}
    lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options=options)
    rnd = random.Random(11)
    want: dict[int, dict[int, dict]] = {}

    def write(side: str) -> None:
        data: dict[str, list[Any]] = {"k": [], "sub": []}
        for k in rnd.sample(range(10), 6):
            nested = []
            for i in rnd.sample(range(4), rnd.randrange(1, 4)):
                r = {"id": i, "a": rnd.choice([None, f"{side}{rnd.randrange(9)}"]),
                     "b": rnd.choice([None, rnd.randrange(100)])}  # fmt: skip
                nested.append(r)
                held = want.setdefault(k, {}).setdefault(i, {"id": i, "a": None, "b": None})
                held.update({c: v for c, v in r.items() if v is not None})
            data["k"].append(k)
            data["sub"].append(nested)
        batch = pa.table(data, schema=schema)
        if side == "lakelog":
            lakelog.Catalog(wh).get_table(name).write(batch)
        else:
            pj.write(wh, name, batch)

    def check(got: list[dict], what: str) -> None:
        assert {r["k"]: sorted(r["sub"], key=repr) for r in got} == {
            k: sorted(v.values(), key=repr) for k, v in want.items()}, what

    _in_turns(pj, wh, name, write, check)


def test_merge_map_with_keytime_merges_the_same_in_paimon_java(paimon_14: PaimonOracle, tmp_path: Any) -> None:
    """``merge_map_with_keytime`` (Paimon 1.4), written and compacted by both sides in turns: removals
    (a null value), null timestamps, ties, and timestamps that order differently as strings and as
    numbers ("50" > "100": Paimon compares them as strings, whatever its page's example says)."""
    wh, name, pj = str(tmp_path / "wh"), "db.mmk", paimon_14
    entry = pa.struct([pa.field("value", pa.string()), pa.field("ts", pa.string())])
    schema = pa.schema([pa.field("k", pa.int32(), False), ("m", pa.map_(pa.string(), entry))])
    options = {"bucket": "1", "merge-engine": "aggregation",
               "fields.m.aggregate-function": "merge_map_with_keytime", "fields.m.ts-field": "ts"}
    lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options=options)
    rnd = random.Random(5)
    fold = MergeMapWithKeyTime("MAP", {"ts_field": "ts"})
    want: dict[int, Any] = {}

    def write(side: str) -> None:
        data: dict[str, list[Any]] = {"k": [], "m": []}
        for k in rnd.sample(range(10), 7):
            m = None if rnd.random() < 0.1 else [
                (key, None if rnd.random() < 0.15 else {
                    "value": f"{side}{rnd.randrange(9)}",
                    "ts": None if rnd.random() < 0.1 else rnd.choice(["1", "10", "100", "2", "50", "9"])})
                for key in rnd.sample("abcd", rnd.randrange(4))]
            data["k"].append(k)
            data["m"].append(m)
            want[k] = fold.agg(want.get(k), m)
        batch = pa.table(data, schema=schema)
        if side == "lakelog":
            lakelog.Catalog(wh).get_table(name).write(batch)
        else:
            pj.write(wh, name, batch)

    def check(got: list[dict], what: str) -> None:
        by_key = {r["k"]: r["m"] for r in got}
        assert sorted(by_key) == sorted(want), what
        for k, m in want.items():
            assert (None if m is None else dict(m)) == (None if by_key[k] is None else dict(by_key[k])), (what, k)

    _in_turns(pj, wh, name, write, check)


# ---- deletion vectors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bitmap64", ["false", "true"], ids=["32-bit", "64-bit"])
def test_deletion_vector_tables_in_turns(paimon_java: PaimonOracle, tmp_path: Any, bitmap64: str) -> None:
    """A merge-on-write table (``deletion-vectors.enabled``) written in turns by lakelog and Paimon
    Java: each marks rows in files the other wrote, compacts the other's level 0, and reads the
    other's vectors; every snapshot after a compaction reads the same on both sides (Paimon skips
    level 0 until it is compacted, lakelog merges it: APPEND snapshots are compared after the
    COMPACT that follows them)."""
    wh, name, pj = str(tmp_path / "wh"), "db.dv", paimon_java
    options = {"bucket": "2", "deletion-vectors.enabled": "true", "deletion-vectors.bitmap64": bitmap64}
    t = lakelog.Catalog(wh).create_table(name, COMMON, primary_key=["dt", "id"], partition_by=["dt"],
                                         options=options)
    t.write(sample(COMMON, range(0, 300), 0))
    t.compact(full=True)
    pj.write(wh, name, sample(COMMON, range(100, 200), 1))  # Paimon marks rows of lakelog's files
    t.write(sample(COMMON, range(150, 260), 2))  # and lakelog rows of Paimon's
    t.delete(keys(range(0, 300, 7)))
    pj.delete(wh, name, keys(range(3, 300, 11)))
    t.write(sample(COMMON, range(290, 320), 3))
    pj.compact(wh, name, full=False)
    pj.write(wh, name, sample(COMMON, range(0, 40), 4))
    t = lakelog.Catalog(wh).get_table(name)
    kinds = [e.index_file.index_type for e in t.store.index_entries(t.latest_snapshot())]
    assert kinds and set(kinds) == {"DELETION_VECTORS"}
    for s in t.snapshots():
        if s.commit_kind == "COMPACT":
            assert_same(pj.read(wh, name, snapshot=s.id), arrow_to_rows(t.to_arrow(snapshot_id=s.id)),
                        f"snapshot {s.id}")
    # $table_indexes (issue 24) lists the same index files with the same ranges as Paimon's
    ours = arrow_to_rows(system_table(t.store, "table_indexes"))
    theirs = pj.read(wh, f"{name}$table_indexes")
    assert sorted(ours, key=lambda r: r["file_name"]) == sorted(theirs, key=lambda r: r["file_name"]), (ours, theirs)
    live = {r["id"] for r in arrow_to_rows(t.to_arrow(), ["id"])}
    deleted = {i for i in range(300) if i % 7 == 0} | {i for i in range(3, 300, 11)}
    assert live == (set(range(300)) - deleted) | set(range(290, 320)) | set(range(40))


# ---- file indexes ----------------------------------------------------------------------------------------
INDEXED = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("n", pa.int32()),
                     ("ts", pa.timestamp("us")), ("f", pa.float64())])


def _indexed_batch(i: int) -> pa.Table:
    ids = list(range(i * 10, i * 10 + 10))
    return pa.table({"id": ids, "name": [f"user-{i}-{j}" for j in range(10)], "n": [i] * 10,
                     "ts": [dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=7 * k) for k in ids],
                     "f": [k / 3 for k in ids]}, schema=INDEXED)


@pytest.mark.parametrize("where", ["manifest", "beside"])
def test_bloom_filter_file_indexes_are_the_same_bytes_and_both_sides_skip_with_them(
    paimon_java: PaimonOracle, tmp_path: Any, where: str
) -> None:
    """The same rows give byte-identical bloom filters (every type's hash, the filter's size and
    bits) in containers that hold the same (Paimon lists the columns in its hash map's order);
    Paimon plans one file for a point query on lakelog's table (embedded indexes are read when
    planning), and lakelog one file on Paimon's, embedded or beside the data file."""
    from lakelog.connector.format.file_index import decode_container
    from lakelog.connector.table.scan import plan_splits

    wh, pj = str(tmp_path / "wh"), paimon_java
    opts = {"bucket": "1", "bucket-key": "id", "file-index.bloom-filter.columns": "name,n,ts,f",
            **{f"file-index.bloom-filter.{c}.items": "50" for c in ("name", "n", "ts", "f")},
            "file-index.in-manifest-threshold": "64 kb" if where == "manifest" else "1 b"}
    ours = lakelog.Catalog(wh).create_table("db.ours", INDEXED, options=opts)
    pj.create_table(wh, "db.theirs", INDEXED, options=opts)
    ours.write(_indexed_batch(0))
    pj.write(wh, "db.theirs", _indexed_batch(0))
    theirs = lakelog.Catalog(wh).get_table("db.theirs")

    def index_of(t: lakelog.Table) -> list[dict]:  # type: ignore[type-arg]
        out = []
        for f in sorted(plan_splits(t.store, t.latest_snapshot())[0].files, key=lambda f: f.min_sequence_number):
            if f.embedded_file_index is not None:
                data = f.embedded_file_index
            else:
                (extra,) = f.extra_files
                data = t.store.file_io.read_bytes(t.store.data_file_path(b"", 0, extra))
            out.append(decode_container(data, f.file_name))
        return out

    assert index_of(ours) == index_of(theirs) and len(index_of(ours)) == 1
    for i in range(1, 8):  # (Paimon's append writer compacts its small files on the way)
        ours.write(_indexed_batch(i))
        pj.write(wh, "db.theirs", _indexed_batch(i))
    theirs = lakelog.Catalog(wh).get_table("db.theirs")
    if where == "manifest":  # Paimon skips by separate index files at read time, not when planning
        assert pj.plan_files(wh, "db.ours", "name", ["user-5-5"]) == 1
        assert pj.plan_files(wh, "db.ours", "n", [2, 6]) == 2
    every = sum(len(s.files) for s in plan_splits(theirs.store, theirs.latest_snapshot()))
    for column, value in (("name", "user-5-5"), ("n", 6), ("f", 67 / 3), ("name", "nobody")):
        expr = pa.compute.field(column) == value
        got = sum(len(s.files) for s in plan_splits(theirs.store, theirs.latest_snapshot(), filter=expr))
        assert got < every and got == (0 if value == "nobody" else 1), (column, got, every)
        assert ours.to_arrow(filter=expr).num_rows == theirs.to_arrow(filter=expr).num_rows
    assert_same(pj.read(wh, "db.ours"), arrow_to_rows(ours.to_arrow()), "lakelog's indexed table")


BITMAPPED = pa.schema([pa.field("id", pa.int64(), False), ("city", pa.string()), ("n", pa.int32()),
                       ("day", pa.date32()), ("ts", pa.timestamp("us")), ("ok", pa.bool_())])


def _bitmapped_batch(i: int) -> pa.Table:
    """Few cities per batch, but every batch's span the others' ("a".."z"): only an index skips."""
    ids = list(range(i * 50, i * 50 + 50))
    return pa.table({"id": ids, "city": ["a", *(f"c{i % 5}-{j % 4}" for j in range(1, 49)), "z"],
                     "n": [None if j % 9 == 0 else (i % 3) * 10 + j % 2 for j in range(50)],
                     "day": [19000 + j % 3 for j in range(50)],
                     "ts": [dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=j % 6) for j in range(50)],
                     "ok": [j % 2 == 0 for j in range(50)]}, schema=BITMAPPED)


@pytest.mark.parametrize("version", ["1", "2"])
def test_bitmap_file_indexes_name_the_same_rows_and_both_sides_skip_with_them(
    paimon_java: PaimonOracle, tmp_path: Any, version: str
) -> None:
    """Paimon's bitmaps and lakelog's of the same rows name the same rows for every value of every
    type (the bytes differ: Paimon lays the bitmaps out in its hash map's order); Paimon plans only
    the files a point query can match on lakelog's table (embedded indexes are read when planning),
    and lakelog only those on Paimon's."""
    from lakelog.connector.format.bitmap_index import BITMAP, BitmapIndex
    from lakelog.connector.format.file_index import decode_container
    from lakelog.connector.table.scan import plan_splits

    wh, pj = str(tmp_path / "wh"), paimon_java
    cols = ("city", "n", "day", "ts", "ok")
    opts = {"bucket": "1", "bucket-key": "id", "file-index.bitmap.columns": ",".join(cols),
            **{f"file-index.bitmap.{c}.version": version for c in cols},
            "file-index.bitmap.city.index-block-size": "64 b",  # several index blocks (version 2)
            "file-index.in-manifest-threshold": "64 kb"}
    ours = lakelog.Catalog(wh).create_table("db.ours", BITMAPPED, options=opts)
    pj.create_table(wh, "db.theirs", BITMAPPED, options=opts)
    ours.write(_bitmapped_batch(0))
    pj.write(wh, "db.theirs", _bitmapped_batch(0))
    theirs = lakelog.Catalog(wh).get_table("db.theirs")

    def bitmaps(t: lakelog.Table) -> dict[str, dict[Any, list[int]]]:
        (f,) = plan_splits(t.store, t.latest_snapshot())[0].files
        assert f.embedded_file_index is not None
        container = decode_container(f.embedded_file_index, f.file_name)
        out = {}
        for c in cols:
            body = container[c][BITMAP]
            assert body is not None and body[0] == int(version)
            ix = BitmapIndex.from_bytes(body, BITMAPPED.field(c).type, f.file_name)
            out[c] = {k: ix._bitmap(e).tolist() for k, e in ix.entries.items()}
            out[c][None] = ix._bitmap(ix.null_entry).tolist() if ix.null_entry else []
        return out

    assert bitmaps(ours) == bitmaps(theirs)
    for i in range(1, 10):  # (Paimon's append writer compacts its small files on the way)
        ours.write(_bitmapped_batch(i))
        pj.write(wh, "db.theirs", _bitmapped_batch(i))
    theirs = lakelog.Catalog(wh).get_table("db.theirs")
    assert pj.plan_files(wh, "db.ours", "city", ["c3-1"]) == 2  # batches 3 and 8
    assert pj.plan_files(wh, "db.ours", "city", ["c3-1", "c4-2"]) == 4
    assert pj.plan_files(wh, "db.ours", "n", [21]) == 3  # batches 2, 5, 8
    assert pj.plan_files(wh, "db.ours", "city", ["nowhere"]) == 0
    every = sum(len(s.files) for s in plan_splits(theirs.store, theirs.latest_snapshot()))
    for column, value in (("city", "c3-1"), ("n", 21), ("city", "nowhere")):
        expr = pa.compute.field(column) == value
        got = sum(len(s.files) for s in plan_splits(theirs.store, theirs.latest_snapshot(), filter=expr))
        assert got < every or every == 1, (column, got, every)
        assert ours.to_arrow(filter=expr).num_rows == theirs.to_arrow(filter=expr).num_rows
    assert ours.to_arrow(filter="city = 'c3-1'").num_rows == 24
    assert_same(pj.read(wh, "db.ours"), arrow_to_rows(ours.to_arrow()), "lakelog's bitmap-indexed table")


# ---- buckets and changelogs ------------------------------------------------------------------------------
BUCKET_KEYS = {
    "string-bigint": [pa.field("k", pa.string(), False), pa.field("id", pa.int64(), False)],
    "int": [pa.field("k", pa.int32(), False)],
    "decimal-10": [pa.field("k", pa.decimal128(10, 2), False)],
    "decimal-38": [pa.field("k", pa.decimal128(38, 10), False)],
    "date-bool-double": [pa.field("k", pa.date32(), False), pa.field("b", pa.bool_(), False),
                         pa.field("f", pa.float64(), False)],
    "timestamps": [pa.field("k", pa.timestamp("ms"), False), pa.field("u", pa.timestamp("us"), False),
                   pa.field("n", pa.timestamp("ns"), False)],
    "binary": [pa.field("k", pa.binary(), False), pa.field("b4", pa.binary(4), False)],
}


@pytest.mark.parametrize("case", list(BUCKET_KEYS))
def test_every_key_is_in_the_bucket_paimon_java_assigns(paimon_java: PaimonOracle, tmp_path: Any, case: str) -> None:
    wh, name = str(tmp_path / "wh"), "db.b"
    schema = pa.schema([*BUCKET_KEYS[case], pa.field("v", pa.int32())])
    key_names = [f.name for f in BUCKET_KEYS[case]]
    data = sample(schema, range(400), 0)  # key fields are NOT NULL: no null keys
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=key_names, options={"bucket": "7"})
    t.write(data)
    stored: list[tuple[dict, int]] = []
    root = os.path.join(wh, "db.db", "b")
    for d in sorted(os.listdir(root)):
        if d.startswith("bucket-"):
            for f in os.listdir(os.path.join(root, d)):
                part = pq.read_table(os.path.join(root, d, f), columns=key_names)
                stored += [(r, int(d[len("bucket-"):])) for r in arrow_to_rows(part)]
    assert len(stored) > 300 and len({b for _, b in stored}) == 7
    java = paimon_java.buckets(wh, name, [r for r, _ in stored])
    wrong = [(r, b, j) for (r, b), j in zip(stored, java) if b != j]
    assert not wrong, f"{len(wrong)} keys in another bucket than Paimon's, e.g. (key, lakelog, Paimon) {wrong[:3]}"


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_paimon_java_streams_the_changelog_lakelog_reports(
    paimon_java: PaimonOracle, tmp_path: Any, producer: str
) -> None:
    wh, name = str(tmp_path / "wh"), "db.cl"
    t = lakelog.Catalog(wh).create_table(
        name, COMMON, primary_key=["dt", "id"], partition_by=["dt"],
        options={"bucket": "2", "changelog-producer": producer},
    )
    first = t.write(sample(COMMON, range(0, 100), 0))
    t.write(sample(COMMON, range(50, 150), 1))
    t.delete(keys(range(0, 150, 4)))
    if producer == "full-compaction":
        t.compact(full=True)
    assert first is not None
    java = paimon_java.changelog(wh, name, from_snapshot=first + 1)
    for r in java:
        r["rowkind"] = r.pop("_rowkind")
        del r["_snapshot"]
    assert java, "Paimon's streaming read saw no changes"
    assert_same(java, arrow_to_rows(t.changes(first)), f"changelog-producer={producer}")


# ---- the oracle's own command line ---------------------------------------------------------------------
def test_oracle_command_line_reads_and_writes_like_the_server(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """``java PaimonOracle create|write|read|buckets`` (one JVM each) agree with the served commands."""
    import json
    import subprocess

    from .paimon_java.oracle import jdk_tool, oracle_classpath

    wh = str(tmp_path / "wh")
    cmd = [jdk_tool("java") or "java", "-cp", oracle_classpath(), "PaimonOracle"]
    schema = {"fields": [{"name": "id", "type": "BIGINT"}, {"name": "ts", "type": "TIMESTAMP(9)"}],
              "primaryKeys": ["id"], "options": {"bucket": "3"}}
    rows = [{"id": i, "ts": f"2024-01-02T03:04:05.{i:09d}"} for i in range(20)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def run(*args: str) -> list[dict]:
        res = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        return [json.loads(line) for line in res.stdout.splitlines()]

    assert run("create", wh, "db.cli", json.dumps(schema))[0]["primaryKeys"] == ["id"]
    assert run("write", wh, "db.cli", str(tmp_path / "rows.jsonl")) == [{"snapshot": 1}]
    assert canonical(run("read", wh, "db.cli", "--snapshot", "1")) == canonical(rows)
    assert canonical(paimon_java.read(wh, "db.cli")) == canonical(rows)
    cli_buckets = run("buckets", wh, "db.cli", str(tmp_path / "rows.jsonl"))
    assert [b["_bucket"] for b in cli_buckets] == paimon_java.buckets(wh, "db.cli", rows)
    bad = subprocess.run([*cmd, "read", wh, "db.missing"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "does not exist" in bad.stderr


# ---- the physical layout: field ids, statistics, every timestamp precision ----------------------------
PRECISIONS = [
    ("id", "INT NOT NULL"),
    *[(f"ts{p}", f"TIMESTAMP({p})") for p in range(10)],
    *[(f"ltz{p}", f"TIMESTAMP({p}) WITH LOCAL TIME ZONE") for p in range(10)],
    ("arr4", {"type": "ARRAY", "element": "TIMESTAMP(4)"}),
    ("row", {"type": "ROW", "fields": [{"id": 0, "name": "a", "type": "TIMESTAMP(8)"},
                                       {"id": 1, "name": "b", "type": "TIMESTAMP(2)"},
                                       {"id": 2, "name": "c", "type": "TIMESTAMP(0)"}]}),
    ("m", {"type": "MAP", "key": "STRING NOT NULL", "value": "TIMESTAMP(7)"}),
]
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _timestamp_value(rnd: random.Random, unit: str, precision: int, far: bool) -> int:
    """A value of TIMESTAMP(precision) in Arrow ``unit``: digits to the precision only; years 0001..9999
    when ``far`` (and the unit can hold them), else 1685..2255."""
    lo, hi = (-62135596800, 253402300799) if far else (-9 * 10**9, 9 * 10**9)
    seconds = rnd.choice([lo, hi, -1, 0]) if rnd.random() < 0.1 else rnd.randrange(lo, hi + 1)
    digits = rnd.randrange(10**precision) * 10 ** (9 - precision)  # nanoseconds within the second
    return (seconds * 10**9 + digits) * _PER_SECOND[unit] // 10**9


def precision_rows(schema: pa.Schema, ids: range, version: int) -> pa.Table:
    """Rows for lakelog's Arrow schema of PRECISIONS (the precision is in the column name)."""

    def value(rnd: random.Random, name: str, t: pa.DataType) -> Any:
        if rnd.random() < 0.1:
            return None
        if pa.types.is_timestamp(t):
            precision = int(name[-1]) if name[-1].isdigit() else {"a": 8, "b": 2, "c": 0}[name]
            return _timestamp_value(rnd, t.unit, precision, far=t.unit != "ns")
        if pa.types.is_list(t):
            return [value(rnd, "arr4", t.value_type) for _ in range(rnd.randrange(3))]
        if pa.types.is_struct(t):
            return {f.name: value(rnd, f.name, f.type) for f in t}
        assert pa.types.is_map(t)
        return [(f"k{j}", value(rnd, "m7", t.item_type)) for j in range(rnd.randrange(3))]

    def to_arrow(values: list[Any], t: pa.DataType) -> pa.Array:
        if pa.types.is_timestamp(t):
            return pa.array(values, pa.int64()).view(t)
        if pa.types.is_list(t):
            flat = [x for v in values if v is not None for x in v]
            offsets = [0]
            for v in values:
                offsets.append(offsets[-1] + len(v or []))
            mask = pa.array([v is None for v in values])
            return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), to_arrow(flat, t.value_type), mask=mask)
        if pa.types.is_struct(t):
            children = [to_arrow([None if v is None else v[f.name] for v in values], f.type) for f in t]
            return pa.StructArray.from_arrays(children, fields=list(t), mask=pa.array([v is None for v in values]))
        if not pa.types.is_map(t):
            return pa.array(values, t)
        keys = [k for v in values if v is not None for k, _ in v]
        items = to_arrow([x for v in values if v is not None for _, x in v], t.item_type)
        entries = pa.StructArray.from_arrays([pa.array(keys, pa.string()), items], fields=[t.key_field, t.item_field])
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + len(v or []))
        validity = pa.array([v is not None for v in values]).buffers()[1]
        return pa.Array.from_buffers(t, len(values), [validity, pa.array(offsets, pa.int32()).buffers()[1]],
                                     children=[entries])

    rows: dict[str, list[Any]] = {f.name: [] for f in schema}
    for i in ids:
        rnd = random.Random(i * 1000 + version)
        for f in schema:
            rows[f.name].append(i if f.name == "id" else value(rnd, f.name, f.type))
    return pa.Table.from_arrays([to_arrow(rows[f.name], f.type) for f in schema], schema=schema)


def parquet_leaves(path: str) -> dict[str, tuple[str, Optional[str], bool]]:
    """Leaf column path -> (physical type, logical annotation, has min/max statistics)."""
    f = pq.ParquetFile(path)
    rg = f.metadata.row_group(0)
    out = {}
    for i in range(len(f.schema)):
        c = f.schema.column(i)
        logical = str(c.logical_type)
        stats = rg.column(i).statistics
        out[c.path] = (c.physical_type, None if logical == "None" else logical, bool(stats and stats.has_min_max))
    return out


def parquet_field_ids(path: str) -> dict[str, int]:
    """Named field path -> Parquet field id, nested fields included."""
    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        name = prefix + f.name
        out[name] = int((f.metadata or {}).get(b"PARQUET:field_id", b"-1"))
        t = f.type
        children = [t.value_field] if pa.types.is_list(t) else [t.key_field, t.item_field] if pa.types.is_map(t) \
            else list(t) if pa.types.is_struct(t) else []
        for c in children:
            walk(c, name + ".")

    for f in pq.ParquetFile(path).schema_arrow:
        walk(f, "")
    return out


@pytest.mark.parametrize("primary_key", [["id"], None], ids=["pk", "append"])
def test_paimon_java_reads_every_timestamp_precision_lakelog_writes(
    paimon_java: PaimonOracle, tmp_path: Any, primary_key: Optional[list[str]]
) -> None:
    """TIMESTAMP(0..9) and TIMESTAMP_LTZ(0..9), also inside ARRAY, ROW and MAP, in one file: INT96 for
    precision 7..9, INT64 milliseconds or microseconds for 0..6, as Paimon writes them; years
    0001..9999 wherever Arrow's unit holds them."""
    wh, name = str(tmp_path / "wh"), "db.p"
    paimon_java.create_table(wh, name, PRECISIONS, primary_key=primary_key or (),
                             options={"bucket": "2"} if primary_key else {})
    t = lakelog.Catalog(wh).get_table(name)
    data = precision_rows(t.schema, range(200), 0)
    t.write(data)
    t.write(precision_rows(t.schema, range(100, 250), 1))
    if primary_key:
        t.compact(full=True)
    assert_java_reads_every_snapshot(paimon_java, wh, name, t)
    want = pa.concat_tables([data.slice(0, 100), precision_rows(t.schema, range(100, 250), 1)]) if primary_key \
        else pa.concat_tables([data, precision_rows(t.schema, range(100, 250), 1)])
    assert canonical(arrow_to_rows(t.to_arrow())) == canonical(arrow_to_rows(want))
    leaves = parquet_leaves(lakelog_data_files(wh)[-1])
    for p in range(10):
        assert leaves[f"ts{p}"][0] == leaves[f"ltz{p}"][0] == ("INT96" if p >= 7 else "INT64"), p
        unit = "milli" if p <= 3 else "micro" if p <= 6 else None
        assert unit is None or f"timeUnit={unit}seconds" in str(leaves[f"ts{p}"][1]), p
    assert leaves["row.a"][0] == leaves["m.key_value.value"][0] == "INT96"
    assert leaves["row.b"][0] == leaves["row.c"][0] == leaves["arr4.list.element"][0] == "INT64"


def test_layout_matches_paimon_java_but_for_what_pyarrow_cannot_write(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Field ids, physical types and statistics of a file lakelog writes equal those of the file
    Paimon Java writes for the same table, except DECIMAL(p <= 18) with pyarrow 16 (no INT32/INT64)."""
    wh, name = str(tmp_path / "wh"), "db.l"
    fields = [
        ("k", "STRING NOT NULL"), ("id", "BIGINT NOT NULL"), ("b", "BOOLEAN"), ("i8", "TINYINT"), ("i", "INT"),
        ("f", "FLOAT"), ("d9", "DECIMAL(9, 2)"), ("d18", "DECIMAL(18, 4)"), ("d38", "DECIMAL(38, 10)"),
        ("s", "STRING"), ("by", "BYTES"), ("day", "DATE"), ("t3", "TIME(3)"), ("ts3", "TIMESTAMP(3)"),
        ("ts6", "TIMESTAMP(6)"), ("ts9", "TIMESTAMP(9)"), ("ltz9", "TIMESTAMP(9) WITH LOCAL TIME ZONE"),
        ("arr", {"type": "ARRAY", "element": "INT"}),
        ("mp", {"type": "MAP", "key": "INT NOT NULL", "value": {"type": "ARRAY", "element": "STRING"}}),
        ("row", {"type": "ROW", "fields": [{"id": 0, "name": "x", "type": "BIGINT"},
                                           {"id": 1, "name": "ys", "type": {"type": "ARRAY", "element": {
                                               "type": "ROW", "fields": [{"id": 2, "name": "z", "type": "DOUBLE"}]}}}]}),
    ]
    paimon_java.create_table(wh, name, fields, primary_key=["k", "id"], options={"bucket": "1"})
    row = {"k": "a", "id": 1, "b": True, "i8": 1, "i": 2, "f": 1.5, "d9": "1.25", "d18": "2.5000", "d38": "3.0000000000",
           "s": "x", "by": "AQI=", "day": "2024-01-02", "t3": "01:02:03.456", "ts3": "2024-01-02T03:04:05.678000000",
           "ts6": "1969-12-31T23:59:59.999999000", "ts9": "1969-12-31T23:59:59.999999999",
           "ltz9": "2024-01-02T03:04:05.123456789Z", "arr": [1, None], "mp": [[1, ["p", None]]],
           "row": {"x": 7, "ys": [{"z": 0.5}, None]}}
    paimon_java.write(wh, name, [row])
    (theirs,) = lakelog_data_files(wh)
    t = lakelog.Catalog(wh).get_table(name)
    paimon_rows = paimon_java.read(wh, name)
    t.write(t.to_arrow().set_column(1, "id", pa.array([2], pa.int64())))  # the same values, key 2
    (ours,) = [f for f in lakelog_data_files(wh) if f != theirs]
    assert canonical(paimon_java.read(wh, name)) == canonical([*paimon_rows, {**paimon_rows[0], "id": 2}])

    assert parquet_field_ids(ours) == parquet_field_ids(theirs)
    mine, paimon = parquet_leaves(ours), parquet_leaves(theirs)
    assert list(mine) == list(paimon)
    expected_differences: set[str] = set()
    if not parquet_layout.decimal_as_integer_supported():
        expected_differences |= {"d9", "d18"}  # FIXED_LEN_BYTE_ARRAY
    physical = {c for c in mine if mine[c][0] != paimon[c][0]}
    assert physical <= expected_differences, {c: (mine[c], paimon[c]) for c in physical}
    assert {c for c in mine if paimon[c][2] and not mine[c][2]} == set(), "statistics Paimon writes and lakelog not"
    assert {c for c in mine if mine[c][2]} == {c for c in mine if mine[c][0] != "INT96"}


def test_lakelog_compaction_turns_its_old_nanosecond_files_into_what_paimon_reads(
    paimon_java: PaimonOracle, tmp_path: Any, monkeypatch: Any
) -> None:
    """Files lakelog wrote before (TIMESTAMP(9) as INT64 nanoseconds, which Paimon Java misreads) still
    read in lakelog, and a full compaction rewrites them in the layout Paimon Java reads."""
    wh, name = str(tmp_path / "wh"), "db.old"
    schema = pa.schema([*KEY, ("ts6", pa.timestamp("us")), *NANOS])
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["dt", "id"], options={"bucket": "2"})
    old = parquet_layout.WriteLayout(field_ids=False, statistics="none", int96=False, decimal_as_integer=False)
    monkeypatch.setattr(parquet_layout, "DEFAULT_LAYOUT", old)
    t.write(sample(schema, range(0, 100), 0))
    assert {parquet_leaves(f)["ts9"][0] for f in lakelog_data_files(wh)} == {"INT64"}
    monkeypatch.undo()
    t.write(sample(schema, range(50, 150), 1))
    want = arrow_to_rows(pa.concat_tables([sample(schema, range(0, 50), 0), sample(schema, range(50, 150), 1)]))
    assert canonical(arrow_to_rows(t.to_arrow())) == canonical(want)
    t.compact(full=True)
    assert canonical(java_read(paimon_java, wh, name)) == canonical(want)
    assert canonical(arrow_to_rows(t.to_arrow())) == canonical(want)


# ---- the Parquet footer ------------------------------------------------------------------------------
def lakelog_data_files(wh: str) -> list[str]:
    return sorted(glob.glob(os.path.join(wh, "**", "bucket-*", "data-*.parquet"), recursive=True))


def test_thrift_footer_of_paimon_java_files_round_trips(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """lakelog edits Parquet footers to read INT96 exactly; a footer Paimon Java wrote must come back
    byte for byte."""
    from lakelog.connector.format import thrift_compact
    from lakelog.connector.format.parquet_footer import read_footer

    wh, name = str(tmp_path / "wh"), "db.pk"
    paimon_java.create_table(wh, name, WITH_NANOS, primary_key=["dt", "id"], partition_by=["dt"],
                             options={"bucket": "1"})
    paimon_java.write(wh, name, sample(WITH_NANOS, range(50), 0))
    files = lakelog_data_files(wh)
    assert files
    for f in files:
        _, footer = read_footer(f)
        assert thrift_compact.write_struct(thrift_compact.read_struct(footer)) == footer


# ---- checksums -------------------------------------------------------------------------------------------
_VERIFY = {"parquet.page.verify-checksum.enabled": "true"}  # parquet-mr checks page CRCs only when asked


def _flip_in_page(path: str, column: str) -> None:
    """Flip one bit in the middle of the first data page of ``column`` (random doubles: zstd stores
    them as they are, so without a checksum the flip reads back as another value)."""
    from pathlib import Path

    from .test_data_file_checksums import pages

    page = next(p for p in pages(Path(path)) if p.column == column and not p.dictionary)
    offset = (page.header_end + page.end) // 2
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([b ^ 0x01]))


def test_paimon_java_verifies_the_page_checksums_lakelog_writes(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """lakelog writes Parquet's page CRCs and a footer checksum in the footer's key-value metadata.
    Paimon Java reads such files as before, and, asked to check page CRCs, accepts every page of
    lakelog's data files (here after a full compaction) and refuses a damaged one: they are the CRCs
    the Parquet spec defines, as parquet-mr computes them. (The oracle's streaming read takes no
    options, so changelog files, which the same writer writes, are read unchecked by
    test_paimon_java_streams_the_changelog_lakelog_reports.)"""
    wh, name = str(tmp_path / "wh"), "db.crc"
    t = lakelog.Catalog(wh).create_table(name, WITH_NANOS, primary_key=["dt", "id"], partition_by=["dt"],
                                         options={"bucket": "2", "changelog-producer": "lookup"})
    t.write(sample(WITH_NANOS, range(0, 300), 0))
    t.write(sample(WITH_NANOS, range(100, 400), 1))
    t.compact(full=True)
    want = arrow_to_rows(t.to_arrow())
    assert_same(paimon_java.read(wh, name), want, "Paimon Java reading lakelog's files with checksums")
    assert_same(paimon_java.read(wh, name, options=_VERIFY), want, "Paimon Java verifying lakelog's page CRCs")
    live = {os.path.basename(p) for p in t.files().column("file_path").to_pylist()}
    path = next(p for p in lakelog_data_files(wh) if os.path.basename(p) in live)
    _flip_in_page(path, "f64")
    with pytest.raises(PaimonOracleError) as e:
        paimon_java.read(wh, name, options=_VERIFY)
    assert "CRC checksum verification failed" in e.value.java_message
    with pytest.raises(lakelog.errors.CorruptFileError, match=f"{os.path.basename(path)} fails a page checksum"):
        t.to_arrow()


def test_lakelog_verifies_the_page_checksums_paimon_java_writes(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Paimon Java (parquet-mr) writes a CRC in every page header; lakelog checks them on every read:
    a damaged page of a Paimon-written file raises CorruptFileError naming it (it read back as
    another value before)."""
    wh, name = str(tmp_path / "wh"), "db.theirs"
    paimon_java.create_table(wh, name, WITH_NANOS, primary_key=["dt", "id"], partition_by=["dt"],
                             options={"bucket": "1"})
    paimon_java.write(wh, name, sample(WITH_NANOS, range(0, 300), 0))
    t = lakelog.Catalog(wh).get_table(name)
    assert_same(arrow_to_rows(t.to_arrow()), paimon_java.read(wh, name), "lakelog verifying Paimon Java's CRCs")
    path = lakelog_data_files(wh)[0]
    _flip_in_page(path, "f64")
    with pytest.raises(lakelog.errors.CorruptFileError, match=f"{os.path.basename(path)} fails a page checksum"):
        t.to_arrow()


@pytest.mark.parametrize("bucket", ["-1", "2"], ids=["unaware", "bucketed"])
def test_deletes_on_append_tables_read_the_same_in_paimon(paimon_java: PaimonOracle, tmp_path: Any, bucket: str) -> None:
    """An append table with deletion vectors, deleted from in turns: lakelog's DELETEs (marks in
    Paimon's index layout, bucket 0 for an unaware-bucket table, as Paimon's writers put them) and
    Paimon's (its append deletion-file maintainers, as its Spark DELETE uses them) each mark rows
    in files the other wrote and keep the other's marks; every snapshot reads the same on both
    sides. A bucketed table compacted by Paimon drops the marked rows and their vectors, and
    lakelog reads the result; lakelog's compaction does the same for Paimon's readers."""
    wh, name, pj = str(tmp_path / "wh"), "db.adv", paimon_java
    options = {"bucket": bucket, "deletion-vectors.enabled": "true"}
    if bucket != "-1":
        options["bucket-key"] = "id"
    t = lakelog.Catalog(wh).create_table(name, COMMON, partition_by=["dt"], options=options)
    t.write(sample(COMMON, range(0, 120), 0))
    t.write(sample(COMMON, range(120, 200), 1))
    t.delete_where("id < 30 AND id >= 10")
    pj.write(wh, name, sample(COMMON, range(200, 260), 2))
    t = lakelog.Catalog(wh).get_table(name)
    t.delete_where("id IN (5, 130, 205, 259) OR (id > 140 AND id < 150)")  # Paimon's file too
    t.delete_where("id = 6")  # a second delete in buckets that already have vectors
    pj.delete_append(wh, name, "id", [7, 31, 125, 206, 240])  # Paimon marks lakelog's files and its own
    t = lakelog.Catalog(wh).get_table(name)
    t.delete_where("id IN (8, 126, 241)")  # lakelog keeps Paimon's marks
    gone = set(range(10, 30)) | {5, 6, 130, 205, 259} | set(range(141, 150))
    gone |= {7, 31, 125, 206, 240} | {8, 126, 241}
    for s in t.snapshots():
        assert_same(pj.read(wh, name, snapshot=s.id), arrow_to_rows(t.to_arrow(snapshot_id=s.id)), f"snapshot {s.id}")
    assert {r["id"] for r in arrow_to_rows(t.to_arrow(), ["id"])} == set(range(260)) - gone
    if bucket != "-1":  # Paimon's batch writer compacts bucketed tables only
        pj.compact(wh, name, full=True)
        t = lakelog.Catalog(wh).get_table(name)
        assert {r["id"] for r in arrow_to_rows(t.to_arrow(), ["id"])} == set(range(260)) - gone
        assert_same(pj.read(wh, name), arrow_to_rows(t.to_arrow()), "after Paimon's compaction")
    t.compact(full=True)
    t = lakelog.Catalog(wh).get_table(name)
    # no vector is left (Paimon's compaction leaves empty index files behind: they name no file)
    assert not any(e.index_file.dv_ranges for e in t.store.index_entries(t.latest_snapshot()))
    assert_same(pj.read(wh, name), arrow_to_rows(t.to_arrow()), "after lakelog's compaction")
    assert {r["id"] for r in arrow_to_rows(t.to_arrow(), ["id"])} == set(range(260)) - gone


# ---- table statistics (ANALYZE) ---------------------------------------------------------------------------
def test_statistics_are_read_and_carried_by_paimon_java(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: statistics lakelog's ANALYZE commits are Paimon's: Paimon's ``t$statistics`` parses
    every min and max by its column's type and shows what lakelog's does; Paimon's commits carry
    them, and lakelog's commits carry the statistics Paimon's ANALYZE commits."""
    import json

    wh, name, pj = str(tmp_path / "wh"), "db.stats", paimon_java
    schema = pa.schema([
        pa.field("id", pa.int64(), False), ("i", pa.int32()), ("f", pa.float32()), ("d", pa.float64()),
        ("s", pa.string()), ("dt", pa.date32()), ("ts", pa.timestamp("ms")), ("ts9", pa.timestamp("ns")),
        ("ltz", pa.timestamp("us", tz="UTC")), ("dec", pa.decimal128(12, 4)), ("b", pa.bool_()),
        ("tm", pa.time32("ms")), ("bin", pa.binary()),
    ])  # fmt: skip
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({
        "id": [1, 2, 3], "i": [-7, None, 12], "f": [0.1, -2.5e10, None], "d": [1 / 3, None, -0.0],
        "s": ["é", None, "abc"], "dt": [dt.date(1969, 12, 31), dt.date(2024, 2, 29), None],
        "ts": [dt.datetime(2024, 1, 1, 8, 30, 0, 5000), None, dt.datetime(1960, 1, 1)],
        "ts9": pa.array([1_700_000_000_123_456_789, -1, None], pa.timestamp("ns")),
        "ltz": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None, None],
        "dec": [decimal.Decimal("1.5"), decimal.Decimal("-0.0001"), None], "b": [True, None, False],
        "tm": [dt.time(23, 59, 59, 999000), dt.time(0, 0), None], "bin": [b"\x00\x01", None, b""],
    }, schema=schema))  # fmt: skip
    t.analyze(all_columns=True)
    ours = system_table(t.store, "statistics").to_pylist()
    theirs = pj.read(wh, f"{name}$statistics")
    assert len(ours) == len(theirs) == 1
    for key in ("snapshot_id", "schema_id", "mergedRecordCount", "mergedRecordSize"):
        assert theirs[0][key] == ours[0][key], key
    assert json.loads(theirs[0]["colstat"]) == json.loads(ours[0]["colstat"])
    assert json.loads(ours[0]["colstat"])["ts9"]["min"] == "1969-12-31 23:59:59.999999999"

    # Paimon's commits carry lakelog's statistics; lakelog's carry Paimon's
    pj.write(wh, name, [{"id": 9, "i": 1}])
    assert java_read(pj, wh, f"{name}$statistics")[0]["snapshot_id"] == ours[0]["snapshot_id"]
    latest = t.latest_snapshot()
    java_stats = {"snapshotId": latest.id, "schemaId": 0, "mergedRecordCount": 4, "mergedRecordSize": 99,
                  "colStats": {"i": {"colId": 1, "distinctCount": 3, "min": "-7", "max": "12", "nullCount": 1}}}
    sid = pj.update_statistics(wh, name, java_stats)
    assert t.latest_snapshot().commit_kind == "ANALYZE" and t.latest_snapshot().id == sid
    t.write(pa.Table.from_pylist([{"id": 10}], schema=schema))
    got = t.statistics()
    assert (got.snapshot_id, got.merged_record_count, got.merged_record_size) == (latest.id, 4, 99)
    assert got.columns["i"].to_json_object() == java_stats["colStats"]["i"]
    assert java_read(pj, wh, f"{name}$statistics")[0]["mergedRecordSize"] == 99


def test_paimon_java_reads_a_keyed_branch_of_an_append_table(paimon_java: PaimonOracle, tmp_path: Any) -> None:
    """Issue 24: Paimon's fallback-branch page as written: an append table, an empty branch given a
    primary key by ``'primary-key'`` (lakelog writes the key into the branch's schema, as Paimon's
    schema manager does), main reading missing partitions from it; Paimon's Java reader agrees."""
    wh, name, pj = str(tmp_path / "wh"), "db.fbk", paimon_java
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("name", pa.string(), False),
                        ("amount", pa.int64())])  # fmt: skip
    t = lakelog.Catalog(wh).create_table(name, schema, partition_by=["dt"])
    b = t.create_branch("test")
    b.alter(lakelog.SetOption("primary-key", "dt,name"), lakelog.SetOption("bucket", "2"),
            lakelog.SetOption("changelog-producer", "lookup"))  # fmt: skip
    t.alter(lakelog.SetOption("scan.fallback-branch", "test"))
    b.write(pa.table({"dt": ["20240725", "20240725", "20240726", "20240726"],
                      "name": ["apple", "peach", "cherry", "pear"], "amount": [4, 10, 3, 6]}, schema=schema))
    b.write(pa.table({"dt": ["20240726"], "name": ["pear"], "amount": [60]}, schema=schema))  # an upsert
    t = lakelog.Catalog(wh).get_table(name)
    t.write(pa.table({"dt": ["20240725", "20240725"], "name": ["apple", "banana"], "amount": [5, 7]}, schema=schema))
    ours = arrow_to_rows(t.to_arrow())
    assert sorted((r["dt"], r["name"], r["amount"]) for r in ours) == [
        ("20240725", "apple", 5), ("20240725", "banana", 7), ("20240726", "cherry", 3), ("20240726", "pear", 60)]
    assert_same(pj.read(wh, name), ours, "Paimon Java reading the keyed fallback branch")
    assert_same(pj.read(wh, f"{name}$branch_test"), arrow_to_rows(b.to_arrow()), "Paimon Java reading the branch")


# ---- table-read.sequence-number.enabled ------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation", "first-row"])
def test_audit_log_and_binlog_sequence_numbers_match_paimon_java(
    paimon_14: PaimonOracle, tmp_path: Any, engine: str
) -> None:
    """Issue 24: with ``table-read.sequence-number.enabled`` Paimon 1.4's ``$audit_log`` and
    ``$binlog`` of a table lakelog wrote (merged runs, a compaction, deletes) carry the same
    ``_SEQUENCE_NUMBER`` per row as lakelog's reads of them."""
    from .test_sequence_number import ENGINES, batch

    wh, name = str(tmp_path / "wh"), "db.sq"
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    opts = {"bucket": "2", "merge-engine": engine, "table-read.sequence-number.enabled": "true", **ENGINES[engine]}
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options=opts)
    rnd = random.Random(5)
    for step in range(6):
        data = pa.table({"k": [rnd.randrange(20) for _ in range(10)], "v": [f"s{step}"] * 10}, schema=schema)
        t.write(data)
        if step == 2:
            t.compact(full=True)
        if step == 3 and engine != "first-row":
            t.delete(pa.table({"k": [1, 2, 3, 4, 5]}))
    ours = {r["k"]: r for r in batch(t).to_pylist()}  # lakelog merges its runs as it reads them
    if engine == "first-row":
        # Paimon's reads of first-row tables skip level 0 (not deduplicated yet): lakelog's merged
        # read is compared with Paimon's full compaction of the same runs (both keep each key's
        # first row with its own number)
        paimon_14.compact(wh, name, full=True)
    theirs = {r["k"]: r for r in paimon_14.read(wh, name + "$audit_log")}
    assert theirs == ours
    binlog = {r["k"][0]: r for r in batch(t, "binlog").to_pylist()}
    assert {r["k"][0]: r for r in paimon_14.read(wh, name + "$binlog")} == binlog
