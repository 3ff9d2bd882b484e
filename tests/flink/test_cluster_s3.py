"""A standalone Flink cluster whose processes share nothing but the object store and Flink's own
checkpoints: one JobManager and two TaskManagers, each started on its own (``jobmanager.sh`` /
``taskmanager.sh``) with its own configuration folder, temp dir and working directory, and no
``lakelog.commit-channel.dir`` (the sinks' commit channels live in Flink state, the checkpoints in
the JobManager). Tables live in an ``s3://`` warehouse (a real S3 API server on loopback) whose
names are in the PostgreSQL catalog.

One test, in the order a user would run things: a streaming SQL ``INSERT`` (a rate-limited
sequence into an append table) and a streaming read of that table into a second one run at once;
one TaskManager is killed (SIGKILL) after both tables have committed data; both jobs fail over to
the other TaskManager (which a supervisor restarts if PyFlink takes it down during the failover,
see :class:`Supervisor`). Every row must land exactly once in both tables (append tables keep
duplicates, so a repeat would show). Then the dedicated compaction job compacts the first table
on the cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from tests.flink.test_cluster import JAVA_17, ROOT, _flink_home, _overview  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402
from tests.services import free_port  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.s3, pytest.mark.postgres]

ROWS = 1_320
RATE = 12  # rows per second: the insert runs 110 s (the jobs take 30-60 s to start here)
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


@dataclass
class Node:
    """One Flink process: its configuration folder, logs, temp dir and environment."""

    name: str
    conf_dir: Path
    log_dir: Path
    tmp_dir: Path
    env: dict[str, str]

    def pids(self) -> list[int]:
        """The JVMs started with this node's configuration folder."""
        out = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "java" in cmd and f"{self.conf_dir}" in cmd:
                out.append(int(proc.name))
        return out

    def leftovers(self) -> list[int]:
        """Every process of this node, its JVMs' Python workers included (a killed TaskManager
        orphans them): the ones whose environment names this node's configuration folder."""
        out = []
        mark = f"FLINK_CONF_DIR={self.conf_dir}".encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    out.append(int(proc.name))
            except OSError:
                continue
        return out

    def logs(self, n: int = 3000) -> str:
        return "\n".join(f"{p.name}:\n{p.read_text(errors='replace')[-n:]}" for p in self.log_dir.glob("*.log"))


@dataclass
class Cluster:
    rest_port: int
    jobmanager: Node
    taskmanagers: list[Node]
    client: Node
    flink_bin: Path

    def logs(self) -> str:
        return "\n".join(n.logs() for n in (self.jobmanager, *self.taskmanagers))


def _node(base: Path, name: str, rest_port: int, rpc_port: int) -> Node:
    from ruamel.yaml import YAML

    conf_dir, log_dir, tmp_dir, work = (base / name / d for d in ("conf", "log", "tmp", "work"))
    shutil.copytree(ROOT / "flink-conf", conf_dir)
    for d in (log_dir, tmp_dir, work):
        d.mkdir(parents=True)
    yaml = YAML(typ="safe")
    conf = yaml.load((conf_dir / "config.yaml").read_text())
    conf["rest"] = {"address": "localhost", "bind-address": "localhost", "port": rest_port}
    conf["jobmanager"]["rpc"] = {"address": "localhost", "port": rpc_port}
    conf["jobmanager"]["memory"] = {"process": {"size": "1024m"}}
    conf["taskmanager"]["memory"] = {"process": {"size": "1600m"}}
    conf["taskmanager"]["numberOfTaskSlots"] = 4  # one TaskManager can hold both jobs after a kill
    conf["parallelism"] = {"default": 2}
    conf["taskmanager"]["load-balance"] = {"mode": "slots"}  # spread each job over both TaskManagers
    conf["taskmanager"]["resource-id"] = name  # its id in the REST API
    conf["heartbeat"] = {"interval": 2000, "timeout": 12000}  # a killed TaskManager is noticed fast
    conf["io"] = {"tmp": {"dirs": str(tmp_dir)}}
    conf["process"] = {"taskmanager": {"working-dir": str(work)}, "jobmanager": {"working-dir": str(work)}}
    conf["python"]["executable"] = sys.executable
    conf["python"]["client"] = {"executable": sys.executable}
    ckpt = conf["execution"]["checkpointing"]
    ckpt["interval"] = "1s"
    ckpt["storage"] = "jobmanager"  # nothing shared on disk: checkpoints in the JobManager's memory
    ckpt.pop("dir", None)
    # until the JobManager has declared the killed TaskManager lost, each restart may fail again
    # (its slots still count, or the ResourceManager answers "not enough resources"): back off and
    # keep trying, as a production cluster would, instead of running out of a fixed count of attempts
    conf["restart-strategy"] = {
        "type": "exponential-delay",
        "exponential-delay": {"initial-backoff": "1s", "max-backoff": "10s", "backoff-multiplier": 2.0,
                              "reset-backoff-threshold": "2min", "jitter-factor": 0.1},
    }
    conf.pop("lakelog", None)  # no commit-channel folder: the gate in Flink state
    with open(conf_dir / "config.yaml", "w") as fh:
        yaml.dump(conf, fh)
    (conf_dir / "masters").write_text(f"localhost:{rest_port}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY") and k != "JVM_ARGS"}
    env.update(
        FLINK_CONF_DIR=str(conf_dir),
        FLINK_LOG_DIR=str(log_dir),
        FLINK_PID_DIR=str(base / name),
        FLINK_HOME=str(_flink_home()),
        PYFLINK_CLIENT_EXECUTABLE=sys.executable,
        TMPDIR=str(tmp_dir),
    )
    if os.path.isdir(JAVA_17):
        env["JAVA_HOME"] = JAVA_17
    return Node(name, conf_dir, log_dir, tmp_dir, env)


