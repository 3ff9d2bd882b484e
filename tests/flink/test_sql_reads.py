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
from tests.flink.sqlkit import query, refused, session, stream_changes

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


def test_where_reaches_the_read_skipping_partitions_files_and_merging_right(tmp_path: Path) -> None:
    """The conjuncts of a WHERE that reads one table reach its source: partitions, files (min/max
    and bloom filters) that cannot match are never opened (their files are gone from disk here,
    so opening one would fail the job), and a merge-on-read table still filters after merging."""
    wh = tmp_path / "wh"
    cat = lakelog.Catalog(str(wh))
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int64(), False), ("name", pa.string())])
    a = cat.create_table("db.a", schema, partition_by=["dt"], options={"file-index.bloom-filter.columns": "name"})

    def rows(dt: str, keys: range) -> pa.Table:
        # names spread over the whole range of every file: min/max cannot skip them, the bloom filter can
        return pa.table({"dt": [dt] * len(keys), "k": list(keys), "name": [f"{k % 10}-{k}" for k in keys]}, schema)

    a.write(rows("a", range(0, 50)))
    kept = set((wh / "db.db" / "a" / "dt=a").rglob("*.parquet"))
    a.write(rows("a", range(50, 100)))
    a.write(rows("b", range(100, 200)))
    gone = [p for p in (wh / "db.db" / "a").rglob("*.parquet") if p not in kept]
    assert len(gone) == 2
    for p in gone:
        p.unlink()

    p = cat.create_table(
        "db.p", schema, primary_key=["dt", "k"], partition_by=["dt"], options={"bucket": "1", "write-only": "true"}
    )
    p.write(rows("a", range(0, 20)))
    p.write(pa.table({"dt": ["a", "a"], "k": [1, 2], "name": ["new", "1-1"]}, schema))  # 1: renamed; 2 takes 1's name
    p.delete(pa.table({"dt": ["a"], "k": pa.array([3], pa.int64())}))

    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("USE db")
    got = query(
        sql,
        """SELECT 'key', k, name FROM a WHERE dt = 'a' AND k = 3
           UNION ALL SELECT 'in', x.k, x.name FROM a AS x WHERE x.k IN (5, 6) AND x.dt <> 'b'
           UNION ALL SELECT 'bloom', k, name FROM a WHERE name = '7-7' AND dt = 'a'
           UNION ALL SELECT 'range', k, name FROM a WHERE k BETWEEN 48 AND 49 AND dt = 'a'
           UNION ALL SELECT 'old name', k, name FROM p WHERE name = '1-1'
           UNION ALL SELECT 'new name', k, name FROM p WHERE name IN ('new', '3-3') OR k = 4
           UNION ALL SELECT 'count', COUNT(*), MAX(name) FROM p WHERE k < 10 AND name IS NOT NULL""",
    )
    assert got == sorted(
        [
            ("key", 3, "3-3"),
            ("in", 5, "5-5"),
            ("in", 6, "6-6"),
            ("bloom", 7, "7-7"),
            ("range", 48, "8-48"),
            ("range", 49, "9-49"),
            ("old name", 2, "1-1"),  # key 1 held '1-1' in an older run: merged first, then filtered
            ("new name", 1, "new"),
            ("new name", 4, "4-4"),
            ("count", 9, "new"),  # 0..9 without the deleted 3
        ],
        key=repr,
    )
    # the same point query with an expression lakelog does not take opens every file: the job fails
    with pytest.raises(Exception, match="missing"):
        query(sql, "SELECT k FROM a WHERE k + 0 = 3")


def test_streaming_where_on_a_value_column_filters_each_change(tmp_path: Path) -> None:
    """A pushed WHERE on a value column of a primary-key table filters a streaming read's changes
    one by one, as Flink's own filter does: the -U of a row that leaves the filter passes, the +U
    of a row that enters it passes without its -U."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.t", schema, primary_key=["k"])
    t.write(pa.table({"k": [1, 2], "v": ["x", "y"]}, schema))
    sql = session("streaming")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    res = sql.execute(
        "SELECT k, v FROM lk.db.t /*+ OPTIONS('continuous.discovery-interval'='100 ms') */ WHERE v = 'x'"
    )
    got = stream_changes(res, 3, then=(1, lambda: t.write(pa.table({"k": [1, 2], "v": ["z", "x"]}, schema))))
    assert got[0] == ("INSERT", (1, "x"))
    assert sorted(got[1:]) == [("UPDATE_AFTER", (2, "x")), ("UPDATE_BEFORE", (1, "x"))]



@pytest.mark.parametrize("start", ["scan.timestamp-millis", "scan.timestamp"])
def test_a_streaming_read_that_starts_after_a_snapshot_emits_only_later_changes(tmp_path: Path, start: str) -> None:
    """Issue 25, 1: a read from a timestamp (or 'latest', or a consumer's progress) reads no
    snapshot whole, so an update of a row it never emitted must not retract it: the read is
    upserts and Flink derives the retractions from what it has emitted. Paimon: COUNT(*) counts
    the updated row as new (before the fix the count fell back, ending at 2 here instead of 3)."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.t", schema, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema))
    time.sleep(0.05)
    millis = int(time.time() * 1000)
    time.sleep(0.05)
    t.write(pa.table({"k": [3], "v": ["c"]}, schema))  # new after the start: 1
    t.write(pa.table({"k": [1, 4], "v": ["a2", "d"]}, schema))  # k=1 was never emitted: 3, not 2
    t.write(pa.table({"k": [4], "v": ["d2"]}, schema))  # k=4 was: an update, the count stays 3
    t.delete(pa.table({"k": pa.array([2], pa.int64())}))  # never emitted: nothing to retract
    value = str(millis) if start == "scan.timestamp-millis" else _local(millis)
    sql = session("streaming")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    res = sql.execute(f"SELECT COUNT(*) FROM lk.db.t /*+ OPTIONS('{start}' = '{value}') */")
    # a wrong count never reaches 3: the query is cancelled after 90 s
    got = stream_changes(res, lambda g: g[-1][0] in ("INSERT", "UPDATE_AFTER") and g[-1][1] == (3,))
    counts = [row[0] for kind, row in got if kind in ("INSERT", "UPDATE_AFTER")]
    assert counts and counts[-1] == 3 and min(counts) >= 1, got


