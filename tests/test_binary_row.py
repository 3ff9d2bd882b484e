"""BinaryRow encoding: layout unit tests, round trips, and byte-for-byte checks against pypaimon."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from lakelog.connector.errors import CorruptFileError, InvalidInputError, SchemaError
from lakelog.connector.format.binary_row import (
    EMPTY_ROW,
    deserialize_row,
    from_binary_row,
    null_bits_size,
    serialize_row,
    to_binary_row,
)
from lakelog.connector.format.types import DataField, DataType

from .conftest import requires_pypaimon

STRING = DataType("VARCHAR", length=2147483647)
BYTES = DataType("VARBINARY", length=2147483647)
UTC = dt.timezone.utc

# (pypaimon type string, lakelog type, arrow type, sample values) -- every primitive type
CASES: list[tuple[str, DataType, pa.DataType, list[Any]]] = [
    ("BOOLEAN", DataType("BOOLEAN"), pa.bool_(), [True, False]),
    ("TINYINT", DataType("TINYINT"), pa.int8(), [-128, 5, 127]),
    ("SMALLINT", DataType("SMALLINT"), pa.int16(), [-32768, 7, 32767]),
    ("INT", DataType("INT"), pa.int32(), [-5, 0, 2**31 - 1]),
    ("BIGINT", DataType("BIGINT"), pa.int64(), [-(2**63), 42, 2**63 - 1]),
    ("FLOAT", DataType("FLOAT"), pa.float32(), [-1.5, 3.25]),
    ("DOUBLE", DataType("DOUBLE"), pa.float64(), [-0.1, 1e300]),
    (
        "DECIMAL(10, 2)",
        DataType("DECIMAL", precision=10, scale=2),
        pa.decimal128(10, 2),
        [Decimal("-12.34"), Decimal("99999999.99")],
    ),
    (
        "DECIMAL(18, 0)",
        DataType("DECIMAL", precision=18, scale=0),
        pa.decimal128(18, 0),
        [Decimal("-999999999999999999"), Decimal("5")],
    ),
    (
        "DECIMAL(20, 4)",
        DataType("DECIMAL", precision=20, scale=4),
        pa.decimal128(20, 4),
        [Decimal("-1234567890123456.7891"), Decimal("0.0001"), Decimal("0.0000")],
    ),
    (
        "DECIMAL(38, 10)",
        DataType("DECIMAL", precision=38, scale=10),
        pa.decimal128(38, 10),
        [Decimal("-9999999999999999999999999999.9999999999"), Decimal("12.5000000000")],
    ),
    ("CHAR(5)", DataType("CHAR", length=5), pa.string(), ["ab", "abcde"]),
    (
        "VARCHAR(30)",
        DataType("VARCHAR", length=30),
        pa.string(),
        ["", "seven77", "eight888", "a much longer string value"],
    ),
    ("STRING", STRING, pa.string(), ["ü", "héllo wörld ✓"]),
    ("BINARY(4)", DataType("BINARY", length=4), pa.binary(), [b"\x00\x01\x02\x03", b"\xff\xfe\xfd\xfc"]),
    ("BYTES", BYTES, pa.binary(), [b"", b"\x00" * 9, b"xyz"]),
    ("DATE", DataType("DATE"), pa.date32(), [dt.date(1969, 12, 31), dt.date(2024, 2, 29)]),
    ("TIME(0)", DataType("TIME", precision=0), pa.time32("ms"), [dt.time(0, 0), dt.time(23, 59, 59, 999000)]),
    (
        "TIMESTAMP(3)",
        DataType("TIMESTAMP", precision=3),
        pa.timestamp("ms"),
        [dt.datetime(1969, 12, 31, 23, 59, 59, 999000), dt.datetime(2024, 1, 2, 3, 4, 5, 678000)],
    ),
    (
        "TIMESTAMP(6)",
        DataType("TIMESTAMP", precision=6),
        pa.timestamp("us"),
        [dt.datetime(1960, 1, 1, 0, 0, 0, 1), dt.datetime(2024, 1, 2, 3, 4, 5, 678912)],
    ),
    (
        "TIMESTAMP_LTZ(3)",
        DataType("TIMESTAMP_LTZ", precision=3),
        pa.timestamp("ms", tz="UTC"),
        [dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), dt.datetime(1950, 5, 6, tzinfo=UTC)],
    ),
    (
        "TIMESTAMP_LTZ(6)",
        DataType("TIMESTAMP_LTZ", precision=6),
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(2024, 1, 2, 3, 4, 5, 678912, tzinfo=UTC)],
    ),
]
CASE_IDS = [case[0] for case in CASES]


# ---------------------------------------------------------------------------------------------
# layout


def test_empty_row_is_arity_zero_with_one_header_word() -> None:
    assert EMPTY_ROW == b"\x00" * 12
    assert serialize_row([], []) == EMPTY_ROW
    assert to_binary_row([], []) == b"\x00" * 8
    assert deserialize_row(EMPTY_ROW, []) == ()
    assert deserialize_row(b"", [DataType("INT")]) == ()
    assert deserialize_row(EMPTY_ROW, [DataType("INT")]) == ()


@pytest.mark.parametrize(("arity", "size"), [(0, 8), (1, 8), (56, 8), (57, 16), (120, 16), (121, 24)])
def test_header_size(arity: int, size: int) -> None:
    assert null_bits_size(arity) == size


def test_bigint_layout() -> None:
    row = serialize_row([1], [DataType("BIGINT")])
    assert row == b"\x00\x00\x00\x01" + b"\x00" * 8 + struct.pack("<q", 1)


def test_null_bit_is_field_index_plus_eight() -> None:
    types = [DataType("INT")] * 10
    values: list[Any] = [None if i in (0, 9) else i for i in range(10)]
    row = to_binary_row(values, types)
    assert row[0] == 0  # row kind +I
    assert row[1] == 0b0000_0001  # field 0 -> bit 8
    assert row[2] == 0b0000_0010  # field 9 -> bit 17
    assert row[8:16] == b"\x00" * 8  # a null slot is zeroed
    assert from_binary_row(row, types) == tuple(values)


def test_inline_and_variable_strings() -> None:
    inline = to_binary_row(["abc"], [STRING])
    assert inline[8:16] == b"abc" + b"\x00" * 4 + bytes([0x83])
    seven = to_binary_row(["1234567"], [STRING])
    assert seven[8:16] == b"1234567" + bytes([0x87])
    long = to_binary_row(["12345678", "abcdefghij"], [STRING, STRING])
    fixed = 8 + 16
    first, second = struct.unpack_from("<QQ", long, 8)
    assert first == (fixed << 32) | 8
    assert second == ((fixed + 8) << 32) | 10
    assert long[fixed:] == b"12345678" + b"abcdefghij" + b"\x00" * 6
    assert len(long) % 8 == 0


def test_non_compact_decimal_and_timestamp_layout() -> None:
    dec = DataType("DECIMAL", precision=20, scale=2)
    ts = DataType("TIMESTAMP", precision=6)
    row = to_binary_row([Decimal("-1.28"), dt.datetime(1970, 1, 1, 0, 0, 1, 2003)], [dec, ts])
    fixed = 8 + 16
    dec_slot, ts_slot = struct.unpack_from("<QQ", row, 8)
    # -128 unscaled: one byte, like Java's BigInteger.toByteArray() (pypaimon writes two)
    assert dec_slot == (fixed << 32) | 1
    assert row[fixed : fixed + 16] == b"\x80" + b"\x00" * 15
    assert ts_slot == ((fixed + 16) << 32) | 3000  # nanos of millisecond
    assert struct.unpack_from("<q", row, fixed + 16)[0] == 1002
    assert len(row) == fixed + 16 + 8


def test_null_non_compact_fields_keep_their_variable_space() -> None:
    """Java's RowHelper writes a null non-compact decimal/timestamp with its variable part reserved."""
    dec = DataType("DECIMAL", precision=38, scale=0)
    ts = DataType("TIMESTAMP_LTZ", precision=9)
    row = to_binary_row([None, None, "x"], [dec, ts, STRING])
    fixed = 8 + 24
    assert row[1] == 0b11
    dec_slot, ts_slot = struct.unpack_from("<QQ", row, 8)
    assert dec_slot == fixed << 32
    assert ts_slot == (fixed + 16) << 32
    assert len(row) == fixed + 24
    assert from_binary_row(row, [dec, ts, STRING]) == (None, None, "x")


