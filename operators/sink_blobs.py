"""The lakelog PyFlink sink: exactly-once writes of a changelog ``DataStream`` into a lakelog table.

Topology (see ``operators/README.md`` for the full design)::

    rows --RowBatcher (Java, chained: Arrow batches of the table's types, RowKinds as a column;
         emitted every flush interval, when large, before each checkpoint barrier, at end of input)
         --split (Python, one call per batch: one blob per (partition, bucket))
         --> key_by(partition, bucket) --writer (LSM files)--> committables
    committables --FileSink (on-checkpoint rolling) ......> channel dir   (released on checkpoint completion)
    committables --key_by(0)--> committer (parallelism 1): commits what the channel released, and at
                                end of input everything it holds

Without a JDK (``java=False``) a pandas UDF does the batching instead (Flink's Arrow hand-over to a
vectorised Python function) and a Python flat-map reads the RowKinds first: the same blobs, slower.

``lakelog.connector`` never imports pyflink; this module imports it lazily inside the functions.
"""

from __future__ import annotations

import itertools
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
from lakelog.operators.codec import Committable, encode_committable
from lakelog.operators.committer import (
    END_OF_INPUT,
    WAKE,
    ChannelReader,
    SinkCommitter,
    commit_released,
    make_committer_function,
)

__all__ = ["sink_to_lakelog", "sink_table_to_lakelog", "flink_type_of", "row_type_of"]

log = logging.getLogger(__name__)

KIND_FIELD = "__lakelog_kind"
DEFAULT_POLL_MS = 300
COMPACTION_POLL_MS = 500  # how often a writer looks at a running compaction without a flush interval
DEFAULT_BATCH_MS = 1000  # how long the Java batcher holds rows without a flush interval


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


# ---- step 1: rows -> one Arrow blob per (partition, bucket) and batch (a vectorised Flink UDF) ----
BLOB_SEP = b"\n"


def encode_blob(key: str, table: pa.Table, kinds: Optional[np.ndarray]) -> bytes:
    """``key`` + newline + an Arrow IPC stream of ``table`` (plus the row kinds as an int8 column)."""
    if kinds is not None:
        table = table.append_column(KIND_FIELD, pa.array(kinds, pa.int8()))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return key.encode() + BLOB_SEP + sink.getvalue().to_pybytes()


def blob_key(blob: bytes) -> str:
    return blob[: blob.index(BLOB_SEP)].decode()


WAKE_BLOB = BLOB_SEP  # no key, no rows: the writer that gets it passes a WAKE line to the committer


def flush_marker(key: str) -> bytes:
    """A blob without rows: tells the writer of ``key`` to write what it holds now (a checkpoint
    barrier follows)."""
    return key.encode() + BLOB_SEP


def is_flush_marker(blob: bytes) -> bool:
    return blob.endswith(BLOB_SEP) and blob.index(BLOB_SEP) == len(blob) - 1


def _read_ipc(data: Any) -> tuple[pa.Table, Optional[np.ndarray]]:
    """(rows, int8 row kinds or None for insert-only) of an Arrow IPC stream whose RowKinds, if
    any, are the column ``KIND_FIELD``."""
    table = pa.ipc.open_stream(data).read_all()
    if KIND_FIELD not in table.column_names:
        return table, None
    i = table.schema.get_field_index(KIND_FIELD)
    kinds = table.column(i).to_numpy().astype(np.int8)
    return table.remove_column(i), kinds


def decode_blob(blob: bytes) -> tuple[pa.Table, Optional[np.ndarray]]:
    """(rows, int8 row kinds or None for insert-only) of a blob made by :func:`encode_blob`."""
    return _read_ipc(memoryview(blob)[blob.index(BLOB_SEP) + 1 :])


def _masked(t: pa.DataType) -> bool:
    """Columns whose nulls pandas cannot carry losslessly (ints become floats, NaN means null): the
    sink passes their null mask beside them."""
    return pa.types.is_integer(t) or pa.types.is_floating(t)


class _Grouper:
    """Groups a batch of rows by (partition, bucket) with the storage's vectorised bucket function and
    encodes one blob per group, prefixed by the group's (salted, balanced) writer key."""

    def __init__(self, table_path: str, max_parallelism: Optional[int]) -> None:
        self.table_path = table_path
        self.max_parallelism = max_parallelism
        self._ready = False

    def _setup(self) -> None:
        from lakelog.connector.format.store import TableStore
        from lakelog.operators.sink_keys import KeyEncoder

        self.store = TableStore(self.table_path)
        schema = self.store.schema
        self.arrow_schema = schema.arrow_schema()
        pos = {f.name: i for i, f in enumerate(self.arrow_schema)}
        num_buckets = int(self.store.options.bucket)
        bucket_keys = list(schema.bucket_keys) if num_buckets > 0 else []
        self.keys = KeyEncoder(
            [pos[k] for k in schema.partition_keys],
            self.store.partition_types,
            [pos[k] for k in bucket_keys],
            self.store.field_types(bucket_keys) if bucket_keys else [],
            num_buckets,
            self.max_parallelism,
        )
        self._ready = True

    def blobs(self, table: pa.Table, kinds: Optional[np.ndarray]) -> Iterator[bytes]:
        from lakelog.connector.table.write import bucket_groups

        for values, _, bucket, rows in bucket_groups(self.store, table):
            idx = pa.array(rows)
            yield encode_blob(
                self.keys.key_for(values, bucket), table.take(idx), None if kinds is None else kinds[rows]
            )


