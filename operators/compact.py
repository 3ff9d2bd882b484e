"""The dedicated compaction job's Flink graph: planner, compactors, and the sink's commit tail.

Graph (the design: ``operators/README.md``, "The compaction job")::

    batch:      NumberSequence(0..n-1) --TaskKeyMap: i -> bucket key (planned by the client)--+
    streaming:  ticks (p=1) --key_by(0)--> CompactionPlanner (p=1) -- bucket keys -------------+
                                                                                               v
                key_by(bucket key) --> CompactorFunction (parallel) --> committables
    committables --> channel + committer (CompactionCommitter) + end (lakelog.operators.channel)

:func:`build_compaction` adds it to an environment; :mod:`lakelog.jobs.compact` runs and stops it.
This module imports pyflink; the Flink-free logic is :mod:`.compact_buckets`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import KeyedProcessFunction, MapFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import ValueStateDescriptor

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.fileio import FileIO, is_object_store
from lakelog.connector.format.options import Duration
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.partition_specs import partition_spec_list, partitions_where
from lakelog.operators.channel import CommitterConfig, channel_folder, commit_through_channel, constant_key
from lakelog.operators.codec import Committable, encode_committable
from lakelog.operators.committer import WAKE
from lakelog.operators.compact_buckets import (
    CompactionCommitter,
    changed_buckets,
    committable_key,
    compact_bucket,
    compact_files,
    inputs_live,
    load_bucket,
    plan_compaction,
    progress_path,
    write_progress,
)
from lakelog.operators.table_ref import TableLike, adopt_io, table_io, table_lock, table_path
from lakelog.operators.ticker import ticks

__all__ = [
    "build_compaction",
    "CompactionPlan",
    "PlannerConfig",
    "CompactorConfig",
    "CompactionPlanner",
    "CompactorFunction",
    "TaskKeyMap",
    "DEFAULT_POLL_MS",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_MS = 300


# ---- operators ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannerConfig:
    table_path: str
    full: bool
    ticks_per_round: int
    progress_file: Optional[str]
    partitions: Optional[tuple[dict[str, Any], ...]] = None  # cast specs: only these partitions
    where: Optional[str] = None  # a predicate on the partition fields: only the partitions it selects
    io: Optional[FileIO] = None  # the table's object-store file IO (None: local)


class CompactionPlanner(KeyedProcessFunction):  # type: ignore[misc]
    """Streaming, parallelism 1, driven by ticks. Keyed ValueState holds the first snapshot not
    examined yet. A round (every ``ticks_per_round`` ticks, the first tick included) examines the
    new snapshots' changed buckets (every bucket on a fresh job's first round, or after an expired
    snapshot) and emits the keys of those that need compaction, then a ``WAKE`` line that the
    compactors pass on to the committer (why: "Restarts" in ``operators/README.md``)."""

    def __init__(self, config: PlannerConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        adopt_io(self.config.table_path, self.config.io)
        self.store = TableStore(self.config.table_path)
        self.next_snapshot = runtime_context.get_state(ValueStateDescriptor("next", Types.LONG()))
        self.ticks = 0
        self.rounds = 0

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
        self.ticks += 1
        if (self.ticks - 1) % self.config.ticks_per_round:
            return
        store = self.store
        latest = store.snapshot_manager.latest()
        nxt = self.next_snapshot.value()
        keys: list[str] = []
        if latest is not None and (nxt is None or latest.id >= nxt):
            only = None if nxt is None else changed_buckets(store, int(nxt) - 1, latest.id)
            keys = plan_compaction(
                store,
                full=self.config.full,
                snapshot=latest,
                only=only,
                partitions=self.config.partitions,
                where=self.config.where,
            )
            self.next_snapshot.update(latest.id + 1)
        self.rounds += 1
        if self.config.progress_file:
            write_progress(self.config.progress_file, self.rounds, latest.id if latest is not None else 0)
        if keys:
            log.info("compaction round at snapshot %s: %d bucket(s) to compact", latest, len(keys))
        yield from keys
        yield WAKE


@dataclass(frozen=True)
class CompactorConfig:
    table_path: str
    full: bool
    streaming: bool
    io: Optional[FileIO] = None  # the table's object-store file IO (None: local)


class CompactorFunction(KeyedProcessFunction):  # type: ignore[misc]
    """Keyed by bucket key. Compacts the bucket as of the latest snapshot and emits one committable
    (its key names the snapshot the inputs were read from); passes ``WAKE`` on. Streaming: keyed
    ValueState remembers the inputs of the bucket's last emitted compaction; while they are all
    still live (not committed, not dropped yet), new tasks for the bucket are skipped."""

    def __init__(self, config: CompactorConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        adopt_io(self.config.table_path, self.config.io)
        self.store = TableStore(self.config.table_path)
        self.inflight = runtime_context.get_state(ValueStateDescriptor("inflight", Types.STRING()))

    def process_element(self, key: str, ctx: Any) -> Iterator[str]:
        if key == WAKE:
            yield WAKE
            return
        full = self.config.full
        if not self.config.streaming:
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

    @staticmethod
    def _committable(key: str, snapshot_id: int, msg: CommitMessage) -> str:
        return encode_committable(
            Committable(uuid.uuid4().hex, committable_key(key, snapshot_id), [msg], None)
        )


class TaskKeyMap(MapFunction):  # type: ignore[misc]
    """Batch: task index ``i`` (from a NumberSequenceSource) -> the ``i``-th planned bucket key."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys

    def map(self, value: int) -> str:
        return self.keys[int(value)]