def test_decimal_rounds_half_up_and_checks_precision() -> None:
    dec = DataType("DECIMAL", precision=5, scale=2)
    assert deserialize_row(serialize_row([Decimal("1.005")], [dec]), [dec]) == (Decimal("1.01"),)
    assert deserialize_row(serialize_row([7], [dec]), [dec]) == (Decimal("7.00"),)
    with pytest.raises(InvalidInputError, match="field 0"):
        serialize_row([Decimal("1000.00")], [dec])
    with pytest.raises(InvalidInputError):
        serialize_row([1.5], [dec])


def test_timestamp_sub_millisecond_and_pandas_nanos() -> None:
    pd = pytest.importorskip("pandas")
    ts9 = DataType("TIMESTAMP", precision=9)
    value = pd.Timestamp("1969-12-31 23:59:59.999999123")
    row = to_binary_row([value], [ts9])
    slot = struct.unpack_from("<Q", row, 8)[0]
    assert slot & 0xFFFFFFFF == 999123
    assert struct.unpack_from("<q", row, 16)[0] == -1
    decoded = from_binary_row(row, [ts9])[0]
    assert decoded == dt.datetime(1969, 12, 31, 23, 59, 59, 999999)


def test_ltz_naive_value_is_utc_and_aware_value_is_converted() -> None:
    ltz = DataType("TIMESTAMP_LTZ", precision=3)
    naive = to_binary_row([dt.datetime(2020, 1, 1, 12)], [ltz])
    aware = to_binary_row([dt.datetime(2020, 1, 1, 14, tzinfo=dt.timezone(dt.timedelta(hours=2)))], [ltz])
    assert naive == aware
    assert from_binary_row(naive, [ltz]) == (dt.datetime(2020, 1, 1, 12, tzinfo=UTC),)


