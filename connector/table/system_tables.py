"""System tables: a table's metadata as Arrow tables (``t$snapshots``, ``t$files``, ``t$options``),
built in one place for Flink SQL, the command line and Python.

``t$audit_log`` is not metadata but the table's rows with their row kinds; readers build it
(:mod:`lakelog.connector.table.changes`).
"""

from __future__ import annotations

from typing import Optional

import pyarrow as pa

from lakelog.connector.errors import SchemaError
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore

__all__ = [
    "SYSTEM_TABLES",
    "METADATA_TABLES",
    "system_table",
    "snapshots_table",
    "files_table",
    "options_table",
]

#: Every system table name, as written after ``$``.
SYSTEM_TABLES = ("snapshots", "files", "options", "audit_log")
#: The system tables that :func:`system_table` builds (the others are reads of the table's rows).
METADATA_TABLES = ("snapshots", "files", "options")


def snapshots_table(store: TableStore) -> pa.Table:
    """One row per snapshot still on disk, oldest first."""
    snaps = store.snapshot_manager.snapshots()
    return pa.table(
        {
            "snapshot_id": pa.array([s.id for s in snaps], pa.int64()),
            "schema_id": pa.array([s.schema_id for s in snaps], pa.int64()),
            "commit_user": pa.array([s.commit_user for s in snaps], pa.string()),
            "commit_identifier": pa.array([s.commit_identifier for s in snaps], pa.int64()),
            "commit_kind": pa.array([s.commit_kind for s in snaps], pa.string()),
            "commit_time": pa.array([s.time_millis for s in snaps], pa.timestamp("ms")),
            "total_record_count": pa.array([s.total_record_count for s in snaps], pa.int64()),
            "delta_record_count": pa.array([s.delta_record_count for s in snaps], pa.int64()),
            "changelog_record_count": pa.array([s.changelog_record_count for s in snaps], pa.int64()),
        }
    )


_FILES_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("bucket", pa.int32()),
        ("level", pa.int32()),
        ("file_name", pa.string()),
        ("row_count", pa.int64()),
        ("file_size", pa.int64()),
        ("min_sequence_number", pa.int64()),
        ("max_sequence_number", pa.int64()),
        ("schema_id", pa.int64()),
        ("delete_row_count", pa.int64()),
    ]
)


def files_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """Live data files of ``snapshot``: partition, bucket, level, name, rows, size, sequence range."""
    rows = []
    for e in store.live_entries(snapshot) if snapshot is not None else []:
        f = e.file
        rows.append(
            {
                "partition": store.partition_dir(store.partition_values(e.partition)),
                "bucket": e.bucket,
                "level": f.level,
                "file_name": f.file_name,
                "row_count": f.row_count,
                "file_size": f.file_size,
                "min_sequence_number": f.min_sequence_number,
                "max_sequence_number": f.max_sequence_number,
                "schema_id": f.schema_id,
                "delete_row_count": f.delete_row_count,
            }
        )
    t = pa.Table.from_pylist(rows, schema=_FILES_SCHEMA)
    return t.sort_by([("partition", "ascending"), ("bucket", "ascending"), ("level", "ascending")])


def options_table(store: TableStore) -> pa.Table:
    """The table's options as ``key``, ``value`` rows."""
    opts = store.schema.options
    keys, values = pa.array(list(opts), pa.string()), pa.array(list(opts.values()), pa.string())
    return pa.table({"key": keys, "value": values})


def system_table(store: TableStore, name: str, *, snapshot: Optional[Snapshot] = None) -> pa.Table:
    """The metadata table ``name`` (one of :data:`METADATA_TABLES`) of the table in ``store``;
    ``files`` lists the files of ``snapshot`` (default: the latest)."""
    if name == "snapshots":
        return snapshots_table(store)
    if name == "files":
        return files_table(store, snapshot if snapshot is not None else store.snapshot_manager.latest())
    if name == "options":
        return options_table(store)
    raise SchemaError(f"unknown system table {name!r}; known: {', '.join(SYSTEM_TABLES)}")
