"""A real Kafka broker for users, tests and CI: Kafka 4.4.0, one node in KRaft mode (broker and
controller in one JVM) on 127.0.0.1, run from Maven Central jars. No Docker, no Maven, no pom.xml.

Run::

    python -m lakelog.jobs.kafka_broker fetch                      # the pinned jars into the cache
    python -m lakelog.jobs.kafka_broker start [--dir D] [--port P] # prints the bootstrap servers
    python -m lakelog.jobs.kafka_broker status [--dir D] [--json]  # exit status 0 running, 3 stopped
    python -m lakelog.jobs.kafka_broker stop [--dir D]
    lakelog kafka start|stop|status|fetch ...                      # the same, via the CLI

Jars: :data:`ARTIFACTS` pins ``kafka_2.13`` 4.4.0, its runtime dependency closure and the log4j
binding for slf4j, each with its SHA-256. :func:`fetch_jars` downloads them over HTTPS (plain
``urllib``) into ``$LAKELOG_CACHE_DIR/kafka-4.4.0/lib`` (default ``~/.cache/lakelog``), or copies
them from the local Maven repository (``~/.m2/repository``) when a verified copy is there; each jar
lands through a temp file and a rename, so a half-written jar never carries the final name.

Broker directory (default ``$LAKELOG_CACHE_DIR/kafka-broker``): ``server.properties``,
``log4j2.properties``, ``data/`` (log dirs and the KRaft metadata log, formatted once),
``broker.log`` (the JVM's output; the previous run's is kept as ``broker.log.1``), and
``broker.json``, the state file (ports, cluster id, pid) that lets another process ask for the
status or stop the broker. A restart on the same directory keeps the data and the ports.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

__all__ = [
    "KAFKA_VERSION",
    "ARTIFACTS",
    "Artifact",
    "BrokerStatus",
    "KafkaBroker",
    "KafkaBrokerError",
    "cache_dir",
    "default_broker_dir",
    "fetch_jars",
    "find_java",
    "main",
    "probe",
]

KAFKA_VERSION = "4.4.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
HOST = "127.0.0.1"
STATE_FILE = "broker.json"
LOCAL_MAVEN_REPO = Path("~/.m2/repository")
# The serial GC and the C1 JIT only: on two busy cores the broker is ready in about half the time
# and with some 30 MB less RSS, and a Python client, not the broker, bounds the throughput anyway.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _error_root() -> type[Exception]:
    """lakelog's error root. The one place that names its module (the package layout is moving)."""
    from lakelog.connector.errors import LakelogError

    return LakelogError


class KafkaBrokerError(_error_root()):  # type: ignore[misc]
    """The broker could not be fetched, started, reached or stopped; the message says why."""


@dataclass(frozen=True)
class Artifact:
    """One jar on Maven Central, pinned by version and SHA-256."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def repo_path(self) -> str:
        """The jar's path inside a Maven repository layout."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


def _pins(text: str) -> tuple[Artifact, ...]:
    return tuple(Artifact(*line.split()) for line in text.strip().splitlines())