def bucket_key_of(task: str) -> str:
    """Key selector of the compactors: a task is its bucket key."""
    return task


# ---- the graph ---------------------------------------------------------------------------------------------
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
    # streaming: where the planner records its rounds (the channel folder, else one in the temp dir;
    # advisory, for CompactionJob.stop_when_idle on the machine that runs the planner)
    progress_dir: Optional[str] = None

    @property
    def progress_file(self) -> Optional[str]:
        folder = self.progress_dir or self.channel_dir
        return progress_path(folder, self.run_token) if self.streaming and folder else None

    @property
    def empty(self) -> bool:
        """A batch plan with nothing to compact (no job needs to run)."""
        return not self.streaming and not self.keys


def _interval_seconds(store: TableStore, discovery_interval: Union[str, float, None]) -> float:
    if discovery_interval is None:
        return float(store.options.continuous_discovery_interval.seconds)
    if isinstance(discovery_interval, (int, float)):
        return float(discovery_interval)
    return float(Duration.parse(str(discovery_interval)).seconds)


def _default_id(path: str) -> str:
    where = path if is_object_store(path) else os.path.abspath(path)
    return hashlib.sha1(where.encode("utf-8")).hexdigest()[:16]


def build_compaction(
    env: StreamExecutionEnvironment,
    table: TableLike,
    *,
    streaming: bool = False,
    full: bool = False,
    parallelism: Optional[int] = None,
    commit_user: Optional[str] = None,
    channel_dir: Optional[str] = None,
    discovery_interval: Union[str, float, None] = None,
    max_rounds: Optional[int] = None,
    poll_interval_ms: int = DEFAULT_POLL_MS,
    partitions: Optional[Sequence[Mapping[str, Any]]] = None,
    where: Optional[str] = None,
) -> CompactionPlan:
    """Add the compaction graph for ``table`` (a lakelog ``Table`` or a table path) to ``env``.

    Batch (``streaming=False``): plans now, on the latest snapshot; when nothing needs compaction
    nothing is added (``plan.empty``). Run it in BATCH (or STREAMING) runtime mode. Streaming:
    needs checkpointing; ``max_rounds`` bounds the job (it ends after that many discovery rounds),
    otherwise it runs until cancelled or stopped (:meth:`lakelog.jobs.compact.CompactionJob.drain`).

    Defaults: ``commit_user`` a new one per batch run; for streaming a stable one per table
    (``lakelog-compact-<hash of the path>``), so that a restarted job (same ``channel_dir``) commits
    what the previous run's channel released. ``channel_dir``: ``<root>/lakelog-compact-<hash>``
    when ``lakelog.commit-channel.dir`` of the job's configuration sets ``<root>``, else the channel
    is kept in Flink state (a job restored from a checkpoint or savepoint commits what it released;
    a job started afresh compacts again what its predecessor had not committed). ``partitions``:
    specs (``{"dt": "2024-06-01"}``, some of the partition fields) of the partitions to compact, or
    ``where``: a predicate on the partition fields (a streaming job applies it to the partitions of
    every round); default: all of them.
    """
    path = table_path(table)
    store = TableStore(path)
    if partitions is not None and where is not None:
        raise InvalidInputError(f"compaction job of {path}: give partitions or where, not both")
    listed = partition_spec_list(store, partitions)
    specs = tuple(listed) if listed is not None else None
    if where is not None:
        partitions_where(store, [], where)  # a bad predicate fails here, not in the job
    name = os.path.basename(os.path.normpath(path))
    ident = _default_id(path)
    if streaming:
        user = commit_user or f"lakelog-compact-{ident}"
        channel = channel_folder(env, channel_dir, f"lakelog-compact-{ident}")
        interval_s = _interval_seconds(store, discovery_interval)
        if interval_s <= 0:
            raise OptionError(f"continuous.discovery-interval must be positive, not {discovery_interval!r}")
        if max_rounds is not None and max_rounds < 1:
            raise OptionError(f"max_rounds must be at least 1, not {max_rounds}")
        progress_dir = channel or os.path.join(tempfile.gettempdir(), f"lakelog-compact-{ident}")
        os.makedirs(progress_dir, exist_ok=True)
        plan = CompactionPlan(path, True, full, user, channel, progress_dir=progress_dir)
        tick_stream, per_round = ticks(env, interval_s, rounds=max_rounds)
        planner = CompactionPlanner(
            PlannerConfig(path, full, per_round, plan.progress_file, specs, where, table_io(table))
        )
        tasks = (
            tick_stream.key_by(constant_key, key_type=Types.INT())
            .process(planner, output_type=Types.STRING())
            .name(f"lakelog-compact-plan-{name}")
            .set_parallelism(1)
            .set_max_parallelism(1)
        )
    else:
        user = commit_user or f"lakelog-compact-{uuid.uuid4()}"
        keys = plan_compaction(store, full=full, partitions=specs, where=where)
        plan = CompactionPlan(path, False, full, user, None, keys)
        if not keys:
            return plan
        src = env.from_source(
            NumberSequenceSource(0, len(keys) - 1),
            WatermarkStrategy.no_watermarks(),
            f"lakelog-compact-tasks-{name}",
            type_info=Types.LONG(),
        ).set_parallelism(1)
        tasks = src.map(TaskKeyMap(tuple(keys)), output_type=Types.STRING()).set_parallelism(1)
    committables = (
        tasks.key_by(bucket_key_of, key_type=Types.STRING())
        .process(
            CompactorFunction(CompactorConfig(path, full, streaming, table_io(table))),
            output_type=Types.STRING(),
        )
        .name(f"lakelog-compact-{name}")
    )
    if parallelism:
        committables = committables.set_parallelism(parallelism)
    committer = CommitterConfig(
        path, user, plan.run_token, plan.channel_dir, poll_interval_ms, committer_class=CompactionCommitter,
        lock=table_lock(table), io=table_io(table), gated=streaming and plan.channel_dir is None,
    )
    commit_through_channel(committables, committer, label="lakelog-compact", name=name)
    return plan
