"""Sort compaction (issue 24: ``CALL sys.compact`` with ``order_strategy`` and ``order_by``): the rows
of an append table's partitions rewritten in lexicographic, Z-order or Hilbert order.

The orders are checked against a row-at-a-time oracle written here with Python integers (each
row's curve index computed alone); the rewrite against the rows it read; the point of it against
the files a filter opens; and its commit against a write and a DELETE that land while it runs.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.operators.sql.errors import SqlError
from lakelog.operators.sql.procedures import CallContext, call_procedure, parse_call

SCHEMA = pa.schema([("dt", pa.string()), ("a", pa.int64()), ("b", pa.float64()), ("s", pa.string()),
                    ("n", pa.int32())])  # fmt: skip


# ---- the oracle: each row's key alone, with Python integers ------------------------------------------------
def _unsigned(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return (v + (1 << 63)) & ((1 << 64) - 1)
    if isinstance(v, float):
        bits = struct.unpack(">Q", struct.pack(">d", float("nan") if math.isnan(v) else v))[0]
        return ((1 << 64) - 1 - bits) if bits >> 63 else bits | (1 << 63)
    raw = v.encode() if isinstance(v, str) else bytes(v)
    return int.from_bytes(raw[:8].ljust(8, b"\0"), "big")


def _interleave(values: list[int]) -> int:
    out = 0
    for b in range(63, -1, -1):
        for v in values:
            out = (out << 1) | ((v >> b) & 1)
    return out


def _hilbert(values: list[int]) -> int:
    """Skilling's AxesToTranspose for one point, then the transposed bits interleaved."""
    x = list(values)
    n = len(x)
    q = 1 << 63
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = 0
    q = 1 << 63
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    return _interleave([v ^ t for v in x])


def oracle_keys(strategy: str, rows: list[dict], cols: list[str]) -> list[Any]:
    """Each row's key: for the curves, each column's value becomes its rank among the column's
    distinct values, placed in the high bits."""
    if strategy == "order":
        return [tuple((r[c] is not None, r[c] if r[c] is not None else 0) for c in cols) for r in rows]
    ranked = []
    for c in cols:
        distinct = sorted({_unsigned(r[c]) for r in rows})
        shift = 64 - max((len(distinct) - 1).bit_length(), 1)
        rank = {u: i << shift for i, u in enumerate(distinct)}
        ranked.append([rank[_unsigned(r[c])] for r in rows])
    points = [list(p) for p in zip(*ranked)]
    return [_interleave(p) if strategy == "zorder" or len(cols) == 1 else _hilbert(p) for p in points]


def batch(rng: np.random.Generator, n: int, dt: str = "x") -> pa.Table:
    def maybe_null(values: list[Any]) -> list[Any]:
        return [None if rng.random() < 0.05 else v for v in values]

    return pa.table({
        "dt": [dt] * n,
        "a": maybe_null(rng.integers(-500, 500, n).tolist()),
        "b": maybe_null((rng.normal(size=n) * 100).tolist()),
        "s": maybe_null([f"s{v:03d}" for v in rng.integers(0, 300, n)]),
        "n": rng.integers(0, 10**6, n).astype(np.int32),
    }, schema=SCHEMA)  # fmt: skip


def make(tmp_path: Path, **options: str) -> lakelog.Table:
    return lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", SCHEMA, partition_by=["dt"], options={"bucket": "-1", "write-only": "true", **options})


def by_files(t: lakelog.Table) -> list[dict]:
    from lakelog.connector.lsm.split_read import SplitRead

    read = SplitRead(t.store)
    rows: list[dict] = []
    for split in t.plan():
        for f in sorted(split.files, key=lambda f: f.min_sequence_number):
            rows += read.read_file(split, f, system=False).to_pylist()
    return rows


def canonical(table: pa.Table) -> list[Any]:
    return sorted(table.to_pylist(), key=repr)


# ---- the orders -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cols", [["a", "b"], ["s", "a", "b"], ["b"]], ids=["a,b", "s,a,b", "b"])
@pytest.mark.parametrize("strategy", ["order", "zorder", "hilbert"])
def test_rows_are_rewritten_in_the_order_the_oracle_gives(tmp_path: Path, strategy: str, cols: list[str]) -> None:
    rng = np.random.default_rng(len(cols) * 10 + len(strategy))
    t = make(tmp_path, **{"target-file-size": "16kb"})
    for _ in range(4):
        t.write(batch(rng, 700))
    before = canonical(t.to_arrow())
    sid = t.compact(order_strategy=strategy, order_by=cols)
    assert t.latest_snapshot().id == sid and t.latest_snapshot().commit_kind == "COMPACT"
    assert canonical(t.to_arrow()) == before
    rows = by_files(t)
    keys = oracle_keys(strategy, rows, cols)
    assert all(k1 <= k2 for k1, k2 in zip(keys, keys[1:])), f"{strategy} order broken"


def test_a_filter_on_the_sorted_columns_opens_fewer_files(tmp_path: Path) -> None:
    """The same rows compacted plainly and by Z-order: a filter on both columns opens every file of
    the first (each holds the whole range) and fewer of the second. Files roll at the writer's
    chunks of 128k rows, so 300k rows make three."""
    rng = np.random.default_rng(3)
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    tables = [cat.create_table(f"db.{n}", SCHEMA, partition_by=["dt"], options={
        "bucket": "-1", "write-only": "true", "target-file-size": "64kb"}) for n in ("plain", "sorted")]
    for _ in range(3):
        b = batch(rng, 100_000)
        for t in tables:
            t.write(b)
    plain, srt = tables
    plain.compact()
    srt.compact(order_strategy="zorder", order_by="a,b")
    point = (pc.field("a") == 17) & (pc.field("b") > 150)

    def opened(t: lakelog.Table) -> int:
        return sum(len(s.files) for s in t.plan(filter=point))

    assert canonical(srt.to_arrow(filter=point)) == canonical(plain.to_arrow(filter=point))
    assert len(srt.files()) == len(plain.files()) == 3
    # Z-order's first split is a's sign: one of the three files holds only a < 0
    assert opened(plain) == 3 and opened(srt) == 2


