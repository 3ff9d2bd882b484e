from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog

ORDERS = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


@pytest.fixture()
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "wh")


@pytest.fixture()
def catalog(warehouse: str) -> lakelog.Catalog:
    return lakelog.Catalog(warehouse)


def rows(t: pa.Table, *keys: str) -> list[dict]:
    """Rows of ``t`` as dicts, sorted by ``keys`` (order-insensitive comparison helper)."""
    data = t.to_pylist()
    return sorted(data, key=lambda r: tuple(r[k] for k in keys))
