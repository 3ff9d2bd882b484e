"""Lookup benchmark: LookupTable (lakelog.operators.lookup) against a plain Python dict.

Not a timed test: one run prints rates and *ratios* measured in the same process on the same data
(absolute times on a shared machine are noise). See benchmarks/README.md.

    python benchmarks/bench_lookup.py                    # 200k dimension rows, int and string keys
    python benchmarks/bench_lookup.py --rows 1000000     # bigger dimension
    python benchmarks/bench_lookup.py --shards 2000000   # memory and bootstrap per subtask, sharded
                                                         # by bucket at parallelism 1, 2 and 4
    python benchmarks/bench_lookup.py --disk 2000000     # lookup.cache = full against memory

--shards N: a dimension of N rows (int key, 8 buckets) is opened as each subtask of a sharded lookup
join would open it (LookupTable(shard=Shard(i, p, 8))), one shard after another in this process;
it prints the largest shard's memory (rows and indexes, LookupTable.memory_bytes) and load time (the
bootstrap to the first probe answered) per parallelism, and their ratios to parallelism 1.

--disk N: a dimension of N rows (int key, 4 buckets) opened with lookup.cache = memory and = full
(memory-mapped local files): load time, heap and disk bytes, batched lookups per second with 90 %
hits and with 90 % misses, and the ratios full / memory.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lakelog  # noqa: E402
from lakelog.operators.lookup_table import LookupTable  # noqa: E402


def _best(fn: Callable[[], Any], reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _dimension(wh: str, rows: int, string_key: bool, buckets: int) -> lakelog.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(rows, dtype=np.int64)
    key = pc.binary_join_element_wise("cust-", pc.cast(pa.array(ids), pa.string()), "") if string_key else ids
    schema = pa.schema(
        [
            pa.field("k", pa.string() if string_key else pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("score", pa.float64()),
            pa.field("city", pa.string()),
        ]
    )
    data = pa.table(
        {
            "k": key,
            "name": pc.binary_join_element_wise("name-", pc.cast(pa.array(ids), pa.string()), ""),
            "score": rng.random(rows),
            "city": pa.array(rng.integers(0, 50, rows)).cast(pa.string()),
        },
        schema=schema,
    )
    name = "db.dim_s" if string_key else "db.dim_i"
    t = lakelog.Catalog(wh).create_table(name, schema, primary_key=["k"], options={"bucket": str(buckets)})
    t.write(data)
    return t


def _bench_key(
    wh: str, rows: int, probes: int, batch: int, buckets: int, reps: int, string_key: bool
) -> None:
    label = "string" if string_key else "int64"
    t = _dimension(wh, rows, string_key, buckets)
    rng = np.random.default_rng(1)
    pick = rng.integers(0, int(rows / 0.9), probes)
    keys = (
        pc.binary_join_element_wise("cust-", pc.cast(pa.array(pick), pa.string()), "")
        if string_key
        else pa.array(pick)
    )
    cols = ["name", "score"]
    t0 = time.perf_counter()
    lt = LookupTable(t.path, columns=cols, refresh_interval=math.inf, cache_rows=0)
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    dim = t.to_arrow(columns=["k", *cols])
    d = dict(zip(dim.column("k").to_pylist(), zip(*(dim.column(c).to_pylist() for c in cols))))
    dict_load = time.perf_counter() - t0
    print(f"{label:<7}{'load (s)':<44}{load:>14.3f}{dict_load:>14.3f}{dict_load / load:>8.2f}")
    print(f"{label:<7}{'index bytes per row':<44}{lt._state.key_index.nbytes / rows:>14.1f}")

    def lakelog_batches() -> None:
        for s in range(0, probes, batch):
            lt.lookup(keys.slice(s, batch))

    py_keys = keys.to_pylist()

    def dict_batches() -> None:
        for s in range(0, probes, batch):
            found = [d.get(k) for k in py_keys[s : s + batch]]
            pa.table({c: [None if f is None else f[i] for f in found] for i, c in enumerate(cols)})

    a, b = _best(lakelog_batches, reps), _best(dict_batches, reps)
    what = "batched lookup -> Arrow rows (lookups/s)"
    print(f"{label:<7}{what:<44}{probes / a:>14,.0f}{probes / b:>14,.0f}{b / a:>8.2f}")
    few = py_keys[: max(1, probes // 10)]

    def lakelog_get() -> None:
        for k in few:
            lt.get_values(k)

    def dict_get() -> None:
        for k in few:
            d.get(k)

    a, b = _best(lakelog_get, reps), _best(dict_get, reps)
    what = "single get, no cache (lookups/s)"
    print(f"{label:<7}{what:<44}{len(few) / a:>14,.0f}{len(few) / b:>14,.0f}{b / a:>8.2f}")
    cached = LookupTable(t.path, columns=cols, refresh_interval=math.inf, cache_rows=100_000)
    hot = [few[i % 1000] for i in range(len(few))]

    def cached_get() -> None:
        for k in hot:
            cached.get_values(k)

    a = _best(cached_get, reps)
    print(f"{label:<7}{'single get, 1000 hot keys, LRU (lookups/s)':<44}{len(hot) / a:>14,.0f}")
    upd = t.to_arrow().slice(0, 1000)
    t.write(upd.set_column(1, "name", pa.array(["changed"] * upd.num_rows)))
    t0 = time.perf_counter()
    lt.refresh()
    info = lt.last_refresh
    what = f"refresh after 1000 upserts ({info.mode if info else None}, s)"
    print(f"{label:<7}{what:<44}{time.perf_counter() - t0:>14.3f}")


def run(rows: int, probes: int, batch: int, buckets: int, reps: int) -> None:
    wh = tempfile.mkdtemp(prefix="bench-lookup-")
    try:
        print(f"dimension: {rows} rows, {buckets} buckets; {probes} probes (90% hits), batches of {batch}")
        header = f"{'key':<7}{'measure':<44}{'lakelog':>14}{'dict':>14}{'ratio':>8}"
        print(header)
        print("-" * len(header))
        for string_key in (False, True):
            _bench_key(wh, rows, probes, batch, buckets, reps, string_key)
    finally:
        shutil.rmtree(wh, ignore_errors=True)


def run_shards(rows: int, buckets: int = 8) -> None:
    from lakelog.operators.lookup_shard import Shard

    wh = tempfile.mkdtemp(prefix="bench-lookup-")
    try:
        t = _dimension(wh, rows, False, buckets)
        print(f"dimension: {rows} rows, {buckets} buckets; every column held; shards opened one by one")
        header = f"{'parallelism':>11}{'rows/subtask':>14}{'MiB/subtask':>13}{'x p=1':>8}{'bootstrap s':>13}{'x p=1':>8}"
        print(header)
        print("-" * len(header))
        base: tuple[float, float] = (0.0, 0.0)
        for p in (1, 2, 4):
            mem, load, n = 0, 0.0, 0
            for i in range(p):
                t0 = time.perf_counter()
                lt = LookupTable(t.path, refresh_interval=math.inf, shard=Shard(i, p, buckets))
                lt.get_values(i)  # the first probe answered
                load = max(load, time.perf_counter() - t0)
                mem, n = max(mem, lt.memory_bytes()), max(n, lt.num_rows)
                del lt
            if p == 1:
                base = (mem, load)
            print(f"{p:>11}{n:>14,}{mem / 2**20:>13.1f}{mem / base[0]:>8.2f}{load:>13.2f}{load / base[1]:>8.2f}")
    finally:
        shutil.rmtree(wh, ignore_errors=True)


def run_disk(rows: int, probes: int, batch: int, reps: int) -> None:
    wh = tempfile.mkdtemp(prefix="bench-lookup-")
    try:
        t = _dimension(wh, rows, False, 4)
        rng = np.random.default_rng(3)
        hits = pa.array(rng.integers(0, int(rows / 0.9), probes))
        misses = pa.array(rng.integers(0, rows * 10, probes))
        print(f"dimension: {rows} rows, 4 buckets, every column; {probes} probes in batches of {batch}")
        header = f"{'measure':<40}{'memory':>14}{'full (disk)':>14}{'full/memory':>13}"
        print(header)
        print("-" * len(header))
        got: dict[str, list[float]] = {}
        tables = {}
        for mode in ("memory", "full"):
            t0 = time.perf_counter()
            lt = LookupTable(t.path, refresh_interval=math.inf, cache=mode, cache_rows=0)
            got.setdefault("load (s)", []).append(time.perf_counter() - t0)
            got.setdefault("heap MiB", []).append(lt.memory_bytes() / 2**20)
            got.setdefault("disk MiB", []).append(lt.disk_bytes() / 2**20)
            tables[mode] = lt
        for label, keys in (("lookups/s, 90% hits", hits), ("lookups/s, 90% misses", misses)):
            for mode in ("memory", "full"):
                lt = tables[mode]

                def batches(lt: LookupTable = lt, keys: pa.Array = keys) -> None:
                    for s in range(0, probes, batch):
                        lt.lookup(keys.slice(s, batch))

                got.setdefault(label, []).append(probes / _best(batches, reps))
        for label, (m, f) in got.items():
            ratio = f"{f / m:13.2f}" if m else f"{'-':>13}"
            print(f"{label:<40}{m:>14,.2f}{f:>14,.2f}{ratio}")
    finally:
        shutil.rmtree(wh, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--probes", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--shards", type=int, default=0, metavar="ROWS", help="only the sharded-memory table")
    p.add_argument("--disk", type=int, default=0, metavar="ROWS", help="only lookup.cache full vs memory")
    a = p.parse_args()
    if a.shards:
        run_shards(a.shards)
        return
    if a.disk:
        run_disk(a.disk, a.probes, a.batch, a.reps)
        return
    run(a.rows, a.probes, a.batch, a.buckets, a.reps)


if __name__ == "__main__":
    main()
