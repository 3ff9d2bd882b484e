"""The tail of every lakelog graph that commits: the checkpoint-gated channel, the committer, the end.

The sink's writers and the compaction job's compactors both emit committables (JSON lines of
:mod:`lakelog.operators.codec`). :func:`commit_through_channel` adds what follows them, written
once for both. In STREAMING mode the channel is one of two kinds (:func:`channel_folder` picks):

* the **gate** (the default; needs lakelog's jar): committables pass the Java ``CommitGate``, which
  holds each in operator state until the checkpoint that covers it completes, so everything the
  committer receives is *released*; the TaskManagers share nothing but Flink's checkpoints::

    committables --CommitGate (p=1)--key_by(0)--> LakelogCommitter (p=1) --> discard

* a **folder** (``channel_dir=``, or ``lakelog.commit-channel.dir`` configured): a part file
  becomes visible only when the checkpoint that covers it completes, so a committable read from a
  finished file is released; the folder must be shared by every TaskManager::

    committables --FileSink (on-checkpoint rolling, p=1)..........> channel_dir
    committables --key_by(0)--> LakelogCommitter (p=1) --> discard

The committer commits released committables (and, at end of input, everything it holds). The
protocol itself (idempotence, identifiers) is :class:`lakelog.operators.committer.SinkCommitter`'s;
the design, including what happens on a restart, is in ``operators/README.md``.

This module imports pyflink.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from pyflink.common import Types
from pyflink.common.serialization import Encoder
from pyflink.datastream import DataStream, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.connectors import Sink
from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.lock import LockProvider
from lakelog.operators import jvm
from lakelog.operators.codec import decode_committable
from lakelog.operators.committer import (
    END_OF_INPUT,
    WAKE,
    ChannelReader,
    Committer,
    OverwriteRequest,
    SinkCommitter,
    commit_released,
)
from lakelog.operators.flink_env import CHANNEL_DIR_KEY, channel_root, env_channel_setting
from lakelog.operators.table_ref import adopt_io, adopt_lock, store_with_options

__all__ = [
    "CommitterConfig",
    "LakelogCommitter",
    "channel_folder",
    "commit_through_channel",
    "constant_key",
    "discard",
]


def channel_folder(env: Any, explicit: Optional[str], name: str) -> Optional[str]:
    """The folder of a streaming job's commit channel, or None for the gate in Flink state.

    ``explicit`` (a job's ``channel_dir``) wins; else ``<lakelog.commit-channel.dir>/<name>`` when
    the job's configuration sets that option; else the gate, which needs lakelog's jar (a JDK, or a
    jar built before). Without one the folder is ``<temp dir>/<name>``, which serves one machine
    only. The folder is created."""
    configured = env_channel_setting(env)
    if explicit:
        folder = explicit
    elif configured is not None:
        folder = os.path.join(channel_root({CHANNEL_DIR_KEY: configured}), name)
    elif jvm.available():
        return None
    else:
        folder = os.path.join(tempfile.gettempdir(), name)
    os.makedirs(folder, exist_ok=True)
    return folder


@dataclass(frozen=True)
class CommitterConfig:
    """What the committer of one table needs: ``committer_class(store, commit_user, run_token)``
    makes the object that commits (:class:`SinkCommitter` by default); ``channel_dir`` is the
    folder channel's, None with the gate (``gated``) and in BATCH mode (no checkpoints, no channel:
    everything commits at end of input); ``poll_ms`` is how often it looks for released
    committables while it holds some."""

    table_path: str
    commit_user: str
    run_token: str
    channel_dir: Optional[str]
    poll_ms: int
    committer_class: type = SinkCommitter
    options: tuple[tuple[str, str], ...] = ()  # dynamic table options over the stored ones
    overwrite: Optional[OverwriteRequest] = None  # a sink's INSERT OVERWRITE (batch)
    lock: Optional[LockProvider] = None  # the catalog's commit lock of the table (None: the file IO's)
    io: Optional[FileIO] = None  # the table's object-store file IO (None: local)
    gated: bool = False  # committables come through the CommitGate: all received ones are released

    def new_committer(self) -> Committer:
        adopt_lock(self.table_path, self.lock)
        adopt_io(self.table_path, self.io)
        extra = {"overwrite": self.overwrite} if self.overwrite is not None else {}
        committer: Committer = self.committer_class(
            store_with_options(self.table_path, dict(self.options)), self.commit_user, self.run_token, **extra
        )
        return committer


def _committable_id(line: str) -> str:
    return str(json.loads(line)["id"])


class LakelogCommitter(KeyedProcessFunction):  # type: ignore[misc]
    """Parallelism 1, keyed by a constant. Input: committable lines, and ``WAKE`` lines that only
    start it (after a restart nothing else may: see "Restarts" in ``operators/README.md``).

    Keeps received, not yet committed committables in keyed ListState and the next commit
    identifier in keyed ValueState. With a folder channel: commits what the channel released when
    it opens and every ``poll_ms`` while it holds something. Behind the gate: commits what it holds
    (all released) every ``poll_ms`` while it holds something. At end of input (an event-time timer
    at ``END_OF_INPUT``) commits what was released, then everything it still holds, marked final."""

    def __init__(self, config: CommitterConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.committer = self.config.new_committer()
        channel = self.config.channel_dir
        self.reader = ChannelReader(channel) if channel else None
        # a ListState of committable lines (PyFlink's MapState key iteration failed after restore)
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.STRING()))
        self.next_id = runtime_context.get_state(ValueStateDescriptor("next_id", Types.LONG()))
        self.end_armed = False  # end-of-input timer registered in this process
        self.polling = False  # a poll timer is pending in this process
        if self.reader is not None:
            commit_released(self.committer, self.reader, 0)

    def _commit_released(self, next_identifier: int) -> Optional[int]:
        if self.reader is not None:
            return commit_released(self.committer, self.reader, next_identifier)
        if not self.config.gated:
            return None
        # behind the gate every received line is released; a restore may deliver one twice
        done = self.committer.done
        held: dict[str, str] = {}
        for line in self.pending.get() or []:
            ident = _committable_id(line)
            if ident not in done:
                held.setdefault(ident, line)
        if not held:
            return None
        batch = [decode_committable(line) for line in held.values()]
        return self.committer.commit(batch, next_identifier, final=False)

    def process_element(self, value: str, ctx: Any) -> Iterator[Any]:
        if value != WAKE:
            self.pending.add(value)
        ts = ctx.timer_service()
        if not self.end_armed:
            ts.register_event_time_timer(END_OF_INPUT)
            self.end_armed = True
        if (self.reader is not None or self.config.gated) and not self.polling:
            ts.register_processing_time_timer(ts.current_processing_time() + self.config.poll_ms)
            self.polling = True
        return iter(())

    def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:
        if timestamp == END_OF_INPUT:
            if self.reader is not None:
                self._after_commit(self._commit_released(self.next_id.value() or 1))
            batch = [decode_committable(x) for x in list(self.pending.get() or [])]
            self._after_commit(self.committer.commit(batch, self.next_id.value() or 1, final=True))
            return iter(())
        self.polling = False
        self._after_commit(self._commit_released(self.next_id.value() or 1))
        if list(self.pending.get() or []):
            ts = ctx.timer_service()
            ts.register_processing_time_timer(ts.current_processing_time() + self.config.poll_ms)
            self.polling = True
        return iter(())

    def _after_commit(self, ident: Optional[int]) -> None:
        if ident is not None:
            self.next_id.update(ident + 1)
        self.committer.refresh()  # writers may have committed some after a restart
        done = self.committer.done
        lines = list(self.pending.get() or [])
        keep = [x for x in lines if _committable_id(x) not in done]
        if len(keep) != len(lines):
            self.pending.update(keep)


def constant_key(value: Any) -> int:
    """Key selector of the parallelism-1 stages: every element under one key."""
    return 0


def discard(ds: DataStream, name: str) -> None:
    """End ``ds`` in a Java DiscardingSink (Python has no sink of its own)."""
    j_sink = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name(name).set_parallelism(1)


def _wake(_: Any) -> str:
    return WAKE


def _wake_lines(like: DataStream, name: str) -> DataStream:
    """WAKE lines, one per subtask, at the parallelism of ``like`` (what a union with it must have:
    the key_by after the union forwards each input at that parallelism)."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    n = int(like._j_data_stream.getParallelism())
    env = like.get_execution_environment()
    source = env.from_source(NumberSequenceSource(1, n), WatermarkStrategy.no_watermarks(), name)
    return source.set_parallelism(n).map(_wake, output_type=Types.STRING()).name(name).set_parallelism(n)


