"""The Flink SQL wrapper (lakelog.jobs.sql) on a MiniCluster."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest

import lakelog
from lakelog.connector.errors import OptionError, SchemaError

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

DDL = """
CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}');
USE CATALOG lk;
CREATE DATABASE IF NOT EXISTS shop;
CREATE TABLE IF NOT EXISTS shop.orders (
  dt STRING NOT NULL, id BIGINT NOT NULL, v STRING, amt DECIMAL(10, 2),
  PRIMARY KEY (dt, id) NOT ENFORCED
) PARTITIONED BY (dt) WITH ('bucket' = '2');
"""


def _collect(res: Any) -> list[tuple[Any, ...]]:
    with res.collect() as it:
        return sorted(tuple(r) for r in it)


def test_sql_batch(tmp_path: Any) -> None:
    from lakelog.operators.sql import LakelogSql

    wh = str(tmp_path / "wh")
    sql = LakelogSql("streaming", parallelism=2)
    sql.run_script(DDL.format(wh=wh), print_results=False)
    t = lakelog.Catalog(wh).get_table("shop.orders")
    assert t.primary_keys == ["dt", "id"] and t.partition_keys == ["dt"] and t.options["bucket"] == "2"

    # bad DDL fails before any job, naming the problem; Flink forgets the table again
    with pytest.raises(OptionError, match="bukket"):
        sql.execute("CREATE TABLE shop.bad1 (id INT) WITH ('bukket' = '2')")
    # (a primary key without the partition field is a cross-partition upsert table, no longer refused)
    with pytest.raises(OptionError, match=r"'bucket-key' must not contain partition key\(s\) \['dt'\]"):
        sql.execute(
            "CREATE TABLE shop.bad2 (dt STRING, id INT, PRIMARY KEY (id) NOT ENFORCED) PARTITIONED BY (dt) "
            "WITH ('bucket' = '2', 'bucket-key' = 'dt')"
        )
    with pytest.raises(SchemaError, match="'d'"):
        sql.execute("CREATE TABLE shop.bad3 (id INT, d VARIANT)")
    assert not any(n.startswith("bad") for n in lakelog.Catalog(wh).list_tables("shop"))
    assert not [n for n in sql.t_env.get_catalog("lk").list_tables("shop") if n.startswith("bad")]

    sql.execute("SET 'execution.runtime-mode' = 'batch'")
    assert sql.mode == "batch"
    # rows of several partitions (the WHERE dt = 'a' read below sees two of them)
    sql.execute("INSERT INTO shop.orders VALUES ('a', 1, 'x', 1.5), ('b', 7, 'q', 0.5), ('a', 2, 'y', 2.5)")
    assert sorted(t.refresh().to_arrow().column("dt").to_pylist()) == ["a", "a", "b"]

    # a connector table by path (same physical table), a hint and a filter
    path = t.path
    sql.execute("USE CATALOG default_catalog")
    sql.execute(
        f"CREATE TABLE o2 (dt STRING NOT NULL, id BIGINT NOT NULL, v STRING, amt DECIMAL(10, 2), "
        f"PRIMARY KEY (dt, id) NOT ENFORCED) PARTITIONED BY (dt) "
        f"WITH ('connector' = 'lakelog', 'path' = '{path}', 'bucket' = '2')"
    )
    got = _collect(
        sql.execute(
            "SELECT id, v, amt FROM o2 /*+ OPTIONS('scan.mode'='from-snapshot', 'scan.snapshot-id'='1') */ "
            "WHERE dt = 'a'"
        )
    )
    assert got == [(1, "x", Decimal("1.50")), (2, "y", Decimal("2.50"))]
    snaps = _collect(sql.execute("SELECT snapshot_id, commit_kind FROM lk.shop.orders$snapshots"))
    assert snaps == [(1, "APPEND")]
    opts = _collect(sql.execute("SELECT * FROM lk.shop.`orders$options`"))
    assert ("bucket", "2") in opts


@pytest.mark.e2e
def test_sql_streaming_select_and_cli(tmp_path: Any) -> None:
    from lakelog.operators.sql import LakelogSql

    wh = str(tmp_path / "wh")
    script = tmp_path / "s.sql"
    script.write_text(
        DDL.format(wh=wh) + "INSERT INTO shop.orders VALUES ('a', 1, 'x', 1.5), ('a', 2, 'y;', 2.5);\n"
        "SELECT id, v FROM shop.orders;\n"
    )
    # a fresh process must start its own gateway: drop what this (gateway-owning) process exported
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    proc = subprocess.run(
        [sys.executable, "-m", "lakelog.jobs.sql", "-f", str(script), "--mode", "batch"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = [tuple(c.strip() for c in ln.strip("|").split("|")) for ln in proc.stdout.splitlines() if ln[:1] == "|"]
    assert cells[:1] == [("id", "v")] and sorted(cells[1:]) == [("1", "x"), ("2", "y;")], proc.stdout

    sql = LakelogSql("streaming", parallelism=1, checkpoint_interval_ms=500)
    sql.run_script(DDL.format(wh=wh), print_results=False)
    t = lakelog.Catalog(wh).get_table("shop.orders")
    res = sql.execute(
        "SELECT id, v FROM shop.orders /*+ OPTIONS('continuous.discovery-interval'='100 ms') */"
    )
    got = []
    with res.collect() as it:
        for r in it:
            got.append((r.get_row_kind().name, tuple(r)))
            if len(got) == 2:
                import pyarrow as pa

                t.write(pa.table({"dt": ["a"], "id": [1], "v": ["new"], "amt": [None]}, schema=t.schema))
            if len(got) == 4:
                break
    assert sorted(got[:2]) == [("INSERT", (1, "x")), ("INSERT", (2, "y;"))]
    assert got[2:] == [("UPDATE_BEFORE", (1, "x")), ("UPDATE_AFTER", (1, "new"))]


def test_set_after_a_comment_in_a_script_takes_effect() -> None:
    """A script's comment before SET belongs to the SET statement; it used to make the wrapper
    drop the setting without a word."""
    from lakelog.operators.sql import LakelogSql

    sql = LakelogSql("streaming", parallelism=1)
    sql.run_script(
        "-- batch the aggregation\nSET 'table.exec.mini-batch.enabled' = 'true';\n"
        "/* and its latency */ SET 'table.exec.mini-batch.allow-latency' = '500 ms';",
        print_results=False,
    )
    conf = sql.t_env.get_config()
    assert conf.get("table.exec.mini-batch.enabled", None) == "true"
    assert conf.get("table.exec.mini-batch.allow-latency", None) == "500 ms"


QUICK_START = """
-- if you're trying out Paimon in a distributed environment,
-- the warehouse path should be set to a shared file system, such as HDFS or OSS
CREATE CATALOG my_catalog WITH (
    'type'='lakelog',
    'warehouse'='file:{wh}'
);

