"""Every operator entry point takes a lakelog Table, a TableStore or a table path (any file: spelling)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.operators.lookup_table import LookupSpec, LookupTable
from lakelog.operators.source_plan import plan_batch
from lakelog.operators.table_ref import table_path, table_store

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


def test_tables_stores_and_paths_name_the_same_table(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"}
    )
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    path = t.path
    for ref in (t, t.store, path, Path(path), "file:" + path, "file://" + path):
        assert table_path(ref) == path, ref
    assert table_store(t.store) is t.store
    with pytest.raises(TypeError, match="lakelog Table, TableStore or table path"):
        table_path(42)  # type: ignore[arg-type]

    # the Flink-free halves of the entry points
    assert plan_batch(t)[1] == plan_batch(path)[1]
    assert LookupSpec.of(t, columns=["v"]) == LookupSpec.of("file://" + path, columns=["v"])
    assert LookupTable(t).get(2) == {"id": 2, "v": "b"}
