"""The Flink configuration of lakelog's jobs and the one factory of their execution environments.

Every job, benchmark and test builds its ``StreamExecutionEnvironment`` with
:func:`flink_environment`, which reads a Flink configuration directory, the same one Flink's own
scripts use:

1. ``conf_dir=`` (``--conf-dir DIR`` of the jobs), else
2. ``$FLINK_CONF_DIR``, else
3. the repository's ``flink-conf/`` (found next to this package in a source checkout), else nothing.

``config.yaml`` (Flink's nested YAML) or a legacy flat ``flink-conf.yaml`` is flattened to
``key -> string`` settings. Then:

* ``python.executable`` / ``python.client.executable`` default to ``sys.executable`` (the interpreter
  that has lakelog installed); a value in the file wins.
* Local runs (an embedded MiniCluster, the default) drop the cluster-only keys (ports, addresses,
  process memory, JVM options) so that two jobs can run side by side; ``env.java.opts.client``
  starts the embedded JVM.
* Remote runs (``execution.target: remote`` in the file, or ``remote=True`` / ``"host:port"``) keep
  them, submit to the cluster at ``rest.address``:``rest.port`` and ship the ``flink-python`` jar.
* Under ``flink run -py`` the Flink CLI already made a context environment (with its own
  configuration); :func:`execution_environment` keeps it.

This module imports pyflink (it is only imported where a Flink graph is built).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from pyflink.common import Configuration
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.find_flink_home import _find_flink_home
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import get_j_env_configuration

from lakelog.connector.errors import OptionError

__all__ = [
    "flink_environment",
    "find_conf_dir",
    "read_flink_conf",
    "job_settings",
    "load_settings",
    "is_remote",
    "runtime_mode",
    "execution_environment",
    "python_jar",
    "DEFAULT_CHECKPOINT_MS",
]

DEFAULT_CHECKPOINT_MS = 2000  # streaming jobs whose configuration sets no checkpoint interval

CONFIG_FILES = ("config.yaml", "flink-conf.yaml")

# settings that configure a cluster's processes, not a job: a local MiniCluster must not get them
# (a fixed rest.port would stop a second local job from starting)
_CLUSTER_ONLY_PREFIXES = (
    "rest.",
    "jobmanager.rpc.",
    "jobmanager.bind-host",
    "jobmanager.memory.",
    "taskmanager.bind-host",
    "taskmanager.host",
    "taskmanager.rpc.",
    "taskmanager.data.",
    "taskmanager.memory.process.size",
    "taskmanager.memory.flink.size",
    "blob.server.port",
    "env.",
    "high-availability",
    "execution.target",
)


def _repo_conf_dir() -> Optional[str]:
    here = Path(__file__).resolve().parent.parent / "flink-conf"
    return str(here) if any((here / f).is_file() for f in CONFIG_FILES) else None


def find_conf_dir(explicit: Optional[str] = None) -> Optional[str]:
    """The configuration directory to use: ``explicit``, ``$FLINK_CONF_DIR``, the repository's
    ``flink-conf/``, or None."""
    if explicit:
        if not os.path.isdir(explicit):
            raise OptionError(f"Flink configuration directory {explicit} does not exist")
        return explicit
    env = os.environ.get("FLINK_CONF_DIR")
    if env and os.path.isdir(env):
        return env
    return _repo_conf_dir()


def _flatten(node: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(node, Mapping):
        for k, v in node.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
        return
    if node is None:
        return
    if isinstance(node, bool):
        out[prefix] = "true" if node else "false"
    elif isinstance(node, (list, tuple)):
        out[prefix] = ";".join(str(x) for x in node)
    else:
        out[prefix] = str(node)


def read_flink_conf(conf_dir: Optional[str]) -> dict[str, str]:
    """The flattened settings of ``conf_dir``'s ``config.yaml`` (or ``flink-conf.yaml``); {} if none."""
    if not conf_dir:
        return {}
    for name in CONFIG_FILES:
        path = os.path.join(conf_dir, name)
        if os.path.isfile(path):
            break
    else:
        return {}
    from ruamel.yaml import YAML  # a dependency of apache-flink (its own scripts parse config.yaml with it)

    try:
        with open(path, encoding="utf-8") as fh:
            data = YAML(typ="safe").load(fh)
    except Exception as e:
        raise OptionError(f"cannot parse Flink configuration {path}: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise OptionError(f"Flink configuration {path} must be a mapping of keys to values")
    out: dict[str, str] = {}
    _flatten(data, "", out)
    return out


def python_jar() -> Optional[str]:
    """The ``flink-python`` jar of the installed PyFlink (a remote cluster needs it per job)."""
    home = _find_flink_home()
    jars = sorted(glob.glob(os.path.join(home, "opt", "flink-python*.jar")))
    jars = jars or sorted(glob.glob(os.path.join(home, "lib", "flink-python*.jar")))
    return jars[0] if jars else None


def is_remote(settings: Mapping[str, str]) -> bool:
    return settings.get("execution.target", "").strip().lower() == "remote"


def job_settings(conf: Mapping[str, str], *, remote: Union[bool, str, None] = None) -> dict[str, str]:
    """Settings for a job from configuration ``conf`` (see the module docs).

    ``remote``: None follows ``execution.target`` in ``conf``; True submits to ``rest.address``:
    ``rest.port``; a ``"host:port"`` string names the cluster; False forces a local MiniCluster."""
    out = dict(conf)
    out.setdefault("python.executable", sys.executable)
    out.setdefault("python.client.executable", sys.executable)
    if remote is None:
        remote = is_remote(out)
    if not remote:
        return {
            k: v
            for k, v in out.items()
            if not k.startswith(_CLUSTER_ONLY_PREFIXES) or k == "env.java.opts.client"
        }
    if isinstance(remote, str):
        host, sep, port = remote.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError(f"remote cluster {remote!r} must look like 'host:port'")
        out["rest.address"], out["rest.port"] = host, port
    out["execution.target"] = "remote"
    out.setdefault("execution.attached", "true")  # execute() waits for the job, as with a MiniCluster
    out.setdefault("rest.address", "localhost")
    out.setdefault("rest.port", "8081")
    jar = python_jar()
    if jar is not None:
        uri = "file://" + os.path.abspath(jar)
        jars = [j for j in out.get("pipeline.jars", "").split(";") if j]
        if uri not in jars:
            out["pipeline.jars"] = ";".join([*jars, uri])
    return out


def load_settings(conf_dir: Optional[str] = None, *, remote: Union[bool, str, None] = None) -> dict[str, str]:
    """:func:`job_settings` of the configuration found by :func:`find_conf_dir`."""
    return job_settings(read_flink_conf(find_conf_dir(conf_dir)), remote=remote)


def _prepare_client_jvm(settings: Mapping[str, str]) -> None:
    """Before PyFlink launches its JVM (the client, and the MiniCluster of local runs): pass
    ``env.java.opts.client`` of the configuration as ``JVM_ARGS`` (PyFlink's launcher reads JVM
    options only from its own ``FLINK_CONF_DIR``). No effect once the JVM runs or with ``JVM_ARGS`` set."""
    from pyflink import java_gateway

    opts = settings.get("env.java.opts.client", "").strip()
    if opts and java_gateway._gateway is None and "PYFLINK_GATEWAY_PORT" not in os.environ:
        os.environ.setdefault("JVM_ARGS", opts)


def execution_environment(settings: Mapping[str, str]) -> StreamExecutionEnvironment:
    """A PyFlink ``StreamExecutionEnvironment`` for ``settings`` (no runtime mode, parallelism or
    checkpointing of its own: :func:`flink_environment` adds them).

    Local settings give the context environment (a MiniCluster, or the ``flink run`` one); remote
    settings give an environment that submits to the cluster they name, unless ``flink run``
    already set one up."""
    _prepare_client_jvm(settings)
    cfg = Configuration()
    for k, v in settings.items():
        cfg.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(cfg)
    if not is_remote(settings):
        return env
    j_conf = get_j_env_configuration(env._j_stream_execution_environment)
    target = j_conf.getString("execution.target", None)
    if target is not None and str(target).lower() not in ("local", "minicluster"):
        return env  # flink run: the CLI's context environment already targets its cluster
    j_env_class = get_gateway().jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment
    return StreamExecutionEnvironment(j_env_class(cfg._j_configuration))


def runtime_mode(settings: Mapping[str, str], mode: Optional[str] = None) -> str:
    """``"streaming"`` or ``"batch"``: ``mode`` if given, else ``execution.runtime-mode`` of
    ``settings``, else streaming."""
    chosen = (mode or settings.get("execution.runtime-mode") or "streaming").strip().lower()
    if chosen not in ("streaming", "batch"):
        raise OptionError(f"'execution.runtime-mode' must be 'streaming' or 'batch', not {chosen!r}")
    return chosen


def flink_environment(
    *,
    mode: Optional[str] = None,
    parallelism: Optional[int] = None,
    checkpoint_interval_ms: Optional[int] = None,
    config: Optional[Mapping[str, str]] = None,
    conf_dir: Optional[str] = None,
    remote: Union[bool, str, None] = None,
    settings: Optional[Mapping[str, str]] = None,
) -> StreamExecutionEnvironment:
    """The execution environment of a lakelog job, benchmark or test.

    Settings: ``settings`` when given (e.g. kept from an earlier :func:`load_settings`), else the
    configuration directory's (``conf_dir``, ``$FLINK_CONF_DIR`` or the repository's ``flink-conf/``;
    ``remote`` as in :func:`job_settings`); ``config`` overrides single keys on top.
    ``mode``: ``"streaming"`` or ``"batch"`` (default: ``execution.runtime-mode`` of the settings,
    else streaming). ``parallelism``: the job's default parallelism (default: the settings').
    Streaming jobs checkpoint every ``checkpoint_interval_ms``, else at the settings'
    ``execution.checkpointing.interval``, else every :data:`DEFAULT_CHECKPOINT_MS`."""
    merged = dict(settings) if settings is not None else load_settings(conf_dir, remote=remote)
    merged.update(config or {})
    merged.setdefault("python.executable", sys.executable)
    merged.setdefault("python.client.executable", sys.executable)
    chosen = runtime_mode(merged, mode)
    env = execution_environment(merged)
    if chosen == "batch":
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    else:
        env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
        if checkpoint_interval_ms or "execution.checkpointing.interval" not in merged:
            env.enable_checkpointing(checkpoint_interval_ms or DEFAULT_CHECKPOINT_MS)
    if parallelism:
        env.set_parallelism(parallelism)
    return env