USE CATALOG my_catalog;

-- create a word count table
CREATE TABLE word_count (
    word STRING PRIMARY KEY NOT ENFORCED,
    cnt BIGINT
);

-- create a word data generator table
CREATE TEMPORARY TABLE word_table (
    word STRING
) WITH (
    'connector' = 'datagen',
    'fields.word.length' = '1'
);

-- paimon requires checkpoint interval in streaming mode
SET 'execution.checkpointing.interval' = '10 s';

-- write streaming data to dynamic table
INSERT INTO word_count SELECT word, COUNT(*) FROM word_table GROUP BY word;

-- use tableau result mode
SET 'sql-client.execution.result-mode' = 'tableau';

-- switch to batch mode
RESET 'execution.checkpointing.interval';
SET 'execution.runtime-mode' = 'batch';

-- olap query the table
SELECT * FROM word_count;

-- switch to streaming mode
SET 'execution.runtime-mode' = 'streaming';

-- track the changes of table and calculate the count interval statistics
SELECT `interval`, COUNT(*) AS interval_cnt FROM
    (SELECT cnt / 10000 AS `interval` FROM word_count) GROUP BY `interval`;
"""


@pytest.mark.e2e
def test_the_quick_start_as_paimons_docs_write_it(tmp_path: Any) -> None:
    """Paimon's Flink quick start, only the catalog type and path changed (issue 13: it failed at
    its first comment). The streaming INSERT of the unbounded generator is cancelled once its
    first checkpoint committed, as the quick start cancels it in the web UI."""
    import time

    from pyflink.common import JobClient

    from lakelog.operators.sql import split_statements
    from tests.flink.sqlkit import inspect, session

    wh = str(tmp_path / "paimon")
    sql = session("streaming")
    batch_rows: list[tuple[Any, ...]] = []
    for stmt in split_statements(QUICK_START.format(wh=wh)):
        res = sql.execute(stmt)
        if isinstance(res, JobClient):  # the INSERT: wait for its first commit, then stop it
            t = lakelog.Catalog(wh).get_table("default.word_count")
            deadline = time.time() + 180
            while t.latest_snapshot() is None and time.time() < deadline:
                time.sleep(1)
            res.cancel().result()
            assert t.latest_snapshot() is not None, "the streaming INSERT committed nothing"
        elif stmt.startswith("-- olap") or stmt.endswith("FROM word_count"):
            with res.collect() as it:
                batch_rows = [tuple(r) for r in it]
        elif "interval_cnt" in stmt:
            with res.collect() as it:  # a streaming query: its first change, then stop it
                first = next(iter(it))
            assert first[1] >= 1
    assert batch_rows and all(len(w) == 1 and c > 0 for w, c in batch_rows)
    seen = inspect(
        wh, "t = cat.get_table('default.word_count'); out = [t.primary_keys, t.to_arrow().num_rows]"
    )
    assert seen == [["word"], len(batch_rows)]


@pytest.mark.e2e
def test_cli_errors_are_a_few_lines_and_the_prompt_goes_on(tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    script = tmp_path / "bad.sql"
    script.write_text(
        f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}');\nUSE CATALOG lk;\n"
        "CREATE TABLE t (k INT PRIMARY KEY NOT ENFORCED, s STRING);\n"
        "INSERT INTO t VALUES (CAST(NULL AS INT), 'x');\n"
    )
    cmd = [sys.executable, "-m", "lakelog.jobs.sql", "--mode", "batch", "--parallelism", "1"]
    proc = subprocess.run([*cmd, "-f", str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode != 0
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err) <= 3, proc.stderr[-3000:]  # issue 13: a traceback plus 50-130 lines of Java
    assert "INSERT t" in err[0] and "NOT NULL" in err[0] and "--verbose" in err[0]

    typed = (
        f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}');\nUSE CATALOG lk;\n"
        "INSERT INTO t\n  VALUES (1, 'one');\nSELECT * FROM t;\nSELECT * FROM missing;\n"
        "SHOW TABLES; QUIT;\n"
    )
    proc = subprocess.run(cmd, input=typed, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| 1 | one |" in " ".join(proc.stdout.split())  # the SELECT's rows, as a table
    assert "[ERROR]" in proc.stderr and "missing" in proc.stderr
    assert "table name" in proc.stdout  # SHOW TABLES ran after the error
