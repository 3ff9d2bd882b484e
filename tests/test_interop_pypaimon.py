"""Paimon compatibility in both directions, with pypaimon 2.1 as the external oracle.

pypaimon reads every table lakelog writes (every snapshot, after updates, deletes and full compaction)
and gets the same rows; lakelog reads what pypaimon writes; both write the same table in turns and
every key stays in one bucket whichever writer wrote it. Rows are compared order-insensitively.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.format.bucket import compute_buckets

from .interop_util import (
    assert_same_rows,
    bucket_of_key,
    canon,
    keys_by_bucket,
    pp_alter,
    pp_buckets,
    pp_create_table,
    pp_plan_files,
    pp_read,
    pp_table,
    pp_write,
)

pypaimon = pytest.importorskip("pypaimon")

D = decimal.Decimal
UTC = dt.timezone.utc

# ---- every supported column type ----------------------------------------------------------------------

ALL_TYPES = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("d10", pa.decimal128(10, 2)),
        ("d20", pa.decimal128(20, 4)),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("day", pa.date32()),
        ("ts_ms", pa.timestamp("ms")),
        ("ts_us", pa.timestamp("us")),
        ("ts_ltz", pa.timestamp("us", tz="UTC")),
        ("l", pa.list_(pa.int32())),
        ("st", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("m", pa.map_(pa.string(), pa.int64())),
    ]
)


def all_types_rows(ids: list[int], tag: str = "") -> pa.Table:
    """Rows with edge values (nulls, extremes, long strings, pre-epoch dates) cycling over ``ids``."""
    n = len(ids)

    def cyc(values: list[Any]) -> list[Any]:
        return [values[i % len(values)] for i in range(n)]

    return pa.table(
        {
            "id": ids,
            "b": cyc([True, False, None]),
            "i8": cyc([1, -128, 127, None, 0]),
            "i16": cyc([-32768, 32767, None, 5]),
            "i32": cyc([2**31 - 1, -(2**31), None, 7]),
            "i64": [i * 1_000_003 if i % 4 else None for i in ids],
            "f32": cyc([1.5, -0.25, None, 3.0e30]),
            "f64": cyc([1e300, -2.5, None, 0.1]),
            "d10": cyc([D("12345678.91"), D("-99999999.99"), None, D("0.01")]),
            "d20": cyc([D("1234567890123456.7890"), D("-0.0001"), None, D("42.0000")]),
            "s": [
                f"{tag}s{i}" if i % 3 else (f"{tag}a much longer string value {i}" if i % 2 else None)
                for i in ids
            ],
            "bin": cyc([b"\x00\x01", b"0123456789abcdefghij", None, b""]),
            "day": cyc([dt.date(2024, 2, 29), dt.date(1969, 12, 31), None, dt.date(2100, 1, 1)]),
            "ts_ms": cyc([dt.datetime(2024, 1, 2, 3, 4, 5, 678000), dt.datetime(1960, 1, 1), None]),
            "ts_us": cyc(
                [dt.datetime(2024, 1, 2, 3, 4, 5, 678901), dt.datetime(1969, 12, 31, 23, 59, 59, 1), None]
            ),
            "ts_ltz": cyc(
                [
                    dt.datetime(2024, 6, 1, 12, 0, 0, 123456, tzinfo=UTC),
                    None,
                    dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
                ]
            ),
            "l": cyc([[1, 2, 3], None, [], [None, 4]]),
            "st": cyc([{"a": 1, "b": "x"}, None, {"a": None, "b": "longer than seven"}]),
            "m": cyc([[("k", 1), ("k2", None)], None, []]),
        },
        schema=ALL_TYPES,
    )


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_all_types_lakelog_writes_pypaimon_reads(warehouse: str, kind: str) -> None:
    pk = ["id"] if kind == "pk" else None
    opts = {"bucket": "3"} if kind == "pk" else {}
    t = lakelog.Catalog(warehouse).create_table("db.types", ALL_TYPES, primary_key=pk, options=opts)
    first, second = all_types_rows(list(range(30))), all_types_rows(list(range(20, 45)), tag="v2-")
    t.write(first)
    t.write(second)
    if kind == "pk":
        want = pa.concat_tables([first.filter(pc.field("id") < 20), second])
    else:
        want = pa.concat_tables([first, second])
    got = pp_read(warehouse, "db.types")
    assert got.schema.equals(ALL_TYPES), got.schema
    assert_same_rows(got, want, "pypaimon reading lakelog's table")
    assert_same_rows(t.to_arrow(), want, "lakelog reading its own table")
    # statistics rows hold every column (nested ones as null): pypaimon must decode and use them
    cut = dt.datetime(2024, 1, 1, tzinfo=UTC)
    got = pp_read(
        warehouse,
        "db.types",
        columns=["id", "m", "ts_ltz", "d20"],
        predicate=lambda b: b.and_predicates(
            [b.greater_or_equal("id", 10), b.is_not_null("s"), b.greater_than("ts_ltz", cut)]
        ),
    )
    expr = (
        (pc.field("id") >= 10)
        & pc.field("s").is_valid()
        & (pc.field("ts_ltz") > pa.scalar(cut, pa.timestamp("us", "UTC")))
    )
    assert canon(got) == canon(want.filter(expr), ["id", "m", "ts_ltz", "d20"])
    assert got.num_rows > 0


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_all_types_pypaimon_writes_lakelog_reads(warehouse: str, kind: str) -> None:
    pk = ["id"] if kind == "pk" else None
    opts = {"bucket": "3"} if kind == "pk" else {"bucket": "-1"}
    pp_create_table(warehouse, "db.types", ALL_TYPES, primary_key=pk, options=opts)
    first, second = all_types_rows(list(range(30))), all_types_rows(list(range(20, 45)), tag="v2-")
    pp_write(warehouse, "db.types", first)
    pp_write(warehouse, "db.types", second)
    if kind == "pk":
        want = pa.concat_tables([first.filter(pc.field("id") < 20), second])
    else:
        want = pa.concat_tables([first, second])
    t = lakelog.Catalog(warehouse).get_table("db.types")
    got = t.to_arrow()
    assert got.schema.equals(ALL_TYPES), got.schema
    assert_same_rows(got, want, "lakelog reading pypaimon's table")
    # and lakelog appends / upserts into pypaimon's table, which pypaimon then reads
    third = all_types_rows(list(range(40, 50)), tag="v3-")
    t.write(third)
    if kind == "pk":
        want = pa.concat_tables([want.filter(pc.field("id") < 40), third])
    else:
        want = pa.concat_tables([want, third])
    assert_same_rows(pp_read(warehouse, "db.types"), want, "pypaimon after lakelog's write")


MORE_TYPES = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("ns", pa.timestamp("ns")),
        ("t", pa.time32("ms")),
        ("d38", pa.decimal128(38, 10)),
        ("nan", pa.float64()),
        ("ls", pa.large_string()),
        ("fsb", pa.binary(4)),
        ("ll", pa.list_(pa.list_(pa.string()))),
        ("ms", pa.map_(pa.int32(), pa.struct([("x", pa.list_(pa.int64()))]))),
    ]
)


@pytest.mark.parametrize("kind", ["pk", "append"])
@pytest.mark.parametrize("writer", ["lakelog", "pypaimon"])
def test_more_types_both_directions(warehouse: str, writer: str, kind: str) -> None:
    """TIMESTAMP(9), TIME, DECIMAL(38, 10), NaN, large strings, BINARY(4) and deeper nesting."""
    data = pa.table(
        {
            "id": [1, 2, 3, 4],
            "ns": pa.array([1, None, 1_700_000_000_123_456_789, -5], pa.timestamp("ns")),
            "t": pa.array([0, 1000, None, 86_399_999], pa.time32("ms")),
            "d38": [D("1234567890123456789012345678.0123456789"), None, D("-1"), D("0.0000000001")],
            "nan": [float("nan"), 1.0, None, -0.0],
            "ls": ["a", None, "b" * 20, ""],
            "fsb": [b"abcd", None, b"\x00\x00\x00\x01", b"zzzz"],
            "ll": [[["a"], []], None, [None], [["x", None]]],
            "ms": [[(1, {"x": [1]})], None, [], [(2, None), (3, {"x": None})]],
        },
        schema=MORE_TYPES,
    )
    pk = ["id"] if kind == "pk" else None
    opts = {"bucket": "2"} if pk else {"bucket": "-1"}
    if writer == "lakelog":
        lakelog.Catalog(warehouse).create_table("db.t", MORE_TYPES, primary_key=pk, options=opts).write(data)
    else:
        pp_create_table(warehouse, "db.t", MORE_TYPES, primary_key=pk, options=opts)
        pp_write(warehouse, "db.t", data)
    want = canon(
        data.cast(pa.schema([f.with_type(pa.string()) if f.name == "ls" else f for f in MORE_TYPES]))
    )
    theirs = pp_read(warehouse, "db.t")
    ours = lakelog.Catalog(warehouse).get_table("db.t").to_arrow()
    assert theirs.schema.equals(ours.schema), (theirs.schema, ours.schema)
    assert repr(canon(theirs)) == repr(want)  # repr: NaN != NaN
    assert repr(canon(ours)) == repr(want)
    # NaN makes min/max statistics unusable; a filter must still find the matching rows
    got = pp_read(warehouse, "db.t", columns=["id"], predicate=lambda b: b.greater_than("nan", 0.5))
    assert got.column("id").to_pylist() == [2]


# ---- table layouts, several writers -------------------------------------------------------------------

LAYOUT_SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("p", pa.int32(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("k2", pa.string(), nullable=False),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("price", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us")),
    ]
)


@dataclass(frozen=True)
class Layout:
    name: str
    primary_key: list[str]
    partition_by: list[str]
    options: dict[str, str]
    bucket_key: list[str] = field(default_factory=list)  # columns that decide the bucket (for checks)

    @property
    def is_pk(self) -> bool:
        return bool(self.primary_key)

    def key_columns_in_files(self) -> list[str]:
        """Columns of a data file that hold the bucket key."""
        if self.is_pk:
            return [f"_KEY_{k}" for k in self.bucket_key]
        return list(self.bucket_key)

    def __str__(self) -> str:
        return self.name


LAYOUTS = [
    Layout("pk_unpartitioned", ["id"], [], {"bucket": "4"}, ["id"]),
    Layout("pk_two_columns", ["id", "k2"], [], {"bucket": "3"}, ["id", "k2"]),
    Layout("pk_partition_string", ["dt", "id"], ["dt"], {"bucket": "3"}, ["id"]),
    Layout("pk_partition_int_two_key", ["p", "id", "k2"], ["p"], {"bucket": "2"}, ["id", "k2"]),
    Layout("append_unaware", [], ["dt"], {"bucket": "-1"}, []),
    Layout("append_fixed_bucket_key", [], ["p"], {"bucket": "3", "bucket-key": "id"}, ["id"]),
    Layout("append_unpartitioned_2key", [], [], {"bucket": "2", "bucket-key": "k2,id"}, ["k2", "id"]),
]


def layout_rows(ids: range, step: int) -> pa.Table:
    """Rows for ``ids``; the key columns (dt, p, id, k2) depend on the id only, values on the step."""
    arr = np.asarray(list(ids), dtype=np.int64)
    return pa.table(
        {
            "dt": [f"2024-01-0{1 + i % 3}" for i in arr],
            "p": (arr % 2).astype(np.int32),
            "id": arr,
            "k2": [f"k{i % 5}" if i % 7 else f"long-key-value-{i % 5}" for i in arr],
            "name": [None if (i + step) % 9 == 0 else f"n{step}-{i}" for i in arr],
            "amount": [float(i) * (step + 1) for i in arr],
            "price": [D(f"{i}.{step:02d}") for i in arr],
            "ts": [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=int(i), microseconds=step) for i in arr],
        },
        schema=LAYOUT_SCHEMA,
    )


class Model:
    """The expected table content: last row per primary key, or every appended row."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.appended: list[dict[str, Any]] = []

    def upsert(self, t: pa.Table) -> None:
        if not self.layout.is_pk:
            self.appended.extend(t.to_pylist())
            return
        for r in t.to_pylist():
            self.rows[tuple(r[k] for k in self.layout.primary_key)] = r

    def delete(self, t: pa.Table) -> None:
        for r in t.to_pylist():
            self.rows.pop(tuple(r[k] for k in self.layout.primary_key), None)

    def table(self) -> pa.Table:
        data = list(self.rows.values()) if self.layout.is_pk else self.appended
        return pa.Table.from_pylist(data, schema=LAYOUT_SCHEMA)


