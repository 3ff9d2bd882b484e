"""Issue 13's rule, walked over Flink's statement kinds against a lakelog catalog: every statement
either does what Flink and Paimon document, durably (a new process sees it), or fails before any
job starts with one line naming the statement and what is unsupported. No statement here runs a
job, so the walk is fast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.flink.sqlkit import inspect, refused, rows, session

pytest.importorskip("pyflink")

# (statement, None: it succeeds / "text": it is refused, the message holding text)
WALK: list[tuple[str, Any]] = [
    ("SET 'table.local-time-zone' = 'UTC'", None),
    ("SET 'scan.snapshot-id' = '1'", None),  # a dynamic table option (Paimon: SET table options)
    ("RESET 'scan.snapshot-id'", None),
    ("RESET 'table.local-time-zone'", None),
    ("SET 'bukket' = '2'", None),  # not a table option: a Flink setting, as Flink takes any key
    ("SET 'paimon.lk.shop.t.bukket' = '2'", "bukket"),
    ("CREATE DATABASE shop", None),
    ("CREATE DATABASE IF NOT EXISTS shop", None),
    ("CREATE DATABASE db2 COMMENT 'x'", "no database comment"),
    ("ALTER DATABASE shop SET ('k' = 'v')", "ALTER DATABASE shop"),
    ("USE shop", None),
    ("CREATE TABLE t (k INT PRIMARY KEY NOT ENFORCED, v STRING, dt STRING) WITH ('bucket' = '2')", None),
    ("CREATE TABLE IF NOT EXISTS t (x INT)", None),
    ("CREATE TABLE t (x INT)", "already exists"),
    ("CREATE TABLE bad (k INT) WITH ('bukket' = '2')", "bukket"),
    ("CREATE TABLE dg (x INT) WITH ('connector' = 'datagen')", "TEMPORARY"),
    ("CREATE TEMPORARY TABLE dg (x INT) WITH ('connector' = 'datagen', 'number-of-rows' = '3')", None),
    ("CREATE TABLE p (dt STRING, k INT, PRIMARY KEY (dt, k) NOT ENFORCED) PARTITIONED BY (dt)", None),
    ("CREATE TABLE l LIKE t", None),
    ("CREATE OR REPLACE TABLE r AS SELECT 1 AS a", "REPLACE TABLE AS"),
    ("ALTER TABLE t SET ('snapshot.num-retained.min' = '5')", None),
    ("ALTER TABLE t RESET ('snapshot.num-retained.min')", None),
    ("ALTER TABLE t ADD c2 INT AFTER k", None),
    ("ALTER TABLE t RENAME c2 TO c3", None),
    ("ALTER TABLE t MODIFY c3 BIGINT", None),
    ("ALTER TABLE t MODIFY c3 INT", "only widening"),
    ("ALTER TABLE t DROP c3", None),
    ("ALTER TABLE t SET ('bucket-key' = 'v')", "bucket-key"),
    ("ALTER TABLE t ADD PRIMARY KEY (v) NOT ENFORCED", "already defined the primary key"),  # Flink's check
    ("ALTER TABLE p ADD PARTITION (dt = 'x')", "is not supported"),
    ("ALTER TABLE l RENAME TO l2", None),
    ("DROP TABLE l2", None),
    ("DROP TABLE IF EXISTS nope", None),
    ("DROP TABLE nope", "does not exist"),
    ("CREATE VIEW v AS SELECT 1", "stores no views"),
    ("CREATE TEMPORARY VIEW tv AS SELECT k, v FROM t", None),
    ("DROP TEMPORARY VIEW tv", None),
    ("ALTER VIEW v AS SELECT 2", "stores no views"),
    ("CREATE FUNCTION f AS 'x.Y'", "no functions"),
    ("CREATE TEMPORARY FUNCTION tf AS 'org.apache.flink.table.functions.BuiltInFunctionDefinitions'", None),
    ("DROP TEMPORARY FUNCTION tf", None),
    ("ANALYZE TABLE t COMPUTE STATISTICS", "batch mode"),
    ("CREATE MATERIALIZED TABLE m AS SELECT 1", "materialized"),
    ("CREATE MODEL mo INPUT (a INT) OUTPUT (b INT) WITH ('provider' = 'x')", "no models"),
    ("DELETE FROM t WHERE k = 1", "batch mode"),  # a streaming session
    ("UPDATE t SET v = 'x' WHERE k = 1", "batch mode"),
    ("TRUNCATE TABLE t", "batch mode"),
    ("INSERT OVERWRITE t SELECT 1, 'a', 'b'", "batch mode"),
    ("CALL sys.create_tag('shop.t', 'tag1')", "latest snapshot"),
    ("CALL sys.no_such('shop.t')", "no procedure"),
    ("SHOW DATABASES", None),
    ("SHOW TABLES", None),
    ("SHOW CREATE TABLE t", None),
    ("SHOW PARTITIONS p", None),
    # issue 25: Paimon's surface lakelog lacks is named as such, a typo as a syntax error, and a
    # streaming read that cannot start is refused before its job
    ("SELECT * FROM sys.no_such_table", "unknown table of the sys database"),
    ("SELECT * FROM t$branch_b1", "no branch 'b1'"),
    ("SELECT * FROM t$row_tracking", "not supported by lakelog"),
    ("CREATE TABLE x (k INT) WITH ('scan.partitions' = 'max_pt()')", "not supported by lakelog"),
    ("CREATE TABLE x (k INT) WITH ('tag.automatic-creation' = 'process-time')", "not supported by lakelog"),
    ("SELEC * FROM t", "syntax error"),
    ("SELECT * FROM t /*+ OPTIONS('incremental-between' = '1,2') */", "batch read"),
    ("SHOW PROCEDURES", None),
    ("SHOW COLUMNS FROM t", None),
    ("DESCRIBE t", None),
    ("EXPLAIN SELECT * FROM t", None),
    ("LOAD MODULE core", "already exists"),  # Flink's own answer, as Flink gives it
    ("ALTER CATALOG lk SET ('k' = 'v')", "ALTER CATALOG lk"),
    ("USE CATALOG default_catalog", None),
    ("DROP CATALOG lk", None),
]


def test_every_statement_kind_is_done_or_refused(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = session("streaming")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    from lakelog.connector.errors import LakelogError

    for stmt, expect in WALK:
        if expect is None:
            try:
                res = sql.execute(stmt)
            except LakelogError as e:
                raise AssertionError(f"{stmt!r} failed: {e}") from e
            if stmt.startswith(("SHOW", "DESCRIBE", "EXPLAIN")):
                assert rows(res) is not None, stmt
        elif stmt.startswith(("ALTER TABLE t ADD PRIMARY", "LOAD MODULE")):
            from lakelog.operators.sql.errors import describe_error

            with pytest.raises(Exception) as info:  # Flink's own answer, as its root cause
                sql.execute(stmt)
            assert expect in describe_error(info.value), describe_error(info.value)
        else:
            msg = refused(sql, stmt, expect)
            head = " ".join(stmt.split()[:2]).upper()
            assert msg.upper().startswith(head.split(" (")[0]) or expect in msg, (stmt, msg)

    seen = inspect(
        wh,
        """
        t = cat.get_table("shop.t")
        out = {
            "tables": cat.list_tables("shop"), "dbs": cat.list_databases(),
            "fields": t.schema.names, "schemas": len(t.store.schema_manager.list_ids()),
            "options": t.options,
        }
        """,
    )
    assert seen["dbs"] == ["default", "shop"] and seen["tables"] == ["p", "t"]  # l, l2 dropped; no 'bad'
    assert seen["fields"] == ["k", "v", "dt"] and seen["schemas"] == 7
    assert "snapshot.num-retained.min" not in seen["options"] and "bucket-key" not in seen["options"]


def test_the_sys_database_as_paimons_page_shows_it(tmp_path: Path) -> None:
    """Issue 24: Paimon's global system tables over a lakelog catalog (their contents are checked
    without Flink in tests/test_procedures_tags.py; here one query shows the wiring)."""
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}', 'table-default.file.format'='parquet')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE DATABASE my_db")
    sql.execute("CREATE TABLE my_db.Orders2 (k INT, v STRING, dt STRING, PRIMARY KEY (k, dt) NOT ENFORCED) "
                "PARTITIONED BY (dt) WITH ('snapshot.num-retained.min' = '7')")  # fmt: skip
    import pyarrow as pa

    orders = sql.mirror.catalog("lk").get_table("my_db.Orders2")  # written in Python: no job to wait for
    orders.write(pa.table({"k": [1, 2, 3], "v": ["x", "y", "z"], "dt": ["2024-01-01", "2024-01-01", "2024-01-02"]},
                          schema=orders.schema))  # fmt: skip
    sql.execute("CALL sys.mark_partition_done('my_db.Orders2', 'dt=2024-01-01')")
    parts = sorted(tuple(r) for r in rows(sql.execute(
        "SELECT table_name, partition_name, record_count, file_count, done FROM sys.partitions")))  # fmt: skip
    assert parts == [("Orders2", "dt=2024-01-01", 2, 1, True), ("Orders2", "dt=2024-01-02", 1, 1, False)]
    # the page's "USE sys; SHOW TABLES;", and a table of it by its bare name while there
    assert rows(sql.execute("SHOW DATABASES")) == [("default",), ("my_db",), ("sys",)]
    sql.execute("USE sys")
    assert rows(sql.execute("SHOW TABLES")) == [("all_table_options",), ("catalog_options",), ("partitions",),
                                                ("tables",)]  # fmt: skip
    assert rows(sql.execute("SELECT database_name, table_name FROM `tables`")) == [("my_db", "Orders2")]
    refused(sql, "CREATE TABLE x (a INT)", "database 'sys' is the system database")
    refused(sql, "CREATE DATABASE sys", "database 'sys' is the system database")
    sql.execute("USE my_db")
    assert rows(sql.execute("SHOW TABLES")) == [("Orders2",)]
    assert rows(sql.execute("SHOW DATABASES")) == [("default",), ("my_db",), ("sys",)]


def test_branches_as_paimons_manage_branches_page_shows_them(tmp_path: Path) -> None:
    """Issue 24: the statements of Paimon's "Manage Branches" page, as written, on a lakelog
    catalog (the branch's semantics are checked without Flink in tests/test_branches.py)."""
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE TABLE T (k INT, v STRING, PRIMARY KEY (k) NOT ENFORCED) WITH ('bucket' = '1')")
    import pyarrow as pa

    main = sql.mirror.catalog("lk").get_table("default.T")  # main is written in Python: fewer jobs
    main.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=main.schema))
    sql.execute("CALL sys.create_tag('default.T', 'tag1', 1)")
    sql.execute("""
        -- create branch named 'branch1' from tag 'tag1'
        CALL sys.create_branch('default.T', 'branch1', 'tag1')""")
    sql.execute("""
        -- create empty branch named 'branch1'
        CALL sys.create_branch('default.T', 'empty_branch')""")
    # read from and write to branch 'branch1'
    sql.execute("INSERT INTO `T$branch_branch1` VALUES (2, 'B'), (3, 'c')")
    main.write(pa.table({"k": [4], "v": ["main only"]}, schema=main.schema))
    assert sorted(rows(sql.execute("SELECT * FROM `T$branch_branch1`"))) == [(1, "a"), (2, "B"), (3, "c")]
    assert sorted(rows(sql.execute("SELECT branch_name FROM `T$branches`"))) == [("branch1",), ("empty_branch",)]
    assert rows(sql.execute("SELECT snapshot_id FROM `T$branch_branch1$snapshots`"))[-1] == (2,)
    sql.execute("CALL sys.fast_forward('default.T', 'branch1')")
    assert sorted(rows(sql.execute("SELECT * FROM T"))) == [(1, "a"), (2, "B"), (3, "c")]
    sql.execute("CALL sys.delete_branch('default.T', 'branch1')")
    assert rows(sql.execute("SELECT branch_name FROM `T$branches`")) == [("empty_branch",)]
    refused(sql, "SELECT * FROM `T$branch_branch1`", "no branch 'branch1'")
    assert rows(sql.execute("SELECT * FROM `T$table_indexes`")) == []  # a fixed-bucket table has no index
    assert rows(sql.execute("SHOW TABLES")) == [("T",)]  # a branch is no table of its own
    # "Batch Reading from Fallback Branch" as written (the table named F here), with the result
    # Paimon's Java code gives (the page lists a row of a partition the main branch has, against its
    # own rule)
    sql.execute("""
        -- create Paimon table
        CREATE TABLE F (
            dt STRING NOT NULL,
            name STRING NOT NULL,
            amount BIGINT
        ) PARTITIONED BY (dt)""")
    sql.execute("""
        -- create a branch for streaming job
        CALL sys.create_branch('default.F', 'test')""")
    sql.execute("""
        -- set primary key and bucket number for the branch
        ALTER TABLE `F$branch_test` SET (
            'primary-key' = 'dt,name',
            'bucket' = '2',
            'changelog-producer' = 'lookup'
        )""")
    sql.execute("ALTER TABLE F SET ('scan.fallback-branch' = 'test')")
    sql.execute("INSERT INTO `F$branch_test` VALUES ('20240725', 'apple', 4), ('20240725', 'peach', 10), "
                "('20240726', 'cherry', 3), ('20240726', 'pear', 6)")  # fmt: skip
    f = sql.mirror.catalog("lk").get_table("default.F")
    f.write(pa.table({"dt": ["20240725", "20240725"], "name": ["apple", "banana"], "amount": [5, 7]}, schema=f.schema))
    assert sorted(rows(sql.execute("SELECT * FROM F"))) == [
        ("20240725", "apple", 5), ("20240725", "banana", 7), ("20240726", "cherry", 3), ("20240726", "pear", 6)
    ]  # fmt: skip
    sql.execute("ALTER TABLE F RESET ( 'scan.fallback-branch' )")
    assert sorted(rows(sql.execute("SELECT * FROM F"))) == [("20240725", "apple", 5), ("20240725", "banana", 7)]


