"""The dedicated compaction job: compacts a lakelog table in Flink while (write-only) jobs write it.

Run::

    python -m lakelog.jobs.compact --warehouse W --table db.t [--full] [--parallelism N]
    python -m lakelog.jobs.compact --warehouse W --table db.t --streaming [--idle-timeout S | --max-rounds N]
    lakelog compact --warehouse W --table db.t --job | --streaming        (the same, via the CLI)

Batch: the client plans which (partition, bucket)s need compaction (universal picks, or ``--full``),
one task per bucket; Flink compacts them in parallel (keyed by bucket) and a parallelism-1
committer commits all results once, as one COMPACT snapshot. Streaming: a ticker drives a
parallelism-1 planner that, every ``continuous.discovery-interval``, looks at the buckets the new
snapshots changed and sends those that need compaction to the compactors; results commit through
the sink's checkpoint-gated channel. See ``operators/README.md`` ("The compaction job").

pyflink is imported lazily inside the functions (importing this module needs no pyflink).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from lakelog.connector.errors import LakelogError, OptionError
from lakelog.connector.format.store import TableStore
from lakelog.operators.codec import Committable, encode_committable
from lakelog.operators.committer import WAKE, make_committer_function
from lakelog.operators.compact_ops import (
    CompactionCommitter,
    changed_buckets,
    committable_key,
    compact_bucket,
    compact_files,
    inputs_live,
    load_bucket,
    plan_compaction,
)

__all__ = [
    "CompactionJob",
    "CompactionSummary",
    "build_compaction",
    "start_compaction",
    "run_compaction",
    "add_arguments",
    "run_from_args",
    "main",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_MS = 300


# ---- operator functions -------------------------------------------------------------------------------
def progress_path(channel_dir: str, run_token: str) -> str:
    """Where a streaming run's planner records its last round (a dot file: the channel reader
    skips it): ``{"round": n, "snapshot": id}``, the last snapshot it has examined."""
    return os.path.join(channel_dir, f".lakelog-planner-{run_token}.json")


def read_progress(path: str) -> Optional[dict[str, int]]:
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(d, dict) and isinstance(d.get("round"), int) and isinstance(d.get("snapshot"), int):
        return {"round": d["round"], "snapshot": d["snapshot"]}
    return None


def _make_planner(table_path: str, full: bool, ticks_per_round: int, progress: Optional[str]) -> Any:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    class CompactionPlanner(KeyedProcessFunction):  # type: ignore[misc]
        """Parallelism 1, driven by ticks. Keyed ValueState holds the first snapshot not examined
        yet. A round (every ``ticks_per_round`` ticks, the first tick included) examines the new
        snapshots' changed buckets (every bucket on the first round of a fresh job) and emits the
        keys of those that need compaction, then a ``WAKE`` line that the compactors pass on to the
        committer (after a restart nothing else may start it: PyFlink opens a Python function only
        when an element reaches it, and fires no restored timer)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.store = TableStore(table_path)
            self.next_snapshot = runtime_context.get_state(ValueStateDescriptor("next", Types.LONG()))
            self.ticks = 0
            self.rounds = 0

        def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
            self.ticks += 1
            if (self.ticks - 1) % ticks_per_round:
                return
            store = self.store
            latest = store.snapshot_manager.latest()
            nxt = self.next_snapshot.value()
            keys: list[str] = []
            if latest is not None and (nxt is None or latest.id >= nxt):
                only = None if nxt is None else changed_buckets(store, int(nxt) - 1, latest.id)
                keys = plan_compaction(store, full=full, snapshot=latest, only=only)
                self.next_snapshot.update(latest.id + 1)
            self.rounds += 1
            self._record(latest.id if latest is not None else 0)
            if keys:
                log.info("compaction round at snapshot %s: %d bucket(s) to compact", latest, len(keys))
            yield from keys
            yield WAKE  # passed on to the committer, which nothing else may start after a restart

        def _record(self, snapshot_id: int) -> None:
            if not progress:
                return
            tmp = f"{progress}.{os.getpid()}.tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump({"round": self.rounds, "snapshot": snapshot_id}, fh)
                os.replace(tmp, progress)
            except OSError:  # progress is advisory (for local idle detection)
                log.debug("could not record planner progress in %s", progress)

    return CompactionPlanner()