# ``org.apache.kafka:kafka_2.13:4.4.0`` with its runtime scope, plus ``log4j-slf4j-impl`` (slf4j 1.7
# to log4j 2), resolved once with ``mvn dependency:list -DincludeScope=runtime``; each digest is of a
# jar whose SHA-1 matched the ``.sha1`` file Maven Central publishes beside it.
ARTIFACTS: tuple[Artifact, ...] = _pins(
    """
at.yawk.lz4 lz4-java 1.11.2 8a7458657938e9b692224db83aac458c13abd7a59ab75c3d3b08bd2233a646a2
com.dynatrace.hash4j hash4j 0.22.0 23028a3fd006e530bf495f551083208187cafd8f80624d048eba56442f16a50e
com.fasterxml.jackson.core jackson-annotations 2.21 53ca085f4a150f703f49e1aabd935bd03b43e1ea3d55d135438292af22cef56b
com.fasterxml.jackson.core jackson-core 2.21.7 8c5623b98f32d5f7e1287ff61ed50e08ab7b11381e991fff89327faabba42261
com.fasterxml.jackson.core jackson-databind 2.21.7 1290c2795e93e8a6861a6c4d9ff0d844d32f5ea178362cb2721edf5561e828b1
com.fasterxml.jackson.dataformat jackson-dataformat-yaml 2.21.7 df2b3e6a194181dc067b7211d750926b4ae9e4f3c892a0005b8219a9b59be681
com.fasterxml.jackson.datatype jackson-datatype-jdk8 2.21.7 b8f62f98363ed9aa259b3a479a64fcbe7e081158a8bec6733972e900d12f4e47
com.github.ben-manes.caffeine caffeine 3.2.0 ec411dfdf0c03f25218648ce89861630b71680e5858a9a7278ebac8e55cab3d7
com.github.luben zstd-jni 1.5.7-17 c9043e2da8a16c13b6cd7661a5cb56685a573c3546ef4bd0ead67b0b67c2e107
com.google.re2j re2j 1.8 7b52c72156dd7f98b3237a5b35c1d34fba381b21048c89208913ad80a45dfbd7
com.typesafe.scala-logging scala-logging_2.13 3.9.6 0ad0c3f4d89d538b3b6c300158555e266aa69cf1b5f6522aba8b5bad238eb994
com.yammer.metrics metrics-core 2.2.0 6b7a14a6f34c10f8683f7b5e2f39df0f07b58c7dff0e468ebbc713905c46979c
commons-beanutils commons-beanutils 1.11.0 9e44ba68ec9a3f21286fa2a8bbb003b735c0f69101bb43144b79f4f8aaa74709
commons-collections commons-collections 3.2.2 eeeae917917144a68a741d4c0dff66aa5c5c5fd85593ff217bced3fc8ca783b8
commons-digester commons-digester 2.1 e0b2b980a84fc6533c5ce291f1917b32c507f62bcad64198fff44368c2196a3d
commons-logging commons-logging 1.3.5 6d7a744e4027649fbb50895df9497d109f98c766a637062fe8d2eabbb3140ba4
commons-validator commons-validator 1.10.1 ed74711a78d793ca37f6075e4a1e93d107233dfd20d0bb17e32bad88d38e56aa
net.sf.jopt-simple jopt-simple 5.0.4 df26cc58f235f477db07f753ba5a3ab243ebe5789d9f89ecf68dd62ea9a66c28
net.sourceforge.argparse4j argparse4j 0.7.0 65ceb669d88f63306c680f8088bbf765bbca72d288a61a03703000076c3d3f56
org.apache.kafka kafka-clients 4.4.0 1ab07317eb6633241392449d329dbdc5d9251e6ffc4926860f42dd966e88bdf9
org.apache.kafka kafka-coordinator-common 4.4.0 e380267a17981edbadaa2e2e785f18dc1b5671abf2d1084eb7da06a765c71d0c
org.apache.kafka kafka-group-coordinator-api 4.4.0 bf11d7586c7363ba72a16ac5ef80c65365de9166469f7f6fc4ac5d2e0a98213a
org.apache.kafka kafka-group-coordinator 4.4.0 3fc830ace54f6a13f9f536bc0564bf39a68797365a4c4b194bd7db4fb893b2bc
org.apache.kafka kafka-metadata 4.4.0 6c52de74ecd670332e1e1324f5d40311275ac49b22699b6722e5fb07dd266fcb
org.apache.kafka kafka-raft 4.4.0 687f278ce5d82b7f53644643e21e1a7452530f202826108990f0fe4f3d334d4f
org.apache.kafka kafka-server-common 4.4.0 e50931831a27a2f3eb6cf74e8d63cc325b4e98656f30e94f8829297951ca5080
org.apache.kafka kafka-server 4.4.0 5f5456c2976203525080220212639f7033274b94458ceabf44197f4800bd615c
org.apache.kafka kafka-share-coordinator 4.4.0 6969a7961ca98d37a039bbe0af0fe761d6b0dd07ca9666802f47821167afbb6e
org.apache.kafka kafka-storage-api 4.4.0 edd47a86cdce283fc15d033090417a5dec29642eb807713f2e807e3c46b5ca46
org.apache.kafka kafka-storage 4.4.0 9eaa4dafacc251080ece0efa8511283da5de6931e843457f6af87f02f9b50039
org.apache.kafka kafka-tools-api 4.4.0 348b63a7d22739703ad34613a1154702568d462c3a8adb1dd655482251f4e529
org.apache.kafka kafka-transaction-coordinator 4.4.0 1d5324d59776d6b7f324cfdc87647b1e88f9823332201c0324e7ae9f210d915d
org.apache.kafka kafka_2.13 4.4.0 76d3314f873571677ff98620ab9a431e508e3687f921a3df4f70d692a970475e
org.apache.logging.log4j log4j-api 2.25.5 64777f73ea0b3104c04eb82befbdccc30a425a19e83ad06cb2f93aa303511863
org.apache.logging.log4j log4j-core 2.25.5 050c4f85deb48b055e9c041ac39043fbb79ce477841a11a1eb2969c86c6a0072
org.apache.logging.log4j log4j-slf4j-impl 2.25.5 3d25b926bc6025c47ec010459749c12aa66b9d5537ba1922d67d89a098a66607
org.bitbucket.b_c jose4j 0.9.6 7314af50cde9c99e8eaf43eee617a23edcc6bb43036221064355094999d837ef
org.hdrhistogram HdrHistogram 2.2.2 22d1d4316c4ec13a68b559e98c8256d69071593731da96136640f864fa14fad8
org.jspecify jspecify 1.0.0 1fad6e6be7557781e4d33729d49ae1cdc8fdda6fe477bb0cc68ce351eafdfbab
org.pcollections pcollections 4.0.2 2bbeef5797a241300c4f7513cd546239629ed7deda4fc0c31df90bb95f5f13ef
org.scala-lang scala-library 2.13.18 4e85d96ff7bc7dc627985523c3541b9917aaa08e956391380c42db21a2c4e5a0
org.scala-lang scala-reflect 2.13.18 6935ff1982b2ac93d695f15aa66921be2f602921277afe002f018fd8c7d6e29b
org.slf4j slf4j-api 1.7.36 d3ef575e3e4979678dc01bf1dcce51021493b4d11fb7f1be8ad982877c16a1c0
org.xerial.snappy snappy-java 1.1.10.7 4c766cb3f855415ee734b2392949a0b6f12a60879334a74518deaf6270d32e36
org.yaml snakeyaml 2.5 e6682acf1ace77508ef13649cbf4f8d09d2cf5457bdb61d25ffb6ac0233d78dd
"""  # noqa: E501
)


