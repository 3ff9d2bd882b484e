"""SQL ``INSERT``: lakelog's sink against Paimon's Java sink and a discarding sink, same job, same run.

Not a timed test: one run prints wall times and ratios. See benchmarks/README.md.

    python benchmarks/bench_sql_insert.py                          # 2M rows, streaming and batch, best of 2
    python benchmarks/bench_sql_insert.py --rows 500000 --modes batch --rounds 1

Method (one process, jobs one after another on a local MiniCluster, parallelism 2; the machine is
shared, so compare the ratios of one run):
  source     Flink's datagen, bounded (``number-of-rows``), ``id`` a sequence; the SELECT makes the
             table's five columns from it in Java: id, 'user-<id>', price, qty, one of 8 cities.
  tables     a primary-key table (id), 4 buckets, created fresh for each job by lakelog's catalog;
             Paimon's connector writes the same kind of table in the same warehouse layout.
  jobs       per mode (streaming: checkpoints every 2 s, as flink-conf/; batch):
               lakelog    ``INSERT INTO lk.db.t SELECT ...`` through ``LakelogSql`` (its Java row
                          batcher, Python writers, the checkpoint-gated committer; in batch mode
                          the per-blob ordering stage that keeps a key's changes in order);
               lakelog blackhole   the same SELECT into ``'connector'='blackhole'``, same session;
               paimon     ``INSERT INTO pm.db.t SELECT ...`` through Paimon 1.3's Java connector
                          (``paimon-flink-2.1`` from Maven Central, as the lookup benchmark fetches
                          it), a plain TableEnvironment with the same parallelism and checkpoints;
               paimon blackhole    the same SELECT into a blackhole in that environment.
  figures    wall time from submitting the INSERT to its end (the table committed); the sink's cost
             = wall - the blackhole job's wall in the same environment (start-up, source and
             projection cancel out); rows/s of the sink = rows / cost. Ratios: lakelog's sink rows/s
             over Paimon's, and the blackhole's wall over lakelog's (1.0: the sink costs nothing).
  check      each table is read back with lakelog: rows and distinct ids must equal the source's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakelog  # noqa: E402
from tests.paimon_java.oracle import JARS, _Jar, fetch_jars  # noqa: E402

PAIMON_FLINK = _Jar("org.apache.paimon", "paimon-flink-2.1", "1.3.0", "fa831b39b703194fea00a9b6493dbab0dbdbd7e4")
PARALLELISM = 2
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("price", pa.float64()),
                    ("qty", pa.int32()), ("city", pa.string())])
CITIES = "ELT(CAST(id % 8 AS INT) + 1, 'amsterdam', 'berlin', 'cairo', 'delhi', 'edinburgh', 'florence', " \
         "'geneva', 'hanoi')"
SELECT = (f"SELECT id, CONCAT('user-', CAST(id AS STRING)), CAST(id % 100000 AS DOUBLE) / 100, "
          f"CAST(id % 10000 AS INT), {CITIES} FROM gen")


def _source(rows: int) -> list[str]:
    return [
        f"CREATE TEMPORARY TABLE gen (id BIGINT) WITH ('connector'='datagen', 'number-of-rows'='{rows}', "
        f"'rows-per-second'='1000000000', 'fields.id.kind'='sequence', 'fields.id.start'='0', "
        f"'fields.id.end'='{rows - 1}')",
        "CREATE TEMPORARY TABLE hole (id BIGINT, name STRING, price DOUBLE, qty INT, city STRING) "
        "WITH ('connector'='blackhole')",
    ]


def _table(wh: str, name: str) -> None:
    lakelog.Catalog(wh).create_table(f"db.{name}", SCHEMA, primary_key=["id"], options={"bucket": "4"})


def _lakelog_job(wh: str, rows: int, mode: str, target: str) -> float:
    from lakelog.operators.flink_env import load_settings
    from lakelog.operators.sql import LakelogSql

    sql = LakelogSql(mode, parallelism=PARALLELISM, config=load_settings())
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    for d in _source(rows):
        sql.execute(d)
    t0 = time.perf_counter()
    res = sql.execute(f"INSERT INTO {target} {SELECT}")
    if hasattr(res, "get_job_execution_result"):  # a lakelog sink's streaming job
        res.get_job_execution_result().result()
    elif hasattr(res, "wait"):  # Flink's own result (the blackhole); a batch insert has run already
        res.wait()
    return time.perf_counter() - t0


def _paimon_job(wh: str, rows: int, mode: str, target: str, jars: list[Path]) -> float:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = EnvironmentSettings.in_streaming_mode() if mode == "streaming" else EnvironmentSettings.in_batch_mode()
    t_env = TableEnvironment.create(settings)
    conf = t_env.get_config()
    conf.set("pipeline.jars", ";".join(p.as_uri() for p in jars))
    conf.set("parallelism.default", str(PARALLELISM))
    conf.set("execution.checkpointing.interval", "2s")
    t_env.execute_sql(f"CREATE CATALOG pm WITH ('type'='paimon', 'warehouse'='file://{wh}')")
    for d in _source(rows):
        t_env.execute_sql(d)
    t0 = time.perf_counter()
    t_env.execute_sql(f"INSERT INTO {target} {SELECT}").wait()
    return time.perf_counter() - t0


def _check(wh: str, name: str, rows: int) -> None:
    ids = lakelog.Catalog(wh).get_table(f"db.{name}").to_arrow(columns=["id"]).column("id")
    distinct = len(pc.unique(ids))
    if len(ids) != rows or distinct != rows:
        raise SystemExit(f"table {name}: {len(ids)} rows, {distinct} distinct ids, expected {rows}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--modes", default="streaming,batch", help="comma list of streaming, batch")
    a = p.parse_args()
    jars = fetch_jars(jars=(PAIMON_FLINK, *JARS[1:3]))
    wh = tempfile.mkdtemp(prefix="bench-sql-insert-")
    made = 0

    def run(kind: str, mode: str) -> float:
        """One job: ``kind`` is 'lakelog' or 'paimon', with ' blackhole' for its baseline."""
        nonlocal made
        side = kind.split()[0]

        def job(target: str) -> float:
            if side == "lakelog":
                return _lakelog_job(wh, a.rows, mode, target)
            return _paimon_job(wh, a.rows, mode, target, jars)

        if kind.endswith("blackhole"):
            return job("hole")
        made += 1
        name = f"t{made}"
        _table(wh, name)
        s = job(f"{'lk' if side == 'lakelog' else 'pm'}.db.{name}")
        _check(wh, name, a.rows)
        return s

    try:
        best: dict[tuple[str, str], float] = {}
        kinds = ("lakelog blackhole", "lakelog", "paimon blackhole", "paimon")
        for r in range(a.rounds):
            for mode in a.modes.split(","):
                for kind in kinds:
                    s = run(kind, mode)
                    best[(mode, kind)] = min(best.get((mode, kind), s), s)
                    print(f"round {r + 1}: {mode:<10} {kind:<18}{s:8.1f} s", flush=True)
        print(f"\n{a.rows:,} rows into a 4-bucket primary-key table, parallelism {PARALLELISM}, best of {a.rounds} "
              f"(load {os.getloadavg()[0]:.1f})")
        for mode in a.modes.split(","):
            rates: dict[str, float] = {}
            for side in ("lakelog", "paimon"):
                cost = best[(mode, side)] - best[(mode, f"{side} blackhole")]
                rates[side] = a.rows / cost if cost > 0 else float("inf")
                print(f"  {mode:<10} {side:<8} wall {best[(mode, side)]:6.1f} s, blackhole "
                      f"{best[(mode, side + ' blackhole')]:6.1f} s, sink cost {cost:6.1f} s, {rates[side]:>10,.0f} rows/s")
            print(f"  {mode:<10} lakelog's sink / Paimon's: {rates['lakelog'] / rates['paimon']:.2f}x; "
                  f"lakelog blackhole wall / insert wall: "
                  f"{best[(mode, 'lakelog blackhole')] / best[(mode, 'lakelog')]:.2f}")
    finally:
        shutil.rmtree(wh, ignore_errors=True)


if __name__ == "__main__":
    main()
