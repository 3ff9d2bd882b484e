"""lakelog: streaming-warehouse table storage for PyFlink, on Apache Paimon's table format.

>>> import lakelog
>>> catalog = lakelog.Catalog("/tmp/warehouse")

Names load lazily; ``import lakelog`` imports neither pyflink nor the storage modules.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "Catalog",
    "Table",
    "BatchWriter",
    "StreamWriter",
    "Snapshot",
    "LakelogError",
    "errors",
    "schema",
]

_LAZY = {
    "Catalog": ("lakelog.connector.catalog", "Catalog"),
    "Table": ("lakelog.connector.table", "Table"),
    "BatchWriter": ("lakelog.connector.table", "BatchWriter"),
    "StreamWriter": ("lakelog.connector.table", "StreamWriter"),
    "Snapshot": ("lakelog.connector.snapshot", "Snapshot"),
    "LakelogError": ("lakelog.connector.errors", "LakelogError"),
    "errors": ("lakelog.connector.errors", None),
    "schema": ("lakelog.connector.schema", None),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'lakelog' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    return module if target[1] is None else getattr(module, target[1])


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
