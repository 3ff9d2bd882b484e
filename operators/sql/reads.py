"""Reads of lakelog tables in SQL: each table a query names becomes a temporary view over a lakelog
source, for that statement only. This module imports pyflink.

A view has the table's exact column types, its computed columns in their places and its
watermark (so event-time windows work), and reads with the table's options overridden by the
session's dynamic options and the statement's ``/*+ OPTIONS(...) */`` hint (hint wins).
``FOR SYSTEM_TIME AS OF <timestamp>`` and ``'scan.timestamp'`` (local time) become
``scan.timestamp-millis``. ``t$<name>`` reads a system table: the metadata tables from
:mod:`lakelog.connector.table.system_tables` (``files``, ``partitions``, ``buckets`` and
``manifests`` of the snapshot a scan option names), ``audit_log``/``binlog``/``ro`` from sources.
Temporary views whose query reads lakelog tables are expanded where they are named, so they read
the tables as they are then.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from pyflink.table.expressions import col

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import IMMUTABLE_KEYS, CoreOptions, check_alter
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.system_tables import (
    METADATA_TABLES,
    ROW_TABLES,
    SNAPSHOT_SCOPED,
    SYSTEM_TABLES,
    system_table,
)
from lakelog.operators.flink_types import row_data_type
from lakelog.operators.source import read_lakelog_table
from lakelog.operators.source_plan import table_rows
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.lexer import hint_options
from lakelog.operators.sql.pushdown import pushed_filter
from lakelog.operators.sql.table_ddl import read_schema_options

if TYPE_CHECKING:
    from lakelog.operators.sql.runner import LakelogSql

__all__ = ["scan_overrides", "local_millis", "view_for"]

# Paimon's system tables that lakelog does not have (told apart from a typo)
_PAIMON_ONLY = frozenset({"row_tracking", "file_keys"})
_SNAPSHOT_KEYS = ("scan.snapshot-id", "scan.tag-name", "scan.timestamp-millis", "scan.timestamp", "scan.mode")


def local_millis(text: str, what: str) -> int:
    """``yyyy-MM-dd[ HH:mm:ss[.SSS]]`` in the local time zone as epoch milliseconds."""
    try:
        return int(datetime.datetime.fromisoformat(text.strip()).timestamp() * 1000)
    except ValueError:
        raise OptionError(f"{what} = {text!r}: expected 'yyyy-MM-dd HH:mm:ss[.SSS]' (local time)") from None


def scan_overrides(
    store: TableStore,
    dynamic: Mapping[str, str],
    hint: Mapping[str, str],
    time_travel: Optional[int],
    where: str,
) -> dict[str, str]:
    """A read's dynamic options: the session's, then the hint's, then ``FOR SYSTEM_TIME AS OF``;
    ``scan.timestamp`` as ``scan.timestamp-millis``; immutable options refused as Paimon refuses
    them."""
    out = {**dynamic, **hint}
    if time_travel is not None:
        for k in _SNAPSHOT_KEYS:
            out.pop(k, None)
        out["scan.timestamp-millis"] = str(time_travel)
    ts = out.pop("scan.timestamp", None)
    if ts is not None and "scan.timestamp-millis" not in out:
        out["scan.timestamp-millis"] = str(local_millis(ts, "option 'scan.timestamp'"))
    touched = {k: v for k, v in out.items() if k in IMMUTABLE_KEYS}
    if touched:
        try:
            check_alter(store.schema.options, {**store.schema.options, **touched})
        except OptionError as e:
            raise OptionError(f"{where}: dynamic options cannot change immutable options: {e}") from None
    return out


def _snapshot_of(store: TableStore, opts: Mapping[str, str], where: str) -> Optional[Snapshot]:
    """The snapshot a system table's scan options name (None: the latest)."""
    merged = CoreOptions({**store.schema.options, **opts}, strict=False)
    sm = store.snapshot_manager
    if merged.scan_snapshot_id is not None:
        return sm.snapshot(merged.scan_snapshot_id)
    if merged.scan_tag_name is not None:
        return store.tag_manager.get(merged.scan_tag_name)
    if merged.scan_timestamp_millis is not None:
        snap = sm.earlier_or_equal_time_millis(merged.scan_timestamp_millis)
        if snap is None:
            raise SqlError(f"{where}: there is no snapshot at or before {merged.scan_timestamp_millis}")
        return snap
    return None


def _metadata_view(
    sql: LakelogSql, store: TableStore, name: str, hint: Mapping[str, str], dyn: Mapping[str, str], where: str
) -> Any:
    scoped = name in SNAPSHOT_SCOPED
    if hint and not scoped:
        raise UnsupportedStatementError(
            f"{where}: options {sorted(hint)} have no effect on ${name} (it lists the whole table); "
            f"scan options work with {', '.join('$' + n for n in SNAPSHOT_SCOPED)}"
        )
    if scoped:
        unknown = [k for k in hint if k not in _SNAPSHOT_KEYS]
        if unknown:
            raise UnsupportedStatementError(f"{where}: options {unknown} have no effect on ${name}")
        opts = scan_overrides(store, {k: v for k, v in dyn.items() if k in _SNAPSHOT_KEYS}, hint, None, where)
        data = system_table(store, name, snapshot=_snapshot_of(store, opts, where))
    else:
        data = system_table(store, name)
    rows = list(table_rows(data))
    return sql.t_env.from_elements(rows, row_data_type(data.schema))


