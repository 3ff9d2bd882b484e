"""Bucket assignment: murmur3 against mmh3, the vectorised rows against the scalar BinaryRow encoder,
and bucket numbers against the files pypaimon writes."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog.connector.errors import InvalidInputError, OptionError, SchemaError
from lakelog.connector.format.binary_row import to_binary_row
from lakelog.connector.format.bucket import (
    bucket_key_hashes,
    buckets_from_hashes,
    compute_buckets,
    murmur3_32_rows,
)
from lakelog.connector.format.types import DataType

from .conftest import requires_pypaimon

STRING = DataType("VARCHAR", length=2147483647)
BYTES = DataType("VARBINARY", length=2147483647)


def _java_bucket(hash_value: int, num_buckets: int) -> int:
    return abs(hash_value) % num_buckets  # == abs(a % b) with Java's truncating %


def _scalar_hashes(table: pa.Table, names: list[str], types: list[DataType]) -> np.ndarray:
    columns = [table.column(name).to_pylist() for name in names]
    rows = zip(*columns)
    return np.array([mmh3.hash(to_binary_row(list(row), types), 42) for row in rows], dtype=np.int32)


# ---------------------------------------------------------------------------------------------
# murmur3


def test_murmur_matches_mmh3() -> None:
    rng = np.random.default_rng(7)
    for length in (0, 4, 8, 12, 16, 24, 64, 100):
        rows = rng.integers(0, 256, size=(50, length), dtype=np.uint8)
        for seed in (0, 42, 2**31 + 5):
            got = murmur3_32_rows(rows, seed)
            expected = [mmh3.hash(bytes(row), seed) for row in rows]
            assert got.dtype == np.int32
            assert got.tolist() == expected


def test_murmur_constant_leading_columns() -> None:
    rows = np.zeros((5, 16), dtype=np.uint8)
    rows[:, 12] = np.arange(5)
    assert murmur3_32_rows(rows).tolist() == [mmh3.hash(bytes(row), 42) for row in rows]
    same = np.tile(np.arange(8, dtype=np.uint8), (3, 1))
    assert murmur3_32_rows(same).tolist() == [mmh3.hash(bytes(range(8)), 42)] * 3


def test_murmur_rejects_ragged_width() -> None:
    with pytest.raises(InvalidInputError):
        murmur3_32_rows(np.zeros((2, 6), dtype=np.uint8))
    with pytest.raises(InvalidInputError):
        murmur3_32_rows(np.zeros(8, dtype=np.uint8))


def test_java_remainder() -> None:
    hashes = np.array([-7, -1, 0, 6, 2**31 - 1, -(2**31)], dtype=np.int32)
    assert buckets_from_hashes(hashes, 4).tolist() == [3, 1, 0, 2, 3, 0]
    assert buckets_from_hashes(hashes, 3).tolist() == [_java_bucket(int(h), 3) for h in hashes]
    with pytest.raises(OptionError):
        buckets_from_hashes(hashes, 0)


# ---------------------------------------------------------------------------------------------
# vectorised rows == scalar encoder


def _random_table(n: int, seed: int) -> tuple[pa.Table, dict[str, DataType]]:
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    words = ["", "a", "abcdefg", "abcdefgh", "ü" * 5, "a long string with many bytes " * 3, None]

    def maybe_null(values: list[Any], rate: float = 0.1) -> list[Any]:
        return [None if pick.random() < rate else v for v in values]

    big_decimals = [
        Decimal(pick.choice([-1, 1]) * pick.randint(0, 10 ** pick.randint(0, 37))).scaleb(-5)
        for _ in range(n)
    ]
    table = pa.table(
        {
            "b": pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
            "i": pa.array(maybe_null([int(x) for x in rng.integers(-(2**31), 2**31 - 1, n)]), pa.int32()),
            "s": pa.array([pick.choice(words) for _ in range(n)], pa.string()),
            "ls": pa.array([pick.choice(words) for _ in range(n)], pa.large_string()),
            "bin": pa.array(
                maybe_null(
                    [bytes(rng.integers(0, 256, pick.randint(0, 20), dtype=np.uint8)) for _ in range(n)]
                ),
                pa.binary(),
            ),
            "f": pa.array(rng.normal(size=n).astype(np.float32)),
            "d": pa.array(maybe_null([float(x) for x in rng.normal(size=n)])),
            "bo": pa.array(maybe_null([bool(x) for x in rng.integers(0, 2, n)])),
            "t8": pa.array(rng.integers(-128, 127, n, dtype=np.int8)),
            "t16": pa.array(rng.integers(-30000, 30000, n, dtype=np.int16)),
            "date": pa.array(rng.integers(-30000, 30000, n, dtype=np.int32)).cast(pa.date32()),
            "time": pa.array(rng.integers(0, 86_400_000, n, dtype=np.int32)).cast(pa.time32("ms")),
            "tus": pa.array(maybe_null([int(x) for x in rng.integers(-(2**50), 2**50, n)]), pa.int64()).cast(
                pa.timestamp("us")
            ),
            "tns": pa.array(rng.integers(-(2**60), 2**60, n)).cast(pa.timestamp("ns")),
            "tms": pa.array(rng.integers(-(2**40), 2**40, n)).cast(pa.timestamp("ms", tz="UTC")),
            "dec": pa.array(
                maybe_null([Decimal(int(x)).scaleb(-2) for x in rng.integers(-(10**12), 10**12, n)]),
                pa.decimal128(15, 2),
            ),
            "bdec": pa.array(maybe_null(big_decimals), pa.decimal128(38, 5)),
        }
    )
    types = {
        "b": DataType("BIGINT"),
        "i": DataType("INT"),
        "s": STRING,
        "ls": DataType("VARCHAR", length=100),
        "bin": BYTES,
        "f": DataType("FLOAT"),
        "d": DataType("DOUBLE"),
        "bo": DataType("BOOLEAN"),
        "t8": DataType("TINYINT"),
        "t16": DataType("SMALLINT"),
        "date": DataType("DATE"),
        "time": DataType("TIME"),
        "tus": DataType("TIMESTAMP", precision=6),
        "tns": DataType("TIMESTAMP", precision=9),
        "tms": DataType("TIMESTAMP_LTZ", precision=3),
        "dec": DataType("DECIMAL", precision=15, scale=2),
        "bdec": DataType("DECIMAL", precision=38, scale=5),
    }
    return table, types


RANDOM_TABLE, RANDOM_TYPES = _random_table(1500, seed=3)


@pytest.mark.parametrize("name", list(RANDOM_TYPES))
def test_single_column_matches_scalar_encoder(name: str) -> None:
    types = [RANDOM_TYPES[name]]
    expected = _scalar_hashes(RANDOM_TABLE, [name], types)
    assert (bucket_key_hashes(RANDOM_TABLE, [name], types) == expected).all()


@pytest.mark.parametrize(
    ("name", "data_type"),
    [
        ("tus", DataType("TIMESTAMP", precision=3)),
        ("tus", DataType("TIMESTAMP", precision=9)),
        ("tns", DataType("TIMESTAMP", precision=3)),
        ("tms", DataType("TIMESTAMP_LTZ", precision=6)),
        ("dec", DataType("DECIMAL", precision=15, scale=2)),
    ],
)
def test_precision_variants_match_scalar_encoder(name: str, data_type: DataType) -> None:
    expected = _scalar_hashes(RANDOM_TABLE, [name], [data_type])
    assert (bucket_key_hashes(RANDOM_TABLE, [name], [data_type]) == expected).all()


def test_multi_column_and_wide_keys_match_scalar_encoder() -> None:
    names = ["s", "b", "bdec", "i", "ls", "tus", "bin"]
    types = [RANDOM_TYPES[name] for name in names]
    assert (bucket_key_hashes(RANDOM_TABLE, names, types) == _scalar_hashes(RANDOM_TABLE, names, types)).all()
    wide = list(RANDOM_TYPES) * 4  # 68 fields: a two-word null header
    wide_types = [RANDOM_TYPES[name] for name in wide]
    assert (
        bucket_key_hashes(RANDOM_TABLE, wide, wide_types) == _scalar_hashes(RANDOM_TABLE, wide, wide_types)
    ).all()


def test_chunked_sliced_and_dictionary_inputs() -> None:
    values = [f"key-{i % 37}" * (i % 3) for i in range(500)]
    plain = pa.table({"k": pa.array(values)})
    expected = _scalar_hashes(plain, ["k"], [STRING])
    chunked = pa.table({"k": pa.chunked_array([pa.array(values[:123]), pa.array(values[123:])])})
    assert (bucket_key_hashes(chunked, ["k"], [STRING]) == expected).all()
    dictionary = pa.table({"k": pa.array(values).dictionary_encode()})
    assert (bucket_key_hashes(dictionary, ["k"], [STRING]) == expected).all()
    sliced = plain.slice(100, 250)
    assert (bucket_key_hashes(sliced, ["k"], [STRING]) == expected[100:350]).all()
    ints = pa.table({"k": pa.array(range(1000), pa.int64())}).slice(10, 20)
    assert (
        bucket_key_hashes(ints, ["k"], [DataType("INT")]) == _scalar_hashes(ints, ["k"], [DataType("INT")])
    ).all()


def test_record_batch_input() -> None:
    batch = pa.record_batch(
        {"k": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["a", None, "a long string!"])}
    )
    types = [STRING, DataType("BIGINT")]
    expected = compute_buckets(pa.Table.from_batches([batch]), ["s", "k"], types, 4)
    assert compute_buckets(batch, ["s", "k"], types, 4).tolist() == expected.tolist()


def test_batches_larger_than_a_chunk() -> None:
    n = 140_000
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 20, n)
    table = pa.table(
        {
            "s": pa.array(["x" * int(k) for k in lengths]),
            "b": pa.array(rng.integers(0, 10**12, n)),
        }
    )
    sample = rng.choice(n, 300, replace=False)
    for names, types in ((["b"], [DataType("BIGINT")]), (["s", "b"], [STRING, DataType("BIGINT")])):
        got = bucket_key_hashes(table, names, types)
        subset = table.take(pa.array(sample))
        assert (got[sample] == _scalar_hashes(subset, names, types)).all()


def test_empty_table_and_errors() -> None:
    empty = pa.table({"k": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    assert compute_buckets(empty, ["k"], [DataType("BIGINT")], 4).tolist() == []
    assert compute_buckets(empty, ["s"], [STRING], 4).tolist() == []
    table = pa.table({"k": pa.array([1, 2], pa.int64()), "a": pa.array([[1], [2]])})
    with pytest.raises(OptionError, match="bucket"):
        compute_buckets(table, ["k"], [DataType("BIGINT")], 0)
    with pytest.raises(SchemaError, match="missing"):
        compute_buckets(table, ["missing"], [DataType("BIGINT")], 2)
    with pytest.raises(SchemaError, match="ARRAY"):
        compute_buckets(table, ["a"], [DataType("ARRAY", element=DataType("BIGINT"))], 2)
    with pytest.raises(SchemaError):
        compute_buckets(table, ["k", "a"], [DataType("BIGINT")], 2)
    with pytest.raises(SchemaError, match="'k'"):
        compute_buckets(table, ["k"], [DataType("TIMESTAMP", precision=3)], 2)


def test_one_million_bigint_keys_match_the_scalar_encoder() -> None:
    # the time this takes is a benchmark (benchmarks/bench_hot_paths.py --only bucket), not a test
    table = pa.table({"k": pa.array(np.arange(1_000_000, dtype=np.int64) * 7919)})
    buckets = compute_buckets(table, ["k"], [DataType("BIGINT")], 4)
    assert buckets.dtype == np.int32 and len(buckets) == 1_000_000
    for sample in (table.slice(0, 1000), table.slice(999_000, 1000)):
        expected = [_java_bucket(int(h), 4) for h in _scalar_hashes(sample, ["k"], [DataType("BIGINT")])]
        start = 0 if sample.column(0)[0].as_py() == 0 else 999_000
        assert buckets[start : start + 1000].tolist() == expected


# ---------------------------------------------------------------------------------------------
# pypaimon as the oracle: every row lies in the bucket compute_buckets gives it



def _write_pypaimon(
    tmp_path: Path,
    columns: list[tuple[str, str]],
    data: pa.Table,
    *,
    partition_keys: list[str] | None = None,
    primary_keys: list[str] | None = None,
    options: dict[str, str],
) -> Path:
    from pypaimon import CatalogFactory, Schema
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.data_types import DataField as PaimonField

    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "warehouse")})
    catalog.create_database("db", True)
    fields = [PaimonField(i, name, AtomicType(type_string)) for i, (name, type_string) in enumerate(columns)]
    schema = Schema(fields=fields, partition_keys=partition_keys, primary_keys=primary_keys, options=options)
    catalog.create_table("db.t", schema, False)
    table = catalog.get_table("db.t")
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    commit = builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    return tmp_path / "warehouse" / "db.db" / "t"


def _assert_files_in_computed_buckets(
    table_dir: Path, key: list[str], types: list[DataType], num_buckets: int, expected_rows: int
) -> None:
    files = sorted(table_dir.rglob("bucket-*/*.parquet"))
    assert files
    seen_rows = 0
    used = set()
    for path in files:
        bucket = int(path.parent.name.split("-", 1)[1])
        used.add(bucket)
        rows = pq.read_table(path)
        computed = compute_buckets(rows, key, types, num_buckets)
        assert (computed == bucket).all(), f"{path}: rows computed into {set(computed.tolist())}"
        seen_rows += rows.num_rows
    assert seen_rows == expected_rows
    assert len(used) > 1 or num_buckets == 1


def _words(n: int, rng: random.Random, lo: int, hi: int) -> list[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyzäöü0123456789"
    return [f"{i}-" + "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi))) for i in range(n)]


PK_CASES: list[tuple[str, str, pa.DataType, DataType]] = [
    ("bigint", "BIGINT", pa.int64(), DataType("BIGINT")),
    ("int", "INT", pa.int32(), DataType("INT")),
    ("short_string", "STRING", pa.string(), STRING),
    ("long_string", "STRING", pa.string(), STRING),
    ("date", "DATE", pa.date32(), DataType("DATE")),
    ("decimal", "DECIMAL(12, 3)", pa.decimal128(12, 3), DataType("DECIMAL", precision=12, scale=3)),
    ("timestamp6", "TIMESTAMP(6)", pa.timestamp("us"), DataType("TIMESTAMP", precision=6)),
]


def _pk_values(kind: str, n: int) -> list[Any]:
    rng = random.Random(kind)
    if kind in ("bigint", "int"):
        bound = 2**62 if kind == "bigint" else 2**31 - 1
        return sorted({rng.randint(-bound, bound) for _ in range(n)})
    if kind == "short_string":
        return [str(i) for i in range(n)]
    if kind == "long_string":
        return _words(n, rng, 5, 40)
    if kind == "date":
        return [dt.date(1900, 1, 1) + dt.timedelta(days=i * 37) for i in range(n)]
    if kind == "decimal":
        return [Decimal(rng.randint(-(10**11), 10**11)).scaleb(-3) + Decimal(i) for i in range(n)]
    return [dt.datetime(1965, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**15)) for _ in range(n)]


@requires_pypaimon
@pytest.mark.parametrize("num_buckets", [4, 3, 7])
@pytest.mark.parametrize(
    ("kind", "paimon_type", "arrow_type", "data_type"), PK_CASES, ids=[c[0] for c in PK_CASES]
)
def test_primary_key_buckets_match_pypaimon(
    tmp_path: Path,
    num_buckets: int,
    kind: str,
    paimon_type: str,
    arrow_type: pa.DataType,
    data_type: DataType,
) -> None:
    values = list(dict.fromkeys(_pk_values(kind, 300)))  # primary keys are unique
    n = len(values)
    data = pa.table({"k": pa.array(values, arrow_type), "v": pa.array(range(n), pa.int64())})
    table_dir = _write_pypaimon(
        tmp_path,
        [("k", paimon_type), ("v", "BIGINT")],
        data,
        primary_keys=["k"],
        options={"bucket": str(num_buckets)},
    )
    _assert_files_in_computed_buckets(table_dir, ["k"], [data_type], num_buckets, n)


@requires_pypaimon
@pytest.mark.parametrize("num_buckets", [4, 7])
def test_two_column_key_matches_pypaimon(tmp_path: Path, num_buckets: int) -> None:
    n = 400
    rng = random.Random(5)
    data = pa.table(
        {
            "s": pa.array(_words(n, rng, 0, 20)),
            "b": pa.array([rng.randint(-(2**40), 2**40) for _ in range(n)], pa.int64()),
            "v": pa.array([float(i) for i in range(n)]),
        }
    )
    table_dir = _write_pypaimon(
        tmp_path,
        [("s", "STRING"), ("b", "BIGINT"), ("v", "DOUBLE")],
        data,
        primary_keys=["s", "b"],
        options={"bucket": str(num_buckets)},
    )
    _assert_files_in_computed_buckets(table_dir, ["s", "b"], [STRING, DataType("BIGINT")], num_buckets, n)


@requires_pypaimon
def test_partitioned_table_bucket_key_is_pk_minus_partition(tmp_path: Path) -> None:
    n = 300
    data = pa.table(
        {
            "dt": pa.array([f"2024-01-0{1 + i % 3}" for i in range(n)]),
            "id": pa.array(range(n), pa.int64()),
            "name": pa.array([f"name-{i}" for i in range(n)]),
        }
    )
    table_dir = _write_pypaimon(
        tmp_path,
        [("dt", "STRING"), ("id", "BIGINT"), ("name", "STRING")],
        data,
        partition_keys=["dt"],
        primary_keys=["dt", "id"],
        options={"bucket": "3"},
    )
    assert len(list(table_dir.glob("dt=*"))) == 3
    _assert_files_in_computed_buckets(table_dir, ["id"], [DataType("BIGINT")], 3, n)


@requires_pypaimon
def test_bucket_key_option_on_append_table_with_nulls(tmp_path: Path) -> None:
    n = 300
    rng = random.Random(9)
    data = pa.table(
        {
            "a": pa.array([None if i % 10 == 0 else rng.randint(-1000, 1000) for i in range(n)], pa.int32()),
            "s": pa.array([None if i % 7 == 0 else f"value-{i}" * (i % 3) for i in range(n)]),
            "v": pa.array(range(n), pa.int64()),
        }
    )
    table_dir = _write_pypaimon(
        tmp_path,
        [("a", "INT"), ("s", "STRING"), ("v", "BIGINT")],
        data,
        options={"bucket": "5", "bucket-key": "s,a"},
    )
    _assert_files_in_computed_buckets(table_dir, ["s", "a"], [STRING, DataType("INT")], 5, n)
