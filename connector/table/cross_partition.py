"""Cross-partition upsert: a primary key that does not hold every partition field.

A key lives in one partition at a time. The writer keeps a key index (every live key of the table:
its full primary key, partition and bucket), loaded when it first writes (the *bootstrap*: the key
columns of every bucket of the latest snapshot, merged) and kept up to date by its own writes. Per
row, as Paimon's cross-partition assigner decides (the row kind of the input is not consulted):

* a new key goes to a bucket of its row's partition;
* a key written to the partition it lives in keeps its bucket;
* a key written to another partition: with ``deduplicate`` the key is deleted from its old
  partition (a ``-D`` row there, holding the new row's values under the old partition) and inserted
  into the new one; with ``partial-update`` and ``aggregation`` the row is rewritten into the old
  partition (the key stays); with ``first-row`` the row is dropped.

Within one batch the rows of a key are resolved at once with the same outcome: ``deduplicate`` keeps
the rows of the key's last partition (earlier ones would be deleted again), the others send every
row to the partition the key had, or that of its first row.

The bucket inside a partition is Paimon's: ``bucket = -1`` places a new key in the first bucket of
the partition holding fewer than ``dynamic-bucket.target-row-num`` keys, else a new one (counts
come from the bootstrap; ``dynamic-bucket.max-buckets`` does not apply, as in Paimon); a fixed
``bucket`` hashes the key. Nothing of this index is stored in the table (no index files), as in
Paimon. Keys are compared exactly (Arrow hash joins), never by hash alone.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.bucket import bucket_key_hashes, buckets_from_hashes
from lakelog.connector.format.key_value import VALUE_KIND, RowKind
from lakelog.connector.format.options import MergeEngine
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.kv import group_ends, sort_indices
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.routing import partition_groups
from lakelog.connector.table.scan import plan_splits

__all__ = ["KeyIndex", "BUCKET_COLUMN"]

BUCKET_COLUMN = "__lakelog_bucket"
_PID = "__lakelog_pid"
_ROW = "__lakelog_row"


class KeyIndex:
    """The live keys of a cross-partition table: full primary key -> (partition, bucket).

    Two Arrow tables (a large main one and a small delta of recent changes, merged in when it grows)
    of the key columns, a partition id and a bucket; partitions are interned to ids."""

    def __init__(self, store: TableStore, *, default_buckets: int) -> None:
        self.store = store
        self.pk = list(store.schema.primary_keys)
        self.partition_keys = list(store.schema.partition_keys)
        self.default_buckets = int(default_buckets)  # > 0: fixed buckets per partition; -1: dynamic
        self.target = int(store.options.dynamic_bucket_target_row_num)
        key_fields = [store.schema.arrow_schema().field(k) for k in self.pk]
        self._schema = pa.schema(
            key_fields + [pa.field(_PID, pa.int32()), pa.field(BUCKET_COLUMN, pa.int32())]
        )
        self._main = self._schema.empty_table()
        self._delta = self._schema.empty_table()
        self.partitions: list[bytes] = []
        self._pid: dict[bytes, int] = {}
        self.counts: dict[int, dict[int, int]] = {}  # pid -> bucket -> live keys
        self.fixed_counts: dict[int, int] = {}  # pid -> bucket count (fixed buckets)
        self.snapshot_id: Optional[int] = None  # the snapshot the index was loaded from

    # ---- partitions --------------------------------------------------------------------------------
    def pid(self, partition: bytes) -> int:
        i = self._pid.get(partition)
        if i is None:
            i = self._pid[partition] = len(self.partitions)
            self.partitions.append(partition)
        return i

    @property
    def size(self) -> int:
        return self._main.num_rows + self._delta.num_rows

    @property
    def nbytes(self) -> int:
        return int(self._main.nbytes + self._delta.nbytes)

    # ---- loading -----------------------------------------------------------------------------------
    def bootstrap(
        self, snapshot: Optional[Snapshot], *, skip: Optional[Callable[[bytes], bool]] = None
    ) -> None:
        """Load every live key of ``snapshot`` (except in partitions ``skip`` selects)."""
        self.snapshot_id = snapshot.id if snapshot is not None else None
        splits = [s for s in plan_splits(self.store, snapshot) if skip is None or not skip(s.partition)]
        read = SplitRead(self.store, columns=self.pk)
        workers = max(
            1, int(self.store.options.get(self.store.options.CROSS_PARTITION_UPSERT_BOOTSTRAP_PARALLELISM))
        )
        with ThreadPoolExecutor(max_workers=min(workers, 4)) as pool:
            tables = list(pool.map(lambda s: read.read_splits([s]), splits))
        parts = []
        for split, t in zip(splits, tables):
            pid = self.pid(split.partition)
            if split.total_buckets > 0:
                self.fixed_counts[pid] = split.total_buckets
            if not t.num_rows:
                continue
            per = self.counts.setdefault(pid, {})
            per[split.bucket] = per.get(split.bucket, 0) + t.num_rows
            parts.append(
                t.select(self.pk)
                .append_column(_PID, pa.array(np.full(t.num_rows, pid, np.int32)))
                .append_column(BUCKET_COLUMN, pa.array(np.full(t.num_rows, split.bucket, np.int32)))
            )
        self._main = pa.concat_tables([self._schema.empty_table(), *[p.cast(self._schema) for p in parts]])
        self._delta = self._schema.empty_table()

    # ---- lookup and update ---------------------------------------------------------------------------
    def lookup(self, keys: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(partition id, bucket) of each row of ``keys`` (the key columns), -1 where unknown."""
        n = keys.num_rows
        pid = np.full(n, -1, dtype=np.int32)
        bucket = np.full(n, -1, dtype=np.int32)
        probe = keys.select(self.pk).append_column(_ROW, pa.array(np.arange(n, dtype=np.int64)))
        for part in (self._main, self._delta):  # the delta is newer: it overrides
            if not part.num_rows:
                continue
            hit = probe.join(part, keys=self.pk, join_type="inner", use_threads=False)
            if not hit.num_rows:
                continue
            rows = hit.column(_ROW).to_numpy()
            pid[rows] = hit.column(_PID).to_numpy()
            bucket[rows] = hit.column(BUCKET_COLUMN).to_numpy()
        return pid, bucket

    def upsert(self, keys: pa.Table, pid: np.ndarray, bucket: np.ndarray) -> None:
        """Record distinct ``keys`` at (``pid``, ``bucket``)."""
        if not keys.num_rows:
            return
        new = keys.select(self.pk).append_column(_PID, pa.array(pid, pa.int32()))
        new = new.append_column(BUCKET_COLUMN, pa.array(bucket, pa.int32())).cast(self._schema)
        if self._delta.num_rows:
            kept = self._delta.join(
                new.select(self.pk), keys=self.pk, join_type="left anti", use_threads=False
            )
            new = pa.concat_tables([kept.select(self._schema.names).cast(self._schema), new])
        self._delta = new
        if self._delta.num_rows * 8 > max(self._main.num_rows, 1 << 14):
            kept = self._main.join(
                self._delta.select(self.pk), keys=self.pk, join_type="left anti", use_threads=False
            )
            self._main = pa.concat_tables([kept.select(self._schema.names).cast(self._schema), self._delta])
            self._delta = self._schema.empty_table()

    # ---- bucket choice -------------------------------------------------------------------------------
    def new_buckets(self, pid: int, hashes: np.ndarray) -> np.ndarray:
        """Buckets for keys new to partition ``pid`` (in arrival order; ``hashes`` of their trimmed
        primary key, for fixed buckets)."""
        n = len(hashes)
        fixed = self.fixed_counts.get(pid, self.default_buckets)
        if fixed > 0:
            self.fixed_counts[pid] = fixed
            out = buckets_from_hashes(hashes, fixed)
        else:
            counts = self.counts.setdefault(pid, {})
            ids: list[int] = []
            room: list[int] = []
            for b in sorted(counts):
                if counts[b] < self.target:
                    ids.append(b)
                    room.append(self.target - counts[b])
            candidate = 0
            while sum(room) < n:
                if candidate not in counts:
                    ids.append(candidate)
                    room.append(self.target)
                candidate += 1
            ends = np.cumsum(np.asarray(room, dtype=np.int64))
            out = np.asarray(ids, dtype=np.int32)[np.searchsorted(ends, np.arange(n), side="right")]
        self.count(pid, out, +1)
        return out.astype(np.int32)

    def count(self, pid: int, buckets: np.ndarray, delta: int) -> None:
        if not len(buckets):
            return
        per = self.counts.setdefault(pid, {})
        ids, n = np.unique(buckets, return_counts=True)
        for b, c in zip(ids.tolist(), n.tolist()):
            per[b] = per.get(b, 0) + delta * c

    # ---- resolution of a batch -----------------------------------------------------------------------
    def resolve(
        self, table: pa.Table, engine: MergeEngine, *, locked: Optional[Callable[[bytes], bool]] = None
    ) -> pa.Table:
        """The rows to write for a batch (the table's columns plus ``_VALUE_KIND`` and the writer's
        arrival column): rows moved, rewritten or dropped and ``-D`` rows added as the module
        docstring says, with a :data:`BUCKET_COLUMN` of their buckets; the index updated.

        ``locked(partition)``: partitions this writer may not delete from (an overwrite's writer
        keeps out of the partitions it does not replace): a key living in one raises."""
        n = table.num_rows
        if n == 0:
            return table.append_column(BUCKET_COLUMN, pa.array(np.empty(0, np.int32)))
        row_pid = np.empty(n, dtype=np.int32)
        for g in partition_groups(self.store, table):
            row_pid[g.rows] = self.pid(g.partition)
        # key groups: rows of one key, in arrival order
        keys = table.select(self.pk)
        order = sort_indices(keys, self.pk)
        ends = np.flatnonzero(group_ends(keys.take(pa.array(order)), self.pk))
        starts = np.concatenate([[0], ends[:-1] + 1])
        kid = np.empty(n, dtype=np.int64)
        kid[order] = np.repeat(np.arange(len(ends)), ends - starts + 1)
        first, last = order[starts], order[ends]
        old_pid, old_bucket = self.lookup(keys.take(pa.array(first)))
        known = old_pid >= 0
        if locked is not None:
            for i in np.flatnonzero(known).tolist():
                if locked(self.partitions[old_pid[i]]):
                    key = {k: keys.column(k)[int(first[i])].as_py() for k in self.pk}
                    raise InvalidInputError(
                        f"key {key} of {self.store.path} lives in a partition this overwrite does not "
                        "replace; a cross-partition key cannot move during an overwrite"
                    )
        if engine == MergeEngine.DEDUPLICATE:
            target = row_pid[last]
        else:
            target = np.where(known, old_pid, row_pid[first])
        keep = np.ones(n, dtype=bool)
        if engine in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW):
            keep = row_pid == target[kid]
        # bucket of each key in its target partition
        key_bucket = np.where(known & (old_pid == target), old_bucket, -1).astype(np.int32)
        fresh = np.flatnonzero(key_bucket < 0)
        if len(fresh):
            fresh = fresh[np.argsort(first[fresh], kind="stable")]
            trimmed = self.store.key_names
            hashes = bucket_key_hashes(table.take(pa.array(first[fresh])), trimmed, self.store.key_types)
            for p in np.unique(target[fresh]).tolist():
                sel = target[fresh] == p
                key_bucket[fresh[sel]] = self.new_buckets(int(p), hashes[sel])
        moved = np.flatnonzero(known & (old_pid != target) & (engine == MergeEngine.DEDUPLICATE))
        for p in np.unique(old_pid[moved]).tolist():
            self.count(int(p), old_bucket[moved][old_pid[moved] == p], -1)
        changed = np.flatnonzero(~known | (old_pid != target))
        self.upsert(keys.take(pa.array(first[changed])), target[changed], key_bucket[changed])
        out = table
        if engine in (MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATION):
            out = self._with_partitions(out, target[kid], row_pid)
        out = out.append_column(BUCKET_COLUMN, pa.array(key_bucket[kid], pa.int32()))
        if not keep.all():
            out = out.filter(pa.array(keep))
        if len(moved):
            deletes = table.take(pa.array(last[moved]))
            deletes = self._with_partitions(deletes, old_pid[moved], row_pid[last[moved]])
            i = deletes.schema.get_field_index(VALUE_KIND)
            deletes = deletes.set_column(
                i, deletes.schema.field(i), pa.array(np.full(len(moved), RowKind.DELETE, np.int8))
            )
            deletes = deletes.append_column(BUCKET_COLUMN, pa.array(old_bucket[moved], pa.int32()))
            out = pa.concat_tables([out, deletes])
        return out

    def _with_partitions(self, table: pa.Table, pids: np.ndarray, current: np.ndarray) -> pa.Table:
        """``table`` with the partition columns of each row set to partition ``pids[row]``."""
        if not self.partition_keys or bool((pids == current).all()):
            return table
        distinct = np.unique(pids)
        slot = np.searchsorted(distinct, pids)
        values = [self.store.partition_values(self.partitions[p]) for p in distinct.tolist()]
        for j, k in enumerate(self.partition_keys):
            i = table.schema.get_field_index(k)
            field = table.schema.field(i)
            column = pa.array([v[j] for v in values], field.type).take(pa.array(slot))
            table = table.set_column(i, field, column)
        return table


def locked_by(scope: Optional[Callable[[bytes], bool]]) -> Optional[Callable[[bytes], bool]]:
    """For an overwrite replacing the partitions ``scope`` selects: the partitions it must not touch."""
    if scope is None:
        return None
    return lambda p: not scope(p)
