"""Lookup tables sharded by bucket: each parallel lookup loads and refreshes only its share.

A fixed-bucket table puts a key in bucket ``abs(hash % n)`` (Paimon's hash of the bucket key, ``n``
the partition's bucket count). When the lookup key holds the bucket key, a probe's bucket follows
from the probe alone, so a join can send every probe to the subtask that owns its bucket and each
subtask holds about the table over the parallelism (Paimon's shuffle lookup join, FLIP-462).

* :class:`Shard` (``index`` of ``count`` subtasks, routing bucket count ``buckets``): the rows one
  subtask holds, those whose routing bucket ``abs(hash % buckets)`` is ``index`` modulo ``count``.
  A partition written with ``buckets`` buckets (the usual case) is loaded bucket by bucket, only
  the buckets of the shard; a partition rescaled to another count is read whole and its rows are
  kept by hash, so a rescale never makes a shard miss a row.
* :class:`KeyRouter`: the routing bucket of a probe key, per record (a few microseconds) or for an
  Arrow batch.
* :func:`routing_buckets`: whether lookups on a key can be sharded, and why not.
* :func:`worth_sharding`: the default: shard a dimension whose data files hold at least
  :data:`SHARD_BYTES`. Routing costs a stage of its own (in SQL a vectorised function, a trip
  through a DataStream and a shuffle: measured here, a sharded SQL join of a 200k-row dimension
  ran at 0.6x-0.7x the unsharded one's probes a second), which pays off only when the
  dimension's copy in every subtask is what limits the job.

No pyflink here: :mod:`lakelog.operators.lookup` routes the probes of a Flink job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.bucket import bucket_key_hash, bucket_key_hashes, buckets_from_hashes
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import DataType

__all__ = ["Shard", "KeyRouter", "routing_buckets", "worth_sharding", "SHARD_BYTES"]

SHARD_BYTES = 64 << 20  # data files of a dimension that a lookup join shards by default (Parquet bytes)


@dataclass(frozen=True)
class Shard:
    """Subtask ``index`` of ``count``: it holds the rows whose routing bucket (``abs(hash %
    buckets)`` of the bucket key) is ``index`` modulo ``count``."""

    index: int
    count: int
    buckets: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count or self.buckets < 1:
            raise OptionError(f"invalid lookup shard {self.index} of {self.count} ({self.buckets} buckets)")

    def owns(self, bucket: int) -> bool:
        """Does this shard hold routing bucket ``bucket``?"""
        return bucket % self.count == self.index

    def take(self, bucket: int, total_buckets: int) -> Optional[bool]:
        """For a (partition, bucket) written with ``total_buckets`` buckets: True when all of its rows
        are this shard's, False when none are, None when they must be picked by hash."""
        if total_buckets == self.buckets:
            return self.owns(bucket)
        return None


def routing_buckets(store: TableStore, key_columns: Sequence[str]) -> tuple[Optional[int], str]:
    """(the table's bucket count, "") when lookups on ``key_columns`` can be sharded by bucket, else
    (None, why not)."""
    schema = store.schema
    if schema.cross_partition_update:
        return None, "its primary key does not hold the partition key (a key may move between partitions)"
    if schema.bucket_mode != BucketMode.HASH_FIXED:
        return None, f"it has {schema.bucket_mode} bucket mode (a key's bucket is not a hash of the key)"
    missing = [c for c in schema.bucket_keys if c not in key_columns]
    if missing:
        return None, f"the lookup key {list(key_columns)} does not hold bucket key column(s) {missing}"
    return store.options.bucket, ""


def worth_sharding(store: TableStore) -> bool:
    """Do the latest snapshot's data files hold at least :data:`SHARD_BYTES`?"""
    snap = store.snapshot_manager.latest()
    if snap is None:
        return False
    return sum(e.file.file_size for e in store.live_entries(snap)) >= SHARD_BYTES


@dataclass(frozen=True)
class KeyRouter:
    """The routing bucket of probe keys given in lookup-key order. Picklable (plain values)."""

    positions: tuple[int, ...]  # of the bucket key columns in the lookup key
    names: tuple[str, ...]  # the bucket key columns
    types: tuple[DataType, ...]
    buckets: int

    @classmethod
    def of(cls, store: TableStore, key_columns: Sequence[str], buckets: Optional[int] = None) -> KeyRouter:
        """The router of lookups on ``key_columns`` (``buckets``: the routing bucket count, default
        the table's ``bucket``); OptionError naming why when they cannot be sharded."""
        n, why = routing_buckets(store, key_columns)
        if n is None:
            raise OptionError(f"lookups on {store.path} cannot be sharded by bucket: {why}")
        names = list(store.schema.bucket_keys)
        keys = list(key_columns)
        types = tuple(store.field_types(names))
        return cls(tuple(keys.index(c) for c in names), tuple(names), types, buckets or n)

    def bucket_of(self, key: Sequence[Any]) -> int:
        """The routing bucket of one probe key; -1 for a key that matches no row (a null in it, or a
        value the column's type cannot hold): any shard answers it."""
        values = [key[i] for i in self.positions]
        if any(v is None for v in values):
            return -1
        try:
            h = bucket_key_hash(values, self.types)
        except InvalidInputError:
            return -1
        return abs(h) % self.buckets  # = abs(h % buckets) with Java's remainder

    def buckets_of(self, table: pa.Table) -> np.ndarray:
        """The routing bucket of every row of ``table`` (which holds the bucket key columns)."""
        return buckets_from_hashes(bucket_key_hashes(table, self.names, self.types), self.buckets)

    def owned(self, table: pa.Table, shard: Shard) -> np.ndarray:
        """A mask of the rows of ``table`` that ``shard`` holds."""
        return (self.buckets_of(table) % shard.count) == shard.index
