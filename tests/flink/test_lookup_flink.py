"""Lookup joins on a MiniCluster: a DataStream lookup_join that sees the dimension change mid-job, and
SQL joins in one job: LATERAL TABLE inner and left, the rewritten FOR SYSTEM_TIME AS OF form, and the
vectorised (pandas) row function."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakelog

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

DIM = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("city", pa.string()),
    ]
)
ORDERS = [(1, 1), (2, 2), (3, 4), (4, 9), (100, 3), (6, 1), (7, 2), (8, 4)]  # (oid, customer id)


def _dim(tmp_path: Any, name: str = "cust", buckets: int = 2) -> lakelog.Table:
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        f"db.{name}", DIM, primary_key=["id"], options={"bucket": str(buckets)}
    )
    t.write(pa.table({"id": [1, 2, 3], "name": ["a1", "b1", "c1"], "city": ["x", "y", "z"]}, schema=DIM))
    return t


class _UpdateDimOnMarker:
    """A map that, on order 100, changes the dimension (so later orders must see the new rows)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, row: Any) -> Any:
        if row[0] == 100:
            from lakelog.connector.format.store import TableStore
            from lakelog.connector.table.table import Table

            t = Table(TableStore(self.path), "cust")
            with t.writer() as w:
                w.write(pa.table({"id": [1, 4], "name": ["a2", "d2"], "city": ["x", "w"]}, schema=DIM))
                w.delete(pa.table({"id": [2]}))
        return row


def test_datastream_lookup_join_sees_updates_during_the_job(tmp_path: Any, flink_env: Any) -> None:
    """The inner join is sharded by bucket (issue 22): two subtasks, each loading two of
    the dimension's four buckets, every probe routed to its owner (a misrouted probe would fail the
    job, see LookupJoinFunction). The left join is not (``shuffle=False``): its lookups run in the
    updater's chain, so the orders before the marker must not see the update; the sharded join's
    run behind the shuffle and may see it."""
    from pyflink.common import Row, Types

    from lakelog.operators.lookup import lookup_join

    env = flink_env(parallelism=1, config={"python.fn-execution.bundle.size": "1"})  # see pipeline()
    row_t = Types.ROW_NAMED(["oid", "cid"], [Types.LONG(), Types.LONG()])
    tag = Types.ROW_NAMED(
        ["j", "oid", "cid", "name"], [Types.STRING(), Types.LONG(), Types.LONG(), Types.STRING()]
    )

    def pipeline(dim: lakelog.Table) -> Any:
        # a linear chain of Python operators is fused into one, which runs a bundle through one
        # operator after the other: with bundles of one record, each order passes the updater and
        # the lookup before the next one does, so the orders after the marker must see the update
        orders = env.from_collection([Row(o, c) for o, c in ORDERS], type_info=row_t)
        return orders.map(_UpdateDimOnMarker(dim.path), output_type=row_t)

    left_dim, inner_dim = _dim(tmp_path, "cust_l"), _dim(tmp_path, "cust_i", buckets=4)
    left = lookup_join(pipeline(left_dim), left_dim.path, "cid", columns=["name"], join_type="left",
                       refresh_interval=0, shuffle=False)  # fmt: skip
    inner = lookup_join(pipeline(inner_dim), inner_dim.path, {"cid": "id"}, columns=["id", "name"],
                        refresh_interval=0, parallelism=2, shuffle=True)  # fmt: skip
    assert inner.get_type().get_field_names() == ["oid", "cid", "id", "name"]
    out = left.map(lambda r: Row("left", r[0], r[1], r[2]), output_type=tag).union(
        inner.map(lambda r: Row("inner", r[0], r[1], r[3]), output_type=tag)
    )
    got = sorted(tuple(r) for r in out.execute_and_collect())
    expect_left = [
        (1, 1, "a1"), (2, 2, "b1"), (3, 4, None), (4, 9, None),  # before the marker
        (100, 3, "c1"), (6, 1, "a2"), (7, 2, None), (8, 4, "d2"),  # after it
    ]  # fmt: skip
    assert [r[1:] for r in got if r[0] == "left"] == sorted(expect_left)
    after = [r for r in expect_left[4:] if r[2] is not None]
    inner_rows = [r[1:] for r in got if r[0] == "inner"]
    assert sorted(r for r in inner_rows if r[0] in (100, 6, 7, 8)) == sorted(after)
    # before the marker: the old rows, or the new ones where the update was faster than the shuffle
    # (then order 2 finds customer 2 deleted, and an inner join drops it)
    assert {r for r in inner_rows if r[0] not in (100, 6, 7, 8)} <= {(1, 1, "a1"), (1, 1, "a2"), (2, 2, "b1"),
                                                                     (3, 4, "d2")}  # fmt: skip
    assert (1, 1) in {r[:2] for r in inner_rows}  # customer 1 is there before and after the update


