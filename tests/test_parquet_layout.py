"""The physical Parquet layout of data files (Paimon's, where pyarrow can write it) and reading every
layout back: INT96 timestamps exactly, files lakelog wrote before, the Thrift footer codec.

Paimon Java and pypaimon check the same files in tests/test_interop_paimon_java.py and
tests/test_interop_pypaimon.py; here lakelog checks itself and the bytes of the files.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError, UnrepresentableValueError
from lakelog.connector.format import parquet_footer, parquet_layout
from lakelog.connector.format import thrift_compact as tc
from lakelog.connector.format.data_file import DataFileWriter, read_data_file
from lakelog.connector.format.parquet_footer import read_footer
from lakelog.connector.format.parquet_layout import PhysicalLayout, WriteLayout
from lakelog.connector.format.types import DataType

UTC = dt.timezone.utc
OLD_LAYOUT = WriteLayout(field_ids=False, statistics="none", int96=False, decimal_as_integer=False)
BASE = 536870911  # Paimon's SpecialFields.STRUCTURED_TYPE_FIELD_ID_BASE


def data_files(root: Any) -> list[str]:
    return sorted(glob.glob(os.path.join(str(root), "**", "bucket-*", "*.parquet"), recursive=True))


def physical(path: str) -> dict[str, tuple[str, Optional[str]]]:
    """Leaf path -> (physical type, logical annotation or None)."""
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        c = schema.column(i)
        logical = str(c.logical_type)
        out[c.path] = (c.physical_type, None if logical == "None" else logical)
    return out


def field_ids(path: str) -> dict[str, int]:
    """Parquet field id of every named field (nested ones as dotted Arrow paths)."""
    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        name = prefix + f.name
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            out[name] = int(f.metadata[b"PARQUET:field_id"])
        t = f.type
        if pa.types.is_list(t):
            walk(t.value_field, name + ".")
        elif pa.types.is_map(t):
            walk(t.key_field, name + ".")
            walk(t.item_field, name + ".")
        elif pa.types.is_struct(t):
            for child in t:
                walk(child, name + ".")

    for f in pq.ParquetFile(path).schema_arrow:
        walk(f, "")
    return out


def ts(unit: str, tz: Optional[str] = None) -> pa.DataType:
    return pa.timestamp(unit, tz=tz)


def write_int96(path: str, table: pa.Table) -> None:
    pq.write_table(table, path, use_deprecated_int96_timestamps=True)


# ---- Thrift -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("int96", [False, True])
def test_footer_decodes_and_encodes_to_the_same_bytes(tmp_path: Any, int96: bool) -> None:
    t = pa.table({
        "a": pa.array([1, None, 3], pa.int64()), "s": ["x", None, "yy" * 50], "t": pa.array([1, 2, None], ts("us")),
        "l": [[1.5], None, []], "m": pa.array([[("k", {"x": 1})], None, []],
                                            pa.map_(pa.string(), pa.struct([("x", pa.int8())]))),
        "d": pa.array([Decimal("1.25"), None, Decimal("-3.50")], pa.decimal128(30, 2)), "b": [True, False, None],
    })
    path = str(tmp_path / "f.parquet")
    pq.write_table(t, path, use_deprecated_int96_timestamps=int96, write_page_index=True)
    _, footer = read_footer(path)
    assert tc.write_struct(tc.read_struct(footer)) == footer


def test_footer_edits_equal_encoding_the_edited_structure(tmp_path: Any) -> None:
    """Removing, adding and re-encoding fields in place gives the bytes of the edited structure encoded
    whole (headers count from the previous field's id, so the next header changes too)."""
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"a": [1, 2], "s": ["x", None]}), path, store_schema=False)
    _, footer = read_footer(path)
    meta = tc.read_struct(footer)
    first_column = tc.field(tc.field(meta, 4).value.items[0], 1).value.items[0]  # RowGroup 0, ColumnChunk 0
    md = tc.field(first_column, 3).value
    kept_md = [f for f in md if f.id != 12]  # without statistics
    new = tc.TField(5, tc.LIST, tc.TList(tc.STRUCT, [[tc.TField(1, tc.BINARY, b"k"), tc.TField(2, tc.BINARY, b"v")]]))
    edits = [tc.without_field(footer, md, [f.id for f in md].index(12)), tc.with_field(footer, meta, new, len(footer) - 1)]
    edited = tc.apply_edits(footer, edits)
    md[:] = kept_md
    meta.insert([f.id for f in meta].index(6), new)
    assert edited == tc.write_struct(meta)
    assert tc.write_struct(tc.read_struct(edited)) == edited
    meta = tc.read_struct(edited)
    kv = tc.field(meta, 5)
    kv.value.items.append([tc.TField(1, tc.BINARY, b"k2")])
    assert tc.apply_edits(edited, [tc.replaced_field(meta, meta.index(kv))]) == tc.write_struct(meta)


