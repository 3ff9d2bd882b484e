"""The SQL wrapper's Flink-free pieces: statement kinds, catalog and dynamic options, Flink's
schema options, CALL arguments, INSERT parts, root causes of Flink errors, result tables."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.operators.sql.errors import SqlError, describe_error, root_cause
from lakelog.operators.sql.procedures import CallContext, call_procedure, parse_call
from lakelog.operators.sql.results import SqlResult, format_table
from lakelog.operators.sql.rewrite import LookupCall, rewrite_lookup_joins, rewrite_table_refs
from lakelog.operators.sql.session import CatalogSpec, DynamicOptions
from lakelog.operators.sql.statements import classify
from lakelog.operators.sql.table_ddl import ComputedColumn, Watermark, read_schema_options, schema_options


@pytest.mark.parametrize(
    "stmt, kind, target, flags",
    [
        (
            "-- the quick start's comment\nCREATE CATALOG c WITH ('type'='lakelog')",
            "CREATE CATALOG",
            ("c",),
            set(),
        ),
        (
            "CREATE TEMPORARY TABLE IF NOT EXISTS a.b (x INT) WITH ()",
            "CREATE TABLE",
            ("a", "b"),
            {"TEMPORARY", "IF NOT EXISTS"},
        ),
        ("/* c */ CREATE TABLE t WITH ('k'='v') AS SELECT 1", "CREATE TABLE AS", ("t",), {"AS"}),
        ("CREATE TABLE t2 (x INT) LIKE t (EXCLUDING OPTIONS)", "CREATE TABLE", ("t2",), {"LIKE"}),
        ("CREATE OR REPLACE TABLE t AS SELECT 1", "REPLACE TABLE AS", ("t",), {"OR REPLACE", "AS"}),
        ("DROP DATABASE IF EXISTS db CASCADE", "DROP DATABASE", ("db",), {"IF EXISTS", "CASCADE"}),
        ("ALTER TABLE `my db`.t RENAME TO u", "ALTER TABLE", ("my db", "t"), set()),
        ("INSERT OVERWRITE t PARTITION (dt='a') SELECT 1", "INSERT", ("t",), {"OVERWRITE"}),
        ("TRUNCATE TABLE db.t", "TRUNCATE TABLE", ("db", "t"), set()),
        ("DELETE FROM t WHERE a = 1", "DELETE", ("t",), set()),
        ("UPDATE t SET a = 1", "UPDATE", ("t",), set()),
        ("CALL lk.sys.compact('db.t')", "CALL", ("lk", "sys", "compact"), set()),
        ("SHOW CREATE TABLE t", "SHOW CREATE TABLE", ("t",), set()),
        ("SHOW PARTITIONS t", "SHOW PARTITIONS", ("t",), set()),
        ("DESC EXTENDED t", "DESCRIBE", ("t",), {"EXTENDED"}),
        ("CREATE TEMPORARY SYSTEM FUNCTION f AS 'x'", "CREATE FUNCTION", ("f",), {"TEMPORARY"}),
        ("CREATE MATERIALIZED TABLE m AS SELECT 1", "CREATE MATERIALIZED TABLE", ("m",), set()),
        ("(SELECT 1)", "QUERY", (), set()),
        ("RESET", "RESET", (), set()),
        ("   ", "EMPTY", (), set()),
    ],
)
def test_statement_kinds(stmt: str, kind: str, target: tuple[str, ...], flags: set[str]) -> None:
    st = classify(stmt)
    assert (st.kind, st.target, set(st.flags)) == (kind, target, flags)
    assert "--" not in st.text and "/*" not in st.text.replace("/*+", "")


def test_catalog_options() -> None:
    spec = CatalogSpec.of("c", {"type": "lakelog", "warehouse": "file:///tmp/x", "table-default.bucket": "4"})
    assert spec.warehouse == "/tmp/x" and spec.with_defaults({"k": "v"}) == {"k": "v", "bucket": "4"}
    assert spec.with_defaults({"bucket": "2"}) == {"bucket": "2"}  # the DDL wins
    assert CatalogSpec.of("c", {"warehouse": "file:/tmp/x"}).warehouse == "/tmp/x"
    with pytest.raises(OptionError, match="'warehouse'"):
        CatalogSpec.of("c", {"type": "lakelog"})
    with pytest.raises(OptionError, match="'uri' is not supported"):
        CatalogSpec.of("c", {"warehouse": "/tmp/x", "uri": "thrift://x"})
    with pytest.raises(OptionError, match="bukket"):
        CatalogSpec.of("c", {"warehouse": "/tmp/x", "table-default.bukket": "4"})
    with pytest.raises(OptionError, match="host 'tmp'"):
        CatalogSpec.of("c", {"warehouse": "file://tmp/x"})


def test_dynamic_options_as_paimon_scopes_them() -> None:
    d = DynamicOptions()
    assert d.is_table_key("scan.snapshot-id") and d.is_table_key("paimon.c.db.t.scan.snapshot-id")
    assert not d.is_table_key("execution.checkpointing.interval")
    d.set("scan.timestamp-millis", "1")
    d.set("paimon.*.db.t.scan.timestamp-millis", "2")
    d.set("paimon.c.db.t.scan.timestamp-millis", "3")
    assert d.for_table("c", "db", "t") == {"scan.timestamp-millis": "3"}
    assert d.for_table("other", "db", "t") == {"scan.timestamp-millis": "2"}
    assert d.for_table("c", "db", "u") == {"scan.timestamp-millis": "1"}
    with pytest.raises(OptionError, match="SET 'scan.snapshot-id'"):
        d.set("scan.snapshot-id", "x")
    assert d.reset("paimon.c.db.t.scan.timestamp-millis") and not d.reset("nope")
    d.reset()
    assert d.items() == []


def test_computed_columns_and_watermark_round_trip_through_options() -> None:
    cols = [ComputedColumn(2, "comp", "INT", "`price` * 2", "twice")]
    wm = Watermark("ts", "`ts` - INTERVAL '5' SECOND", "TIMESTAMP(3)")
    opts = schema_options(cols, wm)
    assert opts == {
        "schema.2.name": "comp",
        "schema.2.data-type": "INT",
        "schema.2.expr": "`price` * 2",
        "schema.2.comment": "twice",
        "schema.watermark.0.rowtime": "ts",
        "schema.watermark.0.strategy.expr": "`ts` - INTERVAL '5' SECOND",
        "schema.watermark.0.strategy.data-type": "TIMESTAMP(3)",
    }
    # an old Paimon also stored physical columns this way: they are skipped
    opts |= {"schema.0.name": "id", "schema.0.data-type": "INT"}
    assert read_schema_options(opts, ["id", "price", "ts"]) == (cols, wm)


def test_call_arguments_bind_by_position_and_by_name(tmp_path: Path) -> None:
    assert parse_call("CALL sys.create_tag(`table` => 'db.t', tag => 'x', snapshot_id => 1)") == (
        ["sys", "create_tag"],
        [],
        {"table": "db.t", "tag": "x", "snapshot_id": 1},
    )
    assert parse_call("CALL c.sys.compact('db.t', '', TRUE, NULL)")[1] == ["db.t", "", True, None]
    with pytest.raises(SqlError, match="not a literal"):
        parse_call("CALL sys.compact(concat('a', 'b'))")
    # constant expressions, as Paimon's docs write them (issue 24)
    got = parse_call("CALL sys.rollback_to(`table` => 'db.' || 'T', snapshot_id => cast(1 as bigint))")[2]
    assert got == {"table": "db.T", "snapshot_id": 1} and isinstance(got["snapshot_id"], int)
    assert parse_call("CALL sys.x(CAST('7' AS INT), -(2 + 3) * 4, CAST(1.5 AS DECIMAL(10, 2)), 7 / 2, "
                      "CAST(NULL AS STRING), CAST('true' AS BOOLEAN), CAST(3 AS STRING), -2.5)")[1] == [
        7, -20, decimal.Decimal("1.5"), 3, None, True, "3", decimal.Decimal("-2.5")]  # fmt: skip
    for bad, match in (("CAST('x' AS BIGINT)", "cannot CAST 'x' AS BIGINT"), ("1 / 0", "division by zero"),
                       ("'a' + 1", "not a literal"), ("CAST(1 AS BIGINT", "parentheses do not match"), ("now()", "not a literal")):  # fmt: skip
        with pytest.raises(SqlError, match=match):
            parse_call(f"CALL sys.x({bad})")
    cat = lakelog.Catalog(str(tmp_path))
    ctx = CallContext(cat, "lk", "default")
    with pytest.raises(SqlError, match="has no argument 'tabel'"):
        call_procedure(ctx, "compact", [], {"tabel": "x"})
    with pytest.raises(SqlError, match="needs argument"):
        call_procedure(ctx, "create_tag", ["db.t"], {})
    with pytest.raises(SqlError, match="lakelog has no procedure 'migrate_table'"):
        call_procedure(ctx, "migrate_table", [], {})
    with pytest.raises(SqlError, match="needs a Flink SQL session"):  # merge_into runs Flink queries
        call_procedure(ctx, "merge_into", ["db.T"], {})


_STACK = """An error occurred while calling o48.execute.
: org.apache.flink.runtime.client.JobExecutionException: Job execution failed.
\tat org.apache.flink.runtime.jobmaster.JobResult.toJobExecutionException(JobResult.java:144)
Caused by: org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy
\tat org.apache.flink.runtime.executiongraph.failover.X.handle(X.java:1)
Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 4: Traceback (most recent call last):
  File "/x/sdk_worker.py", line 311, in _execute
    response = task()
               ^^^^^^
