"""The sink's per-row key encoder agrees with the vectorised bucket assignment and partition encoding."""

from __future__ import annotations

import decimal
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from lakelog.connector.errors import InvalidInputError, LakelogError
from lakelog.connector.format.binary_row import serialize_row, to_binary_row
from lakelog.connector.format.bucket import compute_buckets
from lakelog.connector.format.types import DataType
from lakelog.operators.sink_keys import (
    KeyEncoder,
    default_max_parallelism,
    fast_binary_row_encoder,
    flink_key_group,
    parse_key,
)

BIGINT = DataType("BIGINT")
INT = DataType("INT")
SMALLINT = DataType("SMALLINT")
TINYINT = DataType("TINYINT")
STRING = DataType("VARCHAR", length=2147483647)


def _oracle_buckets(columns: dict[str, list], types: list[DataType], n: int) -> list[int]:
    arrow_types = {"BIGINT": pa.int64(), "INT": pa.int32(), "SMALLINT": pa.int16(), "TINYINT": pa.int8(),
                   "VARCHAR": pa.string(), "DECIMAL": pa.decimal128(10, 2)}
    table = pa.table({k: pa.array(v, arrow_types[t.root]) for (k, v), t in zip(columns.items(), types)})
    return compute_buckets(table, list(columns), types, n).tolist()


@pytest.mark.parametrize(
    "types",
    [[BIGINT], [INT], [SMALLINT], [TINYINT], [STRING], [STRING, BIGINT], [INT, STRING, STRING]],
)
def test_fast_encoder_matches_to_binary_row(types: list[DataType]) -> None:
    enc = fast_binary_row_encoder(types)
    assert enc is not None
    rng = np.random.default_rng(7)
    for _ in range(300):
        row = []
        for t in types:
            if t.root == "VARCHAR":
                row.append("".join(rng.choice(list("ab€é𝄞xyz"), int(rng.integers(0, 20)))))
            else:
                bits = {"BIGINT": 63, "INT": 31, "SMALLINT": 15, "TINYINT": 7}[t.root]
                row.append(int(rng.integers(-(2**bits), 2**bits - 1, dtype=np.int64)))
        assert enc(row) == to_binary_row(row, types)


def test_fast_encoder_not_built_for_other_types() -> None:
    assert fast_binary_row_encoder([DataType("DOUBLE")]) is None
    assert fast_binary_row_encoder([BIGINT, DataType("DECIMAL", precision=10, scale=2)]) is None
    assert fast_binary_row_encoder([]) is None


@pytest.mark.parametrize("n", [1, 3, 4, 16])
def test_bucket_of_ints_and_strings_matches_compute_buckets(n: int) -> None:
    rng = np.random.default_rng(n)
    ids = [int(x) for x in rng.integers(-(2**62), 2**62, 500)] + [0, -1, 2**63 - 1, -(2**63)]
    names = [f"user-{i}" if i % 5 else "" for i in range(len(ids))]
    types = [BIGINT, STRING]
    enc = KeyEncoder([], [], [0, 1], types, n)
    got = [enc.bucket([a, b]) for a, b in zip(ids, names)]
    assert got == _oracle_buckets({"id": ids, "name": names}, types, n)
    single = KeyEncoder([], [], [0], [BIGINT], n)
    assert [single.bucket([a]) for a in ids] == _oracle_buckets({"id": ids}, [BIGINT], n)


def test_nulls_and_other_types_take_the_general_path() -> None:
    dec = DataType("DECIMAL", precision=10, scale=2)
    enc = KeyEncoder([], [], [0, 1], [INT, dec], 5)
    vals = [[1, decimal.Decimal("1.50")], [None, decimal.Decimal("2.00")], [7, None]]
    expected = _oracle_buckets({"a": [v[0] for v in vals], "b": [v[1] for v in vals]}, [INT, dec], 5)
    assert [enc.bucket(v) for v in vals] == expected
    nullable = KeyEncoder([], [], [0], [BIGINT], 4)
    assert nullable.bucket_row([None]) == to_binary_row([None], [BIGINT])


def test_bad_values_raise_lakelog_errors() -> None:
    enc = KeyEncoder([], [], [0], [BIGINT], 4)
    with pytest.raises(LakelogError):
        enc.bucket([1.5])
    with pytest.raises(InvalidInputError):
        enc.bucket([2**64])