def test_only_the_chosen_partitions_are_rewritten(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    t = make(tmp_path)
    t.write(batch(rng, 300, "x"))
    t.write(batch(rng, 300, "y"))
    y_files = set(t.files().filter(pc.field("partition") == "{y}").column("file_path").to_pylist())
    t.compact(partitions=[{"dt": "x"}], order_strategy="order", order_by=["a"])
    after = t.files()
    assert set(after.filter(pc.field("partition") == "{y}").column("file_path").to_pylist()) == y_files
    xs = [r["a"] for r in by_files(t) if r["dt"] == "x"]
    assert xs == sorted(xs, key=lambda v: (v is not None, v or 0))


# ---- safety --------------------------------------------------------------------------------------------
def test_a_write_that_lands_while_it_runs_is_kept(tmp_path: Path) -> None:
    """Paimon's sort compaction overwrites the partitions; lakelog's replaces only the files it read."""
    rng = np.random.default_rng(5)
    t = make(tmp_path)
    t.write(batch(rng, 500))
    late = batch(rng, 50)
    writer = lakelog.Catalog(str(tmp_path / "wh")).get_table("db.t")
    fired: list[int] = []

    def progress(done: int, total: int) -> None:
        if not fired:
            fired.append(writer.write(late))

    t.compact(order_strategy="hilbert", order_by=["a", "s"], progress=progress)
    got = canonical(lakelog.Catalog(str(tmp_path / "wh")).get_table("db.t").to_arrow())
    assert fired and len(got) == 550
    assert all(r in got for r in late.to_pylist())


def test_deleted_rows_stay_deleted(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    t = make(tmp_path, **{"deletion-vectors.enabled": "true"})
    t.write(batch(rng, 400))
    t.write(batch(rng, 400))
    t.delete_where("a < 0")
    want = canonical(t.to_arrow())
    t.compact(order_strategy="zorder", order_by=["b", "a"])
    assert canonical(t.to_arrow()) == want
    assert all(r["a"] is None or r["a"] >= 0 for r in by_files(t))


# ---- refusals and SQL -----------------------------------------------------------------------------------
def test_what_cannot_be_sorted_is_refused_naming_it(tmp_path: Path) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = make(tmp_path)
    t.write(batch(np.random.default_rng(7), 10))
    before = t.latest_snapshot().id
    for kwargs, match in [
        ({"order_strategy": "zorder", "order_by": ["nope"]}, "order_by column 'nope' is not a column"),
        ({"order_strategy": "spiral", "order_by": ["a"]}, "order_strategy 'spiral'"),
        ({"order_strategy": "zorder", "order_by": []}, "order_by names no column"),
        ({"order_by": ["a"]}, "order_by needs an order_strategy"),
    ]:
        with pytest.raises(OptionError, match=match):
            t.compact(**kwargs)
    assert t.latest_snapshot().id == before
    pk = cat.create_table("db.pk", SCHEMA.remove(0), primary_key=["a"], options={"bucket": "1"})
    with pytest.raises(OptionError, match="append tables only"):
        pk.compact(order_strategy="order", order_by=["b"])
    fixed = cat.create_table("db.fixed", SCHEMA, options={"bucket": "2", "bucket-key": "a"})
    with pytest.raises(OptionError, match="'bucket' = '-1'"):
        fixed.compact(order_strategy="order", order_by=["b"])
    nested = cat.create_table("db.nested", pa.schema([("a", pa.int32()), ("l", pa.list_(pa.int32()))]),
                              options={"bucket": "-1"})  # fmt: skip
    with pytest.raises(OptionError, match="'l' is of type ARRAY"):
        nested.compact(order_strategy="zorder", order_by=["a", "l"])


def call(ctx: CallContext, stmt: str) -> list[tuple[Any, ...]]:
    parts, positional, named = parse_call(stmt)
    return list(call_procedure(ctx, parts[-1], positional, named).rows)


def test_paimons_sort_compact_statements_as_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    t = make(tmp_path)
    t.write(batch(rng, 300, "x"))
    t.write(batch(rng, 300, "y"))
    ctx = CallContext(lakelog.Catalog(str(tmp_path / "wh")), "lk", "db")
    want = canonical(t.to_arrow())
    assert call(ctx, """
        -- sort compact table
        CALL sys.compact(`table` => 'db.t', order_strategy => 'zorder', order_by => 'a,b')""") == [("Success",)]
    assert call(ctx, "CALL sys.compact('db.t', 'dt=x', 'order', 's')") == [("Success",)]
    assert canonical(t.to_arrow()) == want
    xs = [r["s"] for r in by_files(t) if r["dt"] == "x"]
    assert xs == sorted(xs, key=lambda v: (v is not None, v or ""))
    with pytest.raises(SqlError, match="order_by column 'zz'"):
        call(ctx, "CALL sys.compact(`table` => 'db.t', order_strategy => 'zorder', order_by => 'a,zz')")