lakelog.connector.errors.InvalidInputError: 'primary-key column 'k' holds null(s)'

\tat org.apache.beam.X.onNext(X.java:180)
\t... 12 more
"""


def test_root_causes_are_a_few_lines() -> None:
    assert root_cause(_STACK) == "InvalidInputError: primary-key column 'k' holds null(s)"
    validation = (
        "org.apache.flink.table.api.ValidationException: SQL validation failed. From line 1\n"
        "\tat x.y(Z.java:1)\n"
        "Caused by: org.apache.calcite.sql.validate.SqlValidatorException: Object 't' not found\n"
        "\tat a.b(C.java:2)\n"
    )
    assert root_cause(validation) == "SqlValidatorException: Object 't' not found"

    class JavaException(Exception):
        stack_trace = validation

    text = describe_error(JavaException())
    assert text == "SqlValidatorException: Object 't' not found"
    assert describe_error(JavaException(), verbose=True).endswith("at a.b(C.java:2)\n")
    assert describe_error(OptionError("option 'x' bad")) == "option 'x' bad"
    assert describe_error(KeyError("k")) == "KeyError: k"


def test_result_tables() -> None:
    assert SqlResult.ok().text() == "OK"
    text = format_table(["a", "when"], [(1, datetime.datetime(2024, 1, 1, 8, 30)), (None, None)])
    assert (
        "| <NULL> |" in text.replace("  ", " ")
        and "2024-01-01 08:30:00" in text
        and text.endswith("2 rows in set")
    )


def test_time_travel_and_lookup_joins_are_told_apart() -> None:
    seen = []

    def view_for(parts: list[str], hint: object, at: object, where: object) -> str:
        seen.append((parts, at))
        return "`v`"

    sql = "SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00' AS x JOIN u ON x.k = u.k"
    assert rewrite_table_refs(sql, view_for) == "SELECT * FROM `v` AS x JOIN `v` AS `u` ON x.k = u.k"
    assert seen == [(["t"], "TIMESTAMP '2024-01-01 00:00:00'"), (["u"], None)]
    # a constant time is no lookup join: rewrite_lookup_joins leaves it to the table rewrite
    travel = "SELECT * FROM o JOIN d FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01' AS x ON x.k = o.k"
    assert rewrite_lookup_joins(travel, lambda p: "/path", lambda *a: LookupCall("f", ["k"])) == travel
    lookup = "SELECT * FROM o JOIN d FOR SYSTEM_TIME AS OF o.proc AS x ON x.k = o.k"
    assert "LATERAL TABLE(f(o.k))" in rewrite_lookup_joins(lookup, lambda p: "/path", lambda *a: LookupCall("f", ["k"]))


def test_insert_parts_and_typed_values() -> None:
    pytest.importorskip("pyflink")
    from lakelog.operators.sql.dml import parse_insert, typed_values

    spec = parse_insert(
        "INSERT INTO db.t /*+ OPTIONS('sink.parallelism'='2') */ PARTITION (dt = '2024-01-01') (a, b) SELECT x, y FROM s"
    )
    assert (spec.target, spec.hint, spec.partition, spec.columns) == (
        ["db", "t"],
        {"sink.parallelism": "2"},
        {"dt": "'2024-01-01'"},
        ["a", "b"],
    )
    assert spec.query == "SELECT x, y FROM s" and not spec.overwrite
    assert parse_insert("INSERT OVERWRITE t (SELECT 1)").columns is None
    typed = typed_values(
        "VALUES (1, NULL, ARRAY['a', 'b']), (2, 'x', NULL)", ["INT", "STRING", "ARRAY<STRING>"]
    )
    assert typed == (
        "VALUES (CAST(1 AS INT), CAST(NULL AS STRING), CAST(ARRAY['a', 'b'] AS ARRAY<STRING>)), "
        "(CAST(2 AS INT), CAST('x' AS STRING), CAST(NULL AS ARRAY<STRING>))"
    )
    assert typed_values("SELECT 1", ["INT"]) == "SELECT 1"


def test_expire_partitions_procedure(tmp_path: Path) -> None:
    import pyarrow as pa

    cat = lakelog.Catalog(str(tmp_path))
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int32(), False)])
    t = cat.create_table("db.t", schema, primary_key=["dt", "k"], partition_by=["dt"])
    t.write(pa.table({"dt": ["2020-01-01", "2099-01-01"], "k": [1, 2]}, schema=schema))
    ctx = CallContext(cat, "lk", "db")
    named = {"table": "db.t", "expiration_time": "1 d", "timestamp_formatter": "yyyy-MM-dd"}
    assert call_procedure(ctx, "expire_partitions", [], named).rows == [("dt=2020-01-01",)]
    assert call_procedure(ctx, "expire_partitions", ["db.t", "1 d"], {}).rows == [("No expired partitions.",)]
    assert t.to_arrow().column("dt").to_pylist() == ["2099-01-01"]
    assert "expiration-time" not in str(t.refresh().options)  # the arguments are not stored
    with pytest.raises(SqlError, match="can not be null"):
        call_procedure(ctx, "expire_partitions", ["db.t"], {})


def test_rescale_procedure(tmp_path: Path) -> None:
    import pyarrow as pa

    from lakelog.operators.sql.errors import UnsupportedStatementError

    cat = lakelog.Catalog(str(tmp_path))
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int32(), False)])
    t = cat.create_table(
        "db.t", schema, primary_key=["dt", "k"], partition_by=["dt"], options={"bucket": "2"}
    )
    t.write(pa.table({"dt": ["a", "a", "b"], "k": [1, 2, 3]}, schema=schema))
    ctx = CallContext(cat, "lk", "db")
    assert call_procedure(
        ctx, "rescale", [], {"table": "db.t", "bucket_num": 4, "partition": "dt=a"}
    ).rows == [("Success",)]
    assert t.bucket_counts() == {("a",): 4, ("b",): 2}
    assert sorted(t.to_arrow().column("k").to_pylist()) == [1, 2, 3]
    # positional, every partition whose count differs from bucket_num
    assert call_procedure(ctx, "rescale", ["db.t", 4], {}).rows == [("Success",)]
    assert t.bucket_counts() == {("a",): 4, ("b",): 4}
    assert t.options["bucket"] == "2"  # as Paimon's sys.rescale: the table's option stays
    with pytest.raises(UnsupportedStatementError, match="sink_parallelism"):
        call_procedure(ctx, "rescale", [], {"table": "db.t", "bucket_num": 4, "sink_parallelism": 2})
    assert sorted(t.to_arrow().column("k").to_pylist()) == [1, 2, 3]