def test_statistics_as_paimons_pages_show_them(tmp_path: Path) -> None:
    """Issue 24: Flink's ``ANALYZE TABLE`` on a lakelog table commits Paimon's statistics, and the
    system-tables page's ``SELECT * FROM T$statistics`` shows them (the semantics are checked
    without Flink in tests/test_statistics.py, the files by Paimon's Java code in the interop
    tests)."""
    import json

    import pyarrow as pa

    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE TABLE T (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket' = '1')")
    t = sql.mirror.catalog("lk").get_table("default.T")  # written in Python: no job
    t.write(pa.table({"id": [1, 2], "name": ["a", "bcd"]}, schema=t.schema))
    assert rows(sql.execute("SELECT * FROM T$statistics")) == []
    sql.execute("ANALYZE TABLE T COMPUTE STATISTICS")
    assert t.latest_snapshot().commit_kind == "ANALYZE"
    size = t.statistics().merged_record_size
    assert rows(sql.execute("SELECT * FROM T$statistics")) == [(1, 0, 2, size, "{ }")]
    sql.execute("ANALYZE TABLE T COMPUTE STATISTICS FOR COLUMNS name")
    assert t.statistics().column_json_object() == {
        "name": {"colId": 1, "distinctCount": 2, "nullCount": 0, "avgLen": 2, "maxLen": 3}
    }
    sql.execute("ANALYZE TABLE T COMPUTE STATISTICS FOR ALL COLUMNS")
    assert sorted(json.loads(rows(sql.execute("SELECT colstat FROM T$statistics"))[0][0])) == ["id", "name"]
    assert rows(sql.execute("SELECT snapshot_id FROM T$statistics /*+ OPTIONS('scan.snapshot-id' = '2') */")) \
        == [(1,)]  # fmt: skip
    refused(sql, "ANALYZE TABLE T PARTITION (id = 1) COMPUTE STATISTICS", "PARTITION is not supported")
    refused(sql, "ANALYZE TABLE T COMPUTE STATISTICS NOSCAN", "NOSCAN is not supported")
    refused(sql, "ANALYZE TABLE T COMPUTE STATISTICS FOR COLUMNS nope", "'nope'")
    refused(sql, "ANALYZE TABLE T COMPUTE STATISTICS FOR COLUMNS id,", "must follow the last comma")
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "ANALYZE", "ANALYZE", "ANALYZE"]
