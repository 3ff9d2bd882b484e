"""A real standalone Flink cluster on loopback (the pip package's start-cluster.sh), jobs submitted with
``flink run -py jobs/sql.py -- -f script.sql`` and with ``lakelog sql -f script.sql --remote``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JAVA_17 = "/usr/lib/jvm/java-17-openjdk-amd64"


@dataclass
class Cluster:
    conf_dir: Path
    checkpoints: Path
    channels: Path
    log_dir: Path
    rest_port: int
    env: dict[str, str]
    flink_bin: Path


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _flink_home() -> Path:
    import pyflink

    return Path(pyflink.__file__).resolve().parent


def _write_conf(conf_dir: Path, rest_port: int, rpc_port: int, checkpoints: Path, channels: Path) -> None:
    from ruamel.yaml import YAML

    shutil.copytree(ROOT / "flink-conf", conf_dir)
    yaml = YAML(typ="safe")
    conf = yaml.load((conf_dir / "config.yaml").read_text())
    conf["rest"] = {"address": "localhost", "bind-address": "localhost", "port": rest_port}
    conf["jobmanager"]["rpc"] = {"address": "localhost", "port": rpc_port}
    conf["jobmanager"]["memory"] = {"process": {"size": "1024m"}}
    conf["taskmanager"]["memory"] = {"process": {"size": "1280m"}}
    conf["taskmanager"]["numberOfTaskSlots"] = 4
    conf["python"]["executable"] = sys.executable
    conf["python"]["client"] = {"executable": sys.executable}
    conf["execution"]["checkpointing"]["interval"] = "1s"
    # a cluster's checkpoint directory, shared by its processes (one machine: a local path)
    conf["execution"]["checkpointing"]["dir"] = checkpoints.as_uri()
    # and the folder of the sinks' commit channels (lakelog's own key)
    conf["lakelog"] = {"commit-channel": {"dir": str(channels)}}
    with open(conf_dir / "config.yaml", "w") as fh:
        yaml.dump(conf, fh)
    (conf_dir / "masters").write_text(f"localhost:{rest_port}\n")


def _overview(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://localhost:{port}/overview", timeout=5) as r:
        return dict(json.loads(r.read()))


def _pids(pid_dir: Path) -> list[int]:
    out = []
    for f in pid_dir.glob("*.pid"):
        out += [int(x) for x in f.read_text().split() if x.isdigit()]
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("cluster")
    conf_dir, log_dir, pid_dir = base / "conf", base / "log", base / "pid"
    checkpoints, channels = base / "checkpoints", base / "channels"
    log_dir.mkdir()
    pid_dir.mkdir()
    rest_port, rpc_port = _free_ports(2)
    _write_conf(conf_dir, rest_port, rpc_port, checkpoints, channels)
    # neither this process's gateway nor the client JVM options it exported for itself
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY") and k != "JVM_ARGS"}
    env.update(
        FLINK_CONF_DIR=str(conf_dir),
        FLINK_LOG_DIR=str(log_dir),
        FLINK_PID_DIR=str(pid_dir),  # never the shared /tmp default: stop-cluster.sh stops what it lists
        FLINK_HOME=str(_flink_home()),
        PYFLINK_CLIENT_EXECUTABLE=sys.executable,
    )
    if os.path.isdir(JAVA_17):
        env["JAVA_HOME"] = JAVA_17
    flink_bin = _flink_home() / "bin"
    c = Cluster(conf_dir, checkpoints, channels, log_dir, rest_port, env, flink_bin)
    try:
        subprocess.run(
            ["bash", str(flink_bin / "start-cluster.sh")],
            env=env,
            check=True,
            timeout=120,
            capture_output=True,
            text=True,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                ov = _overview(rest_port)
                if ov.get("taskmanagers", 0) >= 1 and ov.get("slots-available", 0) >= 2:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                logs = "\n".join(p.name + ":\n" + p.read_text()[-2000:] for p in log_dir.glob("*.log"))
                raise AssertionError(f"the cluster did not come up on port {rest_port}\n{logs}")
            time.sleep(1)
        yield c
    finally:
        subprocess.run(
            ["bash", str(flink_bin / "stop-cluster.sh")], env=env, timeout=120, capture_output=True
        )
        for pid in _pids(pid_dir):  # stop-cluster.sh failed: end exactly the daemons we started
            with contextlib.suppress(OSError):
                if str(conf_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    os.kill(pid, signal.SIGKILL)


def _script(path: Path, warehouse: Path, table: str, rows: int, mode: str) -> None:
    path.write_text(
        f"""
