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
    with pytest.raises(SchemaError, match="dt"):
        sql.execute(
            "CREATE TABLE shop.bad2 (dt STRING, id INT, PRIMARY KEY (id) NOT ENFORCED) PARTITIONED BY (dt)"
        )
    with pytest.raises(SchemaError, match="'d'"):
        sql.execute("CREATE TABLE shop.bad3 (id INT, d VARIANT)")
    assert not any(n.startswith("bad") for n in lakelog.Catalog(wh).list_tables("shop"))
    assert "bad1" not in sql.t_env.list_tables()

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
    assert "y;" in proc.stdout and "| 1 |" in proc.stdout.replace("  ", " ") or "y;" in proc.stdout

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
