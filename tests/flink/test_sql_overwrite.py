"""INSERT OVERWRITE, TRUNCATE TABLE, DROP PARTITION and partition DELETEs: Paimon's OVERWRITE
snapshots, checked from a new process (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flink.sqlkit import inspect, refused, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]


def test_overwrites_truncate_and_partition_drops(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute(
        "CREATE TABLE t (dt STRING, k INT, v STRING, PRIMARY KEY (dt, k) NOT ENFORCED) PARTITIONED BY (dt)"
    )
    sql.execute("CREATE TABLE u (k INT, v STRING)")
    sql.execute("BEGIN STATEMENT SET")
    sql.execute(
        "INSERT INTO t VALUES ('a', 1, 'x'), ('a', 2, 'y'), ('b', 3, 'z'), ('c', 4, 'w'), ('d', 5, 'q')"
    )
    sql.execute("INSERT INTO u VALUES (1, 'old'), (2, 'old')")
    sql.execute("END")
    # dynamic (the default): only partition a, which the rows fall into, is replaced
    sql.execute("INSERT OVERWRITE t VALUES ('a', 9, 'new')")
    # static with no rows: Paimon's purge idiom empties the named partition
    sql.execute(
        "INSERT OVERWRITE t /*+ OPTIONS('dynamic-partition-overwrite' = 'false') */ PARTITION (dt = 'b') "
        "SELECT k, v FROM t WHERE false"
    )
    sql.execute("INSERT OVERWRITE u SELECT 7, 'only'")  # unpartitioned: the whole table
    sql.execute("ALTER TABLE t DROP PARTITION (dt = 'c')")
    sql.execute("DELETE FROM t WHERE dt = 'd'")  # partition columns only: dropped, as Paimon does
    sql.execute("TRUNCATE TABLE u")
    seen = inspect(
        wh,
        """
        t, u = cat.get_table("default.t"), cat.get_table("default.u")
        out = {
            "t": sorted((r["dt"], r["k"], r["v"]) for r in t.to_arrow().to_pylist()),
            "t_kinds": [s.commit_kind for s in t.snapshots()],
            "u": u.to_arrow().num_rows,
            "u_kinds": [s.commit_kind for s in u.snapshots()],
        }
        """,
    )
    assert seen["t"] == [["a", 9, "new"]]
    assert seen["t_kinds"] == ["APPEND", "OVERWRITE", "OVERWRITE", "OVERWRITE", "OVERWRITE"]
    assert seen["u"] == 0 and seen["u_kinds"] == ["APPEND", "OVERWRITE", "OVERWRITE"]
    sql.execute("SET 'execution.runtime-mode' = 'streaming'")
    refused(sql, "INSERT OVERWRITE u SELECT 1, 'x'", "batch mode")
    refused(sql, "TRUNCATE TABLE u", "batch mode")


def test_partition_literals_a_column_cannot_hold_are_refused(tmp_path: Path) -> None:
    """Issue 19, item 4: Flink's CAST would round 1.054 into partition 1.05 of a DECIMAL(5, 2)
    column (an INSERT OVERWRITE would then replace it); every statement refuses it first."""
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute(
        "CREATE TABLE t (p DECIMAL(5, 2), k INT, v STRING, PRIMARY KEY (p, k) NOT ENFORCED) PARTITIONED BY (p)"
    )
    sql.execute("INSERT INTO t VALUES (1.05, 1, 'x'), (2.00, 2, 'y')")
    for stmt in (
        "INSERT INTO t PARTITION (p = 1.054) SELECT 3, 'new'",
        "INSERT OVERWRITE t PARTITION (p = 1.054) SELECT 3, 'new'",
        "DELETE FROM t WHERE p = 1.054",
        "CALL sys.compact(`table` => 'default.t', `where` => 'p = 1.054')",
    ):
        text = refused(sql, stmt, "1.054")
        assert "DECIMAL(5, 2)" in text, text
    sql.execute("INSERT INTO t PARTITION (p = 1.05) SELECT 3, 'new'")
    seen = inspect(
        wh,
        """
        t = cat.get_table("default.t")
        out = sorted((str(r["p"]), r["k"]) for r in t.to_arrow().to_pylist())
        """,
    )
    assert seen == [["1.05", 1], ["1.05", 3], ["2.00", 2]]