@pytest.mark.parametrize(("pt", "data_type", "arrow_type", "values"), CASES, ids=CASE_IDS)
def test_round_trip(pt: str, data_type: DataType, arrow_type: pa.DataType, values: list[Any]) -> None:
    for value in [*values, None]:
        assert deserialize_row(serialize_row([value], [data_type]), [data_type]) == (value,)
    types = [data_type, STRING, data_type]
    row = [values[0], "a string longer than seven", values[-1]]
    assert deserialize_row(serialize_row(row, types), types) == tuple(row)


def test_wide_row_round_trip() -> None:
    types = [case[1] for case in CASES] * 4
    values = [case[3][i % len(case[3])] if i % 5 else None for i, case in enumerate(CASES * 4)]
    data = serialize_row(values, types)
    assert struct.unpack(">i", data[:4])[0] == len(types)
    assert deserialize_row(data, types) == tuple(values)


def test_errors() -> None:
    nested = DataType("ARRAY", element=DataType("INT"))
    with pytest.raises(SchemaError, match="ARRAY"):
        serialize_row([[1]], [nested])
    row_type = DataType("ROW", fields=(DataField(0, "a", DataType("INT")),))
    with pytest.raises(SchemaError, match="ROW"):
        deserialize_row(serialize_row([1], [DataType("INT")]), [row_type])
    with pytest.raises(InvalidInputError, match="TINYINT"):
        serialize_row([300], [DataType("TINYINT")])
    with pytest.raises(InvalidInputError):
        serialize_row(["x"], [DataType("INT")])
    with pytest.raises(InvalidInputError):
        serialize_row([b"x"], [STRING])
    with pytest.raises(InvalidInputError):
        serialize_row([dt.datetime(2020, 1, 1, tzinfo=UTC)], [DataType("TIMESTAMP", precision=3)])
    with pytest.raises(InvalidInputError):
        serialize_row([1, 2], [DataType("INT")])
    with pytest.raises(CorruptFileError, match="arity"):
        deserialize_row(serialize_row([1, 2], [DataType("INT")] * 2), [DataType("INT")])
    with pytest.raises(CorruptFileError):
        deserialize_row(b"\x00\x00\x00\x01\x00", [DataType("INT")])
    bad_offset = bytearray(serialize_row(["a long string value"], [STRING]))
    struct.pack_into("<Q", bad_offset, 12, (4096 << 32) | 19)
    with pytest.raises(CorruptFileError, match="field 0"):
        deserialize_row(bytes(bad_offset), [STRING])
    bad_utf8 = serialize_row([b"\xff\xfe"], [BYTES])
    with pytest.raises(CorruptFileError):
        deserialize_row(bad_utf8, [STRING])


