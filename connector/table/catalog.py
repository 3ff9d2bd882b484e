"""The catalog: tables in a warehouse, ``<warehouse>/<database>.db/<table>/``, as Paimon lays them
out, their names registered by a metastore (:mod:`lakelog.connector.catalog`): the warehouse's
directories (``filesystem``, the default) or Paimon's JDBC catalog tables (``jdbc``)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from typing import Optional, Union

import pyarrow as pa

from lakelog.connector.catalog.base import Metastore, open_metastore
from lakelog.connector.errors import (
    ArgumentTypeError,
    CatalogError,
    CorruptTableError,
    LogSystemError,
    OptionError,
    PathEscapeError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from lakelog.connector.format.fileio import ensure_inside, io_for, is_object_store, location, register_io
from lakelog.connector.format.lock import register_catalog_lock
from lakelog.connector.format.options import LogConsistency
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_manager import SchemaManager
from lakelog.connector.format.snapshot import SnapshotManager
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import (
    DataField,
    FieldIdCounter,
    fields_to_arrow_schema,
    highest_field_id,
    reassign_field_ids,
    with_nullable,
)
from lakelog.connector.log.kafka import default_topic
from lakelog.connector.log.publisher import start_marker
from lakelog.connector.table import arguments as arg
from lakelog.connector.table.log import check_log_options, log_config
from lakelog.connector.table.table import Table, check_merge_engine

__all__ = ["Catalog", "DEFAULT_DATABASE", "split_identifier", "parse_table_path"]

DEFAULT_DATABASE = "default"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
_DB_SUFFIX = ".db"
_MAX_NAME_BYTES = 255  # a directory name on the file systems lakelog runs on


SYSTEM_DATABASE = "sys"
"""Paimon's system database: its global system tables (``sys.tables``...) are not on disk."""


def _not_system(database: str) -> str:
    if database == SYSTEM_DATABASE:
        raise CatalogError(
            f"database {database!r} is the system database (Paimon's global system tables, such as "
            "sys.tables); no database of that name can be created, and no table in it")
    return database


