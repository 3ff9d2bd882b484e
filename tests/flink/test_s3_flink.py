"""Flink jobs on an ``s3://`` warehouse (a real S3 API server on loopback): the SQL wrapper's
``CREATE CATALOG`` with Paimon's ``s3.*`` options, an ``INSERT`` (the sink's writers and committer
open the table by location on their Python workers, with the file IO the job ships), a batch
``SELECT`` (the source) and the dedicated compaction job."""

from __future__ import annotations

import pytest

import lakelog
from tests.flink.sqlkit import query, session
from tests.s3_server import BUCKET, SECRET_KEY, S3Server

pytest.importorskip("pyflink")
pytestmark = pytest.mark.s3


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{k}'='{v}'" for k, v in options.items())


def test_sql_insert_select_and_compaction_job_on_s3(s3_server: S3Server) -> None:
    wh, options = s3_server.warehouse(), s3_server.options()
    sql = session()
    sql.execute(f"CREATE CATALOG s WITH ('type'='lakelog', 'warehouse'='{wh}', {_with(options)})")
    sql.execute("USE CATALOG s")
    sql.execute("CREATE DATABASE shop")
    sql.execute("CREATE TABLE shop.orders (id INT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) "
                "WITH ('bucket' = '2', 'write-only' = 'true')")
    sql.execute("INSERT INTO shop.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    sql.execute("INSERT INTO shop.orders VALUES (2, 'B'), (4, 'd')")
    assert sorted(query(sql, "SELECT * FROM shop.orders")) == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    py = lakelog.Catalog(wh, options=options)
    t = py.get_table("shop.orders")
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "APPEND"]

    from lakelog.jobs.cli import main as cli_main  # the dedicated compaction job, in Flink

    opts = [a for k, v in options.items() for a in ("--option", f"{k}={v}")]
    assert cli_main(["--warehouse", wh, *opts, "compact", "shop.orders", "--job"]) == 0
    t = py.get_table("shop.orders")
    assert t.snapshots()[-1].commit_kind == "COMPACT"
    assert sorted(tuple(r.values()) for r in t.to_arrow().to_pylist()) == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    client = s3_server.client()
    prefix = wh.split(f"{BUCKET}/", 1)[1]
    for key in s3_server.keys(prefix):
        assert SECRET_KEY.encode() not in client.get_object(Bucket=BUCKET, Key=key)["Body"].read(), key
    assert SECRET_KEY not in str(query(sql, "SELECT * FROM shop.`orders$options`"))


def test_a_path_table_on_s3_takes_its_store_options_in_with_and_keeps_them_out_of_sight(
    s3_server: S3Server,
) -> None:
    """``'connector' = 'lakelog', 'path' = 's3://...'`` with Paimon's ``s3.*`` options in the same
    WITH clause, in a bucket no catalog of this process has opened: the options reach the store
    (the INSERT's workers and the SELECT get them with the job), and they are no table options:
    not in the schema file, not in Flink's catalog (``SHOW CREATE TABLE``)."""
    bucket = "path-tables"
    s3_server.client().create_bucket(Bucket=bucket)
    path = f"s3://{bucket}/wh/shop.db/p"
    sql = session()
    sql.execute(
        "CREATE TEMPORARY TABLE p (id INT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        f"'connector' = 'lakelog', 'path' = '{path}', 'bucket' = '1', {_with(s3_server.options())})"
    )
    sql.execute("INSERT INTO p VALUES (1, 'a'), (2, 'b')")
    assert sorted(query(sql, "SELECT * FROM p")) == [(1, "a"), (2, "b")]
    shown = str(query(sql, "SHOW CREATE TABLE p"))
    assert "'bucket'" in shown and SECRET_KEY not in shown and "s3.access-key" not in shown
    t = lakelog.Catalog(f"s3://{bucket}/wh", options=s3_server.options()).get_table("shop.p")
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]
    assert not [k for k in t.options if k.startswith("s3.")]
    client = s3_server.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            assert SECRET_KEY.encode() not in client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
