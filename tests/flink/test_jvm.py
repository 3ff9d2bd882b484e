"""lakelog's Java operators: compiled at first use, cached, and a clear error without a JDK."""

from __future__ import annotations

import zipfile

import pytest

pytest.importorskip("pyflink")

from lakelog.operators import jvm  # noqa: E402

pytestmark = pytest.mark.flink


def test_jar_is_built_once_and_cached(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path))
    jar = jvm.lakelog_jar()
    assert jar.parent.parent == tmp_path and jar.name.startswith("lakelog-flink-")
    with zipfile.ZipFile(jar) as z:
        assert "lakelog/flink/RowBatcher.class" in z.namelist()
    built = jar.stat().st_mtime_ns
    assert jvm.lakelog_jar() == jar and jar.stat().st_mtime_ns == built  # cached, not rebuilt
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no build leftovers


def test_without_a_jdk_the_error_says_what_to_do(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path))  # no cached jar
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    assert jvm.javac_path() is None
    with pytest.raises(jvm.JavaBuildError, match="javac.*java=False"):
        jvm.lakelog_jar()


def test_a_job_lists_the_jar_once(flink_env) -> None:  # type: ignore[no-untyped-def]
    """Two sinks in one job add the jar to its ``pipeline.jars`` once."""
    from pyflink.java_gateway import get_gateway

    env = flink_env()
    jvm.add_to(env)
    jvm.add_to(env)
    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    jars = str(util.getEnvironmentConfig(env._j_stream_execution_environment).toMap().get("pipeline.jars"))
    assert jars.count(jvm.lakelog_jar().as_uri()) == 1