class BatchSplitter(_Grouper):
    """The sink's Python stage after the Java ``RowBatcher``: one Arrow IPC batch in (the table's
    Arrow types, plus the RowKind column for a changelog), one blob per (partition, bucket) out."""

    def __init__(self, table_path: str, max_parallelism: Optional[int]) -> None:
        super().__init__(table_path, max_parallelism)
        self.pending: dict[str, None] = {}  # keys that got blobs since the last flush marker

    def split(self, data: bytes) -> Iterator[bytes]:
        """The blobs of one batch; for the batcher's flush marker (an empty record, sent before each
        checkpoint barrier) one marker blob per key that got rows since the previous marker."""
        if not self._ready:
            self._setup()
        if not data:
            for key in self.pending:
                yield flush_marker(key)
            self.pending.clear()
            yield WAKE_BLOB  # for the committer, which may have nothing else to start it after a restart
            return
        table, kinds = _read_ipc(memoryview(data))
        if table.schema.names == self.arrow_schema.names and table.schema.types == self.arrow_schema.types:
            # the batcher's fields are all nullable; it has checked the NOT NULL columns itself
            table = pa.Table.from_arrays(table.columns, schema=self.arrow_schema)
        else:
            from lakelog.connector.table.arrow_input import conform

            try:
                table = conform(table, self.arrow_schema)
            except SchemaError as exc:
                raise InvalidInputError(str(exc)) from exc
        for blob in self.blobs(table, kinds):
            self.pending[blob_key(blob)] = None
            yield blob


class BatchEncoder(_Grouper):
    """The body of the sink's pandas UDF (the Python-only path, ``java=False``). Flink hands it a
    batch of rows as pandas Series (the row kind first when the input is a changelog; each table
    column, numeric nullable ones followed by their null mask); it converts them to the table's
    Arrow types and returns the blobs of :meth:`_Grouper.blobs` in the first positions of the
    result (None elsewhere)."""

    def __init__(
        self, table_path: str, changelog: bool, masks: Sequence[bool], max_parallelism: Optional[int]
    ) -> None:
        super().__init__(table_path, max_parallelism)
        self.changelog = changelog
        self.masks = list(masks)

    def to_arrow(self, series: Sequence[Any]) -> tuple[pa.Table, Optional[np.ndarray]]:
        """(rows in the table's Arrow schema, int8 kinds or None) of one batch of Series."""
        if not self._ready:
            self._setup()
        it = iter(series)
        kinds = np.asarray(next(it), dtype=np.int8) if self.changelog else None
        arrays = []
        for f, masked in zip(self.arrow_schema, self.masks):
            s = next(it)
            try:
                if masked:  # COALESCE(c, 0) and c IS NULL: exact values, nulls from the mask
                    isnull = np.asarray(next(it), dtype=bool)
                    arr = pa.array(np.asarray(s), mask=isnull if isnull.any() else None)
                else:
                    arr = pa.Array.from_pandas(s)
                if arr.type != f.type:
                    arr = arr.cast(f.type)
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                TypeError,
                ValueError,
                OverflowError,
            ) as exc:
                raise InvalidInputError(
                    f"column {f.name!r}: cannot convert input values to {f.type}: {exc}"
                ) from exc
            if not f.nullable and arr.null_count:
                raise InvalidInputError(
                    f"column {f.name!r} is NOT NULL but the input holds {arr.null_count} null(s)"
                )
            arrays.append(arr)
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema), kinds

    def __call__(self, *series: Any) -> Any:
        import pandas as pd

        table, kinds = self.to_arrow(series)
        out = np.full(table.num_rows, None, dtype=object)
        for i, blob in enumerate(self.blobs(table, kinds)):
            out[i] = blob
        return pd.Series(out, dtype=object)


