"""Kafka clients for the log: configuration from the table's options, topics, offsets.

The clients are confluent-kafka's (librdkafka: about ten times kafka-python's rate in Python),
imported lazily so that tables without a log never load them. Every ``kafka.<key>`` table option is
passed to the clients with the prefix removed (librdkafka's names, which for the usual keys are
Kafka's: ``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``transaction.timeout.ms``...).
Errors name the table, the topic and the bootstrap servers.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from lakelog.connector.errors import LogSystemError, OptionError
from lakelog.connector.format.options import CoreOptions, LogChangelogMode, LogConsistency

if TYPE_CHECKING:  # pragma: no cover
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

__all__ = [
    "LogConfig",
    "kafka_module",
    "default_topic",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "retrying",
    "Deliveries",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long a dead writer's open transaction can hold back ``read_committed`` readers: the broker
#: aborts a transaction older than this. Transactions live from a commit's first produced record
#: to its snapshot's publication (well under a second normally), so this is only a ceiling.
DEFAULT_TRANSACTION_TIMEOUT_MS = 15_000
#: How long a client waits for the broker before giving up with a clear error.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
#: How long ``create_table`` waits for a reachable broker to create a log's topic (Kafka's own
#: ``request.timeout.ms`` default): on a loaded machine that takes seconds, an answer to a
#: metadata request does not.
TOPIC_CREATE_TIMEOUT_S = 30.0


def kafka_module() -> Any:
    """``confluent_kafka``, or a clear error when the ``kafka`` extra is not installed."""
    try:
        import confluent_kafka
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise LogSystemError(
            "tables with 'log.system' = 'kafka' need the confluent-kafka package: "
            "pip install 'lakelog[kafka]'"
        ) from e
    return confluent_kafka


def retrying(call: Callable[[], T], what: str, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> T:
    """``call()``, repeated while Kafka answers with a retriable error (a coordinator still loading,
    a leader moving), for at most ``timeout`` seconds; then :class:`LogSystemError` naming ``what``."""
    ck = kafka_module()
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return call()
        except ck.KafkaException as e:
            err = e.args[0] if e.args else None
            retriable = (
                err is not None
                and hasattr(err, "retriable")
                and (err.retriable() or err.code() in _TRANSIENT_CODES(ck))
            )
            if not retriable or time.monotonic() + delay > deadline:
                raise LogSystemError(f"{what}: {e}") from e
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _TRANSIENT_CODES(ck: Any) -> tuple[int, ...]:  # noqa: N802 - a constant built lazily
    E = ck.KafkaError  # noqa: N806
    return (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E._TIMED_OUT)


def default_topic(identifier: str) -> str:
    """A topic name for table ``db.table``: ``lakelog_<db>_<table>_<8 hex>`` (the suffix keeps a
    table dropped and created again from reading its predecessor's log)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", identifier.replace(".", "_"))
    return f"lakelog_{safe}_{uuid.uuid4().hex[:8]}"


def _upsert(mode: LogChangelogMode, primary_key: bool) -> bool:
    """``log.changelog-mode``: ``auto`` is upsert for primary-key tables and all for the others."""
    if mode == LogChangelogMode.AUTO:
        return primary_key
    return mode == LogChangelogMode.UPSERT


_PRODUCER_ONLY = frozenset(
    {
        "linger.ms",
        "batch.size",
        "acks",
        "enable.idempotence",
        "compression.type",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "retries",
    }
)


def _quiet_logger() -> logging.Logger:
    return logging.getLogger("lakelog.kafka.client")


@dataclass(frozen=True)
class LogConfig:
    """What the clients of one table's log need: servers, topic, mode and pass-through properties."""

    table: str
    bootstrap_servers: str
    topic: str
    transactional: bool
    properties: Mapping[str, str]
    partitions: int
    replication: int
    retention_ms: Optional[int]
    primary_keys: tuple[str, ...] = ()
    upsert: bool = False  # log.changelog-mode: upsert leaves -U out
    ignore_delete: bool = False

    @staticmethod
    def of(options: CoreOptions, table: str, buckets: int, primary_keys: Sequence[str] = ()) -> LogConfig:
        props = options.kafka_options()
        servers = props.pop("bootstrap.servers", None)
        if not servers:
            raise OptionError(f"table {table} has 'log.system' = 'kafka' but no 'kafka.bootstrap.servers'")
        topic = props.pop("topic", None)
        if not topic:
            raise OptionError(f"table {table} has 'log.system' = 'kafka' but no 'kafka.topic'")
        partitions = options.log_system_partitions or max(buckets, 1)
        retention = options.log_retention
        return LogConfig(
            table=table,
            bootstrap_servers=servers,
            topic=topic,
            transactional=options.log_consistency == LogConsistency.TRANSACTIONAL,
            properties=props,
            partitions=partitions,
            replication=options.log_system_replication,
            retention_ms=retention.millis if retention is not None else None,
            primary_keys=tuple(primary_keys),
            upsert=_upsert(options.log_changelog_mode, bool(primary_keys)),
            ignore_delete=options.log_ignore_delete,
        )

    # ---- clients --------------------------------------------------------------------------------
    def _base(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "logger": _quiet_logger(),
            "socket.timeout.ms": int(DEFAULT_REQUEST_TIMEOUT_S * 1000),
        }
        conf.update(self.properties)
        return conf

    def _client(self, factory: Any, conf: dict[str, Any], what: str) -> Any:
        try:
            return factory(conf)
        except Exception as e:  # KafkaException for an unknown or bad property
            raise OptionError(f"Kafka {what} of table {self.table}: {e} (check the 'kafka.*' options)") from e

    def producer(self, *, transactional_id: Optional[str] = None) -> Producer:
        ck = kafka_module()
        conf = self._base()
        conf.setdefault("linger.ms", 5)
        conf.setdefault("batch.size", 256 * 1024)
        conf.setdefault("enable.idempotence", True)
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
            conf.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
            # librdkafka: a record must be delivered within its transaction's life
            txn_ms = int(conf["transaction.timeout.ms"])
            conf.setdefault("message.timeout.ms", min(txn_ms, 30_000))
            conf["socket.timeout.ms"] = min(int(conf["socket.timeout.ms"]), txn_ms + 100)
        else:
            conf.setdefault("message.timeout.ms", 30_000)
        return self._client(ck.Producer, conf, "producer")  # type: ignore[no-any-return]

    def consumer(self, *, group_id: Optional[str] = None, read_committed: Optional[bool] = None) -> Consumer:
        ck = kafka_module()
        conf = self._base()
        for key in [k for k in conf if k.startswith("transaction") or k in _PRODUCER_ONLY]:
            del conf[key]
        committed = self.transactional if read_committed is None else read_committed
        conf.update(
            {
                "group.id": group_id or f"lakelog-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
                "auto.offset.reset": "error",  # a start offset the log no longer has is reported
            }
        )
        return self._client(ck.Consumer, conf, "consumer")  # type: ignore[no-any-return]

    def admin(self) -> AdminClient:
        ck = kafka_module()
        from confluent_kafka.admin import AdminClient

        del ck
        return self._client(AdminClient, self._base(), "admin client")  # type: ignore[no-any-return]

    def describe(self) -> str:
        return f"topic {self.topic!r} at {self.bootstrap_servers} (table {self.table})"

    # ---- topics ---------------------------------------------------------------------------------
    def topic_partitions(self, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> Optional[int]:
        """The topic's partition count, None when it does not exist; an unreachable broker raises
        :class:`LogSystemError` after ``timeout`` seconds."""
        ck = kafka_module()
        try:
            meta = self.admin().list_topics(topic=self.topic, timeout=timeout)
        except ck.KafkaException as e:
            raise LogSystemError(
                f"Kafka at {self.bootstrap_servers} did not answer within {timeout:.0f} s "
                f"for {self.describe()}: {e}"
            ) from e
        t = meta.topics.get(self.topic)
        if t is None or (t.error is not None and t.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if t.error is not None:
            raise LogSystemError(f"cannot describe {self.describe()}: {t.error}")
        return len(t.partitions)

    def create_topic(self, *, timeout: float = TOPIC_CREATE_TIMEOUT_S) -> None:
        """Create the topic (``log.system.partitions``, ``log.system.replication``, ``log.retention``);
        an existing topic with enough partitions is kept."""
        ck = kafka_module()
        from confluent_kafka.admin import NewTopic

        existing = self.topic_partitions()
        if existing is not None:
            self.check_partitions(existing)
            return
        config = {"retention.ms": str(self.retention_ms)} if self.retention_ms is not None else {}
        new = NewTopic(
            self.topic, num_partitions=self.partitions, replication_factor=self.replication, config=config
        )
        admin = self.admin()  # keep the client alive until its futures resolve
        futures = admin.create_topics([new], request_timeout=timeout)
        try:
            futures[self.topic].result(timeout=timeout)
        except ck.KafkaException as e:
            if e.args and e.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise LogSystemError(f"cannot create {self.describe()}: {e}") from e
        except concurrent.futures.TimeoutError:
            # the broker may have created it after all: only a topic that is still missing is an error
            existing = self.topic_partitions()
            if existing is None:
                raise LogSystemError(
                    f"cannot create {self.describe()}: the broker did not answer within {timeout:.0f} s"
                ) from None
            self.check_partitions(existing)
            return
        log.info("created %s with %d partition(s)", self.describe(), self.partitions)

    def check_partitions(self, partitions: int) -> None:
        if partitions < self.partitions:
            raise LogSystemError(
                f"{self.describe()} has {partitions} partition(s), fewer than the table's "
                f"{self.partitions} ('log.system.partitions', default the bucket count): each bucket writes "
                "its own partition. Add partitions to the topic, or use another topic"
            )

    def delete_topic(self, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        ck = kafka_module()
        admin = self.admin()
        futures = admin.delete_topics([self.topic], request_timeout=timeout)
        try:
            futures[self.topic].result(timeout=timeout)
        except ck.KafkaException as e:
            if e.args and e.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            raise LogSystemError(f"cannot delete {self.describe()}: {e}") from e

    # ---- offsets --------------------------------------------------------------------------------
    def list_offsets(
        self, spec: str, *, committed: bool = True, timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    ) -> dict[int, int]:
        """``{partition: offset}`` of every partition: ``spec`` ``latest`` (the last stable offset
        for ``committed``, else the high watermark) or ``earliest`` (the first offset kept)."""
        ck = kafka_module()
        from confluent_kafka.admin import OffsetSpec

        parts = self.topic_partitions(timeout=timeout)
        if parts is None:
            raise LogSystemError(f"{self.describe()} does not exist")
        offset_spec = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        level = ck.IsolationLevel.READ_COMMITTED if committed else ck.IsolationLevel.READ_UNCOMMITTED
        request = {ck.TopicPartition(self.topic, p): offset_spec for p in range(parts)}
        admin = self.admin()
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=timeout)
        try:
            return {tp.partition: f.result(timeout=timeout).offset for tp, f in futures.items()}
        except ck.KafkaException as e:
            raise LogSystemError(f"cannot list the offsets of {self.describe()}: {e}") from e

    def offsets_for_time(self, millis: int, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict[int, int]:
        """``{partition: first offset at or after time millis}`` (the end for partitions with none)."""
        ck = kafka_module()
        parts = self.topic_partitions(timeout=timeout)
        if parts is None:
            raise LogSystemError(f"{self.describe()} does not exist")
        c = self.consumer()
        try:
            found = c.offsets_for_times(
                [ck.TopicPartition(self.topic, p, millis) for p in range(parts)], timeout
            )
        finally:
            c.close()
        end = self.list_offsets("latest")
        return {tp.partition: (tp.offset if tp.offset >= 0 else end[tp.partition]) for tp in found}


def producer_ended(err: Any) -> bool:
    """Whether a Kafka error means the producer cannot go on: fatal (another process's producer
    with the same transactional id fenced it), or its queue was purged because of that."""
    ck = kafka_module()
    if hasattr(err, "fatal") and err.fatal():
        return True
    code = err.code() if hasattr(err, "code") else None
    return code in (
        ck.KafkaError._FENCED,
        ck.KafkaError.INVALID_PRODUCER_EPOCH,  # "Producer attempted an operation with an old epoch"
        ck.KafkaError.PRODUCER_FENCED,
        ck.KafkaError._PURGE_QUEUE,
        ck.KafkaError._PURGE_INFLIGHT,
    )


class Deliveries:
    """What a producer delivered: the offset after its last record per partition, and the errors
    of records it could not deliver. :meth:`send_all` queues records; :meth:`wait` flushes."""

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.offsets: dict[int, int] = {}
        self.errors: list[str] = []
        self.fatal: Optional[BaseException] = None  # the Kafka error that ended the producer

    def _delivered(self, err: Any, msg: Any) -> None:
        # librdkafka calls this from inside flush/poll: an exception escaping here would be lost
        # (confluent-kafka then fails with a bare SystemError), so nothing may escape.
        try:
            if err is not None:
                self.errors.append(err.str() if hasattr(err, "str") else repr(err))
                if self.fatal is None and producer_ended(err):
                    self.fatal = kafka_module().KafkaException(err)
                return
            p, offset = msg.partition(), msg.offset()
            if offset is None or offset < 0:
                self.errors.append(f"partition {p}: delivered without an offset")
                return
            self.offsets[p] = max(self.offsets.get(p, 0), offset + 1)
        except Exception as e:
            # confluent-kafka 2.x raises a fatal error (a fenced producer) and then still calls the
            # delivery callbacks with that error pending: Python reports it as the cause here.
            cause = e.__cause__ or e.__context__
            if cause is not None and self.fatal is None:
                self.fatal = cause
            self.errors.append(f"delivery report could not be read: {cause or e!r}")

    def send_all(
        self, producer: Producer, records: Iterable[tuple[Optional[bytes], bytes, int, Any]]
    ) -> None:
        """Queue ``(key, value, partition, headers)`` records in order (the hot loop of a commit:
        names bound once, one client call per record)."""
        produce, topic, delivered = producer.produce, self.config.topic, self._delivered
        for key, value, partition, headers in records:
            while True:
                try:
                    produce(topic, value=value, key=key, partition=partition, headers=headers,
                            on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.05)

    def wait(self, producer: Producer) -> dict[int, int]:
        """Flush; ``{partition: offset after the records}``, or :class:`LogSystemError` naming what
        was not delivered."""
        try:
            remaining = producer.flush(DEFAULT_REQUEST_TIMEOUT_S * 2)
        except SystemError as e:
            # confluent-kafka lost the real error (the producer turned fatal, e.g. fenced, while
            # flushing): raise the error that the delivery callbacks saw, so callers can tell.
            raise LogSystemError(
                f"records for {self.config.describe()} were not delivered: {self.errors[:3]}"
            ) from (self.fatal or e)
        if remaining or self.errors:
            raise LogSystemError(
                f"records for {self.config.describe()} were not delivered: "
                f"{self.errors[:3] or f'{remaining} still queued'}"
            ) from self.fatal
        return dict(self.offsets)