def _create(warehouse: str, layout: Layout, by: str) -> Optional[lakelog.Table]:
    if by == "lakelog":
        return lakelog.Catalog(warehouse).create_table(
            "db.t",
            LAYOUT_SCHEMA,
            primary_key=layout.primary_key,
            partition_by=layout.partition_by,
            options=layout.options,
        )
    pp_create_table(
        warehouse,
        "db.t",
        LAYOUT_SCHEMA,
        primary_key=layout.primary_key,
        partition_by=layout.partition_by,
        options=layout.options,
    )
    return None


def _check_buckets(warehouse: str, layout: Layout) -> None:
    """Every bucket key sits in exactly one bucket, the one pypaimon's own writer would pick (the
    oracle is pypaimon's bucket function, not lakelog's)."""
    if not layout.bucket_key:
        return
    path = os.path.join(warehouse, "db.db", "t")
    placed = bucket_of_key(keys_by_bucket(path, layout.key_columns_in_files()))
    assert placed
    keys = pa.table({c: [k[i] for k in placed] for i, c in enumerate(layout.bucket_key)})
    assert pp_buckets(warehouse, "db.t", keys) == list(placed.values())


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_lakelog_writes_every_snapshot_reads_the_same_in_pypaimon(warehouse: str, layout: Layout) -> None:
    t = _create(warehouse, layout, "lakelog")
    assert t is not None
    model = Model(layout)
    expected: dict[int, list[tuple[Any, ...]]] = {}

    def step(sid: Optional[int]) -> None:
        assert sid is not None
        expected[sid] = canon(model.table(), LAYOUT_SCHEMA.names)

    for i, ids in enumerate([range(0, 40), range(25, 70)]):
        batch = layout_rows(ids, i)
        model.upsert(batch)
        step(t.write(batch))
    if layout.is_pk:
        gone = layout_rows(range(0, 70, 4), 0).select(layout.primary_key)
        model.delete(gone)
        step(t.delete(gone))
    else:
        extra = layout_rows(range(5, 15), 7)
        model.upsert(extra)
        step(t.write(extra))
    step(t.compact(full=True))
    after = layout_rows(range(60, 90), 3)
    model.upsert(after)
    step(t.write(after))
    assert sorted(expected) == [1, 2, 3, 4, 5]
    assert t.snapshot(4).commit_kind == "COMPACT"

    for sid, want in expected.items():  # time travel in both readers
        assert canon(pp_read(warehouse, "db.t", snapshot_id=sid), LAYOUT_SCHEMA.names) == want, sid
        assert canon(t.to_arrow(snapshot_id=sid), LAYOUT_SCHEMA.names) == want, sid
    assert canon(pp_read(warehouse, "db.t"), LAYOUT_SCHEMA.names) == expected[5]
    proj = pp_read(warehouse, "db.t", columns=["name", "id"])
    assert proj.column_names == ["name", "id"]
    assert canon(proj) == canon(model.table(), ["name", "id"])
    _check_buckets(warehouse, layout)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_pypaimon_writes_lakelog_reads_every_snapshot(warehouse: str, layout: Layout) -> None:
    _create(warehouse, layout, "pypaimon")
    model = Model(layout)
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for i, ids in enumerate([range(0, 40), range(25, 70), range(10, 20)]):
        batch = layout_rows(ids, i)
        model.upsert(batch)
        pp_write(warehouse, "db.t", batch)
        expected[i + 1] = canon(model.table(), LAYOUT_SCHEMA.names)
    t = lakelog.Catalog(warehouse).get_table("db.t")
    assert [s.id for s in t.snapshots()] == [1, 2, 3]
    for sid, want in expected.items():
        assert canon(t.to_arrow(snapshot_id=sid), LAYOUT_SCHEMA.names) == want, sid
    got = t.to_arrow(columns=["id", "amount"], filter=pc.field("id") >= 30)
    assert canon(got) == canon(model.table().filter(pc.field("id") >= 30), ["id", "amount"])
    # lakelog compacts pypaimon's files; both readers still agree
    sid = t.compact(full=True)
    assert sid == 4
    assert canon(pp_read(warehouse, "db.t"), LAYOUT_SCHEMA.names) == expected[3]
    assert canon(t.to_arrow(), LAYOUT_SCHEMA.names) == expected[3]
    _check_buckets(warehouse, layout)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_mixed_writers_on_one_table(warehouse: str, layout: Layout) -> None:
    """pypaimon and lakelog take turns (upserts, deletes, compactions) on one table; after every
    commit both read the model's rows, and no key ever sits in two buckets."""
    _create(warehouse, layout, "pypaimon")
    t = lakelog.Catalog(warehouse).get_table("db.t")
    model = Model(layout)

    def check(what: str) -> None:
        want = canon(model.table(), LAYOUT_SCHEMA.names)
        assert canon(pp_read(warehouse, "db.t"), LAYOUT_SCHEMA.names) == want, f"pypaimon after {what}"
        assert canon(t.to_arrow(), LAYOUT_SCHEMA.names) == want, f"lakelog after {what}"

    def by_pp(ids: range, step: int) -> None:
        b = layout_rows(ids, step)
        model.upsert(b)
        pp_write(warehouse, "db.t", b)

    def by_ll(ids: range, step: int) -> None:
        b = layout_rows(ids, step)
        model.upsert(b)
        t.write(b)

    by_pp(range(0, 50), 0)
    by_ll(range(30, 80), 1)
    check("lakelog's upsert over pypaimon's rows")
    if layout.is_pk:
        gone = layout_rows(range(0, 80, 3), 0).select(layout.primary_key)
        model.delete(gone)
        t.delete(gone)
        check("lakelog's delete")
    by_pp(range(20, 60), 2)
    check("pypaimon's upsert over lakelog's rows")
    t.compact(full=True)
    check("lakelog's full compaction")
    by_pp(range(70, 100), 3)
    by_ll(range(90, 110), 4)
    by_pp(range(0, 10), 5)
    check("more writes after compaction")
    t.compact(full=True)
    check("second compaction")
    _check_buckets(warehouse, layout)


