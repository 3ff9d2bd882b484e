"""flink-conf loading and the jobs' use of it (needs PyFlink installed; no JVM starts here)."""

from __future__ import annotations

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
