"""System tables (``t$snapshots``, ``t$files``, ...): a table's metadata as Arrow tables with Paimon's
column names and types, built in one place for Flink SQL, the command line and Python.

:data:`METADATA_TABLES` are built here by :func:`system_table`. ``t$audit_log``, ``t$binlog`` and
``t$ro`` are reads of the table's rows: their readers use :func:`binlog_of` and
:func:`read_optimized_entries` from here and the change reads of
:mod:`lakelog.connector.table.changes`.

Times are local wall-clock times (Paimon shows ``LocalDateTime`` in the JVM's zone); partitions
are Flink's cast of the partition row to text (``{2024-01-01, 3}``), keys and column statistics
Java's ``toString`` of Paimon's values (``[c]``, ``{cnt=0, word=a}``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import CorruptFileError, SchemaError
from lakelog.connector.format.key_value import SEQUENCE_NUMBER
from lakelog.connector.format.manifest import FILE_SOURCE_COMPACT, DataFileMeta, ManifestEntry
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import DataType, field_to_json, type_to_string
from lakelog.connector.table.value_text import (
    java_duration,
    java_list_text,
    java_map_text,
    java_text,
    row_cast_text,
)

__all__ = [
    "SYSTEM_TABLES",
    "METADATA_TABLES",
    "ROW_TABLES",
    "SNAPSHOT_SCOPED",
    "system_table",
    "system_table_schema",
    "snapshots_table",
    "schemas_table",
    "options_table",
    "files_table",
    "tags_table",
    "partitions_table",
    "buckets_table",
    "manifests_table",
    "consumers_table",
    "aggregation_fields_table",
    "read_optimized_entries",
    "binlog_of",
    "binlog_schema",
]


def _f(name: str, t: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, t, nullable)


_S, _L, _I, _T = pa.string(), pa.int64(), pa.int32(), pa.timestamp("ms")

_SCHEMAS: dict[str, pa.Schema] = {
    "snapshots": pa.schema([
        _f("snapshot_id", _L, False), _f("schema_id", _L, False), _f("commit_user", _S, False),
        _f("commit_identifier", _L, False), _f("commit_kind", _S, False), _f("commit_time", _T, False),
        _f("base_manifest_list", _S, False), _f("delta_manifest_list", _S, False),
        _f("changelog_manifest_list", _S), _f("total_record_count", _L), _f("delta_record_count", _L),
        _f("changelog_record_count", _L), _f("watermark", _L),
    ]),
    "schemas": pa.schema([
        _f("schema_id", _L, False), _f("fields", _S, False), _f("partition_keys", _S, False),
        _f("primary_keys", _S, False), _f("options", _S, False), _f("comment", _S),
        _f("update_time", _T, False),
    ]),
    "options": pa.schema([_f("key", _S, False), _f("value", _S, False)]),
    "files": pa.schema([
        _f("partition", _S), _f("bucket", _I, False), _f("file_path", _S, False),
        _f("file_format", _S, False), _f("schema_id", _L, False), _f("level", _I, False),
        _f("record_count", _L, False), _f("file_size_in_bytes", _L, False), _f("min_key", _S),
        _f("max_key", _S), _f("null_value_counts", _S, False), _f("min_value_stats", _S, False),
        _f("max_value_stats", _S, False), _f("min_sequence_number", _L), _f("max_sequence_number", _L),
        _f("creation_time", _T), _f("deleteRowCount", _L), _f("file_source", _S),
    ]),
    "tags": pa.schema([
        _f("tag_name", _S, False), _f("snapshot_id", _L, False), _f("schema_id", _L, False),
        _f("commit_time", _T, False), _f("record_count", _L), _f("create_time", _T),
        _f("time_retained", _S),
    ]),
    "partitions": pa.schema([
        _f("partition", _S), _f("record_count", _L, False), _f("file_size_in_bytes", _L, False),
        _f("file_count", _L, False), _f("last_update_time", _T),
    ]),
    "buckets": pa.schema([
        _f("partition", _S), _f("bucket", _I, False), _f("record_count", _L, False),
        _f("file_size_in_bytes", _L, False), _f("file_count", _L, False), _f("last_update_time", _T),
    ]),
    "manifests": pa.schema([
        _f("file_name", _S, False), _f("file_size", _L, False), _f("num_added_files", _L, False),
        _f("num_deleted_files", _L, False), _f("schema_id", _L, False), _f("min_partition_stats", _S),
        _f("max_partition_stats", _S),
    ]),
    "consumers": pa.schema([_f("consumer_id", _S, False), _f("next_snapshot_id", _L, False)]),
    "branches": pa.schema([_f("branch_name", _S, False), _f("create_time", _T, False)]),
    "table_indexes": pa.schema([
        _f("partition", _S), _f("bucket", _I, False), _f("index_type", _S, False), _f("file_name", _S, False),
        _f("file_size", _L, False), _f("row_count", _L, False),
        _f("dv_ranges", pa.list_(pa.struct([_f("f0", _S, False), _f("f1", _I, False), _f("f2", _I, False),
                                            _f("_CARDINALITY", _L)]))),
    ]),  # Paimon 1.4's columns (later versions add four for global indexes, which lakelog has none of)
    "statistics": pa.schema([
        _f("snapshot_id", _L, False), _f("schema_id", _L, False), _f("mergedRecordCount", _L),
        _f("mergedRecordSize", _L), _f("colstat", _S),
    ]),
    "aggregation_fields": pa.schema([
        _f("field_name", _S, False), _f("field_type", _S, False), _f("function", _S),
        _f("function_options", _S), _f("comment", _S),
    ]),
}  # fmt: skip

#: The metadata tables :func:`system_table` builds.
METADATA_TABLES = tuple(_SCHEMAS)
#: The system tables that read the table's rows (their readers live with the sources).
ROW_TABLES = ("audit_log", "binlog", "ro")
#: Every system table name, as written after ``$``.
SYSTEM_TABLES = METADATA_TABLES + ROW_TABLES
#: Metadata tables that describe one snapshot (the latest, or the one a scan option names).
SNAPSHOT_SCOPED = ("files", "partitions", "buckets", "manifests", "table_indexes", "statistics")


def system_table_schema(name: str) -> pa.Schema:
    """The Arrow schema of metadata table ``name``."""
    try:
        return _SCHEMAS[name]
    except KeyError:
        raise SchemaError(f"unknown system table {name!r}; known: {', '.join(SYSTEM_TABLES)}") from None


def _local(millis: Optional[int]) -> Optional[datetime.datetime]:
    """Epoch milliseconds as the local wall-clock time Paimon shows."""
    if millis is None:
        return None
    return datetime.datetime.fromtimestamp(millis / 1000).replace(tzinfo=None)


def _raw_local(millis: Optional[int]) -> Optional[datetime.datetime]:
    """A value stored as local wall-clock time taken as UTC (``_CREATION_TIME``)."""
    if millis is None:
        return None
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=millis)


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=_SCHEMAS[name])


# ---- snapshots, schemas, options, tags, consumers ---------------------------------------------------
def snapshots_table(store: TableStore) -> pa.Table:
    """One row per snapshot still on disk, oldest first."""
    return _table(
        "snapshots",
        [
            {
                "snapshot_id": s.id,
                "schema_id": s.schema_id,
                "commit_user": s.commit_user,
                "commit_identifier": s.commit_identifier,
                "commit_kind": s.commit_kind,
                "commit_time": _local(s.time_millis),
                "base_manifest_list": s.base_manifest_list,
                "delta_manifest_list": s.delta_manifest_list,
                "changelog_manifest_list": s.changelog_manifest_list,
                "total_record_count": s.total_record_count,
                "delta_record_count": s.delta_record_count,
                "changelog_record_count": s.changelog_record_count,
                "watermark": s.watermark,
            }
            for s in store.snapshot_manager.snapshots()
        ],
    )


def _json(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def schemas_table(store: TableStore) -> pa.Table:
    """One row per schema version."""
    return _table(
        "schemas",
        [
            {
                "schema_id": s.id,
                "fields": _json([field_to_json(f) for f in s.fields]),
                "partition_keys": _json(list(s.partition_keys)),
                "primary_keys": _json(list(s.primary_keys)),
                "options": _json(dict(s.options)),
                "comment": s.comment,
                "update_time": _local(s.time_millis),
            }
            for s in store.schema_manager.list_all()
        ],
    )


def options_table(store: TableStore) -> pa.Table:
    """The options stored in the latest schema, as ``key``, ``value`` rows."""
    opts = store.schema_manager.latest().options if store.schema_manager.latest() else {}
    return _table("options", [{"key": k, "value": v} for k, v in opts.items()])


def tags_table(store: TableStore) -> pa.Table:
    """One row per tag, by snapshot id."""
    rows = []
    tm = store.tag_manager
    for name in tm.list():
        info = tm.get_info(name)
        s = info.snapshot
        rows.append(
            {
                "tag_name": name,
                "snapshot_id": s.id,
                "schema_id": s.schema_id,
                "commit_time": _local(s.time_millis),
                "record_count": s.total_record_count,
                "create_time": info.create_time,
                "time_retained": None if info.time_retained is None else java_duration(info.time_retained),
            }
        )
    return _table("tags", rows)


def consumers_table(store: TableStore) -> pa.Table:
    """One row per consumer: the next snapshot it will read."""
    return _table(
        "consumers",
        [{"consumer_id": c, "next_snapshot_id": n} for c, n in sorted(store.consumer_manager.list().items())],
    )


def branches_table(store: TableStore) -> pa.Table:
    """One row per branch other than main; its creation time is its first schema file's, as Paimon
    takes its directory's."""
    from lakelog.connector.format.branches import branch_location, list_branches

    fio, rows = store.file_io, []
    for name in list_branches(fio, store.path):
        schema_dir = f"{branch_location(store.path, name)}/schema"
        ids = [int(n[len("schema-") :]) for n in fio.list_dir(schema_dir) if n[len("schema-") :].isdigit()]
        created = fio.mtime(f"{schema_dir}/schema-{min(ids)}")
        rows.append({"branch_name": name, "create_time": _local(int(created * 1000))})
    return _table("branches", rows)