def _gate(committables: DataStream, name: str) -> DataStream:
    """``committables`` through lakelog's Java ``CommitGate`` (parallelism 1, in a task of its own,
    so that it opens, and after a restore sends what it restored, whatever its input does)."""
    env = committables.get_execution_environment()
    jvm.add_to(env)
    j = get_gateway().jvm
    j_gated = committables._j_data_stream.transform(
        name, Types.STRING().get_java_type_info(), j.lakelog.flink.CommitGate(WAKE)
    )
    j_gated.setParallelism(1)
    j_gated.setMaxParallelism(1)
    j_gated.disableChaining()
    return DataStream(j_gated)


def commit_through_channel(
    committables: DataStream, config: CommitterConfig, *, label: str, name: str
) -> None:
    """Add the channel (the folder when ``config.channel_dir`` is set, the gate when
    ``config.gated``), the committer and the discarding end after ``committables``. Operators are
    named ``<label>-channel-<name>`` (or ``<label>-gate-<name>``), ``<label>-committer-<name>``
    and ``<label>-end``."""
    if config.overwrite is not None:
        # the committer must commit an overwrite even when no committable comes (a static one
        # empties its partitions): a WAKE line starts it
        committables = committables.union(_wake_lines(committables, f"{label}-wake-{name}"))
    if config.channel_dir is not None:
        file_sink = (
            FileSink.for_row_format(
                "file://" + os.path.abspath(config.channel_dir), Encoder.simple_string_encoder()
            )
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build()
        )
        committables.sink_to(file_sink).name(f"{label}-channel-{name}").set_parallelism(1)
    if config.gated:
        committables = _gate(committables, f"{label}-gate-{name}")
    out = (
        committables.key_by(constant_key, key_type=Types.INT())
        .process(LakelogCommitter(config), output_type=Types.STRING())
        .name(f"{label}-committer-{name}")
        .set_parallelism(1)
        .set_max_parallelism(1)
    )
    discard(out, f"{label}-end")