def cache_dir() -> Path:
    """``$LAKELOG_CACHE_DIR``, else ``~/.cache/lakelog`` (shared with lakelog's compiled Java operators)."""
    return Path(os.environ.get("LAKELOG_CACHE_DIR") or Path.home() / ".cache" / "lakelog")


def default_lib_dir() -> Path:
    return cache_dir() / f"kafka-{KAFKA_VERSION}" / "lib"


def default_broker_dir() -> Path:
    """Where ``start|stop|status`` keep the broker when no ``--dir`` is given."""
    return cache_dir() / "kafka-broker"


# --- jars -----------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _install(dest: Path, sha256: str, write: Callable[[Any], None]) -> Optional[str]:
    """Write ``dest`` through a temp file in its folder; rename it into place only when its digest
    is ``sha256``. Returns None on success, else the digest found (the temp file is removed)."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        got = _sha256(Path(tmp))
        if got != sha256:
            return got
        os.replace(tmp, dest)
        return None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def fetch_jars(
    lib: Optional[Path] = None,
    *,
    artifacts: Iterable[Artifact] = ARTIFACTS,
    repository: str = MAVEN_CENTRAL,
    maven_repo: Optional[Path] = LOCAL_MAVEN_REPO,
    timeout: float = 60.0,
    attempts: int = 3,
    log: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Make ``lib`` (default: :func:`default_lib_dir`) hold every pinned jar, verified; returns ``lib``.

    A jar already in ``lib`` with the pinned SHA-256 is kept; otherwise it is copied from
    ``maven_repo`` (a local Maven repository; None to skip) when a copy there has the pinned digest,
    else downloaded from ``repository``, up to ``attempts`` times. Raises :class:`KafkaBrokerError`
    naming the artifact and its URL when a jar cannot be had or its digest differs."""
    lib = Path(lib) if lib is not None else default_lib_dir()
    lib.mkdir(parents=True, exist_ok=True)
    for a in artifacts:
        dest = lib / a.file_name
        if dest.is_file() and _sha256(dest) == a.sha256:
            continue
        local = maven_repo.expanduser() / a.repo_path if maven_repo is not None else None
        if local is not None and local.is_file():
            with local.open("rb") as src:
                if _install(dest, a.sha256, functools.partial(shutil.copyfileobj, src)) is None:
                    log(f"copied {a.file_name} from {maven_repo}")
                    continue
        url = repository.rstrip("/") + "/" + a.repo_path
        _download(a, url, dest, timeout=timeout, attempts=attempts)
        log(f"fetched {a.file_name} ({dest.stat().st_size / 1e6:.1f} MB)")
    return lib


