"""The log's configuration from the table's options: servers, topic, mode, and its clients.

Every ``kafka.<key>`` table option reaches the client with the prefix removed (Kafka's dotted names:
``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``transaction.timeout.ms``...). Which
client library runs is ``log.kafka.client`` (see :mod:`lakelog.connector.log.client`, the only
module that knows there are two). Errors name the table, the topic and the bootstrap servers.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, TypeVar

from lakelog.connector.errors import LogSystemError, OptionError
from lakelog.connector.format.options import CoreOptions, LogChangelogMode, LogConsistency
from lakelog.connector.log.client import (
    ClientError,
    LogClient,
    LogConsumer,
    LogProducer,
    open_client,
    pick_client,
)

__all__ = [
    "LogConfig",
    "default_topic",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "retrying",
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


def retrying(call: Callable[[], T], what: str, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> T:
    """``call()``, repeated while Kafka answers with a retriable error (a coordinator still loading,
    a leader moving), for at most ``timeout`` seconds; then :class:`LogSystemError` naming ``what``."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return call()
        except ClientError as e:
            if not e.retriable or time.monotonic() + delay > deadline:
                raise LogSystemError(f"{what}: {e}") from e
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


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
    client: str = "auto"  # log.kafka.client: kafka-python, confluent-kafka, auto

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
            client=options.log_kafka_client.value,
        )

    # ---- clients --------------------------------------------------------------------------------
    @property
    def client_name(self) -> str:
        """The client library that runs this log (``log.kafka.client`` resolved)."""
        return pick_client(self.client, self.table)

    def kafka(self) -> LogClient:
        """This log's client (one per configuration and process: its admin connection is kept)."""
        props = tuple(sorted(self.properties.items()))
        key = (os.getpid(), self.table, self.bootstrap_servers, self.topic, props, self.client)
        with _CLIENTS_LOCK:
            c = _CLIENTS.get(key)
            if c is None:
                c = _CLIENTS[key] = open_client(self.client_name, self)
            return c

    def producer(self, *, transactional_id: Optional[str] = None) -> LogProducer:
        """An idempotent producer of the topic (transactional with ``transactional_id``)."""
        return self.kafka().producer(transactional_id)

    def consumer(self, *, read_committed: Optional[bool] = None) -> LogConsumer:
        """A consumer of the topic (``read_committed`` default: the log is transactional)."""
        return self.kafka().consumer(self.transactional if read_committed is None else read_committed)

    def describe(self) -> str:
        return f"topic {self.topic!r} at {self.bootstrap_servers} (table {self.table})"

    # ---- topics ---------------------------------------------------------------------------------
    def topic_partitions(self, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> Optional[int]:
        """The topic's partition count, None when it does not exist; an unreachable broker raises
        :class:`LogSystemError` after ``timeout`` seconds."""
        try:
            return self.kafka().partitions(timeout)
        except ClientError as e:
            if e.reason == "timeout":
                raise LogSystemError(
                    f"Kafka at {self.bootstrap_servers} did not answer within {timeout:.0f} s "
                    f"for {self.describe()}: {e}"
                ) from e
            raise LogSystemError(f"cannot describe {self.describe()}: {e}") from e

    def create_topic(self, *, timeout: float = TOPIC_CREATE_TIMEOUT_S) -> None:
        """Create the topic (``log.system.partitions``, ``log.system.replication``, ``log.retention``);
        an existing topic with enough partitions is kept."""
        existing = self.topic_partitions()
        if existing is not None:
            self.check_partitions(existing)
            return
        config = {"retention.ms": str(self.retention_ms)} if self.retention_ms is not None else {}
        try:
            self.kafka().create_topic(self.partitions, self.replication, config, timeout)
        except ClientError as e:
            if e.reason == "topic-exists":
                return
            if e.reason != "timeout":
                raise LogSystemError(f"cannot create {self.describe()}: {e}") from e
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
        try:
            self.kafka().delete_topic(timeout)
        except ClientError as e:
            raise LogSystemError(f"cannot delete {self.describe()}: {e}") from e

    # ---- offsets --------------------------------------------------------------------------------
    def list_offsets(
        self, spec: str, *, committed: bool = True, timeout: float = DEFAULT_REQUEST_TIMEOUT_S
    ) -> dict[int, int]:
        """``{partition: offset}`` of every partition: ``spec`` ``latest`` (the last stable offset
        for ``committed``, else the high watermark) or ``earliest`` (the first offset kept)."""
        parts = self.topic_partitions(timeout=timeout)
        if parts is None:
            raise LogSystemError(f"{self.describe()} does not exist")
        try:
            return self.kafka().list_offsets(spec, parts, committed, timeout)
        except ClientError as e:
            raise LogSystemError(f"cannot list the offsets of {self.describe()}: {e}") from e

    def offsets_for_time(self, millis: int, *, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict[int, int]:
        """``{partition: first offset at or after time millis}`` (the end for partitions with none)."""
        parts = self.topic_partitions(timeout=timeout)
        if parts is None:
            raise LogSystemError(f"{self.describe()} does not exist")
        try:
            found = self.kafka().offsets_for_time(millis, parts, timeout)
        except ClientError as e:
            raise LogSystemError(f"cannot look up offsets by time in {self.describe()}: {e}") from e
        end = self.list_offsets("latest")
        return {p: (o if o is not None else end[p]) for p, o in found.items()}


_CLIENTS: dict[tuple[object, ...], LogClient] = {}
_CLIENTS_LOCK = threading.Lock()