def aggregation_fields_table(store: TableStore) -> pa.Table:
    """One row per column: its ``fields.<name>.*`` options (aggregate functions and their settings)."""
    schema = store.schema_manager.latest() or store.schema
    rows = []
    for f in schema.fields:
        prefix = f"fields.{f.name}."
        keys = sorted(k for k in schema.options if k.startswith(prefix))
        rows.append(
            {
                "field_name": f.name,
                "field_type": type_to_string(f.type),
                "function": java_list_text([schema.options[k] for k in keys]),
                "function_options": java_list_text(keys),
                "comment": f.description,
            }
        )
    return _table("aggregation_fields", rows)


# ---- files and their aggregates ---------------------------------------------------------------------
class _FileText:
    """Partition, key and statistics text of a snapshot's files (schemas decoded once per id)."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self._partitions: dict[bytes, str] = {}
        self._schemas: dict[int, list[tuple[str, DataType]]] = {}

    def partition(self, partition: bytes) -> str:
        text = self._partitions.get(partition)
        if text is None:
            text = row_cast_text(self.store.partition_values(partition), self.store.partition_types)
            self._partitions[partition] = text
        return text

    def key(self, data: bytes) -> Optional[str]:
        types = self.store.key_types
        if not types:
            return None
        from lakelog.connector.format.binary_row import deserialize_row

        values = deserialize_row(data, types)
        return java_list_text([java_text(v, t) for v, t in zip(values, types)]) if values else None

    def _columns(self, f: DataFileMeta) -> list[tuple[str, DataType]]:
        cols = self._schemas.get(f.schema_id)
        if cols is None:
            try:
                schema = self.store.schema_manager.schema(f.schema_id)
            except Exception:  # noqa: BLE001 - a schema file another engine removed: no statistics
                schema = self.store.schema
            cols = [(x.name, x.type) for x in schema.fields]
            self._schemas[f.schema_id] = cols
        if f.value_stats_cols is not None:
            by_name = dict(cols)
            return [(n, by_name[n]) for n in f.value_stats_cols if n in by_name]
        return cols

    def stats(self, f: DataFileMeta) -> tuple[str, str, str]:
        """(null counts, min values, max values) as ``{col=value, ...}``."""
        from lakelog.connector.format.binary_row import deserialize_row

        cols = self._columns(f)
        vs = f.value_stats
        names = [n for n, _ in cols]
        nulls = vs.null_counts or []
        null_text = {n: java_text(c) for n, c in zip(names, nulls)}
        try:
            mins = deserialize_row(vs.min_values, [t for _, t in cols])
            maxs = deserialize_row(vs.max_values, [t for _, t in cols])
        except (CorruptFileError, SchemaError):  # statistics of fewer columns (stats modes): none shown
            mins = maxs = ()
        min_text = {n: java_text(v, t) for (n, t), v in zip(cols, mins)}
        max_text = {n: java_text(v, t) for (n, t), v in zip(cols, maxs)}
        return java_map_text(null_text), java_map_text(min_text), java_map_text(max_text)


def _snapshot_entries(store: TableStore, snapshot: Optional[Snapshot]) -> list[ManifestEntry]:
    return store.live_entries(snapshot) if snapshot is not None else []


def table_indexes_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """One row per index file of ``snapshot`` (hash indexes of dynamic buckets, deletion vectors),
    with each deletion-vector file's ranges."""
    text = _FileText(store)
    rows = []
    for e in store.index_entries(snapshot) if snapshot is not None else []:
        f = e.index_file
        ranges = None
        if f.dv_ranges is not None:
            ranges = [
                {"f0": r["f0"], "f1": r["f1"], "f2": r["f2"], "_CARDINALITY": r.get("_CARDINALITY")}
                for r in f.dv_ranges
            ]
        rows.append(
            {"partition": text.partition(e.partition), "bucket": e.bucket, "index_type": f.index_type,
             "file_name": f.file_name, "file_size": f.file_size, "row_count": f.row_count,
             "dv_ranges": ranges}
        )  # fmt: skip
    return _table("table_indexes", rows)