# ---- partition directory names ------------------------------------------------------------------------

PARTITION_TYPES: list[tuple[str, pa.DataType, list[Any]]] = [
    ("string", pa.string(), ["a/b", "x=y", "c{d}", ".", "sp ace", "ü%", None, " "]),
    ("int32", pa.int32(), [-3, 0, 7, None]),
    ("bool", pa.bool_(), [True, False, None]),
    ("decimal", pa.decimal128(10, 2), [D("1.00"), D("-0.05"), D("12345678.90"), None]),
    ("double", pa.float64(), [0.1, 1e10, -2.5, 1e-5, 1e7, 0.001, None]),
    ("float", pa.float32(), [0.1, 1e10, -2.5, 1e-5, 123456.7, None]),
    ("date", pa.date32(), [dt.date(2024, 1, 1), dt.date(1960, 1, 1), None]),
    (
        "timestamp_ms",
        pa.timestamp("ms"),
        [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 8, 30, 5, 123000), None],
    ),
    (
        "timestamp_us",
        pa.timestamp("us"),
        [dt.datetime(2024, 1, 1, 8, 30), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)],
    ),
    ("timestamp_ltz", pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, 8, 30, 0, 5, tzinfo=UTC), None]),
]


def _partition_dirs(warehouse: str) -> list[str]:
    root = os.path.join(warehouse, "db.db", "t")
    return sorted(
        os.path.relpath(r, root) for r, _d, _f in os.walk(root) if os.path.basename(r) == "bucket-0"
    )


# partition.legacy-name=false changes only how dates, times, timestamps and floats are spelled
PARTITION_CASES = [
    pytest.param(
        *p,
        legacy,
        id=f"{p[0]}-legacy_{legacy}",
    )
    for legacy in ("true", "false")
    for p in PARTITION_TYPES
    if legacy == "true" or p[0] in ("float", "date", "timestamp_ms", "timestamp_ltz")
]


