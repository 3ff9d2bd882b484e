"""The JDBC metastore: names in Paimon's JDBC catalog tables (:mod:`.jdbc_tables`), in SQLite or
PostgreSQL, so that Paimon's ``JdbcCatalog`` and lakelog list, load, rename and drop the same
tables. Schemas and snapshots stay in the warehouse (``<warehouse>/<db>.db/<table>/``).

The database is the truth: a table exists when its row does. Every change of names is one database
transaction, and the warehouse step runs inside it, before the commit:

* **create**: insert the row (a name another transaction holds makes this one wait for it, then
  answer ``TableAlreadyExistsError``), write ``schema/schema-0``, copy the options, commit. A crash
  before the commit leaves no row and, at most, a directory holding only schema files: the next
  create of that name replaces it (a directory holding more is refused, naming it).
  Paimon 1.4 writes the schema first and inserts the row after, outside any transaction.
* **drop**: delete the rows, delete the table's directory, commit. A crash before the commit
  leaves the table registered with some of its files gone: it opens as damaged
  (``CorruptTableError``) and ``drop_table`` removes it. Paimon commits the delete first and then
  deletes the files, so its crash leaves files that no row names.
* **rename**: update the rows, move the directory (as Paimon's ``JdbcCatalog`` moves it, when the
  table has schema files), commit. A crash between the move and the commit leaves the old name
  registered over the moved files; renaming again finishes the move. An object store has no
  atomic rename: there the objects are copied inside the transaction, under the table's commit
  lock, and the old ones deleted after the commit (:meth:`JdbcMetastore._rename_table_by_copy`).
  A database holding tables is not renamed there (one transaction cannot copy them all).
* **databases**: ``exists`` and ``location`` rows; a database dropped with ``cascade`` takes its
  tables' rows and directories along (Paimon drops only the rows).

Another catalog (another ``catalog-key``, or a file-system catalog) on the same warehouse would
share the directories: give each its own warehouse.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from lakelog.connector.catalog.base import LockProvider, Metastore, WarehouseLayout
from lakelog.connector.catalog.jdbc_connect import (
    JdbcTarget,
    SqlDatabase,
    Tx,
    UniqueViolation,
    parse_jdbc_uri,
)
from lakelog.connector.catalog.jdbc_tables import (
    DATABASE_PROPERTIES,
    TABLE_PROPERTIES,
    TABLES,
    create_lock_table,
    create_tables,
    table_properties,
    write_table_properties,
)
from lakelog.connector.catalog.options import JdbcCatalogOptions
from lakelog.connector.errors import (
    CorruptTableError,
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    MetastoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsafeStoreError,
)
from lakelog.connector.format.lock import serialised_by_catalog
from lakelog.connector.format.schema_manager import SchemaManager

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.format.schema import TableSchema

__all__ = ["JdbcMetastore"]

_EXISTS, _LOCATION = "exists", "location"
# in both directories of a table being renamed on an object store (a rename by copy)
_MOVING = ".lakelog-moving"


class JdbcMetastore(Metastore):
    """Names in Paimon's JDBC catalog tables (see the module docs)."""

    kind = "jdbc"

    def __init__(self, layout: WarehouseLayout, options: Mapping[str, str]) -> None:
        super().__init__(layout)
        self.options = JdbcCatalogOptions.parse(options)
        self.key = self.options.catalog_key
        self.target = parse_jdbc_uri(self.options.uri, self.options.driver)
        self.db = SqlDatabase(self.target)
        # connect now: a wrong uri or password fails where the catalog is opened
        self.db.run(self._create_tables, what="create Paimon's catalog tables")

    def _create_tables(self, tx: Tx) -> None:
        create_tables(tx, self.db.dialect)
        if self.options.lock_enabled:
            create_lock_table(tx, self.db.dialect, self.options.lock_key_max_length)

    def describe(self) -> str:
        return f"jdbc {self.target.uri} (catalog-key {self.key!r})"

    def close(self) -> None:
        self.db.close()

    def _path(self, db: str, table: str) -> str:
        return self.layout.table_path(f"{db}.{table}")

    # ---- databases ------------------------------------------------------------------------------
    def _db_exists(self, tx: Tx, db: str) -> bool:
        args = (self.key, db)
        return bool(
            tx.query(f"SELECT 1 FROM {TABLES} WHERE catalog_key = ? AND database_name = ? LIMIT 1", args)
            or tx.query(
                f"SELECT 1 FROM {DATABASE_PROPERTIES} WHERE catalog_key = ? AND database_name = ? LIMIT 1",
                args,
            )
        )

    def list_databases(self) -> list[str]:
        rows = self.db.run(
            lambda tx: tx.query(
                f"SELECT database_name FROM {TABLES} WHERE catalog_key = ? UNION "
                f"SELECT database_name FROM {DATABASE_PROPERTIES} WHERE catalog_key = ?",
                (self.key, self.key),
            ),
            write=False, what="list databases",
        )
        return sorted({str(r[0]) for r in rows})

    def database_exists(self, database: str) -> bool:
        return self.db.run(lambda tx: self._db_exists(tx, database), write=False, what="look up a database")

    def _register_database(self, tx: Tx, db: str) -> int:
        n = tx.execute(
            f"INSERT INTO {DATABASE_PROPERTIES} (catalog_key, database_name, property_key, property_value) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (self.key, db, _EXISTS, "true"),
        )
        tx.execute(
            f"INSERT INTO {DATABASE_PROPERTIES} (catalog_key, database_name, property_key, property_value) "
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (self.key, db, _LOCATION, self.layout.database_path(db)),
        )
        return n

    def create_database(self, database: str, *, exist_ok: bool = False) -> None:
        def create(tx: Tx) -> bool:
            if self._db_exists(tx, database):
                return False
            return self._register_database(tx, database) == 1

        if not self.db.run(create, what=f"create database {database!r}") and not exist_ok:
            raise DatabaseAlreadyExistsError(f"database {database!r} already exists")

    def drop_database(self, database: str, *, cascade: bool = False, missing_ok: bool = False) -> None:
        fio = self.layout.file_io

        def drop(tx: Tx) -> bool:
            if not self._db_exists(tx, database):
                return False
            tables = self._tables(tx, database)
            if tables and not cascade:
                raise DatabaseNotEmptyError(
                    f"database {database!r} holds tables {tables}; pass cascade=True to drop them"
                )
            args = (self.key, database)
            for name in (TABLES, TABLE_PROPERTIES, DATABASE_PROPERTIES):
                tx.execute(f"DELETE FROM {name} WHERE catalog_key = ? AND database_name = ?", args)
            for t in tables:
                path = self._path(database, t)
                if fio.exists(path):
                    fio.delete_dir(path)
            fio.delete_empty_dir(self.layout.database_path(database))
            return True

        if not self.db.run(drop, what=f"drop database {database!r}") and not missing_ok:
            raise DatabaseNotFoundError(f"database {database!r} does not exist")

    def rename_database(self, old: str, new: str) -> None:
        fio = self.layout.file_io
        src, dst = self.layout.database_path(old), self.layout.database_path(new)

        def rename(tx: Tx) -> None:
            if not self._db_exists(tx, old):
                raise DatabaseNotFoundError(f"database {old!r} does not exist")
            if self._db_exists(tx, new) or fio.exists(dst):
                raise DatabaseAlreadyExistsError(f"database {new!r} already exists")
            tables = self._tables(tx, old)
            if tables and not fio.atomic_rename:  # each a copy of its own: no one transaction holds all
                raise UnsafeStoreError(
                    f"cannot rename database {old!r} on the object store {src}: it holds tables "
                    f"{tables}, and an object store moves a table only by copying it; rename the "
                    "tables into a new database one by one (each rename is atomic)"
                )
            for name in (TABLES, TABLE_PROPERTIES, DATABASE_PROPERTIES):
                tx.execute(f"UPDATE {name} SET database_name = ? WHERE catalog_key = ? AND database_name = ?",
                           (new, self.key, old))
            tx.execute(
                f"UPDATE {DATABASE_PROPERTIES} SET property_value = ? WHERE catalog_key = ? "
                "AND database_name = ? AND property_key = ?",
                (dst, self.key, new, _LOCATION),
            )
            if fio.exists(src):
                if fio.atomic_rename:
                    fio.rename_dir(src, dst)
                else:  # an empty database is its marker object
                    fio.create_dir(dst)

        self._conflicts_as(DatabaseAlreadyExistsError(f"database {new!r} already exists"),
                           lambda: self.db.run(rename, what=f"rename database {old!r}"))
        if not fio.atomic_rename:
            _quietly(fio.delete_dir, src)  # the empty database's marker

    # ---- tables ------------------------------------------------------------------------------------
    def _tables(self, tx: Tx, db: str) -> list[str]:
        rows = tx.query(f"SELECT table_name FROM {TABLES} WHERE catalog_key = ? AND database_name = ?",
                        (self.key, db))
        return sorted(str(r[0]) for r in rows)

    def _registered(self, tx: Tx, db: str, table: str) -> bool:
        return bool(tx.query(
            f"SELECT 1 FROM {TABLES} WHERE catalog_key = ? AND database_name = ? AND table_name = ?",
            (self.key, db, table),
        ))

    def list_tables(self, database: str) -> list[str]:
        def tables(tx: Tx) -> Optional[list[str]]:
            if not self._db_exists(tx, database):
                return None
            return self._tables(tx, database)

        out = self.db.run(tables, write=False, what=f"list the tables of {database!r}")
        if out is None:
            raise DatabaseNotFoundError(f"database {database!r} does not exist")
        return out

    def table_exists(self, database: str, table: str) -> bool:
        return self.db.run(lambda tx: self._registered(tx, database, table), write=False,
                           what=f"look up table {database}.{table}")

    def create_table(self, database: str, table: str, write_schema: Callable[[], TableSchema]) -> TableSchema:
        ident = f"{database}.{table}"
        path = self._path(database, table)
        wrote: list[bool] = []

        def create(tx: Tx) -> TableSchema:
            self._register_database(tx, database)
            n = tx.execute(
                f"INSERT INTO {TABLES} (catalog_key, database_name, table_name) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (self.key, database, table),
            )
            if n != 1:
                raise TableAlreadyExistsError(f"table {ident!r} already exists")
            self._clear_leftover(ident, path)
            try:
                with serialised_by_catalog():  # this transaction holds the name: one creator wins
                    schema = write_schema()
            except FileExistsError:  # another writer of this directory (not through this catalog)
                raise TableAlreadyExistsError(
                    f"table {ident!r} already exists in the warehouse ({path})"
                ) from None
            wrote.append(True)
            if self.options.sync_all_properties:
                write_table_properties(tx, self.key, database, table, table_properties(schema))
            return schema

        try:
            return self.db.run(create, what=f"create table {ident!r}")
        except BaseException as e:
            if wrote and not self._committed_anyway(e, database, table):
                self.layout.file_io.delete_dir(path)
            elif wrote:  # the commit's answer was lost, but it was made: the table exists
                return SchemaManager(self.layout.file_io, path).schema(0)
            raise

    def _committed_anyway(self, e: BaseException, db: str, table: str) -> bool:
        """After a failed create that wrote its files: whether the commit happened anyway (its
        answer lost with the connection), asked on a new connection."""
        if not isinstance(e, MetastoreError):
            return False
        try:
            return self.table_exists(db, table)
        except MetastoreError:
            return True  # cannot tell: keep the files (a damaged table is visible, lost data is not)

    def _clear_leftover(self, ident: str, path: str) -> None:
        """Before a create or a rename onto ``ident`` (its row held): the table's directory must be
        absent or hold only what an interrupted create leaves (schema files), or what a rename by
        copy leaves on the side that lost (:data:`_MOVING`; lease objects)."""
        fio = self.layout.file_io
        if not fio.exists(path):
            return
        names = [n for n in fio.list_dir(path) if not n.startswith(".")]
        if set(names) <= {"schema"} or fio.file_exists(f"{path}/{_MOVING}"):
            fio.delete_dir(path)
            return
        if not [p for p in fio.walk_files(path) if not os.path.basename(p).startswith(".")]:
            fio.delete_dir(path)  # hidden files only: lock files or lease objects of stale writers
            return
        raise CorruptTableError(
            f"cannot create table {ident!r}: its directory {path} holds files "
            f"({', '.join(names[:5])}) that no table of this catalog owns (left by an interrupted drop, "
            "or a table of another catalog on this warehouse); remove the directory or choose another name"
        )

    def drop_table(self, database: str, table: str, *, missing_ok: bool = False) -> None:
        ident = f"{database}.{table}"
        fio = self.layout.file_io
        path = self._path(database, table)

        def drop(tx: Tx) -> bool:
            args = (self.key, database, table)
            n = tx.execute(
                f"DELETE FROM {TABLES} WHERE catalog_key = ? AND database_name = ? AND table_name = ?", args
            )
            if n == 0:
                return False
            tx.execute(f"DELETE FROM {TABLE_PROPERTIES} WHERE catalog_key = ? AND database_name = ? "
                       "AND table_name = ?", args)
            if fio.exists(path):
                fio.delete_dir(path)
            return True

        if not self.db.run(drop, what=f"drop table {ident!r}") and not missing_ok:
            raise TableNotFoundError(f"table {ident!r} does not exist")

    def rename_table(self, src_db: str, src: str, dst_db: str, dst: str) -> None:
        old, new = f"{src_db}.{src}", f"{dst_db}.{dst}"
        fio = self.layout.file_io
        src_path, dst_path = self._path(src_db, src), self._path(dst_db, dst)
        if not fio.atomic_rename:
            self._rename_table_by_copy(old, new, (src_db, src), (dst_db, dst))
            return

        def rename(tx: Tx) -> None:
            self._rename_rows(tx, old, new, (src_db, src), (dst_db, dst))
            if SchemaManager(fio, src_path).list_ids():
                if fio.exists(dst_path):
                    self._clear_leftover(new, dst_path)
                fio.mkdirs(os.path.dirname(dst_path))
                fio.rename_dir(src_path, dst_path)
            # else: no files to move, or a rename interrupted after the move (they are at dst_path)

        self._conflicts_as(TableAlreadyExistsError(f"table {new!r} already exists"),
                           lambda: self.db.run(rename, what=f"rename table {old!r}"))

    def _rename_rows(self, tx: Tx, old: str, new: str, src: tuple[str, str], dst: tuple[str, str]) -> None:
        if not self._registered(tx, *src):
            raise TableNotFoundError(f"table {old!r} does not exist")
        if self._registered(tx, *dst):
            raise TableAlreadyExistsError(f"table {new!r} already exists")
        if not self._db_exists(tx, dst[0]):
            raise DatabaseNotFoundError(f"database {dst[0]!r} does not exist")
        for name in (TABLES, TABLE_PROPERTIES):
            tx.execute(
                f"UPDATE {name} SET database_name = ?, table_name = ? WHERE catalog_key = ? AND "
                "database_name = ? AND table_name = ?",
                (*dst, self.key, *src),
            )

    def _rename_table_by_copy(self, old: str, new: str, src: tuple[str, str], dst: tuple[str, str]) -> None:
        """A rename on an object store, which has no atomic rename: under the table's commit lock
        (no snapshot lands meanwhile), the rows are renamed and every object is copied to the new
        directory inside the transaction; once it has committed, the old objects are deleted, still
        under the lock, so that a writer holding the old name finds the table gone instead of
        committing into it (``TableCommit`` checks a first snapshot's schema). Both directories carry a
        :data:`_MOVING` marker meanwhile: what a crash leaves on the side the rows do not name is
        removed by the next create or rename of that name (:meth:`_clear_leftover`)."""
        from lakelog.connector.format.lock import LEASE_PREFIX
        from lakelog.connector.format.snapshot import SnapshotManager

        fio = self.layout.file_io
        src_path, dst_path = self._path(*src), self._path(*dst)
        marker = json.dumps({"from": old, "to": new}).encode()
        copied: list[bool] = []

        def rename(tx: Tx) -> None:
            self._rename_rows(tx, old, new, src, dst)
            if not SchemaManager(fio, src_path).list_ids():
                return  # no files (or only an interrupted create's, which the next create replaces)
            if fio.exists(dst_path):
                self._clear_leftover(new, dst_path)
            for path in (src_path, dst_path):
                fio.write_bytes(f"{path}/{_MOVING}", marker)
            copied.append(True)
            fio.copy_tree(src_path, dst_path, skip=lambda n: n == _MOVING or n.startswith(LEASE_PREFIX))

        with SnapshotManager(fio, src_path).lock():
            try:
                self._conflicts_as(TableAlreadyExistsError(f"table {new!r} already exists"),
                                   lambda: self.db.run(rename, what=f"rename table {old!r}"))
            except BaseException as e:
                if copied and not self._committed_anyway(e, *dst):  # best effort: see _clear_leftover
                    _quietly(fio.delete_dir, dst_path)
                    _quietly(fio.delete, f"{src_path}/{_MOVING}")
                raise
            if copied:  # the rows name the copy: the old objects go, the commit lock's last
                objects = list(fio.walk_files(src_path))
                fio.delete_files([p for p in objects if not os.path.basename(p).startswith(LEASE_PREFIX)])
        if copied:  # best effort: what stays is cleared by the next create or rename of the name
            _quietly(fio.delete_dir, src_path)
            _quietly(fio.delete, f"{dst_path}/{_MOVING}")

    def table_altered(self, database: str, table: str, schema: TableSchema) -> None:
        if not self.options.sync_all_properties:
            return
        props = table_properties(schema)

        def write(tx: Tx) -> None:
            if self._registered(tx, database, table):
                write_table_properties(tx, self.key, database, table, props)

        self.db.run(write, what=f"copy the options of {database}.{table}")

    @staticmethod
    def _conflicts_as(error: Exception, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except UniqueViolation:
            raise error from None

    # ---- the commit lock -------------------------------------------------------------------------
    def lock_provider(self, database: str, table: str) -> Optional[LockProvider]:
        if not self.options.lock_enabled:
            return None
        return _table_lock(self.target, self.options, database, table, self._path(database, table))

    def lock_locator(self) -> Optional[Callable[[str], Optional[LockProvider]]]:
        if not self.options.lock_enabled:
            return None
        return functools.partial(_lock_at, self.target, self.options, self.layout.warehouse)


def _table_lock(
    target: JdbcTarget, o: JdbcCatalogOptions, database: str, table: str, path: str
) -> LockProvider:
    from lakelog.connector.catalog.jdbc_lock import JdbcLock

    return JdbcLock(
        target, o.catalog_key, database, table, path,
        lease_s=o.lock_lease_s, max_sleep_s=o.lock_check_max_sleep_s,
        acquire_timeout_s=o.lock_acquire_timeout_s, key_max_length=o.lock_key_max_length,
    )


def _lock_at(target: JdbcTarget, o: JdbcCatalogOptions, warehouse: str, path: str) -> Optional[LockProvider]:
    """The lock of the table whose directory (or a branch's) is ``path`` under ``warehouse``
    (``<warehouse>/<db>.db/<table>[/branch/...]``); None for a path that is no table's."""
    parts = os.path.relpath(path, warehouse).split(os.sep)
    if len(parts) < 2 or not parts[0].endswith(".db") or parts[0] == ".db":
        return None
    database, table = parts[0][: -len(".db")], parts[1]
    return _table_lock(target, o, database, table, os.path.join(warehouse, parts[0], table))


def _quietly(fn: Callable[[str], Any], path: str) -> None:
    """``fn(path)``, on a path where a failure changes nothing that matters (cleanup after a rename
    by copy: what stays is cleared later)."""
    with contextlib.suppress(Exception):
        fn(path)
