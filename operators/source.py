"""Reading lakelog tables from PyFlink (DataStream and Table API).

PyFlink cannot implement a FLIP-27 ``Source``, so a bundled *Java* source only drives the read and
Python functions plan and read:

* Batch (bounded): the client plans once to learn the snapshot and the number of splits (one per
  (partition, bucket), after partition pruning and min/max file skipping). A Java
  ``NumberSequenceSource(0, n-1)`` hands split indexes to a parallel :class:`SplitReader`, which
  re-plans the *same* snapshot with the same filter in ``open()`` (deterministic, so index ``i``
  names the same split everywhere) and reads split ``i`` with projection and filter pushed down.
  ``incremental-between`` reads one changelog "split".
* Streaming (unbounded): ticks (:mod:`.ticker`) keyed on a constant drive a parallelism-1
  :class:`SnapshotFollower`. Its keyed ``ValueState`` holds the next snapshot to read, so a job
  restored from a checkpoint or savepoint resumes exactly there. On its first tick it reads the
  start snapshot in full (``latest-full``, ``compacted-full``, ``from-snapshot-full``), then, every
  ``continuous.discovery-interval``, the changes of each new snapshot in order, with Flink RowKinds
  ``+I/-U/+U/-D`` (from the changelog files when the table has a changelog producer, else the
  exact per-key difference). One reader means the order per key is the commit order.
* ``consumer-id``: after a snapshot's changes are emitted the consumer file is advanced, so
  snapshot expiration keeps what the consumer still needs; a new job (without Flink state) with the
  same ``consumer-id`` starts at the recorded snapshot. Progress is saved when the rows are handed
  to Flink, not when a checkpoint completes (Python has no checkpoint hook): after a crash, the
  Flink state (if restored) wins; without it the consumer file may be ahead of what downstream made
  durable (at-most-once for that window).

This module imports pyflink; the Flink-free plan is :mod:`.source_plan`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc
from pyflink.common import Row, RowKind, Types, WatermarkStrategy
from pyflink.datastream import (
    DataStream,
    FlatMapFunction,
    KeyedProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.table import ChangelogMode, DataTypes, Schema
from pyflink.table import Table as FlinkTable

from lakelog.connector.errors import OptionError
from lakelog.connector.format.consumers import record_progress
from lakelog.connector.format.key_value import SEQUENCE_NUMBER
from lakelog.connector.format.options import CoreOptions, LogSystem, StartupMode
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import with_nullable
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.scan_start import ScanStart, resolve_start
from lakelog.connector.table.subscribe import Subscription
from lakelog.connector.table.table import Table
from lakelog.operators.channel import constant_key
from lakelog.operators.flink_types import column_data_type, row_type_of
from lakelog.operators.source_plan import KIND_CODES, ReadPlan, plan_batch, table_rows
from lakelog.operators.table_ref import TableLike, table_path
from lakelog.operators.ticker import ticks

__all__ = [
    "read_lakelog",
    "read_lakelog_table",
    "plan_batch",
    "SplitReaderConfig",
    "SplitReader",
    "FollowerConfig",
    "SnapshotFollower",
    "LogFollower",
    "follow_settings",
    "follow_start",
]

LOG_TICK_S = 0.05  # how often the log follower looks for new records

_ROW_KINDS = {0: RowKind.INSERT, 1: RowKind.UPDATE_BEFORE, 2: RowKind.UPDATE_AFTER, 3: RowKind.DELETE}


def _row(values: list[Any]) -> Any:
    return Row(*values)


def _audit(t: pa.Table) -> pa.Table:
    """A full read's rows as an audit log (every row +I)."""
    kinds = pa.array(["+I"] * t.num_rows, pa.string())
    return t.add_column(0, pa.field("rowkind", pa.string(), False), kinds)


def _emit(plan: ReadPlan, audit: pa.Table, *, streaming: bool, adds_only: bool = False) -> Iterator[Any]:
    """The Flink rows of an audit log (a leading ``rowkind`` column) in the read's shape: table rows
    with their RowKinds (streaming), as inserts (batch; ``adds_only``: only the +I/+U rows, as a
    batch incremental read returns them), or insert-only rows of the audit-log or binlog shape."""
    if plan.shape != "rows":
        for values in table_rows(plan.shaped(audit, streaming=streaming), _row):
            yield Row(*values)
        return
    if streaming and plan.upsert:  # Flink derives the -U rows from what it has emitted
        audit = audit.filter(pc.not_equal(audit.column(0), "-U"))
    kinds = audit.column(0)
    data = audit.remove_column(0)
    if adds_only:
        data = data.filter(pc.is_in(kinds, value_set=pa.array(["+I", "+U"])))
    if not streaming or adds_only:
        for values in table_rows(data, _row):
            yield Row(*values)
        return
    for k, values in zip(kinds.to_pylist(), table_rows(data, _row)):
        r = Row(*values)
        r.set_row_kind(_ROW_KINDS[KIND_CODES[k]])
        yield r


