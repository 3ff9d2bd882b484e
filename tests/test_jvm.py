"""Building lakelog's Java operators (no Flink job): compiled at first use and cached, a clear
error without a JDK, and an error (never a silent fallback) when javac fails.

A JDK is needed for the build; without one the build test is skipped, unless
``LAKELOG_REQUIRE_JDK=1`` (as .ci/run sets it) makes that a failure."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

from lakelog.operators import jvm  # noqa: E402


def require_jdk() -> None:
    if jvm.javac_path() is None:
        if os.environ.get("LAKELOG_REQUIRE_JDK") == "1":
            pytest.fail("LAKELOG_REQUIRE_JDK=1 but no javac (set JAVA_HOME or put a JDK on the PATH)")
        pytest.skip("no JDK (javac) on this machine")


def test_jar_is_built_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_jdk()
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path))
    jar = jvm.lakelog_jar()
    assert jar.parent.parent == tmp_path and jar.name.startswith("lakelog-flink-")
    with zipfile.ZipFile(jar) as z:
        assert "lakelog/flink/RowBatcher.class" in z.namelist()
    built = jar.stat().st_mtime_ns
    assert jvm.lakelog_jar() == jar and jar.stat().st_mtime_ns == built  # cached, not rebuilt
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no build leftovers


def test_without_a_jdk_the_error_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path))  # no cached jar
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    assert jvm.javac_path() is None
    with pytest.raises(jvm.JdkNotFoundError, match="javac.*java=False"):
        jvm.lakelog_jar()


def test_a_failing_javac_is_an_error_naming_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JDK whose compiler rejects the sources must fail the job's construction, not switch the
    sink to the Python-only path."""
    from lakelog.operators.sink import _java_available

    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    javac = home / "bin" / "javac"
    javac.write_text("#!/bin/sh\necho 'RowBatcher.java:1: error: cannot find symbol' >&2\nexit 1\n")
    javac.chmod(javac.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(jvm.JavaCompileError, match="exit status 1(.|\n)*cannot find symbol"):
        jvm.lakelog_jar()
    with pytest.raises(jvm.JavaCompileError):
        _java_available()
    assert not list((tmp_path / "cache").rglob("*.jar"))
