"""Tables whose rows need a bucket assigner (dynamic buckets, cross-partition upsert), which the
PyFlink sink once refused on the client, are written by the DataStream sink, the Table sink and SQL
INSERT INTO alike: the rows of a dynamic-bucket partition meet one writer, those of a
cross-partition table one writer for the whole table (see ``sink_routing``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402

from ..buckets_util import assert_keys_in_their_buckets  # noqa: E402

pytestmark = [pytest.mark.slow]

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)


def content(t: lakelog.Table) -> list[tuple[str, int, str]]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.refresh().to_arrow().to_pylist())


def test_sink_and_sql_write_tables_that_need_a_bucket_assigner(tmp_path: Any, flink_env: Any) -> None:
    from pyflink.common import Row
    from pyflink.table import StreamTableEnvironment

    from lakelog.operators.sink import row_type_of, sink_table_to_lakelog, sink_to_lakelog
    from lakelog.operators.sql import LakelogSql

    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    small = {"bucket": "-1", "dynamic-bucket.target-row-num": "2"}
    dyn = cat.create_table("db.dyn", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=small)
    dyn2 = cat.create_table("db.dyn2", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=small)
    cross = cat.create_table("db.cross", SCHEMA, primary_key=["id"], partition_by=["dt"])
    cross_fixed = cat.create_table(
        "db.cross_fixed", SCHEMA, primary_key=["id"], partition_by=["dt"], options={"bucket": "2"}
    )

    env = flink_env(mode="batch", parallelism=1)
    data = [Row(dt="A", id=i, v=f"a{i}") for i in range(5)] + [Row(dt="B", id=1, v="b1")]
    ds = env.from_collection(data, type_info=row_type_of(SCHEMA))
    for t in (dyn, cross, cross_fixed):
        sink_to_lakelog(ds, t)
    t_env = StreamTableEnvironment.create(env)
    sink_table_to_lakelog(t_env, t_env.from_data_stream(ds), dyn2.path)
    env.execute("sink-assigner-tables")

    both = [("A", i, f"a{i}") for i in range(5)] + [("B", 1, "b1")]
    assert content(dyn) == content(dyn2) == both
    assert len({e.bucket for e in dyn.store.index_entries(dyn.refresh().latest_snapshot())}) == 3
    assert_keys_in_their_buckets(dyn.refresh())
    moved = [("A", 0, "a0"), ("A", 2, "a2"), ("A", 3, "a3"), ("A", 4, "a4"), ("B", 1, "b1")]
    assert content(cross) == content(cross_fixed) == moved  # key 1 left A for B

    sql = LakelogSql("batch", parallelism=1)
    sql.run_script(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}');\nUSE CATALOG lk;\n",
                   print_results=False)
    sql.execute("INSERT INTO db.dyn VALUES ('A', 1, 'sql'), ('A', 7, 'new'), ('C', 1, 'c')")
    assert content(dyn) == sorted(
        [("A", 0, "a0"), ("A", 1, "sql"), ("A", 2, "a2"), ("A", 3, "a3"), ("A", 4, "a4"), ("A", 7, "new"),
         ("B", 1, "b1"), ("C", 1, "c")]
    )
    assert_keys_in_their_buckets(dyn.refresh())
    for name, t in (("cross", cross), ("cross_fixed", cross_fixed)):
        sql.execute(f"INSERT INTO db.{name} VALUES ('C', 1, 'c'), ('B', 0, 'b0')")
        assert content(t) == [("A", 2, "a2"), ("A", 3, "a3"), ("A", 4, "a4"), ("B", 0, "b0"), ("C", 1, "c")]
