"""Bucket benchmark: dynamic-bucket upserts vs fixed buckets, the hash index's memory, and a rescale
vs a plain Parquet rewrite.

Not a timed test: one run prints rates and *ratios* measured in the same process on the same data
(absolute times on a shared machine are noise). See benchmarks/README.md.

    python benchmarks/bench_buckets.py                   # 1M upserts, 1M-key index, 1M-row rescale
    python benchmarks/bench_buckets.py --rows 200000 --index-keys 200000 --rescale-rows 200000 --reps 1

1. Upserts: the same batches (``--batches`` commits of ``--rows / --batches`` rows, keys uniform in
   ``[0, --keys)``, so half of them update) written by a stream writer, one commit per batch, into a
   fixed-bucket table (``bucket = --buckets``) and a dynamic-bucket table whose target row count
   gives the same number of buckets. Both with ``write-only = true`` (no compaction: the write path
   only). Ratio = dynamic rows/s / fixed rows/s (goal >= 0.6).
2. Index memory: a dynamic-bucket table with ``--index-keys`` keys; then the bytes a writer holds for
   them after writing known and new keys into every bucket: the assigner's index (loaded from the
   HASH files; measured with tracemalloc, which sees numpy's buffers, and as the arrays' sizes), the
   writer's per-bucket hash sets (an embedded writer loads those of buckets that get new keys; a
   writer given rows with buckets, as a Flink writer is, every bucket it writes: the "worst" figure
   counts all of them), and the committer's cache of index files (it checks new keys against every
   bucket of the partition). Per million keys (goal < 40 MB).
3. Rescale: a primary-key partition of ``--rescale-rows`` rows in ``--buckets`` buckets rescaled to
   twice as many (``Table.rescale``: read merged, hash, write, one OVERWRITE commit) vs reading the
   partition's data files with ``pyarrow.parquet`` and writing the same rows into as many new files
   (zstd, as lakelog writes). Ratio = rescale time / plain rewrite time.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import fmt_bytes, fmt_rate, render_table, step  # noqa: E402

import lakelog  # noqa: E402

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), False),
        pa.field("id", pa.int64(), False),
        ("name", pa.string()),
        ("price", pa.float64()),
        ("qty", pa.int64()),
    ]
)


def batches(rows: int, n: int, keys: int, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    size = rows // n
    out = []
    for _ in range(n):
        ids = rng.integers(0, keys, size)
        out.append(
            pa.table(
                {
                    "dt": pa.array(np.where(ids % 2 == 0, "2024-01-01", "2024-01-02")),
                    "id": ids,
                    "name": pa.array([f"n{i % 1000}" for i in range(size)]),
                    "price": rng.random(size) * 100,
                    "qty": rng.integers(0, 100, size),
                },
                schema=SCHEMA,
            )
        )
    return out


def keys_only(ids: np.ndarray) -> pa.Table:
    return pa.table({"dt": ["d"] * len(ids), "id": ids}).select(["dt", "id"])


def make_table(wh: str, name: str, options: dict[str, str]) -> lakelog.Table:
    return lakelog.Catalog(wh).create_table(
        name, SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"write-only": "true", **options}
    )


def upserts(args: argparse.Namespace, work: str) -> dict[str, Any]:
    data = batches(args.rows, args.batches, args.keys, args.seed)
    keys_per_partition = args.keys // 2
    target = math.ceil(keys_per_partition / args.buckets)
    configs = {
        "fixed": {"bucket": str(args.buckets)},
        "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": str(target)},
    }
    times: dict[str, list[float]] = {k: [] for k in configs}
    tables: dict[str, lakelog.Table] = {}
    for rep in range(args.reps):
        for name, opts in configs.items():  # interleaved: load bursts hit both alike
            wh = os.path.join(work, f"up-{name}-{rep}")
            t = make_table(wh, "b.t", opts)
            t0 = time.perf_counter()
            with t.stream_writer() as w:
                for b in data:
                    w.write(b).commit()
            times[name].append(time.perf_counter() - t0)
            tables[name] = t
            step(f"upserts {name} rep {rep}: {times[name][-1]:.2f} s")
    fixed, dynamic = tables["fixed"], tables["dynamic"]
    same = fixed.to_arrow().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(
        dynamic.to_arrow().sort_by([("dt", "ascending"), ("id", "ascending")])
    )
    buckets = {name: len({(f["partition"], f["bucket"]) for f in t.files().to_pylist()}) for name, t in tables.items()}
    best = {k: min(v) for k, v in times.items()}
    median = {k: float(np.median(v)) for k, v in times.items()}
    return {"times": times, "best": best, "same": same, "buckets": buckets,
            "ratio": best["fixed"] / best["dynamic"], "median_ratio": median["fixed"] / median["dynamic"]}


def index_memory(args: argparse.Namespace, work: str) -> dict[str, Any]:
    from lakelog.connector.table.dynamic_bucket import DynamicBucketAssigner
    from lakelog.connector.table.write import TableWrite

    wh = os.path.join(work, "index")
    n = args.index_keys
    t = lakelog.Catalog(wh).create_table(
        "b.i", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
        options={"bucket": "-1", "write-only": "true", "dynamic-bucket.target-row-num": "200000"},
    )
    rng = np.random.default_rng(args.seed)
    ids = rng.permutation(n * 4)[:n]
    chunk = 250_000
    for start in range(0, n, chunk):
        part = ids[start : start + chunk]
        t.write(keys_only(part))
    store = t.store
    part = store.index_entries(t.latest_snapshot())[0].partition
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    a = DynamicBucketAssigner(store)
    a.index(part)
    loaded = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # a writer that wrote every bucket once: its per-bucket hash sets and the committer's cache
    w = t.stream_writer()
    sample = np.concatenate([ids[:: max(1, n // 2000)], np.arange(n * 4, n * 4 + 1000)])  # + new keys
    w.write(keys_only(sample))
    tw: TableWrite = w._write
    tw.flush()
    writer_sets = sum(i.hashes.nbytes for i in tw._hash_indexes.values())
    assigner_arrays = tw.assigner.nbytes
    w.commit()
    cache = sum(v.nbytes for v in w._commit._hash_index._cache.values())
    w.close()
    per_m = 1_000_000 / n
    files = sum(e.index_file.file_size for e in store.index_entries(t.latest_snapshot()))
    return {
        "keys": n,
        "assigner_traced": loaded * per_m,
        "assigner_arrays": assigner_arrays * per_m,
        "writer_sets": writer_sets * per_m,
        "committer_cache": cache * per_m,
        "total": (assigner_arrays + writer_sets + cache) * per_m,
        # a writer given rows with buckets (write_bucketed, a Flink writer) holds the hash set of
        # every bucket it writes: at most the HASH files' contents
        "worst": (assigner_arrays + files + cache) * per_m,
        "index_files": files,
    }


def rescale(args: argparse.Namespace, work: str) -> dict[str, Any]:
    n = args.rescale_rows
    rng = np.random.default_rng(args.seed + 1)
    data = pa.table(
        {
            "dt": ["d"] * n,
            "id": rng.permutation(n).astype(np.int64),
            "name": pa.array([f"name-{i % 5000}" for i in range(n)]),
            "price": rng.random(n) * 100,
            "qty": rng.integers(0, 1000, n),
        },
        schema=SCHEMA,
    )
    ours, plain = [], []
    out_dir = os.path.join(work, "plain-out")
    for rep in range(args.reps):
        wh = os.path.join(work, f"rescale-{rep}")
        t = lakelog.Catalog(wh).create_table(
            "b.r", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": str(args.buckets)}
        )
        t.write(data)
        t.compact(full=True)
        files = [t.store.data_file_path(e.partition, e.bucket, e.file.file_name)
                 for e in t.store.live_entries(t.latest_snapshot())]
        # plain: read the same files, write the same rows into twice as many files
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        t0 = time.perf_counter()
        rows = pa.concat_tables([pq.read_table(f) for f in files])
        parts = 2 * args.buckets
        step_rows = math.ceil(rows.num_rows / parts)
        for i in range(parts):
            pq.write_table(rows.slice(i * step_rows, step_rows), os.path.join(out_dir, f"{i}.parquet"),
                           compression="zstd", compression_level=1)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sid = t.rescale(buckets=2 * args.buckets)
        ours.append(time.perf_counter() - t0)
        assert t.snapshot(sid).commit_kind == "OVERWRITE"
        assert t.to_arrow().num_rows == n
        step(f"rescale rep {rep}: lakelog {ours[-1]:.2f} s, pyarrow.parquet {plain[-1]:.2f} s")
    return {"ours": ours, "plain": plain, "ratio": min(ours) / min(plain)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--keys", type=int, default=500_000)
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--index-keys", type=int, default=1_000_000)
    p.add_argument("--rescale-rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir")
    args = p.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="bench-buckets-")
    try:
        up = upserts(args, work)
        mem = index_memory(args, work)
        rs = rescale(args, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(render_table(
        ["measure", "lakelog", "baseline", "ratio", "goal"],
        [
            ["upserts, dynamic vs fixed buckets", fmt_rate(args.rows / up["best"]["dynamic"]),
             fmt_rate(args.rows / up["best"]["fixed"]), f"{up['ratio']:.2f}x", ">= 0.6x"],
            ["hash index memory / 1M keys", fmt_bytes(mem["total"]), f"(worst {fmt_bytes(mem['worst'])})", "",
             "< 40 MB"],
            [f"rescale of {args.rescale_rows:,} rows vs pyarrow.parquet rewrite", f"{min(rs['ours']):.2f} s",
             f"{min(rs['plain']):.2f} s", f"{rs['ratio']:.2f}x", "info"],
        ],
    ))
    print()
    print(f"upserts: {args.rows:,} rows in {args.batches} commits, keys in [0, {args.keys:,}); buckets written "
          f"fixed {up['buckets']['fixed']}, dynamic {up['buckets']['dynamic']}; same rows: {up['same']}; "
          f"times fixed {[f'{x:.2f}' for x in up['times']['fixed']]} dynamic "
          f"{[f'{x:.2f}' for x in up['times']['dynamic']]} s; ratio of the best times "
          f"{up['ratio']:.2f}x, of the medians {up['median_ratio']:.2f}x")
    print(f"index memory per 1M keys ({mem['keys']:,} keys loaded): assigner {fmt_bytes(mem['assigner_arrays'])} "
          f"(tracemalloc while loading: {fmt_bytes(mem['assigner_traced'])}), writer's bucket hash sets "
          f"{fmt_bytes(mem['writer_sets'])}, committer's index cache {fmt_bytes(mem['committer_cache'])}; "
          f"HASH files on disk {fmt_bytes(mem['index_files'])}")
    print(f"rescale times lakelog {[f'{x:.2f}' for x in rs['ours']]} s, pyarrow.parquet "
          f"{[f'{x:.2f}' for x in rs['plain']]} s")
    ok = up["same"] and mem["worst"] < 40 * 1024 * 1024 and up["ratio"] >= 0.6
    print("goals met" if ok else "GOAL MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
