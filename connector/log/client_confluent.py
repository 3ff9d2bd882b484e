"""The log's Kafka seam on confluent-kafka (librdkafka). See :mod:`lakelog.connector.log.client`.

``kafka.<key>`` table options reach the clients with the prefix removed, under librdkafka's
names (for the usual keys Kafka's own: ``security.protocol``, ``sasl.*``, ``transaction.timeout.ms``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from lakelog.connector.errors import OptionError
from lakelog.connector.log.client import ClientError, Outgoing, Record

__all__ = ["ConfluentClient"]

REQUEST_TIMEOUT_S = 10.0
TRANSACTION_TIMEOUT_MS = 15_000
_PRODUCER_ONLY = frozenset(
    {"linger.ms", "batch.size", "acks", "enable.idempotence", "compression.type", "message.timeout.ms",
     "delivery.timeout.ms", "retries"}
)  # fmt: skip


def _ck() -> Any:
    import confluent_kafka

    return confluent_kafka


def _error(e: BaseException, what: str) -> ClientError:
    """A confluent ``KafkaException`` (or ``KafkaError``) as a :class:`ClientError`."""
    ck = _ck()
    err = e.args[0] if isinstance(e, ck.KafkaException) and e.args else e
    code = err.code() if hasattr(err, "code") else None
    E = ck.KafkaError  # noqa: N806
    transient = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E._TIMED_OUT)
    retriable = bool(hasattr(err, "retriable") and (err.retriable() or code in transient))
    reason = {
        E.TOPIC_ALREADY_EXISTS: "topic-exists",
        E.UNKNOWN_TOPIC_OR_PART: "unknown-topic",
        E._TIMED_OUT: "timeout",
    }.get(code, "")
    return ClientError(f"{what}: {e}", retriable=retriable, fenced=_fenced(err), reason=reason)


def _fenced(err: Any) -> bool:
    """Whether an error means the producer cannot go on: fatal (fenced by a newer producer with
    its transactional id), or its queue was purged because of that."""
    ck = _ck()
    if hasattr(err, "fatal") and err.fatal():
        return True
    code = err.code() if hasattr(err, "code") else None
    E = ck.KafkaError  # noqa: N806
    return code in (E._FENCED, E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E._PURGE_QUEUE, E._PURGE_INFLIGHT)


class ConfluentClient:
    name = "confluent-kafka"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.topic: str = config.topic

    # ---- configuration ------------------------------------------------------------------------
    def _base(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.config.bootstrap_servers,
            "logger": logging.getLogger("lakelog.kafka.client"),
            "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
        }
        conf.update(self.config.properties)
        return conf

    def _make(self, factory: Any, conf: dict[str, Any], what: str) -> Any:
        try:
            return factory(conf)
        except Exception as e:  # KafkaException for an unknown or bad property
            raise OptionError(
                f"Kafka {what} of table {self.config.table}: {e} (check the 'kafka.*' options)"
            ) from e

    def _consumer_conf(self, group: Optional[str], read_committed: bool) -> dict[str, Any]:
        conf = self._base()
        for key in [k for k in conf if k.startswith("transaction") or k in _PRODUCER_ONLY]:
            del conf[key]
        conf.update(
            {
                "group.id": group or f"lakelog-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                "auto.offset.reset": "error",  # a start offset the log no longer has is reported
            }
        )
        return conf

    def _raw_consumer(self, group: Optional[str] = None, read_committed: bool = True) -> Any:
        return self._make(_ck().Consumer, self._consumer_conf(group, read_committed), "consumer")

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return self._make(AdminClient, self._base(), "admin client")

    # ---- topics and offsets -------------------------------------------------------------------
    def partitions(self, timeout: float) -> Optional[int]:
        ck = _ck()
        try:
            meta = self._admin().list_topics(topic=self.topic, timeout=timeout)
        except ck.KafkaException as e:
            raise ClientError(f"no answer within {timeout:.0f} s: {e}", reason="timeout") from e
        t = meta.topics.get(self.topic)
        if t is None or (t.error is not None and t.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if t.error is not None:
            raise _error(t.error, "cannot describe the topic")
        return len(t.partitions)

    def create_topic(
        self, partitions: int, replication: int, config: Mapping[str, str], timeout: float
    ) -> None:
        ck = _ck()
        from confluent_kafka.admin import NewTopic

        new = NewTopic(
            self.topic, num_partitions=partitions, replication_factor=replication, config=dict(config)
        )
        admin = self._admin()  # kept alive until its futures resolve
        futures = admin.create_topics([new], request_timeout=timeout)
        try:
            futures[self.topic].result(timeout=timeout)
        except ck.KafkaException as e:
            raise _error(e, "cannot create the topic") from e
        except concurrent.futures.TimeoutError:
            raise ClientError(f"the broker did not answer within {timeout:.0f} s", reason="timeout") from None

    def delete_topic(self, timeout: float) -> None:
        ck = _ck()
        admin = self._admin()
        futures = admin.delete_topics([self.topic], request_timeout=timeout)
        try:
            futures[self.topic].result(timeout=timeout)
        except ck.KafkaException as e:
            err = _error(e, "cannot delete the topic")
            if err.reason != "unknown-topic":
                raise err from e

    def list_offsets(self, spec: str, partitions: int, committed: bool, timeout: float) -> dict[int, int]:
        ck = _ck()
        from confluent_kafka.admin import OffsetSpec

        offset_spec = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        level = ck.IsolationLevel.READ_COMMITTED if committed else ck.IsolationLevel.READ_UNCOMMITTED
        request = {ck.TopicPartition(self.topic, p): offset_spec for p in range(partitions)}
        admin = self._admin()
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=timeout)
        try:
            return {tp.partition: f.result(timeout=timeout).offset for tp, f in futures.items()}
        except ck.KafkaException as e:
            raise _error(e, "cannot list the offsets") from e

    def offsets_for_time(self, millis: int, partitions: int, timeout: float) -> dict[int, Optional[int]]:
        ck = _ck()
        c = self._raw_consumer()
        try:
            found = c.offsets_for_times(
                [ck.TopicPartition(self.topic, p, millis) for p in range(partitions)], timeout
            )
        except ck.KafkaException as e:
            raise _error(e, "cannot look up offsets by time") from e
        finally:
            c.close()
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}

    def group_offset(self, group: str, partition: int, timeout: float) -> Optional[int]:
        ck = _ck()
        c = self._raw_consumer(group)
        try:
            (got,) = c.committed([ck.TopicPartition(self.topic, partition)], timeout=timeout)
        except ck.KafkaException as e:
            raise _error(e, f"cannot read the offsets of group {group}") from e
        finally:
            c.close()
        return got.offset if got.offset >= 0 else None

    def commit_group_offset(self, group: str, partition: int, offset: int, timeout: float) -> None:
        ck = _ck()
        c = self._raw_consumer(group)
        try:
            c.commit(offsets=[ck.TopicPartition(self.topic, partition, offset)], asynchronous=False)
        except ck.KafkaException as e:
            raise _error(e, f"cannot commit the offsets of group {group}") from e
        finally:
            c.close()

    # ---- clients --------------------------------------------------------------------------------
    def producer(self, transactional_id: Optional[str]) -> _Producer:
        conf = self._base()
        conf.setdefault("linger.ms", 5)
        conf.setdefault("batch.size", 256 * 1024)
        conf.setdefault("enable.idempotence", True)
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
            conf.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
            # librdkafka: a record must be delivered within its transaction's life
            txn_ms = int(conf["transaction.timeout.ms"])
            conf.setdefault("message.timeout.ms", min(txn_ms, 30_000))
            conf["socket.timeout.ms"] = min(int(conf["socket.timeout.ms"]), txn_ms + 100)
        else:
            conf.setdefault("message.timeout.ms", 30_000)
        return _Producer(self, self._make(_ck().Producer, conf, "producer"))

    def consumer(self, read_committed: bool) -> _Consumer:
        return _Consumer(self, self._raw_consumer(None, read_committed))


class _Producer:
    def __init__(self, client: ConfluentClient, producer: Any) -> None:
        self.client = client
        self.p = producer
        self.offsets: dict[int, int] = {}
        self.errors: list[str] = []
        self.fatal: Optional[BaseException] = None  # the Kafka error that ended the producer
        self._groups: dict[str, Any] = {}  # group -> a consumer, for its group metadata

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except _ck().KafkaException as e:
            raise _error(e, what) from e

    def init_transactions(self) -> None:
        self._call("cannot start a transactional producer", self.p.init_transactions, REQUEST_TIMEOUT_S)

    def begin(self) -> None:
        self._call("cannot begin a transaction", self.p.begin_transaction)
        self.offsets, self.errors, self.fatal = {}, [], None

    def _delivered(self, err: Any, msg: Any) -> None:
        # librdkafka calls this from inside flush/poll: an exception escaping here would be lost
        # (confluent-kafka then fails with a bare SystemError), so nothing may escape.
        try:
            if err is not None:
                self.errors.append(err.str() if hasattr(err, "str") else repr(err))
                if self.fatal is None and _fenced(err):
                    self.fatal = _ck().KafkaException(err)
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

    def send_all(self, records: Iterable[Outgoing]) -> None:
        produce, topic, delivered, poll = self.p.produce, self.client.topic, self._delivered, self.p.poll
        try:
            for key, value, partition, headers in records:
                while True:
                    try:
                        produce(topic, value=value, key=key, partition=partition, headers=headers,
                                on_delivery=delivered)  # fmt: skip
                        break
                    except BufferError:  # the local queue is full: let it drain
                        poll(0.05)
            poll(0)
        except _ck().KafkaException as e:
            raise _error(e, "cannot send records") from e

    def flush(self) -> dict[int, int]:
        try:
            remaining = self.p.flush(REQUEST_TIMEOUT_S * 2)
        except SystemError as e:
            # confluent-kafka lost the real error (the producer turned fatal, e.g. fenced, while
            # flushing): report the error that the delivery callbacks saw
            raise ClientError(f"records were not delivered: {self.errors[:3]}", fenced=True) from (
                self.fatal or e
            )
        if remaining or self.errors:
            fenced = self.fatal is not None
            raise ClientError(
                f"records were not delivered: {self.errors[:3] or f'{remaining} still queued'}", fenced=fenced
            ) from self.fatal
        return dict(self.offsets)

    def commit(self, group: str, offsets: Mapping[int, int]) -> None:
        ck = _ck()
        meta = self._groups.get(group)
        if meta is None:
            meta = self._groups[group] = self.client._raw_consumer(group)
        tps = [ck.TopicPartition(self.client.topic, p, o) for p, o in offsets.items()]
        self._call("cannot add the offsets to the transaction", self.p.send_offsets_to_transaction, tps,
                   meta.consumer_group_metadata())  # fmt: skip
        self._call("cannot commit the transaction", self.p.commit_transaction, REQUEST_TIMEOUT_S)

    def abort(self, timeout: float) -> None:
        self._call("cannot abort the transaction", self.p.abort_transaction, timeout)

    def close(self) -> None:
        for c in self._groups.values():
            c.close()
        self._groups.clear()


class _Consumer:
    def __init__(self, client: ConfluentClient, consumer: Any) -> None:
        self.client = client
        self.c = consumer

    def assign(self, positions: Mapping[int, int]) -> None:
        ck = _ck()
        self.c.assign([ck.TopicPartition(self.client.topic, p, o) for p, o in positions.items()])

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        ck = _ck()
        out: list[Record] = []
        for m in self.c.consume(max_records, timeout):
            err = m.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    continue
                if err.code() == ck.KafkaError._AUTO_OFFSET_RESET:
                    raise ClientError(err.str(), reason="offset-out-of-range", partition=m.partition())
                raise ClientError(err.str())
            out.append(
                Record(
                    m.partition(), m.offset(), m.key(), m.value(), dict(m.headers() or ()), m.timestamp()[1]
                )
            )
        return out

    def position(self, partition: int) -> int:
        ck = _ck()
        (tp,) = self.c.position([ck.TopicPartition(self.client.topic, partition)])
        return int(tp.offset)

    def close(self) -> None:
        self.c.close()
