"""Tables the PyFlink sink cannot write yet (they need a bucket assigner stage) are refused on the
client, by the DataStream sink, the Table sink and SQL INSERT INTO alike, before any job runs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402

pytestmark = [pytest.mark.slow]

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)


def test_sink_and_sql_refuse_tables_that_need_a_bucket_assigner(tmp_path: Any, flink_env: Any) -> None:
    from pyflink.common import Row
    from pyflink.table import StreamTableEnvironment

    from lakelog.operators.sink import row_type_of, sink_table_to_lakelog, sink_to_lakelog
    from lakelog.operators.sink_blobs import SinkUnsupportedTableError
    from lakelog.operators.sql import LakelogSql

    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    dyn = cat.create_table(
        "db.dyn", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "-1"}
    )
    cross = cat.create_table("db.cross", SCHEMA, primary_key=["id"], partition_by=["dt"])
    fixed = cat.create_table(
        "db.fixed", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )

    def refused(t: lakelog.Table) -> str:
        return rf"{t.path}.*PyFlink sink has no bucket assigner stage yet.*TableWrite"

    env = flink_env(parallelism=1)
    ds = env.from_collection([Row(dt="A", id=1, v="x")], type_info=row_type_of(SCHEMA))
    for t in (dyn, cross):
        with pytest.raises(SinkUnsupportedTableError, match=refused(t)):
            sink_to_lakelog(ds, t)
    t_env = StreamTableEnvironment.create(env)
    with pytest.raises(SinkUnsupportedTableError, match=refused(dyn)):
        sink_table_to_lakelog(t_env, t_env.from_data_stream(ds), dyn.path)

    sql = LakelogSql("batch", parallelism=1)
    sql.run_script(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}');\nUSE CATALOG lk;\n",
                   print_results=False)
    for name, t in (("dyn", dyn), ("cross", cross)):
        with pytest.raises(SinkUnsupportedTableError, match=refused(t)):
            sql.execute(f"INSERT INTO db.{name} VALUES ('A', 1, 'x')")
        assert t.refresh().latest_snapshot() is None  # nothing ran
    # the same statement into a fixed-bucket table runs
    sql.execute("INSERT INTO db.fixed VALUES ('A', 1, 'x')")
    assert fixed.refresh().to_arrow().to_pylist() == [{"dt": "A", "id": 1, "v": "x"}]
