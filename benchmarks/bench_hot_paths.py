"""Hot-path micro benchmarks: the time and memory bounds that used to be asserted in the test suite.

A shared 2-core machine makes wall-clock and memory bounds flaky as tests, so they live here: each
measure prints its time (best of ``--reps``) or peak and its target, PASS or FAIL. The results are
checked for correctness first (exit code 1 when one is wrong); a FAIL against a target does not
change the exit code (see benchmarks/README.md).

    python benchmarks/bench_hot_paths.py               # all four, about 30 s
    python benchmarks/bench_hot_paths.py --only bucket # one of: bucket, manifest, merge, buffer
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

import lakelog  # noqa: F401  (the package must import before its modules)
from lakelog.connector.format.bucket import compute_buckets
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.manifest import DataFileMeta, ManifestEntry, SimpleStats
from lakelog.connector.format.manifest_files import ManifestFile
from lakelog.connector.format.types import DataType

Check = Callable[[], tuple[float, float, str, bool]]  # (measured, target, unit, correct)


def _best(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_bucket(reps: int) -> tuple[float, float, str, bool]:
    """compute_buckets over 1M BIGINT keys (vectorised murmur3 over BinaryRows)."""
    table = pa.table({"k": pa.array(np.arange(1_000_000, dtype=np.int64) * 7919)})
    secs, buckets = _best(lambda: compute_buckets(table, ["k"], [DataType("BIGINT")], 4), reps)
    ok = buckets.dtype == np.int32 and len(buckets) == 1_000_000 and set(np.unique(buckets)) == {0, 1, 2, 3}
    return secs, 0.25, "s", ok


def bench_manifest(reps: int) -> tuple[float, float, str, bool]:
    """Write and read back a manifest of 100k entries (Avro, zstd)."""
    empty = SimpleStats(b"", b"", [])
    proto = DataFileMeta("data-x.parquet", 1000, 10, b"", b"", empty, empty, 0, 9, 0, 1)
    entries = [
        ManifestEntry(0, b"", i % 16, 16, dataclasses.replace(proto, file_name=f"data-{i:032d}.parquet"))
        for i in range(100_000)
    ]
    with tempfile.TemporaryDirectory() as d:
        mf = ManifestFile(FileIO(), d)

        def round_trip() -> list[ManifestEntry]:
            metas = mf.write(entries, [])
            return [e for m in metas for e in mf.read(m.file_name)]

        secs, back = _best(round_trip, reps)
    return secs, 10.0, "s", len(back) == len(entries) and back[-1].file.file_name == entries[-1].file.file_name


def bench_merge(reps: int) -> tuple[float, float, str, bool]:
    """The aggregation merge function (sum) over 1M sorted rows of 300k keys, CPU seconds."""
    from lakelog.connector.format.options import CoreOptions
    from lakelog.connector.format.schema import TableSchema
    from lakelog.connector.lsm.merge.engine import merge_function

    rng = np.random.default_rng(0)
    n = 1_000_000
    keys = np.sort(rng.integers(0, 300_000, size=n))
    vals = rng.integers(0, 1000, size=n).astype(np.int64)
    table = pa.table({"_KEY_k": keys, "_SEQUENCE_NUMBER": np.arange(n, dtype=np.int64),
                      "_VALUE_KIND": np.zeros(n, dtype=np.int8), "k": keys, "v": vals})
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    schema = TableSchema.create(pa.schema([pa.field("k", pa.int64(), False), ("v", pa.int64())]),
                                primary_keys=["k"], options={**opts, "bucket": "1"})
    mf = merge_function(schema, CoreOptions(opts))
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.process_time()
        out = mf.merge(table, ["_KEY_k"])
        best = min(best, time.process_time() - t0)
    assert out is not None
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=vals).astype(np.int64)
    ok = out.num_rows == len(uniq) and out.column("v").to_numpy().tolist() == sums.tolist()
    return best, 1.0, "cpu s", ok


_BUFFER_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, pyarrow as pa, lakelog
    wh, spill = sys.argv[1], sys.argv[2] == "1"
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("s", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.m", schema, primary_key=["id"], options={
        "bucket": "1", "write-buffer-size": "2 mb", "write-buffer-spillable": str(spill).lower(),
        "write-only": "true"})
    rng = np.random.default_rng(0)
    pool = pa.default_memory_pool()
    with t.writer() as w:
        for i in range(40):  # 40 x ~1 MiB = ~20x the write buffer, one commit
            ids = rng.integers(0, 10**9, 20000)
            w.write(pa.table({"id": ids, "v": ids, "s": pa.array(["x" * 30] * len(ids))}, schema=schema))
    print(pool.max_memory(), t.to_arrow().num_rows)
    """
)


def bench_buffer(reps: int) -> tuple[float, float, str, bool]:
    """Peak Arrow memory of one commit of ~25 MiB through a 2 MiB write buffer (spilling and
    flushing), in a child process so the pool's peak covers only that write."""
    peaks, ok = [], True
    for spill in ("1", "0"):
        with tempfile.TemporaryDirectory() as wh:
            out = subprocess.run([sys.executable, "-c", _BUFFER_CHILD, wh, spill], capture_output=True, text=True,
                                 check=True).stdout.split()
        peaks.append(int(out[0]) / 2**20)
        ok = ok and int(out[1]) > 790_000
    return max(peaks), 40.0, "MiB", ok


BENCHES: dict[str, Callable[[int], tuple[float, float, str, bool]]] = {
    "bucket": bench_bucket,
    "manifest": bench_manifest,
    "merge": bench_merge,
    "buffer": bench_buffer,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(BENCHES), action="append")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    wrong = 0
    for name in args.only or list(BENCHES):
        value, target, unit, ok = BENCHES[name](args.reps)
        verdict = "PASS" if value <= target else "FAIL"
        print(f"{name:9s} {value:8.3f} {unit:6s} target <= {target:g} {unit}: {verdict}"
              f"{'' if ok else '   WRONG RESULT'}  ({BENCHES[name].__doc__.splitlines()[0]})")
        wrong += not ok
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
