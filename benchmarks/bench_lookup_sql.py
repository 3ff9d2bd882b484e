"""SQL lookup join: lakelog's against Paimon's Java lookup join, same job, same table, same run.

Not a timed test: one run prints figures and ratios (absolute times on a shared machine are noise).
See benchmarks/README.md.

    python benchmarks/bench_lookup_sql.py                         # 200k-row dimension, 500k probes
    python benchmarks/bench_lookup_sql.py --rows 1000000 --probes 1000000 --rounds 2
    python benchmarks/bench_lookup_sql.py --probes 2000000 --hits 0.1 --disk   # 90 % misses, both on
                                         # disk with a memory cache a tenth of the dimension

Method (one process, jobs one after another on local MiniClusters, streaming mode, parallelism 2):
  dimension  one lakelog table (BIGINT key, two STRING columns, 4 buckets), written once; Paimon's
             Java connector reads the very same files (paimon-flink-2.1 1.3.0 from Maven Central,
             SHA-1 checked, with the Hadoop jars the interop tests fetch).
  probes     datagen, ``--probes`` rows, key uniform over twice the dimension's keys (half hit),
             unthrottled (datagen's default is 10,000 rows a second).
  job        INSERT INTO blackhole SELECT o.oid, d.name FROM orders AS o
               JOIN dim FOR SYSTEM_TIME AS OF o.pt AS d ON o.cid = d.id
             lakelog: LakelogSql, with 'shuffle'='true' (sharded by bucket) and 'false' (the
             default for a dimension this small);
             Paimon: a plain TableEnvironment with Paimon's catalog (its default full cache).
  --disk     both joins keep the dimension on local disk behind a memory cache a tenth of its size:
             lakelog 'lookup.cache'='full' (memory-mapped files; the page cache is the memory
             cache, 'lookup.cache-rows' a tenth of the rows), Paimon 'lookup.cache'='full' (its
             RocksDB state) with 'lookup.cache-max-memory-size' a tenth of the data files' size and
             'lookup.cache-rows' a tenth of the rows. ``--hits``: the fraction of probes that hit.
  baseline   the same job without the join (SELECT o.oid, CAST(o.cid AS STRING)), in each
             environment; join cost = job wall time - baseline wall time (start-up cancels out);
             probes/s = probes / join cost. Rounds interleave the jobs; the best of each is kept.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakelog  # noqa: E402
from tests.paimon_java.oracle import JARS, _Jar, fetch_jars  # noqa: E402

PAIMON_FLINK = _Jar("org.apache.paimon", "paimon-flink-2.1", "1.3.0", "fa831b39b703194fea00a9b6493dbab0dbdbd7e4")
PARALLELISM = 2


def _dimension(wh: str, rows: int) -> None:
    ids = np.arange(rows, dtype=np.int64)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("city", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.dim", schema, primary_key=["id"], options={"bucket": "4"})
    names = pc.binary_join_element_wise("name-", pc.cast(pa.array(ids), pa.string()), "")
    t.write(pa.table({"id": ids, "name": names, "city": pc.cast(pa.array(ids % 50), pa.string())}, schema=schema))


def _ddl(probes: int, rows: int, hits: float = 0.5) -> list[str]:
    top = int(rows / hits) - 1
    return [
        f"CREATE TEMPORARY TABLE orders (oid BIGINT, cid BIGINT, pt AS PROCTIME()) WITH ('connector'='datagen', "
        f"'rows-per-second'='1000000000', 'number-of-rows'='{probes}', 'fields.oid.kind'='sequence', 'fields.oid.start'='1', "
        f"'fields.oid.end'='{probes}', 'fields.cid.min'='0', 'fields.cid.max'='{top}')",
        "CREATE TEMPORARY TABLE sink1 (oid BIGINT, name STRING) WITH ('connector'='blackhole')",
    ]


BASELINE = "INSERT INTO sink1 SELECT o.oid, CAST(o.cid AS STRING) FROM orders AS o"
JOIN = ("INSERT INTO sink1 SELECT {hint} o.oid, d.name FROM orders AS o JOIN {dim} {options}"
        "FOR SYSTEM_TIME AS OF o.pt AS d ON o.cid = d.id")


def _lakelog_job(wh: str, probes: int, rows: int, stmt: str, bundle: int, hits: float) -> float:
    from lakelog.operators.flink_env import load_settings
    from lakelog.operators.sql import LakelogSql

    config = load_settings()
    if bundle:
        config["python.fn-execution.bundle.size"] = str(bundle)
        config["python.fn-execution.arrow.batch.size"] = str(bundle)
    sql = LakelogSql("streaming", parallelism=PARALLELISM, config=config)
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    for d in _ddl(probes, rows, hits):
        sql.execute(d)
    t0 = time.perf_counter()
    sql.execute(stmt.format(dim="lk.db.dim")).wait()
    return time.perf_counter() - t0


def _paimon_job(wh: str, probes: int, rows: int, stmt: str, jars: list[Path], hits: float) -> float:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = t_env.get_config()
    conf.set("pipeline.jars", ";".join(p.as_uri() for p in jars))
    conf.set("parallelism.default", str(PARALLELISM))
    t_env.execute_sql(f"CREATE CATALOG pm WITH ('type'='paimon', 'warehouse'='file://{wh}')")
    for d in _ddl(probes, rows, hits):
        t_env.execute_sql(d)
    t0 = time.perf_counter()
    t_env.execute_sql(stmt.format(dim="pm.db.dim")).wait()
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--probes", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--bundle", type=int, default=0, help="python.fn-execution.bundle.size and "
                   "arrow.batch.size of the lakelog jobs (default: flink-conf/'s)")
    p.add_argument("--hits", type=float, default=0.5, help="fraction of probes whose key exists")
    p.add_argument("--disk", action="store_true", help="both on local disk, a tenth in memory")
    a = p.parse_args()
    jars = fetch_jars(jars=(PAIMON_FLINK, *JARS[1:3]))
    wh = tempfile.mkdtemp(prefix="bench-lookup-sql-")
    try:
        _dimension(wh, a.rows)
        on, off = ("/*+ LOOKUP('table'='d', 'shuffle'='true') */", "/*+ LOOKUP('table'='d', 'shuffle'='false') */")
        lk_opts = pm_opts = ""
        if a.disk:
            tenth = max(1, a.rows // 10)
            files = sum(f.stat().st_size for f in Path(wh).rglob("*.parquet"))
            lk_opts = f"/*+ OPTIONS('lookup.cache'='full', 'lookup.cache-rows'='{tenth}') */ "
            pm_opts = (f"/*+ OPTIONS('lookup.cache'='full', 'lookup.cache-rows'='{tenth}', "
                       f"'lookup.cache-max-memory-size'='{max(1 << 20, files // 10)} b') */ ")
        lk_join, pm_join = JOIN.replace("{options}", lk_opts), JOIN.replace("{options}", pm_opts)

        def lk(stmt: str) -> Callable[[], float]:
            return lambda: _lakelog_job(wh, a.probes, a.rows, stmt, a.bundle, a.hits)

        jobs: dict[str, Callable[[], float]] = {
            "lakelog baseline": lk(BASELINE),
            "lakelog join (sharded)": lk(lk_join.replace("{hint}", on)),
            "lakelog join (unsharded)": lk(lk_join.replace("{hint}", off)),
            "paimon baseline": lambda: _paimon_job(wh, a.probes, a.rows, BASELINE, jars, a.hits),
            "paimon join": lambda: _paimon_job(wh, a.probes, a.rows, pm_join.replace("{hint}", ""), jars, a.hits),
        }
        best: dict[str, float] = {}
        for r in range(a.rounds):
            for name, job in jobs.items():
                s = job()
                best[name] = min(best.get(name, s), s)
                print(f"round {r + 1}: {name:<26}{s:8.1f} s", flush=True)
        where = "on disk, a tenth in memory" if a.disk else "default caches"
        print(f"\n{a.rows:,} dimension rows ({where}), {a.probes:,} probes ({a.hits:.0%} hit), parallelism {PARALLELISM}, "
              f"best of {a.rounds} (load {os.getloadavg()[0]:.1f})")
        rates: dict[str, float] = {}
        for name, base in (("lakelog join (sharded)", "lakelog baseline"),
                           ("lakelog join (unsharded)", "lakelog baseline"), ("paimon join", "paimon baseline")):
            cost = best[name] - best[base]
            rates[name] = a.probes / cost if cost > 0 else float("inf")
            print(f"  {name:<26} join cost {cost:6.1f} s   {rates[name]:>10,.0f} probes/s")
        for name in ("lakelog join (sharded)", "lakelog join (unsharded)"):
            print(f"  {name} / paimon join: {rates[name] / rates['paimon join']:.2f}x")
    finally:
        shutil.rmtree(wh, ignore_errors=True)


if __name__ == "__main__":
    main()
