"""The committer's side of dynamic bucket mode: checks a commit's ``HASH`` index files against the
snapshot it would follow, and builds that snapshot's index entries.

A writer's view of a partition's index is the snapshot it loaded it from, grown by its own commits.
Each commit message of a dynamic-bucket table names the bucket's ``HASH`` file that view started from
(``index_base``). For every bucket the commit writes into:

* the bucket's live file is still ``index_base``: nothing happened in between;
* another writer changed it meanwhile: if the live file holds every hash of ``index_base`` (the other
  writer only added keys) the two are merged into a new file; if not (an overwrite or rescale
  rewrote the partition), the keys this writer placed by the old index may be in the wrong bucket:
  :class:`~lakelog.connector.errors.CommitConflictError`.

And for every key hash the commit adds to a partition: no other bucket of the partition may hold it
in the snapshot the commit follows, else one key would live in two buckets (two writers placed a new
key differently): :class:`~lakelog.connector.errors.CommitConflictError` naming both buckets. Hash
files are immutable, so their contents are cached by file name between a writer's commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from lakelog.connector.errors import CommitConflictError, MissingFileError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.index_file import (
    HASH_INDEX,
    IndexFileMeta,
    IndexManifestEntry,
)
from lakelog.connector.format.manifest_files import _Namer
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.dynamic_bucket import read_sorted_hashes, write_hash_index

__all__ = ["HashIndexCommit"]


class HashIndexCommit:
    """Resolves the ``HASH`` files of one commit attempt (see the module docstring)."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self._cache: dict[str, np.ndarray] = {}
        self._namer = _Namer("index")
        self.written: list[IndexManifestEntry] = []  # merged files this attempt wrote
        self.superseded: list[IndexManifestEntry] = []  # writers' files replaced by merged ones
        self.merged = False  # another writer's additions were merged in

    def _hashes(self, partition: bytes, bucket: int, name: Optional[str]) -> np.ndarray:
        if name is None:
            return np.empty(0, np.int32)
        cached = self._cache.get(name)
        if cached is None:
            entry = IndexManifestEntry(0, partition, bucket, IndexFileMeta(HASH_INDEX, name, 0, 0))
            try:
                cached = read_sorted_hashes(self.store, entry)
            except MissingFileError as e:
                raise CommitConflictError(
                    f"the hash index file {name} of bucket {bucket} of partition "
                    f"{self._partition(partition)} of {self.store.path} that this writer's view started "
                    f"from is gone (expired); the view is too old to commit: write again ({e})"
                ) from None
            self._cache[name] = cached
        return cached

    def _partition(self, partition: bytes) -> str:
        values = self.store.partition_values(partition)
        return "{" + ", ".join(f"{k}={v}" for k, v in zip(self.store.schema.partition_keys, values)) + "}"

    def abandon(self) -> None:
        """Delete the merged files of an attempt that did not publish."""
        for e in self.written:
            self.store.file_io.delete(self.store.index_file_path(e))
        self.written, self.superseded, self.merged = [], [], False

    def published(self) -> None:
        """The attempt published: the writers' files that merged ones replaced are orphans now."""
        for e in self.superseded:
            self.store.file_io.delete(self.store.index_file_path(e))
        self.written, self.superseded = [], []

    def resolve(
        self, latest: Sequence[IndexManifestEntry], messages: Sequence[CommitMessage]
    ) -> list[IndexManifestEntry]:
        """The index entries this commit adds on top of ``latest`` (the live entries of the snapshot
        it would follow). Raises :class:`CommitConflictError` as the module docstring says."""
        self.abandon()
        live: dict[tuple[bytes, int], IndexManifestEntry] = {
            (e.partition, e.bucket): e for e in latest if e.index_file.index_type == HASH_INDEX
        }
        added: list[IndexManifestEntry] = []
        new_hashes: dict[bytes, list[tuple[int, np.ndarray]]] = {}
        for m in messages:
            if not (m.new_files or m.index_files):
                continue
            p, b = m.partition, m.bucket
            current = live.get((p, b))
            current_name = current.index_file.file_name if current is not None else None
            own = m.index_files[0] if m.index_files else None
            if own is None and current_name == m.index_base:
                continue  # no new keys, and nobody touched the bucket's index
            base = self._hashes(p, b, m.index_base)
            if own is not None:
                mine = self._hashes(p, b, own.file_name)
                new_hashes.setdefault(p, []).append((b, np.setdiff1d(mine, base, assume_unique=True)))
            if current_name == m.index_base:
                if own is not None:
                    self._replace(live, added, IndexManifestEntry(0, p, b, own))
                continue
            theirs = self._hashes(p, b, current_name)
            if not np.isin(base, theirs, assume_unique=True).all():
                raise CommitConflictError(
                    f"bucket {b} of partition {self._partition(p)} of dynamic-bucket table "
                    f"{self.store.path} was rewritten (an overwrite or rescale) after this writer loaded "
                    "its index; rows it placed by the old index may sit in the wrong bucket: write them again"
                )
            if own is None:
                continue  # no new keys here: the live file already holds every hash we wrote
            merged = np.union1d(theirs, self._hashes(p, b, own.file_name)).astype(np.int32)
            meta = write_hash_index(self.store, p, b, merged, self._namer)
            entry = IndexManifestEntry(0, p, b, meta)
            self._cache[meta.file_name] = merged
            self.written.append(entry)
            self.superseded.append(IndexManifestEntry(0, p, b, own))
            self.merged = True
            self._replace(live, added, entry)
        for p, per_bucket in new_hashes.items():
            self._check_disjoint(p, per_bucket, live)
        self._evict(latest, added)
        return added

    def _replace(
        self,
        live: dict[tuple[bytes, int], IndexManifestEntry],
        added: list[IndexManifestEntry],
        entry: IndexManifestEntry,
    ) -> None:
        """``entry`` becomes its bucket's live file for the rest of the commit. One commit can carry
        several flushes of a writer (a Flink committer commits every committable a checkpoint
        released at once), each message's base the file of the one before: the next message then
        finds its base live, and a file this commit added earlier, no snapshot ever lists, is
        dropped (deleted once the commit is published)."""
        key = (entry.partition, entry.bucket)
        for i, e in enumerate(added):
            if (e.partition, e.bucket) == key:
                self.superseded.append(e)
                del added[i]
                break
        live[key] = entry
        added.append(entry)

    def _check_disjoint(
        self,
        partition: bytes,
        per_bucket: list[tuple[int, np.ndarray]],
        live: dict[tuple[bytes, int], IndexManifestEntry],
    ) -> None:
        """No hash this commit adds to bucket ``b`` may be in another bucket of the partition."""
        for (p, c), e in live.items():
            if p != partition:
                continue
            theirs = self._hashes(p, c, e.index_file.file_name)
            if not len(theirs):
                continue
            for b, hashes in per_bucket:
                if b == c or not len(hashes):
                    continue
                pos = np.searchsorted(theirs, hashes)
                pos[pos == len(theirs)] = 0
                clash = hashes[theirs[pos] == hashes]
                if len(clash):
                    raise CommitConflictError(
                        f"{len(clash)} key(s) of partition {self._partition(partition)} of dynamic-bucket "
                        f"table {self.store.path} were placed in bucket {b} by this writer and in bucket "
                        f"{c} by another writer (key hash {int(clash[0])}); a partition of a dynamic-bucket "
                        "table takes one writer at a time: write these rows again"
                    )

    def _evict(self, latest: Sequence[IndexManifestEntry], added: Sequence[IndexManifestEntry]) -> None:
        keep = {e.index_file.file_name for e in latest} | {e.index_file.file_name for e in added}
        for name in [n for n in self._cache if n not in keep]:
            del self._cache[name]
