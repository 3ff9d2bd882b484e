"""Dynamic bucket mode (``bucket = -1`` on a primary-key table that holds every partition field):
Paimon's hash index, assigned and maintained in numpy.

* :class:`DynamicBucketAssigner` decides the bucket of each row: a key whose hash the partition's
  index knows stays in its bucket; a new key goes to the first bucket of its assigner that holds
  fewer than ``dynamic-bucket.target-row-num`` hashes (ascending ids), else to a new bucket (the
  smallest free id of its assigner), and once ``dynamic-bucket.max-buckets`` is reached to a random
  bucket of its assigner. Keys are spread over ``num_assigners`` assigners as Paimon's Flink sink
  spreads them (``assigner_of``); an embedded writer runs all of them (``dynamic-bucket.initial-buckets``,
  default 1), a Flink subtask one (``assign_id``). The index of a partition is loaded from the latest
  snapshot's ``HASH`` files the first time the partition is seen.
* :class:`BucketHashIndex` keeps one bucket's ``HASH`` file: every key hash ever written to the
  bucket (deletions included, as Paimon's writers do), written anew at each commit that added one.

A key's hash is Paimon's ``BinaryRow.hashCode()`` of its trimmed primary key
(:func:`key_hashes`). Everything runs over int32 arrays: an index is a sorted hash array beside a
bucket array (6 bytes a key), new hashes wait in a small sorted delta merged in when it grows.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LakelogError
from lakelog.connector.format.bucket import bucket_key_hashes, murmur3_32_rows
from lakelog.connector.format.index_file import (
    HASH_INDEX,
    IndexFileMeta,
    IndexManifestEntry,
    encode_hash_index,
    read_hash_index,
)
from lakelog.connector.format.manifest_files import _Namer
from lakelog.connector.format.store import TableStore

__all__ = [
    "MAX_BUCKET_ID",
    "key_hashes",
    "partition_hash",
    "assigner_of",
    "PartitionIndex",
    "DynamicBucketAssigner",
    "AssignerState",
    "BucketHashIndex",
    "write_hash_index",
]

#: Bucket ids are Java shorts in Paimon's index: 0 .. 32766 when ``max-buckets`` is unlimited.
MAX_BUCKET_ID = 32766
_DELTA_FRACTION = 8  # merge the delta into the main arrays once it holds 1/8 of them


class TooManyBucketsError(LakelogError):
    """A partition ran out of bucket ids (raise ``dynamic-bucket.target-row-num``)."""


def key_hashes(store: TableStore, table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Paimon's key hash of each row: ``BinaryRow.hashCode()`` of its trimmed primary key (int32)."""
    return bucket_key_hashes(table, store.key_names, store.key_types)


def partition_hash(partition: bytes) -> int:
    """``BinaryRow.hashCode()`` of a serialized partition (without its 4-byte arity prefix)."""
    row = np.frombuffer(partition[4:], dtype=np.uint8).reshape(1, -1)
    return int(murmur3_32_rows(row)[0])


def sorted_unique(hashes: np.ndarray) -> np.ndarray:
    """``hashes`` as a sorted array of distinct int32 (a no-op copy-free check for files lakelog
    wrote, which are sorted already)."""
    h = np.asarray(hashes, dtype=np.int32)
    if len(h) < 2 or bool((h[1:] > h[:-1]).all()):
        return h
    return np.unique(h)


_RECENT_BYTES = 64 << 20
_recent: OrderedDict[str, np.ndarray] = OrderedDict()
_recent_bytes = 0
_recent_lock = threading.Lock()


def remember_hash_file(path: str, hashes: np.ndarray) -> None:
    """Keep the sorted hashes of a HASH file this process just wrote, so that its committer does
    not read it back (files never change: the path is a safe key)."""
    global _recent_bytes
    with _recent_lock:
        _recent[path] = hashes
        _recent_bytes += hashes.nbytes
        while _recent_bytes > _RECENT_BYTES and _recent:
            _, old = _recent.popitem(last=False)
            _recent_bytes -= old.nbytes