def test_reads_that_start_without_a_full_snapshot_are_upserts() -> None:
    """Which streaming reads a Table over the source declares as upserts (Flink then derives the
    -U rows): starts after a snapshot (latest, from-timestamp, from-snapshot, a consumer's
    progress), not full starts; primary-key tables only."""
    import tempfile

    from lakelog.operators.source import _upsert_read
    from lakelog.operators.source_plan import ReadPlan

    wh = tempfile.mkdtemp()
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    cat = lakelog.Catalog(wh)
    pk = cat.create_table("db.pk", schema, primary_key=["k"], options={"bucket": "1"})
    pk.write(pa.table({"k": [1], "v": ["a"]}, schema))
    append = cat.create_table("db.a", schema)

    def upsert(t: lakelog.Table, **opts: str) -> bool:
        return _upsert_read(ReadPlan(t.path, None, None, opts))

    assert not upsert(pk) and not upsert(pk, **{"scan.mode": "latest-full"})
    assert not upsert(pk, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "1"})
    assert upsert(pk, **{"scan.mode": "latest"})
    assert upsert(pk, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "1"})
    assert upsert(pk, **{"scan.timestamp-millis": "0"})
    assert not upsert(pk, **{"consumer-id": "c"})  # no progress yet: a full start
    pk.store.consumer_manager.reset("c", 2)
    assert upsert(pk, **{"consumer-id": "c"})
    assert not upsert(pk, **{"consumer-id": "c", "consumer.ignore-progress": "true"})
    assert not upsert(append, **{"scan.mode": "latest"})


def test_changelogs_from_compaction_start_with_what_they_published(tmp_path: Path) -> None:
    """Issue 25, 3 and 4. The lookup producer read from an APPEND snapshot (its rows not yet
    compacted, their changelog still to come) emitted those rows twice; it now starts with the
    rows the changelog has published and the changelog brings the rest once. A full-compaction
    producer without 'full-compaction.delta-commits' gave streaming readers nothing: the sink now
    full-compacts at every commit for it, as Paimon's does."""
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE DATABASE db")
    sql.execute("USE db")
    sql.execute("CREATE TABLE fc (k INT PRIMARY KEY NOT ENFORCED, v STRING) "
                "WITH ('changelog-producer' = 'full-compaction')")
    sql.execute("INSERT INTO fc VALUES (1, 'a'), (2, 'b')")
    # the lookup table through the Python API (a job less): write-only, its first rows compacted
    # (their changelog published), then an APPEND snapshot whose changelog is still to come
    kv = pa.schema([pa.field("k", pa.int32(), False), ("v", pa.string())])
    lu = lakelog.Catalog(wh).create_table("db.lu", kv, primary_key=["k"], options={
        "changelog-producer": "lookup", "write-only": "true", "bucket": "1"})  # fmt: skip
    lu.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, kv))
    lu.compact(full=False)
    lu.write(pa.table({"k": [1, 3], "v": ["a2", "c"]}, kv))
    append = lu.latest_snapshot()
    assert append.commit_kind == "APPEND"
    fc = lakelog.Catalog(wh).get_table("db.fc")
    assert [s.commit_kind for s in fc.snapshots()] == ["APPEND", "COMPACT"]  # full-compacted at once

    stream = session("streaming")
    stream.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    res = stream.execute(
        "SELECT k, v FROM lk.db.lu /*+ OPTIONS('scan.mode' = 'from-snapshot-full', "
        f"'scan.snapshot-id' = '{append.id}', 'continuous.discovery-interval' = '100 ms') */"
    )
    lu.compact(full=False)  # pushes level 0 up: the changelog of the APPEND snapshot
    got = stream_changes(res, 5)
    assert sorted(got[:2]) == [("INSERT", (1, "a")), ("INSERT", (2, "b"))], got
    assert sorted(got[2:]) == [("INSERT", (3, "c")), ("UPDATE_AFTER", (1, "a2")), ("UPDATE_BEFORE", (1, "a"))], got

    res = stream.execute("SELECT k, v FROM lk.db.fc /*+ OPTIONS('continuous.discovery-interval' = '100 ms') */")
    got = stream_changes(res, 2)
    assert sorted(got) == [("INSERT", (1, "a")), ("INSERT", (2, "b"))], got