# ---- operators --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitReaderConfig:
    plan: ReadPlan
    start: ScanStart


def follow_settings(plan: ReadPlan) -> tuple[float, Optional[str], bool]:
    """(snapshot polling interval in seconds, consumer id, ignore the recorded progress) of a
    streaming read: ``continuous.discovery-interval``, ``consumer-id``,
    ``consumer.ignore-progress`` (the table's options, overridden by the read's)."""
    o = plan.opts
    return (
        float(o.continuous_discovery_interval.seconds),
        o.consumer_id,
        bool(o.get(CoreOptions.CONSUMER_IGNORE_PROGRESS)),
    )


def follow_start(
    plan: ReadPlan, store: TableStore, consumer_id: Optional[str], ignore_progress: bool
) -> ScanStart:
    """Where a fresh streaming read starts: after what consumer ``consumer_id`` recorded (unless
    ``ignore_progress``), else by the scan mode."""
    recorded = None
    if consumer_id and not ignore_progress:
        recorded = store.consumer_manager.get(consumer_id)
    return resolve_start(store, plan.opts, streaming=True, consumer_next=recorded)


class SplitReader(FlatMapFunction):  # type: ignore[misc]
    """Batch: reads split ``i`` of the planned snapshot (or, as item 0, the incremental range)."""

    def __init__(self, config: SplitReaderConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        plan = self.config.plan
        self.store = plan.store()
        self.splits: list[Split] = plan.splits(self.store, self.config.start.full_snapshot)
        self.read: SplitRead = plan.reader(self.store)

    def flat_map(self, value: int) -> Iterable[Any]:
        plan, start = self.config.plan, self.config.start
        if start.incremental is not None:
            if value == 0:
                a, b = start.incremental
                yield from _emit(plan, plan.incremental(self.store, a, b), streaming=False, adds_only=True)
            return
        if value >= len(self.splits):
            return
        for t in self.read.read_split(self.splits[value]):
            yield from _emit(plan, _audit(t), streaming=False)


@dataclass(frozen=True)
class FollowerConfig:
    plan: ReadPlan
    consumer_id: Optional[str]
    interval_s: float
    ignore_progress: bool  # consumer.ignore-progress: start as the scan mode says, not at the consumer


class SnapshotFollower(KeyedProcessFunction):  # type: ignore[misc]
    """Streaming, parallelism 1, driven by ticks: reads the start snapshot, then the changes of
    every new snapshot, at most once per ``interval_s``; keyed ValueState holds the next snapshot."""

    def __init__(self, config: FollowerConfig) -> None:
        self.config = config
        self.last_poll = 0.0

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("lakelog-next-snapshot", Types.LONG()))
        self.store = self.config.plan.store()

    def _save(self, next_id: int) -> None:
        self.state.update(next_id)
        if self.config.consumer_id:
            store = self.store
            record_progress(store.consumer_manager, store.snapshot_manager, self.config.consumer_id, next_id)

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        cfg, plan = self.config, self.config.plan
        now = time.monotonic()
        nxt = self.state.value()
        if nxt is not None and now - self.last_poll < cfg.interval_s:
            return
        self.last_poll = now
        store = self.store
        if nxt is None:  # first tick of a fresh job: resolve where to start
            start = follow_start(plan, store, cfg.consumer_id, cfg.ignore_progress)
            if start.full_snapshot is not None:
                read = plan.reader(store)
                for split in plan.follow_splits(store, start.full_snapshot):
                    for t in read.read_split(split):
                        yield from _emit(plan, _audit(t), streaming=True)
            nxt = int(start.next_snapshot or 1)
            self._save(nxt)
        latest = store.snapshot_manager.latest_id()
        while latest is not None and nxt <= latest:
            t = plan.changes(store, nxt - 1, nxt)
            if t.num_rows:
                yield from _emit(plan, t, streaming=True)
            nxt += 1
            self._save(nxt)


