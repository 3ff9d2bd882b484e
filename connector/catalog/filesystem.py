"""The file-system metastore: a database is a ``<db>.db`` directory of the warehouse, a table a
directory in it with schema files, as Paimon's ``FileSystemCatalog`` lays them out.

The names are the files, so there is nothing to keep in agreement: creating a table is creating
its first schema file (create-if-absent, so of two racing creators one wins), dropping it deletes
its directory, renaming it renames the directory (atomic on a local file system; refused on an
object store, where a rename copies every object). On an object store a database is its
``<db>.db/`` marker object, as Hadoop's S3A file system (and so Paimon) writes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from lakelog.connector.catalog.base import Metastore
from lakelog.connector.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_manager import SchemaManager
from lakelog.connector.format.snapshot import SnapshotManager

__all__ = ["FileSystemMetastore", "DB_SUFFIX"]

DB_SUFFIX = ".db"


class FileSystemMetastore(Metastore):
    """Names are the warehouse's directories (lakelog's and Paimon's default catalog)."""

    kind = "filesystem"

    @property
    def warehouse(self) -> str:
        return self.layout.warehouse

    @property
    def file_io(self) -> FileIO:
        return self.layout.file_io

    def database_path(self, database: str) -> str:
        return self.layout.database_path(database)

    def describe(self) -> str:
        return "filesystem"

    # ---- databases ----------------------------------------------------------------------------------
    def list_databases(self) -> list[str]:
        return sorted(
            n[: -len(DB_SUFFIX)]
            for n in self.file_io.list_dir(self.warehouse)
            if n.endswith(DB_SUFFIX) and self.file_io.is_dir(os.path.join(self.warehouse, n))
        )

    def database_exists(self, database: str) -> bool:
        return self.file_io.is_dir(self.database_path(database))

    def create_database(self, database: str, *, exist_ok: bool = False) -> None:
        path = self.database_path(database)
        if self.file_io.is_dir(path):
            if exist_ok:
                return
            raise DatabaseAlreadyExistsError(f"database {database!r} already exists")
        self.file_io.create_dir(path)

    def drop_database(self, database: str, *, cascade: bool = False, missing_ok: bool = False) -> None:
        path = self.database_path(database)
        if not self.file_io.is_dir(path):
            if missing_ok:
                return
            raise DatabaseNotFoundError(f"database {database!r} does not exist")
        tables = self.list_tables(database)
        if tables and not cascade:
            raise DatabaseNotEmptyError(
                f"database {database!r} holds tables {tables}; pass cascade=True to drop them"
            )
        self.file_io.delete_dir(path)

    def rename_database(self, old: str, new: str) -> None:
        src, dst = self.database_path(old), self.database_path(new)
        if not self.file_io.is_dir(src):
            raise DatabaseNotFoundError(f"database {old!r} does not exist")
        if self.file_io.exists(dst):
            raise DatabaseAlreadyExistsError(f"database {new!r} already exists")
        self.file_io.rename_dir(src, dst)

    # ---- tables ---------------------------------------------------------------------------------------
    def list_tables(self, database: str) -> list[str]:
        path = self.database_path(database)
        if not self.file_io.is_dir(path):
            raise DatabaseNotFoundError(f"database {database!r} does not exist")
        return sorted(
            n
            for n in self.file_io.list_dir(path)
            if self.file_io.exists(os.path.join(path, n, "schema", "schema-0"))
        )

    def table_exists(self, database: str, table: str) -> bool:
        return bool(SchemaManager(self.file_io, self.layout.table_path(f"{database}.{table}")).list_ids())

    def table_loadable(self, database: str, table: str) -> bool:
        path = self.layout.table_path(f"{database}.{table}")
        return self.table_exists(database, table) or bool(SnapshotManager(self.file_io, path).snapshot_ids())

    def create_table(self, database: str, table: str, write_schema: Callable[[], TableSchema]) -> TableSchema:
        self.create_database(database, exist_ok=True)
        try:
            return write_schema()
        except FileExistsError:
            raise TableAlreadyExistsError(f"table {database + '.' + table!r} already exists") from None

    def drop_table(self, database: str, table: str, *, missing_ok: bool = False) -> None:
        path = self.layout.table_path(f"{database}.{table}")
        if not self.file_io.is_dir(path):
            if missing_ok:
                return
            raise TableNotFoundError(f"table {database + '.' + table!r} does not exist")
        self.file_io.delete_dir(path)

    def rename_table(self, src_db: str, src: str, dst_db: str, dst: str) -> None:
        old, new = f"{src_db}.{src}", f"{dst_db}.{dst}"
        if not self.table_exists(src_db, src):
            raise TableNotFoundError(f"table {old!r} does not exist")
        if self.table_exists(dst_db, dst):
            raise TableAlreadyExistsError(f"table {new!r} already exists")
        if not self.database_exists(dst_db):
            raise DatabaseNotFoundError(f"database {dst_db!r} does not exist")
        self.file_io.rename_dir(self.layout.table_path(old), self.layout.table_path(new))
