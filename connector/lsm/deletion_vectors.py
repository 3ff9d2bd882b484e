"""Deletion vectors of a bucket, as readers, writers and compactors hold them (merge-on-write).

A table with ``'deletion-vectors.enabled' = 'true'`` keeps, above level 0, one live row per key:
when a compaction brings a key's newer row up from level 0, the older row's position is marked in
its file's deletion vector instead of the file being rewritten. So a read opens each file above
level 0 alone, drops the positions its vector holds, and merges nothing; level-0 files are visible
once compacted (:mod:`lakelog.connector.lsm.compaction`, :mod:`lakelog.connector.lsm.bucket_writer`).

The bytes are Paimon's (:mod:`lakelog.connector.format.deletion_vectors`): one ``DELETION_VECTORS``
index file per bucket, replaced whenever the bucket's vectors change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional, Union

import numpy as np

from lakelog.connector.format.deletion_vectors import (
    DeletionVectorMeta,
    encode_index_file,
    read_deletion_vector,
)
from lakelog.connector.format.fileio import io_for
from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta, IndexManifestEntry
from lakelog.connector.format.manifest_files import _Namer
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split import DeletionFile

__all__ = [
    "BucketDeletionVectors",
    "slot_vector_entries",
    "vectors_base",
    "DeletionVectorReader",
    "deletion_files",
    "dv_metas",
    "keep_mask",
]

_EMPTY = np.empty(0, dtype=np.uint64)


def dv_metas(entry: IndexManifestEntry) -> list[DeletionVectorMeta]:
    """The per-file entries of a ``DELETION_VECTORS`` index manifest entry."""
    out = []
    for r in entry.index_file.dv_ranges or ():
        if r is None:
            continue
        out.append(DeletionVectorMeta(r["f0"], int(r["f1"]), int(r["f2"]), r.get("_CARDINALITY")))
    return out


def deletion_files(store: TableStore, entry: Optional[IndexManifestEntry]) -> dict[str, DeletionFile]:
    """Data file name -> where its deletion vector is, for a bucket's index entry (none: {})."""
    if entry is None:
        return {}
    path = store.index_file_path(entry)
    return {m.data_file: DeletionFile(path, m) for m in dv_metas(entry)}


class DeletionVectorReader:
    """Reads deletion vectors, each index file once (they are small, and every file of a bucket
    has its bin in the same one). Decoded vectors are kept for the process in a cache of at most
    :data:`CACHE_BYTES` (index files are never rewritten in place: a changed vector is a new file),
    so repeated reads of a table decode each vector once."""

    def __init__(self) -> None:
        self._files: dict[str, bytes] = {}

    def positions(self, dv: Union[DeletionFile, np.ndarray, None]) -> np.ndarray:
        """The sorted deleted positions (``uint64``) a split's entry for one data file names."""
        if dv is None:
            return _EMPTY
        if isinstance(dv, np.ndarray):
            return dv
        key = (dv.path, dv.meta.offset, dv.meta.length)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        data = self._files.get(dv.path)
        if data is None:
            data = io_for(dv.path).read_bytes(dv.path)
            self._files[dv.path] = data
        out = read_deletion_vector(data, dv.meta, dv.path)
        out.flags.writeable = False
        _CACHE.put(key, out)
        return out


CACHE_BYTES = 64 << 20
"""The most memory decoded deletion vectors keep in a process's cache."""


class _VectorCache:
    """A least-recently-used map (index file, offset, length) -> positions, bounded in bytes,
    shared by a process's readers (thread-safe)."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._used = 0
        self._items: OrderedDict[tuple[str, int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, int]) -> Optional[np.ndarray]:
        with self._lock:
            out = self._items.get(key)
            if out is not None:
                self._items.move_to_end(key)
            return out

    def put(self, key: tuple[str, int, int], value: np.ndarray) -> None:
        if value.nbytes > self._budget // 4:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._used += value.nbytes
            while self._used > self._budget:
                _, old = self._items.popitem(last=False)
                self._used -= old.nbytes


_CACHE = _VectorCache(CACHE_BYTES)


def keep_mask(deleted: np.ndarray, start: int, n: int) -> Optional[np.ndarray]:
    """Which of the rows ``start .. start + n - 1`` of a file survive its deleted positions; None
    when all do."""
    if len(deleted) == 0:
        return None
    lo, hi = np.searchsorted(deleted, [start, start + n])
    if lo == hi:
        return None
    keep = np.ones(n, dtype=bool)
    keep[(deleted[lo:hi] - np.uint64(start)).astype(np.int64)] = False
    return keep


def slot_vector_entries(
    index: Sequence[IndexManifestEntry], partition: bytes, bucket: int
) -> list[IndexManifestEntry]:
    """Every deletion-vector index entry of a (partition, bucket) among ``index``: one for buckets
    lakelog or Paimon's bucketed writers wrote, several for a partition of an unaware-bucket append
    table that Paimon's writers changed (all in bucket 0, each naming some of its files)."""
    slot = (partition, bucket, DELETION_VECTORS_INDEX)
    return [e for e in index if e.slot() == slot]


