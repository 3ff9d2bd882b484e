"""Reading data files as lakelog's Arrow types, whichever layout wrote them.

Layouts met in Paimon tables, and what a column becomes:

* INT96 (TIMESTAMP(7..9) as Paimon writes them): read from the 12 stored bytes, exact to the
  nanosecond over the whole range of the column's Arrow type, an error outside it
  (:mod:`~lakelog.connector.format.int96`); lakelog's own INT96, which holds nanosecond timestamps
  only (its files say so), as pyarrow reads it.
* a plain INT64 where the column is a timestamp: the value in Paimon's unit for the precision,
  milliseconds for 0..3 and microseconds for 4..6, as Paimon Java reads it.
* INT64 nanoseconds (lakelog's TIMESTAMP(7..9) before INT96), millisecond TIMESTAMP(0) (Paimon),
  INT32/INT64 or FIXED_LEN_BYTE_ARRAY decimals, lists whose element is called ``element``: cast.

Every table returned carries the file schema's types and no Parquet field-id metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Optional, Union

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.connector.errors import UnrepresentableValueError
from lakelog.connector.format import int96, parquet_footer
from lakelog.connector.format.arrow_leaves import map_leaves

__all__ = ["to_logical", "conform", "readable"]


def _timestamp_from_int64(arr: pa.Array, target: pa.TimestampType) -> pa.Array:
    """A plain INT64 read as a timestamp column: Paimon's unit for the precision (TIMESTAMP(0),
    Arrow unit ``s``, is stored in milliseconds)."""
    if target.unit != "s":
        return arr.view(target)
    return arr.view(pa.timestamp("ms", tz=target.tz)).cast(target)


def to_logical(arr: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    """``arr``, as read from a data file, as lakelog's Arrow type ``target`` (nested types leaf by leaf)."""

    def leaf(a: pa.Array, want: pa.DataType) -> pa.Array:
        t = a.type
        if pa.types.is_timestamp(want) and pa.types.is_fixed_size_binary(t) and t.byte_width == 12:
            return int96.timestamps(a, want, where)
        if pa.types.is_timestamp(want) and pa.types.is_int64(t):
            return _timestamp_from_int64(a, want)
        try:
            return a.cast(want)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise UnrepresentableValueError(f"{where}: cannot read stored {t} as {want}: {e}") from None

    return map_leaves(arr, target, leaf)


def _default_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type of a stored type when the caller names none: INT96 (read as 12 bytes) becomes
    pyarrow's ``timestamp[ns]``."""
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 12:
        return pa.timestamp("ns")
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_default_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_default_type(t.key_type)),
                       t.item_field.with_type(_default_type(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_default_type(t.field(i).type)) for i in range(t.num_fields)])
    return t


def conform(table: pa.Table, schema: Optional[pa.Schema], path: str) -> pa.Table:
    """``table`` (read from data file ``path``) with the types ``schema`` gives its columns, and no
    field metadata. Columns ``schema`` does not name keep their stored type (INT96 as nanoseconds)."""
    types = {f.name: f.type for f in schema} if schema is not None else {}
    fields = []
    columns = []
    for i, f in enumerate(table.schema):
        want = types.get(f.name)
        if want is None:
            want = _default_type(f.type)
        col: Union[pa.ChunkedArray, pa.Array] = table.column(i)
        if not f.type.equals(want, check_metadata=True):
            where = f"data file {path}, column {f.name!r}"
            col = pa.chunked_array([to_logical(c, want, where) for c in col.chunks], type=want)
        fields.append(pa.field(f.name, want, f.nullable))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@contextlib.contextmanager
def readable(f: pq.ParquetFile, path: str, columns: Optional[Sequence[str]]) -> Iterator[pq.ParquetFile]:
    """``f``, or, when the columns to read hold INT96 values that lakelog did not write, ``path``
    opened with those read as their 12 bytes. (lakelog writes INT96 from nanosecond timestamps only,
    which pyarrow reads exactly.)"""
    if parquet_footer.int96_from_lakelog(f) or not int96.int96_columns(f, columns):
        yield f
        return
    with parquet_footer.binary_view(path) as view:
        yield view