_LOG_SCAN_MODES = {
    StartupMode.LATEST_FULL: "latest-full",
    StartupMode.DEFAULT: "latest-full",
    StartupMode.FULL: "latest-full",
    StartupMode.LATEST: "latest",
    StartupMode.FROM_SNAPSHOT: "from-snapshot",
    StartupMode.FROM_SNAPSHOT_FULL: "from-snapshot-full",
    StartupMode.FROM_TIMESTAMP: "from-timestamp",
}


class LogFollower(KeyedProcessFunction):  # type: ignore[misc]
    """Streaming reads of a table with a Kafka log, parallelism 1, driven by ticks: the start
    snapshot's rows, then the changes from the log (see
    :class:`~lakelog.connector.table.subscribe.Subscription`, which it drives). Keyed ValueState
    holds the log position, so a restored job goes on exactly where its checkpoint was."""

    def __init__(self, config: FollowerConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("lakelog-log-position", Types.STRING()))
        self.sub: Optional[Subscription] = None

    def close(self) -> None:
        sub = getattr(self, "sub", None)
        if sub is not None:
            sub.close()

    def _subscription(self) -> Subscription:
        cfg, plan = self.config, self.config.plan
        table = Table(plan.store(), plan.table_path)
        saved = self.state.value()
        common: dict[str, Any] = {"columns": plan.columns, "filter": plan.expr(), "poll_interval": 0.0}
        if saved:
            return Subscription(table, restore=json.loads(saved), **common)
        opts = plan.opts
        mode = _LOG_SCAN_MODES.get(opts.startup_mode)
        if mode is None:
            raise OptionError(
                f"scan.mode {opts.startup_mode.value!r} cannot read {plan.table_path} from its Kafka log; "
                "use "
                f"{sorted(set(_LOG_SCAN_MODES.values()))}, or 'streaming-read-mode' = 'file'"
            )
        consumer = None if cfg.ignore_progress else cfg.consumer_id
        return Subscription(
            table,
            scan_mode=mode,
            snapshot_id=opts.scan_snapshot_id,
            timestamp=opts.scan_timestamp_millis,
            consumer_id=consumer,
            **common,
        )

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        if self.sub is None:
            self.sub = self._subscription()
        plan = self.config.plan
        while True:
            batch = self.sub.poll(0.0)
            if batch is None:
                break
            yield from _emit(plan, batch, streaming=True)
        self.state.update(json.dumps(self.sub.position()))


# ---- public entry points ------------------------------------------------------------------------
def read_lakelog(
    env: StreamExecutionEnvironment,
    table: TableLike,
    *,
    mode: str = "batch",
    columns: Optional[Sequence[str]] = None,
    filter: Union[str, pc.Expression, None] = None,
    scan_mode: Optional[str] = None,
    options: Optional[Mapping[str, str]] = None,
    consumer_id: Optional[str] = None,
    discovery_interval: Union[str, float, None] = None,
    parallelism: Optional[int] = None,
    audit_log: bool = False,
    shape: Optional[str] = None,
    read_optimized: bool = False,
) -> DataStream:
    """A DataStream of the rows of ``table`` (a lakelog ``Table`` or a table path).

    ``mode='batch'``: a bounded, parallel read of one snapshot (``scan_mode`` latest-full, latest,
    compacted-full, from-snapshot (+ ``options['scan.snapshot-id']``), from-timestamp (+
    ``scan.timestamp-millis``)), or ``incremental-between`` (+ ``incremental-between``: 'a,b') as a
    changelog. ``mode='streaming'``: the start snapshot (per scan mode), then every new snapshot's
    changes, with Flink RowKinds (``audit_log=True``: insert-only rows with a leading ``rowkind``
    column instead, like Paimon's ``$audit_log``; ``shape='binlog'``: ``rowkind`` and every column
    as an array, like ``$binlog``). A batch ``incremental-between`` read returns the +I/+U rows of
    the range (Paimon's delta rows; ``$audit_log`` keeps every kind). ``read_optimized``: only the
    top level of primary-key tables (``$ro``, batch only). ``options`` are dynamic table options
    (any table option, e.g. ``consumer-id``, ``continuous.discovery-interval``, ``scan.*``).
    ``filter`` is a pyarrow expression or a SQL-like string (``dt = '2024-06-01' AND amount > 10``).
    """
    plan = _read_plan(
        table, mode, columns=columns, filter=filter, scan_mode=scan_mode, options=options,
        consumer_id=consumer_id, discovery_interval=discovery_interval, audit_log=audit_log,
        shape=shape, read_optimized=read_optimized,
    )
    return _stream(env, plan, mode, parallelism)


