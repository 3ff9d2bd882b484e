"""File indexes (``file-index.bloom-filter.columns``): Paimon's bloom-filter index per data file, and
reads that open only the files that may hold a value.

The hashes against the xxhash package (XXH64) and Paimon's formulas; the container and the bloom
filter's bits; which files a point query opens on append, merge-on-read and merge-on-write
tables; where the index goes (the manifest record, or ``<data file>.index``) and that it follows
its data file; refusals and damaged indexes. Paimon's Java code reads and writes the same indexes:
tests/test_interop_paimon_java.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError, OptionError
from lakelog.connector.format.file_index import (
    BLOOM_FILTER,
    BloomFilter,
    bloom_hashes,
    decode_container,
    encode_container,
)
from lakelog.connector.format.xxhash64 import xxh64_array
from lakelog.connector.table.point_filter import point_values
from lakelog.connector.table.scan import plan_splits

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("n", pa.int32())])
BLOOM = {"file-index.bloom-filter.columns": "name,n", "file-index.bloom-filter.name.items": "100",
         "file-index.bloom-filter.n.items": "100"}


def batch(i: int) -> pa.Table:
    return pa.table({"id": list(range(i * 10, i * 10 + 10)), "name": [f"user-{i}-{j}" for j in range(10)],
                     "n": [i] * 10}, schema=SCHEMA)


def planned(t: lakelog.Table, expr: pc.Expression) -> int:
    return sum(len(s.files) for s in plan_splits(t.store, t.latest_snapshot(), filter=expr))


# ---- the bytes ----------------------------------------------------------------------------------------
def test_xxh64_of_every_length_is_the_xxhash_package_s() -> None:
    xxhash = pytest.importorskip("xxhash")
    rng = np.random.default_rng(5)
    values = [rng.bytes(int(n)) for n in rng.choice([0, 1, 3, 4, 7, 8, 9, 31, 32, 33, 64, 100, 777], 2000)]
    got = xxh64_array(pa.array(values, pa.binary()))
    assert got.tolist() == [xxhash.xxh64_intdigest(v) for v in values]
    text = pa.array(["héllo", None, "", "x" * 45], pa.string())
    assert xxh64_array(text)[[0, 2, 3]].tolist() == [xxhash.xxh64_intdigest(s.encode()) for s in ("héllo", "", "x" * 45)]
    assert xxh64_array(pa.array(values[:50], pa.binary()).slice(10, 20)).tolist() == got[10:30].tolist()


def test_integer_hashes_are_thomas_wangs_with_java_arithmetic() -> None:
    """Java's long arithmetic (signed shifts, wraparound); a few values worked out by hand."""
    def wang(key: int) -> int:
        m = (1 << 64) - 1

        def signed(x: int) -> int:
            x &= m
            return x - (1 << 64) if x >> 63 else x

        k = signed(~key + (key << 21))
        k = signed(k ^ (k >> 24))
        k = signed(k + (k << 3) + (k << 8))
        k = signed(k ^ (k >> 14))
        k = signed(k + (k << 2) + (k << 4))
        k = signed(k ^ (k >> 28))
        return signed(k + (k << 31)) & m

    values = [0, 1, -1, 42, 2**31 - 1, -(2**31), 2**62, -(2**63)]
    assert bloom_hashes(pa.array(values, pa.int64())).tolist() == [wang(v) for v in values]
    assert bloom_hashes(pa.array([5, -5], pa.int8())).tolist() == [wang(5), wang(-5)]


def test_bloom_filters_are_sized_and_set_as_paimon_s() -> None:
    b = BloomFilter.sized(100, 0.1)
    assert (b.num_bits, b.num_hashes) == (480, 3)  # 479 bits rounded up past a byte; round(480/100*ln 2)
    h = bloom_hashes(pa.array(np.arange(100), pa.int64()))
    b.add(h)
    assert b.might_contain(h).all()
    miss = b.might_contain(bloom_hashes(pa.array(np.arange(1000, 3000), pa.int64()))).mean()
    assert miss < 0.2  # about the configured 10% false positives
    again = BloomFilter.from_bytes(b.to_bytes(), "x")
    assert again.num_hashes == 3 and again.might_contain(h).all()


