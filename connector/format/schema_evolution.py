"""Read-side schema evolution: data read from a file written under an older schema, adapted to the
schema being read.

Columns match by field id, so renames, drops, adds and widenings are all handled;
:func:`physical_names` tells a reader which columns to project from such a file and
:func:`evolve_table` converts what it read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import pyarrow as pa

from lakelog.connector.errors import (
    SchemaError,
)
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.types import (
    DataField,
)

__all__ = ["physical_names", "evolve_table"]


# --------------------------------------------------------------------------------------------------
# Reading old files
# --------------------------------------------------------------------------------------------------


def _targets(read_schema: TableSchema, columns: Sequence[str] | None) -> list[DataField]:
    if columns is None:
        return list(read_schema.fields)
    return [read_schema.field(c) for c in columns]


def physical_names(
    file_schema: TableSchema, read_schema: TableSchema, columns: Sequence[str] | None = None
) -> dict[str, str | None]:
    """For each wanted column of ``read_schema``: its name in a file written under ``file_schema``
    (matched by field id), or None if the column did not exist then."""
    by_id = {f.id: f.name for f in file_schema.fields}
    return {f.name: by_id.get(f.id) for f in _targets(read_schema, columns)}


def evolve_table(
    data: pa.Table,
    file_schema: TableSchema,
    read_schema: TableSchema,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Adapt ``data`` (read from a file written under ``file_schema``) to ``read_schema``.

    Columns are matched by field id: renamed columns take their new names, dropped ones vanish, added
    ones (and any the data lacks) are null-filled, widened ones are cast. The result has
    ``read_schema``'s columns in its order, or ``columns`` in the order given, with the types of
    :meth:`TableSchema.arrow_schema`.
    """
    by_id = {f.id: f for f in file_schema.fields}
    target_arrow = read_schema.arrow_schema()
    present = set(data.column_names)
    arrays: list[Union[pa.Array, pa.ChunkedArray]] = []
    out_fields: list[pa.Field] = []
    for tf in _targets(read_schema, columns):
        af = target_arrow.field(tf.name)
        src = by_id.get(tf.id)
        if src is None or src.name not in present:
            arrays.append(pa.nulls(data.num_rows, af.type))
            out_fields.append(af.with_nullable(True) if src is None else af)
            continue
        col = data.column(src.name)
        if col.type != af.type:
            try:
                col = col.cast(af.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise SchemaError(
                    f"column {tf.name!r}: cannot convert file data of type {col.type} "
                    f"(schema {file_schema.id}) to {af.type} (schema {read_schema.id}): {e}"
                ) from None
        arrays.append(col)
        out_fields.append(af)
    return pa.Table.from_arrays(arrays, schema=pa.schema(out_fields))
