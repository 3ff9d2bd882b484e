"""Paimon's JDBC catalog tables, as Paimon 1.4 creates them (column names, types and keys), and the
statements lakelog runs on them.

* ``paimon_tables(catalog_key, database_name, table_name)``: one row per table (names only).
* ``paimon_database_properties(catalog_key, database_name, property_key, property_value)``: a
  database exists when it has a row here (lakelog and Paimon write ``exists`` = ``true`` and its
  ``location``) or a table in ``paimon_tables``.
* ``paimon_table_properties(catalog_key, database_name, table_name, property_key,
  property_value)``: copies of each table's options plus ``primary-key``, ``partition`` and
  ``bucket-key`` (Paimon 1.4+, when ``sync-all-properties``, its default, is on).
* ``paimon_distributed_locks(lock_id, acquired_at, expire_time_seconds)``: the commit locks (only
  with ``lock.enabled``; see :mod:`.jdbc_lock`).

Every statement is the same text for SQLite and PostgreSQL (``INSERT ... ON CONFLICT DO NOTHING``
is in both) except where :func:`lock_sql` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakelog.connector.catalog.jdbc_connect import Tx

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.format.schema import TableSchema

__all__ = ["TABLES", "LOCKS", "create_tables", "create_lock_table", "table_properties", "lock_sql",
           "PROPERTY_VALUE_MAX"]

TABLES = "paimon_tables"
DATABASE_PROPERTIES = "paimon_database_properties"
TABLE_PROPERTIES = "paimon_table_properties"
LOCKS = "paimon_distributed_locks"
PROPERTY_VALUE_MAX = 1000  # property_value VARCHAR(1000)

_DDL = {
    TABLES: (
        "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
        "table_name VARCHAR(255) NOT NULL, PRIMARY KEY (catalog_key, database_name, table_name)"
    ),
    DATABASE_PROPERTIES: (
        "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
        "property_key VARCHAR(255), property_value VARCHAR(1000), "
        "PRIMARY KEY (catalog_key, database_name, property_key)"
    ),
    TABLE_PROPERTIES: (
        "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
        "table_name VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, property_value VARCHAR(1000), "
        "PRIMARY KEY (catalog_key, database_name, table_name, property_key)"
    ),
}


def _table_exists(tx: Tx, dialect: str, name: str) -> bool:
    if dialect == "sqlite":
        return bool(tx.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))
    return bool(tx.query("SELECT 1 WHERE to_regclass(?) IS NOT NULL", (name,)))


def _create(tx: Tx, dialect: str, name: str, columns: str) -> None:
    if not _table_exists(tx, dialect, name):
        tx.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")


def create_tables(tx: Tx, dialect: str) -> None:
    """Paimon's catalog tables, where missing."""
    for name, columns in _DDL.items():
        _create(tx, dialect, name, columns)


def create_lock_table(tx: Tx, dialect: str, key_max_length: int) -> None:
    _create(
        tx, dialect, LOCKS,
        f"lock_id VARCHAR({int(key_max_length)}) NOT NULL, acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP "
        "NOT NULL, expire_time_seconds BIGINT DEFAULT 0 NOT NULL, PRIMARY KEY (lock_id)",
    )


def table_properties(schema: TableSchema) -> dict[str, str]:
    """What Paimon 1.4's ``collectTableProperties`` copies: the options, then ``primary-key``,
    ``partition`` and ``bucket-key`` (the ``bucket-key`` option, else the primary key without the
    partition fields) where not empty. Values longer than the column holds are left out (the schema
    file keeps them; Paimon would fail the create on PostgreSQL)."""
    out = dict(schema.options)
    if schema.primary_keys:
        out["primary-key"] = ",".join(schema.primary_keys)
    if schema.partition_keys:
        out["partition"] = ",".join(schema.partition_keys)
    bucket_key = schema.options.get("bucket-key", "").strip()
    buckets = [k.strip() for k in bucket_key.split(",") if k.strip()] or list(schema.trimmed_primary_keys)
    if buckets:
        out["bucket-key"] = ",".join(buckets)
    return {k: v for k, v in out.items() if len(v) <= PROPERTY_VALUE_MAX and len(k) <= 255}


def write_table_properties(tx: Tx, key: str, db: str, table: str, props: Mapping[str, str]) -> None:
    tx.execute(
        f"DELETE FROM {TABLE_PROPERTIES} WHERE catalog_key = ? AND database_name = ? AND table_name = ?",
        (key, db, table),
    )
    for k, v in sorted(props.items()):
        tx.execute(
            f"INSERT INTO {TABLE_PROPERTIES} (catalog_key, database_name, table_name, property_key, "
            "property_value) VALUES (?, ?, ?, ?, ?)",
            (key, db, table, k, v),
        )


# ---- the lock table ------------------------------------------------------------------------------------
# The database server's clock, in UTC, as the text/timestamp Paimon's default CURRENT_TIMESTAMP
# writes (SQLite: 'YYYY-MM-DD HH:MM:SS', here with milliseconds; PostgreSQL: a TIMESTAMP, the
# sessions in UTC) and a row's age in seconds by that clock.
_NOW = {
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "postgresql": "(clock_timestamp() AT TIME ZONE 'UTC')",
}
_AGE = {
    "sqlite": "((julianday('now') - julianday(acquired_at)) * 86400.0)",
    "postgresql": "EXTRACT(EPOCH FROM ((clock_timestamp() AT TIME ZONE 'UTC') - acquired_at))",
}


def lock_sql(dialect: str) -> dict[str, str]:
    """The lock's statements for ``dialect`` (``?`` placeholders; the SQLite ones carry ``%``
    inside strftime, which only the SQLite driver sees)."""
    now, age = _NOW[dialect], _AGE[dialect]
    return {
        # Paimon's stale-row cleanup, by the server's clock
        "clear_stale": f"DELETE FROM {LOCKS} WHERE lock_id = ? AND {age} > expire_time_seconds",
        # Paimon's acquisition: a key violation (here: no row returned) means busy
        "acquire": (
            f"INSERT INTO {LOCKS} (lock_id, acquired_at, expire_time_seconds) VALUES (?, {now}, ?) "
            "ON CONFLICT DO NOTHING RETURNING acquired_at"
        ),
        # a renewal moves the row's time forward only while the row is still this holder's
        "renew": (
            f"UPDATE {LOCKS} SET acquired_at = {now} WHERE lock_id = ? AND acquired_at = ? "
            "RETURNING acquired_at"
        ),
        "still_held": f"SELECT 1 FROM {LOCKS} WHERE lock_id = ? AND acquired_at = ?",
        "release": f"DELETE FROM {LOCKS} WHERE lock_id = ? AND acquired_at = ?",
        "holder": f"SELECT acquired_at, expire_time_seconds, {age} FROM {LOCKS} WHERE lock_id = ?",
    }
