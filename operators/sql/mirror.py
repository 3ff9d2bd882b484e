"""Lakelog catalogs in a Flink session: the warehouse (and, for a JDBC catalog, its metastore) is
the truth, Flink sees a mirror of it.

Python cannot give Flink a catalog of its own, so each ``CREATE CATALOG c WITH ('type'='lakelog')``
becomes a ``generic_in_memory`` catalog that mirrors the warehouse: a database per ``<db>.db``
directory, a table per table with its columns, computed columns, watermark, keys, comment and
options (:func:`~lakelog.operators.sql.table_ddl.create_table_ddl`). Flink resolves names, parses
DDL, runs ``DESCRIBE``/``SHOW`` against the mirror; every change goes to the warehouse first and
the mirror follows (:meth:`Mirror.sync_table`, :meth:`Mirror.sync_catalog`), also when another
process changed the warehouse, so a new session and this one agree. This module imports pyflink.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from pyflink.table.catalog import ObjectPath

from lakelog.connector.errors import LakelogError
from lakelog.connector.format.branches import branch_location, check_branch_name
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.schema_manager import SchemaManager
from lakelog.connector.table.catalog import SYSTEM_DATABASE, Catalog
from lakelog.operators.sql.session import CatalogSpec
from lakelog.operators.sql.table_ddl import create_table_ddl, quote_ident, quote_str

__all__ = ["Mirror"]

log = logging.getLogger(__name__)


class Mirror:
    """The lakelog catalogs of a session and their Flink mirrors."""

    def __init__(self) -> None:
        self.specs: dict[str, CatalogSpec] = {}
        self._catalogs: dict[str, Catalog] = {}  # one open catalog (a metastore connection) per name
        self._schema_ids: dict[tuple[str, str, str], int] = {}  # mirrored table -> its schema id
        self._fio = FileIO()

    def is_lakelog(self, catalog: str) -> bool:
        return catalog in self.specs

    def catalog(self, name: str) -> Catalog:
        cat = self._catalogs.get(name)
        if cat is None:
            spec = self.specs[name]
            cat = self._catalogs[name] = Catalog(spec.warehouse, options=spec.catalog_options)
        return cat

    # ---- catalogs --------------------------------------------------------------------------------
    def register(self, t_env: Any, spec: CatalogSpec) -> None:
        """Create the mirror of ``spec`` in ``t_env`` (the default database is created on disk, as
        Paimon's catalog does)."""
        cat = Catalog(spec.warehouse, options=spec.catalog_options)  # a bad uri fails here
        cat.create_database(spec.default_database, exist_ok=True)
        t_env.execute_sql(
            f"CREATE CATALOG {quote_ident(spec.name)} WITH ('type'='generic_in_memory', "
            f"'default-database'={quote_str(spec.default_database)})"
        )
        self.specs[spec.name] = spec
        self._catalogs[spec.name] = cat
        self._forget(spec.name)
        self.sync_catalog(t_env, spec.name)

    def unregister(self, name: str) -> None:
        self.specs.pop(name, None)
        cat = self._catalogs.pop(name, None)
        if cat is not None:
            cat.close()
        self._forget(name)

    def _forget(self, catalog: str) -> None:
        for key in [k for k in self._schema_ids if k[0] == catalog]:
            del self._schema_ids[key]

    def sync_catalog(self, t_env: Any, name: str) -> None:
        """Make the mirror of catalog ``name`` list exactly the warehouse's databases and tables."""
        flink = t_env.get_catalog(name)
        disk = self.catalog(name)
        on_disk = set(disk.list_databases())
        mirrored = set(flink.list_databases())
        for db in sorted(mirrored - on_disk):
            if db not in (self.specs[name].default_database, SYSTEM_DATABASE):
                flink._j_catalog.dropDatabase(db, True, True)
                self._forget_db(name, db)
        for db in sorted(on_disk):
            if db not in mirrored:
                t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(name)}.{quote_ident(db)}")
            tables = set(disk.list_tables(db))
            for t in set(flink.list_tables(db)) - tables:
                self.sync_table(t_env, name, db, t)
            for t in sorted(tables):
                self.sync_table(t_env, name, db, t)
        self.sync_database(t_env, name, SYSTEM_DATABASE)  # listed, and USE sys works

    def _forget_db(self, catalog: str, db: str) -> None:
        for key in [k for k in self._schema_ids if k[:2] == (catalog, db)]:
            del self._schema_ids[key]

    def sync_database(self, t_env: Any, catalog: str, db: str) -> bool:
        """Mirror database ``db`` as it is on disk (created or dropped); whether it exists. The
        system database ``sys`` always exists (its tables are views made per statement)."""
        flink = t_env.get_catalog(catalog)
        if db == SYSTEM_DATABASE:
            if not flink.database_exists(db):
                t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(catalog)}.{quote_ident(db)}")
            return True
        exists = self.catalog(catalog).database_exists(db)
        if exists and not flink.database_exists(db):
            t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(catalog)}.{quote_ident(db)}")
        elif not exists and flink.database_exists(db) and db != self.specs[catalog].default_database:
            flink._j_catalog.dropDatabase(db, True, True)
            self._forget_db(catalog, db)
        return exists

    # ---- tables ------------------------------------------------------------------------------------
    def _schema_id(self, catalog: str, db: str, table: str) -> Optional[int]:
        base, sep, branch = table.partition("$branch_")
        try:
            cat = self.catalog(catalog)
            path = cat.table_path(f"{db}.{base}")
            if cat.metastore.kind != "filesystem" and not cat.table_exists(f"{db}.{base}"):
                return None  # files no entry of the metastore names are no table
            if sep:
                path = branch_location(path, check_branch_name(branch))
        except LakelogError:
            return None
        ids = SchemaManager(self._fio, path).list_ids()
        return ids[-1] if ids else None

    def sync_table(self, t_env: Any, catalog: str, db: str, table: str) -> bool:
        """Mirror table ``catalog.db.table`` as the warehouse holds it now; whether it exists."""
        key = (catalog, db, table)
        sid = self._schema_id(catalog, db, table)
        if sid is not None and self._schema_ids.get(key) == sid:
            return True
        flink = t_env.get_catalog(catalog)
        path = ObjectPath(db, table)
        if flink.table_exists(path):
            flink.drop_table(path, True)
        self._schema_ids.pop(key, None)
        if sid is None:
            return False
        self.sync_database(t_env, catalog, db)
        lake = self.catalog(catalog).get_table(f"{db}.{table}")
        schema = lake.store.schema_manager.schema(sid)
        qualified = ".".join(quote_ident(p) for p in key)
        try:
            t_env.execute_sql(create_table_ddl(qualified, schema))
        except Exception as e:  # noqa: BLE001 - a table Flink cannot show stays usable by path
            log.warning("lakelog table %s cannot be shown to Flink: %s", ".".join(key), e)
            return True
        self._schema_ids[key] = sid
        return True

    def forget_table(self, t_env: Any, catalog: str, db: str, table: str) -> None:
        """Drop the mirror of a table that is gone from disk."""
        self.sync_table(t_env, catalog, db, table)