def read_sorted_hashes(store: TableStore, entry: IndexManifestEntry) -> np.ndarray:
    """The sorted distinct hashes of a HASH file (from memory when this process wrote it)."""
    path = store.index_file_path(entry)
    with _recent_lock:
        known = _recent.get(path)
    if known is not None:
        return known
    return sorted_unique(read_hash_index(store.file_io, path))


def _java_abs_mod(values: np.ndarray | int, n: int) -> np.ndarray:
    return np.abs(np.fmod(np.asarray(values, dtype=np.int64), n))


def assigner_of(part_hash: int, hashes: np.ndarray, num_channels: int, num_assigners: int) -> np.ndarray:
    """The assigner channel Paimon's sink sends each key to: one partition's keys go to
    ``num_assigners`` consecutive channels from ``abs(part_hash % num_channels)``."""
    start = int(_java_abs_mod(part_hash, num_channels))
    return ((start + _java_abs_mod(hashes, num_assigners)) % num_channels).astype(np.int32)


def _merge_sorted(
    a: np.ndarray, ab: np.ndarray, b: np.ndarray, bb: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Merge two disjoint sorted hash arrays with their bucket arrays."""
    hashes = np.concatenate([a, b])
    buckets = np.concatenate([ab, bb])
    order = np.argsort(hashes, kind="stable")
    return hashes[order], buckets[order]


@dataclass
class PartitionIndex:
    """The key hashes of one partition and their buckets: sorted arrays (int32 hashes, int16
    buckets) plus a small sorted delta, and the number of hashes per bucket."""

    hashes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    buckets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int16))
    delta_hashes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    delta_buckets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int16))
    counts: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def of(
        per_bucket: Iterable[tuple[int, np.ndarray]],
        mine: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    ) -> PartitionIndex:
        """The index of a partition whose bucket ``b`` holds the hashes ``h`` for each ``(b, h)``.
        ``mine(hashes)`` selects the hashes to hold (an assigner subtask's own); the counts of the
        buckets are those of their whole files."""
        hs: list[np.ndarray] = []
        bs: list[np.ndarray] = []
        counts: dict[int, int] = {}
        for bucket, h in per_bucket:
            u = sorted_unique(h)
            counts[bucket] = counts.get(bucket, 0) + len(u)
            if mine is not None:
                u = u[mine(u)]
            hs.append(u)
            bs.append(np.full(len(u), bucket, dtype=np.int16))
        if not hs:
            return PartitionIndex()
        hashes, buckets = np.concatenate(hs), np.concatenate(bs)
        order = np.argsort(hashes, kind="stable")
        hashes, buckets = hashes[order], buckets[order]
        # a hash in two buckets (two writers raced): the lower bucket wins, as a fresh load would
        keep = np.ones(len(hashes), dtype=bool)
        keep[1:] = hashes[1:] != hashes[:-1]
        return PartitionIndex(hashes[keep], buckets[keep], counts=counts)

    @property
    def size(self) -> int:
        return len(self.hashes) + len(self.delta_hashes)

    @property
    def nbytes(self) -> int:
        return int(
            self.hashes.nbytes + self.buckets.nbytes + self.delta_hashes.nbytes + self.delta_buckets.nbytes
        )

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each hash, -1 where the index does not know it."""
        out = np.full(len(hashes), -1, dtype=np.int32)
        todo = np.arange(len(hashes))
        for keys, values in ((self.delta_hashes, self.delta_buckets), (self.hashes, self.buckets)):
            if not len(keys) or not len(todo):
                continue
            h = hashes[todo]
            pos = np.searchsorted(keys, h)
            pos[pos == len(keys)] = 0
            hit = keys[pos] == h
            out[todo[hit]] = values[pos[hit]]
            todo = todo[~hit]
        return out

    def add(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Record new (not yet known, distinct) hashes in ``buckets``."""
        if not len(hashes):
            return
        order = np.argsort(hashes, kind="stable")
        self.delta_hashes, self.delta_buckets = _merge_sorted(
            self.delta_hashes, self.delta_buckets, hashes[order], buckets[order].astype(np.int16)
        )
        ids, n = np.unique(buckets, return_counts=True)
        for b, c in zip(ids.tolist(), n.tolist()):
            self.counts[b] = self.counts.get(b, 0) + c
        if len(self.delta_hashes) * _DELTA_FRACTION > len(self.hashes):
            self.hashes, self.buckets = _merge_sorted(
                self.hashes, self.buckets, self.delta_hashes, self.delta_buckets
            )
            self.delta_hashes = np.empty(0, np.int32)
            self.delta_buckets = np.empty(0, np.int16)


@dataclass
class AssignerState:
    """What an assigner assigned since its partitions were loaded, picklable (a Flink operator's
    checkpointed state): after a restart :meth:`DynamicBucketAssigner.restore` loads the table's
    index and adds these, so keys whose rows are not committed yet keep their buckets."""

    assigned: dict[bytes, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class DynamicBucketAssigner:
    """Assigns buckets to the keys of a dynamic-bucket table (see the module docstring).

    ``num_assigners`` / ``assign_id`` / ``num_channels`` describe where this assigner sits among
    a Flink sink's assigner subtasks (Paimon's ``HashBucketAssigner``); the defaults run every
    assigner in one object, as an embedded writer does. Picklable: its partitions' indexes are
    dropped and loaded again from the table on the other side. With ``keep_state`` it remembers its
    assignments, so that :meth:`state` (checkpointed by a Flink operator) carries those not yet
    committed; :meth:`prune_committed` forgets the committed ones."""

    def __init__(
        self,
        store: TableStore,
        *,
        num_assigners: Optional[int] = None,
        assign_id: Optional[int] = None,
        num_channels: Optional[int] = None,
        seed: Optional[int] = None,
        keep_state: bool = False,
    ) -> None:
        opts = store.options
        self.store = store
        self.target = int(opts.dynamic_bucket_target_row_num)
        max_buckets = int(opts.dynamic_bucket_max_buckets)
        self.max_bucket_id = MAX_BUCKET_ID if max_buckets == -1 else max_buckets - 1
        self.unlimited = max_buckets == -1
        initial = opts.dynamic_bucket_initial_buckets
        self.num_assigners = int(num_assigners if num_assigners is not None else (initial or 1))
        self.num_channels = int(num_channels if num_channels is not None else self.num_assigners)
        self.assign_id = assign_id  # None: every assigner
        if self.num_assigners < 1 or self.num_channels < 1:
            raise ValueError("num_assigners and num_channels must be at least 1")
        self._rng = np.random.default_rng(seed)
        self._partitions: dict[bytes, PartitionIndex] = {}
        self.keep_state = keep_state  # remember assignments for state() (a Flink operator's)
        self._assigned: dict[bytes, list[tuple[np.ndarray, np.ndarray]]] = {}

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_partitions"] = {}
        return state

    # ---- loading ------------------------------------------------------------------------------
    def loaded(self, partition: bytes) -> bool:
        return partition in self._partitions

    def load(self, partition: bytes, entries: Sequence[IndexManifestEntry]) -> None:
        """Load ``partition``'s index from its ``HASH`` entries (of one snapshot's index manifest)."""
        per_bucket = []
        for e in entries:
            if e.partition == partition and e.index_file.index_type == HASH_INDEX:
                per_bucket.append((e.bucket, read_sorted_hashes(self.store, e)))
        mine = None
        if self.assign_id is not None:  # a subtask holds the hashes routed to it only (as Paimon's)
            start, me = partition_hash(partition), self.assign_id

            def mine(h: np.ndarray) -> np.ndarray:
                return assigner_of(start, h, self.num_channels, self.num_assigners) == me

        index = PartitionIndex.of(per_bucket, mine)
        for hashes, buckets in self._assigned.get(partition, []):
            known = index.lookup(hashes)
            index.add(hashes[known < 0], buckets[known < 0])
        self._partitions[partition] = index

    def load_empty(self, partition: bytes) -> None:
        """Start ``partition`` from no keys (an overwrite rewrites it from scratch)."""
        self._partitions[partition] = PartitionIndex()

    def forget(self, partition: bytes) -> None:
        """Drop a partition's index (it is loaded again when next seen)."""
        self._partitions.pop(partition, None)
        self._assigned.pop(partition, None)

    def index(self, partition: bytes) -> PartitionIndex:
        index = self._partitions.get(partition)
        if index is None:
            _, entries = self.store.on_latest(self.store.index_entries)
            self.load(partition, entries)
            index = self._partitions[partition]
        return index

    @property
    def nbytes(self) -> int:
        """Memory the loaded indexes hold."""
        return sum(p.nbytes for p in self._partitions.values())

    # ---- assignment -----------------------------------------------------------------------------
    def assign(self, partition: bytes, hashes: np.ndarray) -> np.ndarray:
        """The bucket (int32) of each key hash of one partition, in arrival order: known keys keep
        their bucket, new keys are placed and remembered."""
        return self.assign_new(partition, hashes)[0]

    def assign_new(self, partition: bytes, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`assign`'s buckets, a mask of the rows whose key was new to the index)."""
        hashes = np.asarray(hashes, dtype=np.int32)
        if not len(hashes):
            return np.empty(0, dtype=np.int32), np.zeros(0, dtype=bool)
        index = self.index(partition)
        found = index.lookup(hashes)
        unknown = np.flatnonzero(found < 0)
        if len(unknown):  # most rows of an upsert stream hit known keys: only the others are sorted
            uniq, first, inverse = np.unique(hashes[unknown], return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")  # new keys are placed in arrival order
            new_hashes = uniq[order]
            channels = assigner_of(
                partition_hash(partition), new_hashes, self.num_channels, self.num_assigners
            )
            residues = channels % self.num_assigners
            chosen = np.empty(len(new_hashes), dtype=np.int32)
            for r in np.unique(residues).tolist():
                if self.assign_id is not None and r != self.assign_id % self.num_assigners:
                    raise LakelogError(
                        f"key hashes of partition {self._name(partition)} of {self.store.path} reached "
                        f"assigner {self.assign_id} but belong to assigner channel(s) with residue {r}: "
                        "route rows with assigner_of() before this assigner"
                    )
                mine = np.flatnonzero(residues == r)
                chosen[mine] = self._place(partition, index, int(r), len(mine))
            index.add(new_hashes, chosen)
            if self.keep_state:
                self._assigned.setdefault(partition, []).append((new_hashes, chosen))
            placed = np.empty(len(uniq), dtype=np.int32)
            placed[order] = chosen
            found[unknown] = placed[inverse.reshape(-1)]
        is_new = np.zeros(len(hashes), dtype=bool)
        is_new[unknown] = True
        return found, is_new

    def _place(self, partition: bytes, index: PartitionIndex, residue: int, n: int) -> np.ndarray:
        """Buckets for ``n`` new keys of one assigner (residue class), in arrival order."""
        n_assigners = self.num_assigners
        own = sorted(b for b in index.counts if b % n_assigners == residue)
        ids: list[int] = []
        room: list[int] = []
        for b in own:
            free = self.target - index.counts[b]
            if free > 0:
                ids.append(b)
                room.append(free)
        missing = n - sum(room)
        if missing > 0:
            used = set(index.counts)
            wanted = math.ceil(missing / self.target)
            candidate = residue
            while wanted and candidate <= self.max_bucket_id:
                if candidate not in used:
                    ids.append(candidate)
                    room.append(self.target)
                    wanted -= 1
                candidate += n_assigners
        ends = np.cumsum(np.asarray(room, dtype=np.int64)) if room else np.empty(0, np.int64)
        total = int(ends[-1]) if len(ends) else 0
        slots = np.arange(n, dtype=np.int64)
        out = np.empty(n, dtype=np.int32)
        placed = slots < total
        out[placed] = np.asarray(ids, dtype=np.int32)[np.searchsorted(ends, slots[placed], side="right")]
        if not placed.all():
            if self.unlimited:
                raise TooManyBucketsError(
                    f"partition {self._name(partition)} of {self.store.path} needs more than "
                    f"{MAX_BUCKET_ID + 1} buckets; raise 'dynamic-bucket.target-row-num' "
                    f"(now {self.target})"
                )
            pool = np.asarray(sorted(set(own) | set(ids)), dtype=np.int32)
            out[~placed] = self._rng.choice(pool, int((~placed).sum()))
        return out

    def _name(self, partition: bytes) -> str:
        values = self.store.partition_values(partition)
        return "{" + ", ".join(f"{k}={v}" for k, v in zip(self.store.schema.partition_keys, values)) + "}"

    # ---- state -------------------------------------------------------------------------------------
    def state(self) -> AssignerState:
        """The assignments made since the partitions were loaded (see :class:`AssignerState`);
        needs ``keep_state=True``."""
        if not self.keep_state:
            raise LakelogError("this assigner keeps no state: create it with keep_state=True")
        out: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        for p, parts in self._assigned.items():
            if parts:
                out[p] = (np.concatenate([h for h, _ in parts]), np.concatenate([b for _, b in parts]))
        return AssignerState(out)

    @staticmethod
    def restore(store: TableStore, state: AssignerState, **kwargs: Optional[int]) -> DynamicBucketAssigner:
        """An assigner that knows the table's committed index plus the assignments of ``state``."""
        a = DynamicBucketAssigner(store, keep_state=True, **kwargs)
        for p, (hashes, buckets) in state.assigned.items():
            a._assigned[p] = [(np.asarray(hashes, np.int32), np.asarray(buckets, np.int32))]
        return a

    def prune_committed(self) -> None:
        """Drop remembered assignments that the latest snapshot's index holds (after a checkpoint
        completed), so :meth:`state` stays small."""
        if not self._assigned:
            return
        _, entries = self.store.on_latest(self.store.index_entries)
        for p in list(self._assigned):
            committed = PartitionIndex.of(
                (e.bucket, read_hash_index(self.store.file_io, self.store.index_file_path(e)))
                for e in entries
                if e.partition == p and e.index_file.index_type == HASH_INDEX
            )
            kept = []
            for hashes, buckets in self._assigned[p]:
                new = committed.lookup(hashes) < 0
                if new.any():
                    kept.append((hashes[new], buckets[new]))
            self._assigned[p] = kept


class BucketHashIndex:
    """The ``HASH`` index file of one (partition, bucket), as its writer keeps it: every key hash
    written to the bucket (sorted, distinct), and the file this state started from."""

    def __init__(self, hashes: np.ndarray, base: Optional[str]) -> None:
        self.hashes = sorted_unique(hashes)
        self.base = base
        self.changed = False

    @staticmethod
    def load(store: TableStore, entry: Optional[IndexManifestEntry]) -> BucketHashIndex:
        if entry is None:
            return BucketHashIndex(np.empty(0, np.int32), None)
        return BucketHashIndex(read_sorted_hashes(store, entry), entry.index_file.file_name)

    def add(self, hashes: np.ndarray) -> None:
        h = np.unique(np.asarray(hashes, dtype=np.int32))
        known = self.hashes
        if len(known):
            pos = np.searchsorted(known, h)
            hit = known[np.minimum(pos, len(known) - 1)] == h
            h, pos = h[~hit], pos[~hit]
        else:
            pos = np.zeros(len(h), dtype=np.int64)
        if len(h):
            self.hashes = np.insert(known, pos, h)
            self.changed = True

    def prepare_commit(
        self, store: TableStore, partition: bytes, bucket: int, namer: _Namer
    ) -> tuple[Optional[str], list[IndexFileMeta]]:
        """(the base this commit's state grew from, the new index file if hashes were added);
        the new file becomes the base of the next commit."""
        base = self.base
        if not self.changed:
            return base, []
        meta = write_hash_index(store, partition, bucket, self.hashes, namer)
        self.base, self.changed = meta.file_name, False
        return base, [meta]


def write_hash_index(
    store: TableStore, partition: bytes, bucket: int, hashes: np.ndarray, namer: _Namer
) -> IndexFileMeta:
    """Write a ``HASH`` index file of ``hashes`` for one bucket (into ``<table>/index/``)."""
    data = encode_hash_index(hashes)
    meta = IndexFileMeta(HASH_INDEX, namer.next(), len(data), len(data) // 4)
    path = store.index_file_path(IndexManifestEntry(0, partition, bucket, meta))
    store.file_io.write_bytes(path, data)
    remember_hash_file(path, sorted_unique(hashes))
    return meta