def test_the_container_round_trips_and_damage_is_named() -> None:
    data = encode_container({"name": {BLOOM_FILTER: b"abc"}, "n": {BLOOM_FILTER: None}})
    assert decode_container(data, "f") == {"name": {BLOOM_FILTER: b"abc"}, "n": {BLOOM_FILTER: None}}
    with pytest.raises(CorruptFileError, match="f.index.*not a file index"):
        decode_container(b"\x00" * 8 + data[8:], "f.index")
    with pytest.raises(CorruptFileError, match="cut short|outside"):
        decode_container(data[:-2], "f.index")


def test_point_values_read_only_what_renders_back() -> None:
    schema = pa.schema([("a", pa.int32()), ("s", pa.string()), ("x", pa.int64())])
    cases = [
        ((pc.field("a") == 5) & (pc.field("x") > 3), {"a": [5]}),
        ((pc.field("a") == 5) | (pc.field("a") == 7), {"a": [5, 7]}),
        ((pc.field("a") == 5) | (pc.field("x") > 3), {}),
        (pc.field("s").isin(["p", "q"]) & (pc.field("a") == 1), {"s": ["p", "q"], "a": [1]}),
        (pc.field("a") == 5.5, {}),  # no INT value equals it: no guess
        (pc.field("a") == 3_000_000_000, {}),
        (~(pc.field("a") == 5), {}),
    ]
    for expr, want in cases:
        assert {k: v.to_pylist() for k, v in point_values(expr, schema).items()} == want, str(expr)
    from lakelog.connector.table.expressions import parse_filter

    big = pa.schema([("d", pa.decimal128(38, 0))])  # a literal beyond 64 bits prints as an integer
    assert point_values(parse_filter("d = 1000000000000000000000000000000", big), big) == {}


