"""How the sink's rows travel from the batching stage to the writers, without Flink.

A **blob** is one (partition, bucket)'s share of one batch of rows: the writer key, a newline, then
an Arrow IPC stream of the group's rows in arrival order, with the RowKinds as an int8 column
``KIND_FIELD`` for changelog input. A key without rows is a **flush marker** (write what you hold;
a checkpoint barrier follows), and a blob without key and rows is ``WAKE_BLOB`` (pass a ``WAKE`` to
the committer). Keys are made by :class:`lakelog.operators.sink_keys.KeyEncoder`.

* :class:`BatchSplitter`: the Python stage after lakelog's Java ``RowBatcher`` (one Arrow batch
  in, one blob per (partition, bucket) out; flush markers for the batcher's empty record);
* :class:`BatchEncoder`: the body of the pandas UDF of the Python-only path (``java=False``);
* :func:`java_type_code`: the ``RowBatcher``'s type code of each column.

The operators that run these are in :mod:`lakelog.operators.sink`; the design is in
``operators/README.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import InvalidInputError, SchemaError

__all__ = [
    "KIND_FIELD",
    "WAKE_BLOB",
    "encode_blob",
    "decode_blob",
    "decode_group",
    "open_store",
    "SinkRouting",
    "sink_routing",
    "blob_key",
    "flush_marker",
    "is_flush_marker",
    "read_batch",
    "BatchSplitter",
    "BatchEncoder",
    "java_type_code",
    "column_order",
    "needs_null_mask",
    "MAX_BATCH_ROWS",
    "MAX_BATCH_BYTES",
]

KIND_FIELD = "__lakelog_kind"

# ---- blobs --------------------------------------------------------------------------------------
BLOB_SEP = b"\n"


TOTAL_BUCKETS_META = b"lakelog.total-buckets"


def encode_blob(
    key: str, table: pa.Table, kinds: Optional[np.ndarray], total_buckets: Optional[int] = None
) -> bytes:
    """``key`` + newline + an Arrow IPC stream of ``table`` (plus the row kinds as an int8 column);
    ``total_buckets``: the bucket count the rows were routed by (their partition's), kept in the
    stream's schema metadata so that the writer can check it routes by the same count."""
    if kinds is not None:
        table = table.append_column(KIND_FIELD, pa.array(kinds, pa.int8()))
    if total_buckets is not None:
        table = table.replace_schema_metadata({TOTAL_BUCKETS_META: str(int(total_buckets)).encode()})
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


def read_batch(data: Any) -> tuple[pa.Table, Optional[np.ndarray]]:
    """(rows, int8 row kinds or None for insert-only) of an Arrow IPC stream whose RowKinds, if
    any, are the column ``KIND_FIELD``."""
    table, kinds, _ = _read_group(data)
    return table, kinds


def _read_group(data: Any) -> tuple[pa.Table, Optional[np.ndarray], Optional[int]]:
    table = pa.ipc.open_stream(data).read_all()
    meta = table.schema.metadata or {}
    total = meta.get(TOTAL_BUCKETS_META)
    total_buckets = int(total) if total is not None else None
    if meta:
        table = table.replace_schema_metadata(None)
    if KIND_FIELD not in table.column_names:
        return table, None, total_buckets
    i = table.schema.get_field_index(KIND_FIELD)
    kinds = table.column(i).to_numpy().astype(np.int8)
    return table.remove_column(i), kinds, total_buckets


def decode_blob(blob: bytes) -> tuple[pa.Table, Optional[np.ndarray]]:
    """(rows, int8 row kinds or None for insert-only) of a blob made by :func:`encode_blob`."""
    return read_batch(memoryview(blob)[blob.index(BLOB_SEP) + 1 :])


def decode_group(blob: bytes) -> tuple[pa.Table, Optional[np.ndarray], Optional[int]]:
    """(rows, int8 row kinds or None, the bucket count the rows were routed by or None) of a blob
    made by :func:`encode_blob`."""
    return _read_group(memoryview(blob)[blob.index(BLOB_SEP) + 1 :])


def needs_null_mask(t: pa.DataType) -> bool:
    """Columns whose nulls pandas cannot carry losslessly (ints become floats, NaN means null): the
    sink passes their null mask beside them."""
    return pa.types.is_integer(t) or pa.types.is_floating(t)


class SinkRouting:
    """How the sink's split stage keys a table's rows, i.e. which rows meet in one writer."""

    BUCKET = "bucket"  # fixed buckets, append tables: one writer key per (partition, bucket)
    PARTITION = "partition"  # dynamic buckets: one writer key per partition (its TableWrite assigns)
    SINGLE = "single"  # cross-partition upsert: one writer key for every row (a key moves between partitions)


def sink_routing(store: Any) -> str:
    """The :class:`SinkRouting` of a table. Paimon's rule is that the keys of one partition meet one
    bucket assigner: a dynamic-bucket table (``bucket = -1`` with a primary key holding every
    partition field) sends each partition to one writer, whose ``TableWrite`` assigns the buckets
    and keeps the partition's hash index; a cross-partition upsert table (a primary key without
    every partition field, dynamic or fixed buckets) sends every row to one writer, whose key index
    covers the whole table, so its writers run with parallelism 1 in effect."""
    from lakelog.connector.format.schema import BucketMode

    schema = store.schema
    if schema.cross_partition_update:
        return SinkRouting.SINGLE
    if schema.bucket_mode in (BucketMode.HASH_DYNAMIC, BucketMode.KEY_DYNAMIC):
        return SinkRouting.PARTITION
    return SinkRouting.BUCKET


def open_store(table_path: str, schema_id: Optional[int], io: Optional[Any] = None) -> Any:
    """The table's ``TableStore`` with schema ``schema_id`` (the one the sink was planned with, so
    that every stage of a job routes and writes by one schema whatever ALTERs happen meanwhile;
    None: the latest), opened through ``io`` (the object-store file IO the job ships; None: local)."""
    from lakelog.operators.table_ref import adopt_io, store_with_options

    adopt_io(table_path, io)
    return store_with_options(table_path, None, schema_id)


class _Grouper:
    """Groups a batch of rows by (partition, bucket) with the storage's vectorised bucket function and
    encodes one blob per group, prefixed by the group's (salted, balanced) writer key.

    A fixed-bucket partition is routed by its own bucket count: the count its live files record,
    learned from the latest snapshot when the grouper first sees the partition, else the count of
    the schema the sink was planned with (a rescaled table keeps each old partition's count until
    it is rewritten). The blob carries that count; the writer checks it routes by the same one.

    Tables whose rows need a bucket assigner are not hashed here (see :func:`sink_routing`): a
    dynamic-bucket table gets one blob per partition (key ``<partition>:0``, routed count -1, which
    the writer's ``TableWrite`` also reports for the partition), a cross-partition table one blob
    per batch, all rows in arrival order (a key may change partition within a batch), under one
    key; the writer's ``TableWrite`` then routes the rows as a plain-Python write does."""

    def __init__(
        self,
        table_path: str,
        max_parallelism: Optional[int],
        schema_id: Optional[int] = None,
        *,
        overwrite: bool = False,
        io: Optional[Any] = None,
    ) -> None:
        self.table_path = table_path
        self.max_parallelism = max_parallelism
        self.schema_id = schema_id
        self.io = io  # the table's object-store file IO (None: local)
        self.overwrite = overwrite  # an overwrite rewrites every partition with the table's count
        self._ready = False

    def _setup(self) -> None:
        from lakelog.connector.format.schema import BucketMode
        from lakelog.connector.table.routing import PartitionBucketCounts
        from lakelog.operators.sink_keys import KeyEncoder

        self.store = open_store(self.table_path, self.schema_id, self.io)
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
        fixed = schema.bucket_mode == BucketMode.HASH_FIXED
        self.routing = sink_routing(self.store)
        self.counts = (
            PartitionBucketCounts(self.store, num_buckets, rewrite=self.overwrite)
            if fixed and self.routing == SinkRouting.BUCKET
            else None
        )
        self._ready = True

    def blobs(self, table: pa.Table, kinds: Optional[np.ndarray]) -> Iterator[bytes]:
        from lakelog.connector.table.routing import bucket_groups, partition_groups

        if self.routing == SinkRouting.SINGLE:
            if table.num_rows:
                yield encode_blob(self.single_key(), table, kinds)
            return
        if self.routing == SinkRouting.PARTITION:
            for g in partition_groups(self.store, table):
                yield encode_blob(
                    self.keys.key_for(g.values, 0),
                    table.take(pa.array(g.rows)),
                    None if kinds is None else kinds[g.rows],
                    total_buckets=-1,
                )
            return
        counts = self.counts
        for values, partition, bucket, rows in bucket_groups(self.store, table, counts):
            idx = pa.array(rows)
            n = counts.count(partition) if counts is not None else None
            yield encode_blob(
                self.keys.key_for(values, bucket, n),
                table.take(idx),
                None if kinds is None else kinds[rows],
                total_buckets=n,
            )


    def single_key(self) -> str:
        """The one writer key of a cross-partition table (the key of its empty partition)."""
        from lakelog.connector.format.binary_row import serialize_row

        return f"{serialize_row([], []).hex()}:0"


class BatchSplitter(_Grouper):
    """The sink's Python stage after the Java ``RowBatcher``: one Arrow IPC batch in (the table's
    Arrow types, plus the RowKind column for a changelog), one blob per (partition, bucket) out."""

    def __init__(
        self,
        table_path: str,
        max_parallelism: Optional[int],
        schema_id: Optional[int] = None,
        *,
        overwrite: bool = False,
        io: Optional[Any] = None,
    ) -> None:
        super().__init__(table_path, max_parallelism, schema_id, overwrite=overwrite, io=io)
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
        table, kinds = read_batch(memoryview(data))
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
        self,
        table_path: str,
        changelog: bool,
        masks: Sequence[bool],
        max_parallelism: Optional[int],
        schema_id: Optional[int] = None,
        *,
        overwrite: bool = False,
        io: Optional[Any] = None,
    ) -> None:
        super().__init__(table_path, max_parallelism, schema_id, overwrite=overwrite, io=io)
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


# ---- the Java batcher ---------------------------------------------------------------------------
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

    def child(f: pa.Field) -> str:
        flag = "n" if f.nullable else "r"
        return f"{f.name.encode('utf-8').hex()}~{flag}~{java_type_code(f.type, f'{name}.{f.name}')}"

    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list({child(t.value_field)})"
    if pa.types.is_map(t):
        return f"map({child(t.key_field)},{child(t.item_field)})"
    if pa.types.is_struct(t):
        return "row(" + ",".join(child(t.field(i)) for i in range(t.num_fields)) + ")"
    raise SchemaError(f"column {name!r}: the PyFlink sink cannot carry type {t} yet")


def column_order(input_names: Sequence[str], names: Sequence[str], table_path: str) -> list[int]:
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