def _download(a: Artifact, url: str, dest: Path, *, timeout: float, attempts: int) -> None:
    def write(f: Any) -> None:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, f, 1 << 20)

    attempts = max(1, attempts)
    problem = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(min(2.0 ** (attempt - 1), 10.0))
        try:
            got = _install(dest, a.sha256, write)
        except (OSError, http.client.HTTPException) as e:  # URLError, HTTPError, timeouts: OSErrors
            problem = f"{type(e).__name__}: {e}"
            continue
        if got is None:
            return
        problem = f"SHA-256 {got} differs from the pinned {a.sha256}"
    raise KafkaBrokerError(
        f"could not fetch {a.group}:{a.artifact}:{a.version} from {url} "
        f"({attempts} attempts; last: {problem}); check the network or proxy (urllib honours "
        "HTTPS_PROXY), or put the jar into ~/.m2/repository"
    )


# --- Java -----------------------------------------------------------------------------------------


def find_java(environ: Optional[dict[str, str]] = None) -> str:
    """The ``java`` of ``$JAVA_HOME``, else the one on ``$PATH``; Kafka 4 needs Java 17 or newer."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        exe = Path(home) / "bin" / "java"
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    found = shutil.which("java", path=env.get("PATH", ""))
    if found:
        return found
    where = f"JAVA_HOME={home} has no bin/java and " if home else "JAVA_HOME is not set and "
    raise KafkaBrokerError(
        f"no Java found: {where}no java is on the PATH; the Kafka broker needs Java 17 or newer "
        "(set JAVA_HOME to a JDK/JRE, or put its bin/ on the PATH)"
    )


# --- readiness: two requests of Kafka's wire protocol ----------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def _call(sock: socket.socket, api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    """One request with header v1 (non-flexible); returns the response body after its header v0."""
    client = b"lakelog-probe"
    msg = struct.pack(">hhih", api_key, version, correlation, len(client)) + client + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    data = _recv_exact(sock, size)
    if struct.unpack_from(">i", data)[0] != correlation:
        raise ConnectionError("the broker answered another request")
    return data[4:]


def probe(host: str, port: int, timeout: float = 2.0) -> int:
    """How many live brokers the broker at ``host:port`` lists in a Metadata response (0 while it is
    still fenced or starting). Asks ApiVersions first and sends a Metadata version in 4..7 that the
    broker supports. Raises OSError when nothing answers."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        body = _call(sock, 18, 0, 1, b"")  # ApiVersions v0
        error, count = struct.unpack_from(">hi", body)
        if error:
            return 0
        versions = {}
        for i in range(count):
            key, low, high = struct.unpack_from(">hhh", body, 6 + 6 * i)
            versions[key] = (low, high)
        low, high = versions.get(3, (0, -1))
        version = max(low, 4)
        if version > min(high, 7):
            raise ConnectionError(f"the broker supports Metadata v{low}..v{high} only")
        body = _call(sock, 3, version, 2, struct.pack(">ib", -1, 0))  # all topics, no auto-creation
        _throttle_ms, brokers = struct.unpack_from(">ii", body)
        return int(brokers)