def files_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """One row per live data file of ``snapshot``, by partition, bucket and level."""
    text = _FileText(store)
    rows = []
    for e in _snapshot_entries(store, snapshot):
        f = e.file
        nulls, mins, maxs = text.stats(f)
        path = store.data_file_path(e.partition, e.bucket, f.file_name, f.external_path)
        rows.append(
            {
                "partition": text.partition(e.partition),
                "bucket": e.bucket,
                "file_path": path,
                "file_format": f.file_name.rsplit(".", 1)[-1] if "." in f.file_name else "",
                "schema_id": f.schema_id,
                "level": f.level,
                "record_count": f.row_count,
                "file_size_in_bytes": f.file_size,
                "min_key": text.key(f.min_key),
                "max_key": text.key(f.max_key),
                "null_value_counts": nulls,
                "min_value_stats": mins,
                "max_value_stats": maxs,
                "min_sequence_number": f.min_sequence_number,
                "max_sequence_number": f.max_sequence_number,
                "creation_time": _raw_local(f.creation_time_millis),
                "deleteRowCount": f.delete_row_count,
                "file_source": None
                if f.file_source is None
                else ("COMPACT" if f.file_source == FILE_SOURCE_COMPACT else "APPEND"),
            }
        )
    t = _table("files", rows)
    return t.sort_by([("partition", "ascending"), ("bucket", "ascending"), ("level", "ascending")])


