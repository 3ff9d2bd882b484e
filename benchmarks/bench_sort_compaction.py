"""Sort compaction (order, zorder, hilbert) against a plain compaction of the same rows, in one run.

Not a timed test: it prints ratios measured on the same rows in the same process. An append table
(``bucket = -1``) of ``--rows`` random rows in ``--writes`` commits is copied four times; one copy is
compacted plainly, the others by each order on ``(a, b)``. Printed per order:

* compaction time as a ratio to the plain compaction, and to ``pc.sort_indices`` + one
  ``pq.write_table`` of the same rows (raw pyarrow doing the same sort and write);
* for point and range filters on ``a``, on ``b`` and on both: the files each table opens, and the
  time of the plain table's read over the sorted one's (above 1: the sort pays off). Every read is
  checked against the plain table's rows.

    python benchmarks/bench_sort_compaction.py                  # 1M rows, 10 writes
    python benchmarks/bench_sort_compaction.py --rows 200000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lakelog  # noqa: E402

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.float64()), ("s", pa.string()), ("v", pa.int64())])
FILTERS: dict[str, pc.Expression] = {
    "a = 4242": pc.field("a") == 4242,
    "b < 0.5": pc.field("b") < 0.5,
    "a = 4242 and b < 500": (pc.field("a") == 4242) & (pc.field("b") < 500.0),
    "a between 100, 150": (pc.field("a") >= 100) & (pc.field("a") <= 150),
}


def best_of(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--writes", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    n = a.rows // a.writes
    batches = [pa.table({"a": rng.integers(0, 10_000, n), "b": rng.random(n) * 1000,
                         "s": pa.array(np.char.add("s", rng.integers(0, 5000, n).astype(str))),
                         "v": np.arange(i * n, (i + 1) * n)}, schema=SCHEMA) for i in range(a.writes)]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-sort-") as tmp:
        cat = lakelog.Catalog(os.path.join(tmp, "wh"))
        tables = {}
        for name in ("plain", "order", "zorder", "hilbert"):
            t = cat.create_table(f"db.{name}", SCHEMA, options={"bucket": "-1", "write-only": "true",
                                                                "target-file-size": "4mb"})  # fmt: skip
            for b in batches:
                t.write(b)
            tables[name] = t
        allrows = pa.concat_tables(batches)

        def raw() -> None:
            srt = allrows.take(pc.sort_indices(allrows, sort_keys=[("a", "ascending"), ("b", "ascending")]))
            pq.write_table(srt, os.path.join(tmp, "raw.parquet"))

        raw_s, _ = best_of(raw, 1)
        compact_s = {"plain": best_of(lambda: tables["plain"].compact(), 1)[0]}
        for name in ("order", "zorder", "hilbert"):
            compact_s[name] = best_of(lambda name=name: tables[name].compact(order_strategy=name,
                                                                           order_by=["a", "b"]), 1)[0]  # fmt: skip
        print(f"{a.rows} rows in {a.writes} writes; {len(tables['plain'].files())} files after compaction\n")
        print(f"{'order':<8} {'compact vs plain':>17} {'vs sort+write_table':>20}")
        for name in ("order", "zorder", "hilbert"):
            print(f"{name:<8} {compact_s[name] / compact_s['plain']:16.2f}x {compact_s[name] / raw_s:19.2f}x")
        print(f"\n{'filter':<22} {'order':<8} {'files (plain)':>14} {'read speed-up':>14}")
        for label, f in FILTERS.items():
            plain_s, want = best_of(lambda f=f: tables["plain"].to_arrow(filter=f), a.reps)
            plain_files = sum(len(s.files) for s in tables["plain"].plan(filter=f))
            for name in ("order", "zorder", "hilbert"):
                t = tables[name]
                s, got = best_of(lambda t=t, f=f: t.to_arrow(filter=f), a.reps)
                ok = got.num_rows == want.num_rows and pc.sum(got.column("v")).equals(pc.sum(want.column("v")))
                files = sum(len(sp.files) for sp in t.plan(filter=f))
                print(f"{label:<22} {name:<8} {files:>5} ({plain_files:>4}) {plain_s / s:13.2f}x"
                      + ("" if ok else "  CONTENT MISMATCH"))


if __name__ == "__main__":
    main()
