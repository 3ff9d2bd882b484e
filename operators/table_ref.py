"""Which table an operator reads or writes: every entry point of :mod:`lakelog.operators` takes a
lakelog ``Table``, a ``TableStore`` or a table path (any ``file:`` spelling). Workers get the path
(a plain string pickles everywhere) and open the table themselves. No pyflink here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional, Union

from lakelog.connector.errors import OptionError
from lakelog.connector.format.fileio import FileIO, location, register_io
from lakelog.connector.format.lock import LockProvider, register_catalog_lock
from lakelog.connector.format.options import CoreOptions, check_alter
from lakelog.connector.format.store import TableStore

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.table.table import Table

__all__ = [
    "TableLike",
    "table_path",
    "table_store",
    "store_with_options",
    "table_lock",
    "adopt_lock",
    "table_io",
    "adopt_io",
]

TableLike = Union["Table", TableStore, str, "os.PathLike[str]"]


def table_store(table: TableLike) -> TableStore:
    """The ``TableStore`` of ``table``."""
    if isinstance(table, TableStore):
        return table
    if isinstance(table, (str, os.PathLike)):
        return TableStore(location(os.fspath(table)))
    store = getattr(table, "store", None)
    if isinstance(store, TableStore):
        return store
    raise TypeError(f"expected a lakelog Table, TableStore or table path, not {type(table).__name__}")


def table_path(table: TableLike) -> str:
    """The path that opens ``table`` (``<warehouse>/<db>.db/<table>``, or a branch's directory
    ``<table>/branch/branch-<name>``)."""
    return table_store(table).location


def table_lock(table: TableLike) -> Optional[LockProvider]:
    """The catalog's commit lock of ``table`` (a metastore's lock table), which a job ships to the
    workers that commit; None when the file IO's own lock serves."""
    return table_store(table).snapshot_manager.catalog_lock()


def adopt_lock(path: str, lock: Optional[LockProvider]) -> None:
    """In a worker: commit to the table at ``path`` under ``lock`` (see :func:`table_lock`), however
    the worker opens it."""
    if lock is not None:
        register_catalog_lock(path, lambda _path: lock)


def table_io(table: TableLike) -> Optional[FileIO]:
    """The object-store file IO of ``table`` (its endpoint and credentials), which a job ships to
    its workers; None for a local table (every process has the local file IO)."""
    io = table_store(table).file_io
    return None if io.is_local else io


def adopt_io(path: str, io: Optional[FileIO]) -> None:
    """In a worker: open the object-store locations of ``path``'s bucket through ``io`` (see
    :func:`table_io`), however the worker opens the table."""
    if io is not None:
        register_io(path, io)


def store_with_options(
    path: str, options: Optional[Mapping[str, str]], schema_id: Optional[int] = None
) -> TableStore:
    """The table at ``path`` as a job sees it: schema ``schema_id`` (the one a sink was planned
    with, so that every stage routes and writes by one schema whatever ALTERs happen meanwhile;
    None: the latest), with dynamic ``options`` (Paimon's dynamic table options: hints, ``SET``)
    over its stored ones: validated, immutable options refused, and ``bucket`` refused (a job's
    stages would route rows by different counts; ``ALTER TABLE`` or ``CALL sys.rescale`` change it)."""
    store = TableStore(path)
    if schema_id is not None and store.schema.id != schema_id:
        store = store.with_schema(store.schema_manager.schema(schema_id))
    if not options:
        return store
    stored_bucket = store.schema.options.get("bucket", "").strip()
    if "bucket" in options and str(options["bucket"]).strip() != stored_bucket:
        raise OptionError(
            f"dynamic options of {path}: 'bucket' cannot be set for one job (its stages would route rows "
            "by different bucket counts); use ALTER TABLE ... SET ('bucket' = ...) or CALL sys.rescale"
        )
    merged = {**store.schema.options, **{str(k): str(v) for k, v in options.items()}}
    try:
        CoreOptions(merged)
        check_alter(store.schema.options, merged)
    except OptionError as e:
        raise OptionError(f"dynamic options of {path}: {e}") from None
    return store.with_schema(store.schema.copy(options=merged))
