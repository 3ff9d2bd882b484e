"""The lakelog PyFlink sink: exactly-once writes of a changelog ``DataStream`` into a lakelog table.

Graph (the design and its guarantees: ``operators/README.md``)::

    rows --RowBatcher (Java, chained: Arrow batches of the table's types, RowKinds as a column)
         --BatchSplitFunction (one blob per (partition, bucket) and batch)
         --key_by(blob key)--> LakelogWriter (LSM files) --> committables
    committables --> channel + committer + end (lakelog.operators.channel)

Without a JDK (``java=False``) a pandas UDF does the batching (:class:`~.sink_blobs.BatchEncoder`)
and a Python flat-map reads the RowKinds first: the same blobs, slower.

This module imports pyflink; the Flink-free pieces are :mod:`.sink_blobs` (blob format, batch
splitting), :mod:`.sink_keys` (writer keys), :mod:`.codec` and :mod:`.committer`.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa
from pyflink.common import Row, RowKind, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    DataStream,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    RuntimeContext,
)
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway
from pyflink.table import DataTypes, StreamTableEnvironment
from pyflink.table.udf import udf

from lakelog.connector.errors import CommitConflictError, InvalidInputError, OptionError, SchemaError
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.options import ChangelogProducer, Duration, MergeEngine
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.eventual import EventualLogWriter
from lakelog.connector.table.log import log_config
from lakelog.connector.table.write import TableWrite
from lakelog.operators import jvm
from lakelog.operators.channel import CommitterConfig, channel_folder, commit_through_channel
from lakelog.operators.codec import Committable, encode_committable
from lakelog.operators.committer import (
    END_OF_INPUT,
    WAKE,
    ChannelReader,
    OverwriteRequest,
    SinkCommitter,
    commit_released,
)
from lakelog.operators.flink_types import row_type_of, type_info_of
from lakelog.operators.sink_blobs import (
    KIND_FIELD,
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    WAKE_BLOB,
    BatchEncoder,
    BatchSplitter,
    blob_key,
    column_order,
    decode_blob,
    decode_group,
    is_flush_marker,
    java_type_code,
    needs_null_mask,
)
from lakelog.operators.sink_keys import default_max_parallelism, flink_key_group, parse_key
from lakelog.operators.table_ref import (
    TableLike,
    adopt_io,
    store_with_options,
    table_io,
    table_lock,
    table_path,
)

__all__ = [
    "sink_to_lakelog",
    "sink_table_to_lakelog",
    "row_type_of",
    "upsert_only",
    "SinkPlan",
    "WriterConfig",
    "InputRows",
    "LakelogWriter",
    "TableRowMap",
    "KindColumnFlatMap",
    "BatchSplitFunction",
    "BlobKeySelector",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_MS = 300
COMPACTION_POLL_MS = 500  # how often a writer looks at a running compaction without a flush interval
DEFAULT_BATCH_MS = 1000  # how long the Java batcher holds rows without a flush interval
# an eventual Kafka log gets rows as they reach the writers: the batcher holds them briefly
EVENTUAL_LOG_BATCH_MS = 100


# ---- the plan: everything decided on the client ------------------------------------------------------
@dataclass(frozen=True)
class WriterConfig:
    """What each writer subtask needs (picklable)."""

    table_path: str
    commit_user: str
    run_token: str
    channel_dir: Optional[str]  # None in BATCH mode
    write_only: Optional[bool]  # None: the table's write-only option
    batch: bool
    flush_ms: Optional[int]  # timed flushes (None: on markers and buffer size only; 0: every blob)
    restart_wait_s: float
    options: tuple[tuple[str, str], ...] = ()  # dynamic table options over the stored ones
    schema_id: Optional[int] = None  # the schema the sink was planned with (None: the latest)
    overwrite: bool = False  # an INSERT OVERWRITE's writers: previous files ignored (TableWrite)
    io: Optional[FileIO] = None  # the table's object-store file IO (None: local)

    def store(self) -> TableStore:
        adopt_io(self.table_path, self.io)
        return store_with_options(self.table_path, dict(self.options), self.schema_id)


@dataclass(frozen=True)
class SinkPlan:
    """One sink's graph, decided on the client by :func:`sink_to_lakelog`."""

    table_path: str
    batch: bool
    changelog: bool
    drop_update_before: bool
    java: bool
    batch_ms: Optional[int]  # Java: the RowBatcher's flush interval; Python-only: the UDF bundle time
    writer: WriterConfig
    committer: CommitterConfig
    parallelism: Optional[int]
    max_parallelism: Optional[int]  # the writers' key groups (pinned: the blob keys are salted for them)
    balance: Optional[int]  # max parallelism the blob keys are balanced for, None: plain keys
    schema_id: Optional[int] = None  # every stage routes and writes by this schema

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.table_path))