def _group_rows(
    store: TableStore, snapshot: Optional[Snapshot], key: Callable[[ManifestEntry], tuple[Any, ...]]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in _snapshot_entries(store, snapshot):
        g = groups.setdefault(
            key(e), {"record_count": 0, "file_size_in_bytes": 0, "file_count": 0, "t": None}
        )
        g["record_count"] += e.file.row_count
        g["file_size_in_bytes"] += e.file.file_size
        g["file_count"] += 1
        created = e.file.creation_time_millis
        if created is not None and (g["t"] is None or created > g["t"]):
            g["t"] = created
    return groups


def partitions_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """One row per partition of ``snapshot``: rows, bytes, files, last file creation time."""
    text = _FileText(store)
    groups = _group_rows(store, snapshot, lambda e: (e.partition,))
    rows = [
        {
            "partition": text.partition(p),
            "record_count": g["record_count"],
            "file_size_in_bytes": g["file_size_in_bytes"],
            "file_count": g["file_count"],
            "last_update_time": _raw_local(g["t"]),
        }
        for (p,), g in groups.items()
    ]
    return _table("partitions", rows).sort_by([("partition", "ascending")])


def buckets_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """One row per (partition, bucket) of ``snapshot``."""
    text = _FileText(store)
    groups = _group_rows(store, snapshot, lambda e: (e.partition, e.bucket))
    rows = [
        {
            "partition": text.partition(p),
            "bucket": b,
            "record_count": g["record_count"],
            "file_size_in_bytes": g["file_size_in_bytes"],
            "file_count": g["file_count"],
            "last_update_time": _raw_local(g["t"]),
        }
        for (p, b), g in groups.items()
    ]
    return _table("buckets", rows).sort_by([("partition", "ascending"), ("bucket", "ascending")])


def manifests_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """One row per manifest file of ``snapshot`` (its base and delta manifests)."""
    from lakelog.connector.format.binary_row import deserialize_row

    types = store.partition_types
    rows = []
    for m in store.manifest_metas(snapshot) if snapshot is not None else []:
        stats = m.partition_stats
        low = high = None
        if stats is not None:
            try:
                low = row_cast_text(deserialize_row(stats.min_values, types), types) if types else "{}"
                high = row_cast_text(deserialize_row(stats.max_values, types), types) if types else "{}"
            except (CorruptFileError, SchemaError):
                low = high = None
        rows.append(
            {
                "file_name": m.file_name,
                "file_size": m.file_size,
                "num_added_files": m.num_added_files,
                "num_deleted_files": m.num_deleted_files,
                "schema_id": m.schema_id,
                "min_partition_stats": low,
                "max_partition_stats": high,
            }
        )
    return _table("manifests", rows)


# ---- row tables ---------------------------------------------------------------------------------------
def read_optimized_entries(store: TableStore, snapshot: Optional[Snapshot]) -> list[ManifestEntry]:
    """The files ``t$ro`` reads: for primary-key tables only the top level (the result of the last
    full compaction, no merge needed), for append tables every file."""
    entries = _snapshot_entries(store, snapshot)
    if not store.is_primary_key_table:
        return entries
    from lakelog.connector.lsm.compaction import max_level

    top = max_level(store)
    return [e for e in entries if e.file.level == top]


def binlog_of(audit: pa.Table, *, pack_updates: bool) -> pa.Table:
    """``t$binlog`` rows from an audit log (a leading ``rowkind`` column): every column becomes an
    array of its values; with ``pack_updates`` (streaming reads) a ``-U`` row directly followed by
    a ``+U`` row becomes one ``+U`` row holding ``[before, after]``, as Paimon packs them. A
    ``_SEQUENCE_NUMBER`` column (``table-read.sequence-number.enabled``) stays one number: the
    ``+U`` row's for a pair."""
    kinds = audit.column(0).to_numpy(zero_copy_only=False).astype(str)
    n = len(kinds)
    starts = np.arange(n + 1, dtype=np.int32)
    out_kinds = kinds
    if pack_updates and n > 1:
        pair = np.zeros(n, dtype=bool)
        pair[:-1] = (kinds[:-1] == "-U") & (kinds[1:] == "+U")
        second = np.zeros(n, dtype=bool)
        second[1:] = pair[:-1]
        keep = ~second
        starts = np.append(np.flatnonzero(keep), n).astype(np.int32)
        out_kinds = np.where(pair[keep], "+U", kinds[keep])
    offsets = pa.array(starts, pa.int32())
    columns = [pa.array(out_kinds.tolist(), pa.string())]
    fields = [pa.field(audit.schema.field(0).name, pa.string())]
    for f, col in zip(list(audit.schema)[1:], audit.columns[1:]):
        values = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if f.name == SEQUENCE_NUMBER:
            columns.append(values.take(pa.array(starts[1:] - 1)))
            fields.append(f)
            continue
        item = pa.field("element", f.type, True)
        columns.append(pa.ListArray.from_arrays(offsets, values, type=pa.list_(item)))
        fields.append(pa.field(f.name, pa.list_(item)))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def binlog_schema(schema: pa.Schema, rowkind: str = "rowkind") -> pa.Schema:
    """The schema of ``t$binlog`` for a table of ``schema``."""
    fields = [pa.field(rowkind, pa.string())]
    fields += [
        f if f.name == SEQUENCE_NUMBER else pa.field(f.name, pa.list_(pa.field("element", f.type, True)))
        for f in schema
    ]
    return pa.schema(fields)


def statistics_table(store: TableStore, snapshot: Optional[Snapshot]) -> pa.Table:
    """``t$statistics``: the statistics ``snapshot`` references (``ANALYZE``'s), one row or none;
    ``colstat`` is the column statistics' JSON as Paimon prints it."""
    from lakelog.connector.table.statistics import jackson_pretty, snapshot_statistics

    stats = snapshot_statistics(store, snapshot)
    rows = []
    if stats is not None:
        rows.append({
            "snapshot_id": stats.snapshot_id, "schema_id": stats.schema_id,
            "mergedRecordCount": stats.merged_record_count, "mergedRecordSize": stats.merged_record_size,
            "colstat": jackson_pretty(stats.column_json_object()),
        })  # fmt: skip
    return _table("statistics", rows)


# ---- dispatch -------------------------------------------------------------------------------------------
_BUILDERS: dict[str, Callable[..., pa.Table]] = {
    "snapshots": snapshots_table,
    "schemas": schemas_table,
    "options": options_table,
    "tags": tags_table,
    "consumers": consumers_table,
    "branches": branches_table,
    "aggregation_fields": aggregation_fields_table,
}
_SNAPSHOT_BUILDERS: dict[str, Callable[[TableStore, Optional[Snapshot]], pa.Table]] = {
    "files": files_table,
    "partitions": partitions_table,
    "buckets": buckets_table,
    "manifests": manifests_table,
    "table_indexes": table_indexes_table,
    "statistics": statistics_table,
}


def system_table(store: TableStore, name: str, *, snapshot: Optional[Snapshot] = None) -> pa.Table:
    """The metadata table ``name`` (one of :data:`METADATA_TABLES`) of the table in ``store``; the
    snapshot-scoped ones (:data:`SNAPSHOT_SCOPED`) describe ``snapshot`` (default: the latest)."""
    if name in _SNAPSHOT_BUILDERS:
        snap = snapshot if snapshot is not None else store.snapshot_manager.latest()
        return _SNAPSHOT_BUILDERS[name](store, snap)
    if name in _BUILDERS:
        if snapshot is not None:
            raise SchemaError(f"system table {name!r} lists the whole table; it takes no snapshot")
        return _BUILDERS[name](store)
    if name in ROW_TABLES:
        raise SchemaError(f"system table {name!r} holds the table's rows: read it through a scan")
    raise SchemaError(f"unknown system table {name!r}; known: {', '.join(SYSTEM_TABLES)}")
