"""The set-union aggregate functions (issue 24): ``rbm32``, ``rbm64``, ``hll_sketch`` and ``theta_sketch``.

Their values are serialized sets; a key's values are united on merge. Paimon's Java code merges the
same bytes (tests/test_interop_paimon_java.py); here the merge is checked against a dict oracle over
random writes, compactions and retractions, and CRoaring (pyroaring) checks the bitmap bytes.
"""

from __future__ import annotations

import random
import sys
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog import sketches as sk
from lakelog.connector.errors import InvalidInputError, MissingDependencyError, OptionError
from lakelog.connector.format.roaring import decode_roaring32, encode_roaring32

SCHEMA = pa.schema([pa.field("id", pa.int32(), False), ("bm", pa.binary()), ("uv", pa.binary()),
                    ("th", pa.binary()), ("b64", pa.binary())])  # fmt: skip
AGG = {"merge-engine": "aggregation", "fields.bm.aggregate-function": "rbm32",
       "fields.uv.aggregate-function": "hll_sketch", "fields.th.aggregate-function": "theta_sketch",
       "fields.b64.aggregate-function": "rbm64"}


def wide(values: list[int]) -> list[int]:
    """Small integers (0..199) spread over the range of a Java long, for the ``rbm64`` column:
    negative ones, ones far beyond 32 bits, and pairs sharing a container."""
    return [(v // 2) * 9 * 10**16 - 2**62 + v % 2 for v in values]


def table(tmp_path: Any, **options: str) -> lakelog.Table:
    return lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", SCHEMA, primary_key=["id"], options={"bucket": "2", **AGG, **options})


def rows(ids: list[int], sets: list[Optional[set[int]]]) -> pa.Table:
    def col(make: Any) -> list[Optional[bytes]]:
        return [None if s is None else make(sorted(s)) for s in sets]

    return pa.table({"id": pa.array(ids, pa.int32()), "bm": col(sk.bitmap32), "uv": col(sk.hll_sketch),
                     "th": col(sk.theta_sketch), "b64": col(lambda s: sk.bitmap64(wide(s)))},
                    schema=SCHEMA)  # fmt: skip


def contents(t: lakelog.Table) -> dict[int, tuple[list[int], int, int]]:
    out = {}
    for r in t.to_arrow().to_pylist():
        bm = sk.bitmap32_values(r["bm"]).tolist() if r["bm"] is not None else []
        b64 = sk.bitmap64_values(r["b64"]).tolist() if r["b64"] is not None else []
        assert b64 == sorted(set(wide(bm))), r["id"]  # the rbm64 column holds the same sets, spread
        out[r["id"]] = (bm, round(sk.hll_estimate(r["uv"])) if r["uv"] is not None else 0,
                        round(sk.theta_estimate(r["th"])) if r["th"] is not None else 0)  # fmt: skip
    return out


# ---- the bytes -------------------------------------------------------------------------------------------
def test_run_optimised_bitmaps_are_the_bytes_croaring_writes() -> None:
    """``rbm32`` values are run-optimised as Paimon's RoaringBitmap32 writes them; CRoaring's
    run_optimize makes the same choice per container, so the bytes are equal."""
    pyroaring = pytest.importorskip("pyroaring")
    rng = np.random.default_rng(5)
    for trial in range(150):
        hi = int(rng.choice([50, 5000, 70_000, 1 << 20, (1 << 32) - 1]))
        pos = rng.integers(0, hi, int(rng.integers(0, 20_000)))
        if trial % 2:
            start = int(rng.integers(0, hi))
            pos = np.concatenate([pos, np.arange(start, min(start + int(rng.integers(1, 100_000)), 1 << 32))])
        pos = np.unique(pos).astype(np.uint64)
        theirs = pyroaring.BitMap(pos.astype(np.uint32).tolist())
        theirs.run_optimize()
        ours = encode_roaring32(pos, run_optimize=True)
        assert ours == theirs.serialize(), trial
        got, used = decode_roaring32(ours, "x")
        assert used == len(ours) and got.tolist() == pos.tolist(), trial
    # the example of Paimon's RoaringBitmap32.bitmapOf(1, 2, 3, 4, 5, 100).serialize(), as Java wrote it
    assert sk.bitmap32([1, 2, 3, 4, 5, 100]).hex() == "3b300000010000050002000100040064000000"


def test_helpers_make_and_read_values() -> None:
    assert sk.bitmap32_values(sk.bitmap32(np.array([7, 3, 3, 2**32 - 1]))).tolist() == [3, 7, 2**32 - 1]
    assert sk.bitmap32_values(sk.bitmap32([])).tolist() == []
    with pytest.raises(InvalidInputError, match="0 to 2\\*\\*32 - 1"):
        sk.bitmap32([-1])
    assert round(sk.hll_estimate(sk.hll_sketch(["a", "b", "a", 1]))) == 3
    assert round(sk.theta_estimate(sk.theta_sketch(range(100)))) == 100
    with pytest.raises(InvalidInputError, match="not a serialized Theta sketch"):
        sk.theta_estimate(sk.hll_sketch([1]))


def test_rbm64_values_hold_any_set_of_longs_in_the_java_librarys_layout() -> None:
    """``rbm64`` values (the layout is in connector/format/roaring64.py; Paimon's Java code reads and
    unites them in tests/test_interop_paimon_java.py): random sets over the whole range of a long
    read back, whatever the tree's node types; the library's unsigned order shows in the layout."""
    from lakelog.connector.format.roaring64 import decode_roaring64

    rng = np.random.default_rng(64)
    assert sk.bitmap64([]) == b"\x00" and sk.bitmap64_values(b"\x00").tolist() == []
    lone = sk.bitmap64([5])  # a tree of one leaf: type 4, six key bytes, container 0
    assert lone[:9] == b"\x01" + (1).to_bytes(8, "little") and lone[9] == 4 and lone[13:19] == bytes(6)
    for trial in range(60):
        n_first = int(rng.choice([1, 3, 10, 40, 200]))  # how many distinct first bytes: every node type
        firsts = rng.choice(256, size=min(n_first, 256), replace=False).astype(np.int64)
        spread = (firsts - 128) << 56 | rng.integers(0, 1 << 40, len(firsts))
        dense = np.arange(int(rng.integers(0, 70_000))) + int(rng.integers(-(2**62), 2**62))
        values = np.concatenate([spread, dense, rng.integers(-(2**63), 2**63 - 1, int(rng.integers(0, 50)))])
        got = sk.bitmap64_values(sk.bitmap64(values))
        assert got.tolist() == sorted(set(values.tolist())), trial
        raw, _ = decode_roaring64(sk.bitmap64(values), "test")
        assert (raw.view(np.uint64)[1:] > raw.view(np.uint64)[:-1]).all()  # unsigned order
    with pytest.raises(InvalidInputError, match="-2\\*\\*63 to 2\\*\\*63 - 1"):
        sk.bitmap64([2**63])
    good = sk.bitmap64([1, 2**40, -7])
    for bad, why in [(good[:-3], "not a serialized Roaring64Bitmap"), (b"\x02", "first byte 2"),
                     (good + b"\x00", "followed by 1 more bytes"), (sk.bitmap32([1]), "not a serialized")]:
        with pytest.raises(InvalidInputError, match=why):
            sk.bitmap64_values(bad)


# ---- the merge against a dict oracle ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_key_holds_the_union_of_its_sets(tmp_path: Any, seed: int) -> None:
    """Random writes (nulls included), compactions and retractions (ignored where configured) against
    a dict of the sets written; a retraction is refused where it is not."""
    rnd = random.Random(seed)
    t = table(tmp_path, **{"fields.bm.ignore-retract": "true", "fields.uv.ignore-retract": "true",
                           "fields.th.ignore-retract": "true", "fields.b64.ignore-retract": "true"})  # fmt: skip
    want: dict[int, set[int]] = {}
    for step in range(25):
        op = rnd.random()
        if op < 0.15:
            t.compact(full=rnd.random() < 0.5)
            continue
        ids = rnd.sample(range(40), rnd.randrange(1, 15))
        sets: list[Optional[set[int]]] = [
            None if rnd.random() < 0.2 else set(rnd.sample(range(200), rnd.randrange(0, 6))) for _ in ids]
        if op < 0.25:
            t.delete(rows(ids, sets))  # -D rows: their values are ignored (ignore-retract)
            for i in ids:
                want.setdefault(i, set())
        else:
            t.write(rows(ids, sets))
            for i, s in zip(ids, sets):
                want.setdefault(i, set()).update(s or ())
        got = contents(t)
        assert got == {i: (sorted(v), len(v), len(v)) for i, v in want.items()}, step


def test_a_lone_value_is_kept_as_written_and_unions_take_the_smallest_lg_k(tmp_path: Any) -> None:
    """As Paimon's agg(null, x) = x: a key's only value keeps its bytes (an lg_k 10 sketch stays so);
    a union of HLL sketches has the smallest lg_k of its inputs."""
    ds = pytest.importorskip("datasketches")
    t = table(tmp_path)
    lone = sk.hll_sketch(range(50), lg_k=10)
    t.write(pa.table({"id": pa.array([1, 2], pa.int32()), "bm": [None, None], "uv": [lone, sk.hll_sketch([1])],
                      "th": [None, None], "b64": [None, None]}, schema=SCHEMA))  # fmt: skip
    t.write(pa.table({"id": pa.array([2], pa.int32()), "bm": [None], "uv": [sk.hll_sketch([2], lg_k=8)],
                      "th": [None], "b64": [None]}, schema=SCHEMA))  # fmt: skip
    got = {r["id"]: r["uv"] for r in t.to_arrow().to_pylist()}
    assert got[1] == lone
    united = ds.hll_sketch.deserialize(got[2])
    assert united.lg_config_k == 8 and round(united.get_estimate()) == 2


def test_retractions_are_refused_without_ignore_retract(tmp_path: Any) -> None:
    t = table(tmp_path)
    t.write(rows([1], [{1, 2}]))
    with pytest.raises(InvalidInputError, match="'rbm32' of field 'bm' does not support retraction"):
        t.delete(rows([1], [{1}]))
    assert contents(t) == {1: ([1, 2], 2, 2)}


def test_unions_in_a_partial_update_sequence_group(tmp_path: Any) -> None:
    """Inside a sequence group, rows older than the group's state are united too (aggReversed)."""
    schema = pa.schema([pa.field("id", pa.int32(), False), ("seq", pa.int64()), ("bm", pa.binary())])
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table("db.pu", schema, primary_key=["id"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.seq.sequence-group": "bm",
        "fields.bm.aggregate-function": "rbm32"})  # fmt: skip
    for seq, vals in [(5, [1, 2]), (3, [3]), (9, [4]), (1, [5])]:
        t.write(pa.table({"id": pa.array([1], pa.int32()), "seq": [seq], "bm": [sk.bitmap32(vals)]}, schema=schema))
    [row] = t.to_arrow().to_pylist()
    assert sk.bitmap32_values(row["bm"]).tolist() == [1, 2, 3, 4, 5] and row["seq"] == 9


# ---- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["bm", "uv", "th", "b64"])
def test_a_value_that_is_not_a_set_is_refused_at_write_and_nothing_is_written(tmp_path: Any, column: str) -> None:
    """Paimon would store it and fail every later compaction of the bucket; lakelog refuses the
    write, naming the column and the row."""
    t = table(tmp_path)
    t.write(rows([1, 2], [{1}, {2}]))
    before = t.latest_snapshot().id
    bad = rows([3, 4], [{3}, {4}])
    values = bad.column(column).to_pylist()
    values[1] = b"\x01\x02not a set"
    bad = bad.set_column(SCHEMA.get_field_index(column), SCHEMA.field(column), pa.array(values, pa.binary()))
    with pytest.raises(InvalidInputError, match=f"column '{column}', row 1"):
        t.write(bad)
    assert t.latest_snapshot().id == before and sorted(contents(t)) == [1, 2]


def test_types_and_unsupported_functions_are_refused_at_create(tmp_path: Any) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int32(), False), ("s", pa.string())])
    with pytest.raises(OptionError, match="'hll_sketch' does not fit field 's' of type VARCHAR"):
        cat.create_table("db.a", schema, primary_key=["id"], options={
            "merge-engine": "aggregation", "fields.s.aggregate-function": "hll_sketch"})
    with pytest.raises(OptionError, match="'avg' is not supported by lakelog"):
        cat.create_table("db.b", SCHEMA, primary_key=["id"], options={
            "merge-engine": "aggregation", "fields.bm.aggregate-function": "avg"})
    assert not cat.table_exists("db.a") and not cat.table_exists("db.b")


def test_sketches_without_datasketches_are_refused_naming_the_package(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasketches", None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match="'uv' .*pip install 'lakelog\\[sketches\\]'"):
        table(tmp_path)
    with pytest.raises(MissingDependencyError):
        sk.hll_sketch([1])
    assert sk.bitmap32_values(sk.bitmap32([1])).tolist() == [1]  # bitmaps need no package
