"""Paimon's ``sys`` database: a catalog's global system tables, with Paimon's column names and types.

* ``sys.all_table_options``: ``database_name``, ``table_name``, ``key``, ``value`` of every
  table's stored options;
* ``sys.catalog_options``: ``key``, ``value`` of the catalog (its ``warehouse``, metastore and
  ``table-default.*`` options; secrets such as passwords are left out);
* ``sys.tables``: one row per table (``table_type``, ``partitioned``, ``primary_key``, the REST
  catalog's audit fields, null here, and the latest snapshot's ``record_count``,
  ``file_size_in_bytes``, ``file_count``, ``last_file_creation_time``);
* ``sys.partitions``: one row per partition of every partitioned table (``partition_name`` as
  the partition's path, ``done``: whether ``CALL sys.mark_partition_done`` marked it).

Counts are those of the data files of the latest snapshot (a primary-key table's rows before
merging, as Paimon counts them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import pyarrow as pa

from lakelog.connector.errors import LakelogError

__all__ = ["GLOBAL_TABLES", "global_table"]

_S, _B, _L = pa.string(), pa.bool_(), pa.int64()
_SCHEMAS: dict[str, pa.Schema] = {
    "all_table_options": pa.schema([("database_name", _S), ("table_name", _S), ("key", _S), ("value", _S)]),
    "catalog_options": pa.schema([("key", _S), ("value", _S)]),
    "tables": pa.schema(
        [
            ("database_name", _S),
            ("table_name", _S),
            ("table_type", _S),
            ("partitioned", _B),
            ("primary_key", _B),
            ("owner", _S),
            ("created_at", _L),
            ("created_by", _S),
            ("updated_at", _L),
            ("updated_by", _S),
            ("record_count", _L),
            ("file_size_in_bytes", _L),
            ("file_count", _L),
            ("last_file_creation_time", _L),
        ]
    ),  # fmt: skip
    "partitions": pa.schema(
        [
            ("database_name", _S),
            ("table_name", _S),
            ("partition_name", _S),
            ("record_count", _L),
            ("file_size_in_bytes", _L),
            ("file_count", _L),
            ("last_file_creation_time", _L),
            ("done", _B),
        ]
    ),  # fmt: skip
}
GLOBAL_TABLES = tuple(_SCHEMAS)
_SECRET = ("password", "secret", "token", "credential")


def _tables(catalog: Any) -> list[tuple[str, str, Any]]:
    out = []
    for db in sorted(catalog.list_databases()):
        for name in sorted(catalog.list_tables(db)):
            try:
                out.append((db, name, catalog.get_table(f"{db}.{name}")))
            except LakelogError:  # dropped meanwhile, or not a table lakelog can open
                continue
    return out


def _stats(store: Any, key: Any) -> dict[Any, dict[str, Optional[int]]]:
    """Rows, bytes, files and last file creation time of the latest snapshot's files, by ``key``."""
    snap = store.snapshot_manager.latest()
    groups: dict[Any, dict[str, Optional[int]]] = {}
    if snap is None:
        return groups
    for e in store.live_entries(snap):
        g = groups.setdefault(
            key(e), {"record_count": 0, "file_size_in_bytes": 0, "file_count": 0, "t": None}
        )
        g["record_count"] = (g["record_count"] or 0) + e.file.row_count
        g["file_size_in_bytes"] = (g["file_size_in_bytes"] or 0) + e.file.file_size
        g["file_count"] = (g["file_count"] or 0) + 1
        created = e.file.creation_time_millis
        if created is not None and (g["t"] is None or created > g["t"]):
            g["t"] = created
    return groups


def global_table(name: str, catalog: Any, catalog_options: Mapping[str, str]) -> pa.Table:
    """The ``sys`` table ``name`` of ``catalog`` (a :class:`lakelog.Catalog`)."""
    rows: list[dict[str, Any]] = []
    if name == "catalog_options":
        rows = [{"key": k, "value": v} for k, v in sorted(catalog_options.items())
                if not any(s in k.lower() for s in _SECRET)]  # fmt: skip
    elif name == "all_table_options":
        for db, tname, t in _tables(catalog):
            rows += [{"database_name": db, "table_name": tname, "key": k, "value": v}
                     for k, v in t.store.schema.options.items()]  # fmt: skip
    elif name == "tables":
        for db, tname, t in _tables(catalog):
            store = t.store
            whole = _stats(store, lambda e: 0).get(0, {})
            rows.append({
                "database_name": db, "table_name": tname,
                "table_type": store.schema.options.get("type", "table"),
                "partitioned": bool(store.schema.partition_keys),
                "primary_key": bool(store.schema.primary_keys),
                "record_count": whole.get("record_count", 0),
                "file_size_in_bytes": whole.get("file_size_in_bytes", 0),
                "file_count": whole.get("file_count", 0),
                "last_file_creation_time": whole.get("t"),
            })  # fmt: skip
    elif name == "partitions":
        for db, tname, t in _tables(catalog):
            store = t.store
            if not store.schema.partition_keys:
                continue
            fio = store.file_io
            for part, g in sorted(_stats(store, lambda e: e.partition).items()):
                path = store.partition_dir(store.partition_values(part)).rstrip("/")
                rows.append({
                    "database_name": db, "table_name": tname, "partition_name": path,
                    "record_count": g["record_count"], "file_size_in_bytes": g["file_size_in_bytes"],
                    "file_count": g["file_count"], "last_file_creation_time": g["t"],
                    "done": fio.file_exists(f"{store.path.rstrip('/')}/{path}/_SUCCESS"),
                })  # fmt: skip
    else:
        raise KeyError(name)
    return pa.Table.from_pylist(rows, schema=_SCHEMAS[name])
