"""Tables on an S3 API server against the same tables on local disk, and the two ways to commit
safely on S3 (conditional creates vs a JDBC catalog's lock), from racing processes.

Run from the repository root (it starts moto's S3 server on loopback; ``moto[server]`` and boto3
come with the test extra)::

    python benchmarks/bench_s3.py [--rows 400000] [--commits 10] [--writers 4] [--race-commits 15]

Printed, all measured in this one run:

* write and read throughput of one primary-key table (4 buckets, ``--commits`` commits of
  ``--rows``/``--commits`` rows, then a full read), S3 as a ratio to local disk;
* requests per commit and per read of one snapshot (the server's request log);
* one commit of ``--bulk-rows`` rows that rolls over many data files, its uploads one at a time
  vs on the upload threads (a ratio);
* commits/s from ``--writers`` racing processes into one S3 table: conditional creates (lease
  lock) vs the JDBC lock (SQLite), as a ratio.

moto is a Python server on the same 2 cores as the client, so absolute S3 figures here are far
below a real bucket's; the request counts are what carries over.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakelog  # noqa: E402
from benchmarks.bench_jdbc_lock import _race  # noqa: E402
from tests.jdbc_workers import SCHEMA  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402

ORDERS = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("amount", pa.float64())])


def _batch(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"n{i % 1000}" for i in range(n)]),
                     "amount": pa.array([float(i) for i in range(n)])}, schema=ORDERS)


class _Requests:
    """Requests the server has logged so far (one line each)."""

    def __init__(self, server: S3Server) -> None:
        self.log = server.log

    def count(self) -> int:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if '"' in line and "HTTP/" in line)


def _throughput(warehouse: str, options: dict[str, str], rows: int, commits: int,
                requests: _Requests | None) -> dict[str, float]:
    cat = lakelog.Catalog(warehouse, options=options)
    t = cat.create_table("db.t", ORDERS, primary_key=["id"], options={"bucket": "4"})
    per = rows // commits
    batches = [_batch(i * per // 2, per) for i in range(commits)]  # half of each batch updates
    t0 = time.perf_counter()
    before = requests.count() if requests else 0
    for b in batches:
        t.write(b)
    write_s = time.perf_counter() - t0
    out: dict[str, float] = {"write rows/s": per * commits / write_s}
    if requests:
        out["requests/commit"] = (requests.count() - before) / commits
    t0 = time.perf_counter()
    before = requests.count() if requests else 0
    n = t.to_arrow().num_rows
    out["read rows/s"] = n / (time.perf_counter() - t0)
    if requests:
        out["requests/read"] = requests.count() - before
    return out


def _bulk(server: S3Server, rows: int, threads: int) -> float:
    """Seconds for one commit of ``rows`` rows into an append table whose writer rolls over at
    1 MiB, with ``threads`` upload threads (1: each file uploaded before the next is encoded)."""
    from concurrent.futures import ThreadPoolExecutor

    from lakelog.connector.format import objectstore

    pool = ThreadPoolExecutor(max_workers=threads)
    objectstore._uploads[:] = [pool]  # the process's upload pool, sized for this run
    try:
        cat = lakelog.Catalog(server.warehouse(), options=server.options())
        t = cat.create_table("db.bulk", ORDERS, options={"bucket": "1", "bucket-key": "id",
                                                          "target-file-size": "1 mb"})
        batch = _batch(0, rows)
        t0 = time.perf_counter()
        t.write(batch)
        return time.perf_counter() - t0
    finally:
        objectstore._uploads[:] = []
        pool.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--race-commits", type=int, default=15)
    ap.add_argument("--bulk-rows", type=int, default=2_000_000)
    a = ap.parse_args()
    server = S3Server().start()
    try:
        bulk = {n: _bulk(server, a.bulk_rows, n) for n in (1, objectstore_threads())}
        with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp:
            local = _throughput(f"{tmp}/local", {}, a.rows, a.commits, None)
            s3 = _throughput(server.warehouse(), server.options(), a.rows, a.commits, _Requests(server))
            race: dict[str, float] = {}
            setups = {
                "S3, conditional creates": {},
                "S3, JDBC lock (SQLite)": {"metastore": "jdbc", "uri": f"jdbc:sqlite:{tmp}/c.db",
                                            "lock.enabled": "true"},
            }
            for name, extra in setups.items():
                wh, options = server.warehouse(), {**server.options(), **extra}
                cat = lakelog.Catalog(wh, options=options)
                cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
                wall = _race("commit", wh, options, a.writers, table="db.t", commits=a.race_commits)
                snaps = [s for s in cat.get_table("db.t").snapshots() if s.commit_kind == "APPEND"]
                assert len(snaps) == a.writers * a.race_commits, (name, len(snaps))
                race[name] = a.writers * a.race_commits / wall
                cat.close()
    finally:
        server.stop()
    print(f"\n{a.rows} rows in {a.commits} commits, primary key, 4 buckets")
    print(f"{'':22} {'local':>12} {'S3 (moto)':>12} {'S3/local':>9}")
    for k in ("write rows/s", "read rows/s"):
        print(f"{k:22} {local[k]:12.0f} {s3[k]:12.0f} {s3[k] / local[k]:8.2f}x")
    print(f"requests per commit: {s3['requests/commit']:.1f}; per read of one snapshot: {s3['requests/read']:.0f}")
    one, many = bulk[1], bulk[objectstore_threads()]
    print(f"\none commit of {a.bulk_rows} rows in 1 MiB files (append table, one bucket):")
    print(f"uploads one at a time {one:6.2f} s, {objectstore_threads()} at once {many:6.2f} s: {one / many:.2f}x")
    print(f"\n{a.writers} racing processes, {a.race_commits} one-row commits each, into one S3 table")
    base = race["S3, conditional creates"]
    for name, r in race.items():
        print(f"{name:28} {r:8.1f} commits/s {r / base:6.2f}x")


def objectstore_threads() -> int:
    from lakelog.connector.format.objectstore import UPLOAD_THREADS

    return UPLOAD_THREADS


if __name__ == "__main__":
    main()
