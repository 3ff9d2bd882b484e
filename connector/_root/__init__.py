"""lakelog: streaming-warehouse table storage for PyFlink, on Apache Paimon's table format.

>>> import lakelog
>>> catalog = lakelog.Catalog("/tmp/warehouse")
>>> t = catalog.get_table("shop.orders")
>>> t.alter(lakelog.AddColumn("note", pa.string()))

Names load lazily; ``import lakelog`` imports neither pyflink nor the storage modules.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SCHEMA_CHANGES = "lakelog.connector.format.schema_changes"

_LAZY: dict[str, tuple[str, str | None]] = {
    "Catalog": ("lakelog.connector.table.catalog", "Catalog"),
    "Table": ("lakelog.connector.table.table", "Table"),
    "TableScan": ("lakelog.connector.table.table", "TableScan"),
    "BatchWriter": ("lakelog.connector.table.table", "BatchWriter"),
    "StreamWriter": ("lakelog.connector.table.table", "StreamWriter"),
    "Snapshot": ("lakelog.connector.format.snapshot", "Snapshot"),
    "LakelogError": ("lakelog.connector.errors", "LakelogError"),
    "SetOption": (_SCHEMA_CHANGES, "SetOption"),
    "RemoveOption": (_SCHEMA_CHANGES, "RemoveOption"),
    "AddColumn": (_SCHEMA_CHANGES, "AddColumn"),
    "RenameColumn": (_SCHEMA_CHANGES, "RenameColumn"),
    "DropColumn": (_SCHEMA_CHANGES, "DropColumn"),
    "UpdateColumnType": (_SCHEMA_CHANGES, "UpdateColumnType"),
    "UpdateComment": (_SCHEMA_CHANGES, "UpdateComment"),
    "UpdateColumnComment": (_SCHEMA_CHANGES, "UpdateColumnComment"),
    "UpdateColumnDefaultValue": (_SCHEMA_CHANGES, "UpdateColumnDefaultValue"),
    "errors": ("lakelog.connector.errors", None),
    "sketches": ("lakelog.connector.format.sketches", None),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'lakelog' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    return module if target[1] is None else getattr(module, target[1])


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
