"""System tables without Flink: Paimon's column names and types, and their contents."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import SchemaError
from lakelog.connector.table.system_tables import (
    METADATA_TABLES,
    binlog_of,
    read_optimized_entries,
    system_table,
)
from lakelog.connector.table.value_text import java_duration, java_text

# Paimon 1.3's columns (see the research notes): name, Arrow type, nullable
PAIMON_COLUMNS = {
    "snapshots": "snapshot_id:int64! schema_id:int64! commit_user:string! commit_identifier:int64! "
    "commit_kind:string! commit_time:timestamp[ms]! base_manifest_list:string! delta_manifest_list:string! "
    "changelog_manifest_list:string total_record_count:int64 delta_record_count:int64 "
    "changelog_record_count:int64 watermark:int64",
    "schemas": "schema_id:int64! fields:string! partition_keys:string! primary_keys:string! options:string! "
    "comment:string update_time:timestamp[ms]!",
    "options": "key:string! value:string!",
    "files": "partition:string bucket:int32! file_path:string! file_format:string! schema_id:int64! level:int32! "
    "record_count:int64! file_size_in_bytes:int64! min_key:string max_key:string null_value_counts:string! "
    "min_value_stats:string! max_value_stats:string! min_sequence_number:int64 max_sequence_number:int64 "
    "creation_time:timestamp[ms] deleteRowCount:int64 file_source:string",
    "tags": "tag_name:string! snapshot_id:int64! schema_id:int64! commit_time:timestamp[ms]! record_count:int64 "
    "create_time:timestamp[ms] time_retained:string",
    "partitions": "partition:string record_count:int64! file_size_in_bytes:int64! file_count:int64! "
    "last_update_time:timestamp[ms]",
    "buckets": "partition:string bucket:int32! record_count:int64! file_size_in_bytes:int64! file_count:int64! "
    "last_update_time:timestamp[ms]",
    "manifests": "file_name:string! file_size:int64! num_added_files:int64! num_deleted_files:int64! "
    "schema_id:int64! min_partition_stats:string max_partition_stats:string",
    "consumers": "consumer_id:string! next_snapshot_id:int64!",
    "aggregation_fields": "field_name:string! field_type:string! function:string function_options:string "
    "comment:string",
    "branches": "branch_name:string! create_time:timestamp[ms]!",  # issue 24; Paimon 1.4's
    "table_indexes": "partition:string bucket:int32! index_type:string! file_name:string! file_size:int64! "
    "row_count:int64! dv_ranges:list<item: struct<f0: string not null, f1: int32 not null, f2: int32 not null, "
    "_CARDINALITY: int64>>",
    # StatisticTable's row type: mergedRecordCount and mergedRecordSize are Paimon's camel case
    "statistics": "snapshot_id:int64! schema_id:int64! mergedRecordCount:int64 mergedRecordSize:int64 "
    "colstat:string",
}

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("k", pa.int32(), False), ("v", pa.string()), ("n", pa.int64())]
)


@pytest.fixture()
def table(tmp_path: Path) -> lakelog.Table:
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t",
        SCHEMA,
        primary_key=["dt", "k"],
        partition_by=["dt"],
        options={"bucket": "2", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
    )
    t.write(pa.table({"dt": ["a", "a", "b"], "k": [1, 2, 3], "v": ["x", "y", None], "n": [1, 2, 3]}, schema=SCHEMA))
    t.write(pa.table({"dt": ["a"], "k": [1], "v": ["x2"], "n": [5]}, schema=SCHEMA))
    return t


def _shape(t: pa.Table) -> str:
    return " ".join(f"{f.name}:{f.type}{'' if f.nullable else '!'}" for f in t.schema)


def test_every_metadata_table_has_paimons_columns(table: lakelog.Table) -> None:
    assert set(METADATA_TABLES) == set(PAIMON_COLUMNS)
    table.create_tag("nightly")
    table.store.consumer_manager.reset("job", 2)
    for name in METADATA_TABLES:
        assert _shape(system_table(table.store, name)) == PAIMON_COLUMNS[name], name


def test_contents(table: lakelog.Table) -> None:
    store = table.store
    snaps = system_table(store, "snapshots").to_pylist()
    assert [s["snapshot_id"] for s in snaps] == [1, 2] and snaps[1]["total_record_count"] == 4
    local = datetime.datetime.fromtimestamp(table.snapshot(1).time_millis / 1000)
    assert abs((snaps[0]["commit_time"] - local).total_seconds()) < 0.01  # local wall-clock time
    parts = system_table(store, "partitions").to_pylist()
    assert [(p["partition"], p["record_count"], p["file_count"]) for p in parts] == [("{a}", 3, 2), ("{b}", 1, 1)]
    files = system_table(store, "files", snapshot=table.snapshot(1)).to_pylist()
    assert len(files) == 2 and {f["partition"] for f in files} == {"{a}", "{b}"}
    a = next(f for f in files if f["partition"] == "{a}")
    assert a["min_key"] == "[1]" and a["max_key"] == "[2]" and a["file_format"] == "parquet"
    assert a["null_value_counts"] == "{dt=0, k=0, n=0, v=0}" and a["min_value_stats"] == "{dt=a, k=1, n=1, v=x}"
    assert a["file_path"].startswith(table.path) and a["file_source"] == "APPEND"
    agg = {r["field_name"]: r for r in system_table(store, "aggregation_fields").to_pylist()}
    assert agg["n"]["function"] == "[sum]" and agg["n"]["function_options"] == "[fields.n.aggregate-function]"
    assert agg["k"]["field_type"] == "INT NOT NULL" and agg["v"]["function"] == "[]"
    schemas = system_table(store, "schemas").to_pylist()
    assert schemas[0]["primary_keys"] == '["dt","k"]' and '"name":"dt","type":"STRING NOT NULL"' in schemas[0]["fields"]
    manifests = system_table(store, "manifests").to_pylist()
    assert sum(m["num_added_files"] for m in manifests) == 3 and manifests[0]["min_partition_stats"] == "{a}"
    with pytest.raises(SchemaError, match="takes no snapshot"):
        system_table(store, "snapshots", snapshot=table.snapshot(1))
    with pytest.raises(SchemaError, match="known: snapshots"):
        system_table(store, "nope")


def test_tags_show_their_retention(table: lakelog.Table) -> None:
    store = table.store
    store.tag_manager.create("kept", table.snapshot(1), time_retained=datetime.timedelta(hours=24))
    table.create_tag("plain")
    rows = {r["tag_name"]: r for r in system_table(store, "tags").to_pylist()}
    assert rows["kept"]["time_retained"] == "PT24H" and rows["kept"]["create_time"] is not None
    assert rows["plain"]["time_retained"] is None and rows["plain"]["record_count"] == 4


def test_text_forms() -> None:
    assert java_duration(datetime.timedelta(hours=1, minutes=30)) == "PT1H30M"
    assert java_duration(datetime.timedelta(seconds=0.5)) == "PT0.5S"
    assert java_duration(datetime.timedelta(0)) == "PT0S"
    assert java_text(datetime.datetime(2024, 1, 1, 8, 30)) == "2024-01-01T08:30"
    assert java_text(datetime.datetime(2024, 1, 1, 8, 30, 5, 123000)) == "2024-01-01T08:30:05.123"
    assert java_text(1.0) == "1.0" and java_text(True) == "true" and java_text(None) == "null"


def test_binlog_packs_updates_and_ro_reads_the_top_level(table: lakelog.Table) -> None:
    audit = pa.table({"rowkind": ["+I", "-U", "+U", "-D", "-U"], "a": [1, 2, 3, 4, 5]})
    got = binlog_of(audit, pack_updates=True).to_pylist()
    assert got == [
        {"rowkind": "+I", "a": [1]},
        {"rowkind": "+U", "a": [2, 3]},
        {"rowkind": "-D", "a": [4]},
        {"rowkind": "-U", "a": [5]},
    ]
    assert [r["a"] for r in binlog_of(audit, pack_updates=False).to_pylist()] == [[1], [2], [3], [4], [5]]
    assert read_optimized_entries(table.store, table.latest_snapshot()) == []  # nothing compacted yet
    table.compact(full=True)
    top = read_optimized_entries(table.store, table.latest_snapshot())
    assert top and {e.file.level for e in top} == {5}
