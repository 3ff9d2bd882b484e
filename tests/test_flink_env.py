"""flink-conf loading and the jobs' use of it (needs PyFlink installed; no JVM starts here)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("pyflink")

from lakelog.connector.errors import OptionError  # noqa: E402
from lakelog.jobs.sql import main as sql_main  # noqa: E402
from lakelog.operators import flink_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_repository_conf_is_found_and_flattened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    conf_dir = flink_env.find_conf_dir()
    assert conf_dir is not None and Path(conf_dir) == ROOT / "flink-conf"
    conf = flink_env.read_flink_conf(conf_dir)
    assert conf["execution.checkpointing.interval"] == "2s"
    assert conf["state.backend.type"] == "hashmap"
    # checkpoints on a filesystem (issue 14); no directory, so each local run gets its own
    assert conf["execution.checkpointing.storage"] == "filesystem"
    assert not any(k.endswith("checkpoints.dir") or k == flink_env.CHECKPOINT_DIR_KEY for k in conf)
    assert flink_env.CHANNEL_DIR_KEY not in conf  # commit channels in the temp dir by default
    assert conf["execution.runtime-mode"] == "STREAMING"
    assert conf["env.java.opts.all"].startswith("--add-exports=") and "\n" not in conf["env.java.opts.all"]


def test_local_and_remote_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "config.yaml").write_text(
        "rest:\n  port: 9999\n  address: flinkhost\nparallelism:\n  default: 3\n"
        "pipeline:\n  jars: [file:///a.jar]\npython:\n  executable: /opt/py/bin/python\n"
    )
    monkeypatch.setenv("FLINK_CONF_DIR", str(conf_dir))
    local = flink_env.load_settings()
    assert local["parallelism.default"] == "3"
    assert "rest.port" not in local and "rest.address" not in local  # two local jobs must not collide
    assert local["python.executable"] == "/opt/py/bin/python"  # the file wins over sys.executable
    assert local["python.client.executable"] == sys.executable
    assert not flink_env.is_remote(local)

    remote = flink_env.load_settings(remote=True)
    assert flink_env.is_remote(remote)
    assert (remote["rest.address"], remote["rest.port"]) == ("flinkhost", "9999")
    jars = remote["pipeline.jars"].split(";")
    assert jars[0] == "file:///a.jar" and "flink-python" in jars[-1]
    assert remote["execution.attached"] == "true"
    named = flink_env.load_settings(str(conf_dir), remote="otherhost:8082")
    assert (named["rest.address"], named["rest.port"]) == ("otherhost", "8082")
    with pytest.raises(OptionError, match="host:port"):
        flink_env.load_settings(remote="nohost")

    (conf_dir / "config.yaml").write_text("execution:\n  target: remote\n")
    assert flink_env.is_remote(flink_env.load_settings())
    assert not flink_env.is_remote(flink_env.load_settings(remote=False))

    with pytest.raises(OptionError, match="does not exist"):
        flink_env.find_conf_dir(str(tmp_path / "missing"))


def test_sql_cli_rejects_detached_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "x.sql"
    script.write_text("SELECT 1;")
    # a leading "--" (as `flink run -py jobs/sql.py -- -f x.sql` may pass it) is accepted
    assert sql_main(["--", "-f", str(script), "--detached", "--conf-dir", str(ROOT / "flink-conf")]) == 2
    assert "--detached needs a remote cluster" in capsys.readouterr().err


def test_checkpoint_dir_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKELOG_CACHE_DIR", str(tmp_path / "cache"))
    first = flink_env.checkpoint_dir({}, local=True)
    assert first is not None and first.startswith("file://")
    folder = Path(first[len("file://") :])
    assert folder.is_dir() and folder.parent == tmp_path / "cache" / "checkpoints"
    host, pid, _token = folder.name.rsplit("-", 2)
    assert int(pid) == os.getpid() and host
    # one folder per process (and cache root), however many jobs it builds
    assert flink_env.checkpoint_dir({"execution.checkpointing.storage": "filesystem"}, local=True) == first
    # a directory in the configuration is used as it is, under its 2.3 name or a deprecated one
    for key in ("execution.checkpointing.dir", "state.checkpoints.dir", "state.backend.fs.checkpointdir"):
        assert flink_env.checkpoint_dir({key: "file:///elsewhere"}, local=True) is None
        assert flink_env.checkpoint_dir({key: "hdfs:///ck"}, local=False) is None
    # the JobManager's memory, when asked for by name
    assert flink_env.checkpoint_dir({"execution.checkpointing.storage": "jobmanager"}, local=False) is None
    assert flink_env.checkpoint_dir({"state.checkpoint-storage": "JobManager"}, local=True) is None
    # a cluster job without a directory: refused, naming the key (lakelog cannot know a shared path)
    with pytest.raises(OptionError, match="execution.checkpointing.dir.*JobManager and every TaskManager"):
        flink_env.checkpoint_dir({"execution.checkpointing.storage": "filesystem"}, local=False)
    with pytest.raises(OptionError, match="execution.checkpointing.dir"):
        flink_env.checkpoint_dir({}, local=False)


def test_checkpoint_folders_of_dead_processes_are_pruned(tmp_path: Path) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    host = flink_env._host()
    root = tmp_path / "checkpoints"
    dead = root / f"{host}-{ended.pid}-0a1b2c3d"
    keep = [
        root / f"{host}-{os.getpid()}-0a1b2c3d",  # this process
        root / f"{host}-{os.getppid()}-0a1b2c3d",  # a running one
        root / f"other-host-{ended.pid}-0a1b2c3d",  # another machine's (a shared home directory)
        root / "notes",
    ]
    for d in [dead, *keep]:
        (d / "0123abcd" / "chk-3").mkdir(parents=True)
    assert flink_env.prune_checkpoint_dirs(root) == [dead]
    assert not dead.exists() and all(d.is_dir() for d in keep)
    assert flink_env.prune_checkpoint_dirs(tmp_path / "missing") == []


@pytest.mark.e2e
def test_a_process_removes_its_checkpoint_folder_when_it_exits(tmp_path: Path) -> None:
    env = {**os.environ, "LAKELOG_CACHE_DIR": str(tmp_path / "cache")}
    code = "from lakelog.operators.flink_env import local_checkpoint_dir as d; print(d())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip()[len("file://") :])
    assert folder.parent == tmp_path / "cache" / "checkpoints"
    assert (tmp_path / "cache" / "checkpoints").is_dir() and not folder.exists()


def test_channel_root() -> None:
    key = flink_env.CHANNEL_DIR_KEY
    assert key == "lakelog.commit-channel.dir"
    assert flink_env.channel_root({}) == flink_env.channel_root({key: " "}) == tempfile.gettempdir()
    assert flink_env.channel_root({key: "/shared/channels"}) == "/shared/channels"
    assert flink_env.channel_root({key: "file:///shared/channels"}) == "/shared/channels"
    with pytest.raises(OptionError, match="absolute path"):
        flink_env.channel_root({key: "channels"})


def test_pyflinks_own_conf_dir_does_not_replace_flink_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyFlink exports FLINK_CONF_DIR=<pyflink>/conf into a process that ran a local job (and so into
    every process it starts): that is Flink's defaults, not the user's choice, and must not replace
    flink-conf/ (a child job then ran with 1 s Python bundles, and its Kafka log lagged seconds)."""
    import pyflink

    bundled = Path(pyflink.__file__).resolve().parent / "conf"
    assert bundled.is_dir()
    monkeypatch.setenv("FLINK_CONF_DIR", str(bundled))
    assert Path(flink_env.find_conf_dir() or "") == ROOT / "flink-conf"
    assert flink_env.load_settings()["python.fn-execution.bundle.time"] == "200"
    # a user's own directory (here a symlink to one) is still honoured, as is an explicit one
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("parallelism:\n  default: 3\n")
    link = tmp_path / "link"
    link.symlink_to(mine)
    monkeypatch.setenv("FLINK_CONF_DIR", str(link))
    assert flink_env.find_conf_dir() == str(link)
    assert flink_env.find_conf_dir(str(bundled)) == str(bundled)
