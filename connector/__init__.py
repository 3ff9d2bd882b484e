"""lakelog.connector: the storage (Paimon table format) and the Flink-facing connector, in three
layers: :mod:`~lakelog.connector.format` (the files), :mod:`~lakelog.connector.lsm` (the merge
tree of each bucket) and :mod:`~lakelog.connector.table` (catalog, tables, writes, commits, scans).
A lower layer never imports a higher one; ``errors`` is shared by all.

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
    "Catalog": "lakelog.connector.table.catalog",
    "Table": "lakelog.connector.table.table",
    "BatchWriter": "lakelog.connector.table.table",
    "StreamWriter": "lakelog.connector.table.table",
    "Snapshot": "lakelog.connector.format.snapshot",
    "Split": "lakelog.connector.lsm.split",
    "CommitMessage": "lakelog.connector.format.commit_message",
    "TableWrite": "lakelog.connector.table.write",
    "TableCommit": "lakelog.connector.table.commit",
    "LakelogError": "lakelog.connector.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lakelog.connector' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