def test_sql_lateral_table_joins(tmp_path: Any) -> None:
    from pyflink.table import DataTypes

    from lakelog.operators.lookup import register_lookup_function
    from lakelog.operators.sql import LakelogSql

    t = _dim(tmp_path)
    t.write(pa.table({"id": [3, 4], "name": ["c2", "d1"], "city": ["z", "w"]}, schema=DIM))  # between runs
    sql = LakelogSql("batch", parallelism=1)
    t_env = sql.t_env
    t_env.create_temporary_view(
        "orders",
        t_env.from_elements(
            ORDERS,
            DataTypes.ROW(
                [DataTypes.FIELD("oid", DataTypes.BIGINT()), DataTypes.FIELD("cid", DataTypes.BIGINT())]
            ),
        ),
    )
    cols = register_lookup_function(t_env, "dim", t.path, columns=["name", "city"])
    assert cols == ["name", "city"]
    assert register_lookup_function(t_env, "dim_row", t.path, vectorized=True) == ["id", "name", "city"]
    sql.execute(
        f"CREATE TABLE cust (id BIGINT NOT NULL, name STRING, city STRING) WITH ('connector'='lakelog', 'path'='{t.path}')"
    )
    # a partitioned dimension, of which max_pt() joins the latest partition only (issue 22)
    daily = pa.schema([pa.field("dt", pa.string(), False), *DIM])
    pt = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.daily", daily, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    pt.write(pa.table({"dt": ["d1", "d1", "d2"], "id": [1, 2, 1], "name": ["old1", "old2", "new1"],
                       "city": ["x", "y", "z"]}, schema=daily))  # fmt: skip
    sql.execute(f"CREATE TABLE daily (dt STRING NOT NULL, id BIGINT NOT NULL, name STRING, city STRING) "
                f"WITH ('connector'='lakelog', 'path'='{pt.path}')")  # fmt: skip
    query = """
        SELECT 'inner' AS j, o.oid, d.name FROM orders AS o, LATERAL TABLE(dim(o.cid)) AS d
        UNION ALL
        SELECT 'left' AS j, o.oid, d.name FROM orders AS o LEFT JOIN LATERAL TABLE(dim(o.cid)) AS d ON TRUE
        UNION ALL
        SELECT 'systime' AS j, o.oid, c.name FROM orders AS o
          LEFT JOIN cust /*+ OPTIONS('lookup.cache' = 'full', 'lookup.cache-max-disk-size' = '1 gb') */
          FOR SYSTEM_TIME AS OF PROCTIME() AS c ON o.cid = c.id
        UNION ALL
        SELECT 'vector' AS j, x.oid, x.r.name FROM (SELECT o.oid, dim_row(o.cid) AS r FROM orders AS o) AS x
          WHERE x.r.id IS NOT NULL
        UNION ALL
        SELECT 'max_pt' AS j, o.oid, p.name FROM orders AS o
          JOIN daily /*+ OPTIONS('scan.partitions' = 'max_pt()', 'lookup.dynamic-partition.refresh-interval' = '1 h') */
          FOR SYSTEM_TIME AS OF PROCTIME() AS p ON o.cid = p.id
    """
    with sql.sql_query(query).execute().collect() as it:
        got = sorted(tuple(r) for r in it)
    names = {1: "a1", 2: "b1", 3: "c2", 4: "d1"}
    expect = [(j, o, names[c]) for j in ("inner", "vector") for o, c in ORDERS if c in names]
    expect += [(j, o, names.get(c)) for j in ("left", "systime") for o, c in ORDERS]
    expect += [("max_pt", o, "new1") for o, c in ORDERS if c == 1]  # customer 2 is only in d1
    assert got == sorted(expect)


def test_lookup_hints_retry_a_miss_and_unknown_options_are_refused(tmp_path: Any) -> None:
    """Issue 25, 5: the LOOKUP hint's retry on a miss (Paimon's docs example) waited for nothing,
    and an unknown or unsupported option in a lookup join's hints was accepted silently."""
    import threading

    from pyflink.table import DataTypes

    from lakelog.operators.sql import LakelogSql
    from tests.flink.sqlkit import refused

    t = _dim(tmp_path)
    sql = LakelogSql("batch", parallelism=1)
    sql.t_env.create_temporary_view(
        "orders",
        sql.t_env.from_elements(
            [(1, 1), (2, 9)],
            DataTypes.ROW([DataTypes.FIELD("oid", DataTypes.BIGINT()), DataTypes.FIELD("cid", DataTypes.BIGINT())]),
        ),
    )
    sql.execute(f"CREATE TABLE cust (id BIGINT NOT NULL, name STRING, city STRING) WITH ('connector'='lakelog', 'path'='{t.path}')")
    hint = ("/*+ LOOKUP('table'='c', 'retry-predicate'='lookup_miss', 'retry-strategy'='fixed_delay', "
            "'fixed-delay'='1s', 'max-attempts'='60') */")
    query = (f"SELECT {hint} o.oid, c.name FROM orders AS o "
             "JOIN cust FOR SYSTEM_TIME AS OF PROCTIME() AS c ON o.cid = c.id")
    # customer 9 arrives a few seconds into the job: the retried probe finds it
    later = threading.Timer(4, lambda: t.write(pa.table({"id": [9], "name": ["late"], "city": ["q"]}, schema=DIM)))
    later.start()
    with sql.sql_query(query).execute().collect() as it:
        got = sorted(tuple(r) for r in it)
    later.join()
    assert got == [(1, "a1"), (2, "late")]

    join = "SELECT o.oid FROM orders AS o JOIN cust {} FOR SYSTEM_TIME AS OF PROCTIME() AS c ON o.cid = c.id"
    refused(sql, join.format("/*+ OPTIONS('lookup.cahce-rows'='5') */"), "unknown table option")
    refused(sql, join.format("/*+ OPTIONS('lookup.cache'='rocksdb') */"), "must be one of auto, full, memory")
    refused(sql, join.format("/*+ OPTIONS('lookup.cache-spill-compression'='lz4') */"), "not supported by lakelog")
    refused(sql, join.format("/*+ OPTIONS('scan.partitions'='max_pt()') */"), "is not partitioned")
    refused(sql, join.format("/*+ OPTIONS('scan.snapshot-id'='1') */"), "no effect on a lakelog lookup join")
    refused(sql, "SELECT /*+ LOOKUP('table'='c', 'async'='true') */ " + join.format("")[7:], "asynchronous")
    refused(sql, "SELECT /*+ LOOKUP('table'='c', 'retry-predcate'='x') */ " + join.format("")[7:], "unknown LOOKUP")