# ---- tables ---------------------------------------------------------------------------------------------
def test_a_point_query_opens_only_the_files_that_may_hold_the_value(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.a", SCHEMA, options={"bucket": "1", "bucket-key": "id", **BLOOM})
    for i in range(20):
        t.write(batch(i))
    assert planned(t, pc.field("id") >= 0) == 20
    assert planned(t, pc.field("name") == "user-7-3") == 1
    assert planned(t, pc.field("n").isin([3, 11])) == 2
    assert planned(t, pc.field("name") == "nobody") == 0
    assert t.to_arrow(filter="name = 'user-7-3'").to_pylist() == [{"id": 73, "name": "user-7-3", "n": 7}]
    assert t.to_arrow(filter="n = 11 AND id > 113").num_rows == 6
    t.alter(lakelog.SetOption("file-index.read.enabled", "false"))
    assert planned(catalog.get_table("db.a"), pc.field("name") == "user-7-3") == 20
    f = plan_splits(t.store, t.latest_snapshot())[0].files[0]
    assert f.embedded_file_index and not f.extra_files  # small: in the manifest record


def test_primary_key_tables_skip_by_key_in_merge_on_read_by_any_column_with_vectors(
    catalog: lakelog.Catalog,
) -> None:
    """Merge-on-read: a newer version elsewhere may change a row's other columns, so only key
    columns skip; merge-on-write reads files alone and skips by any column (never level 0, whose
    deletes and updates overlay the files above)."""
    opts = {"bucket": "1", **BLOOM, "file-index.bloom-filter.columns": "id,name,n",
            "file-index.bloom-filter.id.items": "100"}
    mor = catalog.create_table("db.mor", SCHEMA, primary_key=["id"], options={**opts, "write-only": "true"})
    dv = catalog.create_table("db.dv", SCHEMA, primary_key=["id"], options={**opts, "deletion-vectors.enabled": "true"})
    for t in (mor, dv):
        for i in range(6):
            t.write(batch(i))
    assert planned(mor, pc.field("id") == 42) == 1 and planned(mor, pc.field("name") == "user-4-2") == 6
    assert planned(dv, pc.field("name") == "user-4-2") < planned(dv, pc.field("id") >= 0)
    dv.delete(pa.table({"id": [42]}, schema=pa.schema([pa.field("id", pa.int64(), False)])))
    dv_wo = catalog.create_table("db.dvwo", SCHEMA, primary_key=["id"],
                                 options={**opts, "deletion-vectors.enabled": "true", "write-only": "true"})
    dv_wo.write(batch(4))
    dv_wo.compact(full=True)
    dv_wo.write(pa.table({"id": [42], "name": ["renamed"], "n": [4]}, schema=SCHEMA))  # level 0
    assert dv_wo.to_arrow(filter="name = 'user-4-2'").num_rows == 0  # the level-0 update wins
    assert dv.to_arrow(filter="name = 'user-4-2'").num_rows == 0  # deleted
    assert mor.to_arrow(filter="id = 42").to_pylist() == [{"id": 42, "name": "user-4-2", "n": 4}]


def test_a_large_index_is_written_beside_its_file_and_goes_with_it(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.a", SCHEMA, options={"bucket": "1", "bucket-key": "id", **BLOOM, "file-index.in-manifest-threshold": "1 b",
                                 "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"},
    )
    for i in range(4):
        t.write(batch(i))
    files = plan_splits(t.store, t.latest_snapshot())[0].files
    assert all(f.embedded_file_index is None and f.extra_files == [f.file_name + ".index"] for f in files)
    assert planned(t, pc.field("name") == "user-2-5") == 1
    bucket = Path(t.store.bucket_dir(b"", 0))  # unpartitioned
    t.compact(full=True)  # rewrites the four files; expiration (retain 1) removes them and their indexes
    names = sorted(p.name for p in bucket.iterdir())
    assert len(names) == 2 and names[1] == names[0] + ".index", names
    assert t.to_arrow(filter="name = 'user-2-5'").num_rows == 1
    (bucket / names[1]).write_bytes(b"not an index")
    with pytest.raises(CorruptFileError, match=names[1]):
        t.to_arrow(filter="name = 'user-2-5'")


@pytest.mark.parametrize(
    "options,fragment",
    [
        ({"file-index.bloom-filter.columns": "nope"}, "unknown column 'nope'"),
        ({"file-index.bloom-filter.columns": "flag"}, "BOOLEAN"),
        ({"file-index.bloom-filter.columns": "name", "file-index.bloom-filter.name.fpp": "1.5"}, "between 0 and 1"),
        ({"file-index.bitmap.columns": "nope"}, "'file-index.bitmap.columns' names unknown column 'nope'"),
        ({"file-index.bitmap.columns": "score"}, "'score' has type DOUBLE"),
        ({"file-index.bitmap.columns": "name", "file-index.bitmap.name.version": "3"},
         "file-index.bitmap.name.version.*expected one of '1', '2'"),
        ({"file-index.bitmap.columns": "name", "file-index.bitmap.name.index-block-size": "0 b"},
         "index-block-size.*greater than 0"),
    ],
    ids=["unknown", "boolean", "fpp", "bitmap-unknown", "bitmap-double", "bitmap-version", "bitmap-block"],
)
def test_bad_file_index_options_are_refused_naming_them(
    catalog: lakelog.Catalog, options: dict[str, str], fragment: str
) -> None:
    schema = SCHEMA.append(pa.field("flag", pa.bool_())).append(pa.field("score", pa.float64()))
    with pytest.raises(OptionError, match=fragment):
        catalog.create_table("db.a", schema, options={"bucket": "1", "bucket-key": "id", **options})
    assert not os.path.exists(os.path.join(catalog.warehouse, "db.db", "a", "schema", "schema-0"))


