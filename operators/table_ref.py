"""Which table an operator reads or writes: every entry point of :mod:`lakelog.operators` takes a
lakelog ``Table``, a ``TableStore`` or a table path (any ``file:`` spelling). Workers get the path
(a plain string pickles everywhere) and open the table themselves. No pyflink here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional, Union

from lakelog.connector.errors import OptionError
from lakelog.connector.format.fileio import local_path
from lakelog.connector.format.options import CoreOptions, check_alter
from lakelog.connector.format.store import TableStore

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.table.table import Table

__all__ = ["TableLike", "table_path", "table_store", "store_with_options"]

TableLike = Union["Table", TableStore, str, "os.PathLike[str]"]


def table_store(table: TableLike) -> TableStore:
    """The ``TableStore`` of ``table``."""
    if isinstance(table, TableStore):
        return table
    if isinstance(table, (str, os.PathLike)):
        return TableStore(local_path(os.fspath(table)))
    store = getattr(table, "store", None)
    if isinstance(store, TableStore):
        return store
    raise TypeError(f"expected a lakelog Table, TableStore or table path, not {type(table).__name__}")


def table_path(table: TableLike) -> str:
    """The local path of ``table``'s directory (``<warehouse>/<db>.db/<table>``)."""
    return table_store(table).path


def store_with_options(path: str, options: Optional[Mapping[str, str]]) -> TableStore:
    """The table at ``path`` as a job sees it with dynamic ``options`` (Paimon's dynamic table
    options: hints, ``SET``) over its stored ones: validated, immutable options refused."""
    store = TableStore(path)
    if not options:
        return store
    merged = {**store.schema.options, **{str(k): str(v) for k, v in options.items()}}
    try:
        CoreOptions(merged)
        check_alter(store.schema.options, merged)
    except OptionError as e:
        raise OptionError(f"dynamic options of {path}: {e}") from None
    return store.with_schema(store.schema.copy(options=merged))
