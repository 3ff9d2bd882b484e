"""Reads through the SQL wrapper: time travel, dynamic options, incremental reads and Paimon's system
tables with their columns (issue 13). Reads are grouped into few jobs with UNION ALL."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.table.system_tables import METADATA_TABLES, system_table_schema
from tests.flink.sqlkit import query, refused, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int32(), False), ("v", pa.string())])


def _local(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_time_travel_dynamic_options_incremental_and_system_tables(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table(
        "db.t", SCHEMA, primary_key=["dt", "k"], partition_by=["dt"], options={"changelog-producer": "lookup"}
    )
    t.write(pa.table({"dt": ["a", "a", "b"], "k": [1, 2, 3], "v": ["x", "y", "z"]}, schema=SCHEMA))
    first = t.latest_snapshot()
    time.sleep(0.05)
    t.write(pa.table({"dt": ["a"], "k": [1], "v": ["x2"]}, schema=SCHEMA))
    t.delete(pa.table({"dt": ["b"], "k": pa.array([3], pa.int32())}))
    t.create_tag("nightly", first.id)
    t.store.consumer_manager.reset("job", 2)
    last = t.latest_snapshot().id
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("USE db")
    between = _local(first.time_millis + 1)

    travel = query(
        sql,
        f"""SELECT 'as-of', COUNT(*), MIN(v) FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '{between}'
            UNION ALL SELECT 'scan.timestamp', COUNT(*), MIN(v) FROM t /*+ OPTIONS('scan.timestamp' = '{between}') */
            UNION ALL SELECT 'tag', COUNT(*), MIN(v) FROM t /*+ OPTIONS('scan.tag-name' = 'nightly') */
            UNION ALL SELECT 'latest', COUNT(*), MIN(v) FROM t
            UNION ALL SELECT 'delta', COUNT(*), MAX(v) FROM t /*+ OPTIONS('incremental-between' = '{first.id},{last}') */
            UNION ALL SELECT CONCAT('audit ', rowkind), COUNT(*), MAX(v) FROM t$audit_log
                      /*+ OPTIONS('incremental-between' = '{first.id},{last}') */ GROUP BY rowkind
            UNION ALL SELECT 'binlog', COUNT(*), MAX(v[1]) FROM t$binlog
            UNION ALL SELECT 'ro', COUNT(*), MAX(v) FROM t$ro""",
    )
    assert travel == sorted(
        [
            ("as-of", 3, "x"),
            ("scan.timestamp", 3, "x"),
            ("tag", 3, "x"),
            ("latest", 2, "x2"),
            ("delta", 1, "x2"),  # the lookup changelog's +U; the -U and -D are not returned in batch
            ("audit +U", 1, "x2"),
            ("audit -U", 1, "x"),
            ("audit -D", 1, "z"),
            ("binlog", 2, "y"),
            ("ro", 2, "y"),  # the lookup producer compacts level 0 up at every commit
        ],
        key=repr,
    )
    sql.execute("SET 'scan.snapshot-id' = '1'")
    sql.execute(f"SET 'paimon.lk.db.t2.scan.snapshot-id' = '{last}'")  # another table's: no effect here
    counts = query(
        sql,
        """SELECT 'snapshots', COUNT(*) FROM t$snapshots UNION ALL SELECT 'schemas', COUNT(*) FROM t$schemas
           UNION ALL SELECT 'options', COUNT(*) FROM t$options UNION ALL SELECT 'tags', COUNT(*) FROM t$tags
           UNION ALL SELECT 'files@1', COUNT(*) FROM t$files /*+ OPTIONS('scan.snapshot-id' = '1') */
           UNION ALL SELECT 'partitions', COUNT(*) FROM t$partitions UNION ALL SELECT 'buckets', COUNT(*) FROM t$buckets
           UNION ALL SELECT 'manifests', COUNT(*) FROM t$manifests UNION ALL SELECT 'consumers', COUNT(*) FROM t$consumers
           UNION ALL SELECT 'aggregation_fields', COUNT(*) FROM t$aggregation_fields
           UNION ALL SELECT 'rows@1', COUNT(*) FROM t""",
    )
    assert dict(counts) == {
        "snapshots": last, "schemas": 1, "options": 2, "tags": 1, "files@1": 2, "partitions": 2, "buckets": 2,
        "manifests": dict(counts)["manifests"], "consumers": 1, "aggregation_fields": 3, "rows@1": 3,
    }  # fmt: skip
    sql.execute("RESET 'scan.snapshot-id'")
    assert query(sql, "SELECT COUNT(*) FROM t") == [(2,)]
    # Paimon's columns and types on every metadata table (planning only, no job)
    for name in METADATA_TABLES:
        cols = sql.sql_query(f"SELECT * FROM t${name}")._j_table.getResolvedSchema().getColumns()
        got = [(c.getName(), c.getDataType().getLogicalType().isNullable()) for c in cols]
        assert got == [(f.name, f.nullable) for f in system_table_schema(name)], name
    refused(
        sql, "SELECT * FROM t$snapshots /*+ OPTIONS('scan.snapshot-id' = '1') */", "no effect on $snapshots"
    )
    refused(sql, "SELECT * FROM t$nope", "unknown system table $nope")
    refused(sql, "SELECT * FROM t /*+ OPTIONS('merge-engine' = 'first-row') */", "immutable")