def test_keys_carry_the_partition_and_cache_it() -> None:
    part_types = [STRING, INT]
    enc = KeyEncoder([0, 1], part_types, [2], [BIGINT], 3)
    rows = [["2024-06-01", 1, 10], ["2024-06-02", 1, 11], ["2024-06-01", 1, 12], [None, 2, 13]]
    for r in rows:
        part = serialize_row(r[:2], part_types).hex()
        bucket = _oracle_buckets({"k": [r[2]]}, [BIGINT], 3)[0]
        assert enc.key(r) == f"{part}:{bucket}"
    unpartitioned = KeyEncoder([], [], [], [], -1)
    assert unpartitioned.key([1, 2]) == serialize_row([], []).hex() + ":0"


# key groups as Flink 2.3's KeyGroupRangeAssignment.assignToKeyGroup(Row.of(key), max) computed them
_JVM_KEY_GROUPS = [
    ("000000000000000000000000:0", 80, 21328),
    ("0000000400000000000000000000000000000000:3~17", 112, 9712),
    ("é𝄞x", 127, 32767),
    ("", 33, 19617),
]


@pytest.mark.parametrize("key,kg128,kg32768", _JVM_KEY_GROUPS)
def test_flink_key_group_matches_the_jvm(key: str, kg128: int, kg32768: int) -> None:
    assert flink_key_group(key, 128) == kg128
    assert flink_key_group(key, 32768) == kg32768


def test_default_max_parallelism_matches_flink() -> None:
    expected = {1: 128, 2: 128, 85: 128, 86: 256, 100: 256, 1000: 2048, 30000: 32768}
    assert {p: default_max_parallelism(p) for p in expected} == expected


@pytest.mark.parametrize("buckets", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("max_p", [128, 256])
def test_balanced_keys_spread_buckets_over_writers(buckets: int, max_p: int) -> None:
    enc = KeyEncoder([], [], [0], [BIGINT], buckets, max_p)
    keys = [enc.key([b]) for b in range(2000)]
    distinct = sorted(set(keys))
    assert len(distinct) == buckets
    for p in (2, 3, 4):
        if p > buckets:
            continue
        per_writer = Counter(flink_key_group(k, max_p) * p // max_p for k in distinct)
        assert max(per_writer.values()) - min(per_writer.values()) <= 1, (p, per_writer)
        assert len(per_writer) == p
    # the salt only changes which writer gets a bucket, never the bucket of a row
    plain = KeyEncoder([], [], [0], [BIGINT], buckets)
    assert [k.split("~")[0] for k in keys] == [plain.key([b]) for b in range(2000)]


def test_balanced_keys_of_a_partition_are_stable() -> None:
    a = KeyEncoder([0], [STRING], [1], [BIGINT], 4, 128)
    b = KeyEncoder([0], [STRING], [1], [BIGINT], 4, 128)
    rows = [[f"2024-06-0{d}", i] for d in range(1, 8) for i in range(20)]
    assert [a.key(r) for r in rows] == [b.key(r) for r in rows]


@pytest.mark.parametrize("counts", [(2, 4), (4, 2), (3, 8), (1, 5), (16, 200)])
def test_keys_of_a_partition_follow_its_own_bucket_count(counts: tuple[int, int]) -> None:
    """The table's count is ``counts[0]``; a partition written with ``counts[1]`` buckets (a rescaled
    table) gets one key per bucket of its own count, its rows in Paimon's bucket for that count, and
    its keys spread over the writers as evenly as a partition of the table's count."""
    default, own = counts
    enc = KeyEncoder([0], [STRING], [1], [BIGINT], default, 128)
    ids = list(range(3000))
    keys = [enc.key(["p", i], own) for i in ids]
    assert len(set(keys)) == own
    buckets = _oracle_buckets({"id": ids}, [BIGINT], own)
    assert [enc.bucket(["p", i], own) for i in ids] == buckets
    assert [parse_key(k)[1] for k in keys] == buckets
    assert {enc.key_for(["p"], b, own) for b in buckets} == set(keys)
    for p in (2, 3, 4):
        if p > own:
            continue
        per_writer = Counter(flink_key_group(k, 128) * p // 128 for k in set(keys))
        assert len(per_writer) == p and max(per_writer.values()) - min(per_writer.values()) <= 1
    # the table's count is still the default, and a bucket beyond the partition's count is refused
    assert len({enc.key(["p", i]) for i in ids}) == default
    with pytest.raises(InvalidInputError, match="outside"):
        enc.key_for(["p"], own, own)