class _TableRow:
    """Flink map: any record (a ``Row``, a tuple, a list) -> ``Row`` of the table's columns (by field
    name when the row has names that cover the table's, else by position), keeping its RowKind."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._orders: dict[tuple[str, ...], list[int]] = {}

    def open(self, runtime_context: Any) -> None:
        from pyflink.common import Row, RowKind

        self._row_class = Row
        self._insert = RowKind.INSERT

    def map(self, row: Any) -> Any:
        out = self._row_class(*self.values_of(row))
        if isinstance(row, self._row_class):
            out.set_row_kind(row.get_row_kind())
        return out

    def values_of(self, row: Any) -> list[Any]:
        d = row.__dict__ if isinstance(row, self._row_class) else None
        if d is not None and "_values" in d:
            values: list[Any] = d["_values"]
            fields = d.get("_fields")
        else:
            values, fields = list(row), None
        if fields is not None and fields != self.names:
            order = self._orders.get(tuple(fields))
            if order is None:
                try:
                    at = {n: i for i, n in enumerate(fields)}
                    order = [at[n] for n in self.names]
                except KeyError as exc:
                    raise InvalidInputError(f"input row lacks column {exc.args[0]!r}") from None
                self._orders[tuple(fields)] = order
            return [values[i] for i in order]
        if len(values) != len(self.names):
            raise InvalidInputError(f"input row has {len(values)} fields; the table has {self.names}")
        return values


class _KindColumn(_TableRow):
    """Flink map for changelog input (Python-only path): ``Row`` with a RowKind ->
    ``Row(kind, *table columns)``."""

    def __init__(self, names: Sequence[str], drop_update_before: bool) -> None:
        super().__init__(names)
        self.drop_update_before = drop_update_before

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self._out_names = [KIND_FIELD, *self.names]

    def flat_map(self, row: Any) -> Iterator[Any]:
        kind = row.get_row_kind().value if isinstance(row, self._row_class) else 0
        if kind == 1 and self.drop_update_before:
            return
        out = self._row_class.__new__(self._row_class)
        d = out.__dict__
        d["_values"] = [kind, *self.values_of(row)]
        d["_fields"] = self._out_names
        d["_from_dict"] = False
        d["_row_kind"] = self._insert
        yield out


# ---- step 3: the writer ----------------------------------------------------------------------------
def _make_writer(
    table_path: str,
    commit_user: str,
    run_token: str,
    channel: Optional[str],
    write_only: Optional[bool],
    batch: bool,
    flush_ms: Optional[int],
    wait_s: float,
) -> Any:
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, RuntimeContext
    from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

    class LakelogWriter(KeyedProcessFunction):  # type: ignore[misc]
        """Keyed by (partition, bucket); one call per blob (a batch of the key's rows), not per row.

        STREAMING: the key's blobs wait in keyed ListState (checkpointed, so rows received before a
        checkpoint and not yet written survive a restart) until a flush marker arrives (sent ahead
        of each checkpoint barrier), the key's buffered bytes reach ``write-buffer-size``, or (when
        ``flush_ms`` is set) a processing-time timer ``flush_ms`` after the first blob fires
        (``flush_ms == 0``, the Python-only path without markers: each blob as it arrives); a
        flush writes them through the key's TableWrite (LSM files), clears the state and emits the
        committable in the same call. A background compaction still running at a flush is looked
        at again by a timer, so its result is committed without new rows. BATCH: blobs go straight
        into the TableWrite's buffer; end of input commits.

        Each key gets its own TableWrite, created lazily at its first flush in this process. After a
        restart that first flush waits until the key's last committable from before the checkpoint
        (keyed ValueState) is committed, so the bucket's LSM view and sequence numbers start from a
        snapshot that holds everything this key wrote before.

        Timers do not survive a restart (PyFlink does not fire restored timers): the end-of-input
        and flush timers are registered again by the key's first element in each process. Nothing
        depends on a restored one: on the Java path a key's blobs never stay in state across a
        checkpoint (the flush marker writes them before the barrier)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            from lakelog.connector.format.store import TableStore

            self.store = TableStore(table_path)
            self.pk = bool(self.store.schema.primary_keys)
            self.buffer_limit = int(self.store.options.write_buffer_size)
            self.writes: dict[str, Any] = {}
            self.sizes: dict[str, int] = {}
            self.armed: set[str] = set()  # end-of-input timer registered (per process)
            self.timed: set[str] = set()  # flush timer pending
            self.view: Any = None  # what the commit user committed, for restarted keys (lazy)
            self.reader: Any = None
            self.buf = runtime_context.get_list_state(
                ListStateDescriptor("blobs", Types.PRIMITIVE_ARRAY(Types.BYTE()))
            )
            self.last_id = runtime_context.get_state(ValueStateDescriptor("last_id", Types.STRING()))

        def close(self) -> None:
            for w in getattr(self, "writes", {}).values():
                w.close()

        def process_element(self, value: Any, ctx: Any) -> Optional[Iterator[str]]:
            blob = value[0]
            if blob == WAKE_BLOB:  # sent with every checkpoint's flush markers
                return iter((WAKE,))
            key = blob_key(blob)
            ts = ctx.timer_service()
            if key not in self.armed:
                ts.register_event_time_timer(END_OF_INPUT)
                self.armed.add(key)
            if is_flush_marker(blob):
                return None if batch else self._flush(key, ctx)
            if batch:
                self._write(key, [blob])
                return None
            self.buf.add(blob)
            size = self.sizes.get(key, 0) + len(blob)
            self.sizes[key] = size
            if size >= self.buffer_limit or flush_ms == 0:
                return self._flush(key, ctx)
            if flush_ms is not None:
                self._arm(key, ctx, flush_ms)
            return None

        def _arm(self, key: str, ctx: Any, delay_ms: int) -> None:
            if key not in self.timed:
                ts = ctx.timer_service()
                ts.register_processing_time_timer(ts.current_processing_time() + delay_ms)
                self.timed.add(key)

        def on_timer(self, timestamp: int, ctx: Any) -> Iterator[str]:
            key = ctx.get_current_key()
            if timestamp == END_OF_INPUT:
                if not batch:
                    yield from self._flush(key, ctx)
                w = self.writes.get(key)
                if w is not None:
                    yield from self._emit(key, w.prepare_commit(wait_compaction=True))
                return
            self.timed.discard(key)
            yield from self._flush(key, ctx)

        def _ready(self, key: str) -> None:
            """Before the key's first write in this process: after a restart its last committable
            from before the checkpoint must be committed first (see ``_commit_restored``)."""
            if batch or key in self.writes:
                return
            last = self.last_id.value()
            if last:
                self._commit_restored(last)

        def _commit_restored(self, last: str) -> None:
            """Commit what the channel released until ``last`` is committed. It was released when
            the job restored the checkpoint that holds this key's state (Flink finishes the pending
            channel files of the restored checkpoint), but the committer may not be running: PyFlink
            opens a Python function only when an element reaches it, and none reaches the committer
            while the writers wait. Any party of the commit user may commit released committables
            (the committer's guard keeps concurrent commits apart). Gives up after ``wait_s``
            naming the committable (a channel that lost its files)."""
            from lakelog.connector.errors import CommitConflictError

            if self.view is None:  # one per process: later keys only read the newer snapshots
                self.view = SinkCommitter(self.store, commit_user, run_token)
                self.reader = ChannelReader(channel) if channel else None
            view = self.view
            view.refresh()
            deadline = time.monotonic() + wait_s
            while last not in view.done:
                if self.reader is not None and commit_released(view, self.reader) is not None:
                    log.info("writer of %s committed what the channel released after a restart", table_path)
                view.refresh()
                if last in view.done:
                    break
                if time.monotonic() > deadline:
                    raise CommitConflictError(
                        f"writer of {table_path}: committable {last} from before the restart was not "
                        f"committed within {wait_s:.0f} s; is the commit channel intact?"
                    )
                time.sleep(0.2)

        def _flush(self, key: str, ctx: Any) -> Iterator[str]:
            self._ready(key)
            blobs = list(self.buf.get() or [])
            self.buf.clear()
            self.sizes.pop(key, None)
            w = self._write(key, blobs) if blobs else self.writes.get(key)
            if w is None:
                return
            yield from self._emit(key, w.prepare_commit(wait_compaction=False))
            if w.compacting():  # look again later, so its result is committed without new rows
                self._arm(key, ctx, flush_ms or COMPACTION_POLL_MS)

        def _write(self, key: str, blobs: list[bytes]) -> Any:
            parts = [decode_blob(b) for b in blobs]
            table = pa.concat_tables([t for t, _ in parts]) if len(parts) > 1 else parts[0][0]
            changes = [k for _, k in parts if k is not None]
            kinds = (np.concatenate(changes) if len(changes) > 1 else changes[0]) if changes else None
            w = self._writer(key)
            if self.pk:
                if kinds is None:
                    w.write(table)
                else:
                    w.write_changes(table, kinds)
            else:
                if kinds is not None and ((kinds == 1) | (kinds == 3)).any():
                    raise InvalidInputError(
                        f"append table {table_path} got retraction rows (-U/-D); only +I/+U can be appended"
                    )
                w.write(table)
            return w

        def _emit(self, key: str, msgs: list[Any]) -> Iterator[str]:
            if not msgs:
                return
            c = Committable(uuid.uuid4().hex, key, msgs, self.writes[key].commit_properties())
            if not batch:
                self.last_id.update(c.id)
            yield encode_committable(c)

        def _writer(self, key: str) -> Any:
            w = self.writes.get(key)
            if w is None:
                from lakelog.connector.format.store import TableStore
                from lakelog.connector.table.write import TableWrite

                w = TableWrite(TableStore(table_path), write_only=write_only)
                self.writes[key] = w
            return w

    return LakelogWriter()


