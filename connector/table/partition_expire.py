"""Partition expiration (``partition.expiration-time``), as Paimon's values-time strategy does it.

A partition's time comes from its values: ``partition.timestamp-pattern`` builds a timestamp string
from them (``$dt $hour:00:00``; default: the first partition field's value) and
``partition.timestamp-formatter`` reads it (a Java ``DateTimeFormatter`` pattern such as
``yyyyMMdd``; default: ``yyyy-MM-dd`` with an optional `` HH:mm:ss``). A partition whose time is
before now (local time, as Paimon's ``LocalDateTime.now()``) minus the expiration time is dropped:
one commit deletes every file it holds. A partition whose values do not parse is kept (and
logged), never guessed at.

Writers check at commit, at most once per ``partition.expiration-check-interval`` (default 1 h) per
table and process, unless ``write-only`` is set (as Paimon's writers; dedicated compactions check
then); :func:`expire_partitions` (``Table.expire_partitions()``) checks at once.

The drop is committed as a COMPACT snapshot that only deletes files: readers skip it the way
Paimon's readers skip the OVERWRITE snapshot Paimon writes for it (a streaming read does not see
the dropped rows as deletions), and a concurrent compaction of the same files makes it retry.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Any, Optional

from lakelog.connector.errors import CommitConflictError, LakelogError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.lock import LockTimeoutError
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.partition import partition_time, partition_value_string
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import TableCommit

__all__ = ["expire_partitions", "maybe_expire_partitions"]

log = logging.getLogger(__name__)

_ATTEMPTS = 5


def _value_text(v: Any, store: TableStore, i: int) -> str:
    if v is None:
        return ""
    return partition_value_string(v, store.partition_types[i], legacy=False)


def expire_partitions(store: TableStore, *, now: Optional[datetime.datetime] = None) -> list[dict[str, Any]]:
    """Drop the partitions older than ``partition.expiration-time`` now; return their values
    (``{field: value}``), oldest first. Nothing happens when the option is not set."""
    opts = store.options
    ttl = opts.get(CoreOptions.PARTITION_EXPIRATION_TIME)
    keys = list(store.schema.partition_keys)
    if ttl is None or not keys:
        return []
    pattern = opts.get(CoreOptions.PARTITION_TIMESTAMP_PATTERN)
    formatter = opts.get(CoreOptions.PARTITION_TIMESTAMP_FORMATTER)
    limit = (now or datetime.datetime.now()) - datetime.timedelta(milliseconds=ttl.millis)
    for _ in range(_ATTEMPTS):
        latest = store.snapshot_manager.latest()
        by_partition: dict[bytes, list[Any]] = {}
        for e in store.live_entries(latest):
            by_partition.setdefault(e.partition, []).append(e)
        expired: list[tuple[datetime.datetime, bytes]] = []
        for partition in by_partition:
            values = store.partition_values(partition)
            texts = [_value_text(v, store, i) for i, v in enumerate(values)]
            when = partition_time(keys, texts, pattern, formatter)
            if when is None:
                log.warning("partition %s of %s: no time in %r; not expired", texts, store.path, texts)
            elif when < limit:
                expired.append((when, partition))
        if not expired:
            return []
        expired.sort()
        messages = []
        for _, partition in expired:
            buckets: dict[int, list[Any]] = {}
            for e in by_partition[partition]:
                buckets.setdefault(e.bucket, []).append(e)
            for bucket, entries in sorted(buckets.items()):
                messages.append(
                    CommitMessage(partition, bucket, entries[0].total_buckets,
                                  compact_before=[e.file for e in entries])
                )
        try:
            TableCommit(store).commit(messages)
        except LockTimeoutError:
            raise  # the lock stayed taken for all of 'lock-acquire-timeout': no race to retry
        except CommitConflictError:
            continue  # a compaction rewrote some of those files meanwhile: look again
        done = [dict(zip(keys, store.partition_values(p))) for _, p in expired]
        log.info("expired partitions %s of %s (older than %s)", done, store.path, limit)
        return done
    raise CommitConflictError(
        f"partition expiration of {store.path} lost {_ATTEMPTS} races with concurrent compactions"
    )


_last_check: dict[str, float] = {}
_lock = threading.Lock()


def maybe_expire_partitions(store: TableStore, *, compactor: bool = False) -> list[dict[str, Any]]:
    """What a writer runs after a commit: :func:`expire_partitions` when the table sets
    ``partition.expiration-time``, is not ``write-only`` (a dedicated compaction, ``compactor``,
    expires for write-only writers), and this process has not checked the table within
    ``partition.expiration-check-interval``. A failure is logged, not raised: the commit is done,
    and the next check tries again."""
    opts = store.options
    if opts.get(CoreOptions.PARTITION_EXPIRATION_TIME) is None or (opts.write_only and not compactor):
        return []
    interval = opts.get(CoreOptions.PARTITION_EXPIRATION_CHECK_INTERVAL).seconds
    now = time.monotonic()
    with _lock:
        last = _last_check.get(store.location)
        if last is not None and now - last < interval:
            return []
        _last_check[store.location] = now
    try:
        return expire_partitions(store)
    except LakelogError as e:
        log.warning("partition expiration of %s failed: %s", store.path, e)
        return []
