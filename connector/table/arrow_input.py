"""Turning user input (Arrow, pandas) into Arrow tables of the table's schema, with clear errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa

from lakelog.connector.errors import InvalidInputError, SchemaError
from lakelog.connector.format.types import DataType
from lakelog.connector.table.coercion import coerce_column

__all__ = ["to_arrow_table", "conform"]


def to_arrow_table(data: Any) -> pa.Table:
    """Accept a pa.Table, pa.RecordBatch, pa.RecordBatchReader, pandas.DataFrame or list of dicts."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, list):
        return pa.Table.from_pylist(data)
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise InvalidInputError(
        f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, RecordBatchReader "
        "or pandas DataFrame"
    )


def conform(
    table: pa.Table,
    schema: pa.Schema,
    *,
    required: Sequence[str] | None = None,
    allow_missing: bool = False,
    types: Optional[Mapping[str, DataType]] = None,
    defaults: Optional[Mapping[str, pa.Scalar]] = None,
) -> pa.Table:
    """Reorder and cast ``table`` to ``schema``.

    Unknown columns raise :class:`SchemaError` naming them. A missing column is filled with nulls
    when it is nullable (or when ``allow_missing``); ``required`` columns must be present. A value
    that cannot be held exactly raises :class:`SchemaError` naming the column: Arrow's safe cast,
    plus, given the columns' Paimon ``types``, the rules of
    :mod:`lakelog.connector.table.coercion` (decimal scale, time zones, lengths). Nulls in a NOT
    NULL column raise :class:`InvalidInputError` naming the column. Columns with ``defaults``
    (``fields.<name>.default-value``) have their nulls filled, or are filled when missing.
    """
    names = set(table.column_names)
    extra = [c for c in table.column_names if schema.get_field_index(c) < 0]
    if extra:
        raise SchemaError(f"column(s) {extra} are not in the table schema (columns: {schema.names})")
    if len(names) != len(table.column_names):
        dup = sorted({c for c in table.column_names if table.column_names.count(c) > 1})
        raise SchemaError(f"duplicate column(s) {dup} in the input")
    for c in required or ():
        if c not in names:
            raise SchemaError(f"missing column {c!r}: it is required (primary key)")
    arrays = []
    fields = []
    for f in schema:
        if f.name in names:
            col = coerce_column(table.column(f.name), f.type, types.get(f.name) if types else None, f.name)
            if defaults and f.name in defaults and col.null_count:
                col = col.fill_null(defaults[f.name])
            if not f.nullable and col.null_count:
                raise InvalidInputError(
                    f"column {f.name!r} is NOT NULL but the input holds {col.null_count} null(s)"
                )
            arrays.append(col)
            fields.append(f)
        elif defaults and f.name in defaults:
            arrays.append(pa.nulls(table.num_rows, f.type).fill_null(defaults[f.name]))
            fields.append(f)
        else:
            if not f.nullable and not allow_missing:
                raise SchemaError(f"missing column {f.name!r}: it is NOT NULL")
            arrays.append(pa.nulls(table.num_rows, f.type))
            fields.append(f.with_nullable(True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