def test_sql_lookup_join_sharded_by_bucket(tmp_path: Any, monkeypatch: Any) -> None:
    """Issue 22: at parallelism 2 a ``FOR SYSTEM_TIME AS OF`` join routes each probe to the subtask
    that holds its key's bucket (each loads two of the four buckets; a misrouted probe would fail the
    job); by default for a dimension of SHARD_BYTES or more (lowered here), Paimon's ``'shuffle'``
    hint turns it off, or is refused where it cannot be honoured."""
    from lakelog.operators import lookup_shard

    monkeypatch.setattr(lookup_shard, "SHARD_BYTES", 1)
    from pyflink.table import DataTypes

    from lakelog.operators.sql import LakelogSql
    from tests.flink.sqlkit import refused

    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.cust", DIM, primary_key=["id"], options={"bucket": "4"}
    )
    t.write(pa.table({"id": range(0, 400, 2), "name": [f"n{i}" for i in range(0, 400, 2)],
                      "city": [f"c{i % 7}" for i in range(0, 400, 2)]}, schema=DIM))  # fmt: skip
    orders = [(o, (o * 7919) % 500) for o in range(600)]  # half the keys hit
    row = DataTypes.ROW([DataTypes.FIELD("oid", DataTypes.BIGINT()), DataTypes.FIELD("cid", DataTypes.BIGINT())])

    def session(mode: str) -> Any:
        sql = LakelogSql(mode, parallelism=2)
        sql.t_env.create_temporary_view("orders", sql.t_env.from_elements(orders, row))
        sql.execute(f"CREATE TABLE cust (id BIGINT NOT NULL, name STRING, city STRING) WITH ('connector'='lakelog', 'path'='{t.path}')")
        return sql

    sql = session("streaming")
    join = ("SELECT {hint} '{j}' AS j, o.oid, {c}.name FROM orders AS o {kind} JOIN cust FOR SYSTEM_TIME AS OF "
            "PROCTIME() AS {c} ON o.cid = {c}.id")  # fmt: skip
    off = "/*+ LOOKUP('table'='u', 'shuffle'='false') */"
    query = " UNION ALL ".join([
        join.format(hint="", j="inner", kind="", c="c"),
        join.format(hint="", j="left", kind="LEFT", c="c"),
        join.format(hint=off, j="unsharded", kind="", c="u"),
    ])  # fmt: skip
    plan = sql.sql_query(query).explain()
    assert plan.count("fields=[__lakelog_shard, oid, cid]") == 2 * 2  # the routed probes (both plans)
    assert plan.count("__lakelog_shard") == 2 * 2
    with sql.sql_query(query).execute().collect() as it:
        got = sorted(tuple(r) for r in it)
    name = {i: f"n{i}" for i in range(0, 400, 2)}
    expect = [("inner", o, name[c]) for o, c in orders if c in name]
    expect += [("left", o, name.get(c)) for o, c in orders]
    expect += [("unsharded", o, name[c]) for o, c in orders if c in name]
    assert got == sorted(expect)
    on_city = ("SELECT /*+ LOOKUP('table'='c', 'shuffle'='true') */ o.oid FROM orders AS o JOIN cust "
               "FOR SYSTEM_TIME AS OF PROCTIME() AS c ON c.city = CAST(o.cid AS STRING)")  # fmt: skip
    refused(sql, on_city, "cannot be sharded by bucket")
    refused(sql, on_city.replace("'true'", "'yes'"), "expected true or false")
    batch = session("batch")  # the adaptive batch scheduler picks the parallelism
    refused(batch, join.format(hint="/*+ LOOKUP('table'='c', 'shuffle'='true') */", j="x", kind="", c="c"),
            "streaming only")  # fmt: skip
