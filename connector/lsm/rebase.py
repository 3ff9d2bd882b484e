"""Rebasing a bucket's uncommitted files above another writer's sequence numbers.

A writer numbers the rows it writes into a bucket from the highest sequence number it saw there.
When another writer commits rows into the same bucket first, both may have used the same numbers,
and the merge would then keep whichever row has the higher number, not the row committed later.
:func:`rebase_file` rewrites one uncommitted file with every sequence number raised by an offset,
so that the committer can place it above what the bucket already holds.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CommitConflictError
from lakelog.connector.format.data_file import read_data_file
from lakelog.connector.format.key_value import SEQUENCE_NUMBER
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.store import TableStore, file_schema

__all__ = ["rebase_file"]


def rebase_file(
    store: TableStore, partition: bytes, bucket: int, f: DataFileMeta, offset: int, *, changelog: bool = False
) -> list[DataFileMeta]:
    """Write a copy of the uncommitted key-value file ``f`` (a data file, or with ``changelog`` a
    changelog file) of one bucket with its sequence numbers raised by ``offset``; return the new
    file's metadata (the original is left in place)."""
    if f.schema_id != store.schema.id:
        written = store.schema_manager.schema(f.schema_id)
        if written.fields != store.schema.fields:
            raise CommitConflictError(
                f"cannot rebase data file {f.file_name} of {store.path}: it was written with schema "
                f"{f.schema_id}, the table now has schema {store.schema.id} with other columns; write the "
                "rows again"
            )
        store = store.with_schema(written)  # only options changed (a rescale, say): keep its schema
    path = store.data_file_path(partition, bucket, f.file_name)
    table = read_data_file(path, schema=file_schema(store, field_ids=False))
    i = table.schema.get_field_index(SEQUENCE_NUMBER)
    shifted = pc.add(table.column(i), pa.scalar(offset, pa.int64()))
    table = table.set_column(i, table.schema.field(i), shifted)
    writer = store.file_writer(partition, bucket, changelog=changelog)
    return writer.write(table, level=f.level, file_source=f.file_source or 0)