def test_streaming_read_overwrite_as_a_hint(tmp_path: Path) -> None:
    """Issue 25, 6: ``/*+ OPTIONS('streaming-read-overwrite'='true') */`` was ignored (the same key
    set by ALTER worked): a streaming read with the hint shows an overwrite as -D and +I rows."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.t", schema, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema))
    stream = session("streaming")
    stream.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    res = stream.execute(
        "SELECT k, v FROM lk.db.t /*+ OPTIONS('streaming-read-overwrite' = 'true', "
        "'continuous.discovery-interval' = '100 ms') */"
    )
    got = stream_changes(res, 5, then=(2, lambda: t.overwrite(pa.table({"k": [1], "v": ["x"]}, schema))))
    assert sorted(got[:2]) == [("INSERT", (1, "a")), ("INSERT", (2, "b"))], got
    assert sorted(got[2:]) == [("DELETE", (1, "a")), ("DELETE", (2, "b")), ("INSERT", (1, "x"))], got


def test_show_partitions_with_a_partition_spec_lists_the_matching_ones(tmp_path: Path) -> None:
    """Issue 25, 7: ``SHOW PARTITIONS p PARTITION (dt='a')`` listed every partition."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("hh", pa.int32(), False), ("v", pa.int64())])
    t = lakelog.Catalog(wh).create_table("db.p", schema, partition_by=["dt", "hh"])
    t.write(pa.table({"dt": ["a", "a", "b"], "hh": [1, 2, 1], "v": [1, 2, 3]}, schema))
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("USE db")
    assert query(sql, "SHOW PARTITIONS p") == [("dt=a/hh=1",), ("dt=a/hh=2",), ("dt=b/hh=1",)]
    assert query(sql, "SHOW PARTITIONS p PARTITION (dt = 'a')") == [("dt=a/hh=1",), ("dt=a/hh=2",)]
    assert query(sql, "SHOW PARTITIONS p PARTITION (dt='a', hh=2)") == [("dt=a/hh=2",)]
    assert query(sql, "SHOW PARTITIONS p PARTITION (dt = 'c')") == []
    refused(sql, "SHOW PARTITIONS p PARTITION (zz = 'a')", "zz")
    refused(sql, "SHOW PARTITIONS p PARTITION (dt)", "expected PARTITION (column = value")


def test_audit_log_and_binlog_with_sequence_numbers_as_paimons_page_shows(tmp_path: Path) -> None:
    """Issue 24, Paimon's system-tables page: ``ALTER TABLE my_table SET
    ('table-read.sequence-number.enabled' = 'true')`` puts ``_SEQUENCE_NUMBER`` after ``rowkind``
    in ``$audit_log`` and ``$binlog`` (batch and streaming); a hint cannot set it."""
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE DATABASE db")
    sql.execute("USE db")
    sql.execute("CREATE TABLE my_table (k BIGINT PRIMARY KEY NOT ENFORCED, v STRING) WITH ('bucket' = '1')")
    sql.execute("INSERT INTO my_table VALUES (1, 'a'), (2, 'b')")  # sequence numbers 0, 1
    assert [f.name for f in lakelog.Catalog(wh).get_table("db.my_table").schema] == ["k", "v"]
    sql.execute("ALTER TABLE my_table SET ('table-read.sequence-number.enabled' = 'true')")
    sql.execute("INSERT INTO my_table VALUES (2, 'B')")  # 2
    assert query(sql, "SELECT * FROM my_table$audit_log") == [("+I", 0, 1, "a"), ("+I", 2, 2, "B")]
    assert query(sql, "SELECT rowkind, _SEQUENCE_NUMBER, k[1], v[1] FROM my_table$binlog") == [
        ("+I", 0, 1, "a"), ("+I", 2, 2, "B")]
    assert query(sql, "SELECT k, v FROM my_table") == [(1, "a"), (2, "B")]  # the table itself: no such column
    refused(sql, "SELECT * FROM my_table$audit_log /*+ OPTIONS('table-read.sequence-number.enabled' = 'false') */",
            "cannot be set by a read's dynamic options")
    # streaming: the changes of later commits, each with the number of its row
    stream = session("streaming")
    stream.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{wh}')")
    res = stream.execute(
        "SELECT * FROM lk.db.my_table$binlog /*+ OPTIONS('continuous.discovery-interval' = '100 ms') */")
    t = lakelog.Catalog(wh).get_table("db.my_table")
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    got = stream_changes(res, 3, then=(2, lambda: t.write(pa.table({"k": [1], "v": ["A"]}, schema))))
    assert sorted(got[:2]) == [("INSERT", ("+I", 0, [1], ["a"])), ("INSERT", ("+I", 2, [2], ["B"]))], got
    assert got[2:] == [("INSERT", ("+U", 3, [1, 1], ["a", "A"]))], got