def _daemon(node: Node, script: str, action: str, flink_bin: Path) -> None:
    subprocess.run(
        ["bash", str(flink_bin / script), action], env=node.env, check=True, timeout=120, capture_output=True,
        cwd=str(node.conf_dir.parent / "work"),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("cluster-s3")
    rest_port, rpc_port = free_port(), free_port()
    flink_bin = _flink_home() / "bin"
    jm = _node(base, "jobmanager", rest_port, rpc_port)
    tms = [_node(base, f"taskmanager-{i}", rest_port, rpc_port) for i in (1, 2)]
    client = _node(base, "client", rest_port, rpc_port)
    c = Cluster(rest_port, jm, tms, client, flink_bin)
    try:
        _daemon(jm, "jobmanager.sh", "start", flink_bin)
        for tm in tms:
            _daemon(tm, "taskmanager.sh", "start", flink_bin)
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                if _overview(rest_port).get("taskmanagers", 0) >= 2:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not come up on port {rest_port}\n{c.logs()}")
            time.sleep(1)
        yield c
    finally:
        for node in (*tms, jm):
            for pid in node.leftovers():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


class Supervisor:
    """Restarts TaskManagers that die on their own, as a cluster manager (Kubernetes, YARN, systemd)
    would; the one the test kills stays dead. PyFlink 2.3 can take the surviving TaskManager down
    during the failover ("Reference count must not be negative", fatal in its Python worker's
    shared resources), after which no TaskManager is left and the jobs wait for slots forever."""

    def __init__(self, c: Cluster) -> None:
        self.cluster = c
        self.killed: set[str] = set()
        self.restarts: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tm-supervisor", daemon=True)

    def __enter__(self) -> Supervisor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=150)

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            for tm in self.cluster.taskmanagers:
                if tm.name in self.killed or tm.pids():
                    continue
                print(f"supervisor: {tm.name} died on its own; restarting it")
                self.restarts.append(tm.name)
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    _daemon(tm, "taskmanager.sh", "start", self.cluster.flink_bin)