def vectors_base(entries: Sequence[IndexManifestEntry]) -> Optional[str]:
    """What a writer's vectors of one bucket started from, as the committer checks it: the names of
    the bucket's index files (None: it had none)."""
    return ",".join(sorted(e.index_file.file_name for e in entries)) or None


def bucket_vectors_entry(
    index: Sequence[IndexManifestEntry], partition: bytes, bucket: int
) -> Optional[IndexManifestEntry]:
    """The bucket's deletion-vector index entry among ``index`` (None: it has no vectors)."""
    slot = (partition, bucket, DELETION_VECTORS_INDEX)
    return next((e for e in index if e.slot() == slot), None)


class BucketDeletionVectors:
    """The deletion vectors of one bucket's files (data file name -> sorted deleted positions) and
    the index file they were loaded from (``base``). Vectors are replaced, never changed in place,
    so a copy of the mapping is a consistent view for a compaction on another thread."""

    def __init__(self, vectors: Mapping[str, np.ndarray], base: Optional[str]) -> None:
        self.vectors = {k: v for k, v in vectors.items() if len(v)}
        self.base = base
        self.changed = False

    @classmethod
    def load(cls, store: TableStore, entry: Optional[IndexManifestEntry]) -> BucketDeletionVectors:
        """The vectors an index manifest entry names (none: an empty set)."""
        reader = DeletionVectorReader()
        files = deletion_files(store, entry)
        vectors = {name: reader.positions(df) for name, df in files.items()}
        return cls(vectors, entry.index_file.file_name if entry is not None else None)

    @classmethod
    def of_split(
        cls, split_vectors: Mapping[str, Union[DeletionFile, np.ndarray]], base: Optional[str]
    ) -> BucketDeletionVectors:
        """The vectors a split carries, loaded from the bucket's index file ``base``."""
        reader = DeletionVectorReader()
        return cls({name: reader.positions(dv) for name, dv in split_vectors.items()}, base)

    def view(self) -> dict[str, np.ndarray]:
        return dict(self.vectors)

    def update(self, removed: Iterable[str], marks: Mapping[str, np.ndarray]) -> None:
        """A compaction's effect: the vectors of the files it removed go, and ``marks`` (new deleted
        positions of files it left in place) join their files' vectors."""
        for name in removed:
            if self.vectors.pop(name, None) is not None:
                self.changed = True
        for name, pos in marks.items():
            if not len(pos):
                continue
            old = self.vectors.get(name)
            self.vectors[name] = pos if old is None else np.union1d(old, pos)
            self.changed = True

    def write(self, store: TableStore, partition: bytes, bucket: int) -> Optional[IndexFileMeta]:
        """Write the bucket's vectors as a new index file; None when no vector is left."""
        if not self.vectors:
            return None
        data, metas = encode_index_file(self.vectors, bitmap64=store.options.deletion_vectors_bitmap64)
        name = _Namer("index").next()  # a UUID of its own: forked processes never name alike
        entry = IndexManifestEntry(0, partition, bucket, IndexFileMeta(DELETION_VECTORS_INDEX, name, 0, 0))
        store.file_io.write_bytes(store.index_file_path(entry), data)
        ranges = tuple(
            {"f0": m.data_file, "f1": m.offset, "f2": m.length, "_CARDINALITY": m.cardinality} for m in metas
        )
        return IndexFileMeta(DELETION_VECTORS_INDEX, name, len(data), len(metas), dv_ranges=ranges)
