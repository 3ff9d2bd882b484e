"""The JDBC commit lock (``lock.enabled``) against the file IO's flock, from racing processes.

Run from the repository root (it starts a PostgreSQL server as the ``postgres`` user, with fsync
on, in a temp directory; the Debian postgresql package and psycopg are needed)::

    python benchmarks/bench_jdbc_lock.py [--writers 4] [--commits 25] [--locks 200] [--lease 3]

Measures, each from ``--writers`` processes started together:

* commits/s: every process writes ``--commits`` one-row batches (one commit each) into one
  primary-key table; total commits / wall time of the slowest process. Printed as a ratio to the
  same run under flock (a file-system catalog on the same disk).
* lock holds/s: every process takes and leaves the table's commit lock ``--locks`` times, nothing
  inside; the cost of the lock alone.
* takeover after SIGKILL: a process holds the lock and is killed; the time until another holds it
  (the lease is ``--lease`` seconds: a row not renewed for that long is taken over).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakelog  # noqa: E402
from tests.jdbc_workers import SCHEMA  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402


def _spawn(command: str, warehouse: str, options: dict[str, str], **args: Any) -> subprocess.Popen[str]:
    payload = json.dumps({"warehouse": warehouse, "options": options, **args})
    return subprocess.Popen([sys.executable, "-m", "tests.jdbc_workers", command, payload], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _race(command: str, warehouse: str, options: dict[str, str], writers: int, **args: Any) -> float:
    at = time.time() + 4.0  # every process has imported lakelog and opened the table by then
    procs = [_spawn(command, warehouse, options, at=at, writer=i, base=1_000_000 * i, **args)
             for i in range(writers)]
    times = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        line = out.strip().splitlines()[-1]
        assert line.startswith("done"), out
        times.append(float(line.split()[1]))
    return max(times)


def _takeover(warehouse: str, options: dict[str, str]) -> float:
    cat = lakelog.Catalog(warehouse, options=options)
    sm = cat.get_table("db.t").store.snapshot_manager
    p = _spawn("hold", warehouse, options, table="db.t")
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    time.sleep(0.3)
    p.send_signal(signal.SIGKILL)
    p.wait()
    killed = time.monotonic()
    with sm.lock():
        return time.monotonic() - killed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--commits", type=int, default=25)
    ap.add_argument("--locks", type=int, default=200)
    ap.add_argument("--lease", type=float, default=3.0)
    a = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-jdbc-") as tmp, PostgresServer(fsync=True) as pg:
        lock = {"lock.enabled": "true", "lock-lease-timeout": f"{a.lease:g} s"}
        setups = {
            "flock (filesystem catalog)": {},
            "JDBC lock, SQLite": {"metastore": "jdbc", "uri": f"jdbc:sqlite:{tmp}/catalog.db", **lock},
            "JDBC lock, PostgreSQL": {**pg.options(), **lock},
        }
        for name, options in setups.items():
            wh = f"{tmp}/{len(results)}"
            cat = lakelog.Catalog(wh, options=options)
            cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
            wall = _race("commit", wh, options, a.writers, table="db.t", commits=a.commits)
            snaps = [s for s in cat.get_table("db.t").snapshots() if s.commit_kind == "APPEND"]
            assert len(snaps) == a.writers * a.commits, (name, len(snaps))
            locks = _race("lockloop", wh, options, a.writers, table="db.t", times=a.locks)
            row = {"commits/s": a.writers * a.commits / wall, "lock holds/s": a.writers * a.locks / locks}
            if options:
                row["takeover s"] = _takeover(wh, options)
            results[name] = row
            cat.close()
    base = results["flock (filesystem catalog)"]
    print(f"\n{a.writers} processes; {a.commits} commits and {a.locks} lock holds each; lease {a.lease:g} s")
    print(f"{'':30} {'commits/s':>10} {'vs flock':>9} {'holds/s':>9} {'vs flock':>9} {'takeover after kill':>20}")
    for name, r in results.items():
        take = f"{r['takeover s']:.2f} s" if "takeover s" in r else "- (kernel)"
        print(f"{name:30} {r['commits/s']:10.1f} {r['commits/s'] / base['commits/s']:8.2f}x "
              f"{r['lock holds/s']:9.0f} {r['lock holds/s'] / base['lock holds/s']:8.2f}x {take:>20}")


if __name__ == "__main__":
    main()