# --- the broker -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerStatus:
    """What :meth:`KafkaBroker.status` (and ``start``) report; ``pid`` is None when not running."""

    dir: str
    running: bool
    pid: Optional[int]
    port: Optional[int]
    controller_port: Optional[int]
    cluster_id: Optional[str]
    log: str

    @property
    def bootstrap_servers(self) -> Optional[str]:
        return f"{HOST}:{self.port}" if self.port else None


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on the loopback now (another process may take one before Kafka does)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _check_port(port: int, what: str) -> None:
    if not 0 < port < 65536:
        raise KafkaBrokerError(f"{what} {port} is not a TCP port (1..65535)")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as e:
            raise KafkaBrokerError(f"{what} {port} on {HOST} is not free: {e.strerror}") from None


def _process_state(pid: int) -> Optional[str]:
    """The process's state letter from /proc (``Z`` for a zombie), ``?`` where /proc does not exist,
    None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


_SERVER_PROPERTIES = """\
# Written by lakelog.jobs.kafka_broker at every start; edits are lost.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers={host}:{controller_port}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}
advertised.listeners=PLAINTEXT://{host}:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.network.threads=2
num.io.threads=4
auto.create.topics.enable=false
num.partitions=1
# one node: internal topics with one replica, one partition (fewer files, a faster first use)
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
# the default 128 MiB dedupe buffer lives on the heap: a small heap dies with OutOfMemoryError
log.cleaner.dedupe.buffer.size=8388608
# producers may ask for up to 1 h (Flink's KafkaSink default); the broker aborts a transaction
# whose producer died within about a second of its timeout (the default check is every 10 s)
transaction.max.timeout.ms=3600000
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
"""

# log4j's own shutdown hook would stop logging while Kafka still shuts down; the config dumps
# (some 2,500 lines per start) go too
_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


class KafkaBroker:
    """A single-node KRaft Kafka broker on 127.0.0.1 living in one directory.

    ``KafkaBroker(dir)`` only points at the directory: :meth:`start` launches (or finds running)
    the broker, :meth:`status` and :meth:`stop` work from any process, through the state file.
    """

    def __init__(self, dir: Optional[os.PathLike[str] | str] = None, *, lib: Optional[Path] = None) -> None:
        self.dir = Path(dir) if dir is not None else default_broker_dir()
        self.lib = lib
        self._proc: Optional[subprocess.Popen[bytes]] = None

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state ---------------------------------------------------------------------------------

    @property
    def _state_path(self) -> Path:
        return self.dir / STATE_FILE

    def _read_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self._state_path.read_text()))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise KafkaBrokerError(f"unreadable broker state {self._state_path}: {e}") from None

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self._state_path.with_name(STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self._state_path)

    def _live_pid(self, state: dict[str, Any]) -> Optional[int]:
        """The state's pid if that process is alive and is this directory's broker."""
        pid = state.get("pid")
        if not isinstance(pid, int):
            return None
        if self._proc is not None and self._proc.pid == pid and self._proc.poll() is not None:
            return None  # our own child, now reaped
        st = _process_state(pid)
        if st is None or st == "Z":
            return None
        if st != "?":
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                return None
            if b"kafka.Kafka" not in cmdline or str(self.dir / "server.properties").encode() not in cmdline:
                return None  # the pid was reused by another process
        return pid

    def status(self) -> BrokerStatus:
        """Whether this directory's broker runs, with its pid, ports and cluster id (from the state file)."""
        state = self._read_state()
        pid = self._live_pid(state)
        return BrokerStatus(
            dir=str(self.dir),
            running=pid is not None,
            pid=pid,
            port=state.get("port"),
            controller_port=state.get("controller_port"),
            cluster_id=state.get("cluster_id"),
            log=str(self.dir / "broker.log"),
        )

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>`` of the running broker; KafkaBrokerError when it is not running."""
        st = self.status()
        if not st.running or st.bootstrap_servers is None:
            raise KafkaBrokerError(f"no Kafka broker runs in {self.dir}")
        return st.bootstrap_servers

    # -- start ---------------------------------------------------------------------------------

    def start(
        self,
        dir: Optional[os.PathLike[str] | str] = None,
        port: Optional[int] = None,
        controller_port: Optional[int] = None,
        heap: str = "128m",
        *,
        timeout: float = 90.0,
        java: Optional[str] = None,
        jvm_options: Sequence[str] = JVM_OPTIONS,
        log: Callable[[str], None] = lambda _msg: None,
    ) -> BrokerStatus:
        """Start the broker in ``dir`` (default: the one given at construction) and wait until it
        answers a Metadata request listing itself; returns its status.

        Ports not given are the ones the directory's broker used before, else free ones (a new
        controller port is fine too: the controller updates its endpoint in the KRaft voter set).
        When the directory's broker already runs, returns its status (KafkaBrokerError if ``port``
        differs).
        Storage is formatted only once, so a restart keeps topics, offsets and transactional ids.
        Raises KafkaBrokerError, with the tail of ``broker.log``, if it is not ready within
        ``timeout`` seconds (the broker is then killed)."""
        if dir is not None:
            self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        state = self._read_state()
        running = self.status()
        if running.running:
            if port is not None and port != running.port:
                raise KafkaBrokerError(f"the broker in {self.dir} already runs on port {running.port}")
            return running
        formatted = (self.dir / "data" / "meta.properties").is_file()
        port = port or state.get("port")
        controller_port = controller_port or state.get("controller_port")
        picked = iter(_free_ports(2))
        port = int(port) if port else next(picked)
        controller_port = int(controller_port) if controller_port else next(picked)
        if port == controller_port:
            raise KafkaBrokerError(f"port and controller port are both {port}")
        _check_port(port, "port")
        _check_port(controller_port, "controller port")
        java = java or find_java()
        lib = fetch_jars(self.lib, log=log)

        props = self.dir / "server.properties"
        props.write_text(
            _SERVER_PROPERTIES.format(
                host=HOST, port=port, controller_port=controller_port, data=self.dir / "data"
            )
        )
        log4j = self.dir / "log4j2.properties"
        log4j.write_text(_LOG4J2)
        command = [
            java,
            f"-Xmx{heap}",
            *jvm_options,
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",  # the pinned jars by name: a stray jar in the cache never joins the class path
            os.pathsep.join(str(lib / a.file_name) for a in ARTIFACTS),
        ]
        log_path = self.dir / "broker.log"
        if log_path.exists():
            os.replace(log_path, self.dir / "broker.log.1")
        cluster_id = _formatted_cluster_id(self.dir / "data") if formatted else None
        with log_path.open("ab") as out:
            if not formatted:
                cluster_id = _random_cluster_id()
                fmt = [*command, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
                done = subprocess.run(
                    [*fmt, "--standalone", "--ignore-formatted"], stdout=out, stderr=subprocess.STDOUT
                )
                if done.returncode != 0:
                    raise KafkaBrokerError(
                        f"formatting {self.dir / 'data'} failed (exit {done.returncode}):\n{self._log_tail()}"
                    )
            self._proc = subprocess.Popen(
                [*command, "kafka.Kafka", str(props)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,  # a Ctrl-C of the caller's terminal does not reach it
            )
        started = time.monotonic()
        self._write_state(
            {
                "kafka_version": KAFKA_VERSION,
                "pid": self._proc.pid,
                "port": port,
                "controller_port": controller_port,
                "cluster_id": cluster_id,
                "heap": heap,
                "java": java,
                "started_at": time.time(),
            }
        )
        self._wait_ready(port, started + timeout)
        log(f"Kafka {KAFKA_VERSION} ready in {time.monotonic() - started:.1f} s on {HOST}:{port}")
        return self.status()

    def _wait_ready(self, port: int, deadline: float) -> None:
        assert self._proc is not None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise KafkaBrokerError(
                    f"the Kafka broker in {self.dir} exited with status {code} while starting:\n"
                    f"{self._log_tail()}"
                )
            with contextlib.suppress(OSError):
                if probe(HOST, port) > 0:
                    return
            if time.monotonic() > deadline:
                tail = self._log_tail()
                self.stop(timeout=10.0)
                raise KafkaBrokerError(f"the Kafka broker in {self.dir} was not ready in time:\n{tail}")
            time.sleep(0.2)

    def _log_tail(self, lines: int = 25) -> str:
        """The first error lines of ``broker.log`` (the cause; a failed start logs some hundred
        lines of shutdown after it), then its last ``lines`` lines."""
        try:
            text = (self.dir / "broker.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no broker.log)"
        errors = [ln for ln in text[:-lines] if " ERROR " in ln or "Exception: " in ln or "Error: " in ln]
        shown = [*errors[:5], *(["..."] if errors else []), *text[-lines:]]
        return "\n".join("    " + line for line in shown)

    # -- stop ----------------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop this directory's broker: SIGTERM (a clean shutdown), SIGKILL after ``timeout``
        seconds. Returns whether a broker was running. The data stays for the next start."""
        state = self._read_state()
        pid = self._live_pid(state)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._wait_exit(pid, 10.0)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1.0)
            self._proc = None
        if state.get("pid") is not None:
            state["pid"] = None
            self._write_state(state)
        return pid is not None

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.pid == pid:
                if self._proc.poll() is not None:
                    return True
            elif _process_state(pid) in (None, "Z"):
                return True
            time.sleep(0.05)
        return False


