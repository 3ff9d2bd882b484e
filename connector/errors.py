"""The exception tree of lakelog: one root, a shallow tree, built-in mixins where callers expect them."""

from __future__ import annotations

__all__ = [
    "LakelogError",
    "OptionError",
    "SchemaError",
    "CatalogError",
    "DatabaseNotFoundError",
    "TableNotFoundError",
    "TableAlreadyExistsError",
    "DatabaseAlreadyExistsError",
    "DatabaseNotEmptyError",
    "TagError",
    "BranchError",
    "CorruptFileError",
    "MissingFileError",
    "StorageError",
    "UnsafeStoreError",
    "CommitConflictError",
    "InvalidInputError",
    "ArgumentError",
    "ArgumentTypeError",
    "PathEscapeError",
    "SnapshotNotFoundError",
    "UnrepresentableValueError",
    "MetastoreError",
    "MissingDependencyError",
]


class LakelogError(Exception):
    """Root of every error lakelog raises on purpose."""


class OptionError(LakelogError, ValueError):
    """An unknown, malformed or immutable table option."""


class SchemaError(LakelogError, ValueError):
    """Data or a schema change does not fit the table's schema (names the column)."""


class InvalidInputError(LakelogError, ValueError):
    """Rows that cannot be written as given (for example a null in a primary-key column)."""


class ArgumentError(LakelogError, ValueError):
    """An argument of lakelog's API (or a command-line flag) that cannot be used as given, such as a
    negative count (names the argument and the value)."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type (a string where a snapshot id is expected, a dict where a list
    of partition specs is): names the argument, the type expected and the type given. Both a
    ``TypeError`` and, as every :class:`ArgumentError`, a ``ValueError``."""


class CatalogError(LakelogError):
    """A catalog operation failed."""


class DatabaseNotFoundError(CatalogError, KeyError):
    pass


class DatabaseAlreadyExistsError(CatalogError):
    pass


class DatabaseNotEmptyError(CatalogError):
    """A database still holds tables."""


class TableNotFoundError(CatalogError, KeyError):
    pass


class TableAlreadyExistsError(CatalogError):
    pass


class PathEscapeError(CatalogError, ValueError):
    """An identifier or path would leave the warehouse."""


class TagError(LakelogError, KeyError):
    pass


class BranchError(LakelogError, KeyError):
    """A branch that does not exist, exists already, or cannot be made, dropped or fast-forwarded."""


class SnapshotNotFoundError(LakelogError, KeyError):
    pass


class SnapshotExpiredError(SnapshotNotFoundError):
    """The snapshot existed but was expired (names it, the earliest kept one, and the retention)."""


class CorruptTableError(CatalogError):
    """A table directory whose metadata contradicts itself (e.g. snapshots without a schema)."""


class CorruptFileError(LakelogError):
    """A metadata or data file exists but cannot be decoded (names the file)."""


class MissingFileError(LakelogError, FileNotFoundError):
    """A file that a snapshot references is missing (names the file)."""


class LogSystemError(LakelogError):
    """The table's log system (Kafka) is unreachable, misconfigured, or lost records it needs
    (names the topic, the servers and the table)."""
class StorageError(LakelogError, OSError):
    """The file system refused an operation (full disk, read-only file system, no permission, I/O
    error): names the path and the reason; the original ``OSError`` is the ``__cause__`` and its
    ``errno`` is kept, so ``except OSError`` and errno checks still work."""

    def __init__(self, message: str, path: str | None = None, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno
        self.filename = path

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsafeStoreError(StorageError):
    """An operation the store cannot do safely and lakelog therefore refuses: publishing on an
    object store that ignores conditional creates without a catalog lock, renaming a table on an
    object store. Nothing was written."""


class CommitConflictError(LakelogError):
    """A commit cannot be applied on top of the table's latest snapshot."""


class UnrepresentableValueError(LakelogError, ValueError):
    """A stored value that the column's Arrow type cannot hold, such as a TIMESTAMP(9) after 2262
    (names the file, the column and the value)."""


class MetastoreError(CatalogError):
    """A catalog's metastore (the database of a JDBC catalog) cannot be reached or refused an
    operation: names the metastore (never a password) and the reason."""


class MissingDependencyError(LakelogError, ImportError):
    """An optional package that a table's options need is not installed (names the package and the
    extra that installs it)."""