# ---- INT96, read exactly ------------------------------------------------------------------------------
FAR = [
    dt.datetime(1, 1, 1, 0, 0, 1),
    dt.datetime(1000, 6, 1, 12, 0, 0, 500000),
    dt.datetime(1600, 1, 1, 0, 0, 1),  # pyarrow's nanosecond and its coerced readings: 2184-07-20
    dt.datetime(1677, 9, 21, 23, 59, 59),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999000),
    dt.datetime(1970, 1, 1),
    dt.datetime(2262, 4, 12),
    dt.datetime(3000, 1, 1, 0, 0, 0, 1000),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999000),
]


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
@pytest.mark.parametrize("tz", [None, "UTC"])
def test_int96_reads_every_instant_of_the_column_unit(tmp_path: Any, unit: str, tz: Optional[str]) -> None:
    values = pa.array([*FAR, None], ts("us")).cast(ts(unit), safe=False).cast(ts(unit, tz))
    path = str(tmp_path / "f.parquet")
    write_int96(path, pa.table({"c": values}))
    schema = pa.schema([("c", ts(unit, tz))])
    assert read_data_file(path, schema=schema).column("c").chunk(0).equals(values)
    # what this fixes: pyarrow's own reading of the same bytes is wrong before 1970
    theirs = pq.read_table(path, coerce_int96_timestamp_unit=unit).column("c")
    assert theirs.cast(pa.int64()).to_pylist() != values.cast(pa.int64()).to_pylist()


def test_int96_nanoseconds_read_exactly_inside_arrow_range(tmp_path: Any) -> None:
    ns = [-(2**63) + 1, -86_400_000_000_001, -1, 0, 1, 1_700_000_000_123_456_789, 2**63 - 1, None]
    for tz in (None, "UTC"):
        values = pa.array(ns, ts("ns", tz))
        path = str(tmp_path / f"f{tz}.parquet")
        write_int96(path, pa.table({"c": values}))
        assert read_data_file(path, schema=pa.schema([("c", ts("ns", tz))])).column("c").chunk(0).equals(values)
        assert read_data_file(path).column("c").cast(pa.int64()).to_pylist() == ns  # no schema: ns


@pytest.mark.parametrize("instant", [dt.datetime(1600, 1, 1, 0, 0, 1), dt.datetime(3000, 1, 1), dt.datetime(1, 1, 1)])
def test_int96_outside_the_nanosecond_range_is_refused_by_name(tmp_path: Any, instant: dt.datetime) -> None:
    """pyarrow returns another instant (1600-01-01 00:00:01 -> 2184-07-20); lakelog names the value."""
    path = str(tmp_path / "far.parquet")
    write_int96(path, pa.table({"id": [1, 2], "ts9": pa.array([dt.datetime(2000, 1, 1), instant], ts("us"))}))
    for schema in (pa.schema([("id", pa.int64()), ("ts9", ts("ns"))]), None):
        with pytest.raises(UnrepresentableValueError) as e:
            read_data_file(path, schema=schema)
        assert path in str(e.value) and "'ts9'" in str(e.value) and instant.isoformat()[:10] in str(e.value)
    assert read_data_file(path, ["id"], schema=pa.schema([("id", pa.int64())])).num_rows == 2


def test_int96_finer_than_the_column_unit_is_refused(tmp_path: Any) -> None:
    path = str(tmp_path / "f.parquet")
    write_int96(path, pa.table({"c": pa.array([1_000, 1_001], ts("ns"))}))
    assert read_data_file(path, schema=pa.schema([("c", ts("ns"))])).num_rows == 2
    with pytest.raises(UnrepresentableValueError, match="finer than"):
        read_data_file(path, schema=pa.schema([("c", ts("us"))]))


