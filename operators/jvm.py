"""lakelog's own Java operators: compiled from the sources under ``operators/java`` at first use.

PyFlink can run Java operators by class name, and a few steps of lakelog's Flink jobs belong on the
JVM: the sink's first stage (:class:`lakelog.flink.RowBatcher`) gathers rows into Arrow batches there,
so rows cross into Python as whole batches rather than one by one. The sources ship with the package;
the jar is built with the JDK's ``javac`` against the jars of the installed PyFlink the first time it
is needed and cached under ``$LAKELOG_CACHE_DIR`` (default ``~/.cache/lakelog``), one jar per source
and PyFlink version. ``add_to(env)`` puts the jar on the job's ``pipeline.jars`` (shipped to a remote
cluster with the job) and on the client JVM's class path.

Without a JDK (:class:`JdkNotFoundError`) the sink falls back to its Python-only path with a warning;
any other failure to build the jar (:class:`JavaCompileError`: javac rejected the sources, the Flink
jars are missing) is an error: a broken build must not pass as a slower job.

This module imports pyflink (the jar is compiled against the installed PyFlink's jars).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Optional

import pyflink
import pyflink.version
from pyflink.java_gateway import get_gateway

from lakelog.connector.errors import LakelogError

__all__ = [
    "JavaBuildError",
    "JdkNotFoundError",
    "JavaCompileError",
    "lakelog_jar",
    "add_to",
    "available",
    "javac_path",
]

_SOURCES = Path(__file__).resolve().parent / "java"


class JavaBuildError(LakelogError):
    """lakelog's Java operators could not be built."""


class JdkNotFoundError(JavaBuildError):
    """No JDK compiler (``javac``) on this machine, and no jar built before."""


class JavaCompileError(JavaBuildError):
    """A JDK is there but the jar could not be built; the message holds javac's output."""


def javac_path() -> Optional[str]:
    """The JDK compiler: ``$JAVA_HOME/bin/javac``, else ``javac`` on the PATH; None without a JDK."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _flink_classpath() -> list[Path]:
    root = Path(pyflink.__file__).resolve().parent
    jars = sorted((root / "lib").glob("*.jar")) + sorted((root / "opt").glob("flink-python*.jar"))
    if not jars:
        raise JavaCompileError(f"no Flink jars under {root}/lib; is apache-flink installed completely?")
    return jars


def _sources() -> list[Path]:
    return sorted(_SOURCES.rglob("*.java"))


def _digest(sources: list[Path]) -> str:
    h = hashlib.sha256(pyflink.version.__version__.encode())
    for src in sources:
        h.update(str(src.relative_to(_SOURCES)).encode() + b"\0" + src.read_bytes())
    return h.hexdigest()[:16]


def _cache_dir() -> Path:
    return Path(os.environ.get("LAKELOG_CACHE_DIR", Path.home() / ".cache" / "lakelog")) / "jars"


def lakelog_jar() -> Path:
    """The jar of lakelog's Java operators, compiled now unless a jar of the same sources exists."""
    sources = _sources()
    jar = _cache_dir() / f"lakelog-flink-{_digest(sources)}.jar"
    if jar.exists():
        return jar
    javac = javac_path()
    if javac is None:
        raise JdkNotFoundError(
            "lakelog's Flink sink compiles a small Java operator at first use and needs a JDK's javac "
            "(set JAVA_HOME or put javac on the PATH), or pass java=False to use the slower "
            "Python-only path"
        )
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [
            javac,
            "--release",
            "11",
            "-nowarn",
            "-cp",
            os.pathsep.join(str(p) for p in _flink_classpath()),
            "-d",
            str(classes),
            *[str(s) for s in sources],
        ]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as exc:
            raise JavaCompileError(f"could not run {javac}: {exc}") from exc
        if res.returncode != 0:
            raise JavaCompileError(
                f"javac failed on lakelog's Java operators ({_SOURCES}), exit status {res.returncode}; "
                f"its output:\n{res.stdout}{res.stderr}"
            )
        built = Path(tmp) / jar.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: lakelog\n\n")
            for cls in sorted(classes.rglob("*.class")):
                z.write(cls, cls.relative_to(classes).as_posix())
        os.replace(built, jar)  # atomic: concurrent builders all end with a complete jar
    return jar


def available() -> bool:
    """Whether lakelog's Java operators can be used: a cached jar, or a JDK to compile it. A JDK
    whose ``javac`` fails raises :class:`JavaCompileError` (never a silent fallback)."""
    try:
        lakelog_jar()
        return True
    except JdkNotFoundError:
        return False


def add_to(env: Any) -> None:
    """Make lakelog's Java operators available to the job of ``env`` (a StreamExecutionEnvironment)."""
    uri = lakelog_jar().as_uri()
    util = get_gateway().jvm.org.apache.flink.python.util.PythonConfigUtil
    conf = util.getEnvironmentConfig(env._j_stream_execution_environment)  # where add_jars writes
    if uri not in str(conf.toMap().get("pipeline.jars") or ""):
        env.add_jars(uri)
