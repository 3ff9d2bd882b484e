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
