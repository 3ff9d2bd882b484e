"""The Flink configuration of lakelog's jobs and the one factory of their execution environments.

Every job, benchmark and test builds its ``StreamExecutionEnvironment`` with
:func:`flink_environment`, which reads a Flink configuration directory, the same one Flink's own
scripts use:

1. ``conf_dir=`` (``--conf-dir DIR`` of the jobs), else
2. ``$FLINK_CONF_DIR``, unless it names PyFlink's own bundled ``conf/`` (see below), else
3. the repository's ``flink-conf/`` (found next to this package in a source checkout), else nothing.

PyFlink itself sets ``FLINK_CONF_DIR`` to its bundled ``pyflink/conf`` (Flink's plain defaults):
its gateway launcher does so in the JVM's environment, and once a local job has run Python workers,
its loopback worker pool copies that environment into this process's ``os.environ``. Honouring that
value would silently swap ``flink-conf/`` for Flink's defaults in every later job of the process and
in every process it starts (a child job then ran with 1 s Python bundles instead of 200 ms and a
Kafka log's changes arrived seconds late). So that one directory is never taken as the user's choice.

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
* Streaming jobs keep their checkpoints on a filesystem, never in the JobManager's memory (which
  refuses any state handle over 5 MB: a fast source's state alone can be larger, issue 14). The
  directory is ``execution.checkpointing.dir`` of the configuration; without one, a local run uses a
  folder of its own process, ``$LAKELOG_CACHE_DIR/checkpoints/<host>-<pid>-<token>`` (default
  ``~/.cache/lakelog/checkpoints/...``), removed when the process exits (folders of processes on this
  machine that died without exiting are removed by the next local run), and a job for a cluster is
  refused (:class:`OptionError`): only the user knows a path that the JobManager and every TaskManager
  share. ``execution.checkpointing.storage: jobmanager`` without a directory is respected as asked.
  See :func:`checkpoint_dir`.

This module imports pyflink (it is only imported where a Flink graph is built).
"""

from __future__ import annotations

import atexit
import glob
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

import pyflink
from pyflink.common import Configuration
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.find_flink_home import _find_flink_home
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import get_j_env_configuration

from lakelog.connector.errors import OptionError

