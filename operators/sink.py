"""The lakelog PyFlink sink: exactly-once writes of a changelog ``DataStream`` into a lakelog table.

Topology (see ``operators/README.md`` for the full design)::

    rows --map(assign key)--> key_by(partition, bucket) --writer (keyed state, LSM files)--> committables
    committables --FileSink (on-checkpoint rolling) ......> channel dir   (released on checkpoint completion)
    committables --key_by(0)--> committer (parallelism 1): commits what the channel released, and at
                                end of input everything it holds

``lakelog.connector`` never imports pyflink; this module imports it lazily inside the functions.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import InvalidInputError, SchemaError
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.committer import ChannelReader, SinkCommitter, committed_ids

__all__ = ["sink_to_lakelog", "sink_table_to_lakelog", "flink_type_of", "row_type_of"]

log = logging.getLogger(__name__)

END_OF_INPUT = 2**63 - 2  # a keyed event-time timer here fires at end of bounded input
KIND_FIELD = "__lakelog_kind"
DEFAULT_FLUSH_INTERVAL_MS = 10_000
DEFAULT_POLL_MS = 300


# ---- types ---------------------------------------------------------------------------------------
def flink_type_of(t: pa.DataType, name: str = "?") -> Any:
    """The PyFlink TypeInformation carrying values of Arrow type ``t`` (the table's column type)."""
    from pyflink.common import Types

    simple = [
        (pa.types.is_boolean, Types.BOOLEAN),
        (pa.types.is_int8, Types.BYTE),
        (pa.types.is_int16, Types.SHORT),
        (pa.types.is_int32, Types.INT),
        (pa.types.is_int64, Types.LONG),
        (pa.types.is_float32, Types.FLOAT),
        (pa.types.is_float64, Types.DOUBLE),
        (pa.types.is_string, Types.STRING),
        (pa.types.is_large_string, Types.STRING),
        (pa.types.is_decimal, Types.BIG_DEC),
        (pa.types.is_date32, Types.SQL_DATE),
        (pa.types.is_timestamp, Types.SQL_TIMESTAMP),
        (pa.types.is_time, Types.SQL_TIME),
    ]
    for pred, make in simple:
        if pred(t):
            return make()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return Types.PRIMITIVE_ARRAY(Types.BYTE())
    raise SchemaError(f"column {name!r}: the PyFlink sink cannot carry type {t} yet")


def row_type_of(schema: pa.Schema) -> Any:
    """``Types.ROW_NAMED`` matching a table's Arrow schema (useful for ``output_type=`` upstream)."""
    from pyflink.common import Types

    return Types.ROW_NAMED([f.name for f in schema], [flink_type_of(f.type, f.name) for f in schema])


def _assigned_row_type(schema: pa.Schema) -> Any:
    """Row(kind, *table columns): what the writer receives and buffers (the key travels beside it)."""
    from pyflink.common import Types

    return Types.ROW_NAMED(
        [KIND_FIELD] + [f.name for f in schema],
        [Types.BYTE()] + [flink_type_of(f.type, f.name) for f in schema],
    )


def _keyed_row_type(schema: pa.Schema) -> Any:
    """Row(key, Row(kind, *table columns)): the assigner's output, keyed on field 0 by Java."""
    from pyflink.common import Types

    return Types.ROW([Types.STRING(), _assigned_row_type(schema)])


# ---- step 1: assign (partition, bucket) ----------------------------------------------------------
class _KeyAssigner:
    """Maps an input Row to ``Row(key, Row(kind, *table_columns))``; key = "<partition hex>:<bucket>".

    It is the whole per-row work before the shuffle, so it stays cheap: field values are taken from
    the Row's value list (by position, or through a cached name -> position map), the key comes from
    :class:`~lakelog.operators.sink_keys.KeyEncoder` (no numpy per row), and the output Rows are made
    with their field names set, which is the fast path of PyFlink's Row coder."""

    def __init__(self, table_path: str, max_parallelism: Optional[int] = None) -> None:
        self.table_path = table_path
        self.max_parallelism = max_parallelism
        self._ready = False

    def _setup(self) -> None:
        from pyflink.common import Row, RowKind

        from lakelog.connector.store import TableStore
        from lakelog.operators.sink_keys import KeyEncoder

        store = TableStore(self.table_path)
        schema = store.schema
        self.names = [f.name for f in schema.arrow_schema()]
        self.pos = {n: i for i, n in enumerate(self.names)}
        num_buckets = int(store.options.bucket)
        bucket_keys = list(schema.bucket_keys) if num_buckets > 0 else []
        self.keys = KeyEncoder(
            [self.pos[k] for k in schema.partition_keys],
            store.partition_types,
            [self.pos[k] for k in bucket_keys],
            store.field_types(bucket_keys) if bucket_keys else [],
            num_buckets,
            self.max_parallelism,
        )
        self.inner_names = [KIND_FIELD, *self.names]
        self.outer_names = ["f0", "f1"]
        self.orders: dict[tuple[str, ...], list[int]] = {}
        self._row_class = Row
        self._new_row = Row.__new__
        self._insert = RowKind.INSERT
        self._ready = True

    def _row(self, values: list[Any], names: list[str]) -> Any:
        # Row(*values) plus set_field_names, without Row's per-attribute __setattr__ hooks
        r = self._new_row(self._row_class)
        d = r.__dict__
        d["_values"] = values
        d["_fields"] = names
        d["_from_dict"] = False
        d["_row_kind"] = self._insert
        return r

    def values_of(self, row: Any) -> list[Any]:
        d = getattr(row, "__dict__", None) if isinstance(row, self._row_class) else None
        if d is not None and "_values" in d:
            values: list[Any] = d["_values"]
            fields = d.get("_fields")
        else:
            values = list(row)
            fields = None
        if fields is not None and fields != self.names:
            order = self.orders.get(tuple(fields))
            if order is None:
                try:
                    at = {n: i for i, n in enumerate(fields)}
                    order = [at[n] for n in self.names]
                except KeyError as exc:
                    raise InvalidInputError(f"input row lacks column {exc.args[0]!r}") from None
                self.orders[tuple(fields)] = order
            return [values[i] for i in order]
        if len(values) != len(self.names):
            raise InvalidInputError(f"input row has {len(values)} fields; the table has {self.names}")
        return values

    def key_of(self, values: Sequence[Any]) -> str:
        if not self._ready:
            self._setup()
        return self.keys.key(values)

    def __call__(self, row: Any) -> Any:
        if not self._ready:
            self._setup()
        kind = row.get_row_kind().value if isinstance(row, self._row_class) else 0
        values = self.values_of(row)
        inner = self._row([kind, *values], self.inner_names)
        return self._row([self.keys.key(values), inner], self.outer_names)


# ---- step 3: the writer ----------------------------------------------------------------------------
def _make_writer(
    table_path: str, commit_user: str, write_only: Optional[bool], flush_ms: int, batch: bool, wait_s: float
) -> Any:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

    class LakelogWriter(KeyedProcessFunction):  # type: ignore[misc]
        """One instance serves many (partition, bucket) keys. Each key's unflushed rows live in keyed
        ListState (so rows received before a checkpoint and not flushed survive a restart); the id of
        the key's last emitted committable in keyed ValueState.

        Each key gets its own TableWrite, created lazily at its first flush in this process. After a
        restart that first flush first waits until the key's last committable from before the
        checkpoint is committed, so the bucket's LSM view and sequence numbers start from a snapshot
        that holds everything this key wrote before."""

        def open(self, runtime_context: RuntimeContext) -> None:
            from lakelog.connector.store import TableStore

            self.store = TableStore(table_path)
            self.arrow_schema = self.store.schema.arrow_schema()
            self.pk = bool(self.store.schema.primary_keys)
            self.buffer_limit = int(self.store.options.write_buffer_size)
            self.writes: dict[str, Any] = {}
            self.sizes: dict[str, int] = {}
            # BATCH mode: PyFlink's batch state backend keeps keyed state for the current key only,
            # and keys need not arrive sorted, so rows wait in memory per key (a failed batch job
            # reruns as a whole; nothing needs to survive a restart)
            self.pending_rows: dict[str, list[Any]] = {}
            self.armed: set[str] = set()
            self.buf = runtime_context.get_list_state(
                ListStateDescriptor("buf", _assigned_row_type(self.arrow_schema))
            )
            # no timer ValueState: PyFlink re-caches every registered state of the old key at each
            # key switch (nearly every row), so each state costs per row. After a restart the restored
            # processing timer fires and a new one is armed at the key's first row: at worst an extra
            # early flush.
            self.last_id = runtime_context.get_state(ValueStateDescriptor("last_id", Types.STRING()))
            # buffered-size estimate per row: a fixed part, plus the length of strings and binaries
            # (positions in Row(kind, *columns))
            self.row_bytes = 16 + 8 * len(self.arrow_schema)
            self.var_idx = [
                i + 1
                for i, f in enumerate(self.arrow_schema)
                if pa.types.is_string(f.type)
                or pa.types.is_large_string(f.type)
                or pa.types.is_binary(f.type)
                or pa.types.is_large_binary(f.type)
                or pa.types.is_fixed_size_binary(f.type)
            ]

        def close(self) -> None:
            for w in getattr(self, "writes", {}).values():
                w.close()

        def process_element(self, value: Any, ctx: Any) -> Optional[Iterator[str]]:
            # per row: keep it (keyed ListState; in memory in BATCH mode), arm the key's timers once
            # per process, count its bytes; returns None (no generator) unless the buffer is full
            key = ctx.get_current_key()
            if batch:
                self.pending_rows.setdefault(key, []).append(value)
            else:
                self.buf.add(value)
            if key not in self.armed:
                ts = ctx.timer_service()
                ts.register_event_time_timer(END_OF_INPUT)
                if not batch:
                    ts.register_processing_time_timer(ts.current_processing_time() + flush_ms)
                self.armed.add(key)
            size = self.sizes.get(key, 0) + self.row_bytes
            for i in self.var_idx:
                v = value[i]
                if v is not None:
                    size += len(v)
            self.sizes[key] = size
            if size >= self.buffer_limit:
                return self._flush(key)
            return None

        def on_timer(self, timestamp: int, ctx: Any) -> Iterator[str]:
            key = ctx.get_current_key()
            if timestamp != END_OF_INPUT:
                self.armed.discard(key)
            yield from self._flush(key)

        def _writer(self, key: str) -> Any:
            w = self.writes.get(key)
            if w is None:
                from lakelog.connector.store import TableStore
                from lakelog.connector.write import TableWrite

                last = None if batch else self.last_id.value()
                if last:
                    _wait_committed(self.store, commit_user, last, wait_s)
                w = TableWrite(TableStore(table_path), write_only=write_only)
                self.writes[key] = w
            return w

        def _flush(self, key: str) -> Iterator[str]:
            if batch:
                rows = self.pending_rows.pop(key, [])
            else:
                rows = list(self.buf.get() or [])
                self.buf.clear()
            self.sizes.pop(key, None)
            if not rows:
                return
            table, kinds = _rows_to_arrow(rows, self.arrow_schema)
            w = self._writer(key)
            if self.pk:
                w.write_changes(table, kinds)
            else:
                if ((kinds == 1) | (kinds == 3)).any():
                    raise InvalidInputError(
                        f"append table {table_path} got retraction rows (-U/-D); only +I/+U can be appended"
                    )
                w.write(table)
            msgs = w.prepare_commit()
            if not msgs:
                return
            c = Committable(uuid.uuid4().hex, key, msgs, w.commit_properties())
            self.last_id.update(c.id)
            yield encode_committable(c)

    return LakelogWriter()


def _committable_id(line: str) -> str:
    import json

    return str(json.loads(line)["id"])


def _wait_committed(store: Any, commit_user: str, committable_id: str, timeout_s: float) -> None:
    from lakelog.connector.errors import CommitConflictError

    deadline = time.monotonic() + timeout_s
    while committable_id not in committed_ids(store, commit_user):
        if time.monotonic() > deadline:
            raise CommitConflictError(
                f"writer of {store.path}: committable {committable_id} from before the restart was not "
                f"committed within {timeout_s:.0f} s; is the commit channel intact?"
            )
        time.sleep(0.2)


def _rows_to_arrow(rows: list[Any], schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """Rows of (kind, *columns) -> (Arrow table, int8 kinds), converted column by column."""
    cols = list(zip(*rows))
    kinds = np.asarray(cols[0], dtype=np.int8)
    arrays = []
    for f, col in zip(schema, cols[1:]):
        try:
            arrays.append(pa.array(col, type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise InvalidInputError(
                f"column {f.name!r}: cannot convert input values to {f.type}: {exc}"
            ) from exc
    return pa.Table.from_arrays(arrays, schema=schema), kinds


# ---- step 5: the committer ---------------------------------------------------------------------------
def _make_committer(
    table_path: str, commit_user: str, run_token: str, channel_dir: Optional[str], batch: bool, poll_ms: int
) -> Any:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

    class LakelogCommitter(KeyedProcessFunction):  # type: ignore[misc]
        """Parallelism 1, keyed by a constant. Commits what the channel released (read from its
        finished files, also right at open after a restart); keeps received, not yet committed
        committables in keyed MapState for the end-of-input commit; the next commit identifier in
        keyed ValueState."""

        def open(self, runtime_context: RuntimeContext) -> None:
            from lakelog.connector.store import TableStore

            self.committer = SinkCommitter(TableStore(table_path), commit_user, run_token)
            self.reader = ChannelReader(channel_dir) if channel_dir else None
            # a ListState of committable lines (PyFlink's MapState key iteration failed after restore)
            self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.STRING()))
            self.next_id = runtime_context.get_state(ValueStateDescriptor("next_id", Types.LONG()))
            self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))
            self.armed = False
            self._commit_released(0)

        def _commit_released(self, next_identifier: int) -> Optional[int]:
            if self.reader is None:
                return None
            released = self.reader.released(self.committer.committed)
            if not released:
                return None
            return self.committer.commit(
                [decode_committable(line) for line in released.values()], next_identifier, final=False
            )

        def process_element(self, value: str, ctx: Any) -> Iterator[Any]:
            self.pending.add(value)
            if not self.armed:
                ts = ctx.timer_service()
                ts.register_event_time_timer(END_OF_INPUT)
                if not batch and self.timer.value() is None:
                    t = ts.current_processing_time() + poll_ms
                    ts.register_processing_time_timer(t)
                    self.timer.update(t)
                self.armed = True
            return iter(())

        def on_timer(self, timestamp: int, ctx: Any) -> Iterator[Any]:
            if timestamp == END_OF_INPUT:
                self._commit_released(self.next_id.value() or 1)
                lines = list(self.pending.get() or [])
                ident = self.committer.commit(
                    [decode_committable(x) for x in lines], self.next_id.value() or 1, final=True
                )
                self._after_commit(ident)
                return iter(())
            self.timer.clear()
            self.armed = False
            self._after_commit(self._commit_released(self.next_id.value() or 1))
            if list(self.pending.get() or []):
                t = ctx.timer_service().current_processing_time() + poll_ms
                ctx.timer_service().register_processing_time_timer(t)
                self.timer.update(t)
                self.armed = True
            return iter(())

        def _after_commit(self, ident: Optional[int]) -> None:
            if ident is not None:
                self.next_id.update(ident + 1)
            done = self.committer.committed
            lines = list(self.pending.get() or [])
            keep = [x for x in lines if _committable_id(x) not in done]
            if len(keep) != len(lines):
                self.pending.update(keep)

    return LakelogCommitter()


