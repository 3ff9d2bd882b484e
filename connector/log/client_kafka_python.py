"""The log's Kafka seam on kafka-python (pure Python). See :mod:`lakelog.connector.log.client`.

``kafka.<key>`` table options use Kafka's dotted names, as for the other client; they reach
kafka-python as its keyword arguments (dots become underscores: ``security.protocol`` ->
``security_protocol``; ``sasl.username``/``sasl.password`` -> ``sasl_plain_username``/``_password``,
``ssl.ca.location`` -> ``ssl_cafile`` and the other ``ssl.*.location`` keys likewise).
A key that kafka-python's client does not take is refused, naming it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from lakelog.connector.errors import OptionError
from lakelog.connector.log.client import ClientError, Outgoing, Record

__all__ = ["KafkaPythonClient"]

REQUEST_TIMEOUT_S = 10.0
TRANSACTION_TIMEOUT_MS = 15_000
_RENAMED = {  # librdkafka's names (which lakelog documents) whose kafka-python argument differs
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}
# librdkafka-only keys that have no kafka-python counterpart and change nothing there
_IGNORED = frozenset({"socket.timeout.ms", "message.timeout.ms", "enable.partition.eof", "logger"})


def _errors() -> Any:
    import kafka.errors

    return kafka.errors


def _error(e: BaseException, what: str) -> ClientError:
    """A kafka-python exception as a :class:`ClientError`."""
    E = _errors()  # noqa: N806
    fenced_types = (E.ProducerFencedError, E.InvalidProducerEpochError, E.TransactionCoordinatorFencedError)
    # a producer in its error state raises a plain KafkaError naming the error that put it there
    fenced = isinstance(e, fenced_types) or any(t.__name__ in str(e) for t in fenced_types)
    retriable = bool(getattr(e, "retriable", False)) or isinstance(
        e,
        (
            E.NotCoordinatorError,
            E.CoordinatorLoadInProgressError,
            E.CoordinatorNotAvailableError,
            E.KafkaTimeoutError,
        ),
    )
    reason = ""
    if isinstance(e, E.TopicAlreadyExistsError):
        reason = "topic-exists"
    elif isinstance(e, E.UnknownTopicOrPartitionError):
        reason = "unknown-topic"
    elif isinstance(e, E.KafkaTimeoutError):
        reason = "timeout"
    elif isinstance(e, E.OffsetOutOfRangeError):
        reason = "offset-out-of-range"
    return ClientError(f"{what}: {type(e).__name__}: {e}", retriable=retriable, fenced=fenced, reason=reason)


class KafkaPythonClient:
    name = "kafka-python"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.topic: str = config.topic
        self._admin_client: Any = None

    # ---- configuration ------------------------------------------------------------------------
    def _kwargs(
        self, allowed: Mapping[str, Any], what: str, drop: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bootstrap_servers": self.config.bootstrap_servers.split(","),
            "request_timeout_ms": int(REQUEST_TIMEOUT_S * 1000) + 5000,
            "bootstrap_timeout_ms": int(REQUEST_TIMEOUT_S * 1000),
        }
        for key, value in self.config.properties.items():
            if key in _IGNORED or key in drop:
                continue
            name = _RENAMED.get(key, key.replace(".", "_").replace("-", "_"))
            if name not in allowed:
                raise OptionError(
                    f"Kafka {what} of table {self.config.table}: kafka-python takes no option "
                    f"'kafka.{key}' (check the 'kafka.*' options, or use 'log.kafka.client' = "
                    "'confluent-kafka')"
                )
            default = allowed[name]
            out[name] = _typed(value, default)
        return out

    def _make(self, factory: Any, kwargs: dict[str, Any], what: str) -> Any:
        E = _errors()  # noqa: N806
        try:
            return factory(**kwargs)
        except E.KafkaTimeoutError as e:
            raise ClientError(
                f"no broker at {self.config.bootstrap_servers} answered: {e}", reason="timeout"
            ) from e
        except (E.KafkaConfigurationError, TypeError, ValueError) as e:
            raise OptionError(
                f"Kafka {what} of table {self.config.table}: {e} (check the 'kafka.*' options)"
            ) from e

    def _raw_consumer(self, group: Optional[str] = None, read_committed: bool = True) -> Any:
        from kafka import KafkaConsumer

        kw = self._kwargs(KafkaConsumer.DEFAULT_CONFIG, "consumer", _PRODUCER_ONLY)
        kw.update(
            group_id=group,
            enable_auto_commit=False,
            isolation_level="read_committed" if read_committed else "read_uncommitted",
            auto_offset_reset="none",  # a start offset the log no longer has is reported
            allow_auto_create_topics=False,
            consumer_timeout_ms=float("inf"),
        )
        # a log tail waits for new records; the broker holds an empty fetch this long (Kafka's
        # default 500 ms is most of an eventual log's freshness budget); 'kafka.fetch.max.wait.ms' sets it
        kw.setdefault("fetch_max_wait_ms", 100)
        return self._make(KafkaConsumer, kw, "consumer")

    def _admin(self) -> Any:
        if self._admin_client is None:
            from kafka import KafkaAdminClient

            kw = self._kwargs(
                KafkaAdminClient.DEFAULT_CONFIG, "admin client", _PRODUCER_ONLY | _CONSUMER_ONLY
            )
            self._admin_client = self._make(KafkaAdminClient, kw, "admin client")
        return self._admin_client

    def _drop_admin(self) -> None:
        """Forget the admin client after an error: kafka-python's keeps a cluster view with no
        node after a broker restart (NodeNotReadyError until it is rebuilt), a new one bootstraps."""
        admin, self._admin_client = self._admin_client, None
        if admin is not None:
            with contextlib.suppress(Exception):  # closing a broken client must not hide the error
                admin.close()

    # ---- topics and offsets -------------------------------------------------------------------
    def partitions(self, timeout: float) -> Optional[int]:
        E = _errors()  # noqa: N806
        deadline = time.monotonic() + timeout
        while True:
            try:
                (t,) = self._admin().describe_topics([self.topic])
            except E.UnknownTopicOrPartitionError:
                return None
            except ClientError:
                raise
            except E.KafkaError as e:
                self._drop_admin()
                if time.monotonic() > deadline:
                    raise _error(e, f"no answer within {timeout:.0f} s") from e
                time.sleep(0.1)
                continue
            code = t.get("error_code", 0)
            if code == E.UnknownTopicOrPartitionError.errno:
                return None
            if code == E.LeaderNotAvailableError.errno and time.monotonic() < deadline:
                time.sleep(0.1)  # a topic being created
                continue
            if code:
                raise ClientError(f"cannot describe the topic: error {code}")
            return len(t["partitions"])

    def create_topic(
        self, partitions: int, replication: int, config: Mapping[str, str], timeout: float
    ) -> None:
        from kafka.admin import NewTopic

        E = _errors()  # noqa: N806
        new = NewTopic(self.topic, partitions, replication, topic_configs=dict(config))
        try:
            self._admin().create_topics([new], timeout_ms=int(timeout * 1000), raise_errors=True)
        except E.KafkaError as e:
            if not isinstance(e, E.TopicAlreadyExistsError):
                self._drop_admin()
            raise _error(e, "cannot create the topic") from e

    def delete_topic(self, timeout: float) -> None:
        E = _errors()  # noqa: N806
        try:
            self._admin().delete_topics([self.topic], timeout_ms=int(timeout * 1000))
        except E.UnknownTopicOrPartitionError:
            return
        except E.KafkaError as e:
            self._drop_admin()
            raise _error(e, "cannot delete the topic") from e

    def _with_consumer(
        self, what: str, fn: Any, group: Optional[str] = None, read_committed: bool = True
    ) -> Any:
        E = _errors()  # noqa: N806
        c = self._raw_consumer(group, read_committed)
        try:
            return fn(c)
        except E.KafkaError as e:
            raise _error(e, what) from e
        finally:
            c.close()

    def _tps(self, partitions: int) -> list[Any]:
        from kafka import TopicPartition

        return [TopicPartition(self.topic, p) for p in range(partitions)]

    def list_offsets(self, spec: str, partitions: int, committed: bool, timeout: float) -> dict[int, int]:
        tps = self._tps(partitions)

        def run(c: Any) -> dict[int, int]:
            got = c.end_offsets(tps) if spec == "latest" else c.beginning_offsets(tps)
            return {tp.partition: int(o) for tp, o in got.items()}

        return self._with_consumer("cannot list the offsets", run, read_committed=committed)  # type: ignore[no-any-return]

    def offsets_for_time(self, millis: int, partitions: int, timeout: float) -> dict[int, Optional[int]]:
        tps = self._tps(partitions)

        def run(c: Any) -> dict[int, Optional[int]]:
            got = c.offsets_for_times({tp: millis for tp in tps})
            return {tp.partition: (None if v is None else int(v.offset)) for tp, v in got.items()}

        return self._with_consumer("cannot look up offsets by time", run)  # type: ignore[no-any-return]

    def group_offset(self, group: str, partition: int, timeout: float) -> Optional[int]:
        from kafka import TopicPartition

        def run(c: Any) -> Optional[int]:
            got = c.committed(TopicPartition(self.topic, partition))
            return None if got is None or got < 0 else int(got)

        return self._with_consumer(f"cannot read the offsets of group {group}", run, group)  # type: ignore[no-any-return]

    def commit_group_offset(self, group: str, partition: int, offset: int, timeout: float) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        def run(c: Any) -> None:
            c.commit({TopicPartition(self.topic, partition): OffsetAndMetadata(offset, "", -1)})

        self._with_consumer(f"cannot commit the offsets of group {group}", run, group)

    # ---- clients --------------------------------------------------------------------------------
    def producer(self, transactional_id: Optional[str]) -> _Producer:
        from kafka import KafkaProducer

        kw = self._kwargs(KafkaProducer.DEFAULT_CONFIG, "producer", _CONSUMER_ONLY)
        kw.setdefault("linger_ms", 5)
        kw.setdefault("batch_size", 256 * 1024)
        kw.setdefault("enable_idempotence", True)
        kw.setdefault("acks", "all")
        kw.setdefault("delivery_timeout_ms", 30_000)
        kw.setdefault("max_block_ms", int(REQUEST_TIMEOUT_S * 1000))  # bounds init_transactions and send
        if transactional_id is not None:
            kw["transactional_id"] = transactional_id
            kw.setdefault("transaction_timeout_ms", TRANSACTION_TIMEOUT_MS)
        return _Producer(self, self._make(KafkaProducer, kw, "producer"))

    def consumer(self, read_committed: bool) -> _Consumer:
        return _Consumer(self, self._raw_consumer(None, read_committed))


_PRODUCER_ONLY = frozenset(
    {"linger.ms", "batch.size", "acks", "enable.idempotence", "compression.type", "delivery.timeout.ms",
     "retries", "transaction.timeout.ms", "transactional.id", "max.in.flight.requests.per.connection"}
)  # fmt: skip
_CONSUMER_ONLY = frozenset({"isolation.level", "auto.offset.reset", "group.id", "enable.auto.commit"})


def _typed(value: str, default: Any) -> Any:
    """A table option's text as the type of kafka-python's default for that argument."""
    if isinstance(default, bool):
        return value.strip().lower() == "true"
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            return value
    return value


class _Producer:
    def __init__(self, client: KafkaPythonClient, producer: Any) -> None:
        self.client = client
        self.p = producer
        self.futures: list[Any] = []

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        E = _errors()  # noqa: N806
        try:
            return fn(*args)
        except E.KafkaError as e:
            raise _error(e, what) from e

    def init_transactions(self) -> None:
        self._call("cannot start a transactional producer", self.p.init_transactions)

    def begin(self) -> None:
        self._call("cannot begin a transaction", self.p.begin_transaction)
        self.futures = []

    def send_all(self, records: Iterable[Outgoing]) -> None:
        E = _errors()  # noqa: N806
        send, topic, futures = self.p.send, self.client.topic, self.futures
        try:
            for key, value, partition, headers in records:
                futures.append(send(topic, value=value, key=key, partition=partition, headers=headers))
        except E.KafkaError as e:
            raise _error(e, "cannot send records") from e

    def flush(self) -> dict[int, int]:
        E = _errors()  # noqa: N806
        try:
            self.p.flush(timeout=REQUEST_TIMEOUT_S * 2)
        except E.KafkaError as e:
            raise _error(e, "records were not delivered") from e
        offsets: dict[int, int] = {}
        errors: list[BaseException] = []
        for f in self.futures:
            if not f.is_done:
                errors.append(E.KafkaTimeoutError("still queued"))
            elif f.exception is not None:
                errors.append(f.exception)
            else:
                meta = f.value
                offsets[meta.partition] = max(offsets.get(meta.partition, 0), meta.offset + 1)
        self.futures = []
        if errors:
            err = _error(errors[0], f"{len(errors)} record(s) were not delivered")
            raise err from errors[0]
        return offsets

    def _bounded(self, what: str, start: Any, public: Any, *args: Any) -> None:
        """A transactional step that kafka-python's public call waits for without a limit (its
        offsets, commit and abort calls do: against a broker that lost the topic, for ever),
        waited for at most the request timeout. A step that does not finish is a
        :class:`ClientError` marked fenced: the producer is unusable, its owner makes a new one,
        whose ``init_transactions`` ends what this one left."""
        E = _errors()  # noqa: N806
        tm, sender = getattr(self.p, "_transaction_manager", None), getattr(self.p, "_sender", None)
        try:
            if tm is None or sender is None or not hasattr(tm, start):  # another kafka-python layout
                public(*args)
                return
            result = getattr(tm, start)(*args)
            sender.wakeup()
            if not result.wait(timeout_ms=int(REQUEST_TIMEOUT_S * 1000)):
                raise ClientError(
                    f"{what}: no answer within {REQUEST_TIMEOUT_S:.0f} s", reason="timeout", fenced=True
                )
        except E.KafkaError as e:
            raise _error(e, what) from e

    def commit(self, group: str, offsets: Mapping[int, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        tps = {TopicPartition(self.client.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        what = "cannot add the offsets to the transaction"
        self._bounded(what, "send_offsets_to_transaction", self.p.send_offsets_to_transaction, tps, group)
        self._bounded("cannot commit the transaction", "begin_commit", self.p.commit_transaction)

    def abort(self, timeout: float) -> None:
        self.futures = []
        self._bounded("cannot abort the transaction", "begin_abort", self.p.abort_transaction)

    def close(self) -> None:
        E = _errors()  # noqa: N806
        with contextlib.suppress(E.KafkaError):
            self.p.close(timeout=1.0)


class _Consumer:
    def __init__(self, client: KafkaPythonClient, consumer: Any) -> None:
        self.client = client
        self.c = consumer

    def assign(self, positions: Mapping[int, int]) -> None:
        from kafka import TopicPartition

        tps = {p: TopicPartition(self.client.topic, p) for p in positions}
        self.c.assign(list(tps.values()))
        for p, o in positions.items():
            self.c.seek(tps[p], o)

    def poll(self, max_records: int, timeout: float) -> list[Record]:
        E = _errors()  # noqa: N806
        try:
            got = self.c.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except (E.OffsetOutOfRangeError, E.NoOffsetForPartitionError) as e:
            parts = getattr(e, "args", [None])[0]
            partition = next(iter(parts)).partition if isinstance(parts, dict) and parts else -1
            raise ClientError(str(e), reason="offset-out-of-range", partition=partition) from e
        except E.KafkaError as e:
            raise _error(e, "cannot read records") from e
        out: list[Record] = []
        for tp, msgs in got.items():
            for m in msgs:
                out.append(Record(tp.partition, m.offset, m.key, m.value, dict(m.headers or ()), m.timestamp))
        return out

    def position(self, partition: int) -> int:
        from kafka import TopicPartition

        return int(self.c.position(TopicPartition(self.client.topic, partition)))

    def close(self) -> None:
        self.c.close()