# ---- input rows ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputRows:
    """The table's column names, in order; ``drop_update_before`` for changelog input."""

    names: tuple[str, ...]
    drop_update_before: bool = False


class _RowValues:
    """Any record (a ``Row``, a tuple, a list) -> the table's column values: by field name when
    the row has names that cover the table's, else by position."""

    def __init__(self, config: InputRows) -> None:
        self.config = config
        self._orders: dict[tuple[str, ...], list[int]] = {}

    def values_of(self, row: Any) -> list[Any]:
        names = list(self.config.names)
        d = row.__dict__ if isinstance(row, Row) else None
        if d is not None and "_values" in d:
            values: list[Any] = d["_values"]
            fields = d.get("_fields")
        else:
            values, fields = list(row), None
        if fields is not None and fields != names:
            order = self._orders.get(tuple(fields))
            if order is None:
                try:
                    at = {n: i for i, n in enumerate(fields)}
                    order = [at[n] for n in names]
                except KeyError as exc:
                    raise InvalidInputError(f"input row lacks column {exc.args[0]!r}") from None
                self._orders[tuple(fields)] = order
            return [values[i] for i in order]
        if len(values) != len(names):
            raise InvalidInputError(f"input row has {len(values)} fields; the table has {names}")
        return values


class TableRowMap(_RowValues, MapFunction):  # type: ignore[misc]
    """Records of an undeclared type -> ``Row``\\s of the table's columns, keeping their RowKind."""

    def map(self, row: Any) -> Any:
        out = Row(*self.values_of(row))
        if isinstance(row, Row):
            out.set_row_kind(row.get_row_kind())
        return out


class KindColumnFlatMap(_RowValues, FlatMapFunction):  # type: ignore[misc]
    """Changelog input of the Python-only path: ``Row`` with a RowKind -> ``Row(kind, *columns)``
    (an insert), -U rows dropped when asked."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self._out_names = [KIND_FIELD, *self.config.names]

    def flat_map(self, row: Any) -> Iterator[Any]:
        kind = row.get_row_kind().value if isinstance(row, Row) else 0
        if kind == 1 and self.config.drop_update_before:
            return
        out = Row.__new__(Row)
        d = out.__dict__
        d["_values"] = [kind, *self.values_of(row)]
        d["_fields"] = self._out_names
        d["_from_dict"] = False
        d["_row_kind"] = RowKind.INSERT
        yield out


# ---- batches -> blobs ------------------------------------------------------------------------------------
class BatchSplitFunction(FlatMapFunction):  # type: ignore[misc]
    """The flat-map after the ``RowBatcher``: one Arrow batch in, ``Row(blob)``\\s out
    (see :class:`~lakelog.operators.sink_blobs.BatchSplitter`)."""

    def __init__(
        self,
        table_path: str,
        balance: Optional[int],
        schema_id: Optional[int] = None,
        overwrite: bool = False,
        io: Optional[FileIO] = None,
    ) -> None:
        self.splitter = BatchSplitter(table_path, balance, schema_id, overwrite=overwrite, io=io)

    def flat_map(self, value: Any) -> Iterator[Any]:
        for blob in self.splitter.split(value):
            yield Row(blob)


class BlobKeySelector(KeySelector):  # type: ignore[misc]
    """The writers' key: the (partition, bucket) key that prefixes a blob."""

    def get_key(self, value: Any) -> str:
        return blob_key(value[0])


