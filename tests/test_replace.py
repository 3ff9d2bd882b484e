"""replace_partitions: Paimon's OVERWRITE commits (INSERT OVERWRITE, TRUNCATE, DROP PARTITION)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError
from lakelog.connector.table.replace import replace_partitions
from lakelog.operators.source_plan import ReadPlan

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int32(), False), ("v", pa.string())])


def _table(tmp: Path, **options: str) -> lakelog.Table:
    t = lakelog.Catalog(str(tmp)).create_table(
        "db.t", SCHEMA, primary_key=["dt", "k"], partition_by=["dt"], options={"bucket": "2", **options}
    )
    t.write(pa.table({"dt": ["a", "a", "b"], "k": [1, 2, 3], "v": ["x", "y", "z"]}, schema=SCHEMA))
    return t


def _rows(t: lakelog.Table) -> list[tuple[str, int, str]]:
    return sorted((r["dt"], r["k"], r["v"]) for r in t.to_arrow().to_pylist())


def test_dynamic_overwrite_replaces_the_partitions_its_rows_fall_into(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"changelog-producer": "lookup"})
    new = pa.table({"dt": ["a"], "k": [9], "v": ["n"]}, schema=SCHEMA)
    a_files = sum(f["partition"] == "{a}" for f in t.files().to_pylist())
    sid = replace_partitions(t.store, new, dynamic=True)
    snap = t.snapshot(sid)
    assert snap.commit_kind == "OVERWRITE" and snap.delta_record_count == 1 - 2
    assert snap.changelog_manifest_list is None  # an overwrite carries no changelog
    assert _rows(t) == [("a", 9, "n"), ("b", 3, "z")]
    entries = t.store.delta_entries(snap)
    assert sorted(e.kind for e in entries) == [0] + [1] * a_files  # the new file; a's files deleted
    assert min(f.min_sequence_number for f in (e.file for e in entries if e.kind == 0)) == 0  # fresh buckets
    assert replace_partitions(t.store, SCHEMA.empty_table(), dynamic=True) is None  # no rows: nothing


def test_static_overwrites_truncate_and_drop_partitions(tmp_path: Path) -> None:
    t = _table(tmp_path)
    with pytest.raises(InvalidInputError, match="dt=b"):
        replace_partitions(
            t.store, pa.table({"dt": ["b"], "k": [1], "v": ["q"]}, schema=SCHEMA), specs=[{"dt": "a"}]
        )
    assert len(t.snapshots()) == 1 and len(t.files()) == 2  # nothing committed, the written file gone
    replace_partitions(t.store, None, specs=[{"dt": "b"}])  # ALTER TABLE ... DROP PARTITION (dt='b')
    assert _rows(t) == [("a", 1, "x"), ("a", 2, "y")]
    replace_partitions(t.store, pa.table({"dt": ["a"], "k": [5], "v": ["w"]}, schema=SCHEMA))  # whole table
    assert _rows(t) == [("a", 5, "w")]
    sid = replace_partitions(t.store, None)  # TRUNCATE TABLE
    assert _rows(t) == [] and t.snapshot(sid).total_record_count == 0
    empty = lakelog.Catalog(str(tmp_path)).create_table("db.e", SCHEMA)
    assert replace_partitions(empty.store, None) == 1  # an empty table gets an OVERWRITE snapshot too
    assert empty.snapshot(1).commit_kind == "OVERWRITE"


def test_streaming_reads_skip_overwrites(tmp_path: Path) -> None:
    t = _table(tmp_path)
    sid = replace_partitions(t.store, None)
    plan = ReadPlan(t.path, None, None, {})
    assert plan.changes(t.store, sid - 1, sid).num_rows == 0  # Paimon's streaming-read-overwrite default
