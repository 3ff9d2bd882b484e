"""lakelog.connector: the storage (Paimon table format) and the Flink-facing connector.

Public names load lazily, so ``import lakelog.connector`` stays cheap and never imports pyflink.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Catalog",
    "Table",
    "BatchWriter",
    "StreamWriter",
    "Snapshot",
    "Split",
    "CommitMessage",
    "TableWrite",
    "TableCommit",
    "LakelogError",
]

_LAZY = {
    "Catalog": "lakelog.connector.catalog",
    "Table": "lakelog.connector.table",
    "BatchWriter": "lakelog.connector.table",
    "StreamWriter": "lakelog.connector.table",
    "Snapshot": "lakelog.connector.snapshot",
    "Split": "lakelog.connector.scan",
    "CommitMessage": "lakelog.connector.write",
    "TableWrite": "lakelog.connector.write",
    "TableCommit": "lakelog.connector.commit",
    "LakelogError": "lakelog.connector.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lakelog.connector' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
