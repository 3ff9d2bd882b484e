"""The one seam between the log and a Kafka client library.

Everything above this module (:mod:`~lakelog.connector.log.kafka`'s ``LogConfig``, the publisher,
the eventual writer, the reader) talks to a :class:`LogClient` and its :class:`LogProducer` and
:class:`LogConsumer`, and sees Kafka's failures only as :class:`ClientError`. Two libraries sit
behind it:

* ``kafka-python`` (:mod:`~lakelog.connector.log.client_kafka_python`): pure Python, the client the
  project's design names; the ``kafka`` extra installs it.
* ``confluent-kafka`` (:mod:`~lakelog.connector.log.client_confluent`): librdkafka, several times
  faster from Python; the ``kafka-fast`` extra installs it.

The table option ``log.kafka.client`` chooses (``kafka-python``, ``confluent-kafka``); ``auto``
(the default) takes confluent-kafka where it is installed and kafka-python otherwise. Both import
lazily: a table without a log loads neither.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from lakelog.connector.errors import LogSystemError

__all__ = [
    "CLIENTS",
    "ClientError",
    "Record",
    "LogClient",
    "LogProducer",
    "LogConsumer",
    "pick_client",
    "open_client",
]

CLIENTS = ("kafka-python", "confluent-kafka")
_MODULES = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}


class ClientError(LogSystemError):
    """A Kafka failure, as the client library reported it. ``retriable``: the same call may work
    soon (a coordinator loading, a leader moving); ``fenced``: the producer cannot go on (a newer
    producer with its transactional id took over); ``reason``: ``topic-exists``,
    ``unknown-topic``, ``offset-out-of-range``, ``timeout`` or empty."""

    def __init__(
        self,
        message: str,
        *,
        retriable: bool = False,
        fenced: bool = False,
        reason: str = "",
        partition: int = -1,
    ) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.fenced = fenced
        self.reason = reason
        self.partition = partition


@dataclass
class Record:
    """One record read from the topic."""

    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: dict[str, bytes] = field(default_factory=dict)
    timestamp: int = -1  # milliseconds (CreateTime: when the producer made it)


Outgoing = tuple[
    Optional[bytes], Optional[bytes], int, list[tuple[str, bytes]]
]  # key, value, partition, headers


class LogProducer(Protocol):
    """A producer of the table's topic: idempotent, and transactional when it has an id."""

    def init_transactions(self) -> None: ...

    def begin(self) -> None: ...

    def send_all(self, records: Iterable[Outgoing]) -> None:
        """Queue records in order (the hot loop of a commit)."""
        ...

    def flush(self) -> dict[int, int]:
        """Wait for every queued record; ``{partition: offset after the records}`` of those sent
        since the transaction began (or since the producer was made), or :class:`ClientError`
        naming what was not delivered."""
        ...

    def commit(self, group: str, offsets: Mapping[int, int]) -> None:
        """Commit the open transaction together with consumer group ``group``'s offsets
        ``{partition: offset}`` of the topic."""
        ...

    def abort(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class LogConsumer(Protocol):
    """A consumer of the table's topic at positions it is given (no group membership)."""

    def assign(self, positions: Mapping[int, int]) -> None: ...

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        """Records that arrived within ``timeout`` seconds (transaction markers are never
        records); a position the topic no longer holds raises :class:`ClientError` with reason
        ``offset-out-of-range``."""
        ...

    def position(self, partition: int) -> int:
        """The offset of the next record this consumer would return from ``partition``."""
        ...

    def close(self) -> None: ...


class LogClient(Protocol):
    """Administration and clients of one topic at one cluster."""

    name: str

    def partitions(self, timeout: float) -> Optional[int]:
        """The topic's partition count; None when it does not exist."""
        ...

    def create_topic(
        self, partitions: int, replication: int, config: Mapping[str, str], timeout: float
    ) -> None:
        """Create the topic (:class:`ClientError` reason ``topic-exists`` or ``timeout``)."""
        ...

    def delete_topic(self, timeout: float) -> None:
        """Delete the topic (none is no error)."""
        ...

    def list_offsets(self, spec: str, partitions: int, committed: bool, timeout: float) -> dict[int, int]:
        """``latest`` (the last stable offset when ``committed``, else the high watermark) or
        ``earliest`` offset of each partition."""
        ...

    def offsets_for_time(self, millis: int, partitions: int, timeout: float) -> dict[int, Optional[int]]:
        """The first offset at or after ``millis`` per partition (None: none)."""
        ...

    def group_offset(self, group: str, partition: int, timeout: float) -> Optional[int]:
        """Consumer group ``group``'s committed offset of the topic's ``partition`` (None: none)."""
        ...

    def commit_group_offset(self, group: str, partition: int, offset: int, timeout: float) -> None: ...

    def producer(self, transactional_id: Optional[str]) -> LogProducer: ...

    def consumer(self, read_committed: bool) -> LogConsumer: ...


def installed(name: str) -> bool:
    return importlib.util.find_spec(_MODULES[name]) is not None


def pick_client(choice: str, table: str) -> str:
    """The client library for ``log.kafka.client`` = ``choice`` (``auto``: confluent-kafka where
    installed, else kafka-python); a clear error when the chosen one is not installed."""
    if choice == "auto":
        for name in ("confluent-kafka", "kafka-python"):
            if installed(name):
                return name
        raise LogSystemError(
            f"table {table} has 'log.system' = 'kafka' but no Kafka client is installed: "
            "pip install 'lakelog[kafka]' (kafka-python) or 'lakelog[kafka-fast]' (confluent-kafka)"
        )
    if choice not in CLIENTS:
        raise LogSystemError(f"'log.kafka.client' = {choice!r}: expected auto, {' or '.join(CLIENTS)}")
    if not installed(choice):
        extra = "kafka" if choice == "kafka-python" else "kafka-fast"
        raise LogSystemError(
            f"table {table} sets 'log.kafka.client' = {choice!r}, which is not installed: "
            f"pip install 'lakelog[{extra}]'"
        )
    return choice


def open_client(name: str, config: Any) -> LogClient:
    """A :class:`LogClient` of library ``name`` for a ``LogConfig``."""
    if name == "kafka-python":
        from lakelog.connector.log.client_kafka_python import KafkaPythonClient

        return KafkaPythonClient(config)
    from lakelog.connector.log.client_confluent import ConfluentClient

    return ConfluentClient(config)
