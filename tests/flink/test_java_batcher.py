"""lakelog's Java RowBatcher in a job: the jar is compiled from the shipped sources in this test (a
fresh cache) and a tiny job's rows reach the table through it. Skipped without a JDK unless
``LAKELOG_REQUIRE_JDK=1`` (as .ci/run sets it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.operators import jvm  # noqa: E402
from tests.test_jvm import require_jdk  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])


@pytest.fixture()
def fresh_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_jdk()
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path / "cache"))
    return jvm.lakelog_jar()  # compiled now, from operators/java


def test_a_tiny_job_writes_through_the_freshly_built_batcher(
    tmp_path: Path, fresh_jar: Path, flink_env: Any
) -> None:
    from pyflink.common import Row

    from lakelog.operators.sink import row_type_of, sink_to_lakelog

    assert fresh_jar.is_file() and str(fresh_jar).startswith(str(tmp_path))
    table = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", SCHEMA, options={"bucket": "1", "bucket-key": "id"}
    )
    env = flink_env(mode="batch", parallelism=1)
    rows = env.from_collection([Row(id=i, name=f"n{i}") for i in range(5)], type_info=row_type_of(SCHEMA))
    plan = sink_to_lakelog(rows, table, java=True)  # a Table, not a path
    assert plan.java and plan.batch
    env.execute("lakelog-java-batcher")
    assert sorted(table.refresh().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "name": f"n{i}"} for i in range(5)
    ]


def test_a_job_lists_the_jar_once(fresh_jar: Path, flink_env: Any) -> None:
    """Two sinks in one job add the jar to its ``pipeline.jars`` once."""
    from pyflink.java_gateway import get_gateway

    env = flink_env()
    jvm.add_to(env)
    jvm.add_to(env)
    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    jars = str(util.getEnvironmentConfig(env._j_stream_execution_environment).toMap().get("pipeline.jars"))
    assert jars.count(fresh_jar.as_uri()) == 1
