"""DDL through the SQL wrapper lasts: a new process sees every change (issue 13)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from tests.flink.sqlkit import inspect, query, refused, rows, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]


def test_sql_ddl_lasts_and_event_time_windows_work(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(
        f"""-- a comment before the first statement (the quick start has one)
        CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file:{wh}', 'table-default.file.compression'='snappy')"""
    )
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE DATABASE shop")
    sql.execute(
        """CREATE TABLE shop.orders (
             id INT NOT NULL COMMENT 'the order',
             price INT,
             twice AS price * 2,
             ts TIMESTAMP(3),
             note VARCHAR(10),
             tags ARRAY<STRING>, attrs MAP<STRING, INT>, buyer ROW<name STRING, age INT>,
             WATERMARK FOR ts AS ts - INTERVAL '1' SECOND,
             PRIMARY KEY (id) NOT ENFORCED
           ) COMMENT 'orders' WITH ('bucket' = '2', 'file.compression' = 'zstd')"""
    )
    # every ALTER of the issue, each one schema version
    for stmt in (
        "ALTER TABLE shop.orders ADD (extra STRING COMMENT 'x' AFTER price, first_col INT FIRST)",
        "ALTER TABLE shop.orders SET ('comment' = 'all orders', 'write-buffer-size' = '64 mb')",
        "ALTER TABLE shop.orders RESET ('write-buffer-size')",
        "ALTER TABLE shop.orders MODIFY price BIGINT",
        "ALTER TABLE shop.orders RENAME extra TO extra2",
        "ALTER TABLE shop.orders DROP first_col",
        "ALTER TABLE shop.orders ADD thrice AS price * 3",
        "ALTER TABLE shop.orders MODIFY WATERMARK FOR ts AS ts - INTERVAL '2' SECOND",
    ):
        assert sql.execute(stmt).text() == "OK", stmt
    # the table has no snapshot yet, so immutable options may still change (as in Paimon), but not
    # its partitioning
    refused(sql, "ALTER TABLE shop.orders SET ('partition' = 'note')", "'partition' cannot be changed")
    refused(sql, "ALTER TABLE shop.orders DROP PRIMARY KEY", "primary key")
    refused(sql, "ALTER TABLE shop.orders ADD m STRING METADATA FROM 'x'", "metadata column")
    sql.execute("CREATE TABLE shop.copy LIKE shop.orders")
    sql.execute("CREATE TABLE shop.gone (a INT)")
    sql.execute("ALTER TABLE shop.copy RENAME TO shop.copy2")
    sql.execute("DROP TABLE shop.gone")
    sql.execute("CREATE DATABASE scratch")
    sql.execute("CREATE TABLE scratch.t (a INT)")
    refused(sql, "DROP DATABASE scratch", "CASCADE")
    sql.execute("DROP DATABASE scratch CASCADE")
    # one job writes both inserts (a statement set); the second names its columns
    sql.execute("BEGIN STATEMENT SET")
    sql.execute(
        "INSERT INTO shop.orders VALUES (1, 10, 'a', TIMESTAMP '2024-01-01 00:00:01.250', 'n1', "
        "ARRAY['x', 'y'], MAP['k', 1], ROW('ann', 30)), (2, 20, NULL, TIMESTAMP '2024-01-01 00:00:12', NULL, "
        "NULL, NULL, NULL)"
    )
    sql.execute("INSERT INTO shop.orders (id, price, ts) VALUES (3, 30, TIMESTAMP '2024-01-01 00:00:05')")
    sql.execute("END")
    windows = query(
        sql,
        "SELECT window_start, COUNT(*), SUM(twice), SUM(thrice) FROM TABLE(TUMBLE(TABLE shop.orders, "
        "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
    )
    assert windows == [
        (datetime.datetime(2024, 1, 1, 0, 0), 2, 80, 120),
        (datetime.datetime(2024, 1, 1, 0, 0, 10), 1, 40, 60),
    ]
    view = sql.sql_query("SELECT ts, note, price, id FROM shop.orders")._j_table.getResolvedSchema()
    types = [c.getDataType().getLogicalType().asSerializableString() for c in view.getColumns()]
    assert types == ["TIMESTAMP(3)", "VARCHAR(10)", "BIGINT", "INT NOT NULL"]  # issue 13: not TIMESTAMP(9)
    shown = [r[0] for r in rows(sql.execute("SHOW TABLES FROM shop"))]
    assert shown == ["copy2", "orders"]  # issue 13: no internal views (__lakelog_*) after queries
    described = {r[0]: r[1] for r in rows(sql.execute("DESCRIBE shop.orders"))}
    assert described["ts"] == "TIMESTAMP(3)" and described["note"] == "VARCHAR(10)"
    assert described["thrice"] == "BIGINT" and described["price"] == "BIGINT"

    seen = inspect(
        wh,
        """
        t = cat.get_table("shop.orders")
        s = t.store.schema
        out = {
            "dbs": cat.list_databases(), "tables": cat.list_tables("shop"), "schema_id": s.id,
            "fields": [(f.name, str(f.type.root), f.description) for f in s.fields],
            "note": [f for f in open(t.path + "/schema/schema-%d" % s.id).read().split('"') if "VARCHAR(10)" in f],
            "options": s.options, "comment": s.comment,
            "rows": sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]),
        }
        """,
    )
    assert seen["dbs"] == ["default", "shop"] and seen["tables"] == ["copy2", "orders"]
    assert seen["schema_id"] == 8 and seen["comment"] == "all orders"
    assert [f[0] for f in seen["fields"]] == ["id", "price", "extra2", "ts", "note", "tags", "attrs", "buyer"]
    assert seen["fields"][0][2] == "the order" and seen["fields"][1][1] == "BIGINT" and seen["note"]
    opts = seen["options"]
    assert opts["file.compression"] == "zstd" and "write-buffer-size" not in opts
    assert opts["schema.3.name"] == "twice" and opts["schema.3.expr"] == "`price` * 2"
    assert opts["schema.watermark.0.strategy.expr"] == "`ts` - INTERVAL '2' SECOND"
    assert opts["schema.watermark.0.rowtime"] == "ts" and opts["schema.9.expr"] == "`price` * 3"
    first = seen["rows"][0]
    assert (
        first["tags"] == ["x", "y"]
        and first["attrs"] == [["k", 1]]
        and first["buyer"] == {"name": "ann", "age": 30}
    )
    assert first["ts"] == "2024-01-01 00:00:01.250000" and seen["rows"][2]["extra2"] is None

    # a new session (another process would do the same) sees the altered table, not the first DDL
    again = session()
    again.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    shown = rows(again.execute("SHOW CREATE TABLE lk.shop.orders"))[0][0]
    assert "`thrice` AS `price` * 3" in shown and "INTERVAL '2' SECOND" in shown
    assert "'file.compression' = 'zstd'" in shown and "schema." not in shown
    copy = inspect(wh, "out = cat.get_table('shop.copy2').options")
    assert copy["file.compression"] == "zstd"  # LIKE copied the options; table-default did not override
    fresh = inspect(wh, "out = [cat.list_tables('shop'), cat.database_exists('scratch')]")
    assert fresh == [["copy2", "orders"], False]