# ---- the writer ------------------------------------------------------------------------------------------
class LakelogWriter(KeyedProcessFunction):  # type: ignore[misc]
    """Keyed by (partition, bucket); one call per blob (a batch of the key's rows), not per row.

    STREAMING: the key's blobs wait in keyed ListState until a flush marker for the key arrives
    (ahead of each checkpoint barrier), its buffered bytes reach ``write-buffer-size``, or (with
    ``flush_ms``) a processing-time timer fires (``flush_ms == 0``: each blob as it arrives). A
    flush writes them through the key's ``TableWrite`` (one level-0 file), clears the state and
    emits one committable, all in the same call. A compaction still running at a flush is looked at
    again by a timer, so that its result is committed without new rows. End of input (an event-time
    timer at ``END_OF_INPUT``) flushes and emits what is left, waiting for compactions.
    BATCH: blobs go straight into the TableWrite's buffer; end of input commits.

    A key's first flush in a process waits until its last committable from before a restart is
    committed (``restart_wait_s``, then it fails naming it). Why, and the timers registered again
    by a key's first element: "Restarts" in ``operators/README.md``."""

    def __init__(self, config: WriterConfig) -> None:
        self.config = config

    def open(self, runtime_context: RuntimeContext) -> None:
        self.store = self.config.store()
        self.pk = bool(self.store.schema.primary_keys)
        self.buffer_limit = int(self.store.options.write_buffer_size)
        self.writes: dict[str, TableWrite] = {}
        self.sizes: dict[str, int] = {}
        self.armed: set[str] = set()  # end-of-input timer registered (per process)
        self.timed: set[str] = set()  # flush timer pending
        self.view: Optional[SinkCommitter] = None  # what the commit user committed (restarted keys)
        self.reader: Optional[ChannelReader] = None
        self.buf = runtime_context.get_list_state(
            ListStateDescriptor("blobs", Types.PRIMITIVE_ARRAY(Types.BYTE()))
        )
        self.last_id = runtime_context.get_state(ValueStateDescriptor("last_id", Types.STRING()))
        self.log: Optional[EventualLogWriter] = None  # eventual logs get each blob as it arrives
        config = log_config(self.store)
        if config is not None and not config.transactional and not self.config.batch:
            self.log = EventualLogWriter(config, self.config.commit_user)

    def close(self) -> None:
        for w in getattr(self, "writes", {}).values():
            w.close()

    def process_element(self, value: Any, ctx: Any) -> Optional[Iterator[str]]:
        blob = value[0]
        if blob == WAKE_BLOB:  # sent with every checkpoint's flush markers
            return iter((WAKE,))
        batch, flush_ms = self.config.batch, self.config.flush_ms
        key = blob_key(blob)
        if key not in self.armed:
            ctx.timer_service().register_event_time_timer(END_OF_INPUT)
            self.armed.add(key)
        if is_flush_marker(blob):
            return None if batch else self._flush(key, ctx)
        if batch:
            self._write(key, [blob])
            return None
        if self.log is not None:
            self._send_to_log(key, blob)
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
            if not self.config.batch:
                yield from self._flush(key, ctx)
            w = self.writes.get(key)
            if w is not None:
                yield from self._emit(key, w.prepare_commit(wait_compaction=True))
            return
        self.timed.discard(key)
        yield from self._flush(key, ctx)

    def _ready(self, key: str) -> None:
        """Before the key's first write in this process: its last committable from before a
        restart must be committed first."""
        if self.config.batch or key in self.writes:
            return
        last = self.last_id.value()
        if last:
            self._commit_restored(last)

    def _commit_restored(self, last: str) -> None:
        """Commit what the channel released until ``last`` is committed (any party of the commit
        user may; the committer may not be running yet). Fails after ``restart_wait_s`` naming the
        committable (a channel that lost its files)."""
        cfg = self.config
        if self.view is None:  # one per process: later keys only read the newer snapshots
            self.view = SinkCommitter(self.store, cfg.commit_user, cfg.run_token)
            self.reader = ChannelReader(cfg.channel_dir) if cfg.channel_dir else None
        view = self.view
        view.refresh()
        deadline = time.monotonic() + cfg.restart_wait_s
        while last not in view.done:
            if self.reader is not None and commit_released(view, self.reader) is not None:
                log.info("writer of %s committed what the channel released after a restart", cfg.table_path)
            view.refresh()
            if last in view.done:
                break
            if time.monotonic() > deadline:
                raise CommitConflictError(
                    f"writer of {cfg.table_path}: committable {last} from before the restart was not "
                    f"committed within {cfg.restart_wait_s:.0f} s; is the commit channel intact?"
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
            self._arm(key, ctx, self.config.flush_ms or COMPACTION_POLL_MS)

    def _write(self, key: str, blobs: list[bytes]) -> TableWrite:
        parts = [decode_group(b) for b in blobs]
        table = pa.concat_tables([t for t, _, _ in parts]) if len(parts) > 1 else parts[0][0]
        changes = [k for _, k, _ in parts if k is not None]
        kinds = (np.concatenate(changes) if len(changes) > 1 else changes[0]) if changes else None
        w = self._writer(key)
        self._check_count(key, w, {n for _, _, n in parts if n is not None})
        if self.pk:
            if kinds is None:
                w.write(table)
            else:
                w.write_changes(table, kinds)
        else:
            if kinds is not None and ((kinds == 1) | (kinds == 3)).any():
                raise InvalidInputError(
                    f"append table {self.config.table_path} got retraction rows (-U/-D); "
                    "only +I/+U can be appended"
                )
            w.write(table)
        return w

    def _check_count(self, key: str, w: TableWrite, routed: set[int]) -> None:
        """The splitter routed the key's rows by its partition's bucket count as it learned it; the
        key's TableWrite routes them again by the count it learned (both from the partition's live
        files, else the planned schema's ``bucket``). They differ only when the partition was
        rescaled (overwritten) while the job ran: fail rather than write keys into the wrong
        buckets (the commit would refuse the files anyway, as Paimon refuses them)."""
        if not routed:
            return
        partition, bucket = parse_key(key)
        own = w.total_buckets(partition)
        if routed != {own}:
            from lakelog.connector.table.commit import partition_label

            raise CommitConflictError(
                f"sink into {self.config.table_path}: bucket {bucket} of "
                f"{partition_label(self.store, partition)} got rows routed by {sorted(routed)} buckets, "
                f"but the partition's files record {own}: it was rescaled while this job ran. "
                "Rescale partitions while no job writes into them (stop the job, rescale, start it again)"
            )

    def _send_to_log(self, key: str, blob: bytes) -> None:
        assert self.log is not None
        table, kinds = decode_blob(blob)
        codes = np.zeros(table.num_rows, dtype=np.int8) if kinds is None else kinds
        w = self._writer(key)
        self.log.send(w.conformed(table), codes, w.row_buckets(table), w.schema.id)

    def _emit(self, key: str, msgs: list[Any]) -> Iterator[str]:
        if not msgs:
            return
        offsets = self.log.flush() if self.log is not None else None
        w = self.writes[key]
        view = w.view_snapshot_id if w.schema.cross_partition_update else None
        c = Committable(uuid.uuid4().hex, key, msgs, w.commit_properties(), offsets, view)
        if not self.config.batch:
            self.last_id.update(c.id)
        yield encode_committable(c)

    def _writer(self, key: str) -> TableWrite:
        w = self.writes.get(key)
        if w is None:
            # the key's only writer (see sink_routing); its previous flush may not be committed yet
            # when it flushes again, so it never reloads its index from the latest snapshot
            cfg = self.config
            w = TableWrite(cfg.store(), write_only=cfg.write_only, keep_view=True, overwrite=cfg.overwrite)
            self.writes[key] = w
        return w


# ---- the graph -------------------------------------------------------------------------------------------
def _python_batches(ds: DataStream, store: TableStore, plan: SinkPlan) -> DataStream:
    """Blobs made by a pandas UDF (the Python-only path): Flink buffers the rows on the Java side
    and hands them over as Arrow batches (at most a bundle time old, and always before a checkpoint
    barrier)."""
    schema = store.schema.arrow_schema()
    names = list(schema.names)
    env = ds.get_execution_environment()
    # every step up to the writers' key_by runs at the input's parallelism, so that Flink connects
    # them one to one (forward): a rebalance would interleave one key's rows from one input subtask
    # over several subtasks, and the writer could then take an older change for the newer one
    p_in = int(ds._j_data_stream.getParallelism())
    if plan.changelog:
        kinds_type = Types.ROW_NAMED(
            [KIND_FIELD, *names], [Types.BYTE()] + [type_info_of(f.type, f.name) for f in schema]
        )
        ds = (
            ds.flat_map(
                KindColumnFlatMap(InputRows(tuple(names), plan.drop_update_before)), output_type=kinds_type
            )
            .name(f"lakelog-kinds-{plan.name}")
            .set_parallelism(p_in)
        )
    t_env = StreamTableEnvironment.create(env)
    # the UDF's SQL operators take this table environment's default parallelism (it is new, and
    # only this sink's query is planned in it)
    t_env.get_config().set("table.exec.resource.default-parallelism", str(p_in))
    table = t_env.from_data_stream(ds)
    in_names = list(table.get_schema().get_field_names())
    in_types = list(table.get_schema().get_field_data_types())
    offset = 1 if plan.changelog else 0
    data_names = in_names[offset:]
    cols = [data_names[i] for i in column_order(data_names, names, plan.table_path)]
    nullable = {n: getattr(t, "_nullable", True) for n, t in zip(in_names, in_types)}
    args = [f"`{KIND_FIELD}`"] if plan.changelog else []
    masks = []
    for f, c in zip(schema, cols):
        masked = needs_null_mask(f.type) and nullable[c]
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
    encoder = BatchEncoder(
        plan.table_path,
        plan.changelog,
        masks,
        plan.balance,
        plan.schema_id,
        overwrite=plan.writer.overwrite,
        io=plan.writer.io,
    )
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
    if plan.batch_ms is not None:
        conf.set("python.fn-execution.bundle.time", str(plan.batch_ms))
    query = t_env.sql_query(
        f"SELECT b FROM (SELECT `{func}`({', '.join(args)}) AS b FROM `{view}`) WHERE b IS NOT NULL"
    )
    return t_env.to_data_stream(query)


def _input_field_names(ds: DataStream) -> Optional[list[str]]:
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


def _java_batches(ds: DataStream, store: TableStore, plan: SinkPlan) -> DataStream:
    """Blobs from lakelog's ``RowBatcher`` (Java, chained to the input: Arrow batches of the table's
    types, emitted every ``batch_ms``, at ``MAX_BATCH_ROWS`` / ``MAX_BATCH_BYTES``, before each
    checkpoint barrier and at end of input), cut by :class:`BatchSplitFunction`. Rows never cross
    into Python one by one."""
    schema = store.schema.arrow_schema()
    names = list(schema.names)
    input_names = _input_field_names(ds)
    if input_names is None:
        p_in = int(ds._j_data_stream.getParallelism())  # forward, not rebalanced: keys stay in order
        ds = (
            ds.map(TableRowMap(InputRows(tuple(names))), output_type=row_type_of(schema))
            .name("lakelog-typed-rows")
            .set_parallelism(p_in)
        )
        input_names = names
    order = column_order(input_names, names, plan.table_path)
    jvm.add_to(ds.get_execution_environment())
    gateway = get_gateway()
    j = gateway.jvm

    def array(kind: Any, values: Sequence[Any]) -> Any:
        arr = gateway.new_array(kind, len(values))
        for i, v in enumerate(values):
            arr[i] = v
        return arr

    batcher = j.lakelog.flink.RowBatcher(
        plan.table_path,
        array(j.String, names),
        array(j.String, [java_type_code(f.type, f.name) for f in schema]),
        array(j.boolean, [f.nullable for f in schema]),
        array(j.int, order),
        KIND_FIELD if plan.changelog else None,
        plan.drop_update_before,
        int(plan.batch_ms or DEFAULT_BATCH_MS),
        MAX_BATCH_ROWS,
        MAX_BATCH_BYTES,
    )
    j_in = ds._j_data_stream
    byte_array = j.org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO
    j_batches = j_in.transform(f"lakelog-batcher-{plan.name}", byte_array, batcher)
    j_batches.setParallelism(j_in.getParallelism())  # chained to the input
    return (
        DataStream(j_batches)
        .flat_map(
            BatchSplitFunction(
                plan.table_path, plan.balance, plan.schema_id, plan.writer.overwrite, plan.writer.io
            ),
            output_type=Types.ROW([Types.PRIMITIVE_ARRAY(Types.BYTE())]),
        )
        .name(f"lakelog-split-{plan.name}")
        .set_parallelism(int(j_in.getParallelism()))
    )


class ArrivalStamp(TimestampAssigner):  # type: ignore[misc]
    """BATCH mode: each blob's timestamp is its place in its subtask's output (1, 2, ...). Flink
    sorts the input of a keyed operator by key and timestamp in BATCH mode; without distinct
    timestamps the blobs of one bucket could reach its writer out of order, and an older change
    of a key win."""

    def __init__(self) -> None:
        self.n = 0

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        self.n += 1
        return self.n


def _write_and_commit(blobs: DataStream, plan: SinkPlan) -> None:
    """key_by(partition, bucket) -> writers -> the commit tail."""
    if plan.batch:
        p = int(blobs._j_data_stream.getParallelism())
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ArrivalStamp())
        blobs = blobs.assign_timestamps_and_watermarks(strategy).name(f"lakelog-order-{plan.name}")
        blobs = blobs.set_parallelism(p)
    committables = (
        blobs.key_by(BlobKeySelector(), key_type=Types.STRING())
        .process(LakelogWriter(plan.writer), output_type=Types.STRING())
        .name(f"lakelog-writer-{plan.name}")
    )
    if plan.parallelism:
        committables = committables.set_parallelism(plan.parallelism)
    if plan.max_parallelism is not None:  # pinned: the blob keys were salted for these key groups
        committables = committables.set_max_parallelism(plan.max_parallelism)
    commit_through_channel(committables, plan.committer, label="lakelog", name=plan.name)


