"""lakelog.jobs.kafka_broker: a real broker (transactions, restart, status/stop from another process)
and its failure modes (busy or bad ports, no Java, downloads that fail or do not match their digest)."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakelog.jobs.kafka_broker import (
    ARTIFACTS,
    Artifact,
    KafkaBroker,
    KafkaBrokerError,
    fetch_jars,
    find_java,
)
from tests.kafka_fixtures import KafkaEndpoint, create_topic, kafka_broker  # noqa: F401

pytestmark = [
    pytest.mark.kafka,
    # kafka-python 3.0.12 loads its protocol schemas through importlib.resources' legacy calls
    pytest.mark.filterwarnings(r"ignore:.*is deprecated. Use files\(\) instead:DeprecationWarning"),
]


def _produce(bootstrap: str, topic: str, transactions: list[tuple[list[bytes], bool]]) -> None:
    """One transactional producer; each (values, commit) is one transaction, committed or aborted."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:8]}")
    try:
        producer.init_transactions()
        for values, commit in transactions:
            producer.begin_transaction()
            for v in values:
                producer.send(topic, v)
            producer.flush()  # in the log before the end: an abort drops records not yet sent
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


def _read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 30.0) -> list[bytes]:
    """Every record of ``topic`` up to its end offsets (the last stable offset for read_committed)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False, group_id=None
    )
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        end = consumer.end_offsets(parts)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in parts):
            assert time.monotonic() < deadline, f"read {len(values)} records, positions short of {end}"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def test_transactions_read_committed_sees_only_committed(kafka_broker: KafkaEndpoint) -> None:  # noqa: F811
    bootstrap = kafka_broker.bootstrap_servers
    topic = create_topic(bootstrap, partitions=2)
    committed = [b"a1", b"a2", b"a3", b"c1"]
    _produce(bootstrap, topic, [([b"a1", b"a2", b"a3"], True), ([b"b1", b"b2"], False), ([b"c1"], True)])
    assert sorted(_read_all(bootstrap, topic, "read_committed")) == committed
    # the aborted records are in the log all the same
    assert sorted(_read_all(bootstrap, topic, "read_uncommitted")) == sorted(committed + [b"b1", b"b2"])


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lakelog.jobs.kafka_broker", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _free_port(avoid: set[int | None]) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in avoid:
            return port


def test_restart_keeps_data_and_other_processes_see_and_stop_it(tmp_path: Path) -> None:
    try:
        find_java()
    except KafkaBrokerError as e:
        pytest.skip(str(e))
    d = tmp_path / "broker"
    broker = KafkaBroker(d)
    try:
        first = broker.start(timeout=180.0)
        assert first.running and first.pid and first.bootstrap_servers == broker.bootstrap_servers
        assert broker.start().pid == first.pid  # already running: the same broker
        bootstrap = broker.bootstrap_servers
        topic = create_topic(bootstrap)
        _produce(bootstrap, topic, [([b"x1", b"x2"], True), ([b"lost"], False)])

        status = _cli("status", "--dir", str(d), "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == first.pid
        assert json.loads(status.stdout)["bootstrap_servers"] == bootstrap

        stop = _cli("stop", "--dir", str(d))
        assert stop.returncode == 0, stop.stderr
        assert not broker.status().running
        assert _cli("status", "--dir", str(d)).returncode == 3
        assert not broker.stop()  # nothing left to stop

        # same directory: no new format, the same broker port; a new controller port is fine
        controller_port = _free_port(avoid={first.port, first.controller_port})
        second = broker.start(controller_port=controller_port, timeout=180.0)
        assert second.pid != first.pid and second.controller_port == controller_port
        assert (second.cluster_id, second.bootstrap_servers) == (first.cluster_id, bootstrap)
        assert sorted(_read_all(bootstrap, topic, "read_committed")) == [b"x1", b"x2"]
    finally:
        broker.stop()
    assert not broker.status().running


def test_busy_or_bad_ports_fail_before_java_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(KafkaBrokerError, match=f"port {port} on 127.0.0.1 is not free"):
            KafkaBroker(tmp_path).start(port=port)
    with pytest.raises(KafkaBrokerError, match="70000 is not a TCP port"):
        KafkaBroker(tmp_path).start(port=70000)
    with pytest.raises(KafkaBrokerError, match="both"):
        KafkaBroker(tmp_path).start(port=port, controller_port=port)
    assert not (tmp_path / "broker.log").exists()


def test_no_java_names_java_home_and_path(tmp_path: Path) -> None:
    for env in ({"PATH": str(tmp_path)}, {"JAVA_HOME": str(tmp_path), "PATH": ""}):
        with pytest.raises(KafkaBrokerError, match="no Java found") as e:
            find_java(env)
        assert "JAVA_HOME" in str(e.value) and "PATH" in str(e.value)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)
    done = _cli("start", "--dir", str(tmp_path / "b"), env=env)
    assert done.returncode == 2 and "no Java found" in done.stderr, done.stderr
    assert _cli("status", "--dir", str(tmp_path / "b"), env=env).returncode == 3


@pytest.fixture()
def jar_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A loopback HTTP server answering GET <path> from a dict (404 otherwise)."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/m2", files
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_verifies_digests_and_names_the_artifact(
    tmp_path: Path, jar_server: tuple[str, dict[str, bytes]]
) -> None:
    url, files = jar_server
    content = b"PK-not-really-a-jar"
    good = Artifact("org.example", "thing", "1.0", hashlib.sha256(content).hexdigest())
    path = "/m2/org/example/thing/1.0/thing-1.0.jar"
    lib = tmp_path / "lib"

    with pytest.raises(KafkaBrokerError, match="org.example:thing:1.0") as e:  # 404
        fetch_jars(lib, artifacts=[good], repository=url, maven_repo=None, attempts=1)
    assert url + path[3:] in str(e.value) and "HTTP Error 404" in str(e.value)

    files[path] = b"tampered"
    with pytest.raises(KafkaBrokerError, match="differs from the pinned"):
        fetch_jars(lib, artifacts=[good], repository=url, maven_repo=None, attempts=2)
    assert list(lib.iterdir()) == []  # no temp file, no unverified jar left behind

    files[path] = content
    fetch_jars(lib, artifacts=[good], repository=url, maven_repo=None)
    assert (lib / "thing-1.0.jar").read_bytes() == content
    del files[path]  # present and verified: no download
    fetch_jars(lib, artifacts=[good], repository=url, maven_repo=None)

    m2 = tmp_path / "m2"
    (m2 / "org/example/thing/1.0").mkdir(parents=True)
    (m2 / "org/example/thing/1.0/thing-1.0.jar").write_bytes(content)
    lib2 = tmp_path / "lib2"
    fetch_jars(lib2, artifacts=[good], repository="http://127.0.0.1:9/none", maven_repo=m2)
    assert (lib2 / "thing-1.0.jar").read_bytes() == content


def test_pinned_artifacts_are_complete_and_well_formed() -> None:
    coords = {(a.group, a.artifact) for a in ARTIFACTS}
    assert len(coords) == len(ARTIFACTS) == 45
    assert ("org.apache.kafka", "kafka_2.13") in coords
    assert ("org.apache.logging.log4j", "log4j-slf4j-impl") in coords  # the slf4j binding
    assert all(len(a.sha256) == 64 and int(a.sha256, 16) >= 0 for a in ARTIFACTS)


def test_a_jvm_that_fails_at_start_reports_its_log(tmp_path: Path) -> None:
    try:
        find_java()
    except KafkaBrokerError as e:
        pytest.skip(str(e))
    with pytest.raises(KafkaBrokerError, match="Invalid maximum heap size") as failed:
        KafkaBroker(tmp_path).start(heap="lots")
    assert "failed (exit 1)" in str(failed.value)
    assert not KafkaBroker(tmp_path).status().running
