"""Issue 23 (long-lived processes): a ``lakelog sql`` session or notebook that runs many local jobs
leaves no PyFlink flush timers behind, and never stops those of a job that still runs."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from typing import Any

import pytest

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

# 5 jobs here (each leaves 2 timers without the sweep: 10 threads more); LAKELOG_LONG_LIVED_JOBS=50 for the
# issue's measurement (43 threads with one job running, 41 after 50 more jobs, 130 s)
JOBS = int(os.environ.get("LAKELOG_LONG_LIVED_JOBS", "5"))


def _flushers() -> list[threading.Thread]:
    utils = sys.modules.get("pyflink.fn_execution.utils.operation_utils")
    if utils is None:
        return []
    return [t for t in threading.enumerate() if isinstance(t, utils.PeriodicThread) and t.is_alive()]


def _counted_threads() -> list[threading.Thread]:
    """The process's threads but the idle workers of Beam's shared thread pool: a pool that keeps up
    to 16 idle threads for good (``apache_beam.utils.thread_pool_executor``), grown by whichever
    earlier job needed them at once, so they are no job's leftovers."""
    pool = sys.modules.get("apache_beam.utils.thread_pool_executor")
    worker = getattr(pool, "_Worker", None)
    return [t for t in threading.enumerate() if worker is None or not isinstance(t, worker)]


def test_fifty_jobs_leave_the_process_as_they_found_it(tmp_path: Any) -> None:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    from lakelog.operators.flink_env import stop_idle_flushers
    from lakelog.operators.sql import LakelogSql

    stop_idle_flushers()  # what earlier tests of this process left
    time.sleep(1.1)
    sql = LakelogSql("streaming", parallelism=2)
    t_env = sql.t_env
    t_env.create_temporary_system_function("plus1", udf(lambda x: x + 1, result_type=DataTypes.BIGINT()))
    # a job that keeps running meanwhile: its timers must survive every sweep
    sql.execute("CREATE TEMPORARY TABLE gen (x BIGINT) WITH ('connector'='datagen', 'rows-per-second'='50')")
    sql.execute("CREATE TEMPORARY TABLE sink (x BIGINT) WITH ('connector'='blackhole')")
    running = sql.execute("INSERT INTO sink SELECT plus1(x) FROM gen")
    deadline = time.time() + 60
    while not _flushers() and time.time() < deadline:
        time.sleep(0.2)
    live = set(_flushers())
    assert live, "the running job's Python worker never started"
    before = len(_counted_threads())
    known = {t.ident for t in threading.enumerate()}
    for i in range(JOBS):
        query = f"SELECT plus1(x) FROM (VALUES (CAST({i} AS BIGINT))) AS t(x)"
        with sql.execute(query).collect() as it:
            assert [r[0] for r in it] == [i + 1]
    stop_idle_flushers()  # between jobs (not automatic yet: see its docstring)
    time.sleep(1.1)  # a stopped timer ends at its next tick
    if len(set(_flushers()) - live) > 4:
        # a worker still shutting down holds its streams, or only a reference cycle does (the sweep
        # runs no collection, see its docstring): the next sweep, after one, takes them (a CI run
        # of the suite once left 5 here, in a process that had run many tests before)
        gc.collect()
        stop_idle_flushers()
        time.sleep(1.1)
    # threads of ended jobs (gRPC, py4j callbacks) leave on their own; under load that takes a while
    deadline = time.time() + 60
    while len(_counted_threads()) > before + 6 and time.time() < deadline:
        time.sleep(0.5)
    after = len(_counted_threads())
    extra = sorted(t.name for t in _counted_threads() if t.ident not in known)
    left = set(_flushers())
    print(f"threads: {before} with one job running, {after} after {JOBS} more jobs")
    assert live <= left, "a running job's flush timer was stopped"
    assert len(left - live) <= 4, f"{len(left - live)} timers of ended jobs are left"
    assert after <= before + 6, (before, after, extra)
    client = running if hasattr(running, "cancel") else running.get_job_client()
    client.cancel().result()