def _read_plan(
    table: TableLike,
    mode: str,
    *,
    columns: Optional[Sequence[str]] = None,
    filter: Union[str, pc.Expression, None] = None,
    scan_mode: Optional[str] = None,
    options: Optional[Mapping[str, str]] = None,
    consumer_id: Optional[str] = None,
    discovery_interval: Union[str, float, None] = None,
    audit_log: bool = False,
    shape: Optional[str] = None,
    read_optimized: bool = False,
) -> ReadPlan:
    """The plan of a :func:`read_lakelog` (its keyword arguments as dynamic options), checked: a
    streaming read that could not start is refused here, before any job."""
    if mode not in ("batch", "streaming"):
        raise OptionError(f"mode must be 'batch' or 'streaming', not {mode!r}")
    path = table_path(table)
    opts = dict(options or {})
    if scan_mode is not None:
        opts["scan.mode"] = scan_mode
    if consumer_id is not None:
        opts["consumer-id"] = consumer_id
    if discovery_interval is not None:
        opts["continuous.discovery-interval"] = (
            f"{int(discovery_interval * 1000)} ms"
            if isinstance(discovery_interval, (int, float))
            else str(discovery_interval)
        )
    plan = ReadPlan(path, columns, filter, opts, audit_log, shape=shape, read_optimized=read_optimized)
    if read_optimized and mode != "batch":
        raise OptionError(f"the read-optimized read of {path} ($ro) is a batch read; use runtime mode BATCH")
    if mode == "streaming":
        _check_streaming_start(plan)
    return plan


def _stream(
    env: StreamExecutionEnvironment, plan: ReadPlan, mode: str, parallelism: Optional[int]
) -> DataStream:
    """The DataStream of ``plan``: parallel split reads (batch), or the follower of new snapshots
    or of the Kafka log (streaming)."""
    out_type = row_type_of(plan.output_schema)
    short = plan.table_path.rstrip("/").rsplit("/", 1)[-1]
    if mode == "batch":
        store = plan.store()
        start = resolve_start(store, plan.opts, streaming=False)
        n = 1 if start.incremental is not None else len(plan.splits(store, start.full_snapshot))
        src = env.from_source(
            NumberSequenceSource(0, max(n, 1) - 1),
            WatermarkStrategy.no_watermarks(),
            f"lakelog-splits[{short}]",
            type_info=Types.LONG(),
        )
        if parallelism is not None:
            src = src.set_parallelism(max(1, min(parallelism, max(n, 1))))
        ds = src.flat_map(SplitReader(SplitReaderConfig(plan, start)), output_type=out_type).name(
            f"lakelog-read[{short}]"
        )
        if parallelism is not None:
            ds = ds.set_parallelism(max(1, min(parallelism, max(n, 1))))
        return ds
    interval_s, consumer, ignore = follow_settings(plan)
    config = FollowerConfig(plan, consumer, interval_s, ignore)
    if _reads_log(plan):
        plan.check_log_read()
        # the log: ticks often (each one drains what arrived), so changes flow within milliseconds
        tick_stream, _ = ticks(env, LOG_TICK_S)
        follower: Any = LogFollower(config)
    else:
        tick_stream, _ = ticks(env, interval_s)
        follower = SnapshotFollower(config)
    return (
        tick_stream.key_by(constant_key, key_type=Types.INT())
        .process(follower, output_type=out_type)
        .name(f"lakelog-follow[{short}]")
        .set_parallelism(1)
    )


