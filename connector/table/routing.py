"""Routing rows to (partition, bucket), vectorised: the rows of a batch grouped by partition with one
stable sort of the partition columns, then each partition's rows by bucket.

A fixed-bucket partition's bucket count is the count its files record (``_TOTAL_BUCKETS``), so a
table rescaled by ``ALTER TABLE ... SET ('bucket' = ...)`` keeps routing the keys of its older
partitions as they were written; only partitions without files take the table's current count.
:class:`PartitionBucketCounts` resolves those counts from a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import CorruptFileError, InvalidInputError
from lakelog.connector.format.binary_row import serialize_row
from lakelog.connector.format.bucket import bucket_key_hashes, buckets_from_hashes
from lakelog.connector.format.manifest import ManifestEntry
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.kv import group_ends, sort_indices

__all__ = [
    "PartitionGroup",
    "partition_groups",
    "split_by_bucket",
    "PartitionBucketCounts",
    "bucket_groups",
    "BucketGroup",
]


@dataclass
class PartitionGroup:
    """The rows (indices, in arrival order) of one partition of a batch."""

    values: tuple[Any, ...]
    partition: bytes
    rows: np.ndarray


def partition_groups(store: TableStore, table: pa.Table) -> list[PartitionGroup]:
    """The rows of ``table`` grouped by partition (one stable sort of the partition columns)."""
    keys = list(store.schema.partition_keys)
    n = table.num_rows
    if n == 0:
        return []
    if not keys:
        return [PartitionGroup((), serialize_row([], []), np.arange(n, dtype=np.int64))]
    cols = table.select(keys)
    order = sort_indices(cols, keys)
    ordered = cols.take(pa.array(order))
    ends = np.flatnonzero(group_ends(ordered, keys))
    out = []
    start = 0
    types = store.partition_types
    for end in ends.tolist():
        stop = end + 1
        values = tuple(ordered.column(k)[start].as_py() for k in keys)
        out.append(PartitionGroup(values, serialize_row(list(values), types), order[start:stop]))
        start = stop
    return out


def split_by_bucket(rows: np.ndarray, buckets: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(bucket, rows)`` for each bucket of ``buckets`` (one per row of ``rows``), rows kept in order."""
    if not len(rows):
        return
    order = np.argsort(buckets, kind="stable")
    ordered = buckets[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    for part in np.split(np.arange(len(rows)), cuts):
        yield int(ordered[part[0]]), rows[order[part]]


class PartitionBucketCounts:
    """The bucket count of each partition of a fixed-bucket table: what its live files record, else
    ``default`` (the count the writer was started with). Partitions are looked up once, from the
    snapshot given to :meth:`learn` (or the latest one). ``rewrite=True``: every partition takes
    ``default`` (an overwrite rewrites its partitions with the table's count)."""

    def __init__(self, store: TableStore, default: int, *, rewrite: bool = False) -> None:
        self.store = store
        self.default = int(default)
        self.rewrite = rewrite
        self._counts: dict[bytes, int] = {}

    def known(self, partition: bytes) -> bool:
        return partition in self._counts

    def set(self, partition: bytes, count: int) -> None:
        self._counts[partition] = int(count)

    def forget(self, partition: bytes) -> None:
        self._counts.pop(partition, None)

    def learn(self, partitions: Iterable[bytes], entries: Sequence[ManifestEntry]) -> None:
        """Record the counts of ``partitions`` from live ``entries`` (of one snapshot)."""
        wanted = set(partitions)
        if self.rewrite:
            self._counts.update(dict.fromkeys(wanted, self.default))
            return
        found: dict[bytes, set[int]] = {}
        for e in entries:
            if e.partition in wanted and e.total_buckets > 0:
                found.setdefault(e.partition, set()).add(e.total_buckets)
        for p in wanted:
            totals = found.get(p)
            if totals is not None and len(totals) > 1:
                raise CorruptFileError(
                    f"the live files of one partition of {self.store.path} record different bucket "
                    f"counts {sorted(totals)}; a partition must be written with one count"
                )
            self._counts[p] = next(iter(totals)) if totals else self.default

    def learn_missing(self, partitions: Iterable[bytes], snapshot: Optional[Snapshot] = None) -> None:
        """Learn the counts of those of ``partitions`` not known yet, all from one snapshot (default:
        the latest), reading its live entries once."""
        unknown = [p for p in dict.fromkeys(partitions) if p not in self._counts]
        if unknown and self.rewrite:
            self._counts.update(dict.fromkeys(unknown, self.default))
        elif unknown:
            snap = snapshot if snapshot is not None else self.store.snapshot_manager.latest()
            self.learn(unknown, self.store.live_entries(snap))

    def count(self, partition: bytes, snapshot: Optional[Snapshot] = None) -> int:
        c = self._counts.get(partition)
        if c is None and self.rewrite:
            return self.default
        if c is None:
            snap = snapshot if snapshot is not None else self.store.snapshot_manager.latest()
            self.learn([partition], self.store.live_entries(snap))
            c = self._counts[partition]
        return c


BucketGroup = tuple[tuple[Any, ...], bytes, int, np.ndarray]


def bucket_groups(
    store: TableStore, table: pa.Table, counts: Optional[PartitionBucketCounts] = None
) -> list[BucketGroup]:
    """The rows of ``table`` grouped by (partition, bucket) for a fixed-bucket or unaware-bucket
    table: one ``(partition values, serialized partition, bucket, row indices)`` per group, indices
    in arrival order. ``counts`` gives each partition's bucket count (default: the table's current
    ``bucket`` for every partition, right only for partitions never rescaled). Dynamic bucket modes
    and cross-partition keys need an assigner (:class:`~lakelog.connector.table.dynamic_bucket.
    DynamicBucketAssigner`, or a :class:`~lakelog.connector.table.write.TableWrite`) and are refused."""
    mode = store.schema.bucket_mode
    cross = store.schema.cross_partition_update
    if mode in (BucketMode.HASH_DYNAMIC, BucketMode.KEY_DYNAMIC) or cross:
        what = "a cross-partition primary key" if cross else f"{mode} bucket mode"
        raise InvalidInputError(
            f"table {store.path} has {what}: rows get their buckets from an assigner (DynamicBucketAssigner, "
            "or one TableWrite with its key index), not from a hash of the bucket key"
        )
    out: list[BucketGroup] = []
    keys = list(store.schema.bucket_keys) if mode == BucketMode.HASH_FIXED else []
    hashes = None
    if keys:
        hashes = bucket_key_hashes(table, keys, store.field_types(keys))
    groups = partition_groups(store, table)
    if hashes is not None and counts is not None:
        counts.learn_missing(g.partition for g in groups)  # one snapshot read for a batch's new partitions
    for g in groups:
        if hashes is None:
            out.append((g.values, g.partition, 0, g.rows))
            continue
        n = counts.count(g.partition) if counts is not None else store.options.bucket
        buckets = buckets_from_hashes(hashes[g.rows], n)
        out += [(g.values, g.partition, b, rows) for b, rows in split_by_bucket(g.rows, buckets)]
    return out