_sink_ids = itertools.count(1)


# ---- planning helpers ------------------------------------------------------------------------------------
def _writer_max_parallelism(env: Any, writer_parallelism: Optional[int]) -> Optional[int]:
    """The writers' max parallelism (number of key groups): the environment's if set, else Flink's
    default for the writer parallelism. None when the parallelism is unknown (then nothing is pinned)."""
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
    try:
        j = get_gateway().jvm
        assign = j.org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignToKeyGroup
        for i in range(64):
            key = f"{i * 7919:024x}:{i % 13}" + (f"~{i}" if i % 3 else "")
            row = j.org.apache.flink.types.Row(1)
            row.setField(0, key)
            if int(assign(row, max_parallelism)) != flink_key_group(key, max_parallelism):
                log.warning("Flink's key groups differ from lakelog's model; writer keys are not balanced")
                return False
        return True
    except Exception as exc:  # pragma: no cover - no gateway: do not balance
        log.warning("could not check Flink's key groups (%s); writer keys are not balanced", exc)
        return False


def _runtime_is_batch(env: Any) -> bool:
    try:
        conf = env._j_stream_execution_environment.getConfiguration()
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


def _python_option(env: Any, key: str, default: int) -> int:
    """An integer ``python.*`` option of the job's configuration, else ``default`` (Flink's)."""
    try:
        value = env._j_stream_execution_environment.getConfiguration().toMap().get(key)
        return int(str(value)) if value is not None else default
    except Exception:  # pragma: no cover - defensive: unknown gateway shapes
        return default


