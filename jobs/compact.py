"""The dedicated compaction job: compacts a lakelog table in Flink while (write-only) jobs write it.

Run::

    python -m lakelog.jobs.compact --warehouse W --table db.t [--full] [--parallelism N]
    python -m lakelog.jobs.compact --warehouse W --table db.t --streaming [--idle-timeout S | --max-rounds N]
    lakelog compact --warehouse W --table db.t --job | --streaming        (the same, via the CLI)

Batch: the client plans which (partition, bucket)s need compaction (universal picks, or ``--full``),
Flink compacts them in parallel and commits all results once, as one COMPACT snapshot. Streaming:
a planner looks at the buckets new snapshots changed every ``continuous.discovery-interval`` and
the results commit through the sink's checkpoint-gated channel. The graph is
:func:`lakelog.operators.compact.build_compaction`; this module runs it, stops it and reports what
it committed. See ``operators/README.md`` ("The compaction job").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from pyflink.datastream import StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

from lakelog.connector.errors import LakelogError
from lakelog.connector.format.store import TableStore
from lakelog.operators.compact import CompactionPlan, build_compaction
from lakelog.operators.compact_buckets import read_progress
from lakelog.operators.flink_env import flink_environment
from lakelog.operators.table_ref import TableLike, table_path

__all__ = [
    "CompactionJob",
    "CompactionSummary",
    "start_compaction",
    "run_compaction",
    "run_from_args",
    "main",
]


@dataclass
class CompactionSummary:
    """What a compaction run committed: the COMPACT snapshots of its commit user."""

    commit_user: str
    snapshots: list[int]
    planned: int = 0  # batch: buckets planned

    def __str__(self) -> str:
        if not self.snapshots:
            return "nothing to compact" if self.planned == 0 else "no compaction committed"
        ids = ", ".join(str(s) for s in self.snapshots[:10]) + (" ..." if len(self.snapshots) > 10 else "")
        return f"compaction committed {len(self.snapshots)} snapshot(s): {ids}"


def _summary(plan: CompactionPlan, first_snapshot: int) -> CompactionSummary:
    store = TableStore(plan.table_path)
    ids = sorted(
        s.id
        for s in store.snapshot_manager.newest_first()
        if s.id >= first_snapshot and s.commit_user == plan.commit_user and s.commit_kind == "COMPACT"
    )
    return CompactionSummary(plan.commit_user, ids, len(plan.keys))


class CompactionJob:
    """A compaction job submitted with ``execute_async`` (see :func:`start_compaction`)."""

    def __init__(self, client: Any, plan: CompactionPlan, first_snapshot: int) -> None:
        self.client = client
        self.plan = plan
        self.first_snapshot = first_snapshot
        # fetched now: a local job's MiniCluster shuts down when the job ends, and then only this
        # future still answers
        self._result = client.get_job_execution_result()

    def finished(self) -> bool:
        return bool(self._result.done())

    def status(self) -> str:
        """The job's status name (FINISHED or FAILED once it has ended)."""
        if self.finished():
            try:
                self._result.result()
            except Exception:
                return "FAILED"
            return "FINISHED"
        try:
            return str(self.client.get_job_status().result())
        except Exception:  # the MiniCluster shut down in between
            return "FINISHED" if self.finished() else "UNKNOWN"

    def wait(self, timeout_s: Optional[float] = None) -> CompactionSummary:
        """Wait for the job to end (it must be bounded, or stopped); raise if it failed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.finished():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"compaction job of {self.plan.table_path} still running")
            time.sleep(0.2)
        if self.plan.progress_file:
            with contextlib.suppress(OSError):
                os.remove(self.plan.progress_file)
        self._result.result()
        return _summary(self.plan, self.first_snapshot)

    def drain(self) -> CompactionSummary:
        """Stop the job the clean way: a stop-with-savepoint that drains (sources end, so the
        committer commits everything it holds), then wait for it."""
        if not self.finished():
            sp_dir = tempfile.mkdtemp(prefix="lakelog-compact-savepoint-")
            try:
                fmt = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
                self.client._j_job_client.stopWithSavepoint(True, "file://" + sp_dir, fmt).get()
            except Exception as exc:  # the job may have ended in between
                if not self.finished():
                    raise LakelogError(f"could not stop the compaction job: {exc}") from exc
            finally:
                shutil.rmtree(sp_dir, ignore_errors=True)
        return self.wait()

    def cancel(self) -> None:
        """Cancel without draining: what the channel released is committed by the next run (same
        commit user and channel dir); work in flight is lost (orphan files)."""
        self.client.cancel().result()

    def stop_when_idle(
        self,
        idle_s: Optional[float],
        *,
        timeout_s: Optional[float] = None,
        poll_s: float = 0.5,
        should_stop: Optional[Callable[[], bool]] = None,
    ) -> CompactionSummary:
        """Drain the job once it is idle: its planner has examined the latest snapshot and no new
        snapshot has appeared for ``idle_s`` seconds (None: never idle), counted from the planner's
        first round. Also drain when ``should_stop()`` turns true, or after ``timeout_s``.
        Returns at once with the summary when the job ends by itself."""
        store = TableStore(self.plan.table_path)
        progress = self.plan.progress_file
        start = time.monotonic()
        last: Optional[int] = None
        last_change = time.monotonic()
        while not self.finished():
            now = time.monotonic()
            seen = read_progress(progress) if progress else {"round": 1, "snapshot": -1}
            cur = store.snapshot_manager.latest_id()
            if seen is None or cur != last:  # not started yet, or the table changed
                last, last_change = cur, now
            caught_up = seen is not None and (progress is None or seen["snapshot"] >= (cur or 0))
            if (
                (idle_s is not None and caught_up and now - last_change >= idle_s)
                or (timeout_s is not None and now - start >= timeout_s)
                or (should_stop is not None and should_stop())
            ):
                return self.drain()
            time.sleep(poll_s)
        return self.wait()


def _job_name(path: str) -> str:
    return f"lakelog-compact-{os.path.basename(os.path.normpath(path))}"


def _next_snapshot(path: str) -> int:
    return (TableStore(path).snapshot_manager.latest_id() or 0) + 1


def start_compaction(
    env: StreamExecutionEnvironment, table: TableLike, **kwargs: Any
) -> Optional[CompactionJob]:
    """:func:`~lakelog.operators.compact.build_compaction` + ``execute_async``; None when a batch
    plan had nothing to do."""
    path = table_path(table)
    plan = build_compaction(env, path, **kwargs)
    if plan.empty:
        return None
    first = _next_snapshot(path)
    return CompactionJob(env.execute_async(_job_name(path)), plan, first)


def run_compaction(
    table: TableLike,
    *,
    streaming: bool = False,
    full: bool = False,
    parallelism: Optional[int] = None,
    checkpoint_interval_ms: Optional[int] = None,
    idle_timeout_s: Optional[float] = None,
    config: Optional[dict[str, str]] = None,
    **kwargs: Any,
) -> CompactionSummary:
    """Run the compaction job on a local MiniCluster and wait for it.

    Batch: returns when the planned buckets are compacted and committed. Streaming: runs until
    ``max_rounds`` (keyword) rounds are done, until the table has been idle for
    ``idle_timeout_s``, or until SIGINT/SIGTERM; all three end with a drain (everything compacted
    so far is committed)."""
    path = table_path(table)
    env = flink_environment(
        mode="streaming" if streaming else "batch",
        parallelism=parallelism,
        checkpoint_interval_ms=checkpoint_interval_ms,
        config=config,
    )
    if not streaming:
        first = _next_snapshot(path)
        plan = build_compaction(env, path, streaming=False, full=full, parallelism=parallelism, **kwargs)
        if plan.empty:
            return CompactionSummary(plan.commit_user, [], 0)
        env.execute(_job_name(path))
        return _summary(plan, first)
    job = start_compaction(env, path, streaming=True, full=full, parallelism=parallelism, **kwargs)
    assert job is not None
    stop = threading.Event()
    handlers: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, lambda signum, frame: stop.set())
    try:
        return job.stop_when_idle(idle_timeout_s, should_stop=stop.is_set)
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


# ---- command line -----------------------------------------------------------------------------------------
def _partitions(args: argparse.Namespace) -> Optional[list[dict[str, str]]]:
    from lakelog.jobs.cli import partition_arg

    given = getattr(args, "partition", None)
    return [partition_arg(p) for p in given] if given else None


def run_from_args(table: TableLike, args: argparse.Namespace, *, full: bool) -> int:
    """Run the job as the parsed flags (:func:`lakelog.jobs.cli.compact_job_arguments`) say."""
    summary = run_compaction(
        table,
        streaming=bool(args.streaming),
        full=full,
        parallelism=args.parallelism,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        idle_timeout_s=args.idle_timeout,
        commit_user=args.commit_user,
        partitions=_partitions(args),
        where=getattr(args, "where", None),
        **(
            {
                "channel_dir": args.channel_dir,
                "discovery_interval": args.discovery_interval,
                "max_rounds": args.max_rounds,
            }
            if args.streaming
            else {}
        ),
    )
    print(summary)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lakelog.jobs.compact --warehouse W --table db.t [--full] [--streaming ...]``."""
    from lakelog.connector.format.fileio import is_object_store, location
    from lakelog.connector.table.catalog import Catalog
    from lakelog.jobs.cli import UsageError, catalog_options, compact_job_arguments

    p = argparse.ArgumentParser(
        prog="python -m lakelog.jobs.compact", description="Compact a lakelog table with a Flink job"
    )
    p.add_argument("--warehouse", default=os.environ.get("LAKELOG_WAREHOUSE"), required=False)
    p.add_argument("--table", required=True, help="db.table")
    p.add_argument("--full", action="store_true", help="full compaction (default: universal picks)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a catalog option key=value, as lakelog's CLI takes it (metastore=jdbc uri=... "
                        "lock.enabled=true; a value @<file> is read from the file)")
    compact_job_arguments(p)
    args = p.parse_args(list(argv) if argv is not None else None)
    if not args.warehouse or not (is_object_store(args.warehouse) or os.path.isdir(location(args.warehouse))):
        print("compact: give --warehouse (an existing warehouse)", file=sys.stderr)
        return 2
    try:
        table = Catalog(args.warehouse, options=catalog_options(args.option)).get_table(args.table)
        return run_from_args(table, args, full=bool(args.full))
    except UsageError as e:
        print(f"compact: {e}", file=sys.stderr)
        return 2
    except LakelogError as e:
        print(f"compact: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