def _make_compactor(table_path: str, full: bool, streaming: bool) -> Any:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    class BucketCompactorFn(KeyedProcessFunction):  # type: ignore[misc]
        """Keyed by bucket key. Compacts the bucket as of the latest snapshot and emits one
        committable. Streaming: keyed ValueState remembers the inputs of the bucket's last emitted
        compaction; while they are all still live (not committed, not dropped yet), new tasks for
        the bucket are skipped (the commit makes a snapshot that the planner sees, so the bucket
        is looked at again)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.store = TableStore(table_path)
            self.inflight = runtime_context.get_state(ValueStateDescriptor("inflight", Types.STRING()))

        def process_element(self, key: str, ctx: Any) -> Iterator[str]:
            if key == WAKE:
                yield WAKE
                return
            if not streaming:
                done = compact_bucket(self.store, key, full=full)
                if done is not None:
                    yield self._committable(key, *done)
                return
            b = load_bucket(self.store, key)
            if b is None:
                return
            pending = self.inflight.value()
            if pending:
                if inputs_live(b, json.loads(pending)):
                    return
                self.inflight.clear()
            msg = compact_files(self.store, b, full=full)
            if msg is None:
                return
            self.inflight.update(json.dumps([[f.level, f.file_name] for f in msg.compact_before]))
            yield self._committable(key, b.snapshot_id, msg)

        def _committable(self, key: str, snapshot_id: int, msg: Any) -> str:
            c = Committable(uuid.uuid4().hex, committable_key(key, snapshot_id), [msg], None)
            return encode_committable(c)

    return BucketCompactorFn()


def _make_committer(
    table_path: str, commit_user: str, run_token: str, channel_dir: Optional[str], poll_ms: int
) -> Any:
    """The committer (parallelism 1): the sink's committer function with a
    :class:`CompactionCommitter` (stale compactions are dropped, not retried)."""

    def new_committer() -> CompactionCommitter:
        return CompactionCommitter(TableStore(table_path), commit_user, run_token)

    return make_committer_function(new_committer, channel_dir, poll_ms)


# ---- topology ---------------------------------------------------------------------------------------------
def _ticker(env: Any, interval_s: float, max_rounds: Optional[int]) -> tuple[Any, int]:
    """A datagen stream of ticks (parallelism 1) and how many ticks make one discovery round."""
    from pyflink.table import StreamTableEnvironment

    rate = max(1, int(round(1.0 / interval_s))) if interval_s < 1 else 1
    ticks_per_round = max(1, int(round(interval_s * rate)))
    t_env = StreamTableEnvironment.create(env)
    name = f"lakelog_compact_ticker_{uuid.uuid4().hex[:12]}"
    bounded = f", 'number-of-rows'='{max_rounds * ticks_per_round}'" if max_rounds else ""
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE {name} (tick INT) WITH ('connector'='datagen', "
        f"'rows-per-second'='{rate}', 'fields.tick.kind'='random', 'fields.tick.min'='0', "
        f"'fields.tick.max'='0', 'scan.parallelism'='1'{bounded})"
    )
    return t_env.to_data_stream(t_env.from_path(name)), ticks_per_round


def _interval_seconds(store: TableStore, discovery_interval: Union[str, float, None]) -> float:
    from lakelog.connector.format.options import Duration

    if discovery_interval is None:
        return float(store.options.continuous_discovery_interval.seconds)
    if isinstance(discovery_interval, (int, float)):
        return float(discovery_interval)
    return float(Duration.parse(str(discovery_interval)).seconds)


def _default_id(table_path: str) -> str:
    return hashlib.sha1(os.path.abspath(table_path).encode("utf-8")).hexdigest()[:16]


@dataclass
class CompactionPlan:
    """What :func:`build_compaction` added to an environment."""

    table_path: str
    streaming: bool
    full: bool
    commit_user: str
    channel_dir: Optional[str]
    keys: list[str] = field(default_factory=list)  # batch: the buckets planned by the client
    run_token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def progress_file(self) -> Optional[str]:
        return (
            progress_path(self.channel_dir, self.run_token) if self.streaming and self.channel_dir else None
        )

    @property
    def empty(self) -> bool:
        """A batch plan with nothing to compact (no job needs to run)."""
        return not self.streaming and not self.keys


def build_compaction(
    env: Any,
    table_path: str,
    *,
    streaming: bool = False,
    full: bool = False,
    parallelism: Optional[int] = None,
    commit_user: Optional[str] = None,
    channel_dir: Optional[str] = None,
    discovery_interval: Union[str, float, None] = None,
    max_rounds: Optional[int] = None,
    poll_interval_ms: int = DEFAULT_POLL_MS,
) -> CompactionPlan:
    """Add the compaction topology for the table at ``table_path`` to ``env``.

    Batch (``streaming=False``): plans now, on the latest snapshot; when nothing needs compaction
    nothing is added (``plan.empty``). Run it in BATCH (or STREAMING) runtime mode. Streaming:
    needs checkpointing; ``max_rounds`` bounds the job (it ends after that many discovery rounds),
    otherwise it runs until cancelled or stopped (``CompactionJob.drain``).

    Defaults: ``commit_user`` a new one per batch run; for streaming a stable one per table
    (``lakelog-compact-<hash of the path>``), so that a restarted job (same ``channel_dir``) commits
    what the previous run's channel released. ``channel_dir``: ``<tmp>/lakelog-compact-<hash>``.
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.common.serialization import Encoder
    from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    store = TableStore(table_path)
    name = os.path.basename(os.path.normpath(table_path))
    ident = _default_id(table_path)
    if streaming:
        user = commit_user or f"lakelog-compact-{ident}"
        channel: Optional[str] = channel_dir or os.path.join(
            tempfile.gettempdir(), f"lakelog-compact-{ident}"
        )
        assert channel is not None
        os.makedirs(channel, exist_ok=True)
        interval_s = _interval_seconds(store, discovery_interval)
        if interval_s <= 0:
            raise OptionError(f"continuous.discovery-interval must be positive, not {discovery_interval!r}")
        if max_rounds is not None and max_rounds < 1:
            raise OptionError(f"max_rounds must be at least 1, not {max_rounds}")
        plan = CompactionPlan(table_path, True, full, user, channel)
        ticks, per_round = _ticker(env, interval_s, max_rounds)
        tasks = (
            ticks.key_by(lambda _: 0, key_type=Types.INT())
            .process(
                _make_planner(table_path, full, per_round, plan.progress_file), output_type=Types.STRING()
            )
            .name(f"lakelog-compact-plan-{name}")
            .set_parallelism(1)
            .set_max_parallelism(1)
        )
    else:
        user = commit_user or f"lakelog-compact-{uuid.uuid4()}"
        keys = plan_compaction(store, full=full)
        plan = CompactionPlan(table_path, False, full, user, None, keys)
        if not keys:
            return plan
        src = env.from_source(
            NumberSequenceSource(0, len(keys) - 1),
            WatermarkStrategy.no_watermarks(),
            f"lakelog-compact-tasks-{name}",
            type_info=Types.LONG(),
        ).set_parallelism(1)
        tasks = src.map(lambda i: keys[int(i)], output_type=Types.STRING()).set_parallelism(1)
    committables = (
        tasks.key_by(lambda k: k, key_type=Types.STRING())
        .process(_make_compactor(table_path, full, streaming), output_type=Types.STRING())
        .name(f"lakelog-compact-{name}")
    )
    if parallelism:
        committables = committables.set_parallelism(parallelism)
    if plan.channel_dir is not None:
        file_sink = (
            FileSink.for_row_format(
                "file://" + os.path.abspath(plan.channel_dir), Encoder.simple_string_encoder()
            )
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build()
        )
        committables.sink_to(file_sink).name(f"lakelog-compact-channel-{name}").set_parallelism(1)
    committer = _make_committer(table_path, user, plan.run_token, plan.channel_dir, poll_interval_ms)
    out = (
        committables.key_by(lambda s: 0, key_type=Types.INT())
        .process(committer, output_type=Types.STRING())
        .name(f"lakelog-compact-commit-{name}")
        .set_parallelism(1)
        .set_max_parallelism(1)
    )
    _discard(out)
    return plan