__all__ = [
    "flink_environment",
    "stop_idle_flushers",
    "find_conf_dir",
    "read_flink_conf",
    "job_settings",
    "load_settings",
    "is_remote",
    "runtime_mode",
    "execution_environment",
    "python_jar",
    "checkpoint_dir",
    "checkpoint_root",
    "local_checkpoint_dir",
    "prune_checkpoint_dirs",
    "channel_root",
    "env_channel_root",
    "env_channel_setting",
    "DEFAULT_CHECKPOINT_MS",
    "CHECKPOINT_DIR_KEY",
    "CHANNEL_DIR_KEY",
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


# Flink 2.3's checkpoint location keys; the deprecated names (still honoured by Flink) count as well
CHECKPOINT_DIR_KEY = "execution.checkpointing.dir"
_CHECKPOINT_DIR_KEYS = (CHECKPOINT_DIR_KEY, "state.checkpoints.dir", "state.backend.fs.checkpointdir")
_CHECKPOINT_STORAGE_KEYS = ("execution.checkpointing.storage", "state.checkpoint-storage")
_LOCAL_TARGETS = ("local", "minicluster")

# lakelog's own key: the folder under which sinks and compaction jobs make their commit channels
CHANNEL_DIR_KEY = "lakelog.commit-channel.dir"

# this process's local checkpoint folder per checkpoint root: {(pid, root): folder}
_local_checkpoint_dirs: dict[tuple[int, Path], Path] = {}


def stop_idle_flushers() -> int:
    """Stop the flush timers that PyFlink's in-process Python workers left behind; the number stopped.

    Local jobs run their Python workers in this process (PyFlink's loopback mode). Each output
    stream of a worker starts a thread that wakes every second to ask for a flush
    (``PeriodicThread`` in ``pyflink.fn_execution.utils.operation_utils``), and nothing stops it
    when the job ends: about 30 threads per job, each waking for the GIL once a second, so a long
    ``lakelog sql`` session or notebook slows down job after job. A stream still in use is held by
    its worker's operation; an ended job's stream is held only by its own timer's bound method, so
    its reference count (as ``sys.getrefcount`` sees it) is 2. Only those timers are stopped (a
    timer caught in the middle of a call looks alive and is left for the next sweep), so jobs
    still running in this process keep theirs. Not called automatically yet: a fresh-clone CI run
    with a sweep before every SQL statement hung in a job whose Python worker waited on Flink's
    state channel, and the cause is not understood; call it between jobs.
    """
    utils = sys.modules.get("pyflink.fn_execution.utils.operation_utils")
    if utils is None:  # no Python worker ran in this process
        return 0
    periodic = getattr(utils, "PeriodicThread", None)
    if periodic is None:
        return 0
    # no gc.collect() here: it costs seconds in a process that ran many jobs, and runs before every
    # statement; a stream that only a reference cycle still holds is swept once Python collects it
    stopped = 0
    for thread in threading.enumerate():
        if not isinstance(thread, periodic):
            continue
        owner = getattr(getattr(thread, "_function", None), "__self__", None)
        if owner is not None and sys.getrefcount(owner) <= 3:  # the bound method, owner, the argument
            thread.cancel()
            stopped += 1
    return stopped


# the planner's metadata ThreadLocal and the provider to put in it, per JVM (by gateway)
_planner_thread_providers: dict[int, tuple[Any, Any]] = {}


def pin_planner_thread(t_env: Any) -> None:
    """Make the Java thread that serves this Python thread's next Py4J call ready to plan SQL.

    Flink's planner keeps a metadata provider in a ThreadLocal (Calcite's
    ``RelMetadataQueryBase.THREAD_PROVIDERS``) that only the thread creating the table environment
    gets. PyFlink's Py4J client serves each call on a pooled connection, one Java thread each, and
    opens another connection when a call comes while one is in flight (another Python thread's, a
    callback's): from then on a statement may be planned on a thread without the provider and fail
    with ``NullPointerException: metadataHandlerProvider``. Flink's SQL gateway sets the
    ThreadLocal before each operation for the same reason; this does the same, on the connection
    that the next call of this Python thread takes (the pool hands back the connection used last).
    """
    gateway = get_gateway()
    cached = _planner_thread_providers.get(id(gateway))
    if cached is None:
        jvm = gateway.jvm
        loader = t_env._j_tenv.getPlanner().getClass().getClassLoader()

        def cls(name: str) -> Any:
            return jvm.java.lang.Class.forName(name, True, loader)

        query_base = cls("org.apache.calcite.rel.metadata.RelMetadataQueryBase")
        local = query_base.getField("THREAD_PROVIDERS").get(None)
        flink = cls("org.apache.flink.table.planner.plan.metadata.FlinkDefaultRelMetadataProvider")
        instance = flink.getMethod("INSTANCE", None).invoke(None, None)
        janino = cls("org.apache.calcite.rel.metadata.JaninoRelMetadataProvider")
        types = gateway.new_array(jvm.java.lang.Class, 1)
        types[0] = cls("org.apache.calcite.rel.metadata.RelMetadataProvider")
        args = gateway.new_array(jvm.java.lang.Object, 1)
        args[0] = instance
        cached = (local, janino.getMethod("of", types).invoke(None, args))
        _planner_thread_providers[id(gateway)] = cached
    local, provider = cached
    local.set(provider)


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
    if env and os.path.isdir(env) and not _is_pyflink_conf_dir(env):
        return env
    return _repo_conf_dir()


def _is_pyflink_conf_dir(path: str) -> bool:
    """Whether ``path`` is the ``conf/`` bundled in the installed PyFlink package, which PyFlink
    exports as ``FLINK_CONF_DIR`` on its own (see the module docstring)."""
    bundled = Path(pyflink.__file__).resolve().parent / "conf"
    return Path(path).resolve() == bundled


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
    if target is not None and str(target).lower() not in _LOCAL_TARGETS:
        return env  # flink run: the CLI's context environment already targets its cluster
    j_env_class = get_gateway().jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment
    return StreamExecutionEnvironment(j_env_class(cfg._j_configuration))


def checkpoint_root() -> Path:
    """Where local runs keep their checkpoints: ``$LAKELOG_CACHE_DIR/checkpoints``, default
    ``~/.cache/lakelog/checkpoints`` (next to the jars of :mod:`lakelog.operators.jvm`)."""
    return Path(os.environ.get("LAKELOG_CACHE_DIR", Path.home() / ".cache" / "lakelog")) / "checkpoints"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "localhost"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def prune_checkpoint_dirs(root: Optional[Path] = None) -> list[Path]:
    """Remove the checkpoint folders under ``root`` (default :func:`checkpoint_root`) of local runs
    on this machine whose process has ended without its exit handler (killed, or crashed). Folders
    of other machines (a shared home directory) and of running processes are left alone. Returns
    the folders removed."""
    root = checkpoint_root() if root is None else root
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    host, removed = _host(), []
    for entry in entries:
        parts = entry.name.rsplit("-", 2)
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit() or not entry.is_dir():
            continue
        if int(parts[1]) != os.getpid() and not _process_alive(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _remove_own_folder(pid: int, folder: Path) -> None:
    if os.getpid() == pid:  # not in a forked child, which inherits the exit handlers
        shutil.rmtree(folder, ignore_errors=True)


def local_checkpoint_dir() -> str:
    """This process's checkpoint folder for local runs (a ``file://`` URI), made on first use:
    ``<checkpoint_root()>/<host>-<pid>-<token>``, removed when the process exits. Flink deletes a
    job's checkpoints when the job ends; the folder goes with the process, which the MiniCluster
    (and any job that could restore them) does not outlive. Making it first removes the folders
    that dead processes of this machine left (:func:`prune_checkpoint_dirs`)."""
    root = checkpoint_root()
    key = (os.getpid(), root)
    folder = _local_checkpoint_dirs.get(key)
    if folder is None:
        prune_checkpoint_dirs(root)
        folder = root / f"{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        atexit.register(_remove_own_folder, os.getpid(), folder)
        _local_checkpoint_dirs[key] = folder
    else:
        folder.mkdir(parents=True, exist_ok=True)
    return folder.as_uri()


def checkpoint_dir(settings: Mapping[str, str], *, local: bool) -> Optional[str]:
    """The checkpoint directory to add to a streaming job whose effective Flink settings are
    ``settings``, or None when they already say where checkpoints go.

    - ``execution.checkpointing.dir`` (or a deprecated name of it) is set: None, it is used as is.
    - ``execution.checkpointing.storage: jobmanager`` without a directory: None, as asked (every
      state handle of the job must then stay under 5 MB).
    - Otherwise a local run (``local``: an embedded MiniCluster) gets :func:`local_checkpoint_dir`,
      and a job for a cluster raises :class:`OptionError`: its checkpoints need a directory that the
      JobManager and every TaskManager reach under the same name, which only the user knows."""
    if any(settings.get(k, "").strip() for k in _CHECKPOINT_DIR_KEYS):
        return None
    storage = next((settings[k] for k in _CHECKPOINT_STORAGE_KEYS if settings.get(k, "").strip()), "")
    if storage.strip().lower() == "jobmanager":
        return None
    if local:
        return local_checkpoint_dir()
    raise OptionError(
        f"a streaming job for a Flink cluster needs '{CHECKPOINT_DIR_KEY}': a directory that the "
        "JobManager and every TaskManager reach under the same name (a local path for a cluster on one "
        "machine; NFS, HDFS or S3 for several), e.g. file:///shared/flink-checkpoints. Set it in the "
        "config.yaml of the Flink configuration directory, or set 'execution.checkpointing.storage: "
        "jobmanager' to keep checkpoints in the JobManager's memory (at most 5 MB per state handle)"
    )


def _use_durable_checkpoints(env: StreamExecutionEnvironment) -> None:
    """Apply :func:`checkpoint_dir` to the environment's effective configuration (under ``flink run``
    the CLI's, which may differ from the settings lakelog read)."""
    j_conf = get_j_env_configuration(env._j_stream_execution_environment)
    keys = (*_CHECKPOINT_DIR_KEYS, *_CHECKPOINT_STORAGE_KEYS)
    seen = {k: str(v) for k in keys if (v := j_conf.getString(k, None)) is not None}
    target = j_conf.getString("execution.target", None)
    local = target is None or str(target).lower() in _LOCAL_TARGETS
    folder = checkpoint_dir(seen, local=local)
    if folder is not None:
        j_conf.setString(CHECKPOINT_DIR_KEY, folder)


def channel_root(settings: Mapping[str, str]) -> str:
    """The folder under which a sink or compaction job given no ``channel_dir`` makes its commit
    channel folder: ``lakelog.commit-channel.dir`` of ``settings`` (a path, or a ``file://`` URI),
    else the system temp directory. The committer reads the channel with plain file calls, so on a
    cluster of several machines it must be a mounted filesystem shared by every TaskManager, at
    the same path on all (see "Limits and gaps" in ``operators/README.md``)."""
    value = settings.get(CHANNEL_DIR_KEY, "").strip()
    if value.startswith("file://"):
        value = value[len("file://") :]
    if value and not os.path.isabs(value):
        raise OptionError(f"'{CHANNEL_DIR_KEY}' must be an absolute path, not {value!r}")
    return value or tempfile.gettempdir()


def env_channel_root(env: StreamExecutionEnvironment) -> str:
    """:func:`channel_root` of ``env``'s effective configuration."""
    value = env_channel_setting(env)
    return channel_root({} if value is None else {CHANNEL_DIR_KEY: value})


def env_channel_setting(env: StreamExecutionEnvironment) -> Optional[str]:
    """``lakelog.commit-channel.dir`` of ``env``'s effective configuration, or None when unset."""
    value = get_j_env_configuration(env._j_stream_execution_environment).getString(CHANNEL_DIR_KEY, None)
    return None if value is None or not str(value).strip() else str(value)


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
    ``execution.checkpointing.interval``, else every :data:`DEFAULT_CHECKPOINT_MS`, into the
    directory that :func:`checkpoint_dir` picks (a streaming job for a cluster without
    ``execution.checkpointing.dir`` raises :class:`OptionError`)."""
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
        _use_durable_checkpoints(env)
    if parallelism:
        env.set_parallelism(parallelism)
    return env