SET 'execution.runtime-mode' = '{mode}';
CREATE CATALOG lk WITH ('type' = 'lakelog', 'warehouse' = '{warehouse}');
CREATE DATABASE IF NOT EXISTS lk.shop;
CREATE TABLE lk.shop.{table} (
  p STRING NOT NULL, id BIGINT NOT NULL, v BIGINT, PRIMARY KEY (p, id) NOT ENFORCED
) PARTITIONED BY (p) WITH ('bucket' = '2');
CREATE TEMPORARY TABLE gen (seq BIGINT) WITH (
  'connector' = 'datagen', 'number-of-rows' = '{rows}', 'rows-per-second' = '{rows}',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '{rows}'
);
INSERT INTO lk.shop.{table} SELECT CONCAT('p', CAST(seq % 3 AS STRING)), seq, seq * 2 FROM gen;
"""
    )


def _check(warehouse: Path, table: str, rows: int) -> None:
    t = lakelog.Catalog(str(warehouse)).get_table(f"shop.{table}")
    got = t.to_arrow().sort_by("id").to_pylist()
    assert len(got) == rows
    assert all(r["v"] == 2 * r["id"] and r["p"] == f"p{r['id'] % 3}" for r in got)
    assert [r["id"] for r in got] == list(range(1, rows + 1))


def _run(cmd: list[str], c: Cluster, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=c.env, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0:
        logs = "\n".join(p.name + ":\n" + p.read_text()[-3000:] for p in c.log_dir.glob("*.log"))
        raise AssertionError(f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}\n{logs}")
    return proc


def test_flink_run_py_streaming_insert(cluster: Cluster, tmp_path: Path) -> None:
    wh, script = tmp_path / "wh", tmp_path / "insert.sql"
    _script(script, wh, "events", 600, "streaming")
    proc = _run(
        [str(cluster.flink_bin / "flink"), "run", "-py", "jobs/sql.py", "--", "-f", str(script)], cluster
    )
    assert "finished" in proc.stdout
    _check(wh, "events", 600)
    jobs = json.loads(urllib.request.urlopen(f"http://localhost:{cluster.rest_port}/jobs/overview").read())
    assert any(j["state"] == "FINISHED" for j in jobs["jobs"])
    # its checkpoints went to the configured directory (Flink keeps the job's emptied folder), its
    # commit channel under the configured folder
    assert {p.name for p in cluster.checkpoints.iterdir()} & {j["jid"] for j in jobs["jobs"]}
    assert [p.name for p in cluster.channels.iterdir() if p.name.startswith("lakelog-sink-")]


def test_a_streaming_job_without_a_checkpoint_dir_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    """A client configuration without ``execution.checkpointing.dir``: lakelog refuses to submit a
    streaming job, by ``flink run`` and by ``--remote`` alike (it cannot know a directory that the
    cluster's processes share, and the JobManager's memory takes at most 5 MB per state handle)."""
    from ruamel.yaml import YAML

    client_conf = tmp_path / "client-conf"
    shutil.copytree(cluster.conf_dir, client_conf)
    yaml = YAML(typ="safe")
    conf = yaml.load((client_conf / "config.yaml").read_text())
    del conf["execution"]["checkpointing"]["dir"]
    with open(client_conf / "config.yaml", "w") as fh:
        yaml.dump(conf, fh)
    wh, script = tmp_path / "wh", tmp_path / "insert.sql"
    _script(script, wh, "refused", 10, "streaming")
    env = {**cluster.env, "FLINK_CONF_DIR": str(client_conf)}
    for cmd in (
        [str(cluster.flink_bin / "flink"), "run", "-py", "jobs/sql.py", "--", "-f", str(script)],
        [sys.executable, "-m", "lakelog.jobs.cli", "sql", "-f", str(script), "--remote"],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=str(ROOT))
        assert proc.returncode != 0, proc.stdout[-2000:]
        assert "needs 'execution.checkpointing.dir'" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert not (wh / "shop.db" / "refused" / "snapshot").exists()


def test_lakelog_sql_remote_batch_insert(cluster: Cluster, tmp_path: Path) -> None:
    wh, script = tmp_path / "wh", tmp_path / "insert.sql"
    _script(script, wh, "batched", 300, "batch")
    before = len(
        json.loads(urllib.request.urlopen(f"http://localhost:{cluster.rest_port}/jobs/overview").read())[
            "jobs"
        ]
    )
    _run([sys.executable, "-m", "lakelog.jobs.cli", "sql", "-f", str(script), "--remote"], cluster)
    _check(wh, "batched", 300)
    after = json.loads(urllib.request.urlopen(f"http://localhost:{cluster.rest_port}/jobs/overview").read())[
        "jobs"
    ]
    assert len(after) > before  # the job ran on the cluster, not on a MiniCluster