@pytest.mark.parametrize("name,ptype,values,legacy", PARTITION_CASES)
def test_partition_directories_agree_with_pypaimon(
    tmp_path: Any, name: str, ptype: pa.DataType, values: list[Any], legacy: str
) -> None:
    """Both writers put a partition value in the same directory, so each reads the other's files."""
    schema = pa.schema([("k", ptype), pa.field("id", pa.int64(), nullable=False)])
    data = pa.table({"k": values, "id": list(range(len(values)))}, schema=schema)
    opts = {"bucket": "-1", "partition.legacy-name": legacy}
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lakelog.Catalog(ours).create_table("db.t", schema, partition_by=["k"], options=opts).write(data)
    pp_create_table(theirs, "db.t", schema, partition_by=["k"], options=opts)
    pp_write(theirs, "db.t", data)
    assert _partition_dirs(ours) == _partition_dirs(theirs)
    assert_same_rows(pp_read(ours, "db.t"), data, "pypaimon reading lakelog's partitions")
    assert_same_rows(lakelog.Catalog(theirs).get_table("db.t").to_arrow(), data, "lakelog reading pypaimon's")


# ---- bucket hashing of key types, pypaimon as the oracle ----------------------------------------------

KEY_TYPES: list[tuple[str, pa.DataType, list[Any]]] = [
    ("int8", pa.int8(), list(range(-60, 60))),
    ("int16", pa.int16(), [i * 251 for i in range(-60, 60)]),
    ("int32", pa.int32(), [i * 1_000_003 for i in range(-60, 60)]),
    ("int64", pa.int64(), [i * 10**12 + i for i in range(-60, 60)]),
    ("string", pa.string(), [("k" * (i % 12)) + str(i) for i in range(120)]),
    ("binary", pa.binary(), [bytes([i]) * (1 + i % 11) for i in range(120)]),
    ("decimal_10_2", pa.decimal128(10, 2), [D(i * 7919) / 100 for i in range(-60, 60)]),
    ("decimal_20_4", pa.decimal128(20, 4), [D(i * 104729) / 10000 * 10**9 for i in range(-60, 60)]),
    ("date", pa.date32(), [dt.date(1969, 1, 1) + dt.timedelta(days=37 * i) for i in range(120)]),
    (
        "timestamp_ms",
        pa.timestamp("ms"),
        [dt.datetime(1969, 6, 1) + dt.timedelta(seconds=86399.123 * i) for i in range(120)],
    ),
    (
        "timestamp_us",
        pa.timestamp("us"),
        [dt.datetime(1969, 6, 1) + dt.timedelta(microseconds=86399123457 * i) for i in range(120)],
    ),
    (
        "timestamp_ltz",
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(2001, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=7777777 * i) for i in range(120)],
    ),
    ("bool", pa.bool_(), [True, False]),
]


def _pp_buckets_vs_ours(
    warehouse: str, ident: str, data: pa.Table, pk: list[str], buckets: int
) -> lakelog.Table:
    """pypaimon writes ``data`` into a primary-key table; each key's bucket must be lakelog's."""
    pp_create_table(warehouse, ident, data.schema, primary_key=pk, options={"bucket": str(buckets)})
    pp_write(warehouse, ident, data)
    placed = bucket_of_key(
        keys_by_bucket(os.path.join(warehouse, "db.db", ident.split(".")[1]), [f"_KEY_{c}" for c in pk])
    )
    assert len(placed) == data.num_rows
    t = lakelog.Catalog(warehouse).get_table(ident)
    key_rows = pa.table(
        {c: [k[i] for k in placed] for i, c in enumerate(pk)},
        schema=pa.schema([data.schema.field(c) for c in pk]),
    )
    ours = compute_buckets(key_rows, pk, [t.store.schema.field(c).type for c in pk], buckets).tolist()
    assert ours == list(placed.values()), pk
    return t


@pytest.mark.parametrize("name,key_type,keys", KEY_TYPES, ids=[k[0] for k in KEY_TYPES])
def test_bucket_of_each_key_type_matches_pypaimon(
    warehouse: str, name: str, key_type: pa.DataType, keys: list[Any]
) -> None:
    schema = pa.schema([pa.field("k", key_type, nullable=False), ("v", pa.string())])
    _pp_buckets_vs_ours(
        warehouse, "db.t", pa.table({"k": keys, "v": ["x"] * len(keys)}, schema=schema), ["k"], 5
    )


def test_bucket_of_a_five_column_key_matches_pypaimon(warehouse: str) -> None:
    n = 150
    data = pa.table(
        {
            "s": [("k" * (i % 9)) + str(i % 7) for i in range(n)],
            "i": pa.array([i % 11 - 5 for i in range(n)], pa.int32()),
            "d": pa.array([D(i) * 10**9 + D("0.0001") for i in range(n)], pa.decimal128(20, 4)),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=i * 7) for i in range(n)],
                pa.timestamp("us"),
            ),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 3) for i in range(n)], pa.date32()),
            "v": ["old"] * n,
        }
    )
    schema = pa.schema([pa.field(f.name, f.type, nullable=f.name == "v") for f in data.schema])
    data = data.cast(schema)
    pk = ["s", "i", "d", "ts", "day"]
    t = _pp_buckets_vs_ours(warehouse, "db.t", data, pk, 7)
    # an upsert of every key by lakelog replaces pypaimon's rows (same buckets, no duplicates)
    t.write(data.set_column(5, "v", pa.array(["new"] * n)))
    got = pp_read(warehouse, "db.t")
    assert got.num_rows == n and set(got.column("v").to_pylist()) == {"new"}


# ---- deletes written by pypaimon ----------------------------------------------------------------------


