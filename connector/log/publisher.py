"""Publishing committed changes to the log: in snapshot order, each snapshot exactly once.

With ``log.consistency`` = ``transactional`` every commit of a log table goes through a
:class:`LogPublisher`, whichever writer makes it (``t.write``, a stream writer, the PyFlink sink's
committer). For one snapshot:

1. **Catch up.** The publisher holds the table's one transactional producer (transactional id
   ``lakelog-<topic>``; a newer holder fences older ones). It reads the *marker*, the last
   published snapshot id, kept as the committed offset of consumer group ``lakelog-log-<topic>``
   and written in the same Kafka transaction as the records. Snapshots after the marker that a
   failed or fenced writer committed but never published are published first, from their files.
2. **Produce** the snapshot's changes (its new rows, or its changelog files when the table has a
   changelog producer; see :mod:`lakelog.connector.table.changes`) in an open transaction, one
   record per row into the bucket's partition, and learn their offsets.
3. The committer publishes the snapshot with ``logOffsets`` = the offset after its records in every
   partition it wrote (Paimon's field; other partitions keep the previous snapshot's offsets).
4. **Commit** the transaction together with marker = the snapshot id. Read-committed consumers see
   the changes only now, after the snapshot that holds them.

A crash between 3 and 4 leaves the snapshot unpublished: the broker aborts the transaction (after
``transaction.timeout.ms``, or at once when the next holder fences it) and the next commit
publishes the snapshot in step 1. Its records then sit after its ``logOffsets``; every record
carries the commit user, commit identifier and commit kind of its snapshot in its headers, so a
hybrid read that starts at that snapshot skips them (see :mod:`lakelog.connector.log.reader`).
A snapshot whose files expired before anyone could publish it leaves a *gap record* (header
``lakelog.gap`` = ``first-last`` snapshot ids) in every partition; a reader meeting it fails
naming the gap instead of skipping changes silently.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LogSystemError
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.log.client import ClientError, LogProducer
from lakelog.connector.log.codec import (
    COMMIT_HEADER,
    KIND_HEADER,
    SCHEMA_HEADER,
    USER_HEADER,
    encode_changes,
    kind_header,
)
from lakelog.connector.log.kafka import DEFAULT_REQUEST_TIMEOUT_S, LogConfig, retrying

__all__ = [
    "BucketChanges",
    "LogPublisher",
    "publisher_for",
    "GAP_HEADER",
    "COMMIT_KIND_HEADER",
    "marker_group",
    "records_partition",
    "records_partitions",
]

log = logging.getLogger(__name__)

GAP_HEADER = "lakelog.gap"
COMMIT_KIND_HEADER = "lakelog.commit-kind"


@dataclass
class BucketChanges:
    """The changes one snapshot makes in one bucket: the rows (the table's columns) and their kinds."""

    bucket: int
    rows: pa.Table
    kinds: np.ndarray
    schema_id: int  # the table schema the rows are in


ChangesOf = Callable[[Snapshot], Optional[list[BucketChanges]]]  # None: the snapshot's files expired


def marker_group(topic: str) -> str:
    return f"lakelog-log-{topic}"


def records_partition(bucket: int, partitions: int) -> int:
    """The Kafka partition of a bucket's records: the bucket modulo the topic's partitions (an
    append table without buckets writes partition 0). A key keeps its bucket, and so its partition,
    while its table partition keeps its bucket count; an ``ALTER`` of ``bucket`` changes only the
    count of table partitions written from then on, whose buckets may exceed the topic's
    partitions."""
    return max(bucket, 0) % partitions


def records_partitions(buckets: np.ndarray, partitions: int) -> list[int]:
    """:func:`records_partition` of every bucket in ``buckets``."""
    return (np.maximum(np.asarray(buckets, dtype=np.int64), 0) % partitions).tolist()


def start_marker(config: LogConfig, snapshot_id: int = 0) -> None:
    """Set the marker of a new table's log to ``snapshot_id`` (0: no snapshot yet).

    Called when the table is created, before anything can be committed: every later snapshot is
    then published by its writer or caught up by the next one. (Were the marker left unset, the
    first writers racing with a fenced one could not tell "nothing published yet" from "nothing
    to publish".) A reused topic's old marker is overwritten; the old table's records stay in the
    topic before the offsets of the new table's snapshots."""
    client, group = config.kafka(), marker_group(config.topic)
    retrying(
        lambda: client.commit_group_offset(group, 0, snapshot_id, DEFAULT_REQUEST_TIMEOUT_S),
        f"cannot set the publication marker of {config.describe()}",
    )


class LogPublisher:
    """The transactional producer of one topic in this process (see the module docstring).

    Use :meth:`session` around one commit: it serialises the commits of this process's threads and
    recreates the producer after it was fenced."""

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._producer: Optional[LogProducer] = None
        self._partitions: Optional[int] = None
        self._in_txn = False
        self._was_fatal = False

    # ---- producer lifecycle -------------------------------------------------------------------
    def _ensure(self) -> LogProducer:
        if self._producer is None:
            parts = self.config.topic_partitions()
            if parts is None:
                raise LogSystemError(
                    f"{self.config.describe()} does not exist (create it, or set 'log.system.auto-register')"
                )
            self._partitions = parts
            producer = self.config.producer(transactional_id=f"lakelog-{self.config.topic}")
            try:
                producer.init_transactions()
            except ClientError as e:
                producer.close()
                raise LogSystemError(
                    f"cannot start a transactional producer for {self.config.describe()}: {e}"
                ) from e
            self._producer = producer
        return self._producer

    def _reset(self) -> None:
        """Forget the producer (after it was fenced or failed): the next commit starts a new one."""
        if self._producer is not None:
            if self._in_txn:
                with contextlib.suppress(Exception):  # best effort: a new producer aborts it anyway
                    self._producer.abort(1.0)
            with contextlib.suppress(Exception):  # best effort
                self._producer.close()
        self._producer = None
        self._in_txn = False

    def close(self) -> None:
        with self._lock:
            if self._producer is not None and self._in_txn:
                self.abort()
            self._reset()

    # ---- markers ----------------------------------------------------------------------------------
    def marker(self) -> Optional[int]:
        """The last published snapshot id, None when nothing was ever published."""
        self._ensure()
        client, group = self.config.kafka(), marker_group(self.config.topic)
        return retrying(
            lambda: client.group_offset(group, 0, DEFAULT_REQUEST_TIMEOUT_S),
            f"cannot read the publication marker of {self.config.describe()}",
        )

    # ---- one commit ---------------------------------------------------------------------------------
    def session(self) -> _Session:
        return _Session(self)

    def begin(
        self,
        latest: Optional[Snapshot],
        changes_of: ChangesOf,
        snapshot_of: Callable[[int], Optional[Snapshot]],
    ) -> None:
        """Publish the snapshots after the marker up to ``latest`` that nobody published, then open
        the transaction of the commit to come. A producer fenced by another process's is replaced
        (which fences that one in turn: the table's log has one publisher at a time)."""
        for attempt in range(2):
            try:
                self.catch_up(latest, changes_of, snapshot_of)
                self._guarded(self._begin_txn)
                return
            except LogSystemError:
                if attempt == 1 or not self._was_fatal:
                    raise
                log.info("producer of %s was fenced by another writer; taking over", self.config.describe())

    @property
    def was_fenced(self) -> bool:
        """Whether the last failure was this producer being fenced by another process's."""
        return self._was_fatal

    def catch_up(
        self,
        latest: Optional[Snapshot],
        changes_of: ChangesOf,
        snapshot_of: Callable[[int], Optional[Snapshot]],
    ) -> None:
        """Publish the snapshots after the marker up to ``latest`` that nobody published."""

        def run() -> None:
            self._ensure()
            marker = self.marker()
            target = latest.id if latest is not None else 0
            if marker is None:
                # the marker is set when the table is created; it is gone only when Kafka expired
                # the group's offsets (offsets.retention.minutes after the last commit)
                log.warning(
                    "the publication marker of %s is missing (expired?): snapshots before %s are taken "
                    "as published",
                    self.config.describe(),
                    target,
                )
                marker = target
            if marker < target:
                self._publish_missing(marker, target, changes_of, snapshot_of)

        self._guarded(run)

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run ``call``; any Kafka failure drops the producer (the next use starts a new one, which
        fences and aborts what the old one left open) and raises :class:`LogSystemError`."""
        self._was_fatal = False
        try:
            call()
        except (LogSystemError, BufferError) as e:
            cause = e if isinstance(e, ClientError) else e.__cause__
            self._was_fatal = isinstance(cause, ClientError) and cause.fenced
            self._reset()
            if isinstance(e, LogSystemError) and not isinstance(e, ClientError):
                raise
            raise LogSystemError(f"Kafka transaction for {self.config.describe()} failed: {e}") from e

    def _begin_txn(self) -> None:
        assert self._producer is not None
        self._producer.begin()
        self._in_txn = True

    def _publish_missing(
        self,
        marker: int,
        target: int,
        changes_of: ChangesOf,
        snapshot_of: Callable[[int], Optional[Snapshot]],
    ) -> None:
        self._begin_txn()
        gap: list[int] = []
        for sid in range(marker + 1, target + 1):
            snap = snapshot_of(sid)
            changes = changes_of(snap) if snap is not None else None
            if snap is None or changes is None:
                gap.append(sid)
                continue
            self._produce(snap.commit_user, snap.commit_identifier, snap.commit_kind, changes)
        if gap:
            log.error(
                "snapshots %s-%s of %s expired before their changes reached the log; readers crossing them "
                "will fail naming the gap",
                gap[0],
                gap[-1],
                self.config.table,
            )
            self._produce_gap(gap[0], gap[-1])
        self.commit(target)
        log.warning(
            "published snapshots %s-%s of %s that a failed writer left unpublished",
            marker + 1,
            target,
            self.config.table,
        )

    def _produce_gap(self, first: int, last: int) -> None:
        assert self._producer is not None and self._partitions is not None
        gap = [(GAP_HEADER, f"{first}-{last}".encode())]
        self._producer.send_all((None, None, p, gap) for p in range(self._partitions))

    def produce(self, user: str, identifier: int, commit_kind: str, changes: Sequence[BucketChanges]) -> None:
        """Send one snapshot's changes into the open transaction (call :meth:`end_offsets` after)."""
        self._guarded(lambda: self._produce(user, identifier, commit_kind, changes))

    def _produce(
        self, user: str, identifier: int, commit_kind: str, changes: Sequence[BucketChanges]
    ) -> None:
        config = self.config
        producer = self._producer
        assert producer is not None and self._partitions is not None and self._in_txn
        headers_base = [
            (USER_HEADER, user.encode()),
            (COMMIT_HEADER, str(identifier).encode()),
            (COMMIT_KIND_HEADER, commit_kind.encode()),
        ]
        for ch in changes:
            rows, kinds = ch.rows, ch.kinds
            if config.ignore_delete:
                keep = (kinds == 0) | (kinds == 2)
                rows, kinds = rows.filter(pa.array(keep)), kinds[keep]
            records = encode_changes(rows, kinds, config.primary_keys, upsert=config.upsert)
            schema = (SCHEMA_HEADER, str(ch.schema_id).encode())
            partition = records_partition(ch.bucket, self._partitions)
            # one header list per row kind, shared by its records (the client copies headers)
            by_kind = [[(KIND_HEADER, kind_header(k)), schema, *headers_base] for k in range(4)]
            producer.send_all(
                (key, value, partition, by_kind[kind])
                for key, value, kind in zip(records.keys, records.values, records.kinds.tolist())
            )

    def end_offsets(self) -> dict[int, int]:
        """Flush the open transaction's records; ``{partition: offset after its records}``."""
        out: dict[int, int] = {}
        self._guarded(lambda: out.update(self._end_offsets()))
        return out

    def _end_offsets(self) -> dict[int, int]:
        assert self._producer is not None
        return self._producer.flush()

    def commit(self, snapshot_id: int) -> None:
        """Commit the open transaction with the marker = ``snapshot_id``."""

        def run() -> None:
            assert self._producer is not None
            self._end_offsets()
            self._producer.commit(marker_group(self.config.topic), {0: snapshot_id})
            self._in_txn = False

        self._guarded(run)

    def abort(self) -> None:
        """Abort the open transaction (its records are never visible to read-committed readers)."""
        if self._producer is None or not self._in_txn:
            return
        try:
            self._producer.abort(DEFAULT_REQUEST_TIMEOUT_S)
            self._in_txn = False
        except ClientError:
            self._reset()


class _Session:
    """``with publisher.session():`` one commit at a time in this process."""

    def __init__(self, publisher: LogPublisher) -> None:
        self.publisher = publisher

    def __enter__(self) -> LogPublisher:
        self.publisher._lock.acquire()
        return self.publisher

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is not None:
                self.publisher.abort()
        finally:
            self.publisher._lock.release()


_PUBLISHERS: dict[tuple[str, str], LogPublisher] = {}
_PUBLISHERS_LOCK = threading.Lock()


def publisher_for(config: LogConfig) -> LogPublisher:
    """This process's publisher of ``config``'s topic (one transactional producer per topic)."""
    key = (config.bootstrap_servers, config.topic)
    with _PUBLISHERS_LOCK:
        p = _PUBLISHERS.get(key)
        if p is None or p.config != config:
            p = _PUBLISHERS[key] = LogPublisher(config)
        return p
