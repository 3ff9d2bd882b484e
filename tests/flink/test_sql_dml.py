"""Batch DML and procedures through the SQL wrapper, checked on disk from a new process (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from tests.flink.sqlkit import inspect, query, refused, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]


def test_delete_update_column_lists_and_procedures(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    pu_schema = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.string()), ("b", pa.int32())])
    pu = cat.create_table("shop.pu", pu_schema, primary_key=["k"], options={"merge-engine": "partial-update"})
    pu.write(pa.table({"k": [1], "a": ["keep"], "b": [1]}, schema=pu_schema))
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("USE shop")
    sql.execute(
        "CREATE TABLE t (dt STRING, k INT, v STRING, n INT, PRIMARY KEY (dt, k) NOT ENFORCED) "
        "PARTITIONED BY (dt) WITH ('bucket' = '2')"
    )
    sql.execute(
        "CREATE TABLE fr (k INT PRIMARY KEY NOT ENFORCED, v STRING) WITH ('merge-engine' = 'first-row')"
    )
    sql.execute(
        "CREATE TABLE agg (k INT PRIMARY KEY NOT ENFORCED, n BIGINT) WITH "
        "('merge-engine' = 'aggregation', 'fields.n.aggregate-function' = 'sum')"
    )
    sql.execute("CREATE TABLE app (k INT, v STRING)")
    sql.execute("BEGIN STATEMENT SET")
    sql.execute(
        "INSERT INTO t /*+ OPTIONS('sink.parallelism' = '1', 'write-buffer-size' = '8 mb') */ VALUES "
        "('a', 1, 'x', 1), ('a', 2, 'y', 2), ('b', 3, 'z', 3)"
    )
    sql.execute(
        "INSERT INTO pu (k, b) VALUES (1, 20)"
    )  # a column list: the others null, kept by partial-update
    sql.execute("END")
    sql.execute("DELETE FROM t WHERE n = 2")
    sql.execute("UPDATE t SET v = UPPER(v), n = n * 10 WHERE k = 1")
    assert query(sql, "SELECT dt, k, v, n FROM t") == [("a", 1, "X", 10), ("b", 3, "z", 3)]

    refused(sql, "DELETE FROM fr WHERE k = 1", "first-row can not support batch delete")
    refused(sql, "DELETE FROM pu WHERE k = 1", "partial-update doesn't support batch delete")
    refused(sql, "DELETE FROM agg WHERE k = 1", "aggregation.remove-record-on-delete")
    refused(sql, "UPDATE agg SET n = 1", "aggregation can not support batch update")
    refused(sql, "UPDATE t SET k = 5", "Updates to primary keys are not supported")
    refused(sql, "DELETE FROM app WHERE k = 1", "no primary key")
    refused(sql, "INSERT INTO t (dt, v) VALUES ('a', 'x')", "'k' is NOT NULL")

    # procedures, Paimon's names and arguments (positional and named)
    assert query(sql, "CALL sys.create_tag('shop.t', 'first', 1)") == [("Success",)]
    assert query(sql, "CALL sys.create_tag(`table` => 'shop.t', tag => 'kept', time_retained => '1 d')") == [
        ("Success",)
    ]
    refused(sql, "CALL sys.create_tag('shop.t', 'first')", "Tag 'first' already exists.")
    kept = cat.get_table("shop.t").store.tag_manager.get_info("kept")
    assert str(kept.time_retained) == "1 day, 0:00:00" and kept.snapshot.id > 1
    assert query(sql, "CALL sys.create_tag('shop.t', 'gone')") == [("Success",)]
    # lakelog refuses a rollback past a tag (Paimon deletes such tags): remove them first
    assert query(sql, "CALL sys.delete_tag('shop.t', 'gone,kept,never')") == [("Success",)]
    assert query(sql, "CALL sys.reset_consumer('shop.t', 'job1', 2)") == [("Success",)]
    assert query(
        sql, "CALL sys.reset_consumer(`table` => 'shop.t', consumer_id => 'job2', next_snapshot_id => 1)"
    )
    assert query(sql, "CALL sys.reset_consumer('shop.t', 'job2')") == [("Success",)]  # no id: deleted
    orphans = query(sql, "CALL sys.remove_orphan_files(`table` => 'shop.*', dry_run => true)")
    assert len(orphans) == 2  # file count and bytes, as Paimon returns them
    assert query(sql, "CALL sys.compact(`table` => 'shop.t', compact_strategy => 'full')") == [("Success",)]
    refused(sql, "CALL sys.compact(`table` => 'shop.t', order_strategy => 'zorder', order_by => 'k')", "sort")
    latest = cat.get_table("shop.t").latest_snapshot().id
    assert query(sql, "CALL sys.rollback_to(`table` => 'shop.t', snapshot_id => 1)") == [(latest, 1)]
    expired = query(sql, "CALL sys.expire_snapshots(`table` => 'shop.t', retain_max => 1)")
    assert expired == [("0",)]  # only snapshot 1 is left after the rollback

    seen = inspect(
        wh,
        """
        t = cat.get_table("shop.t")
        out = {
            "rows": sorted((r["dt"], r["k"], r["v"], r["n"]) for r in t.to_arrow().to_pylist()),
            "snapshots": [s.id for s in t.snapshots()],
            "tags": t.tags(),
            "consumers": t.store.consumer_manager.list(),
            "pu": cat.get_table("shop.pu").to_arrow().to_pylist(),
        }
        """,
    )
    assert seen["rows"] == [["a", 1, "x", 1], ["a", 2, "y", 2], ["b", 3, "z", 3]]  # back to snapshot 1
    assert seen["snapshots"] == [1] and latest > 1
    assert seen["tags"] == {"first": 1} and seen["consumers"] == {"job1": 2}
    assert seen["pu"] == [{"k": 1, "a": "keep", "b": 20}]


def test_delete_from_an_append_table_with_deletion_vectors(tmp_path: Path) -> None:
    """``DELETE FROM`` an append table with 'deletion-vectors.enabled' marks the matching rows (no
    job, no data file rewritten); a condition lakelog cannot evaluate, or a table without the
    option, is refused before anything is written."""
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE DATABASE db")
    sql.execute("USE db")
    sql.execute("CREATE TABLE logs (dt STRING, id INT, msg STRING) PARTITIONED BY (dt) "
                "WITH ('deletion-vectors.enabled' = 'true')")
    sql.execute("CREATE TABLE plain (id INT)")
    sql.execute("INSERT INTO logs VALUES ('a', 1, 'x'), ('a', 2, 'secret'), ('b', 3, 'secret'), ('b', 4, 'y')")
    files = inspect(wh, "out = sorted(cat.get_table('db.logs').files().column('file_path').to_pylist())")
    sql.execute("DELETE FROM logs WHERE msg = 'secret' AND id > 2")
    assert query(sql, "SELECT id FROM logs") == [(1,), (2,), (4,)]
    sql.execute("DELETE FROM logs WHERE dt = 'a' AND (id = 2 OR msg IS NULL)")
    assert query(sql, "SELECT id FROM logs") == [(1,), (4,)]
    assert inspect(wh, "out = sorted(cat.get_table('db.logs').files().column('file_path').to_pylist())") == files
    assert inspect(wh, "out = [s.commit_kind for s in cat.get_table('db.logs').snapshots()]") == ["APPEND"] * 3
    refused(sql, "DELETE FROM logs WHERE UPPER(msg) = 'X'", "must be a filter lakelog evaluates")
    refused(sql, "DELETE FROM plain WHERE id = 1", "deletion-vectors.enabled")
    assert query(sql, "SELECT id FROM logs") == [(1,), (4,)]