def test_pypaimon_deletes_alone_in_a_file_are_not_read_as_rows(warehouse: str) -> None:
    """pypaimon records deleteRowCount 0 for a file of -D rows; a file read alone (no other file
    holds its keys) must still drop them. Read before as rows 100 and 101."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("op", pa.string())])
    pp_create_table(
        warehouse, "db.t", schema, primary_key=["id"], options={"bucket": "1", "rowkind.field": "op"}
    )
    pp_write(warehouse, "db.t", pa.table({"id": [0, 1], "v": ["a", "b"], "op": ["+I", "+I"]}, schema=schema))
    pp_write(warehouse, "db.t", pa.table({"id": [100, 101], "v": ["x", "x"], "op": ["-D", "-U"]}, schema=schema))
    t = lakelog.Catalog(warehouse).get_table("db.t")
    files = [f for s in t.scan().plan() for f in s.files]
    assert [f.delete_row_count for f in files] == [0, 0]  # what pypaimon records, whatever it wrote
    want = pp_read(warehouse, "db.t")
    assert sorted(want.column("id").to_pylist()) == [0, 1]
    assert_same_rows(t.to_arrow(), want, "lakelog reading a file of pypaimon's deletes alone")
    assert_same_rows(pa.Table.from_batches(list(t.to_reader()), schema=want.schema), want, "to_reader()")


def test_pypaimon_deletes_through_rowkind_field(warehouse: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("op", pa.string())])
    pp_create_table(
        warehouse, "db.t", schema, primary_key=["id"], options={"bucket": "2", "rowkind.field": "op"}
    )
    pp_write(
        warehouse,
        "db.t",
        pa.table(
            {"id": list(range(10)), "v": [f"a{i}" for i in range(10)], "op": ["+I"] * 10}, schema=schema
        ),
    )
    pp_write(
        warehouse,
        "db.t",
        pa.table(
            {"id": [1, 2, 3, 4], "v": ["x", "x", "u", "u"], "op": ["-D", "-D", "+U", "-U"]}, schema=schema
        ),
    )
    want = pp_read(warehouse, "db.t")
    assert sorted(want.column("id").to_pylist()) == [0, 3, 5, 6, 7, 8, 9]
    t = lakelog.Catalog(warehouse).get_table("db.t")
    assert_same_rows(t.to_arrow(), want, "lakelog reading pypaimon's deletes")
    assert_same_rows(t.to_arrow(snapshot_id=1), pp_read(warehouse, "db.t", snapshot_id=1), "snapshot 1")
    t.compact(full=True)
    assert_same_rows(pp_read(warehouse, "db.t"), want, "pypaimon after lakelog compacted deletes")


# ---- schema evolution ---------------------------------------------------------------------------------


def test_schema_evolution_by_lakelog_read_by_pypaimon(warehouse: str) -> None:
    """Add, rename, widen and drop columns with lakelog; pypaimon maps old files by field id."""
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("x", pa.int32()),
            ("gone", pa.string()),
        ]
    )
    t = lakelog.Catalog(warehouse).create_table("db.t", schema, primary_key=["id"], options={"bucket": "2"})
    t.write(
        pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "x": [1, 2, 3], "gone": ["g"] * 3}, schema=schema)
    )
    t.alter(lakelog.AddColumn("note", pa.string()), lakelog.RenameColumn("name", "label"))
    t.alter(lakelog.UpdateColumnType("x", pa.int64()), lakelog.DropColumn("gone"))
    new = t.schema
    assert new.names == ["id", "label", "x", "note"]
    t.write(
        pa.table({"id": [3, 4], "label": ["c2", "d"], "x": [30, 2**40], "note": ["n3", "n4"]}, schema=new)
    )
    want = pa.table(
        {
            "id": [1, 2, 3, 4],
            "label": ["a", "b", "c2", "d"],
            "x": [1, 2, 30, 2**40],
            "note": [None, None, "n3", "n4"],
        },
        schema=new,
    )
    got = pp_read(warehouse, "db.t")
    assert got.schema.equals(new), got.schema
    assert_same_rows(got, want, "pypaimon reading old and new schema files")
    assert_same_rows(t.to_arrow(), want, "lakelog")
    # a column added again under a dropped name is a new field id: the old files' values stay hidden
    t.alter(lakelog.AddColumn("gone", pa.string()))
    want = want.append_column("gone", pa.nulls(4, pa.string()))
    assert_same_rows(pp_read(warehouse, "db.t"), want, "pypaimon after re-adding a dropped name")
    assert_same_rows(t.to_arrow(), want, "lakelog after re-adding a dropped name")
    # the old snapshot reads with its old schema in both
    old = pp_read(warehouse, "db.t", snapshot_id=1)
    assert old.column_names == ["id", "name", "x", "gone"]
    assert_same_rows(t.to_arrow(snapshot_id=1), old, "snapshot 1")
    t.compact(full=True)
    assert_same_rows(pp_read(warehouse, "db.t"), want, "pypaimon after compaction rewrote old files")
    got = pp_read(warehouse, "db.t", columns=["note", "id"], predicate=lambda b: b.is_null("note"))
    assert canon(got) == [(None, 1), (None, 2)]


def test_schema_evolution_by_pypaimon_read_by_lakelog(warehouse: str) -> None:
    from pypaimon.schema.schema_change import SchemaChange

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    pp_create_table(warehouse, "db.t", schema, primary_key=["id"], options={"bucket": "2"})
    pp_write(warehouse, "db.t", pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
    from pypaimon.schema.data_types import AtomicType

    pp_alter(
        warehouse,
        "db.t",
        [SchemaChange.add_column("score", AtomicType("DOUBLE")), SchemaChange.rename_column("name", "label")],
    )
    new = pp_table(warehouse, "db.t")
    rows = pa.table({"id": [2, 3], "label": ["b2", "c"], "score": [2.5, 3.5]})
    wb = new.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(
        rows.cast(
            pa.schema([pa.field("id", pa.int64(), False), ("label", pa.string()), ("score", pa.float64())])
        )
    )
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    t = lakelog.Catalog(warehouse).get_table("db.t")
    got = t.to_arrow()
    assert got.column_names == ["id", "label", "score"]
    assert canon(got) == [(1, "a", None), (2, "b2", 2.5), (3, "c", 3.5)]
    assert canon(t.to_arrow(snapshot_id=1), ["id", "name"]) == [(1, "a"), (2, "b")]  # its own schema
    # lakelog writes on top of pypaimon's evolved table; pypaimon reads it
    t.write(pa.table({"id": [1], "label": ["a2"], "score": [1.5]}, schema=t.schema))
    assert canon(pp_read(warehouse, "db.t")) == [(1, "a2", 1.5), (2, "b2", 2.5), (3, "c", 3.5)]


def test_time_travel_reads_with_the_snapshots_schema(warehouse: str) -> None:
    """Paimon reads snapshot N with the schema snapshot N was written with (columns as they were)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    t = lakelog.Catalog(warehouse).create_table("db.t", schema, primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
    t.alter(lakelog.AddColumn("note", pa.string()), lakelog.RenameColumn("name", "label"))
    t.write(pa.table({"id": [3], "label": ["c"], "note": ["n"]}, schema=t.schema))
    theirs = pp_read(warehouse, "db.t", snapshot_id=1)
    assert theirs.column_names == ["id", "name"]
    assert_same_rows(t.to_arrow(snapshot_id=1), theirs, "snapshot 1 in its own schema")


# ---- filters and projection through pypaimon on lakelog tables (exercises our statistics) -------------

FILTER_SCHEMA = pa.schema(
    [
        pa.field("part", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("s", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("d20", pa.decimal128(20, 4)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("flag", pa.bool_()),
    ]
)


def filter_rows(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi, dtype=np.int64)
    return pa.table(
        {
            "part": ["a" if i % 2 else "b" for i in ids],
            "id": ids,
            "i32": [None if i % 10 == 3 else int(i) * 3 for i in ids],
            "f64": [float(i) / 4 for i in ids],
            "s": [f"str-{i:05d}-and-a-long-tail" if i % 5 else f"s{i}" for i in ids],
            "d": [D(int(i) * 125) / 100 for i in ids],
            "d20": [D(int(i)) * 10**10 + D("0.0001") for i in ids],
            "day": [dt.date(2020, 1, 1) + dt.timedelta(days=int(i)) for i in ids],
            "ts": [dt.datetime(2020, 1, 1) + dt.timedelta(minutes=int(i)) for i in ids],
            "flag": [None if i % 7 == 0 else bool(i % 3 == 0) for i in ids],
        },
        schema=FILTER_SCHEMA,
    )


PREDICATES: list[tuple[str, Any, pc.Expression]] = [
    ("id_eq", lambda b: b.equal("id", 123), pc.field("id") == 123),
    ("id_range", lambda b: b.between("id", 150, 170), (pc.field("id") >= 150) & (pc.field("id") <= 170)),
    ("id_lt", lambda b: b.less_than("id", 20), pc.field("id") < 20),
    ("id_ge", lambda b: b.greater_or_equal("id", 290), pc.field("id") >= 290),
    ("id_in", lambda b: b.is_in("id", [5, 105, 205, 999]), pc.field("id").isin([5, 105, 205, 999])),
    ("i32_null", lambda b: b.is_null("i32"), pc.field("i32").is_null()),
    ("i32_gt", lambda b: b.greater_than("i32", 800), pc.field("i32") > 800),
    ("f64_le", lambda b: b.less_or_equal("f64", 10.0), pc.field("f64") <= 10.0),
    (
        "s_eq_long",
        lambda b: b.equal("s", "str-00201-and-a-long-tail"),
        pc.field("s") == "str-00201-and-a-long-tail",
    ),
    ("s_eq_short", lambda b: b.equal("s", "s200"), pc.field("s") == "s200"),
    ("s_startswith", lambda b: b.startswith("s", "str-0029"), pc.starts_with(pc.field("s"), "str-0029")),
    ("s_gt", lambda b: b.greater_than("s", "str-00280"), pc.field("s") > "str-00280"),
    (
        "d_between",
        lambda b: b.between("d", D("10.00"), D("12.50")),
        (pc.field("d") >= pa.scalar(D("10.00"), pa.decimal128(10, 2)))
        & (pc.field("d") <= pa.scalar(D("12.50"), pa.decimal128(10, 2))),
    ),
    (
        "d20_gt",
        lambda b: b.greater_than("d20", D("2900000000000.0000")),
        pc.field("d20") > pa.scalar(D("2900000000000.0000"), pa.decimal128(20, 4)),
    ),
    (
        "day_eq",
        lambda b: b.equal("day", dt.date(2020, 4, 10)),
        pc.field("day") == pa.scalar(dt.date(2020, 4, 10)),
    ),
    (
        "ts_lt",
        lambda b: b.less_than("ts", dt.datetime(2020, 1, 1, 0, 30)),
        pc.field("ts") < pa.scalar(dt.datetime(2020, 1, 1, 0, 30), pa.timestamp("us")),
    ),
    ("flag_true", lambda b: b.equal("flag", True), pc.field("flag") == True),  # noqa: E712
    (
        "part_and_id",
        lambda b: b.and_predicates([b.equal("part", "a"), b.less_than("id", 40)]),
        (pc.field("part") == "a") & (pc.field("id") < 40),
    ),
    (
        "or",
        lambda b: b.or_predicates([b.equal("id", 7), b.greater_than("id", 295)]),
        (pc.field("id") == 7) | (pc.field("id") > 295),
    ),
    ("none_match", lambda b: b.greater_than("id", 10**9), pc.field("id") > 10**9),
]


@pytest.fixture(scope="module")
def filter_tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    """An append table and a primary-key table written by lakelog in 10 commits of 30 rows each, so
    every file covers a narrow id range and pruning by statistics matters."""
    wh = str(tmp_path_factory.mktemp("filters"))
    cat = lakelog.Catalog(wh)
    app = cat.create_table("db.app", FILTER_SCHEMA, partition_by=["part"])
    pk = cat.create_table(
        "db.pk", FILTER_SCHEMA, primary_key=["part", "id"], partition_by=["part"], options={"bucket": "2"}
    )
    chunks = [filter_rows(lo, lo + 30) for lo in range(0, 300, 30)]
    for c in chunks:
        app.write(c)
        pk.write(c)
    return wh, pa.concat_tables(chunks)


@pytest.mark.parametrize("ident", ["db.app", "db.pk"])
@pytest.mark.parametrize("name,pred,expr", PREDICATES, ids=[p[0] for p in PREDICATES])
def test_pypaimon_filters_lakelog_tables(
    filter_tables: tuple[str, pa.Table], ident: str, name: str, pred: Any, expr: pc.Expression
) -> None:
    wh, data = filter_tables
    want = data.filter(expr)
    got = pp_read(wh, ident, predicate=pred)
    assert_same_rows(got, want, f"pypaimon filter {name} on {ident}")


@pytest.mark.parametrize("ident", ["db.app", "db.pk"])
def test_pypaimon_projects_and_filters_lakelog_tables(
    filter_tables: tuple[str, pa.Table], ident: str
) -> None:
    wh, data = filter_tables
    for name, pred, expr in (PREDICATES[1], PREDICATES[9], PREDICATES[17]):
        proj = pp_read(wh, ident, predicate=pred, columns=["s", "id", "d20"])
        assert proj.column_names == ["s", "id", "d20"], name
        assert canon(proj) == canon(data.filter(expr), ["s", "id", "d20"]), name
    proj = pp_read(wh, ident, columns=["ts"])
    assert proj.column_names == ["ts"] and canon(proj) == canon(data, ["ts"])


def test_pypaimon_prunes_lakelog_files_by_statistics(filter_tables: tuple[str, pa.Table]) -> None:
    """Statistics must be usable (files get skipped), not only harmless (results stay exact)."""
    wh, _ = filter_tables
    everything = pp_plan_files(wh, "db.app")
    assert len(everything) == 20  # 10 commits x 2 partitions
    assert len(pp_plan_files(wh, "db.app", predicate=lambda b: b.between("id", 150, 170))) <= 2
    assert len(pp_plan_files(wh, "db.app", predicate=lambda b: b.equal("part", "a"))) == 10
    assert (
        len(
            pp_plan_files(wh, "db.app", predicate=lambda b: b.less_than("ts", dt.datetime(2020, 1, 1, 0, 20)))
        )
        == 2
    )
    assert (
        len(pp_plan_files(wh, "db.app", predicate=lambda b: b.greater_than("d20", D("2900000000000")))) <= 2
    )
    assert len(pp_plan_files(wh, "db.app", predicate=lambda b: b.greater_than("id", 10**9))) == 0
    # primary-key tables prune by key statistics
    assert len(pp_plan_files(wh, "db.pk", predicate=lambda b: b.equal("id", 123))) <= 2


@pytest.mark.parametrize("stats_mode", ["default", "full"])
def test_lakelog_filters_pypaimon_tables(tmp_path: Any, stats_mode: str) -> None:
    """pypaimon writes no value statistics by default and full ones with metadata.stats-mode=full;
    either way lakelog's pruning must keep every matching row, and with full stats it must prune."""
    wh = str(tmp_path)
    opts = {} if stats_mode == "default" else {"metadata.stats-mode": "full"}
    pp_create_table(wh, "db.app", FILTER_SCHEMA, partition_by=["part"], options={**opts, "bucket": "-1"})
    pp_create_table(
        wh,
        "db.pk",
        FILTER_SCHEMA,
        primary_key=["part", "id"],
        partition_by=["part"],
        options={**opts, "bucket": "2"},
    )
    chunks = [filter_rows(lo, lo + 60) for lo in range(0, 300, 60)]
    for c in chunks:
        pp_write(wh, "db.app", c)
        pp_write(wh, "db.pk", c)
    data = pa.concat_tables(chunks)
    cat = lakelog.Catalog(wh)
    for ident in ("db.app", "db.pk"):
        t = cat.get_table(ident)
        for name, _pred, expr in PREDICATES:
            assert_same_rows(t.to_arrow(filter=expr), data.filter(expr), f"lakelog filter {name} on {ident}")
    app = cat.get_table("db.app")
    narrow = (pc.field("id") >= 150) & (pc.field("id") <= 170)
    kept = sum(len(s.files) for s in app.plan(filter=narrow))
    assert kept == (2 if stats_mode == "full" else 10)


def test_tags_and_expiration_across_writers(warehouse: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    t = lakelog.Catalog(warehouse).create_table("db.t", schema, primary_key=["id"], options={"bucket": "2"})
    for i in range(4):
        t.write(pa.table({"id": [i, i + 1], "v": [f"s{i}"] * 2}, schema=schema))
    t.create_tag("second", 2)
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    assert [s.id for s in t.snapshots()] == [4]
    tagged = pp_table(warehouse, "db.t").copy({"scan.tag-name": "second"})
    rb = tagged.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert canon(got) == [(0, "s0"), (1, "s1"), (2, "s1")]
    assert canon(pp_read(warehouse, "db.t")) == canon(t.to_arrow())
    # a tag pypaimon creates is read by lakelog
    pp_table(warehouse, "db.t").create_tag("from_pypaimon", 4)
    assert t.tags() == {"second": 2, "from_pypaimon": 4}
    assert canon(t.to_arrow(tag="from_pypaimon")) == canon(t.to_arrow())
    assert canon(t.to_arrow(tag="second")) == canon(got)


# ---- merge engines --------------------------------------------------------------------------------------

ENGINE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("b", pa.int64())])
ENGINES: list[tuple[str, dict[str, str]]] = [
    ("partial_update", {"merge-engine": "partial-update"}),
    ("aggregation_sum", {"merge-engine": "aggregation", "fields.b.aggregate-function": "sum"}),
    ("sequence_field", {"sequence.field": "b"}),
    ("sequence_field_descending", {"sequence.field": "b", "sequence.field.sort-order": "descending"}),
]


@pytest.mark.parametrize("writer", ["lakelog", "pypaimon"])
@pytest.mark.parametrize("name,opts", ENGINES, ids=[e[0] for e in ENGINES])
def test_merge_engines_read_the_same(warehouse: str, name: str, opts: dict[str, str], writer: str) -> None:
    batches = [
        pa.table({"id": [1, 2, 3], "a": ["x", None, "z"], "b": [4, 2, None]}, schema=ENGINE_SCHEMA),
        pa.table({"id": [1, 2, 3], "a": [None, "y", None], "b": [None, 5, 1]}, schema=ENGINE_SCHEMA),
        pa.table({"id": [3, 4], "a": ["z2", "w"], "b": [0, 7]}, schema=ENGINE_SCHEMA),
    ]
    options = {"bucket": "2", **opts}
    if writer == "lakelog":
        t = lakelog.Catalog(warehouse).create_table(
            "db.t", ENGINE_SCHEMA, primary_key=["id"], options=options
        )
        for b in batches:
            t.write(b)
    else:
        pp_create_table(warehouse, "db.t", ENGINE_SCHEMA, primary_key=["id"], options=options)
        for b in batches:
            pp_write(warehouse, "db.t", b)
        t = lakelog.Catalog(warehouse).get_table("db.t")
    theirs = pp_read(warehouse, "db.t")
    assert_same_rows(t.to_arrow(), theirs, f"{name} written by {writer}")
    t.compact(full=True)
    assert_same_rows(pp_read(warehouse, "db.t"), theirs, f"{name} after lakelog's compaction")
    assert_same_rows(t.to_arrow(), theirs, f"{name} after lakelog's compaction (lakelog)")


# ---- dynamic bucket mode of primary-key tables ------------------------------------------------------------


def test_dynamic_bucket_primary_key_tables_stay_writable_by_pypaimon(tmp_path: Any) -> None:
    """A dynamic-bucket (bucket = -1) primary-key table stays writable by pypaimon after lakelog
    wrote it, and the other way round (tests/test_interop_pypaimon_buckets.py goes further)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string())])

    def rows(ids: range, v: str) -> pa.Table:
        return pa.table({"id": list(ids), "a": [v] * len(ids)}, schema=schema)

    ours = str(tmp_path / "ours")
    t = lakelog.Catalog(ours).create_table("db.t", schema, primary_key=["id"], options={"bucket": "-1"})
    t.write(rows(range(20), "ll"))
    pp_write(ours, "db.t", rows(range(10, 30), "pp"))
    assert sorted(pp_read(ours, "db.t").column("id").to_pylist()) == list(range(30))

    theirs = str(tmp_path / "theirs")
    pp_create_table(theirs, "db.t", schema, primary_key=["id"], options={"bucket": "-1"})
    pp_write(theirs, "db.t", rows(range(20), "pp"))
    t = lakelog.Catalog(theirs).get_table("db.t")
    assert canon(t.to_arrow()) == canon(rows(range(20), "pp"))  # reading is fine
    t.write(rows(range(10, 30), "ll"))
    pp_write(theirs, "db.t", rows(range(0, 30), "pp2"))
    got = pp_read(theirs, "db.t")
    assert canon(got) == canon(rows(range(30), "pp2"))
    assert canon(t.to_arrow()) == canon(got)


# ---- changelog producers: pypaimon streams lakelog's changelog files ---------------------------------------


def _pp_stream_changelog(warehouse: str, plans: int) -> pa.Table:
    """Changes pypaimon's streaming scan reads from snapshot 1 on (``plans`` follow-up plans), with
    their row kinds; fails instead of blocking when fewer plans come."""
    import threading

    t = pp_table(warehouse, "db.t")
    srb = t.new_stream_read_builder().with_include_row_kind(True)
    scan = srb.new_streaming_scan()
    scan.next_snapshot_id = 1  # stream every snapshot, not the latest state first
    read = srb.new_read()
    out: list[pa.Table] = []

    def consume() -> None:
        for plan in scan.stream_sync():
            out.append(read.to_arrow(plan.splits()))
            if len(out) == plans:
                return

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    th.join(timeout=30)
    assert len(out) == plans, f"pypaimon streamed {len(out)} plans, expected {plans}"
    return pa.concat_tables(out)


# a changelog made by compaction, at every commit (lookup; full-compaction without
# 'full-compaction.delta-commits' full-compacts at every commit, as Paimon's sink does)
COMPACTED_CHANGELOG = [
    ("+I", 1, "x"),
    ("+I", 2, "y"),
    ("+I", 3, "z"),
    ("-U", 2, "y"),
    ("+U", 2, "y2"),
    ("+I", 4, "w"),
    ("-D", 3, "z"),
]


@pytest.mark.parametrize(
    "producer,expected",
    [
        (
            "input",
            [
                ("+I", 1, "x"),
                ("+I", 2, "y"),
                ("+I", 3, "z"),
                ("+I", 2, "y2"),
                ("+I", 4, "w"),
                ("-D", 3, None),
            ],
        ),
        ("lookup", COMPACTED_CHANGELOG),
        ("full-compaction", COMPACTED_CHANGELOG),
    ],
)
def test_pypaimon_streams_lakelog_changelog(warehouse: str, producer: str, expected: list[Any]) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string())])
    t = lakelog.Catalog(warehouse).create_table(
        "db.t", schema, primary_key=["id"], options={"bucket": "2", "changelog-producer": producer}
    )
    t.write(pa.table({"id": [1, 2, 3], "a": ["x", "y", "z"]}, schema=schema))
    t.write(pa.table({"id": [2, 4], "a": ["y2", "w"]}, schema=schema))
    t.delete(pa.table({"id": [3]}))
    if producer == "full-compaction":
        t.compact(full=True)
    with_changelog = [s for s in t.snapshots() if s.changelog_manifest_list]
    got = _pp_stream_changelog(warehouse, len(with_changelog))
    assert got.column_names[0] == "_row_kind"
    assert canon(got) == sorted(expected, key=repr)


# ---- timestamps beside TIMESTAMP(9): INT96 and INT64 in one file --------------------------------------
BESIDE_NANOS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("ts0", pa.timestamp("s")),
        ("ts3", pa.timestamp("ms")),
        ("ts6", pa.timestamp("us")),
        ("ts9", pa.timestamp("ns")),
        ("ltz0", pa.timestamp("s", tz="UTC")),
        ("ltz6", pa.timestamp("us", tz="UTC")),
        ("ltz9", pa.timestamp("ns", tz="UTC")),
        ("arr6", pa.list_(pa.timestamp("us"))),
        ("row", pa.struct([("a", pa.timestamp("ns")), ("b", pa.timestamp("ms"))])),
    ]
)


def beside_nanos_rows(ids: list[int]) -> pa.Table:
    """TIMESTAMP(0..6) over years 0001..9999 (stored as INT64); TIMESTAMP(9) anywhere in Arrow's
    nanosecond range (stored as INT96)."""
    far = [dt.datetime(1, 1, 1, 0, 0, 1), dt.datetime(1600, 1, 1, 0, 0, 1, 250000),
           dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2024, 2, 29, 12),
           dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None]
    nanos = [None, -1, 1_700_000_000_123_456_789, -(2**62) + 7, 2**63 - 1]
    w = [far[i % len(far)] for i in ids]
    n = [nanos[i % len(nanos)] for i in ids]
    s = [None if v is None else v.replace(microsecond=0) for v in w]
    return pa.table(
        {
            "id": ids,
            "ts0": pa.array(s, pa.timestamp("s")),
            "ts3": pa.array(w, pa.timestamp("us")).cast(pa.timestamp("ms"), safe=False),
            "ts6": w,
            "ts9": pa.array(n, pa.int64()).view(pa.timestamp("ns")),
            "ltz0": pa.array(s, pa.timestamp("s")).cast(pa.timestamp("s", tz="UTC")),
            "ltz6": pa.array(w, pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC")),
            "ltz9": pa.array(n, pa.int64()).view(pa.timestamp("ns", tz="UTC")),
            "arr6": [None if v is None else [v, None] for v in w],
            "row": pa.StructArray.from_arrays(
                [pa.array(n, pa.int64()).view(pa.timestamp("ns")),
                 pa.array(w, pa.timestamp("us")).cast(pa.timestamp("ms"), safe=False)],
                fields=list(BESIDE_NANOS.field("row").type),
            ),
        },
        schema=BESIDE_NANOS,
    )


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_pypaimon_reads_timestamps_lakelog_stores_beside_nanoseconds(warehouse: str, kind: str) -> None:
    pk = ["id"] if kind == "pk" else None
    t = lakelog.Catalog(warehouse).create_table(
        "db.ns", BESIDE_NANOS, primary_key=pk, options={"bucket": "2"} if pk else {}
    )
    first, second = beside_nanos_rows(list(range(40))), beside_nanos_rows(list(range(30, 70)))
    t.write(first)
    got = pp_read(warehouse, "db.ns")
    assert got.schema.equals(BESIDE_NANOS), got.schema
    assert_same_rows(got, first, "pypaimon reading INT96 and INT64 timestamps")
    t.write(second)
    want = pa.concat_tables([first.filter(pc.field("id") < 30), second]) if pk else pa.concat_tables([first, second])
    assert_same_rows(t.to_arrow(), want, "lakelog reading its own table")
    got = pp_read(warehouse, "db.ns")
    if pk:  # pypaimon's merging read keeps microseconds only (so it did with lakelog's INT64 nanoseconds)
        nanos = ["ts9", "ltz9", "row"]
        assert_same_rows(got.drop_columns(nanos), want.drop_columns(nanos), "pypaimon merging lakelog's files")
        for c in ("ts9", "ltz9"):
            floor = [None if v is None else v // 1000 * 1000 for v in want.column(c).cast(pa.int64()).to_pylist()]
            assert sorted(got.column(c).cast(pa.int64()).to_pylist(), key=repr) == sorted(floor, key=repr)
    else:
        assert_same_rows(got, want, "pypaimon reading INT96 and INT64 timestamps")
    # filters on a timestamp column beside an INT96 column, and on the INT96 column
    cut = dt.datetime(1970, 1, 1)
    got = pp_read(warehouse, "db.ns", columns=["id", "ts6"], predicate=lambda b: b.less_than("ts6", cut))
    expect = want.filter(pc.field("ts6") < pa.scalar(cut, pa.timestamp("us")))
    assert canon(got) == canon(expect, ["id", "ts6"]) and got.num_rows > 0
    got = pp_read(warehouse, "db.ns", columns=["id", "ts9"], predicate=lambda b: b.less_than("ts9", cut))
    expect = want.filter(pc.field("ts9") < pa.scalar(cut, pa.timestamp("ns")))
    assert sorted(got.column("id").to_pylist()) == sorted(expect.column("id").to_pylist()) and got.num_rows > 0