def _discard(ds: Any) -> None:
    """End ``ds`` in a Java DiscardingSink (Python has no sink of its own)."""
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    j_sink = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name("lakelog-compact-end").set_parallelism(1)


# ---- running ----------------------------------------------------------------------------------------------
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
        from pyflink.java_gateway import get_gateway

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


def start_compaction(env: Any, table_path: str, **kwargs: Any) -> Optional[CompactionJob]:
    """:func:`build_compaction` + ``execute_async``; None when a batch plan had nothing to do."""
    plan = build_compaction(env, table_path, **kwargs)
    if plan.empty:
        return None
    first = (TableStore(table_path).snapshot_manager.latest_id() or 0) + 1
    client = env.execute_async(f"lakelog-compact-{os.path.basename(os.path.normpath(table_path))}")
    return CompactionJob(client, plan, first)


def run_compaction(
    table_path: str,
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
    from lakelog.operators.flink_env import flink_environment

    env = flink_environment(
        mode="streaming" if streaming else "batch",
        parallelism=parallelism,
        checkpoint_interval_ms=checkpoint_interval_ms,
        config=config,
    )
    first = (TableStore(table_path).snapshot_manager.latest_id() or 0) + 1
    if not streaming:
        plan = build_compaction(
            env, table_path, streaming=False, full=full, parallelism=parallelism, **kwargs
        )
        if plan.empty:
            return CompactionSummary(plan.commit_user, [], 0)
        env.execute(f"lakelog-compact-{os.path.basename(os.path.normpath(table_path))}")
        return _summary(plan, first)
    job = start_compaction(env, table_path, streaming=True, full=full, parallelism=parallelism, **kwargs)
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
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The job's options (shared with ``lakelog compact --job/--streaming``)."""
    p.add_argument("--streaming", action="store_true", help="keep compacting as new snapshots arrive")
    p.add_argument("--parallelism", type=int, default=None, help="compactor parallelism")
    p.add_argument("--checkpoint-interval-ms", type=int, default=None, help="streaming (default 2000)")
    p.add_argument(
        "--discovery-interval", default=None, help="streaming: e.g. '2 s' (default: the table's option)"
    )
    p.add_argument("--max-rounds", type=int, default=None, help="streaming: end after this many rounds")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="streaming: stop (drain) once the table had no new snapshot for this many seconds",
    )
    p.add_argument("--channel-dir", default=None, help="streaming: the commit channel folder")
    p.add_argument("--commit-user", default=None, help="the commit user of the COMPACT snapshots")