def _rest(c: Cluster, path: str, method: str = "GET") -> Any:
    req = urllib.request.Request(f"http://localhost:{c.rest_port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in options.items())


def _submit(c: Cluster, script: Path, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 (the process owns it)
    return subprocess.Popen(
        [str(c.flink_bin / "flink"), "run", "-py", "jobs/sql.py", "--", "-f", str(script)],
        env=c.client.env, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT),
    )


def _running_jobs(c: Cluster) -> list[dict[str, Any]]:
    return [j for j in _rest(c, "/jobs/overview")["jobs"] if j["state"] == "RUNNING"]


def _wait(what: str, cond: Any, timeout_s: float, c: Cluster, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            tails = "\n".join(f"{p}:\n{p.read_text(errors='replace')[-4000:]}" for p in logs if p.exists())
            raise AssertionError(f"timed out waiting for {what}\n{tails}\n{c.logs()}")
        time.sleep(1)


def _job_taskmanagers(c: Cluster, jid: str) -> set[str]:
    """The ids of the TaskManagers that run tasks of job ``jid``."""
    used: set[str] = set()
    for v in _rest(c, f"/jobs/{jid}")["vertices"]:
        for tm in _rest(c, f"/jobs/{jid}/vertices/{v['id']}/taskmanagers")["taskmanagers"]:
            used.add(tm["taskmanager-id"])
    return used


def _victim(c: Cluster) -> Node:
    """The TaskManager to kill: one that runs tasks of every running job (of the first, at least)."""
    running = sorted(_running_jobs(c), key=lambda j: j["start-time"])
    per_job = [_job_taskmanagers(c, j["jid"]) for j in running]
    print("TaskManagers per job:", per_job)
    common = set.intersection(*per_job) if per_job else set()
    pick = sorted(common or per_job[0])[0]
    return next(tm for tm in c.taskmanagers if tm.name == pick)


def _ids(table: Any) -> list[int]:
    return sorted(table.to_arrow().column("id").to_pylist())


def test_insert_streaming_read_and_compaction_survive_a_killed_taskmanager(
    cluster: Cluster, tmp_path: Path, postgres: PostgresServer, s3_server: S3Server
) -> None:
    wh = s3_server.warehouse()
    options = {**s3_server.options(), **postgres.options(database=postgres.create_database())}
    catalog = lakelog.Catalog(wh, options=options)
    catalog.create_database("shop")
    events = catalog.create_table("shop.events", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    copy = catalog.create_table("shop.copy", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    head = f"""
SET 'execution.runtime-mode' = 'streaming';
CREATE CATALOG lk WITH ('type' = 'lakelog', 'warehouse' = '{wh}', {_with(options)});
"""
    insert, read = tmp_path / "insert.sql", tmp_path / "read.sql"
    insert.write_text(
        head
        + f"""
CREATE TEMPORARY TABLE gen (seq BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '{RATE}',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '{ROWS}'
);
INSERT INTO lk.shop.events SELECT seq, seq * 2 FROM gen;
"""
    )
    read.write_text(head + "INSERT INTO lk.shop.copy SELECT id, v FROM lk.shop.events;\n")
    logs = [tmp_path / "insert.log", tmp_path / "read.log"]
    inserting, reading = _submit(cluster, insert, logs[0]), _submit(cluster, read, logs[1])
    supervisor = Supervisor(cluster).__enter__()
    try:
        _wait("both jobs to run", lambda: len(_running_jobs(cluster)) >= 2, 180, cluster, logs)
        # both jobs have tasks on both TaskManagers (evenly spread); kill one once both tables hold data
        _wait(
            "commits into both tables",
            lambda: bool(catalog.get_table("shop.events").snapshots())
            and bool(catalog.get_table("shop.copy").snapshots()),
            180, cluster, logs,
        )
        before = len(_ids(catalog.get_table("shop.events")))
        assert before < ROWS, "the insert ended before the TaskManager was killed; slow the source down"
        victim = _victim(cluster)
        supervisor.killed.add(victim.name)
        pids = victim.pids()
        assert pids, f"no process of {victim.name}"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        # the insert ends by itself (a bounded sequence), after failing over to the other TaskManager
        assert inserting.wait(timeout=600) == 0, logs[0].read_text(errors="replace")[-5000:] + cluster.logs()
        _wait(
            "the streaming read to catch up",
            lambda: len(_ids(catalog.get_table("shop.copy"))) >= ROWS,
            300, cluster, logs,
        )
        time.sleep(3)  # a duplicate committed late would show now
    finally:
        supervisor.__exit__()
        print("TaskManagers the supervisor restarted:", supervisor.restarts)
        for job in _running_jobs(cluster):
            with contextlib.suppress(Exception):
                _rest(cluster, f"/jobs/{job['jid']}?mode=cancel", method="PATCH")
        for proc in (inserting, reading):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=60)
                if proc.poll() is None:
                    proc.kill()
    expected = list(range(1, ROWS + 1))
    events, copy = catalog.get_table("shop.events"), catalog.get_table("shop.copy")
    assert _ids(events) == expected
    assert _ids(copy) == expected
    assert all(r["v"] == 2 * r["id"] for r in copy.to_arrow().to_pylist())
    # the jobs restarted (a task failed over), yet nothing was lost or repeated
    jobs = _rest(cluster, "/jobs/overview")["jobs"]
    restarted = [j for j in jobs if _rest(cluster, f"/jobs/{j['jid']}/exceptions").get("exceptionHistory", {}).get("entries")]
    assert restarted, "no job saw the TaskManager's death"
    # nothing of the jobs went into the client's or a TaskManager's temp dir but Flink's own files
    for node in (cluster.client, *cluster.taskmanagers):
        assert not [p.name for p in node.tmp_dir.rglob("lakelog-sink-*")], node.name

    # the dedicated compaction job, on the cluster (batch), from the same catalog options
    opts = [a for k, v in options.items() for a in ("--option", f"{k}={v}")]
    proc = subprocess.run(
        [str(cluster.flink_bin / "flink"), "run", "-py", "jobs/compact.py", "--",
         "--warehouse", wh, *opts, "--table", "shop.events", "--full"],
        env=cluster.client.env, capture_output=True, text=True, timeout=600, cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:] + cluster.logs()
    events = catalog.get_table("shop.events")
    assert events.snapshots()[-1].commit_kind == "COMPACT"
    assert _ids(events) == expected
    done = [j for j in _rest(cluster, "/jobs/overview")["jobs"] if j["name"].startswith("lakelog-compact")]
    assert done and done[-1]["state"] == "FINISHED"