def _flush_ms(store: TableStore, flush_interval: Optional[Any]) -> Optional[int]:
    """The flush interval asked for (argument, else the table's ``sink.flush-interval``), or None."""
    if flush_interval is None:
        configured = store.options.sink_flush_interval
        return None if configured is None else max(1, int(configured.nanos // 1_000_000))
    if isinstance(flush_interval, int):
        return max(1, flush_interval)
    return max(1, int(Duration.parse(str(flush_interval)).nanos // 1_000_000))


def _eventual_log(store: TableStore) -> bool:
    config = log_config(store)
    return config is not None and not config.transactional


def _java_available() -> bool:
    """Whether lakelog's Java operators can be used: a cached jar, or a JDK to compile it. Without a
    JDK the sink warns and takes the Python-only path; a JDK whose ``javac`` fails raises
    :class:`~lakelog.operators.jvm.JavaCompileError`."""
    try:
        jvm.lakelog_jar()
        return True
    except jvm.JdkNotFoundError as exc:
        log.warning("lakelog sink: using the slower Python-only path (%s)", exc)
        return False


def _check_overwrite(store: TableStore, is_batch: bool) -> None:
    """An overwrite through the sink: batch only, and not where rows leave the written partitions
    (cross-partition upserts). A table's Kafka log gets nothing from it (batch writers publish
    nothing themselves, and an OVERWRITE snapshot publishes nothing, as with ``Table.overwrite``)."""
    where = f"overwrite of {store.path} through the sink"
    if not is_batch:
        raise OptionError(f"{where}: an overwrite commits once, at end of input; run it in batch mode")
    if store.schema.cross_partition_update:
        raise OptionError(
            f"{where}: the primary key {list(store.schema.primary_keys)} does not contain the partition "
            "fields (cross-partition upserts); use Table.overwrite"
        )


def upsert_only(store: TableStore) -> bool:
    """Whether the table needs only the new row of an update (Paimon's Flink sink decides the same):
    a primary-key table whose merge engine overwrites rows (deduplicate, first-row) and that keeps
    no input changelog. Its sink drops -U rows; otherwise a -U committed without its +U (they can
    fall into different flushes) would briefly delete the key."""
    opts = store.options
    return bool(store.schema.primary_keys) and (
        opts.changelog_producer != ChangelogProducer.INPUT
        and opts.merge_engine in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW)
    )


# ---- public entry points ---------------------------------------------------------------------------------
def sink_to_lakelog(
    ds: DataStream,
    table: TableLike,
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
    options: Optional[dict[str, str]] = None,
    overwrite: Optional[OverwriteRequest] = None,
) -> SinkPlan:
    """Write ``ds`` (a DataStream of Rows) into ``table`` (a lakelog ``Table`` or a table path)
    with exactly-once semantics; returns the plan the graph was built from.

    - ``changelog``: whether the rows' RowKinds matter (+I/-U/+U/-D). False is for insert-only
      streams (every row +I, e.g. upserts into a primary-key table); any other kind then fails the
      job loudly. Default: True for primary-key tables, False for append tables. (Free on the Java
      path; on the Python-only path True costs one more Python step per row.)
    - ``channel_dir``: folder of the checkpoint-gated commit channel (must be reachable by every
      TaskManager and survive restarts of the job). Default: a fresh folder under
      ``lakelog.commit-channel.dir`` when the job's configuration sets it, else the channel is kept
      in Flink state (lakelog's ``CommitGate``; without a JDK: a folder in the system temp dir).
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
    - ``drop_update_before``: drop -U rows (default: :func:`upsert_only`).
    - ``poll_interval_ms``: how often the committer looks for released committables.
    - ``restart_wait_s``: how long a restarted writer waits for its last committable from before the
      restart to be committed before it fails the job naming it (a broken channel, not a slow one).
    - ``java``: batch the rows on the JVM with lakelog's ``RowBatcher`` (compiled at first use, see
      :mod:`lakelog.operators.jvm`). Default: when a JDK (or an already built jar) is available,
      else the Python-only path with a warning. A JDK whose ``javac`` fails is an error.
    - ``options``: dynamic table options for this write (Paimon's hints and ``SET`` options), over
      the table's stored ones; immutable options cannot change.
    - ``overwrite``: commit the rows as one OVERWRITE snapshot at end of input (SQL ``INSERT
      OVERWRITE``; batch only, see :class:`~lakelog.operators.committer.OverwriteRequest`). Every
      partition written is rewritten with the table's bucket count. Not for cross-partition
      tables or tables with a Kafka log.

    The rows must be a DataStream of ``Row``\\s with a declared row type (``output_type=`` of the map
    that makes them, e.g. :func:`row_type_of` of the table; or a Table's stream); columns are matched
    by name when the input has every table column, else by position. Records of an undeclared
    (pickled) type (Rows, tuples or lists) pass a Python map into the table's row type first, which
    costs one Python step per row.
    """
    path = table_path(table)
    dyn = tuple(sorted((options or {}).items()))
    store = store_with_options(path, dict(dyn))
    env = ds.get_execution_environment()
    schema = store.schema.arrow_schema()
    for f in schema:  # fail on the client, before any job runs
        java_type_code(f.type, f.name)
    is_batch = _runtime_is_batch(env) if batch is None else batch
    if overwrite is not None:
        _check_overwrite(store, is_batch)
    asked = _flush_ms(store, flush_interval)
    if java is None:
        java = _java_available()
    # the blob keys are salted so that Flink spreads the buckets over the writers evenly; that needs
    # the writers' max parallelism pinned (key groups)
    max_p = _writer_max_parallelism(env, parallelism or env.get_parallelism())
    if java:
        # the writers flush on the batcher's flush markers (ahead of each checkpoint barrier), so
        # every row that reaches the sink before a barrier is published by that checkpoint, with
        # one file per bucket and upstream subtask; a flush interval adds timed flushes
        writer_flush: Optional[int] = asked
        default_ms = EVENTUAL_LOG_BATCH_MS if _eventual_log(store) else DEFAULT_BATCH_MS
        batch_ms: Optional[int] = asked or default_ms
    else:
        batch_ms = asked
        if asked is None:
            # no interval asked for: an eighth of the checkpoint interval (100 to 500 ms). A row
            # passes up to two such waits (the bundles of the job's Python map and of the sink's
            # UDF) before the checkpoint that publishes it, so this keeps freshness within
            # checkpoint interval + 2 s; a shorter bundle time of the job is kept
            bundle = _python_option(env, "python.fn-execution.bundle.time", 1000)
            ckpt = _checkpoint_interval_ms(env)
            eighth = max(100, min(ckpt // 8, 500)) if ckpt > 0 else bundle
            batch_ms = eighth if eighth < bundle else None
        # no flush markers on this path: each blob (one per key and UDF batch, i.e. per bundle
        # time) is written as it arrives, so no rows wait in writer state across a checkpoint
        # (after a restart nothing would flush them: PyFlink does not fire restored timers)
        writer_flush = 0
    user = commit_user or str(uuid.uuid4())
    run_token = uuid.uuid4().hex
    channel: Optional[str] = None
    if not is_batch:
        channel = channel_folder(env, channel_dir, f"lakelog-sink-{user}-{run_token[:8]}")
    plan = SinkPlan(
        table_path=path,
        batch=is_batch,
        changelog=bool(store.schema.primary_keys) if changelog is None else changelog,
        drop_update_before=upsert_only(store) if drop_update_before is None else drop_update_before,
        java=java,
        batch_ms=batch_ms,
        writer=WriterConfig(
            path, user, run_token, channel, write_only, is_batch, writer_flush, restart_wait_s, dyn,
            store.schema.id, overwrite is not None, table_io(table),
        ),
        committer=CommitterConfig(
            path, user, run_token, channel, poll_interval_ms, options=dyn, overwrite=overwrite,
            lock=table_lock(table), io=table_io(table), gated=not is_batch and channel is None,
        ),
        parallelism=parallelism,
        max_parallelism=max_p,
        balance=max_p if _key_groups_match_jvm(max_p) else None,
        schema_id=store.schema.id,
    )
    if not java:
        nested = [f.name for f in schema if pa.types.is_nested(f.type)]
        if nested:
            raise SchemaError(
                f"table {path}: the nested column(s) {nested} need lakelog's Java batcher (a JDK); the "
                "Python-only path of the sink carries atomic types only"
            )
    blobs = _java_batches(ds, store, plan) if java else _python_batches(ds, store, plan)
    _write_and_commit(blobs, plan)
    return plan


def sink_table_to_lakelog(t_env: Any, table: Any, target: TableLike, **kwargs: Any) -> SinkPlan:
    """Write a Flink ``Table`` into ``target`` (a lakelog ``Table`` or a table path); see
    :func:`sink_to_lakelog`. An insert-only table goes in as is; an updating one (e.g. a streaming
    GROUP BY) as its changelog."""
    try:
        ds = t_env.to_data_stream(table)
        changelog = False
    except Exception as exc:  # the planner refuses an updating table here
        if "update" not in str(exc).lower() and "delete" not in str(exc).lower():
            raise
        ds = t_env.to_changelog_stream(table)
        changelog = True
    return sink_to_lakelog(ds, target, changelog=changelog, **kwargs)
