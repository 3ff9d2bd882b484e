"""Flink-free pieces of the lakelog source: table rows as Flink rows (scan modes and filters are the
connector's: :mod:`lakelog.connector.table.scan_start`, :mod:`lakelog.connector.table.expressions`).

Everything here works on plain lakelog objects, so it is testable without a Flink cluster; the
PyFlink operators in :mod:`lakelog.operators.source` call into it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Optional

import pyarrow as pa

from lakelog.connector.errors import SchemaError

__all__ = [
    "table_rows",
    "KIND_CODES",
]

# audit-log row kind -> Flink RowKind ordinal (INSERT 0, UPDATE_BEFORE 1, UPDATE_AFTER 2, DELETE 3)
KIND_CODES: dict[str, int] = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


# ---- rows -------------------------------------------------------------------------------------------
def _struct_to_tuple(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_struct_to_tuple(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_struct_to_tuple(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: _struct_to_tuple(x, t.item_type) for k, x in v}
    return v


def _needs_fixup(t: pa.DataType) -> bool:
    return (
        pa.types.is_struct(t)
        or pa.types.is_map(t)
        or ((pa.types.is_list(t) or pa.types.is_large_list(t)) and _needs_fixup(t.value_type))
    )


def table_rows(t: pa.Table) -> Iterator[tuple[Any, ...]]:
    """Rows of ``t`` as tuples of Python values (the Flink boundary needs Python objects).

    Timestamps with a time zone become naive UTC; structs become tuples, maps dicts.
    """
    cols: list[list[Any]] = []
    for f, col in zip(t.schema, t.columns):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            col = col.cast(pa.timestamp(f.type.unit))
        values = col.to_pylist()
        if _needs_fixup(f.type):
            values = [_struct_to_tuple(v, f.type) for v in values]
        cols.append(values)
    if not cols:
        return iter(())
    return zip(*cols)


def check_columns(schema: pa.Schema, columns: Optional[Sequence[str]]) -> list[str]:
    if columns is None:
        return list(schema.names)
    unknown = [c for c in columns if schema.get_field_index(c) < 0]
    if unknown:
        raise SchemaError(f"unknown column(s) {unknown}; the table has {schema.names}")
    return list(columns)