def _global_view(
    sql: LakelogSql, cat: str, name: str, hint: Optional[str], time_travel: Optional[int]
) -> str:
    """A view of Paimon's global system table ``cat.sys.name`` (:mod:`.global_system_tables`)."""
    from lakelog.connector.table.global_system_tables import GLOBAL_TABLES, global_table

    where = f"{cat}.sys.{name}"
    if name not in GLOBAL_TABLES:
        raise SqlError(f"{where}: unknown table of the sys database; it has {', '.join(GLOBAL_TABLES)}")
    if hint_options(hint) or time_travel is not None:
        raise UnsupportedStatementError(f"{where}: options and FOR SYSTEM_TIME AS OF have no effect on it")
    spec = sql.mirror.specs[cat]
    options = {"warehouse": spec.warehouse, **spec.catalog_options}
    options.update({f"table-default.{k}": v for k, v in spec.table_defaults.items()})
    if spec.default_database != "default":
        options["default-database"] = spec.default_database
    data = global_table(name, sql.mirror.catalog(cat), options)
    return sql.temporary_view(sql.t_env.from_elements(list(table_rows(data)), row_data_type(data.schema)))


def view_for(
    sql: LakelogSql,
    parts: list[str],
    hint: Optional[str],
    time_travel: Optional[int] = None,
    conjuncts: Sequence[str] = (),
) -> Optional[str]:
    """The temporary view to read instead of the table ``parts`` names (None: not a lakelog table).

    ``conjuncts`` are those of the ``WHERE`` that reads this table alone: the read applies
    those it compares exactly as Flink does (:mod:`.pushdown`), skipping partitions, files and row
    groups that cannot match. Not for system tables, nor for a table with a watermark (its
    watermark must see every row, as Flink's would)."""
    cat, db, name = sql.resolve(parts)
    if db == "sys" and sql.mirror.is_lakelog(cat):
        return _global_view(sql, cat, name, hint, time_travel)
    expanded = sql.expand_view(cat, db, name)
    if expanded is not None:
        return expanded
    base, _, system = name.partition("$")
    if system.startswith("branch_"):  # T$branch_<b>, T$branch_<b>$<system table>
        branch, _, system = system.partition("$")
        base = f"{base}${branch}"
    path = sql.lakelog_path(cat, db, base)
    if path is None:
        return None
    where = f"{cat}.{db}.{name}"
    if system in _PAIMON_ONLY:
        raise UnsupportedStatementError(
            f"{where}: Paimon's system table ${system} is not supported by lakelog; it has "
            f"{', '.join('$' + n for n in SYSTEM_TABLES)}"
        )
    if system and system not in SYSTEM_TABLES:
        raise SqlError(f"{where}: unknown system table ${system}; known: {', '.join(SYSTEM_TABLES)}")
    store = TableStore(path)
    hinted = hint_options(hint)
    dyn = sql.dynamic.for_table(cat, db, base)
    if system in METADATA_TABLES:
        if time_travel is not None:
            raise UnsupportedStatementError(f"{where}: FOR SYSTEM_TIME AS OF is not supported on ${system}")
        table = _metadata_view(sql, store, system, hinted, dyn, where)
    else:
        opts = scan_overrides(store, dyn, hinted, time_travel, where)
        kwargs: dict[str, Any] = {"options": opts}
        if system in ROW_TABLES:
            kwargs["shape"] = {"audit_log": "audit_log", "binlog": "binlog"}.get(system, "rows")
            kwargs["read_optimized"] = system == "ro"
        else:
            schema = store.schema
            computed, wm = read_schema_options(schema.options, schema.field_names)
            kwargs["computed"] = [(c.name, c.expr) for c in computed]
            kwargs["watermark"] = (wm.rowtime, wm.expr) if wm is not None else None
            if wm is None:
                kwargs["filter"] = pushed_filter(conjuncts, schema.fields)
        table = read_lakelog_table(sql.t_env, path, env=sql.env, mode=sql.mode, **kwargs)
        if not system and kwargs.get("computed"):
            order = _column_order(store)
            table = table.select(*[col(n) for n in order])
    return sql.temporary_view(table)


def _column_order(store: TableStore) -> list[str]:
    """Physical and computed columns in the order the table declares them."""
    schema = store.schema
    computed, _ = read_schema_options(schema.options, schema.field_names)
    at = {c.position: c.name for c in computed}
    physical = iter(schema.field_names)
    out = []
    for pos in range(len(schema.fields) + len(computed)):
        out.append(at[pos] if pos in at else next(physical))
    return out