def _formatted_cluster_id(data: Path) -> Optional[str]:
    """The ``cluster.id`` that formatting wrote into ``data/meta.properties``."""
    for line in (data / "meta.properties").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "cluster.id":
            return value.strip()
    return None


def _random_cluster_id() -> str:
    """A cluster id as Kafka's ``StorageTool random-uuid`` makes one (a random UUID, base64url without
    padding), without starting a JVM for it. Kafka rejects ids starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


# --- command line ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lakelog kafka", description=f"A single-node Kafka {KAFKA_VERSION} broker (KRaft) on {HOST}."
    )
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="download the pinned jars into the cache (verified), then exit")
    for name, text in (
        ("start", "start the broker (prints its bootstrap servers)"),
        ("stop", "stop the broker"),
        ("status", "exit status 0 when running, 3 when not"),
    ):
        s = sub.add_parser(name, help=text)
        s.add_argument("--dir", type=Path, default=None, help=f"broker directory ({default_broker_dir()})")
        if name == "start":
            s.add_argument(
                "--port", type=int, default=None, help="listener port (default: the last, or free)"
            )
            s.add_argument("--controller-port", type=int, default=None, help="KRaft controller port")
            s.add_argument("--heap", default="128m", help="JVM -Xmx (default 128m)")
            s.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness")
        if name == "status":
            s.add_argument("--json", action="store_true", help="print the status as JSON")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``lakelog kafka fetch|start|stop|status``; returns the exit status (2 on errors)."""
    args = build_parser().parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        if args.command == "fetch":
            t0 = time.monotonic()
            lib = fetch_jars(log=say)
            say(f"{len(ARTIFACTS)} jars verified in {lib} ({time.monotonic() - t0:.1f} s)")
            return 0
        broker = KafkaBroker(args.dir)
        if args.command == "start":
            st = broker.start(
                port=args.port,
                controller_port=args.controller_port,
                heap=args.heap,
                timeout=args.timeout,
                log=say,
            )
            say(f"broker pid {st.pid} in {st.dir} (log {st.log})")
            print(st.bootstrap_servers, flush=True)
            return 0
        if args.command == "stop":
            say("stopped" if broker.stop() else f"no broker was running in {broker.dir}")
            return 0
        st = broker.status()
        if args.json:
            print(json.dumps({**asdict(st), "bootstrap_servers": st.bootstrap_servers}))
        elif st.running:
            print(f"running: pid {st.pid}, bootstrap servers {st.bootstrap_servers}, dir {st.dir}")
        else:
            print(f"not running (dir {st.dir})")
        return 0 if st.running else 3
    except KafkaBrokerError as e:
        print(f"lakelog kafka: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