def read_lakelog_table(
    t_env: Any,
    table: TableLike,
    *,
    env: Optional[StreamExecutionEnvironment] = None,
    mode: Optional[str] = None,
    computed: Sequence[tuple[str, str]] = (),
    watermark: Optional[tuple[str, str]] = None,
    **kwargs: Any,
) -> FlinkTable:
    """A Flink ``Table`` over :func:`read_lakelog` (a changelog table in streaming mode).

    A streaming read of a primary-key table's rows that cannot emit a complete changelog of what it
    emitted (it starts after a snapshot without reading it, or reads the Kafka log, whose records
    of a table without a changelog producer are the rows as written) emits no ``-U`` rows: the
    Table declares upsert mode with the primary key, and Flink derives the ``-U`` rows from what it
    has seen (its ChangelogNormalize, as Paimon's source asks for).

    ``t_env`` must be a ``StreamTableEnvironment``; ``env`` defaults to the one it was created on and
    ``mode`` to the environment's runtime mode. Columns keep their exact types (``TIMESTAMP(3)``,
    ``DECIMAL(10, 2)``, ``VARCHAR(10)``, NOT NULL); ``computed`` adds computed columns (name, SQL
    expression) after them and ``watermark`` (rowtime column, SQL expression) declares an event-time
    attribute, as a table's stored Flink schema asks (see :mod:`lakelog.operators.sql.table_ddl`).
    """
    if env is None:
        env = StreamExecutionEnvironment(t_env._j_tenv.execEnv())
    if mode is None:
        rt = str(t_env.get_config().get("execution.runtime-mode", "streaming")).lower()
        mode = "batch" if rt == "batch" else "streaming"
    path = table_path(table)
    parallelism = kwargs.pop("parallelism", None)
    plan = _read_plan(path, mode, **kwargs)
    plan.upsert = upsert = mode == "streaming" and _upsert_read(plan)
    ds = _stream(env, plan, mode, parallelism)
    shape = plan.shape
    schema = _declared_schema(
        path, kwargs.get("columns"), shape, computed, watermark, upsert, sequence_number=plan.sequence_number
    )
    if mode == "streaming" and shape == "rows":
        if upsert:
            return t_env.from_changelog_stream(ds, schema, ChangelogMode.upsert())
        return t_env.from_changelog_stream(ds, schema)
    return t_env.from_data_stream(ds, schema)


def _declared_schema(
    path: str,
    columns: Optional[Sequence[str]],
    shape: str,
    computed: Sequence[tuple[str, str]],
    watermark: Optional[tuple[str, str]],
    upsert: bool = False,
    *,
    sequence_number: bool = False,
) -> Schema:
    """The exact Flink schema of a read's rows (Paimon's types; java.sql bridges for the values the
    DataStream carries), its computed columns and watermark; with ``upsert`` its primary key;
    ``sequence_number``: ``_SEQUENCE_NUMBER`` after ``rowkind``."""
    table_schema = TableStore(path).schema
    fields = {f.name: f.type for f in table_schema.fields}
    names = list(columns) if columns is not None else list(fields)
    b = Schema.new_builder()
    if shape != "rows":
        b = b.column("rowkind", DataTypes.STRING())
    if sequence_number:
        b = b.column(SEQUENCE_NUMBER, DataTypes.BIGINT().not_null())
    for n in names:
        t = fields[n]
        if shape == "binlog":
            b = b.column(n, DataTypes.ARRAY(column_data_type(with_nullable(t, True))))
        else:
            b = b.column(n, column_data_type(t))
    for name, expr in computed:
        b = b.column_by_expression(name, expr)
    if watermark is not None:
        b = b.watermark(watermark[0], watermark[1])
    if upsert:
        b = b.primary_key(*table_schema.primary_keys)
    return b.build()


def _check_streaming_start(plan: ReadPlan) -> None:
    """Resolve a streaming read's start as its first tick will, so that options it cannot start
    from (``incremental-between``, a missing ``scan.snapshot-id``, a scan mode the Kafka log cannot
    start from) are refused when the job is built, not by a failing job that restarts."""
    store = plan.store()
    if _reads_log(plan):
        plan.check_log_read()
        if _LOG_SCAN_MODES.get(plan.opts.startup_mode) is None:
            raise OptionError(
                f"scan.mode {plan.opts.startup_mode.value!r} cannot read {plan.table_path} from its Kafka "
                f"log; use {sorted(set(_LOG_SCAN_MODES.values()))}, or 'streaming-read-mode' = 'file'"
            )
        return
    _, consumer, ignore = follow_settings(plan)
    follow_start(plan, store, consumer, ignore)


def _upsert_read(plan: ReadPlan) -> bool:
    """Whether a streaming read of ``plan`` emits upserts (see :func:`read_lakelog_table`)."""
    store = plan.store()
    if plan.shape != "rows" or not store.is_primary_key_table:
        return False
    if plan.columns is not None and not set(store.schema.primary_keys) <= set(plan.columns):
        return False  # without its key a row cannot be an upsert: the stream stays as it is
    if _reads_log(plan):
        return True
    _, consumer, ignore = follow_settings(plan)
    return follow_start(plan, store, consumer, ignore).full_snapshot is None


def _reads_log(plan: ReadPlan) -> bool:
    """Streaming reads of a table with a Kafka log read the log, unless ``streaming-read-mode`` is
    ``file``."""
    opts = plan.opts
    return opts.log_system == LogSystem.KAFKA and opts.streaming_read_mode != "file"
