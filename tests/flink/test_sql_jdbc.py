"""``CREATE CATALOG ... ('metastore'='jdbc', ...)`` through the SQL wrapper: databases and tables
created, listed, renamed and dropped through the JDBC metastore, as a Python catalog on the same
database sees them (SQLite, and a real PostgreSQL server with the ``postgres`` mark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.catalog.jdbc import JdbcMetastore
from tests.flink.sqlkit import query, refused, session

pytest.importorskip("pyflink")


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{k}'='{v}'" for k, v in options.items())


def _registered(cat: lakelog.Catalog) -> list[tuple[Any, ...]]:
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    return sorted(ms.db.run(lambda tx: tx.query(
        "SELECT database_name, table_name FROM paimon_tables WHERE catalog_key = ?", (ms.key,)), write=False))


def test_sql_ddl_goes_through_the_jdbc_metastore(jdbc_options: dict[str, str], tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    options = {**jdbc_options, "lock.enabled": "true"}
    py = lakelog.Catalog(wh, options=options)  # another client of the same metastore
    sql = session()
    sql.execute(f"CREATE CATALOG j WITH ('type'='lakelog', 'warehouse'='{wh}', {_with(options)})")
    sql.execute("USE CATALOG j")
    sql.execute("CREATE DATABASE shop")
    sql.execute("CREATE TABLE shop.orders (id INT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
                "WITH ('bucket' = '2')")
    sql.execute("CREATE TABLE shop.scratch (a INT)")
    assert query(sql, "SHOW TABLES FROM shop") == [("orders",), ("scratch",)]
    assert _registered(py) == [("shop", "orders"), ("shop", "scratch")]
    sql.execute("INSERT INTO shop.orders VALUES (1, 'a'), (2, 'b')")
    assert py.get_table("shop.orders").to_arrow().num_rows == 2
    sql.execute("ALTER TABLE shop.orders RENAME TO shop.sales")
    sql.execute("ALTER TABLE shop.sales SET ('snapshot.num-retained.min' = '5')")
    sql.execute("DROP TABLE shop.scratch")
    assert _registered(py) == [("shop", "sales")]
    assert py.get_table("shop.sales").options["snapshot.num-retained.min"] == "5"
    assert query(sql, "SELECT * FROM shop.sales") == [(1, "a"), (2, "b")]
    # a table another client creates in the metastore appears in the session
    py.create_table("shop.from_python", pa.schema([("x", pa.int64())]))
    assert ("from_python",) in query(sql, "SHOW TABLES FROM shop")
    py.drop_table("shop.from_python")
    assert query(sql, "SHOW TABLES FROM shop") == [("sales",)]
    refused(sql, "CREATE DATABASE shop", "already exists")


def test_a_jdbc_catalog_with_a_bad_uri_is_refused_by_name(tmp_path: Path) -> None:
    sql = session()
    wh = str(tmp_path / "wh")
    refused(sql, f"CREATE CATALOG bad WITH ('type'='lakelog', 'warehouse'='{wh}', 'metastore'='jdbc', "
                 "'uri'='jdbc:mysql://127.0.0.1/x')", "driver 'mysql' is not supported")
    assert "bad" not in sql.t_env.list_catalogs()
    refused(sql, f"CREATE CATALOG bad2 WITH ('type'='lakelog', 'warehouse'='{wh}', 'metastore'='jdbc', "
                 f"'uri'='jdbc:sqlite:{tmp_path}/c.db', 'lock.enabld'='true')", "lock.enabld")


def test_a_jobs_commit_takes_the_jdbc_catalogs_lock(jdbc_options: dict[str, str], tmp_path: Path) -> None:
    """A job's committer opens the table by path on a worker: it must still commit under the
    metastore's lock (shipped with the job), not the warehouse's file lock, or it would not exclude
    the catalog's other clients. While this test holds the JDBC lock, the INSERT cannot commit (it
    fails after the table's 'lock-acquire-timeout' and publishes nothing); once released, it does."""
    wh = str(tmp_path / "wh")
    options = {**jdbc_options, "lock.enabled": "true"}
    py = lakelog.Catalog(wh, options=options)
    py.create_database("shop")
    t = py.create_table("shop.orders", pa.schema([pa.field("id", pa.int32(), False), ("name", pa.string())]),
                        primary_key=["id"], options={"bucket": "1", "lock-acquire-timeout": "3 s"})
    sql = session()
    sql.execute(f"CREATE CATALOG j WITH ('type'='lakelog', 'warehouse'='{wh}', {_with(options)})")
    with t.store.snapshot_manager.lock():
        ms = py.metastore
        assert isinstance(ms, JdbcMetastore)
        held = ms.db.run(lambda tx: tx.query("SELECT lock_id FROM paimon_distributed_locks"), write=False)
        assert [r[0] for r in held] == [f"{ms.key}.shop.orders"]
        with pytest.raises(Exception, match="lock"):
            sql.execute("INSERT INTO j.shop.orders VALUES (1, 'a')")
        assert t.latest_snapshot() is None
    sql.execute("INSERT INTO j.shop.orders VALUES (2, 'b')")
    assert t.to_arrow().to_pylist() == [{"id": 2, "name": "b"}]


@pytest.mark.e2e
def test_the_compaction_job_module_commits_under_the_jdbc_lock(tmp_path: Path) -> None:
    """``python -m lakelog.jobs.compact --option ...`` opens the table through the JDBC catalog and
    commits under its lock: held elsewhere, the job cannot commit; released, it compacts."""
    import os
    import subprocess
    import sys

    from tests.jdbc_fixtures import sqlite_options

    wh = str(tmp_path / "wh")
    options = {**sqlite_options(tmp_path / "catalog.db"), "lock.enabled": "true"}
    py = lakelog.Catalog(wh, options=options)
    py.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = py.create_table("db.t", schema, primary_key=["id"],
                        options={"bucket": "1", "write-only": "true", "lock-acquire-timeout": "3 s"})
    for i in range(3):
        t.write(pa.table({"id": [i, i + 10], "v": [f"w{i}"] * 2}, schema=schema))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    command = [sys.executable, "-m", "lakelog.jobs.compact", "--warehouse", wh, "--table", "db.t", "--full",
               *(a for k, v in options.items() for a in ("--option", f"{k}={v}"))]
    with t.store.snapshot_manager.lock():
        held = subprocess.run(command, capture_output=True, text=True, timeout=400, env=env)
    assert held.returncode != 0 and "lock" in held.stderr, held.stderr[-3000:]
    assert t.refresh().latest_snapshot().commit_kind == "APPEND"  # type: ignore[union-attr]
    free = subprocess.run(command, capture_output=True, text=True, timeout=400, env=env)
    assert free.returncode == 0, free.stderr[-3000:]
    assert "compaction committed" in free.stdout, free.stdout
    assert t.refresh().latest_snapshot().commit_kind == "COMPACT"  # type: ignore[union-attr]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]
