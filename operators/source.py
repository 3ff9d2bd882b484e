"""Reading lakelog tables from PyFlink (DataStream and Table API).

Design (PyFlink cannot implement a FLIP-27 ``Source``): a bundled *Java* source only drives the
read, and Python process functions do the planning and reading.

* Batch (bounded) scan: the client plans once to learn the snapshot and the number of splits (one
  per (partition, bucket), after partition pruning and min/max file skipping). A Java
  ``NumberSequenceSource(0, n-1)`` hands split indexes to a parallel ``FlatMapFunction``; in
  ``open()`` each subtask re-plans the *same* snapshot with the same filter (deterministic, so index
  ``i`` names the same split everywhere) and then reads split ``i`` with ``SplitRead`` (projection
  and filter pushed down), emitting ``Row``\\s. ``incremental-between`` reads one changelog "split".
* Streaming (unbounded) read: an unbounded Java ``datagen`` ticker (one tick per second at most)
  keyed on a constant feeds a parallelism-1 ``KeyedProcessFunction``. Its keyed ``ValueState``
  holds the next snapshot to read, so it is checkpointed and a job restored from a checkpoint or
  savepoint resumes exactly there. On the first tick it reads the start snapshot in full (for
  ``latest-full``, ``compacted-full``, ``from-snapshot-full``), then, every
  ``continuous.discovery-interval``, emits the changes of each new snapshot in order
  (``Table.changes``: the table's changelog files when it has a changelog producer, else the exact
  per-key difference), with Flink RowKinds ``+I/-U/+U/-D``. One reader means the order per key is
  the commit order.
* ``consumer-id``: after a snapshot's changes are emitted the consumer file under ``consumer/`` is
  advanced (``store.consumer_manager``), so snapshot expiration keeps what the consumer still needs;
  a new job (without Flink state) with the same ``consumer-id`` starts at the recorded snapshot.
  Progress is saved when the rows are handed to Flink, not when a checkpoint completes (Python has
  no checkpoint hook): after a crash, the Flink state (if restored) wins; without it the consumer
  file may be ahead of what downstream made durable (at-most-once for that window).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.scan import plan_splits
from lakelog.connector.table.scan_start import ScanStart, resolve_start, scan_options
from lakelog.operators.scan_ops import KIND_CODES, check_columns, table_rows

if TYPE_CHECKING:  # pragma: no cover
    from pyflink.datastream import DataStream, StreamExecutionEnvironment
    from pyflink.table import Table as FlinkTable

__all__ = ["read_lakelog", "read_lakelog_table", "flink_type_of", "row_type_of", "plan_batch"]


# ---- types -------------------------------------------------------------------------------------------
def flink_type_of(t: pa.DataType) -> Any:
    """The PyFlink ``TypeInformation`` that carries values of Arrow type ``t``."""
    from pyflink.common import Types

    if pa.types.is_boolean(t):
        return Types.BOOLEAN()
    if pa.types.is_int8(t):
        return Types.BYTE()
    if pa.types.is_int16(t):
        return Types.SHORT()
    if pa.types.is_int32(t):
        return Types.INT()
    if pa.types.is_int64(t):
        return Types.LONG()
    if pa.types.is_float32(t):
        return Types.FLOAT()
    if pa.types.is_float64(t):
        return Types.DOUBLE()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return Types.STRING()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())
    if pa.types.is_decimal(t):
        return Types.BIG_DEC()
    if pa.types.is_date(t):
        return Types.SQL_DATE()
    if pa.types.is_time(t):
        return Types.SQL_TIME()
    if pa.types.is_timestamp(t):
        return Types.SQL_TIMESTAMP()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return Types.OBJECT_ARRAY(flink_type_of(t.value_type))
    if pa.types.is_map(t):
        return Types.MAP(flink_type_of(t.key_type), flink_type_of(t.item_type))
    if pa.types.is_struct(t):
        return Types.ROW_NAMED(
            [t.field(i).name for i in range(t.num_fields)],
            [flink_type_of(t.field(i).type) for i in range(t.num_fields)],
        )
    raise OptionError(f"arrow type {t} has no Flink mapping")


def row_type_of(schema: pa.Schema) -> Any:
    from pyflink.common import Types

    return Types.ROW_NAMED(list(schema.names), [flink_type_of(f.type) for f in schema])


def _flink_rows(t: pa.Table, kinds: Optional[Sequence[str]] = None, audit: bool = False) -> Iterator[Any]:
    from pyflink.common import Row, RowKind

    by_code = {0: RowKind.INSERT, 1: RowKind.UPDATE_BEFORE, 2: RowKind.UPDATE_AFTER, 3: RowKind.DELETE}
    if audit:  # the audit log: insert-only rows with the kind as a leading column
        kinds = kinds if kinds is not None else ["+I"] * t.num_rows
        for k, values in zip(kinds, table_rows(t)):
            yield Row(k, *values)
        return
    if kinds is None:
        for values in table_rows(t):
            yield Row(*values)
        return
    for k, values in zip(kinds, table_rows(t)):
        r = Row(*values)
        r.set_row_kind(by_code[KIND_CODES[k]])
        yield r


# ---- planning ---------------------------------------------------------------------------------------
class _Plan:
    """What a read needs, picklable (paths, options and strings only)."""

    def __init__(
        self,
        table_path: str,
        columns: Optional[Sequence[str]],
        filter: Union[str, pc.Expression, None],
        options: Mapping[str, str],
        audit: bool = False,
    ) -> None:
        self.table_path = table_path
        self.audit = audit
        self.options = {str(k): str(v) for k, v in options.items()}
        store = TableStore(table_path)
        self.schema: pa.Schema = store.schema.arrow_schema()
        self.columns = check_columns(self.schema, columns)
        self.filter = filter
        parse_filter(filter, self.schema)  # fail early on a bad filter
        self.opts = scan_options(store, self.options)
        self.output_schema = pa.schema([self.schema.field(c) for c in self.columns])
        if audit:
            self.output_schema = self.output_schema.insert(0, pa.field("rowkind", pa.string(), False))

    def rows(self, t: pa.Table, kinds: Optional[Sequence[str]] = None) -> Iterator[Any]:
        return _flink_rows(t, kinds, self.audit)

    def change_rows(self, t: pa.Table) -> Iterator[Any]:
        return _flink_rows(t.drop_columns(["rowkind"]), t.column("rowkind").to_pylist(), self.audit)

    def store(self) -> TableStore:
        return TableStore(self.table_path)

    def expr(self) -> Optional[pc.Expression]:
        return parse_filter(self.filter, self.schema)

    def splits(self, store: TableStore, snapshot_id: Optional[int]) -> list[Split]:
        if snapshot_id is None:
            return []
        return plan_splits(store, store.snapshot_manager.snapshot(snapshot_id), filter=self.expr())

    def reader(self, store: TableStore) -> SplitRead:
        return SplitRead(store, columns=self.columns, filter=self.expr())

    def changes(self, store: TableStore, from_id: int, to_id: int) -> pa.Table:
        from lakelog.connector.errors import SnapshotNotFoundError
        from lakelog.connector.table.changes import delta_rows, diff_snapshots

        try:
            t = diff_snapshots(store, from_id, to_id)
        except SnapshotNotFoundError:
            # the snapshot before ``to_id`` expired (a consumer only protects ``to_id`` on): read
            # what the snapshots wrote, with the row kinds they were written with (Paimon's delta read)
            t = delta_rows(store, from_id, to_id)
        expr = self.expr()
        if expr is not None and t.num_rows:
            t = t.filter(expr)
        return t.select(["rowkind", *self.columns])


def plan_batch(
    table_path: str,
    *,
    columns: Optional[Sequence[str]] = None,
    filter: Union[str, pc.Expression, None] = None,
    options: Optional[Mapping[str, str]] = None,
) -> tuple[ScanStart, list[Split]]:
    """The start and splits a bounded read of ``table_path`` would read (for inspection and tests)."""
    plan = _Plan(table_path, columns, filter, options or {})
    store = plan.store()
    start = resolve_start(store, plan.opts, streaming=False)
    return start, plan.splits(store, start.full_snapshot)


def follow_settings(plan: _Plan) -> tuple[float, Optional[str], bool]:
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
    plan: _Plan, store: TableStore, consumer_id: Optional[str], ignore_progress: bool
) -> ScanStart:
    """Where a fresh streaming read starts: after what consumer ``consumer_id`` recorded (unless
    ``ignore_progress``), else by the scan mode."""
    recorded = None
    if consumer_id and not ignore_progress:
        recorded = store.consumer_manager.get(consumer_id)
    return resolve_start(store, plan.opts, streaming=True, consumer_next=recorded)


# ---- operator functions -------------------------------------------------------------------------------
def _split_reader_class() -> Any:
    from pyflink.datastream.functions import FlatMapFunction, RuntimeContext

    class SplitReader(FlatMapFunction):  # type: ignore[misc]
        """Reads split ``i`` of the planned snapshot (or the incremental range, as item 0)."""

        def __init__(self, plan: _Plan, start: ScanStart) -> None:
            self.plan = plan
            self.start = start
            self.splits: list[Split] = []
            self.read: Optional[SplitRead] = None
            self.store: Optional[TableStore] = None

        def open(self, runtime_context: RuntimeContext) -> None:
            self.store = self.plan.store()
            self.splits = self.plan.splits(self.store, self.start.full_snapshot)
            self.read = self.plan.reader(self.store)

        def flat_map(self, value: int) -> Iterable[Any]:
            assert self.store is not None and self.read is not None
            if self.start.incremental is not None:
                if value == 0:
                    a, b = self.start.incremental
                    t = self.plan.changes(self.store, a, b)
                    yield from self.plan.change_rows(t)
                return
            if value >= len(self.splits):
                return
            for t in self.read.read_split(self.splits[value]):
                yield from self.plan.rows(t)

    return SplitReader


def _follower_class() -> Any:
    from pyflink.common import Types
    from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    class SnapshotFollower(KeyedProcessFunction):  # type: ignore[misc]
        """Parallelism 1: reads the start snapshot, then the changes of every new snapshot."""

        def __init__(
            self, plan: _Plan, consumer_id: Optional[str], interval_s: float, ignore_progress: bool
        ) -> None:
            self.plan = plan
            self.consumer_id = consumer_id
            self.interval_s = interval_s
            self.ignore_progress = ignore_progress
            self.last_poll = 0.0

        def open(self, runtime_context: RuntimeContext) -> None:
            self.state = runtime_context.get_state(
                ValueStateDescriptor("lakelog-next-snapshot", Types.LONG())
            )
            self.store = self.plan.store()

        def _save(self, next_id: int) -> None:
            self.state.update(next_id)
            if self.consumer_id:
                self.store.consumer_manager.reset(self.consumer_id, next_id)

        def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
            now = time.monotonic()
            nxt = self.state.value()
            if nxt is not None and now - self.last_poll < self.interval_s:
                return
            self.last_poll = now
            store = self.store
            if nxt is None:  # first tick of a fresh job: resolve where to start
                start = follow_start(self.plan, store, self.consumer_id, self.ignore_progress)
                if start.full_snapshot is not None:
                    read = self.plan.reader(store)
                    for split in self.plan.splits(store, start.full_snapshot):
                        for t in read.read_split(split):
                            yield from self.plan.rows(t, ["+I"] * t.num_rows)
                nxt = int(start.next_snapshot or 1)
                self._save(nxt)
            latest = store.snapshot_manager.latest_id()
            while latest is not None and nxt <= latest:
                t = self.plan.changes(store, nxt - 1, nxt)
                if t.num_rows:
                    yield from self.plan.change_rows(t)
                nxt += 1
                self._save(nxt)

    return SnapshotFollower


# ---- public entry points ----------------------------------------------------------------------------------
def _ticker(env: StreamExecutionEnvironment, interval_s: float) -> DataStream:
    from pyflink.table import StreamTableEnvironment

    t_env = StreamTableEnvironment.create(env)
    rate = max(1, int(round(1.0 / interval_s))) if interval_s < 1 else 1
    name = f"lakelog_ticker_{id(env) & 0xFFFFFF:x}_{time.monotonic_ns() & 0xFFFFFF:x}"
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE {name} (tick INT) WITH ('connector'='datagen', "
        f"'rows-per-second'='{rate}', 'fields.tick.kind'='random', "
        "'fields.tick.min'='0', 'fields.tick.max'='0')"
    )
    return t_env.to_data_stream(t_env.from_path(name))


def read_lakelog(
    env: StreamExecutionEnvironment,
    table_path: str,
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
) -> DataStream:
    """A DataStream of the rows of the lakelog table at ``table_path``.

    ``mode='batch'``: a bounded, parallel read of one snapshot (``scan_mode`` latest-full, latest,
    compacted-full, from-snapshot (+ ``options['scan.snapshot-id']``), from-timestamp (+
    ``scan.timestamp-millis``)), or ``incremental-between`` (+ ``incremental-between``: 'a,b') as a
    changelog. ``mode='streaming'``: the start snapshot (per scan mode), then every new snapshot's
    changes, with Flink RowKinds (``audit_log=True``: insert-only rows with a leading ``rowkind``
    column instead, like Paimon's ``$audit_log``). ``options`` are dynamic table options (any table
    option, e.g.
    ``consumer-id``, ``continuous.discovery-interval``, ``scan.*``). ``filter`` is a pyarrow
    expression or a SQL-like string (``dt = '2024-06-01' AND amount > 10``).
    """
    from pyflink.common import Types
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    if mode not in ("batch", "streaming"):
        raise OptionError(f"mode must be 'batch' or 'streaming', not {mode!r}")
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
    plan = _Plan(table_path, columns, filter, opts, audit_log)
    out_type = row_type_of(plan.output_schema)
    short = table_path.rstrip("/").rsplit("/", 1)[-1]
    if mode == "batch":
        store = plan.store()
        start = resolve_start(store, plan.opts, streaming=False)
        n = 1 if start.incremental is not None else len(plan.splits(store, start.full_snapshot))
        src = env.from_source(
            NumberSequenceSource(0, max(n, 1) - 1),
            _no_watermarks(),
            f"lakelog-splits[{short}]",
            type_info=Types.LONG(),
        )
        if parallelism is not None:
            src = src.set_parallelism(max(1, min(parallelism, max(n, 1))))
        ds = src.flat_map(_split_reader_class()(plan, start), output_type=out_type).name(
            f"lakelog-read[{short}]"
        )
        if parallelism is not None:
            ds = ds.set_parallelism(max(1, min(parallelism, max(n, 1))))
        return ds
    interval_s, consumer, ignore = follow_settings(plan)
    ticks = _ticker(env, interval_s)
    follower = _follower_class()(plan, consumer, interval_s, ignore)
    return (
        ticks.key_by(lambda _: 0, key_type=Types.INT())
        .process(follower, output_type=out_type)
        .name(f"lakelog-follow[{short}]")
        .set_parallelism(1)
    )


def _no_watermarks() -> Any:
    from pyflink.common import WatermarkStrategy

    return WatermarkStrategy.no_watermarks()


def read_lakelog_table(
    t_env: Any,
    table_path: str,
    *,
    env: Optional[StreamExecutionEnvironment] = None,
    mode: Optional[str] = None,
    **kwargs: Any,
) -> FlinkTable:
    """A Flink ``Table`` over :func:`read_lakelog` (a changelog table in streaming mode).

    ``t_env`` must be a ``StreamTableEnvironment``; ``env`` defaults to the one it was created on and
    ``mode`` to the environment's runtime mode. Decimal columns keep their precision and scale.
    """
    from pyflink.datastream import StreamExecutionEnvironment as SEE
    from pyflink.table import DataTypes
    from pyflink.table.expressions import col

    if env is None:
        env = SEE(t_env._j_tenv.execEnv())
    if mode is None:
        rt = str(t_env.get_config().get("execution.runtime-mode", "streaming")).lower()
        mode = "batch" if rt == "batch" else "streaming"
    ds = read_lakelog(env, table_path, mode=mode, **kwargs)
    audit = bool(kwargs.get("audit_log"))
    changelog = (mode == "streaming" or _is_incremental(kwargs)) and not audit
    table = t_env.from_changelog_stream(ds) if changelog else t_env.from_data_stream(ds)
    schema = _Plan(table_path, kwargs.get("columns"), None, {}, audit).output_schema
    if any(pa.types.is_decimal(f.type) for f in schema):
        exprs = []
        for f in schema:
            e = col(f.name)
            if pa.types.is_decimal(f.type):
                e = e.cast(DataTypes.DECIMAL(f.type.precision, f.type.scale)).alias(f.name)
            exprs.append(e)
        table = table.select(*exprs)
    return table


def _is_incremental(kwargs: Mapping[str, Any]) -> bool:
    sm = kwargs.get("scan_mode") or (kwargs.get("options") or {}).get("scan.mode")
    return sm in ("incremental", "incremental-between")