def test_int96_inside_lists_structs_and_maps(tmp_path: Any) -> None:
    schema = pa.schema([
        ("l", pa.list_(ts("us"))),
        ("s", pa.struct([("a", ts("ns")), ("b", pa.int32()), ("c", ts("s", "UTC"))])),
        ("m", pa.map_(pa.string(), pa.list_(ts("ms")))),
    ])
    t = pa.table({
        "l": [[FAR[2], None, FAR[-1]], None, []],
        "s": [{"a": dt.datetime(1969, 12, 31, 23, 59, 59), "b": 1, "c": dt.datetime(1000, 1, 1, tzinfo=UTC)}, None,
              {"a": None, "b": None, "c": None}],
        "m": [[("x", [FAR[1]]), ("y", None)], None, [("z", [None, FAR[0]])]],
    }, schema=schema)
    path = str(tmp_path / "nested.parquet")
    write_int96(path, t)
    assert read_data_file(path, schema=schema).equals(t)
    assert read_data_file(path, schema=schema).slice(1).equals(t.slice(1))
    got = list(lakelog_iter(path, schema, 1))
    assert pa.concat_tables(got).equals(t)


def lakelog_iter(path: str, schema: pa.Schema, rows: int) -> Any:
    from lakelog.connector.format.data_file import iter_data_file

    return iter_data_file(path, batch_rows=rows, schema=schema)


# ---- without pandas -----------------------------------------------------------------------------------
_NO_PANDAS = """
import importlib.abc, sys
class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
sys.meta_path.insert(0, _NoPandas())
"""

_STATS = """
import json, pyarrow as pa
from lakelog.connector.format.data_file import DataFileWriter
from lakelog.connector.format.types import DataType
def stats(directory):
    k = pa.array([-3_000_000_001, 1, 5], pa.int64()).view(pa.timestamp("ns"))
    v = pa.array([7, None, 1_700_000_000_123_456_789], pa.int64()).view(pa.timestamp("ns", tz="UTC"))
    table = pa.table({"_KEY_k": k, "_SEQUENCE_NUMBER": pa.array([1, 2, 3], pa.int64()),
                      "_VALUE_KIND": pa.array([0, 0, 0], pa.int8()), "k": k, "v": v})
    ts9 = DataType("TIMESTAMP", nullable=False, precision=9)
    w = DataFileWriter(directory, 0, ["_KEY_k"], [ts9], ["k", "v"], [ts9, DataType("TIMESTAMP_LTZ", precision=9)])
    (m,) = w.write(table, level=0)
    return {name: getattr(m, name).hex() if isinstance(getattr(m, name), bytes) else
            [getattr(m, name).min_values.hex(), getattr(m, name).max_values.hex()]
            for name in ("min_key", "max_key", "key_stats", "value_stats")}
"""


