"""Merge-on-write against merge-on-read, and both against raw Parquet, in one run.

Not a timed test: it prints ratios measured on the same rows in the same process (absolute times on
a shared machine are noise). For each count R of overlapping sorted runs per bucket it writes the
same R commits into three primary-key tables (4 buckets): merge-on-read with compaction off
(``write-only``: R overlapping runs per bucket to merge), merge-on-read with compaction on (the
default), and merge-on-write (``deletion-vectors.enabled``). Run i holds every key k with
k % R == i (so each run spans the whole key range) plus updates of 5% of the keys of earlier runs.

    python benchmarks/bench_deletion_vectors.py                    # 1M keys, R = 10, 20, 50
    python benchmarks/bench_deletion_vectors.py --rows 200000 --runs 10

Printed per R: full read rows/s of each table as a ratio to ``pyarrow.parquet.read_table`` of the
same logical rows (one file, zstd level 1), and the write time of the merge-on-write table as a
ratio to the merge-on-read table with compaction on. Every read is checked against the expected rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lakelog  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("amount", pa.float64()),
                    ("qty", pa.int32())])
TABLES = {
    "merge-on-read, compaction off": {"write-only": "true"},
    "merge-on-read, compaction on": {},
    "deletion vectors": {"deletion-vectors.enabled": "true"},
}


def runs(n: int, r: int, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    keys = np.arange(n, dtype=np.int64)
    out = []
    for i in range(r):
        mine = keys[keys % r == i]
        earlier = keys[keys % r < i]
        upd = rng.choice(earlier, size=min(len(earlier), n // 20), replace=False) if len(earlier) else earlier
        ids = np.concatenate([mine, upd])
        m = len(ids)
        out.append(pa.table({
            "id": ids,
            "name": pa.array(np.char.add("n", (ids % 1000).astype(str))),
            "amount": rng.random(m) * 100,
            "qty": pa.array(np.full(m, i, dtype=np.int32)),
        }, schema=SCHEMA))
    return out


def expected(batches: list[pa.Table]) -> pa.Table:
    """The last version of every key."""
    allrows = pa.concat_tables(batches)
    order = np.arange(allrows.num_rows)
    ids = allrows.column("id").to_numpy()
    last = np.zeros(ids.max() + 1, dtype=np.int64)
    last[ids] = order  # later rows overwrite earlier ones
    return allrows.take(pa.array(np.sort(last))).sort_by("id")


def best_of(fn, reps: int) -> tuple[float, pa.Table]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, nargs="*", default=[10, 20, 50])
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(f"{a.rows} keys, 4 buckets; read ratios are to pyarrow.parquet.read_table of the same rows\n")
    print(f"{'runs':>5} {'table':<32} {'read vs parquet':>16} {'write s':>8}")
    for r in a.runs:
        batches = runs(a.rows, r, seed=r)
        want = expected(batches)
        with tempfile.TemporaryDirectory(prefix="bench-dv-") as tmp:
            pq_path = os.path.join(tmp, "plain.parquet")
            pq.write_table(want, pq_path, compression="zstd", compression_level=1)
            pq_s, _ = best_of(lambda p=pq_path: pq.read_table(p), a.reps)
            cat = lakelog.Catalog(os.path.join(tmp, "wh"))
            writes: dict[str, float] = {}
            for name, opts in TABLES.items():
                ident = "db.t" + str(len(writes))
                t = cat.create_table(ident, SCHEMA, primary_key=["id"], options={"bucket": "4", **opts})
                t0 = time.perf_counter()
                for b in batches:
                    t.write(b)
                writes[name] = time.perf_counter() - t0
                read_s, got = best_of(lambda t=t: t.to_arrow(), a.reps)
                ok = got.num_rows == want.num_rows and pc.all(
                    pc.equal(got.sort_by("id").column("amount"), want.column("amount"))
                ).as_py()
                print(f"{r:>5} {name:<32} {pq_s / read_s:15.2f}x {writes[name]:8.2f}"
                      + ("" if ok else "  CONTENT MISMATCH"))
            dv, mor = writes["deletion vectors"], writes["merge-on-read, compaction on"]
            print(f"{r:>5} write time, deletion vectors / merge-on-read (compaction on): {dv / mor:.2f}x\n")


if __name__ == "__main__":
    main()
