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