def test_timestamp_9_writes_without_pandas(tmp_path: Any) -> None:
    """pyarrow turns a nanosecond timestamp into a Python value only through pandas; lakelog's base
    install has none. The statistics must come out as they do with pandas."""
    code = _NO_PANDAS + _STATS + textwrap.dedent(f"""
        import lakelog
        assert "pandas" not in sys.modules
        print(json.dumps(stats({str(tmp_path / 'a')!r})))
        schema = pa.schema([pa.field("k", pa.timestamp("ns"), nullable=False), ("v", pa.timestamp("ns"))])
        t = lakelog.Catalog({str(tmp_path / 'wh')!r}).create_table(
            "db.t", schema, primary_key=["k"], options={{"bucket": "2"}})
        data = pa.table({{"k": pa.array([1, -1, 10**18 + 7], pa.int64()).view(pa.timestamp("ns")),
                          "v": pa.array([None, 5, -9], pa.int64()).view(pa.timestamp("ns"))}}, schema=schema)
        t.write(data)
        assert t.to_arrow().sort_by("k").equals(data.sort_by("k")), t.to_arrow()
        assert "pandas" not in sys.modules
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    without = json.loads(res.stdout.strip().splitlines()[-1])
    pytest.importorskip("pandas")
    scope: dict[str, Any] = {}
    exec(_STATS, scope)  # noqa: S102 - the same function, with pandas
    assert scope["stats"](str(tmp_path / "b")) == without


def test_the_pandas_blocker_blocks(tmp_path: Any) -> None:
    """Without this, the test above could pass with pandas imported after all."""
    code = _NO_PANDAS + "import pandas\n"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "blocked by the test" in res.stderr


# ---- field ids, statistics, decimals ----------------------------------------------------------------
NESTED = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("name", pa.string()),
    ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.int64())),
    ("pt", pa.struct([("x", pa.int32()), ("ys", pa.list_(pa.struct([("z", pa.float64())])))])),
    ("d", pa.decimal128(10, 2)),
])


def test_files_carry_field_ids_and_statistics(tmp_path: Any) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", NESTED, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.table({
        "id": [2, 1], "name": ["b", None], "tags": [["x"], None], "attrs": [[("k", 1)], []],
        "pt": [{"x": 1, "ys": [{"z": 0.5}]}, None], "d": [Decimal("1.50"), None],
    }, schema=NESTED))
    assert [(f.name, f.id) for f in t._store.schema.fields] == [  # pt's fields take ids before pt's next sibling
        ("id", 0), ("name", 1), ("tags", 2), ("attrs", 3), ("pt", 4), ("d", 8)]
    (f,) = data_files(tmp_path)
    assert field_ids(f) == {
        "_KEY_id": 1073741823, "_SEQUENCE_NUMBER": 2147483646, "_VALUE_KIND": 2147483645,
        "id": 0, "name": 1, "tags": 2, "tags.element": BASE + 1024 * 2 + 1,
        "attrs": 3, "attrs.key": BASE - 1024 * 3 - 1, "attrs.value": BASE + 1024 * 3 + 1,
        "pt": 4, "pt.x": 5, "pt.ys": 7, "pt.ys.element": BASE + 1024 * 7 + 1, "pt.ys.element.z": 6, "d": 8,
    }
    md = pq.ParquetFile(f).metadata.row_group(0)
    for i in range(md.num_columns):
        c = md.column(i)
        assert c.statistics is not None and c.statistics.has_min_max, c.path_in_schema
        assert c.statistics.null_count is not None, c.path_in_schema
    # reads carry none of it
    got = t.to_arrow()
    assert str(got.schema) == str(NESTED)


def test_decimal_layout_follows_pyarrow(tmp_path: Any, monkeypatch: Any) -> None:
    """DECIMAL(p <= 18) as INT32/INT64 needs pyarrow 17; pyarrow 16 keeps FIXED_LEN_BYTE_ARRAY."""
    schema = pa.schema([("d4", pa.decimal128(4, 1)), ("d18", pa.decimal128(18, 3)), ("d30", pa.decimal128(30, 2))])
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", schema)
    data = pa.table({"d4": [Decimal("-999.9"), None], "d18": [Decimal("1.001"), Decimal("-0.5")],
                     "d30": [Decimal("1" * 28 + ".25"), None]}, schema=schema)
    t.write(data)
    (f,) = data_files(tmp_path)
    layout = physical(f)
    if parquet_layout.decimal_as_integer_supported():
        assert layout["d4"][0] == "INT32" and layout["d18"][0] == "INT64"
    else:
        assert layout["d4"][0] == layout["d18"][0] == "FIXED_LEN_BYTE_ARRAY"
    assert layout["d30"][0] == "FIXED_LEN_BYTE_ARRAY"
    assert t.to_arrow().equals(data)
    for supported in (False, True):
        monkeypatch.setattr(parquet_layout, "decimal_as_integer_supported", lambda s=supported: s)
        options = PhysicalLayout(schema, []).options
        assert options.get("store_decimal_as_integer", False) is supported
    assert "store_decimal_as_integer" not in PhysicalLayout(schema, [], WriteLayout(decimal_as_integer=False)).options


# ---- TIMESTAMP(7..9) as INT96 -------------------------------------------------------------------------
TIMESTAMPS = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("ts0", ts("s")), ("ts3", ts("ms")), ("ts6", ts("us")), ("ts9", ts("ns")),
    ("ltz0", ts("s", "UTC")), ("ltz3", ts("ms", "UTC")), ("ltz6", ts("us", "UTC")), ("ltz9", ts("ns", "UTC")),
    ("arr6", pa.list_(ts("us"))), ("row", pa.struct([("a", ts("ns")), ("b", ts("ms")), ("c", ts("s"))])),
])


def timestamp_rows(ids: list[int], far: bool = True) -> pa.Table:
    """Rows of TIMESTAMPS: nanosecond values anywhere inside Arrow's range, the others over years
    1..9999 (or around now, without ``far``), nulls everywhere."""
    wide = FAR if far else [dt.datetime(2024, 5, 6, 7, 8, 9, 123456), dt.datetime(1960, 1, 1, 0, 0, 0, 1000)]
    base = pa.array([wide[i % len(wide)] for i in ids], ts("us"))
    nanos = [(i * 7_777_777_777_777_777) % 2**63 - 2**62 if i % 5 else None for i in ids]

    def col(unit: str, tz: Optional[str] = None, skip: int = 3) -> pa.Array:
        values = base.cast(ts(unit), safe=False).cast(ts(unit, tz))
        return pc.if_else(pa.array([i % 4 == skip for i in ids]), pa.scalar(None, values.type), values)

    arr6 = pa.array([None if i % 6 == 1 else [v, None] for i, v in zip(ids, base.to_pylist())], pa.list_(ts("us")))
    row_type = TIMESTAMPS.field("row").type
    row = pa.StructArray.from_arrays(
        [pa.array(nanos, pa.int64()).view(ts("ns")), col("ms", skip=-1), col("s", skip=-1)],
        fields=list(row_type), mask=pa.array([i % 7 == 1 for i in ids]),
    )
    columns = [
        pa.array(ids, pa.int64()), col("s"), col("ms"), col("us"), pa.array(nanos, pa.int64()).view(ts("ns")),
        col("s", "UTC", 2), col("ms", "UTC", 2), col("us", "UTC", 2),
        pa.array([None if n is None else -n for n in nanos], pa.int64()).view(ts("ns", "UTC")), arr6, row,
    ]
    return pa.Table.from_arrays(columns, schema=TIMESTAMPS)


@pytest.mark.parametrize("primary_key", [["id"], None], ids=["pk", "append"])
def test_nanosecond_columns_are_int96_and_the_others_keep_their_layout(
    tmp_path: Any, primary_key: Optional[list[str]]
) -> None:
    """Paimon's layout: INT96 for TIMESTAMP(7..9) wherever they are, INT64 milliseconds or
    microseconds (with their annotation and statistics) for the rest, in the same file."""
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", TIMESTAMPS, primary_key=primary_key, options={"bucket": "1"} if primary_key else {}
    )
    data = timestamp_rows(list(range(60)))
    t.write(data)
    (f,) = data_files(tmp_path)
    layout = physical(f)
    for c in ("ts9", "ltz9", "row.a"):
        assert layout[c] == ("INT96", None), c
    for c, unit in (("ts0", "milli"), ("ltz0", "milli"), ("ts3", "milli"), ("ltz3", "milli"), ("ts6", "micro"),
                    ("ltz6", "micro"), ("arr6.list.element", "micro"), ("row.b", "milli"), ("row.c", "milli")):
        assert layout[c][0] == "INT64" and f"timeUnit={unit}seconds" in str(layout[c][1]), c
    meta = pq.ParquetFile(f).metadata
    stats = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).is_stats_set
             for i in range(meta.num_columns)}
    assert {c for c, s in stats.items() if not s} == {"ts9", "ltz9", "row.a"}
    assert b"ARROW:schema" not in (meta.metadata or {})  # it would call INT96 columns fixed_size_binary(12)
    assert t.to_arrow().sort_by("id").equals(data)
    # whole days and nanoseconds of the day from 0: pyarrow's microsecond reading, which takes the
    # nanoseconds as unsigned, gets pre-1970 values right too
    theirs = pq.read_table(f, columns=["ts9"], coerce_int96_timestamp_unit="us").column("ts9")
    ours = pq.read_table(f, columns=["ts9"]).column("ts9")
    floor_us = [None if v is None else v // 1000 for v in ours.cast(pa.int64()).to_pylist()]
    assert theirs.cast(pa.int64()).to_pylist() == floor_us
    assert ours.cast(pa.int64()).to_pylist() == data.column("ts9").cast(pa.int64()).to_pylist()  # pyarrow: exact
    t.write(timestamp_rows(list(range(30, 90))))
    t.compact(full=True)
    want = pa.concat_tables([data.slice(0, 30), timestamp_rows(list(range(30, 90)))]) if primary_key else \
        pa.concat_tables([data, timestamp_rows(list(range(30, 90)))])
    assert t.to_arrow().sort_by("id").equals(want.sort_by("id"))


def test_files_without_nanoseconds_keep_annotated_int64(tmp_path: Any) -> None:
    schema = pa.schema([f for f in TIMESTAMPS if f.name not in ("ts9", "ltz9", "row")])
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", schema)
    data = timestamp_rows(list(range(20))).select(schema.names)
    t.write(data)
    (f,) = data_files(tmp_path)
    layout = physical(f)
    assert layout["ts0"][0] == "INT64" and "milliseconds" in str(layout["ts0"][1])
    assert layout["ts6"][0] == "INT64" and "microseconds" in str(layout["ts6"][1])
    assert layout["ltz3"][0] == "INT64" and "isAdjustedToUTC=true" in str(layout["ltz3"][1])
    assert t.to_arrow().equals(data)


def test_old_layout_files_still_read_and_compact(tmp_path: Any, monkeypatch: Any) -> None:
    """Files lakelog wrote before (INT64 nanoseconds, no ids, no statistics) merge with new ones."""
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", TIMESTAMPS, primary_key=["id"], options={"bucket": "1"})
    monkeypatch.setattr(parquet_layout, "DEFAULT_LAYOUT", OLD_LAYOUT)
    old = timestamp_rows(list(range(0, 40)), far=False)
    t.write(old)
    (f,) = data_files(tmp_path)
    assert physical(f)["ts9"] == ("INT64", "Timestamp(isAdjustedToUTC=false, timeUnit=nanoseconds, "
                                  "is_from_converted_type=false, force_set_converted_type=false)")
    assert not field_ids(f) and not pq.ParquetFile(f).metadata.row_group(0).column(0).is_stats_set
    monkeypatch.undo()
    new = timestamp_rows(list(range(20, 60)), far=False)
    t.write(new)
    want = pa.concat_tables([old.slice(0, 20), new])
    assert t.to_arrow().sort_by("id").equals(want)  # a merge of old and new files
    t.compact(full=True)
    assert t.to_arrow().sort_by("id").equals(want)
    assert {physical(p)["ts9"] for p in data_files(tmp_path) if os.path.basename(p) in live_files(t)} == \
        {("INT96", None)}


def live_files(t: Any) -> set[str]:
    store = t._store
    return {e.file.file_name for e in store.live_entries(store.snapshot_manager.latest())}


def test_a_writer_without_file_schema_writes_int96_too(tmp_path: Any) -> None:
    w = DataFileWriter(str(tmp_path), 0, [], [], ["c"], [DataType("TIMESTAMP", precision=9)])
    (m,) = w.write(pa.table({"c": pa.array([1, 2], ts("ns"))}), level=0)
    assert physical(str(tmp_path / m.file_name))["c"] == ("INT96", None)


def test_lakelog_int96_files_are_marked_and_read_directly(tmp_path: Any, monkeypatch: Any) -> None:
    """lakelog writes INT96 from nanosecond timestamps only, which pyarrow reads exactly: its files say
    so and skip the byte-level reading; INT96 files of other writers do not."""
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table("db.t", TIMESTAMPS)
    data = timestamp_rows(list(range(30)))
    t.write(data)
    (ours,) = data_files(tmp_path / "wh")
    assert parquet_footer.int96_from_lakelog(pq.ParquetFile(ours))
    theirs = str(tmp_path / "pyarrow.parquet")
    write_int96(theirs, pa.table({"ts9": pa.array([1, None], ts("ns"))}))
    assert not parquet_footer.int96_from_lakelog(pq.ParquetFile(theirs))

    opened: list[str] = []
    real = parquet_footer.binary_view

    def spy(path: str) -> Any:
        opened.append(path)
        return real(path)

    monkeypatch.setattr(parquet_footer, "binary_view", spy)
    assert t.to_arrow().equals(data)
    assert read_data_file(theirs, schema=pa.schema([("ts9", ts("ns"))])).num_rows == 2
    assert opened == [theirs]


def test_declaring_int96_checks_what_it_declares(tmp_path: Any) -> None:
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"a": pa.array([b"x" * 12], pa.binary(12)), "d": pa.array([Decimal(1)],
                                                                                       pa.decimal128(27, 0))}), path)
    with pytest.raises(CorruptFileError, match="leaf 1"):
        parquet_footer.declare_int96(path, [1])  # a decimal is a FIXED_LEN_BYTE_ARRAY(12) too
    parquet_footer.declare_int96(path, [0])
    assert physical(path)["a"] == ("INT96", None) and physical(path)["d"][0] == "FIXED_LEN_BYTE_ARRAY"