def run_from_args(table_path: str, args: argparse.Namespace, *, full: bool) -> int:
    summary = run_compaction(
        table_path,
        streaming=bool(args.streaming),
        full=full,
        parallelism=args.parallelism,
        checkpoint_interval_ms=args.checkpoint_interval_ms,
        idle_timeout_s=args.idle_timeout,
        commit_user=args.commit_user,
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
    from lakelog.connector.format.fileio import local_path
    from lakelog.connector.table.catalog import Catalog

    p = argparse.ArgumentParser(
        prog="python -m lakelog.jobs.compact", description="Compact a lakelog table with a Flink job"
    )
    p.add_argument("--warehouse", default=os.environ.get("LAKELOG_WAREHOUSE"), required=False)
    p.add_argument("--table", required=True, help="db.table")
    p.add_argument("--full", action="store_true", help="full compaction (default: universal picks)")
    add_arguments(p)
    args = p.parse_args(list(argv) if argv is not None else None)
    if not args.warehouse or not os.path.isdir(local_path(args.warehouse)):
        print("compact: give --warehouse (an existing warehouse)", file=sys.stderr)
        return 2
    try:
        table = Catalog(args.warehouse).get_table(args.table)
        return run_from_args(table.path, args, full=bool(args.full))
    except LakelogError as e:
        print(f"compact: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
