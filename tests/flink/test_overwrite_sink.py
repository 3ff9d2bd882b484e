"""INSERT OVERWRITE through the lakelog sink: the rows stream through the writers (nothing is
collected in the client) and the committer's one commit at end of input is the OVERWRITE snapshot.
Checked against a model for fixed-bucket, dynamic-bucket and append tables with two writers, alone
and in statement sets; the client path stays for cross-partition tables; a streaming overwrite is
refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError

from ..buckets_util import assert_keys_in_their_buckets
from .sqlkit import refused, session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

N = 3000  # rows per partition written by the first INSERT


def _open(wh: str) -> Any:
    sql = session(parallelism=2)
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute(
        "CREATE TEMPORARY TABLE seq (i INT) WITH ('connector' = 'datagen', 'fields.i.kind' = 'sequence', "
        f"'fields.i.start' = '0', 'fields.i.end' = '{N - 1}', 'number-of-rows' = '{N}')"
    )
    return sql


def _kinds(t: lakelog.Table) -> list[str]:
    return [s.commit_kind for s in t.refresh().snapshots()]


def _both(sql: Any, template: str) -> None:
    """One job for the fixed-bucket table ``t`` and the dynamic-bucket table ``d`` (a statement set)."""
    sql.execute("BEGIN STATEMENT SET")
    for name in ("t", "d"):
        sql.execute(template.format(t=name))
    sql.execute("END")


def test_insert_overwrite_of_primary_key_tables_through_the_sink(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = _open(wh)
    for name, bucket in (("t", "3"), ("d", "-1")):
        sql.execute(
            f"CREATE TABLE {name} (dt STRING, k INT, v STRING, PRIMARY KEY (dt, k) NOT ENFORCED) "
            f"PARTITIONED BY (dt) WITH ('bucket' = '{bucket}', 'dynamic-bucket.target-row-num' = '1000')"
        )
    _both(sql, "INSERT INTO {t} SELECT dt, i, CONCAT('old-', CAST(i AS STRING)) FROM seq, "
               "(VALUES ('a'), ('b'), ('c')) AS x(dt)")  # fmt: skip
    model = {(dt, i): f"old-{i}" for dt in "abc" for i in range(N)}
    # dynamic (the default): partitions a and d (new) are replaced; b and c keep their rows
    result = sql.execute(
        "INSERT OVERWRITE t SELECT IF(MOD(i, 2) = 0, 'a', 'd'), i, CONCAT('new-', CAST(i AS STRING)) "
        "FROM seq WHERE i < 2000"
    )
    assert "job" in result.message  # a Flink job wrote the rows, not the client
    sql.execute("INSERT OVERWRITE d SELECT IF(MOD(i, 2) = 0, 'a', 'd'), i, CONCAT('new-', CAST(i AS STRING)) "
                "FROM seq WHERE i < 2000")  # fmt: skip
    model = {k: v for k, v in model.items() if k[0] != "a"}
    model.update({("a" if i % 2 == 0 else "d", i): f"new-{i}" for i in range(2000)})
    tables = [lakelog.Catalog(wh).get_table(f"default.{name}") for name in ("t", "d")]
    for t in tables:
        assert {(r["dt"], r["k"]): r["v"] for r in t.refresh().to_arrow().to_pylist()} == model
        assert _kinds(t) == ["APPEND", "OVERWRITE"]
    # static, both in one job: partition b is replaced by the rows given (its value fills dt)
    _both(sql, "INSERT OVERWRITE {t} /*+ OPTIONS('dynamic-partition-overwrite' = 'false') */ "
               "PARTITION (dt = 'b') SELECT i, 'static' FROM seq WHERE i < 10")  # fmt: skip
    model = {k: v for k, v in model.items() if k[0] != "b"}
    model.update({("b", i): "static" for i in range(10)})
    # the overwritten partitions take further upserts as any other: no key is written twice
    _both(sql, "INSERT INTO {t} SELECT dt, i, 'later' FROM seq, (VALUES ('a'), ('b'), ('d')) AS x(dt) "
               "WHERE i < 300")  # fmt: skip
    model.update({(dt, i): "later" for dt in "abd" for i in range(300)})
    for t in tables:
        rows = t.refresh().to_arrow().to_pylist()
        assert Counter((r["dt"], r["k"]) for r in rows).most_common(1)[0][1] == 1
        assert {(r["dt"], r["k"]): r["v"] for r in rows} == model
        assert _kinds(t)[:3] == ["APPEND", "OVERWRITE", "OVERWRITE"]
    assert_keys_in_their_buckets(tables[0])


def test_insert_overwrite_of_an_append_table_and_a_cross_partition_table(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    sql = _open(wh)
    sql.execute("CREATE TABLE logs (dt STRING, i INT) PARTITIONED BY (dt)")
    sql.execute("INSERT INTO logs SELECT IF(i < 1000, 'x', 'y'), i FROM seq")
    sql.execute("INSERT OVERWRITE logs SELECT 'x', i FROM seq WHERE i < 5")  # dynamic: partition x only
    t = lakelog.Catalog(wh).get_table("default.logs")
    assert Counter(r["dt"] for r in t.to_arrow().to_pylist()) == {"x": 5, "y": N - 1000}
    sql.execute("INSERT OVERWRITE logs /*+ OPTIONS('dynamic-partition-overwrite' = 'false') */ "
                "SELECT 'z', i FROM seq WHERE i < 0")  # fmt: skip  (static, no spec, no rows: empties it)
    assert t.refresh().to_arrow().num_rows == 0
    assert _kinds(t) == ["APPEND", "OVERWRITE", "OVERWRITE"]
    # a cross-partition table (key without the partition field) is still written by the client
    sql.execute("CREATE TABLE u (dt STRING, k INT, v STRING, PRIMARY KEY (k) NOT ENFORCED) PARTITIONED BY (dt)")
    sql.execute("INSERT INTO u VALUES ('a', 1, 'x'), ('b', 2, 'y')")
    sql.execute("BEGIN STATEMENT SET")
    refused(sql, "INSERT OVERWRITE u VALUES ('a', 3, 'new')", "not inside a statement set")
    sql.execute("END")
    result = sql.execute("INSERT OVERWRITE u VALUES ('a', 3, 'new')")
    assert "snapshot" in result.message
    got = sorted((r["dt"], r["k"], r["v"]) for r in lakelog.Catalog(wh).get_table("default.u").to_arrow().to_pylist())
    assert got == [("a", 3, "new"), ("b", 2, "y")]  # a's rows replaced, b's kept


def test_the_sink_refuses_an_overwrite_it_cannot_make(tmp_path: Path, flink_env: Any) -> None:
    from pyflink.common import Row

    from lakelog.operators.committer import OverwriteRequest
    from lakelog.operators.sink import row_type_of, sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path))
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    t = cat.create_table("db.t", schema, primary_key=["k"], options={"bucket": "1"})
    env = flink_env(mode="streaming", parallelism=1, checkpoint_interval_ms=1000)
    ds = env.from_collection([Row(1, "a")], type_info=row_type_of(schema))
    with pytest.raises(OptionError, match="batch mode"):
        sink_to_lakelog(ds, t, overwrite=OverwriteRequest(dynamic=False))
    cross = cat.create_table(
        "db.x", pa.schema([("dt", pa.string()), pa.field("k", pa.int64(), False), ("v", pa.string())]),
        primary_key=["k"], partition_by=["dt"],
    )  # fmt: skip
    with pytest.raises(OptionError, match="cross-partition"):
        sink_to_lakelog(ds, cross, batch=True, overwrite=OverwriteRequest(dynamic=True))
