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

from lakelog.connector.binary_row import serialize_row, to_binary_row
from lakelog.connector.bucket import buckets_from_hashes
from lakelog.connector.errors import InvalidInputError, SchemaError
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.committer import ChannelReader, SinkCommitter, committed_ids

__all__ = ["sink_to_lakelog", "sink_table_to_lakelog", "flink_type_of", "row_type_of"]

log = logging.getLogger(__name__)

END_OF_INPUT = 2**63 - 2  # a keyed event-time timer here fires at end of bounded input
KEY_FIELD = "__lakelog_key"
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
    """Row(key, kind, *table columns): what the key assigner emits and the writer buffers."""
    from pyflink.common import Types

    return Types.ROW_NAMED(
        [KEY_FIELD, KIND_FIELD] + [f.name for f in schema],
        [Types.STRING(), Types.BYTE()] + [flink_type_of(f.type, f.name) for f in schema],
    )


# ---- step 1: assign (partition, bucket) ----------------------------------------------------------
class _KeyAssigner:
    """Maps an input Row to ``Row(key, kind, *table_columns)``; key = "<partition hex>:<bucket>"."""

    def __init__(self, table_path: str) -> None:
        self.table_path = table_path
        self._ready = False

    def _setup(self) -> None:
        from lakelog.connector.store import TableStore

        store = TableStore(self.table_path)
        schema = store.schema
        self.names = [f.name for f in schema.arrow_schema()]
        self.pos = {n: i for i, n in enumerate(self.names)}
        self.part_idx = [self.pos[k] for k in schema.partition_keys]
        self.part_types = store.partition_types
        self.num_buckets = int(store.options.bucket)
        self.bucket_idx = [self.pos[k] for k in schema.bucket_keys] if self.num_buckets > 0 else []
        self.bucket_types = store.field_types(list(schema.bucket_keys)) if self.num_buckets > 0 else []
        self._ready = True

    def values_of(self, row: Any) -> list[Any]:
        fields = getattr(row, "_fields", None)
        if fields:
            d = row.as_dict()
            try:
                return [d[n] for n in self.names]
            except KeyError as exc:
                raise InvalidInputError(f"input row lacks column {exc.args[0]!r}") from None
        values = list(row)
        if len(values) != len(self.names):
            raise InvalidInputError(f"input row has {len(values)} fields; the table has {self.names}")
        return values

    def key_of(self, values: Sequence[Any]) -> str:
        part = serialize_row([values[i] for i in self.part_idx], self.part_types).hex()
        if self.num_buckets <= 0:
            return part + ":0"
        import mmh3

        data = to_binary_row([values[i] for i in self.bucket_idx], self.bucket_types)
        h = np.array([mmh3.hash(data, 42, signed=True)], dtype=np.int64)
        return f"{part}:{int(buckets_from_hashes(h, self.num_buckets)[0])}"

    def __call__(self, row: Any) -> Any:
        from pyflink.common import Row

        if not self._ready:
            self._setup()
        kind = row.get_row_kind().value if hasattr(row, "get_row_kind") else 0
        values = self.values_of(row)
        return Row(self.key_of(values), kind, *values)


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
            self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))
            self.last_id = runtime_context.get_state(ValueStateDescriptor("last_id", Types.STRING()))

        def close(self) -> None:
            for w in getattr(self, "writes", {}).values():
                w.close()

        def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
            key = value[0]
            if batch:
                self.pending_rows.setdefault(key, []).append(value)
            else:
                self.buf.add(value)
            if key not in self.armed:
                ts = ctx.timer_service()
                ts.register_event_time_timer(END_OF_INPUT)
                if not batch and self.timer.value() is None:
                    t = ts.current_processing_time() + flush_ms
                    ts.register_processing_time_timer(t)
                    self.timer.update(t)
                self.armed.add(key)
            size = self.sizes.get(key, 0) + _estimate_bytes(value)
            self.sizes[key] = size
            if size >= self.buffer_limit:
                yield from self._flush(key)

        def on_timer(self, timestamp: int, ctx: Any) -> Iterator[str]:
            key = ctx.get_current_key()
            if timestamp != END_OF_INPUT:
                self.timer.clear()
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


def _estimate_bytes(row: Any) -> int:
    n = 16
    for v in row:
        n += len(v) if isinstance(v, (str, bytes)) else 8
    return n


def _rows_to_arrow(rows: list[Any], schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    cols = list(zip(*rows))
    kinds = np.asarray(cols[1], dtype=np.int8)
    arrays = []
    for f, col in zip(schema, cols[2:]):
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
      the checkpoint interval, else 10 s.
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
            ckpt = _checkpoint_interval_ms(env)
            flush_ms = ckpt if ckpt > 0 else DEFAULT_FLUSH_INTERVAL_MS
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
    keyed_rows = ds.map(_KeyAssigner(table_path), output_type=row_type).name(f"lakelog-assign-{name}")
    if parallelism:
        keyed_rows = keyed_rows.set_parallelism(parallelism)
    writer = _make_writer(table_path, user, write_only, flush_ms, is_batch, restart_wait_s)
    committables = (
        keyed_rows.key_by(lambda r: r[0], key_type=Types.STRING())
        .process(writer, output_type=Types.STRING())
        .name(f"lakelog-writer-{name}")
    )
    if parallelism:
        committables = committables.set_parallelism(parallelism)
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