def _check_name(kind: str, name: str) -> str:
    """``name`` if it is a valid database or table name, else :class:`PathEscapeError` naming it.

    Names become directory names (``<db>.db``, ``<table>``): letters, digits, ``_`` and ``-``
    only (so no control characters, newlines, separators or dots), at most 255 bytes with the
    ``.db`` suffix of a database."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PathEscapeError(
            f"invalid {kind} name {name!r}: use letters, digits, '_' and '-' "
            "(no path separators, dots, spaces or control characters)"
        )
    limit = _MAX_NAME_BYTES - (len(_DB_SUFFIX) if kind == "database" else 0)
    if len(name) > limit:
        raise PathEscapeError(
            f"invalid {kind} name {name[:40]!r}... ({len(name)} characters): a {kind} name is a "
            f"directory name and may have at most {limit} characters"
        )
    return name


def split_identifier(identifier: str) -> tuple[str, str]:
    """``db.table`` -> (db, table); a bare ``table`` lives in the ``default`` database."""
    parts = arg.text("identifier", identifier).split(".")
    if len(parts) == 1:
        return DEFAULT_DATABASE, _check_name("table", parts[0])
    if len(parts) != 2:
        raise PathEscapeError(f"invalid table identifier {identifier!r}: expected 'database.table'")
    return _check_name("database", parts[0]), _check_name("table", parts[1])


def parse_table_path(path: str) -> tuple[str, str, str]:
    """``<warehouse>/<db>.db/<table>`` (a local path, ``file:`` URI or ``s3://`` URI) ->
    (warehouse, db, table), the warehouse an absolute local path or a normalised ``s3://`` URI.
    Raises :class:`OptionError` naming the path when it does not have that shape or a name is
    invalid."""
    loc = location(path)
    local = loc if is_object_store(loc) else os.path.normpath(loc)
    parent, table = os.path.split(local)
    warehouse, db_dir = os.path.split(parent)
    if not db_dir.endswith(_DB_SUFFIX) or not table:
        raise OptionError(f"table path {path!r} must look like '<warehouse>/<database>.db/<table>'")
    try:
        db = _check_name("database", db_dir[: -len(_DB_SUFFIX)])
        _check_name("table", table)
    except PathEscapeError as e:
        raise OptionError(f"table path {path!r}: {e}") from None
    return warehouse, db, table


class Catalog:
    """Tables in a warehouse: a local directory (a path or ``file://`` URI) or an object-store
    prefix (``s3://bucket/prefix``).

    ``options``: Paimon's catalog options as strings, as ``CREATE CATALOG ... WITH (...)`` takes
    them; ``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ``s3.region`` and
    ``s3.path.style.access`` configure an ``s3://`` warehouse (see
    :mod:`lakelog.connector.format.objectstore`); ``'metastore' = 'jdbc'`` with ``'uri'``
    (``jdbc:sqlite:<file>``, ``jdbc:postgresql://host:port/db``), ``jdbc.*`` driver properties,
    ``catalog-key`` and ``lock.enabled`` keeps the names in Paimon's JDBC catalog tables
    (:mod:`lakelog.connector.catalog.jdbc`)."""

    def __init__(self, warehouse: str, *, options: Optional[Mapping[str, str]] = None) -> None:
        if options is not None:
            arg.mapping("options", options)
        self.options = {str(k): str(v) for k, v in (options or {}).items()}
        self.warehouse = location(warehouse)
        self.file_io = io_for(self.warehouse, self.options)
        if is_object_store(self.warehouse):
            from lakelog.connector.format.objectstore import S3FileIO

            assert isinstance(self.file_io, S3FileIO)
            self.file_io.check_bucket(self.warehouse)
            # tables of this bucket opened by location in this process use these settings
            register_io(self.warehouse, self.file_io)
        self.file_io.mkdirs(self.warehouse)
        self.metastore: Metastore = open_metastore(self, self.options)
        locator = self.metastore.lock_locator()
        if locator is not None:
            # tables of this warehouse opened by path in this process (SQL statements, a job's
            # plan) take the metastore's lock too; jobs ship it to their workers
            register_catalog_lock(self.warehouse, locator)

    def __repr__(self) -> str:
        if self.metastore.kind == "filesystem":
            return f"Catalog({self.warehouse!r})"
        return f"Catalog({self.warehouse!r}, metastore={self.metastore.describe()!r})"

    def close(self) -> None:
        """Close the metastore's connections (it reconnects when used again)."""
        self.metastore.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- paths --------------------------------------------------------------------------------------
    def database_path(self, database: str) -> str:
        path = os.path.join(self.warehouse, _check_name("database", database) + _DB_SUFFIX)
        ensure_inside(self.warehouse, path)
        return path

    def table_path(self, identifier: str) -> str:
        db, name = split_identifier(identifier)
        path = os.path.join(self.database_path(db), name)
        ensure_inside(self.warehouse, path)
        return path

    # ---- databases ----------------------------------------------------------------------------------
    def list_databases(self) -> list[str]:
        return self.metastore.list_databases()

    def database_exists(self, database: str) -> bool:
        return self.metastore.database_exists(_check_name("database", database))

    def create_database(self, database: str, *, exist_ok: bool = False) -> None:
        arg.flag("exist_ok", exist_ok)
        self.metastore.create_database(_not_system(_check_name("database", database)), exist_ok=exist_ok)

    def drop_database(self, database: str, *, cascade: bool = False, missing_ok: bool = False) -> None:
        arg.flag("cascade", cascade)
        arg.flag("missing_ok", missing_ok)
        self.metastore.drop_database(
            _check_name("database", database), cascade=cascade, missing_ok=missing_ok
        )

    def rename_database(self, old: str, new: str) -> None:
        new = _not_system(_check_name("database", new))
        self.metastore.rename_database(_check_name("database", old), new)

    # ---- tables ---------------------------------------------------------------------------------------
    def list_tables(self, database: str = DEFAULT_DATABASE) -> list[str]:
        return self.metastore.list_tables(_check_name("database", database))

    def table_exists(self, identifier: str) -> bool:
        """Whether the table exists: it has schema files (file system; see :meth:`get_table` for
        damaged ones), or the metastore registers it (JDBC)."""
        return self.metastore.table_exists(*split_identifier(identifier))

    def create_table(
        self,
        identifier: str,
        schema: Union[pa.Schema, Sequence[DataField]],
        *,
        primary_key: Optional[Sequence[str]] = None,
        partition_by: Optional[Sequence[str]] = None,
        options: Optional[Mapping[str, str]] = None,
        comment: Optional[str] = None,
        exist_ok: bool = False,
    ) -> Table:
        """Create a table (and its database if needed). A primary-key table created without a
        ``bucket`` option gets ``bucket = 1`` (Paimon's default is -1, dynamic bucket mode: give it
        explicitly), except when its primary key does not hold every partition field: a
        cross-partition update needs the key index of ``bucket = -1``. The primary key may also
        come as the ``primary-key`` option.

        ``schema``: an Arrow schema, or Paimon fields (exact types such as ``VARCHAR(10)`` or
        ``CHAR(3)``, which Arrow cannot tell from ``STRING``; field ids are assigned here)."""
        db, _ = split_identifier(identifier)
        _not_system(db)
        if not isinstance(schema, pa.Schema):
            if isinstance(schema, (str, bytes, Mapping)) or not isinstance(schema, Sequence):
                raise ArgumentTypeError(
                    f"argument 'schema' must be a pyarrow Schema or a list of DataFields, not "
                    f"{type(schema).__name__}"
                )
            wrong = [f for f in schema if not isinstance(f, DataField)]
            if wrong:
                raise ArgumentTypeError(
                    f"argument 'schema' must be a pyarrow Schema or a list of DataFields; it holds "
                    f"{type(wrong[0]).__name__} {wrong[0]!r}"
                )
        primary_key = arg.names("primary_key", primary_key) if primary_key is not None else None
        partition_by = arg.names("partition_by", partition_by) if partition_by is not None else None
        if options is not None:
            arg.mapping("options", options)
        arg.optional_text("comment", comment)
        arg.flag("exist_ok", exist_ok)
        path = self.table_path(identifier)
        if self.table_exists(identifier):
            if exist_ok:
                return self.get_table(identifier)
            raise TableAlreadyExistsError(f"table {identifier!r} already exists")
        opts = {str(k): str(v) for k, v in (options or {}).items()}
        pk_cols = list(primary_key or []) or _names(opts.get("primary-key", ""))
        if pk_cols and "bucket" not in opts:
            parts = list(partition_by or []) or _names(opts.get("partition", ""))
            cross_partition = not set(parts) <= set(pk_cols)
            opts["bucket"] = "-1" if cross_partition else "1"
        if opts.get("log.system") == "kafka" and not opts.get("kafka.topic"):
            opts["kafka.topic"] = default_topic(f"{db}.{split_identifier(identifier)[1]}")
        fields = None if isinstance(schema, pa.Schema) else list(schema)
        table_schema = TableSchema.create(
            schema if fields is None else fields_to_arrow_schema(fields),
            partition_keys=list(partition_by or []),
            primary_keys=list(primary_key or []),
            options=opts,
            comment=comment,
        )
        if fields is not None:
            table_schema = _with_exact_types(table_schema, fields)
        core = table_schema.core_options
        has_pk = bool(table_schema.primary_keys)
        check_log_options(core, table=identifier, primary_keys=has_pk, bucket=core.bucket)
        manager = SchemaManager(self.file_io, path)
        if SnapshotManager(self.file_io, path).snapshot_ids():
            raise CorruptTableError(
                f"cannot create table {identifier!r}: {path} holds snapshots of an earlier table but no "
                "schema; a new table would adopt them. Restore its schema files or remove the directory"
            )
        store = TableStore(path, self.file_io, table_schema)
        check_merge_engine(store)
        log = log_config(store)
        if log is not None:  # before the schema: an unreachable broker leaves no half-created table
            if core.log_system_auto_register:
                log.create_topic()
            else:
                parts = log.topic_partitions()
                if parts is None:
                    raise LogSystemError(
                        f"{log.describe()} does not exist and 'log.system.auto-register' is false: "
                        "create it first"
                    )
                log.check_partitions(parts)
            if core.log_consistency == LogConsistency.TRANSACTIONAL:
                start_marker(log)
        created = self.metastore.create_table(db, split_identifier(identifier)[1],
                                              lambda: manager.create_table(table_schema))
        return self._table(TableStore(path, self.file_io, created), identifier)

    def get_table(self, identifier: str) -> Table:
        """The table ``db.name``; ``db.name$branch_<b>`` is its branch ``b``."""
        if isinstance(identifier, str) and "$branch_" in identifier:
            base, _, branch = identifier.partition("$branch_")
            return self.get_table(base).branch(branch)
        path = self.table_path(identifier)
        if not self.metastore.table_loadable(*split_identifier(identifier)):
            raise TableNotFoundError(f"table {identifier!r} does not exist in {self.warehouse}")
        try:
            store = TableStore(path, self.file_io)  # CorruptTableError without a schema
        except TableNotFoundError:
            if self.metastore.kind == "filesystem":
                raise
            raise CorruptTableError(
                f"table {identifier!r} is registered in {self.metastore.describe()} but {path} holds no "
                "schema files: drop_table removes the entry (a rename interrupted after moving the files "
                "finishes when it is run again)"
            ) from None
        return self._table(store, identifier)

    def _table(self, store: TableStore, identifier: str) -> Table:
        """The table of ``store``, with the metastore's commit lock (if it holds one) and a copy of
        its options kept up to date there."""
        db, name = split_identifier(identifier)
        provider = self.metastore.lock_provider(db, name)
        if provider is not None:
            store.snapshot_manager.lock_provider = provider
        table = Table(store, identifier)
        if self.metastore.kind != "filesystem":
            table.schema_listener = functools.partial(self.metastore.table_altered, db, name)
        return table

    def drop_table(self, identifier: str, *, missing_ok: bool = False) -> None:
        """Delete the table's directory with everything in it. A damaged table (its schema files
        lost, so that it cannot be opened) drops too: dropping is how one gets rid of it."""
        arg.flag("missing_ok", missing_ok)
        self.metastore.drop_table(*split_identifier(identifier), missing_ok=missing_ok)

    def rename_table(self, old: str, new: str) -> None:
        self.metastore.rename_table(*split_identifier(old), *split_identifier(new))


def _names(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def _with_exact_types(schema: TableSchema, fields: Sequence[DataField]) -> TableSchema:
    """``schema`` with the given fields' exact types and comments, numbered as Paimon numbers them
    (each column the next id, then its nested fields); primary-key columns NOT NULL."""
    ids = FieldIdCounter()
    pk = set(schema.primary_keys)
    out = []
    for f in fields:
        fid = ids.next()
        t = reassign_field_ids(f.type, ids)
        typ = with_nullable(t, False) if f.name in pk else t
        out.append(DataField(fid, f.name, typ, f.description, f.default_value))
    exact = schema.copy(fields=out, highest_field_id=highest_field_id(out))
    exact.validate()
    return exact
