"""Writes hold every value exactly or refuse it by column: decimals, time zones, TIME precision,
length limits (the rules of lakelog.connector.table.coercion, in the README's "Values")."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import SchemaError
from lakelog.connector.format.types import DataType

UTC = dt.timezone.utc


def _table(catalog: lakelog.Catalog, **columns: pa.DataType) -> lakelog.Table:
    fields = [pa.field("id", pa.int64(), False)] + [pa.field(n, t) for n, t in columns.items()]
    return catalog.create_table("db.t", pa.schema(fields), primary_key=["id"])


def _write(t: lakelog.Table, **columns: Any) -> None:
    n = len(next(iter(columns.values())))
    t.write(pa.table({"id": list(range(n)), **columns}))


def _col(t: lakelog.Table, name: str) -> list[Any]:
    return t.to_arrow().sort_by("id").column(name).to_pylist()


# ---- DECIMAL -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [123.456, 1e-9, 0.125, 1.005, float("nan"), float("inf"), 1e12])
def test_floats_that_are_not_decimals_of_the_scale_are_refused(catalog: lakelog.Catalog, value: float) -> None:
    t = _table(catalog, v=pa.decimal128(10, 2))
    with pytest.raises(SchemaError, match=r"column 'v'.*DECIMAL\(10, 2\)"):
        _write(t, v=[1.5, value])
    assert t.latest_snapshot() is None


def test_floats_equal_to_a_decimal_of_the_scale_are_stored_as_that_decimal(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, v=pa.decimal128(10, 2), w=pa.decimal128(38, 9))
    values = [0.1, 123.45, -99999999.99, 0.0, 2.67, None]
    _write(t, v=values, w=[0.1, 1e-9, 123456789.123456789, 0.3, 7.0, None])
    assert _col(t, "v") == [D("0.10"), D("123.45"), D("-99999999.99"), D("0.00"), D("2.67"), None]
    assert _col(t, "w")[:2] == [D("0.100000000"), D("0.000000001")]
    # float32 input: its own shortest spelling decides
    _write(t, v=pa.array([0.1, 19.99], pa.float32()), w=pa.array([0.5, 0.25], pa.float32()))
    assert _col(t, "v")[:2] == [D("0.10"), D("19.99")]


def test_integers_and_decimals_go_in_when_they_fit_without_rounding(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, v=pa.decimal128(10, 2))
    _write(t, v=pa.array([1, -5, 99_999_999], pa.int64()))  # Arrow alone refuses int64 -> (10, 2)
    assert _col(t, "v") == [D("1.00"), D("-5.00"), D("99999999.00")]
    with pytest.raises(SchemaError, match=r"'v'.*precision 10"):
        _write(t, v=pa.array([100_000_000], pa.int64()))
    _write(t, v=pa.array([D("1.230"), D("7")]))
    assert _col(t, "v")[:2] == [D("1.23"), D("7.00")]
    with pytest.raises(SchemaError, match=r"'v'.*data loss"):
        _write(t, v=pa.array([D("1.234")]))


def test_nested_floats_into_decimals_are_checked(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, xs=pa.list_(pa.decimal128(6, 2)), s=pa.struct([("d", pa.decimal128(6, 1))]))
    _write(t, xs=[[1.5, 2.25]], s=[{"d": 0.5}])
    assert _col(t, "xs") == [[D("1.50"), D("2.25")]]
    with pytest.raises(SchemaError, match=r"column 'xs\[\]'.*2\.125"):
        _write(t, xs=[[1.5], [2.125]], s=[{"d": 0.5}, None])
    with pytest.raises(SchemaError, match=r"column 's\.d'.*0\.25"):
        _write(t, xs=[None], s=[{"d": 0.25}])


# ---- TIMESTAMP and TIMESTAMP WITH LOCAL TIME ZONE ------------------------------------------------------
def test_time_zone_aware_values_into_timestamp_are_refused_with_the_conversion(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, ts=pa.timestamp("us"))
    tokyo = pa.array([dt.datetime(2024, 1, 1, 0, 0, tzinfo=UTC)], pa.timestamp("us", tz="Asia/Tokyo"))
    with pytest.raises(SchemaError, match=r"column 'ts' is TIMESTAMP\(6\).*'Asia/Tokyo'.*local_timestamp"):
        _write(t, ts=tokyo)
    with pytest.raises(SchemaError, match="'ts'"):
        _write(t, ts=tokyo.cast(pa.timestamp("us", tz="UTC")))  # even UTC: a wall clock must be chosen
    # the suggested conversion: 00:00 UTC is 09:00 in Tokyo
    _write(t, ts=pc.local_timestamp(tokyo))
    assert _col(t, "ts") == [dt.datetime(2024, 1, 1, 9, 0)]


def test_naive_values_into_local_time_zone_timestamps_are_refused(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, ts=pa.timestamp("ms", tz="UTC"))
    naive = pa.array([dt.datetime(2024, 1, 1, 9, 0)], pa.timestamp("ms"))
    with pytest.raises(SchemaError, match=r"column 'ts' is TIMESTAMP\(3\) WITH LOCAL TIME ZONE.*assume_timezone"):
        _write(t, ts=naive)
    with pytest.raises(SchemaError, match="'ts'"):
        _write(t, ts=pa.array([dt.date(2024, 1, 1)], pa.date32()))
    # instants in any zone are fine; 09:00 in Tokyo is 00:00 UTC
    _write(t, ts=pc.assume_timezone(naive, "Asia/Tokyo"))
    assert _col(t, "ts") == [dt.datetime(2024, 1, 1, 0, 0, tzinfo=UTC)]


def test_pandas_time_zones_follow_the_same_rule(catalog: lakelog.Catalog) -> None:
    pd = pytest.importorskip("pandas")
    t = _table(catalog, ts=pa.timestamp("us"))
    frame = pd.DataFrame({"id": [1], "ts": pd.to_datetime(["2024-01-01 09:00"]).tz_localize("Europe/Berlin")})
    with pytest.raises(SchemaError, match="'Europe/Berlin'"):
        t.write(frame)
    t.write(pd.DataFrame({"id": [1], "ts": pd.to_datetime(["2024-01-01 09:00"])}))
    assert _col(t, "ts") == [dt.datetime(2024, 1, 1, 9, 0)]


def test_timestamp_precision_and_time_of_day_are_not_dropped(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, ts=pa.timestamp("ms"), day=pa.date32())
    fine = pa.array([dt.datetime(2024, 1, 1, 9, 0, 0, 123456)], pa.timestamp("us"))
    with pytest.raises(SchemaError, match=r"'ts'.*below the column's precision"):
        _write(t, ts=fine, day=[dt.date(2024, 1, 1)])
    with pytest.raises(SchemaError, match=r"column 'day' is DATE.*time of day"):
        _write(t, ts=[None], day=pa.array([dt.datetime(2024, 1, 1, 1, 0)], pa.timestamp("us")))
    _write(t, ts=[None], day=pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")))
    assert _col(t, "day") == [dt.date(2024, 1, 1)]


def test_nested_time_zones_are_checked(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, s=pa.struct([("ts", pa.timestamp("us"))]))
    aware = pa.array([{"ts": dt.datetime(2024, 1, 1, tzinfo=UTC)}], pa.struct([("ts", pa.timestamp("us", tz="UTC"))]))
    with pytest.raises(SchemaError, match=r"column 's\.ts' is TIMESTAMP\(6\)"):
        _write(t, s=aware)


# ---- TIME --------------------------------------------------------------------------------------------
def test_time64_columns_are_time_6_held_in_milliseconds_as_paimon_stores_time(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, tm=pa.time64("us"))
    assert t.store.schema.field("tm").type.precision == 6
    with pytest.raises(SchemaError, match=r"column 'tm'.*TIME\(6\).*below a millisecond.*milliseconds"):
        _write(t, tm=pa.array([dt.time(1, 2, 3, 456789)], pa.time64("us")))
    _write(t, tm=pa.array([dt.time(1, 2, 3, 456000)], pa.time64("us")))
    assert _col(t, "tm") == [dt.time(1, 2, 3, 456000)]
    _write(t, tm=pc.floor_temporal(pa.array([dt.time(1, 2, 3, 456789)], pa.time64("us")), unit="millisecond"))
    assert _col(t, "tm") == [dt.time(1, 2, 3, 456000)]


# ---- lengths -----------------------------------------------------------------------------------------
def test_binary_n_refuses_longer_values_and_keeps_shorter_ones_as_given(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, b=pa.binary(4))
    assert t.store.schema.field("b").type == DataType("BINARY", length=4)
    with pytest.raises(SchemaError, match=r"column 'b' is BINARY\(4\).*longer than 4 bytes: b'0123456789'"):
        _write(t, b=[b"abcd", b"0123456789"])
    _write(t, b=[b"abcd", b"ab"])
    assert _col(t, "b") == [b"abcd", b"ab"]  # no padding: Paimon (and pypaimon) store BINARY(n) as given
    pytest.importorskip("pypaimon")
    from .interop_util import pp_read

    got = pp_read(catalog.warehouse, "db.t").sort_by("id").column("b").to_pylist()
    assert got == [b"abcd", b"ab"]


@pytest.mark.parametrize("root", ["CHAR", "VARCHAR"])
def test_char_and_varchar_lengths_count_characters(catalog: lakelog.Catalog, root: str) -> None:
    t = _table(catalog, x=pa.int32())
    t.alter(lakelog.AddColumn("s", DataType(root, length=3)), lakelog.AddColumn("vb", DataType("VARBINARY", length=2)))
    _write(t, s=["\u00e9t\u00e9", "ab", None], vb=[b"xy", None, b""])  # 3 characters (6 bytes) fit
    assert _col(t, "s") == ["\u00e9t\u00e9", "ab", None]
    with pytest.raises(SchemaError, match=rf"column 's' is {root}\(3\).*longer than 3 characters: 'abcd'"):
        _write(t, s=["abcd"], vb=[None])
    with pytest.raises(SchemaError, match=r"column 'vb' is VARBINARY\(2\).*longer than 2 bytes"):
        _write(t, s=[None], vb=[b"xyz"])
    # the same rules for changes and deletes' values
    with pytest.raises(SchemaError, match="'s'"):
        t.stream_writer().write_changes(pa.table({"id": [9], "s": ["toolong"]}), [0])


def test_floats_beyond_float_range_are_refused(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, f=pa.float32())
    with pytest.raises(SchemaError, match=r"column 'f' is FLOAT.*1e\+40"):
        _write(t, f=[1.0, 1e40])
    _write(t, f=[0.1, float("inf"), None])  # rounding to the nearest FLOAT is kept, as CAST does
    got = _col(t, "f")
    assert got[1] == float("inf") and got[2] is None and abs(got[0] - 0.1) < 1e-7
