"""The in-place merge of a deduplicate section: which rows of each run win, against a row-at-a-time oracle."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.lsm.newest import in_sequence_order, newest_masks


def oracle(runs: list[list[tuple[Any, ...]]]) -> list[list[bool]]:
    """The last row of each key, runs read oldest first (a key is equal when its values are: -0.0
    and 0.0 differ, NaN equals NaN, as Paimon's key comparison has it)."""

    def norm(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(("nan",) if isinstance(v, float) and v != v else (v, str(v)) if isinstance(v, float) else v
                     for v in key)

    last: dict[tuple[Any, ...], tuple[int, int]] = {}
    for i, run in enumerate(runs):
        for j, key in enumerate(run):
            last[norm(key)] = (i, j)
    winners = set(last.values())
    return [[(i, j) in winners for j in range(len(run))] for i, run in enumerate(runs)]


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    out = []
    for v in key:
        if isinstance(v, float):
            bits = np.array([v], dtype=np.float64).view(np.int64)[0] if v == v else np.int64(0x7FF8000000000000)
            out.append(int(bits ^ 0x7FFFFFFFFFFFFFFF) if bits < 0 else int(bits))
        else:
            out.append(v)
    return tuple(out)


def as_tables(runs: list[list[tuple[Any, ...]]], types: list[pa.DataType]) -> list[pa.Table]:
    names = [f"_KEY_k{i}" for i in range(len(types))]
    return [
        pa.table({n: pa.array([k[i] for k in run], t) for i, (n, t) in enumerate(zip(names, types))})
        for run in runs
    ]


def random_runs(rnd: random.Random, values: list[Any], arity: int) -> list[list[tuple[Any, ...]]]:
    runs = []
    for _ in range(rnd.randint(1, 6)):
        keys = [tuple(rnd.choice(values) for _ in range(arity)) for _ in range(rnd.randint(0, 40))]
        runs.append(sorted(keys, key=_sort_key))  # duplicates stay: a run may hold a key twice
    return runs


@pytest.mark.parametrize(
    "values, types",
    [
        (list(range(-20, 20)), [pa.int64()]),  # dense: marked in an array indexed by key
        ([-(2**62), -5, 0, 7, 2**40, 2**62], [pa.int64()]),  # sparse: sorted
        (list(range(10)), [pa.int32()]),
        (["", "a", "ab", "b", "\u00e9"], [pa.string()]),
        ([-0.0, 0.0, 1.5, float("nan"), float("-inf")], [pa.float64()]),
        ([0, 1, 2], [pa.int64(), pa.int64()]),
        (["x", "y"], [pa.string(), pa.string()]),
    ],
    ids=["dense-int", "sparse-int", "int32", "string", "float", "two-ints", "two-strings"],
)
def test_newest_masks_match_the_oracle(values: list[Any], types: list[pa.DataType]) -> None:
    rnd = random.Random(7)
    for _ in range(150):
        runs = random_runs(rnd, values, len(types))
        tables = as_tables(runs, types)
        got = [m.tolist() for m in newest_masks(tables, [f"_KEY_k{i}" for i in range(len(types))])]
        assert got == oracle(runs), runs


def test_dense_and_sorted_paths_agree_on_large_runs() -> None:
    rng = np.random.default_rng(3)
    for span in (1_000, 10**12):  # one dense, one too sparse for the array
        universe = rng.choice(span, size=800, replace=False)
        runs = [np.sort(rng.choice(universe, size=300)) for _ in range(5)]
        tables = [pa.table({"_KEY_id": pa.array(r, pa.int64())}) for r in runs]
        got = [m.tolist() for m in newest_masks(tables, ["_KEY_id"])]
        assert got == oracle([[(int(v),) for v in r] for r in runs])


def _file(lo: int, hi: int, min_seq: int, max_seq: int) -> DataFileMeta:
    def key(v: int) -> bytes:
        return v.to_bytes(8, "big")

    return DataFileMeta(
        file_name=f"f{lo}-{hi}-{min_seq}", file_size=1, row_count=1, min_key=key(lo), max_key=key(hi),
        key_stats=None, value_stats=None, min_sequence_number=min_seq,  # type: ignore[arg-type]
        max_sequence_number=max_seq, schema_id=0, level=0,
    )


def test_in_sequence_order_needs_older_sequences_first_where_keys_overlap() -> None:
    def key_of(b: bytes) -> int:
        return int.from_bytes(b, "big")

    assert in_sequence_order([_file(0, 10, 0, 5), _file(5, 20, 6, 9)], key_of)
    # a newer file first, over the same keys: the file order says nothing of the key's versions
    assert not in_sequence_order([_file(0, 10, 6, 9), _file(5, 20, 0, 5)], key_of)
    # sequence ranges that overlap over shared keys
    assert not in_sequence_order([_file(0, 10, 0, 6), _file(5, 20, 6, 9)], key_of)
    # disjoint key ranges need no order
    assert in_sequence_order([_file(0, 4, 6, 9), _file(5, 20, 0, 5)], key_of)
