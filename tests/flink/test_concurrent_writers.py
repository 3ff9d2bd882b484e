"""Reliability on a real MiniCluster with checkpointing: concurrent Flink jobs on one table.

(a) two INSERT jobs into the same tables at the same time, one partition each;
(b) two write-only jobs into the same partition while the streaming compaction job compacts.

Checked: nothing lost, nothing duplicated (expected key -> row maps; exact rows for append
tables), every job finishes, and no (commit user, commit identifier, kind) repeats.
The jobs run side by side in this process through ``execute_async`` (one MiniCluster each).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from typing import Any, Optional

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.operators.committer import COMMITTABLES_PROPERTY  # noqa: E402

pytestmark = [pytest.mark.slow]

from tests.flink.minicluster import ship_by_value  # noqa: E402

ship_by_value(__name__)

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)
ROW_NAMES = ["dt", "id", "v"]
WRITER_CONF = {"python.fn-execution.bundle.size": "200", "python.fn-execution.bundle.time": "100"}


def _env(flink_env: Any) -> Any:
    return flink_env(parallelism=2, checkpoint_interval_ms=1000, restarts=5, config=WRITER_CONF)


class Rows:
    """Test-only source map: number ``i`` -> Row(dt, id = i % keys (or i), v = "<tag>-<i>"),
    sleeping ``pause_s`` every 100 rows so the job spans several checkpoints. With ``wait_for``
    (a table path) it waits, at the halfway row, until that table has a COMPACT snapshot (at most
    ``wait_s``, slowing down meanwhile), so the second half is written while compactions are committed."""

    def __init__(
        self,
        dt: str,
        tag: str,
        keys: int,
        n: int,
        pause_s: float,
        id_offset: int = 0,
        wait_for: str = "",
        wait_s: float = 180.0,
    ) -> None:
        self.dt, self.tag, self.keys, self.n, self.pause_s = dt, tag, keys, n, pause_s
        self.id_offset, self.wait_for, self.wait_s = id_offset, wait_for, wait_s
        self.compacted = False
        self.waited_since: Optional[float] = None

    def __call__(self, i: int) -> Any:
        from pyflink.common import Row

        if i % 100 == 0 and i:
            time.sleep(self.pause_s)
        if self.wait_for and i >= self.n // 2 and not self.compacted:
            # slow down (never one long wait: that would hold up the checkpoints that the commits
            # and so the compactions need) until the table has a compaction, for at most wait_s
            if self.waited_since is None:
                self.waited_since = time.monotonic()
            if i % 20 == 0:
                self.compacted = _has_compaction(self.wait_for)
            if time.monotonic() - self.waited_since > self.wait_s:
                self.compacted = True
            time.sleep(0.02)
        key = (i % self.keys if self.keys else i) + self.id_offset
        return Row(dt=self.dt, id=key, v=f"{self.tag}-{i}")


def _has_compaction(table_path: str) -> bool:
    from lakelog.connector.format.store import TableStore

    return any(s.commit_kind == "COMPACT" for s in TableStore(table_path).snapshot_manager.newest_first())


def _writer_job(env: Any, table_paths: list[str], rows: Rows, tmp: Any, **sink_kwargs: Any) -> None:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from lakelog.operators.sink import sink_to_lakelog

    ds = (
        env.from_source(NumberSequenceSource(0, rows.n - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .set_parallelism(1)
        .map(rows, output_type=Types.ROW_NAMED(ROW_NAMES, [Types.STRING(), Types.LONG(), Types.STRING()]))
        .set_parallelism(1)
    )
    for path in table_paths:
        channel = os.path.join(str(tmp), f"ch-{rows.tag}-{os.path.basename(path)}")
        sink_to_lakelog(ds, path, channel_dir=channel, flush_interval=400, **sink_kwargs)


def _expected_pk(rows: Rows) -> dict[tuple[str, int], str]:
    """Last value per key (rows of one key come from one source subtask, in order)."""
    out = {}
    for i in range(rows.n):
        key = (i % rows.keys if rows.keys else i) + rows.id_offset
        out[(rows.dt, key)] = f"{rows.tag}-{i}"
    return out


def _pk_content(t: lakelog.Table) -> dict[tuple[str, int], str]:
    got = t.refresh().to_arrow()
    assert got.num_rows == len(set(zip(got.column("dt").to_pylist(), got.column("id").to_pylist())))
    return {(r["dt"], r["id"]): r["v"] for r in got.to_pylist()}


def _check_snapshots(t: lakelog.Table) -> Counter[str]:
    """No (commit user, identifier, kind) twice, no committable committed twice; commit users."""
    snaps = t.store.snapshot_manager.snapshots()
    idents = Counter((s.commit_user, s.commit_identifier, s.commit_kind) for s in snaps)
    assert max(idents.values()) == 1, [k for k, n in idents.items() if n > 1]
    # every commit (of the writers' committers and the compaction job's) names its committables
    unnamed = [s.id for s in snaps if not (s.properties or {}).get(COMMITTABLES_PROPERTY)]
    assert not unnamed, f"snapshots without {COMMITTABLES_PROPERTY}: {unnamed}"
    # (a writer's commit with compaction makes an APPEND and a COMPACT snapshot listing the same ids)
    ids = Counter((i, s.commit_kind) for s in snaps for i in s.properties[COMMITTABLES_PROPERTY].split(","))
    assert ids and max(ids.values()) == 1, [k for k, n in ids.items() if n > 1]
    return Counter(s.commit_user for s in snaps)


def _finish(client: Any, what: str, timeout_s: float = 400.0) -> None:
    # ask the result future, not the job status: a local job's MiniCluster goes away when it ends
    result = client.get_job_execution_result()
    deadline = time.monotonic() + timeout_s
    while not result.done():
        assert time.monotonic() < deadline, f"{what} did not finish"
        time.sleep(0.5)
    result.result()  # raises if the job failed


def test_two_insert_jobs_one_partition_each(tmp_path: Any, flink_env: Any) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    pk = cat.create_table(
        "db.pk", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    log = cat.create_table("db.log", SCHEMA, partition_by=["dt"], options={"bucket": "2", "bucket-key": "id"})
    jobs = [Rows("p1", "a", 300, 6000, 0.15), Rows("p2", "b", 200, 6000, 0.15)]
    clients = []
    t0 = time.monotonic()
    for rows in jobs:
        env = _env(flink_env)
        _writer_job(env, [pk.path, log.path], rows, tmp_path)
        clients.append(env.execute_async(f"insert-{rows.dt}"))
    for rows, client in zip(jobs, clients):
        _finish(client, f"insert job {rows.dt}")
    print(f"two insert jobs: {time.monotonic() - t0:.1f} s")

    expected: dict[tuple[str, int], str] = {}
    for rows in jobs:
        expected.update(_expected_pk(rows))
    assert _pk_content(pk) == expected
    got = log.refresh().to_arrow()
    want = sorted((r.dt, i % r.keys, f"{r.tag}-{i}") for r in jobs for i in range(r.n))
    assert got.num_rows == len(want)
    assert sorted(zip(*(got.column(c).to_pylist() for c in ROW_NAMES))) == want
    for t in (pk, log):
        users = _check_snapshots(t)
        assert len(users) == 2, users  # both jobs committed, each under its own commit user
        # both jobs were committing at the same time: their snapshots interleave
        seq = [s.commit_user for s in t.store.snapshot_manager.snapshots()]
        switches = sum(a != b for a, b in zip(seq, seq[1:]))
        assert switches >= 2, seq


class WorkerKiller(threading.Thread):
    """Once ``table_path`` has its first COMPACT snapshot, SIGKILLs every Python worker (beam_boot)
    descended from this test process, i.e. of every job it runs: they all fail over at once."""

    def __init__(self, table_path: str, timeout_s: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.table_path, self.timeout_s = table_path, timeout_s
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        deadline = time.monotonic() + self.timeout_s
        while not self.done.is_set() and time.monotonic() < deadline:
            if _has_compaction(self.table_path):
                for p in psutil.Process(os.getpid()).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if any("beam_boot" in part for part in p.cmdline()):
                            p.send_signal(signal.SIGKILL)
                            self.killed.append(p.pid)
                return
            time.sleep(0.2)


def test_two_write_only_jobs_and_the_compaction_job(tmp_path: Any, flink_env: Any) -> None:
    from lakelog.jobs.compact import start_compaction
    from lakelog.operators.compact_buckets import sorted_run_counts

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    pk = cat.create_table(
        "db.pk",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "2", "write-only": "true"},
    )
    t0 = time.monotonic()
    cenv = flink_env(parallelism=2, checkpoint_interval_ms=1000, restarts=5)
    job = start_compaction(
        cenv, pk.path, streaming=True, discovery_interval=0.5, channel_dir=str(tmp_path / "ch-compact")
    )
    assert job is not None
    # disjoint keys per job (two writers of one bucket share no key: their sequence numbers are
    # independent), many updates per key
    jobs = [
        Rows("p", "a", 150, 6000, 0.08, 0, wait_for=pk.path),
        Rows("p", "b", 150, 6000, 0.08, 1000, wait_for=pk.path),
    ]
    clients = []
    for rows in jobs:
        env = _env(flink_env)
        _writer_job(env, [pk.path], rows, tmp_path, write_only=True)
        clients.append(env.execute_async(f"write-only-{rows.tag}"))
    # every job fails over once, in the middle (the writers wait at half-way for a compaction)
    killer = WorkerKiller(pk.path)
    killer.start()
    for rows, client in zip(jobs, clients):
        _finish(client, f"write-only job {rows.tag}")
    killer.done.set()
    killer.join()
    assert killer.killed, "no Python worker was killed"
    print(f"killed {len(killer.killed)} Python workers")
    last_append = max(s.id for s in pk.refresh().snapshots() if s.commit_kind == "APPEND")
    summary = job.stop_when_idle(6.0, timeout_s=300)
    print(f"write-only jobs + compaction job: {time.monotonic() - t0:.1f} s; {summary}")
    assert job.status() == "FINISHED"

    expected: dict[tuple[str, int], str] = {}
    for rows in jobs:
        expected.update(_expected_pk(rows))
    assert _pk_content(pk) == expected
    users = _check_snapshots(pk)
    assert len(users) == 3, users  # two writers and the compactor
    snaps = pk.store.snapshot_manager.snapshots()
    compacts = [s for s in snaps if s.commit_kind == "COMPACT"]
    assert compacts and all(s.commit_user == summary.commit_user for s in compacts)
    assert [s.id for s in compacts] == summary.snapshots
    assert any(s.id < last_append for s in compacts)  # compacted while the writers were writing
    # the writers never compacted (write-only); the compaction job kept the runs in check
    assert all(not s.properties or "lakelog.full-compaction" not in s.properties for s in snaps)
    trigger = pk.store.options.num_sorted_run_compaction_trigger
    assert max(sorted_run_counts(pk.store).values()) <= trigger
    # files of attempts lost in the failover are orphans; removing them leaves the table intact
    pk.remove_orphan_files(older_than_seconds=0)
    assert _pk_content(pk) == expected
    for snap in snaps[-3:]:
        assert pk.to_arrow(snapshot_id=snap.id).num_rows > 0
