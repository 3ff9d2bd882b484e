"""The sources' Flink-free plan: incremental reads by Paimon's scan modes, binlog and read-optimized
shapes, rows as Python values."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.operators.source_plan import ReadPlan, table_rows

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])


def _table(tmp: Path, **options: str) -> lakelog.Table:
    t = lakelog.Catalog(str(tmp)).create_table("db.t", SCHEMA, primary_key=["k"], options=options)
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"k": [1], "v": ["a2"]}, schema=SCHEMA))
    t.delete(pa.table({"k": pa.array([2], pa.int64())}))
    return t


def _kinds(t: pa.Table) -> list[tuple[str, int, str]]:
    return [(r["rowkind"], r["k"], r["v"]) for r in t.to_pylist()]


def test_incremental_delta_reads_the_rows_written_with_their_kinds(tmp_path: Path) -> None:
    t = _table(tmp_path)
    plan = ReadPlan(t.path, None, None, {"incremental-between": "1,3"})
    got = _kinds(plan.incremental(t.store, 1, 3))
    assert got == [("+I", 1, "a2"), ("-D", 2, "b")] or got == [("+I", 1, "a2"), ("-D", 2, None)]
    diff = ReadPlan(t.path, None, None, {"incremental-between-scan-mode": "diff"})
    assert _kinds(diff.incremental(t.store, 1, 3)) == [("-U", 1, "a"), ("+U", 1, "a2"), ("-D", 2, "b")]
    with pytest.raises(OptionError, match="changelog-producer"):
        ReadPlan(t.path, None, None, {"incremental-between-scan-mode": "changelog"}).incremental(
            t.store, 1, 3
        )


def test_incremental_auto_reads_the_changelog_of_a_table_with_a_producer(tmp_path: Path) -> None:
    t = _table(tmp_path / "lookup", **{"changelog-producer": "lookup"})
    last = t.latest_snapshot().id
    plan = ReadPlan(t.path, None, None, {})
    got = _kinds(plan.incremental(t.store, 2, last))
    assert got == [("-U", 1, "a"), ("+U", 1, "a2"), ("-D", 2, "b")]


def test_binlog_and_read_optimized_shapes(tmp_path: Path) -> None:
    t = _table(tmp_path)
    binlog = ReadPlan(t.path, ["k", "v"], None, {}, shape="binlog")
    assert binlog.output_schema.field("v").type == pa.list_(pa.field("element", pa.string()))
    audit = pa.table({"rowkind": ["-U", "+U"], "k": [1, 1], "v": ["a", "a2"]})
    assert binlog.shaped(audit, streaming=True).to_pylist() == [
        {"rowkind": "+U", "k": [1, 1], "v": ["a", "a2"]}
    ]
    ro = ReadPlan(t.path, None, None, {}, read_optimized=True)
    assert ro.splits(t.store, t.latest_snapshot().id) == []  # nothing compacted to the top level yet
    t.compact(full=True)
    assert sum(s.row_count for s in ro.splits(t.store, t.latest_snapshot().id)) == 1


def test_rows_take_a_row_factory_for_structs() -> None:
    t = pa.table(
        {"r": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())]))}
    )
    assert list(table_rows(t)) == [((1, "x"),), (None,)]
    assert list(table_rows(t, lambda vs: ["row", *vs])) == [(["row", 1, "x"],), (None,)]