# ---------------------------------------------------------------------------------------------
# pypaimon as the oracle



def _catalog(tmp_path: Path) -> Any:
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("db", True)
    return catalog


def _write_table(
    catalog: Any,
    name: str,
    columns: list[tuple[str, str]],
    data: pa.Table,
    partition_keys: list[str] | None = None,
    primary_keys: list[str] | None = None,
    options: dict[str, str] | None = None,
) -> None:
    from pypaimon import Schema
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.data_types import DataField as PaimonField

    fields = [PaimonField(i, col, AtomicType(type_string)) for i, (col, type_string) in enumerate(columns)]
    schema = Schema(fields=fields, partition_keys=partition_keys, primary_keys=primary_keys, options=options)
    catalog.create_table(f"db.{name}", schema, False)
    table = catalog.get_table(f"db.{name}")
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    commit = builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _manifest_entries(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    manifest_dir = tmp_path / "warehouse" / "db.db" / name / "manifest"
    for path in sorted(manifest_dir.glob("manifest-*")):
        if path.name.startswith("manifest-list"):
            continue
        with path.open("rb") as handle:
            entries.extend(dict(record) for record in fastavro.reader(handle))  # type: ignore[arg-type]
    assert entries, f"no manifest entries for {name}"
    return entries


@requires_pypaimon
def test_unpartitioned_table_partition_is_empty_row(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
    _write_table(catalog, "plain", [("id", "BIGINT"), ("v", "STRING")], data, options={"bucket": "-1"})
    for entry in _manifest_entries(tmp_path, "plain"):
        assert entry["_PARTITION"] == EMPTY_ROW
        # value stats are off by default in pypaimon: both bounds are the empty row
        assert entry["_FILE"]["_VALUE_STATS"]["_MIN_VALUES"] == EMPTY_ROW


@requires_pypaimon
@pytest.mark.parametrize(("pt", "data_type", "arrow_type", "values"), CASES, ids=CASE_IDS)
def test_partition_bytes_match_pypaimon(
    tmp_path: Path, pt: str, data_type: DataType, arrow_type: pa.DataType, values: list[Any]
) -> None:
    catalog = _catalog(tmp_path)
    data = pa.table({"k": pa.array(values, arrow_type), "v": pa.array(range(len(values)), pa.int64())})
    _write_table(
        catalog, "t", [("k", pt), ("v", "BIGINT")], data, partition_keys=["k"], options={"bucket": "-1"}
    )
    written = sorted(entry["_PARTITION"] for entry in _manifest_entries(tmp_path, "t"))
    assert written == sorted(serialize_row([value], [data_type]) for value in values)
    assert sorted(deserialize_row(p, [data_type]) for p in written) == sorted((value,) for value in values)


@requires_pypaimon
@pytest.mark.parametrize(("pt", "data_type", "arrow_type", "values"), CASES, ids=CASE_IDS)
def test_min_max_key_and_key_stats_match_pypaimon(
    tmp_path: Path, pt: str, data_type: DataType, arrow_type: pa.DataType, values: list[Any]
) -> None:
    catalog = _catalog(tmp_path)
    data = pa.table({"k": pa.array(values, arrow_type), "v": pa.array(range(len(values)), pa.int64())})
    _write_table(
        catalog, "t", [("k", pt), ("v", "BIGINT")], data, primary_keys=["k"], options={"bucket": "1"}
    )
    (entry,) = _manifest_entries(tmp_path, "t")
    meta = entry["_FILE"]
    low, high = serialize_row([min(values)], [data_type]), serialize_row([max(values)], [data_type])
    assert meta["_MIN_KEY"] == low
    assert meta["_MAX_KEY"] == high
    assert meta["_KEY_STATS"]["_MIN_VALUES"] == low
    assert meta["_KEY_STATS"]["_MAX_VALUES"] == high
    assert deserialize_row(meta["_MIN_KEY"], [data_type]) == (min(values),)


@requires_pypaimon
def test_composite_key_matches_pypaimon(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    data = pa.table(
        {
            "a": pa.array(["x", "a long key value"], pa.string()),
            "b": pa.array([3, -4], pa.int32()),
            "c": pa.array([Decimal("1.5"), Decimal("-2.25")], pa.decimal128(25, 2)),
            "v": pa.array([1.0, 2.0]),
        }
    )
    columns = [("a", "STRING"), ("b", "INT"), ("c", "DECIMAL(25, 2)"), ("v", "DOUBLE")]
    _write_table(catalog, "t", columns, data, primary_keys=["a", "b", "c"], options={"bucket": "1"})
    (entry,) = _manifest_entries(tmp_path, "t")
    types = [STRING, DataType("INT"), DataType("DECIMAL", precision=25, scale=2)]
    rows = sorted(zip(*(data.column(name).to_pylist() for name in "abc")))
    assert entry["_FILE"]["_MIN_KEY"] == serialize_row(list(rows[0]), types)
    assert entry["_FILE"]["_MAX_KEY"] == serialize_row(list(rows[-1]), types)


@requires_pypaimon
def test_value_stats_match_pypaimon(tmp_path: Path) -> None:
    """All types in one row with nulls; pypaimon's full stats mode writes min/max of every column."""
    catalog = _catalog(tmp_path)
    columns: dict[str, pa.Array] = {}
    for i, (_, data_type, arrow_type, values) in enumerate(CASES):
        column = (list(values) + [None] * 4)[:4]
        compact = not (
            (data_type.root == "DECIMAL" and (data_type.precision or 10) > 18)
            or (data_type.root.startswith("TIMESTAMP") and (data_type.precision or 6) > 3)
        )
        if i % 3 == 0 and compact:
            column = [None] * 4  # all-null column: min and max are null
        columns[f"c{i}"] = pa.array(column, arrow_type)
    _write_table(
        catalog,
        "s",
        [(f"c{i}", case[0]) for i, case in enumerate(CASES)],
        pa.table(columns),
        options={"bucket": "-1", "metadata.stats-mode": "full"},
    )
    (entry,) = _manifest_entries(tmp_path, "s")
    stats = entry["_FILE"]["_VALUE_STATS"]
    types = [case[1] for case in CASES]
    non_null = [[v for v in columns[f"c{i}"].to_pylist() if v is not None] for i in range(len(CASES))]
    mins = [min(values) if values else None for values in non_null]
    maxs = [max(values) if values else None for values in non_null]
    assert stats["_MIN_VALUES"] == serialize_row(mins, types)
    assert stats["_MAX_VALUES"] == serialize_row(maxs, types)
    assert stats["_NULL_COUNTS"] == [4 - len(values) for values in non_null]


@requires_pypaimon
def test_decodes_pypaimon_null_non_compact_layout(tmp_path: Path) -> None:
    """pypaimon writes a null non-compact decimal/timestamp without reserving space (Java reserves it);
    both layouts decode to the same values."""
    catalog = _catalog(tmp_path)
    data = pa.table(
        {
            "d": pa.array([None, None], pa.decimal128(30, 3)),
            "t": pa.array([None, None], pa.timestamp("us")),
            "s": pa.array(["a long string value", "another long string"]),
        }
    )
    _write_table(
        catalog,
        "n",
        [("d", "DECIMAL(30, 3)"), ("t", "TIMESTAMP(6)"), ("s", "STRING")],
        data,
        options={"bucket": "-1", "metadata.stats-mode": "full"},
    )
    (entry,) = _manifest_entries(tmp_path, "n")
    types = [DataType("DECIMAL", precision=30, scale=3), DataType("TIMESTAMP", precision=6), STRING]
    stats = entry["_FILE"]["_VALUE_STATS"]
    assert deserialize_row(stats["_MIN_VALUES"], types) == (None, None, "a long string value")
    assert deserialize_row(stats["_MAX_VALUES"], types) == (None, None, "another long string")


def test_null_nested_fields_encode_as_null_bits() -> None:
    # value statistics of ARRAY / MAP / ROW columns are null; the row must still encode (interop finding)
    nested = [
        DataType("ARRAY", element=DataType("INT")),
        DataType("MAP", key=STRING, value=DataType("BIGINT")),
        DataType("ROW", fields=(DataField(0, "a", DataType("INT")),)),
    ]
    types = [DataType("BIGINT"), *nested]
    data = serialize_row([7, None, None, None], types)
    assert len(data) == 4 + 8 + 4 * 8
    assert data[4 + 1] == 0b1110  # null bits of fields 1..3 (bit index = field + 8)
    assert deserialize_row(data, types) == (7, None, None, None)
    with pytest.raises(SchemaError, match="ARRAY"):
        serialize_row([7, [1], None, None], types)