# ---- step 5: the committer ---------------------------------------------------------------------------
def _make_committer(
    table_path: str, commit_user: str, run_token: str, channel_dir: Optional[str], poll_ms: int
) -> Any:
    def new_committer() -> SinkCommitter:
        from lakelog.connector.format.store import TableStore

        return SinkCommitter(TableStore(table_path), commit_user, run_token)

    return make_committer_function(new_committer, channel_dir, poll_ms)


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
    changelog: Optional[bool] = None,
    channel_dir: Optional[str] = None,
    commit_user: Optional[str] = None,
    write_only: Optional[bool] = None,
    flush_interval: Optional[Any] = None,
    batch: Optional[bool] = None,
    parallelism: Optional[int] = None,
    drop_update_before: Optional[bool] = None,
    poll_interval_ms: int = DEFAULT_POLL_MS,
    restart_wait_s: float = 300.0,
    java: Optional[bool] = None,
) -> None:
    """Write ``ds`` (a DataStream of Rows) into the lakelog table at ``table_path`` with
    exactly-once semantics.

    - ``changelog``: whether the rows' RowKinds matter (+I/-U/+U/-D). False is for insert-only
      streams (every row +I, e.g. upserts into a primary-key table); any other kind then fails the
      job loudly. Default: True for primary-key tables, False for append tables. (Free on the Java
      path; on the Python-only path True costs one more Python step per row.)
    - ``channel_dir``: folder of the checkpoint-gated commit channel (default: a fresh folder under
      the system temp dir; must be reachable by every TaskManager and survive restarts of the job).
    - ``commit_user``: the snapshot commit user (default: a new UUID per call, i.e. per job graph).
    - ``write_only``: skip compaction in the writers (default: the table's ``write-only``).
    - ``flush_interval``: milliseconds (int) or a duration string ("2 s"); rows wait at most this
      long before they are written. Default: ``sink.flush-interval`` of the table, else none: on
      the Java path the writers write just before each checkpoint barrier (and at
      ``write-buffer-size``), which is the latest moment that still publishes the rows at that
      checkpoint. On the Python-only path the flush interval also sets the job's
      ``python.fn-execution.bundle.time`` (PyFlink shares it among all Python operators of a job),
      and its default is an eighth of the checkpoint interval (100 to 500 ms) when that is shorter
      than the job's bundle time (Flink's default 1 s).
    - ``batch``: force the batch path; default: read ``execution.runtime-mode`` (BATCH -> batch).
    - ``parallelism``: writer parallelism (default: the environment's).
    - ``drop_update_before``: drop -U rows (default: as Paimon's sink, for primary-key tables whose
      merge engine overwrites rows, deduplicate and first-row, without an input changelog).
    - ``poll_interval_ms``: how often the committer looks for released committables.
    - ``restart_wait_s``: how long a restarted writer waits for its last committable from before the
      restart to be committed before it fails the job naming it (a broken channel, not a slow one).
    - ``java``: batch the rows on the JVM with lakelog's ``RowBatcher`` (compiled at first use, see
      :mod:`lakelog.operators.jvm`). Default: when a JDK (or an already built jar) is available,
      else the Python-only path with a warning.

    The rows must be a DataStream of ``Row``\\s with a declared row type (``output_type=`` of the map
    that makes them, e.g. :func:`row_type_of` of the table; or a Table's stream); columns are matched
    by name when the input has every table column, else by position. Records of an undeclared
    (pickled) type (Rows, tuples or lists) pass a Python map into the table's row type first, which
    costs one Python step per row.
    """
    from pyflink.common import Types
    from pyflink.table import StreamTableEnvironment

    from lakelog.connector.format.store import TableStore

    env = ds.get_execution_environment()
    is_batch = _runtime_is_batch(env) if batch is None else batch
    store = TableStore(table_path)
    schema = store.schema.arrow_schema()
    names = list(schema.names)
    name = os.path.basename(os.path.normpath(table_path))
    asked = _flush_ms(store, flush_interval)
    if changelog is None:
        changelog = bool(store.schema.primary_keys)
    drop_ub = upsert_only(store) if drop_update_before is None else drop_update_before
    if java is None:
        java = _java_available()
    # the blob keys are salted so that Flink spreads the buckets over the writers evenly; that needs
    # the writers' max parallelism pinned (key groups)
    max_p = _writer_max_parallelism(env, parallelism or env.get_parallelism())
    balance = max_p if _key_groups_match_jvm(max_p) else None
    if java:
        # the writers flush on the batcher's flush markers (ahead of each checkpoint barrier), so
        # every row that reaches the sink before a barrier is published by that checkpoint, with
        # one file per bucket and upstream subtask; a flush interval adds timed flushes
        flush_ms: Optional[int] = asked
        blobs = _java_batches(ds, store, changelog, drop_ub, asked or DEFAULT_BATCH_MS, env, balance)
    else:
        bundle = _bundle_time_ms(env)
        if asked is None:
            # no interval asked for: an eighth of the checkpoint interval (100 to 500 ms). A row
            # passes up to two such waits (the bundles of the job's Python map and of the sink's
            # UDF) before the checkpoint that publishes it, so this keeps freshness within
            # checkpoint interval + 2 s; a shorter bundle time of the job is kept
            ckpt = _checkpoint_interval_ms(env)
            eighth = max(100, min(ckpt // 8, 500)) if ckpt > 0 else bundle
            asked = eighth if eighth < bundle else None
        # no flush markers on this path: each blob (one per key and UDF batch, i.e. per bundle
        # time) is written as it arrives, so no rows wait in writer state across a checkpoint
        # (after a restart nothing would flush them: PyFlink does not fire restored timers)
        flush_ms = 0
        if changelog:
            from pyflink.datastream import FlatMapFunction

            class KindColumn(_KindColumn, FlatMapFunction):  # type: ignore[misc]
                pass

            ds = ds.flat_map(
                KindColumn(names, drop_ub),
                output_type=Types.ROW_NAMED(
                    [KIND_FIELD, *names], [Types.BYTE()] + [flink_type_of(f.type, f.name) for f in schema]
                ),
            ).name(f"lakelog-kinds-{name}")
        t_env = StreamTableEnvironment.create(env)
        blobs = _encoded_batches(t_env, t_env.from_data_stream(ds), store, changelog, asked, env, balance)
    _write_and_commit(
        blobs,
        store,
        env,
        is_batch,
        flush_ms,
        channel_dir,
        commit_user,
        write_only,
        parallelism,
        max_p,
        poll_interval_ms,
        restart_wait_s,
    )


def _java_available() -> bool:
    """Whether lakelog's Java operators can be used (a cached jar, or a JDK to compile it)."""
    from lakelog.operators.jvm import JavaBuildError, lakelog_jar

    try:
        lakelog_jar()
        return True
    except JavaBuildError as exc:
        log.warning("lakelog sink: using the slower Python-only path (%s)", exc)
        return False


def _flush_ms(store: Any, flush_interval: Optional[Any]) -> Optional[int]:
    """The flush interval asked for (argument, else the table's ``sink.flush-interval``), or None."""
    from lakelog.connector.format.options import Duration

    if flush_interval is None:
        configured = store.options.sink_flush_interval
        return None if configured is None else max(1, int(configured.nanos // 1_000_000))
    if isinstance(flush_interval, int):
        return max(1, flush_interval)
    return max(1, int(Duration.parse(str(flush_interval)).nanos // 1_000_000))


def _python_option(env: Any, key: str, default: int) -> int:
    """An integer ``python.*`` option of the job's configuration, else ``default`` (Flink's)."""
    try:
        value = env._j_stream_execution_environment.getConfiguration().toMap().get(key)
        return int(str(value)) if value is not None else default
    except Exception:  # pragma: no cover - defensive: unknown gateway shapes
        return default


def _bundle_time_ms(env: Any) -> int:
    """The job's ``python.fn-execution.bundle.time`` (Flink's default: 1000 ms)."""
    return _python_option(env, "python.fn-execution.bundle.time", 1000)


def upsert_only(store: Any) -> bool:
    """Whether the table needs only the new row of an update (Paimon's Flink sink decides the same):
    a primary-key table whose merge engine overwrites rows (deduplicate, first-row) and that keeps
    no input changelog. Its sink drops -U rows; otherwise a -U committed without its +U (they can
    fall into different flushes) would briefly delete the key."""
    from lakelog.connector.format.options import ChangelogProducer, MergeEngine

    opts = store.options
    return bool(store.schema.primary_keys) and (
        opts.changelog_producer != ChangelogProducer.INPUT
        and opts.merge_engine in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW)
    )


_sink_ids = itertools.count(1)


def _encoded_batches(
    t_env: Any,
    table: Any,
    store: Any,
    changelog: bool,
    flush_ms: Optional[int],
    env: Any,
    balance: Optional[int],
) -> Any:
    """Step 1: a DataStream of Row(blob), one blob per (partition, bucket) and batch of rows, made by
    a pandas UDF over ``table`` (Flink buffers the rows on the Java side and hands them over as Arrow
    batches: at most a bundle time old, and always before a checkpoint barrier)."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    schema = store.schema.arrow_schema()
    names = list(schema.names)
    in_names = list(table.get_schema().get_field_names())
    in_types = list(table.get_schema().get_field_data_types())
    offset = 1 if changelog else 0
    data_names = in_names[offset:]
    cols = [data_names[i] for i in _column_order(data_names, names, str(store.path))]
    nullable = {n: getattr(t, "_nullable", True) for n, t in zip(in_names, in_types)}
    args = [f"`{KIND_FIELD}`"] if changelog else []
    masks = []
    for f, c in zip(schema, cols):
        masked = _masked(f.type) and nullable[c]
        masks.append(masked)
        if masked:
            args += [f"COALESCE(`{c}`, 0)", f"`{c}` IS NULL"]
        elif pa.types.is_time(f.type):
            # a DataStream's TIME arrives as TIME(0), which the Arrow hand-over would cut to seconds;
            # Flink keeps milliseconds inside, so widen the precision first
            args.append(f"CAST(`{c}` AS TIME(3))")
        else:
            args.append(f"`{c}`")
    sid = next(_sink_ids)
    view, func = f"__lakelog_sink_in_{sid}", f"__lakelog_sink_encode_{sid}"
    encoder = BatchEncoder(str(store.path), changelog, masks, balance)
    t_env.create_temporary_view(view, table)
    t_env.create_temporary_function(func, udf(encoder, result_type=DataTypes.BYTES(), func_type="pandas"))
    # Flink hands the UDF an Arrow batch when it holds python.fn-execution.arrow.batch.size rows
    # (capped by the bundle size; both 1000 by default), when the bundle time has passed, at every
    # checkpoint and at end of input; the writers gather the blobs until they flush. python.* options
    # are job-wide in PyFlink (a TableEnvironment's settings reach every Python operator of the
    # job), so the sink sets the Arrow batch size (read only by Arrow functions) to the job's bundle
    # size, and the bundle time only when a flush interval is asked for; never the bundle size,
    # which bounds how many rows the job's Python functions hold in flight (a large one makes every
    # checkpoint wait for them all). A job that wants fewer, larger batches raises the bundle size.
    conf = t_env.get_config()
    conf.set(
        "python.fn-execution.arrow.batch.size",
        str(_python_option(env, "python.fn-execution.bundle.size", 1000)),
    )
    if flush_ms is not None:
        conf.set("python.fn-execution.bundle.time", str(flush_ms))
    query = t_env.sql_query(
        f"SELECT b FROM (SELECT `{func}`({', '.join(args)}) AS b FROM `{view}`) WHERE b IS NOT NULL"
    )
    return t_env.to_data_stream(query)


# ---- step 1, Java path: rows -> Arrow batches on the JVM (RowBatcher) -> one blob per group --------
MAX_BATCH_ROWS = 65536
MAX_BATCH_BYTES = 8 << 20


def java_type_code(t: pa.DataType, name: str = "?") -> str:
    """The ``RowBatcher`` type code of Arrow type ``t`` (see ``RowBatcher.arrowType``)."""
    simple = [
        (pa.types.is_boolean, "bool"),
        (pa.types.is_int8, "i8"),
        (pa.types.is_int16, "i16"),
        (pa.types.is_int32, "i32"),
        (pa.types.is_int64, "i64"),
        (pa.types.is_float32, "f32"),
        (pa.types.is_float64, "f64"),
        (pa.types.is_string, "str"),
        (pa.types.is_large_string, "str"),
        (pa.types.is_binary, "bin"),
        (pa.types.is_large_binary, "bin"),
        (pa.types.is_fixed_size_binary, "bin"),
        (pa.types.is_date32, "date"),
        (pa.types.is_time, "time"),
    ]
    for pred, code in simple:
        if pred(t):
            return code
    if pa.types.is_decimal(t):
        return f"dec:{t.precision}:{t.scale}"
    if pa.types.is_timestamp(t):
        return f"{'tsz' if t.tz else 'ts'}:{t.unit}"
    raise SchemaError(f"column {name!r}: the PyFlink sink cannot carry type {t} yet")


def _input_field_names(ds: Any) -> Optional[list[str]]:
    """The field names of a DataStream of Rows (a Python ``output_type`` or a Table's stream), or
    None when its records are not Rows that Java can read (e.g. pickled Python objects)."""
    j_type = ds._j_data_stream.getType()
    cls = j_type.getClass().getName()
    if cls == "org.apache.flink.api.java.typeutils.RowTypeInfo":
        return [str(n) for n in j_type.getFieldNames()]
    if cls.endswith("ExternalTypeInfo"):
        logical = j_type.getDataType().getLogicalType()
        if logical.getClass().getName().endswith(".RowType"):
            return [str(n) for n in logical.getFieldNames()]
    return None


def _column_order(input_names: Sequence[str], names: Sequence[str], table_path: str) -> list[int]:
    """Input field index of each table column: by name when the input has every table column, else by
    position when the counts agree."""
    if set(names) <= set(input_names):
        at = {n: i for i, n in enumerate(input_names)}
        return [at[n] for n in names]
    if len(input_names) == len(names):
        return list(range(len(names)))
    raise InvalidInputError(
        f"the input has columns {list(input_names)}; the table {table_path} has {list(names)}"
    )


def _java_batches(
    ds: Any,
    store: Any,
    changelog: bool,
    drop_update_before: bool,
    flush_ms: int,
    env: Any,
    balance: Optional[int],
) -> Any:
    """Step 1 on the JVM: ``RowBatcher`` (lakelog's Java operator, chained to the input) gathers the
    rows into Arrow batches of the table's types, emitted every ``flush_ms``, at ``MAX_BATCH_ROWS`` /
    ``MAX_BATCH_BYTES``, before each checkpoint barrier and at end of input; a Python flat-map
    (:class:`BatchSplitter`) cuts each batch into one blob per (partition, bucket). Rows never
    cross into Python one by one."""
    from pyflink.common import Types
    from pyflink.datastream import FlatMapFunction
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway

    from lakelog.operators import jvm as lakelog_jvm

    schema = store.schema.arrow_schema()
    names = list(schema.names)
    table_path = str(store.path)
    input_names = _input_field_names(ds)
    if input_names is None:
        from pyflink.datastream import MapFunction

        class TableRow(_TableRow, MapFunction):  # type: ignore[misc]
            pass

        ds = ds.map(TableRow(names), output_type=row_type_of(schema)).name("lakelog-typed-rows")
        input_names = names
    order = _column_order(input_names, names, table_path)
    lakelog_jvm.add_to(env)
    gateway = get_gateway()
    jvm = gateway.jvm

    def array(kind: Any, values: Sequence[Any]) -> Any:
        arr = gateway.new_array(kind, len(values))
        for i, v in enumerate(values):
            arr[i] = v
        return arr

    codes = [java_type_code(f.type, f.name) for f in schema]
    batcher = jvm.lakelog.flink.RowBatcher(
        table_path,
        array(jvm.String, names),
        array(jvm.String, codes),
        array(jvm.boolean, [f.nullable for f in schema]),
        array(jvm.int, order),
        KIND_FIELD if changelog else None,
        drop_update_before,
        int(flush_ms),
        MAX_BATCH_ROWS,
        MAX_BATCH_BYTES,
    )
    j_in = ds._j_data_stream
    typeinfo = jvm.org.apache.flink.api.common.typeinfo
    byte_array = typeinfo.PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO
    name = os.path.basename(os.path.normpath(table_path))
    j_batches = j_in.transform(f"lakelog-batcher-{name}", byte_array, batcher)
    j_batches.setParallelism(j_in.getParallelism())  # chained to the input

    class Splitter(FlatMapFunction):  # type: ignore[misc]
        def __init__(self) -> None:
            self.splitter = BatchSplitter(table_path, balance)

        def flat_map(self, value: Any) -> Iterator[Any]:
            from pyflink.common import Row

            for blob in self.splitter.split(value):
                yield Row(blob)

    return (
        DataStream(j_batches)
        .flat_map(Splitter(), output_type=Types.ROW([Types.PRIMITIVE_ARRAY(Types.BYTE())]))
        .name(f"lakelog-split-{name}")
        .set_parallelism(int(j_in.getParallelism()))
    )


class _BlobKey:
    """Key selector of the writer stage: the (partition, bucket) key that prefixes a blob."""

    def get_key(self, value: Any) -> str:
        return blob_key(value[0])


def _write_and_commit(
    blobs: Any,
    store: Any,
    env: Any,
    is_batch: bool,
    flush_ms: Optional[int],
    channel_dir: Optional[str],
    commit_user: Optional[str],
    write_only: Optional[bool],
    parallelism: Optional[int],
    max_parallelism: Optional[int],
    poll_interval_ms: int,
    restart_wait_s: float,
) -> None:
    """Steps 2-5: key_by(partition, bucket) -> writers -> commit channel -> committer."""
    from pyflink.common import Types
    from pyflink.common.serialization import Encoder
    from pyflink.datastream import KeySelector
    from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, RollingPolicy

    table_path = str(store.path)
    name = os.path.basename(os.path.normpath(table_path))
    user = commit_user or str(uuid.uuid4())
    run_token = uuid.uuid4().hex
    channel: Optional[str] = None
    if not is_batch:
        channel = channel_dir or os.path.join(tempfile.gettempdir(), f"lakelog-sink-{user}-{run_token[:8]}")
        os.makedirs(channel, exist_ok=True)

    class BlobKey(_BlobKey, KeySelector):  # type: ignore[misc]
        pass

    writer = _make_writer(
        table_path, user, run_token, channel, write_only, is_batch, flush_ms, restart_wait_s
    )
    committables = (
        blobs.key_by(BlobKey(), key_type=Types.STRING())
        .process(writer, output_type=Types.STRING())
        .name(f"lakelog-writer-{name}")
    )
    if parallelism:
        committables = committables.set_parallelism(parallelism)
    if max_parallelism is not None:  # pinned: the blob keys were salted for these key groups
        committables = committables.set_max_parallelism(max_parallelism)
    if channel is not None:
        file_sink = (
            FileSink.for_row_format("file://" + os.path.abspath(channel), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build()
        )
        committables.sink_to(file_sink).name(f"lakelog-channel-{name}").set_parallelism(1)
    committer = _make_committer(table_path, user, run_token, channel, poll_interval_ms)
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


def _discard(ds: Any) -> None:
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    j_sink = jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name("lakelog-end").set_parallelism(1)


def sink_table_to_lakelog(t_env: Any, table: Any, table_path: str, **kwargs: Any) -> None:
    """Write a Flink ``Table`` into a lakelog table; see :func:`sink_to_lakelog`. An insert-only
    table goes in as is; an updating one (e.g. a streaming GROUP BY) as its changelog."""
    try:
        ds = t_env.to_data_stream(table)
        changelog = False
    except Exception as exc:  # the planner refuses an updating table here
        if "update" not in str(exc).lower() and "delete" not in str(exc).lower():
            raise
        ds = t_env.to_changelog_stream(table)
        changelog = True
    sink_to_lakelog(ds, table_path, changelog=changelog, **kwargs)


def wait_for(predicate: Any, timeout_s: float = 30.0, step_s: float = 0.2) -> bool:
    """Poll ``predicate()`` until true or ``timeout_s`` passes (a small helper for jobs/tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())