def test_items_and_fpp_size_each_columns_filter(catalog: lakelog.Catalog) -> None:
    opts = {"bucket": "1", "bucket-key": "id", "file-index.bloom-filter.columns": "name,n",
            "file-index.bloom-filter.name.items": "100", "file-index.bloom-filter.n.items": "1000",
            "file-index.bloom-filter.n.fpp": "0.01", "file-index.in-manifest-threshold": "64 kb"}
    t = catalog.create_table("db.a", SCHEMA, options=opts)
    t.write(batch(0))
    f = plan_splits(t.store, t.latest_snapshot())[0].files[0]
    assert f.embedded_file_index is not None
    got = decode_container(f.embedded_file_index, f.file_name)
    name = BloomFilter.from_bytes(got["name"][BLOOM_FILTER] or b"", "x")
    n = BloomFilter.from_bytes(got["n"][BLOOM_FILTER] or b"", "x")
    assert (name.num_bits, name.num_hashes) == (480, 3)
    assert (n.num_bits, n.num_hashes) == (9592, 7)  # 1000 items at 1%


# ---- row groups -----------------------------------------------------------------------------------------
def test_a_filter_reads_only_the_row_groups_its_statistics_allow(
    catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files read alone (append tables; merge-on-write tables above level 0) skip row groups by
    their min/max statistics, and deletion vectors still hit the right rows (positions count the
    skipped row groups)."""
    import pyarrow.parquet as pq

    n = 600_000  # row groups of 128k rows
    ids = np.arange(n, dtype=np.int64)
    data = pa.table({"id": ids, "name": pa.array(np.char.add("u", (ids % 7).astype(str))),
                     "n": pa.array((ids // 1000).astype(np.int32))}, schema=SCHEMA)
    app = catalog.create_table("db.a", SCHEMA, options={"bucket": "1", "bucket-key": "id"})
    app.write(data)
    dv = catalog.create_table("db.dv", SCHEMA, primary_key=["id"],
                              options={"bucket": "1", "deletion-vectors.enabled": "true"})
    dv.write(data)
    dv.compact(full=True)
    dv.delete(pa.table({"id": [550_000, 550_001]}, schema=pa.schema([pa.field("id", pa.int64(), False)])))
    read = []
    real = pq.ParquetFile.read_row_group

    def counted(self, i, *a, **k):  # type: ignore[no-untyped-def]
        read.append(i)
        return real(self, i, *a, **k)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    assert app.to_arrow(filter="id = 300000").column("n").to_pylist() == [300]
    assert read == [2]
    read.clear()
    assert app.to_arrow(filter="n > 100000").num_rows == 0 and read == []
    read.clear()
    got = dv.to_arrow(filter="id >= 549999 AND id <= 550002").column("id").to_pylist()
    assert sorted(got) == [549_999, 550_002] and 4 in read and 0 not in read


# ---- rewrite_file_index ---------------------------------------------------------------------------------
def test_rewrite_file_index_indexes_files_already_written(catalog: lakelog.Catalog) -> None:
    """Files written before the option was set get their index in one COMPACT snapshot, data files
    untouched; a second rewrite after a change of the options writes the next index file of the
    series (the older snapshot keeps its own); with nothing to change it commits nothing."""
    t = catalog.create_table("db.a", SCHEMA, options={"bucket": "1", "bucket-key": "id"})
    for i in range(6):  # each file's names span the others' (statistics cannot skip)
        t.write(pa.table({"id": list(range(i * 10, i * 10 + 10)), "name": [f"user-{j}-{i}" for j in range(10)],
                          "n": [i] * 10}, schema=SCHEMA))
    before = {f.file_name for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files}
    assert planned(t, pc.field("name") == "user-4-4") == 6
    t.alter(lakelog.SetOption("file-index.bloom-filter.columns", "name"),
            lakelog.SetOption("file-index.bloom-filter.name.items", "100"),
            lakelog.SetOption("file-index.in-manifest-threshold", "1 b"))
    t = catalog.get_table("db.a")
    sid = t.rewrite_file_index()
    assert sid is not None and t.latest_snapshot().commit_kind == "COMPACT"
    files = [f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files]
    assert {f.file_name for f in files} == before
    assert all(f.extra_files == [f.file_name + ".index"] for f in files)
    assert planned(t, pc.field("name") == "user-4-4") == 1
    assert t.to_arrow(filter="name = 'user-4-4'").column("id").to_pylist() == [44]  # file 4, row 4
    assert t.rewrite_file_index() is None  # nothing changed
    t.alter(lakelog.SetOption("file-index.bloom-filter.name.items", "1000"))
    t = catalog.get_table("db.a")
    t.rewrite_file_index(partitions=None)
    files = [f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files]
    assert all(f.extra_files == [f.file_name + "-1.index"] for f in files)
    bucket = Path(t.store.bucket_dir(b"", 0))
    assert len(list(bucket.glob("*.index"))) == 12  # the previous snapshot's stay while it lives
    assert t.to_arrow(snapshot_id=sid).num_rows == 60 and t.to_arrow(snapshot_id=sid - 1).num_rows == 60
    t.expire_snapshots(retain_max=1, retain_min=1)
    assert sorted(p.name for p in bucket.glob("*.index")) == sorted(f.file_name + "-1.index" for f in files)
    t.alter(lakelog.RemoveOption("file-index.bloom-filter.columns"))
    t = catalog.get_table("db.a")
    t.rewrite_file_index()  # no index asked for: the records drop theirs
    assert all(not f.extra_files and f.embedded_file_index is None
               for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files)
    assert t.to_arrow().num_rows == 60


def test_call_sys_rewrite_file_index_as_paimon_documents_it(catalog: lakelog.Catalog) -> None:
    """``CALL sys.rewrite_file_index('db.t')`` and with ``partitions``, named or positional."""
    from lakelog.operators.sql.procedures import CallContext, call_procedure

    schema = pa.schema([pa.field("dt", pa.string(), False), *SCHEMA])
    t = catalog.create_table("db.t", schema, partition_by=["dt"], options={"bucket": "1", "bucket-key": "id"})
    for dt in ("a", "b"):
        t.write(batch(1).add_column(0, "dt", pa.array([dt] * 10)))
    t.alter(lakelog.SetOption("file-index.bloom-filter.columns", "name"),
            lakelog.SetOption("file-index.bloom-filter.name.items", "100"))
    ctx = CallContext(catalog, "lk", "db")
    call_procedure(ctx, "rewrite_file_index", ["db.t", "dt=a"], {})
    indexed = {t.store.partition_values(s.partition)[0]: s.files[0].embedded_file_index is not None
               for s in plan_splits(t.store, catalog.get_table("db.t").latest_snapshot())}
    assert indexed == {"a": True, "b": False}
    call_procedure(ctx, "rewrite_file_index", [], {"table": "db.t"})
    assert all(s.files[0].embedded_file_index for s in plan_splits(t.store, catalog.get_table("db.t").latest_snapshot()))


@pytest.mark.parametrize("threshold", ["64 kb", "1 b"], ids=["in-manifest", "beside"])
def test_pypaimon_reads_and_filters_an_indexed_table(warehouse: str, threshold: str) -> None:
    from tests.interop_util import pp_read

    t = lakelog.Catalog(warehouse).create_table(
        "db.a", SCHEMA, options={"bucket": "1", "bucket-key": "id", **BLOOM, "file-index.in-manifest-threshold": threshold}
    )
    for i in range(5):
        t.write(batch(i))
    assert pp_read(warehouse, "db.a").num_rows == 50
    got = pp_read(warehouse, "db.a", predicate=lambda pb: pb.equal("name", "user-3-3"))
    assert got.column("id").to_pylist() == [33]


# ---- bitmap indexes -----------------------------------------------------------------------------------
BITMAP_TYPES = [
    (pa.int8(), [3, -4, 3, None, 120]),
    (pa.int16(), [300, -4, 300, None, 7]),
    (pa.int32(), [1, 2, 2, 2, None, 1]),
    (pa.int64(), [2**40, -1, 2**40, None]),
    (pa.date32(), [19000, 19001, 19000, None]),
    (pa.time32("ms"), [1000, 1000, 5, None]),
    (pa.timestamp("ms"), [1_700_000_000_000, 5, 5, None]),
    (pa.timestamp("ns"), [-1500, 2500, 2999, None, -1001]),  # microseconds, floored: -2, 2, 2, -2
    (pa.bool_(), [True, False, True, None, None]),
    (pa.string(), ["b", "a", "é", None, "b", ""]),
    (pa.int32(), [None, None, None]),  # no value at all: only the null bitmap
    (pa.string(), [None]),
]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("arrow_type,values", BITMAP_TYPES, ids=[f"{t}-{len(v)}" for t, v in BITMAP_TYPES])
def test_bitmaps_name_the_rows_of_each_value(arrow_type: pa.DataType, values: list, version: int) -> None:  # type: ignore[type-arg]
    from lakelog.connector.format.bitmap_index import BitmapIndex, encode_bitmap_index

    arr = pa.array(values, arrow_type)
    data = encode_bitmap_index(arr, version=version, block_size=40)  # several index blocks
    ix = BitmapIndex.from_bytes(data, arrow_type, "f.parquet")
    assert ix.rows == len(values)
    keys = [int(v.cast(pa.int64()).as_py()) // 1000 if arrow_type == pa.timestamp("ns") and v.is_valid
            else v.as_py() for v in arr]
    for i, v in enumerate(values):
        if v is None:
            continue
        want = [j for j, k in enumerate(keys) if k == keys[i] and values[j] is not None]
        assert ix.rows_of(arr.slice(i, 1)).tolist() == want, (v, version)
        assert ix.contains_any(arr.slice(i, 1))
    absent = {pa.bool_(): None, pa.string(): "zz"}.get(arrow_type, 77)
    if absent is not None:
        assert not ix.contains_any(pa.array([absent], arrow_type))
    nulls = [j for j, v in enumerate(values) if v is None]
    assert ix.null_entry is not None and ix._bitmap(ix.null_entry).tolist() == nulls


def test_a_bitmap_index_of_many_rows_and_values_round_trips() -> None:
    from lakelog.connector.format.bitmap_index import BitmapIndex, encode_bitmap_index

    rng = np.random.default_rng(9)
    codes = rng.integers(0, 700, 100_000)
    arr = pa.array([f"city-{c}" for c in codes], pa.string())
    for version in (1, 2):
        ix = BitmapIndex.from_bytes(encode_bitmap_index(arr, version=version), pa.string(), "x")
        assert len(ix.entries) == len(set(codes.tolist()))
        for c in (0, 3, 699):
            assert ix.rows_of(pa.array([f"city-{c}"])).tolist() == np.flatnonzero(codes == c).tolist()
        both = ix.rows_of(pa.array(["city-1", "city-2"]))
        assert both.tolist() == np.flatnonzero((codes == 1) | (codes == 2)).tolist()


def test_damaged_bitmap_indexes_are_refused_naming_the_file() -> None:
    from lakelog.connector.format.bitmap_index import BitmapIndex, encode_bitmap_index

    data = encode_bitmap_index(pa.array(["a", "b", "a", "c", "c"]), version=2)
    for bad, why in ((data[:9], "cut short"), (b"\x07" + data[1:], "version 7"),
                     (data[:-3], "not a valid Roaring bitmap|outside")):
        with pytest.raises(CorruptFileError, match=f"bitmap index in data-1.parquet.*({why})"):
            BitmapIndex.from_bytes(bad, pa.string(), "data-1.parquet").rows_of(pa.array(["a", "c"]))


def test_bitmap_indexes_skip_files_and_rewrite_file_index_builds_them(catalog: lakelog.Catalog) -> None:
    """A low-cardinality column: each file holds a few of its values, a bloom filter would say
    "maybe" for most; the bitmap index knows. Also beside the file (large), on a merge-on-write
    table, after ``rewrite_file_index`` (version 1), and with a column indexed both ways."""
    from lakelog.connector.format.bitmap_index import BitmapIndex

    schema = pa.schema([pa.field("id", pa.int64(), False), ("city", pa.string()), ("day", pa.date32()),
                        ("ok", pa.bool_())])

    def rows(i: int) -> pa.Table:  # each file's cities span the others' (statistics cannot skip)
        ids = list(range(i * 100, i * 100 + 100))
        cities = ["a", *(f"c{i % 7}-{j % 3}" for j in range(1, 99)), "z"]
        return pa.table({"id": ids, "city": cities, "day": [19000 + i] * 100, "ok": [i % 2 == 0] * 100},
                        schema=schema)

    opts = {"bucket": "1", "bucket-key": "id", "file-index.bitmap.columns": "city,day",
            "file-index.bitmap.city.index-block-size": "40 b",
            "file-index.bloom-filter.columns": "day", "file-index.bloom-filter.day.items": "10"}
    t = catalog.create_table("db.a", schema, options=opts)
    for i in range(14):
        t.write(rows(i))
    f = plan_splits(t.store, t.latest_snapshot())[0].files[0]
    assert f.extra_files == [f.file_name + ".index"]  # bitmaps of 100 rows pass the 500-byte threshold
    containers = decode_container((Path(t.store.bucket_dir(b"", 0)) / f.extra_files[0]).read_bytes(), "x")
    assert set(containers["city"]) == {"bitmap"} and set(containers["day"]) == {BLOOM_FILTER, "bitmap"}
    city_index = BitmapIndex.from_bytes(containers["city"]["bitmap"], pa.string(), f.file_name)  # type: ignore[arg-type]
    day_index = BitmapIndex.from_bytes(containers["day"]["bitmap"], pa.date32(), f.file_name)  # type: ignore[arg-type]
    assert city_index.blocks == 3 and day_index.blocks == 1  # 40-byte blocks of 2 entries, and 16 kb
    assert planned(t, pc.field("city") == "c3-1") == 2
    assert planned(t, pc.field("city").isin(["c3-1", "c4-0"])) == 4
    assert planned(t, pc.field("day") == pa.scalar(19005, pa.date32())) == 1
    got = t.to_arrow(filter="city = 'c3-1'")
    assert sorted(got.column("id").to_pylist()) == [i * 100 + j for i in (3, 10) for j in range(1, 99) if j % 3 == 1]
    assert planned(t, pc.field("city") == "nowhere") == 0
    t.alter(lakelog.SetOption("file-index.read.enabled", "false"))
    assert planned(catalog.get_table("db.a"), pc.field("city") == "c3-1") == 14

    dv = catalog.create_table("db.dv", schema, primary_key=["id"],
                              options={"bucket": "1", "deletion-vectors.enabled": "true",
                                       "file-index.bitmap.columns": "city", "write-only": "true"})
    for i in range(4):
        dv.write(rows(i))
        dv.compact(full=False)
    dv.compact(full=True)
    dv.write(rows(12))  # a second run above level 0, of other cities (c5-*)
    dv.compact(full=False)
    assert planned(dv, pc.field("id") >= 0) == 2 and planned(dv, pc.field("city") == "c2-0") == 1
    assert planned(dv, pc.field("city") == "c5-0") == 1
    assert sorted(dv.to_arrow(filter="city = 'c2-0'").column("id").to_pylist()) == list(range(203, 299, 3))

    plain = catalog.create_table("db.plain", schema, options={"bucket": "1", "bucket-key": "id"})
    for i in range(6):
        plain.write(rows(i))
    assert planned(plain, pc.field("city") == "c3-1") == 6
    plain.alter(lakelog.SetOption("file-index.bitmap.columns", "city"),
                lakelog.SetOption("file-index.bitmap.city.version", "1"))
    plain = catalog.get_table("db.plain")
    assert plain.rewrite_file_index() is not None
    assert planned(plain, pc.field("city") == "c3-1") == 1
    assert plain.to_arrow(filter="city = 'c3-1'").num_rows == 33
    # the Flink sources plan (and re-plan on every worker) through ReadPlan: the same skipping
    from lakelog.operators.source_plan import ReadPlan

    plan = ReadPlan(plain.store.path, ["id"], "city = 'c3-1'", {})
    assert sum(len(s.files) for s in plan.splits(plain.store, plain.latest_snapshot().id)) == 1
    g = plan_splits(plain.store, plain.latest_snapshot())[0].files[0]
    body = decode_container(g.embedded_file_index or (Path(plain.store.bucket_dir(b"", 0)) / g.extra_files[0]).read_bytes(),
                            g.file_name)["city"]["bitmap"]
    assert body is not None and body[0] == 1 and BitmapIndex.from_bytes(body, pa.string(), "x").blocks == 0


@pytest.mark.parametrize("kind", ["append", "pk-dv", "pk-mor"])
def test_skipping_never_drops_a_matching_row_over_random_operations(catalog: lakelog.Catalog, kind: str) -> None:
    """Random writes, deletes, updates and compactions on a table indexed both ways (bloom on
    ``name``, bitmaps on ``city`` (with nulls) and ``n``): every point query returns exactly the
    rows a read of the whole table then filtered in Python returns, and the indexes do skip files
    (not on merge-on-read, where values do not skip). It found a bug: a file whose bitmap-indexed
    column held only nulls failed its write."""
    rng = np.random.default_rng({"append": 1, "pk-dv": 2, "pk-mor": 3}[kind])
    schema = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("city", pa.string()),
                        ("n", pa.int32())])
    opts = {"bucket": "2", "file-index.bloom-filter.columns": "name", "file-index.bloom-filter.name.items": "64",
            "file-index.bitmap.columns": "city,n", "file-index.bitmap.city.index-block-size": "48 b"}
    if kind == "append":
        t = catalog.create_table("db.t", schema, options={**opts, "bucket-key": "id"})
    else:
        extra = {"deletion-vectors.enabled": "true"} if kind == "pk-dv" else {}
        t = catalog.create_table("db.t", schema, primary_key=["id"], options={**opts, **extra})
    skipped = 0
    for step in range(30):
        ids = rng.choice(400, size=int(rng.integers(5, 40)), replace=False).astype(np.int64)
        t.write(pa.table({"id": ids, "name": [f"u{int(i) % 97}" for i in ids],
                          "city": [f"c{int(rng.integers(0, 6))}" if rng.random() > 0.1 else None for _ in ids],
                          "n": pa.array(rng.integers(0, 5, len(ids)), pa.int32())}, schema=schema))
        if kind != "append" and step % 5 == 2:
            gone = rng.choice(400, size=10, replace=False).astype(np.int64)
            t.delete(pa.table({"id": gone}, schema=pa.schema([pa.field("id", pa.int64(), False)])))
        if step % 7 == 6:
            t.compact(full=bool(rng.random() < 0.3))
        if step % 3 != 2:
            continue
        everything = t.to_arrow().to_pylist()
        for column, value in (("name", f"u{int(rng.integers(0, 97))}"), ("city", f"c{int(rng.integers(0, 7))}"),
                              ("n", int(rng.integers(0, 6))), ("city", "nowhere")):
            expr = pc.field(column) == value
            want = sorted(r["id"] for r in everything if r[column] == value)
            got = sorted(t.to_arrow(filter=expr).column("id").to_pylist())
            assert got == want, (kind, step, column, value)
            skipped += sum(len(s.files) for s in plan_splits(t.store, t.latest_snapshot())) - planned(t, expr)
    # merge-on-read: a newer version elsewhere may change a row's values, so only keys skip
    assert skipped == 0 if kind == "pk-mor" else skipped > 0