# ---- public entry points ---------------------------------------------------------------------------
def _runtime_is_batch(env: Any) -> bool:
    try:
        conf = env._j_stream_execution_environment.getConfiguration()
        from pyflink.java_gateway import get_gateway

        opt = get_gateway().jvm.org.apache.flink.configuration.ExecutionOptions.RUNTIME_MODE
        return str(conf.get(opt)).upper() == "BATCH"
    except Exception:  # pragma: no cover - defensive: unknown gateway shapes
        log.warning("could not read execution.runtime-mode; assuming STREAMING")
        return False


def _checkpoint_interval_ms(env: Any) -> int:
    try:
        return int(env.get_checkpoint_config().get_checkpoint_interval())
    except Exception:  # pragma: no cover
        return -1


def sink_to_lakelog(
    ds: Any,
    table_path: str,
    *,
    channel_dir: Optional[str] = None,
    commit_user: Optional[str] = None,
    write_only: Optional[bool] = None,
    flush_interval: Optional[Any] = None,
    batch: Optional[bool] = None,
    parallelism: Optional[int] = None,
    poll_interval_ms: int = DEFAULT_POLL_MS,
    restart_wait_s: float = 300.0,
) -> None:
    """Write ``ds`` (a DataStream of Rows; their RowKind is respected) into the lakelog table at
    ``table_path`` with exactly-once semantics.

    - ``channel_dir``: folder of the checkpoint-gated commit channel (default: a fresh folder under
      the system temp dir; must be reachable by every TaskManager and survive restarts of the job).
    - ``commit_user``: the snapshot commit user (default: a new UUID per call, i.e. per job graph).
    - ``write_only``: skip compaction in the writers (default: the table's ``write-only``).
    - ``flush_interval``: milliseconds (int) or a duration string ("2 s"); writers flush at the latest
      this long after a key's first unflushed row. Default: ``sink.flush-interval`` of the table, else
      a quarter of the checkpoint interval (100 ms to 1 s), else 10 s.
    - ``batch``: force the batch path; default: read ``execution.runtime-mode`` (BATCH -> batch).
    - ``parallelism``: writer parallelism (default: the environment's).
    """
    from pyflink.common import Types
    from pyflink.common.serialization import Encoder
    from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy

    from lakelog.connector.options import Duration
    from lakelog.connector.store import TableStore

    env = ds.get_execution_environment()
    is_batch = _runtime_is_batch(env) if batch is None else batch
    store = TableStore(table_path)
    schema = store.schema.arrow_schema()
    row_type = _assigned_row_type(schema)
    if flush_interval is None:
        configured = store.options.sink_flush_interval
        if configured is not None:
            flush_ms = configured.nanos // 1_000_000
        else:
            # a quarter of the checkpoint interval, at most 1 s: a row then waits for its flush a
            # fraction of the checkpoint that publishes it (freshness <= checkpoint interval + 2 s)
            ckpt = _checkpoint_interval_ms(env)
            flush_ms = max(100, min(ckpt // 4, 1000)) if ckpt > 0 else DEFAULT_FLUSH_INTERVAL_MS
    elif isinstance(flush_interval, int):
        flush_ms = flush_interval
    else:
        flush_ms = Duration.parse(str(flush_interval)).nanos // 1_000_000
    flush_ms = max(1, int(flush_ms))
    user = commit_user or str(uuid.uuid4())
    run_token = uuid.uuid4().hex
    channel: Optional[str] = None
    if not is_batch:
        channel = channel_dir or os.path.join(tempfile.gettempdir(), f"lakelog-sink-{user}-{run_token[:8]}")
        os.makedirs(channel, exist_ok=True)

    name = os.path.basename(os.path.normpath(table_path))
    # the assigner emits Row(key, row) and Java keys the stream on field 0: the same wiring as
    # DataStream.key_by, minus its extra per-row Python step that would compute Row(key, row) again
    # key strings are salted so that Flink spreads the buckets over the writers evenly; that needs
    # the writers' max parallelism pinned (key groups) and Flink's key-group function confirmed
    writer_p = parallelism or env.get_parallelism()
    max_p = _writer_max_parallelism(env, writer_p)
    balance = max_p if _key_groups_match_jvm(max_p) else None
    with_key = ds.map(_KeyAssigner(table_path, balance), output_type=_keyed_row_type(schema)).name(
        f"lakelog-assign-{name}"
    )
    if parallelism:
        with_key = with_key.set_parallelism(parallelism)
    keyed_rows = _keyed_on_field0(with_key, row_type, ds)
    writer = _make_writer(table_path, user, write_only, flush_ms, is_batch, restart_wait_s)
    committables = keyed_rows.process(writer, output_type=Types.STRING()).name(f"lakelog-writer-{name}")
    if parallelism:
        committables = committables.set_parallelism(parallelism)
    if max_p is not None:
        committables = committables.set_max_parallelism(max_p)
    if channel is not None:
        file_sink = (
            FileSink.for_row_format("file://" + os.path.abspath(channel), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build()
        )
        committables.sink_to(file_sink).name(f"lakelog-channel-{name}").set_parallelism(1)
    committer = _make_committer(table_path, user, run_token, channel, is_batch, poll_interval_ms)
    out = (
        committables.key_by(lambda s: 0, key_type=Types.INT())
        .process(committer, output_type=Types.STRING())
        .name(f"lakelog-committer-{name}")
        .set_parallelism(1)
        .set_max_parallelism(1)
    )
    _discard(out)


def _writer_max_parallelism(env: Any, writer_parallelism: int) -> Optional[int]:
    """The writers' max parallelism (number of key groups): the environment's if set, else Flink's
    default for the writer parallelism. None when the parallelism is unknown (then nothing is pinned)."""
    from lakelog.operators.sink_keys import default_max_parallelism

    try:
        configured = int(env.get_max_parallelism())
    except Exception:  # pragma: no cover - defensive
        configured = -1
    if configured > 0:
        return configured
    if writer_parallelism is None or writer_parallelism <= 0:
        return None
    return default_max_parallelism(int(writer_parallelism))


def _key_groups_match_jvm(max_parallelism: Optional[int]) -> bool:
    """Whether :func:`~lakelog.operators.sink_keys.flink_key_group` agrees with the JVM's
    ``KeyGroupRangeAssignment`` for keys like the sink's (checked on the client, once per sink)."""
    if max_parallelism is None:
        return False
    from lakelog.operators.sink_keys import flink_key_group

    try:
        from pyflink.java_gateway import get_gateway

        jvm = get_gateway().jvm
        assign = jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignToKeyGroup
        for i in range(64):
            key = f"{i * 7919:024x}:{i % 13}" + (f"~{i}" if i % 3 else "")
            row = jvm.org.apache.flink.types.Row(1)
            row.setField(0, key)
            if int(assign(row, max_parallelism)) != flink_key_group(key, max_parallelism):
                log.warning("Flink's key groups differ from lakelog's model; writer keys are not balanced")
                return False
        return True
    except Exception as exc:  # pragma: no cover - no gateway: do not balance
        log.warning("could not check Flink's key groups (%s); writer keys are not balanced", exc)
        return False


def _keyed_on_field0(with_key: Any, value_type: Any, origin: Any) -> Any:
    """A KeyedStream over ``with_key`` (Rows of (key string, value)) keyed by field 0, whose functions
    see the value; what ``DataStream.key_by`` builds after its own Python key-extraction step."""
    from pyflink.common import Types
    from pyflink.datastream.data_stream import KeyedStream
    from pyflink.java_gateway import get_gateway

    j_selector = get_gateway().jvm.org.apache.flink.streaming.api.functions.python.KeyByKeySelector()
    j_keyed = with_key._j_data_stream.keyBy(j_selector, Types.ROW([Types.STRING()]).get_java_type_info())
    return KeyedStream(j_keyed, value_type, origin)


def _discard(ds: Any) -> None:
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    j_sink = jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name("lakelog-end").set_parallelism(1)


def sink_table_to_lakelog(t_env: Any, table: Any, table_path: str, **kwargs: Any) -> None:
    """Write a Flink ``Table`` (its changelog) into a lakelog table; see :func:`sink_to_lakelog`."""
    sink_to_lakelog(t_env.to_changelog_stream(table), table_path, **kwargs)


def wait_for(predicate: Any, timeout_s: float = 30.0, step_s: float = 0.2) -> bool:
    """Poll ``predicate()`` until true or ``timeout_s`` passes (a small helper for jobs/tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())
