"""The metastore interface: which databases and tables a catalog has, and how creating, dropping
and renaming them is ordered against the warehouse files.

A :class:`Metastore` registers names only. The catalog (:class:`lakelog.Catalog`) checks
arguments, builds schemas and opens tables; it calls the metastore for every name it lists,
creates, drops or renames, and the metastore decides the order of the database and warehouse
steps and what a crash between them leaves (each implementation's docstring says).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, ClassVar, Optional, Protocol

from lakelog.connector.errors import OptionError
from lakelog.connector.format.lock import LockProvider

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.format.fileio import FileIO
    from lakelog.connector.format.schema import TableSchema

__all__ = ["Metastore", "WarehouseLayout", "LockProvider", "open_metastore", "METASTORES"]


METASTORES = ("filesystem", "jdbc")


class WarehouseLayout(Protocol):
    """Where a catalog's files are: what a metastore needs of the catalog."""

    warehouse: str
    file_io: FileIO

    def database_path(self, database: str) -> str: ...

    def table_path(self, identifier: str) -> str: ...


class Metastore(ABC):
    """The names of one catalog (databases and their tables), registered somewhere.

    Names reach a metastore checked (valid database and table names); errors are the catalog's:
    ``DatabaseNotFoundError``, ``DatabaseAlreadyExistsError``, ``DatabaseNotEmptyError``,
    ``TableNotFoundError``, ``TableAlreadyExistsError``."""

    kind: ClassVar[str]

    def __init__(self, layout: WarehouseLayout) -> None:
        self.layout = layout

    # ---- databases -----------------------------------------------------------------------------
    @abstractmethod
    def list_databases(self) -> list[str]: ...

    @abstractmethod
    def database_exists(self, database: str) -> bool: ...

    @abstractmethod
    def create_database(self, database: str, *, exist_ok: bool = False) -> None: ...

    @abstractmethod
    def drop_database(self, database: str, *, cascade: bool = False, missing_ok: bool = False) -> None:
        """Drop the database with its tables' files (``cascade``), or refuse when it holds tables."""

    @abstractmethod
    def rename_database(self, old: str, new: str) -> None: ...

    # ---- tables ----------------------------------------------------------------------------------
    @abstractmethod
    def list_tables(self, database: str) -> list[str]:
        """Tables of ``database``, sorted; ``DatabaseNotFoundError`` when it does not exist."""

    @abstractmethod
    def table_exists(self, database: str, table: str) -> bool:
        """Whether the table is registered (has schema files, for the file system)."""

    def table_loadable(self, database: str, table: str) -> bool:
        """Whether ``get_table`` should open the table (and raise ``CorruptTableError`` if its
        files are damaged) rather than answer ``TableNotFoundError``."""
        return self.table_exists(database, table)

    @abstractmethod
    def create_table(self, database: str, table: str, write_schema: Callable[[], TableSchema]) -> TableSchema:
        """Register a new table, creating its database when needed; ``write_schema`` writes its
        first schema file into the warehouse (``FileExistsError`` when one is there) and is called
        exactly once, in the order this metastore documents. ``TableAlreadyExistsError`` when the
        name is taken; nothing is registered when ``write_schema`` fails."""

    @abstractmethod
    def drop_table(self, database: str, table: str, *, missing_ok: bool = False) -> None:
        """Unregister the table and delete its directory (a damaged table drops too)."""

    @abstractmethod
    def rename_table(self, src_db: str, src: str, dst_db: str, dst: str) -> None:
        """Give the table a new name, moving its directory in the warehouse."""

    def table_altered(self, database: str, table: str, schema: TableSchema) -> None:  # noqa: B027
        """After a schema change to ``schema``: where the metastore keeps a copy of the table's
        options, it copies them again."""

    # ---- the commit lock and the connection ------------------------------------------------------
    def lock_locator(self) -> Optional[Callable[[str], Optional[LockProvider]]]:
        """How to find the lock of a table of this warehouse by its directory (or a branch's), for
        tables opened by path (see :func:`~lakelog.connector.format.lock.register_catalog_lock`):
        holds no connection and no reference to the catalog. None when the metastore holds no
        locks."""
        return None

    def lock_provider(self, database: str, table: str) -> Optional[LockProvider]:
        """The commit lock this metastore holds for the table (None: the file IO's own lock)."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """The metastore for messages and reprs (never a secret)."""

    def close(self) -> None:  # noqa: B027
        """Release connections (the metastore reconnects when used again)."""


def open_metastore(layout: WarehouseLayout, options: Mapping[str, str]) -> Metastore:
    """The metastore the catalog options name (``metastore``, default ``filesystem``)."""
    kind = str(options.get("metastore", "filesystem")).strip().lower()
    if kind == "filesystem":
        from lakelog.connector.catalog.filesystem import FileSystemMetastore

        return FileSystemMetastore(layout)
    if kind == "jdbc":
        from lakelog.connector.catalog.jdbc import JdbcMetastore

        return JdbcMetastore(layout, options)
    raise OptionError(
        f"catalog option 'metastore' = {options.get('metastore')!r} is not supported: use one of "
        f"{', '.join(repr(m) for m in METASTORES)}"
    )
