"""The dedicated compaction job's logic, free of pyflink: planning, per-bucket compaction, and an
idempotent committer that drops compactions which lost a race.

* **Planning** (:func:`plan_compaction`, :func:`changed_buckets`): which (partition, bucket)s of a
  snapshot need compaction. Primary-key buckets ask the bucket's universal picker (or, with
  ``full``, whether the bucket is more than one clean run at the top level), exactly as
  ``compact_table`` / ``Table.compact`` decide; append buckets need a run of at least
  ``compaction.min.file-num`` consecutive small files (2 with ``full``).
* **Compaction** (:func:`compact_bucket`): compacts one bucket as of the *latest* snapshot (not the
  planned one, so fewer compactions go stale) through ``connector.compact.compact_split``.
* **Committing** (:class:`CompactionCommitter`): commits compaction committables as COMPACT
  snapshots through the sink's :class:`~lakelog.operators.committer.SinkCommitter` (committable
  ids in the snapshot properties, increasing commit identifiers). Before each commit it checks
  every committable's input files against the latest snapshot: one whose inputs another commit
  removed (a writer's or another job's compaction won the race) is dropped and the files it
  wrote are deleted; the others commit. Compactions never add rows, so dropping one loses
  nothing, and appended files are never touched.

* **Progress** (:func:`progress_path`, :func:`read_progress`): a streaming planner's last round, for
  idle detection by the job that runs it.

No pyflink here: the operators that run these are in :mod:`lakelog.operators.compact`, the job in
:mod:`lakelog.jobs.compact`, the design in ``operators/README.md``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from lakelog.connector.errors import CommitConflictError, InvalidInputError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.index_file import IndexManifestEntry
from lakelog.connector.format.lock import LockTimeoutError
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.compaction import BucketCompactor, num_levels
from lakelog.connector.lsm.levels import Levels
from lakelog.connector.lsm.split import Split
from lakelog.connector.table.changes import touched_buckets
from lakelog.connector.table.compaction import compact_split
from lakelog.connector.table.partition_specs import PartitionSpec, matching_partitions, partitions_where
from lakelog.connector.table.scan import deletion_vectors_of
from lakelog.operators.codec import Committable
from lakelog.operators.committer import SinkCommitter

__all__ = [
    "BucketFiles",
    "bucket_key",
    "parse_bucket_key",
    "committable_key",
    "planned_snapshot",
    "live_buckets",
    "compaction_input",
    "plan_compaction",
    "changed_buckets",
    "load_bucket",
    "inputs_live",
    "compact_files",
    "compact_bucket",
    "stale_inputs",
    "CompactionCommitter",
    "sorted_run_counts",
    "progress_path",
    "read_progress",
    "write_progress",
]

log = logging.getLogger(__name__)


@dataclass
class BucketFiles:
    """The live files of one (partition, bucket) in one snapshot."""

    snapshot_id: int
    partition: bytes
    bucket: int
    total_buckets: int
    files: list[DataFileMeta]
    deletion_vectors: Optional[dict[str, Any]] = None  # deletion-vector mode: the bucket's

    @property
    def key(self) -> str:
        return bucket_key(self.partition, self.bucket)

    def split(self, files: Optional[list[DataFileMeta]] = None) -> Split:
        return Split(
            self.snapshot_id, self.partition, self.bucket, self.total_buckets, files or self.files,
            deletion_vectors=self.deletion_vectors,
        )


def bucket_key(partition: bytes, bucket: int) -> str:
    """``"<partition hex>:<bucket>"``: the key compaction tasks are keyed (and routed) by."""
    return f"{partition.hex()}:{bucket}"


def parse_bucket_key(key: str) -> tuple[bytes, int]:
    part, sep, bucket = key.rpartition(":")
    try:
        if not sep:
            raise ValueError(key)
        return bytes.fromhex(part), int(bucket)
    except ValueError:
        raise InvalidInputError(
            f"bad compaction task key {key!r}; expected '<partition hex>:<bucket>'"
        ) from None


def committable_key(key: str, snapshot_id: int) -> str:
    """A compaction committable's key: its bucket and the snapshot its inputs were read from."""
    return f"{key}@{snapshot_id}"


def planned_snapshot(committable: Committable) -> Optional[int]:
    """The snapshot a compaction committable read its inputs from (None if unknown)."""
    _, sep, sid = committable.key.rpartition("@")
    return int(sid) if sep and sid.isdigit() else None


def live_buckets(
    store: TableStore, snapshot: Optional[Snapshot], only: Optional[Iterable[str]] = None
) -> dict[str, BucketFiles]:
    """``{bucket key: BucketFiles}`` of ``snapshot`` (restricted to the keys in ``only``)."""
    if snapshot is None:
        return {}
    wanted = None if only is None else set(only)
    out: dict[str, BucketFiles] = {}
    for e in store.live_entries(snapshot):
        key = bucket_key(e.partition, e.bucket)
        if wanted is not None and key not in wanted:
            continue
        b = out.get(key)
        if b is None:
            b = out[key] = BucketFiles(snapshot.id, e.partition, e.bucket, e.total_buckets, [])
        b.files.append(e.file)
    vectors = deletion_vectors_of(store, snapshot)  # as a scan attaches them to its splits
    if vectors is not None:
        for b in out.values():
            b.deletion_vectors = dict(vectors.get((b.partition, b.bucket), {}))
    return out


def _append_run(
    store: TableStore, files: Sequence[DataFileMeta], min_files: int
) -> Optional[list[DataFileMeta]]:
    """The oldest run of consecutive (by sequence number) files smaller than the target file size
    with at least ``min_files`` files. Rewriting a consecutive run keeps the bucket's row order;
    the rolling writer's outputs reach the target size, so a rewrite is never picked again."""
    target = int(store.options.target_file_size_for(False))
    run: list[DataFileMeta] = []
    for f in sorted(files, key=lambda f: (f.min_sequence_number, f.file_name)):
        if f.file_size < target:
            run.append(f)
            continue
        if len(run) >= min_files:
            return run
        run = []
    return run if len(run) >= min_files else None


def compaction_input(store: TableStore, b: BucketFiles, *, full: bool) -> Optional[list[DataFileMeta]]:
    """The files to hand ``compact_split`` for bucket ``b``, or None when it needs no compaction.

    Primary-key buckets: the whole bucket when the universal picker (``full``: the full-compaction
    check) picks something; ``compact_split`` then picks the same unit. Append buckets: the oldest
    run of consecutive small files, when it has at least ``compaction.min.file-num`` files (2 with
    ``full``); every file of the bucket when deleted rows (deletion vectors) make it due: with
    ``full`` any, else a file past ``compaction.delete-ratio-threshold``."""
    if not b.files:
        return None
    if store.is_primary_key_table:
        levels = Levels.of(b.files, num_levels(store))
        comp = BucketCompactor(store, b.partition, b.bucket, levels)
        if comp.pick(full=full) is not None:
            return list(b.files)
        # deletion vectors: level 0 is invisible to Paimon's readers until compacted
        return list(b.files) if b.deletion_vectors is not None and levels.level0 else None
    if b.deletion_vectors:
        share = 0.0 if full else store.options.get(store.options.COMPACTION_DELETE_RATIO_THRESHOLD)
        # (a vector without a cardinality, as older Paimon writes them, counts one row)
        counts = {name: dv.meta.cardinality or 1 for name, dv in b.deletion_vectors.items()}
        if any((counts.get(f.file_name) or 0) > share * max(f.row_count, 1) for f in b.files):
            return list(b.files)
    min_files = 2 if full else max(2, int(store.options.get(store.options.COMPACTION_MIN_FILE_NUM)))
    return _append_run(store, b.files, min_files)


def plan_compaction(
    store: TableStore,
    *,
    full: bool = False,
    snapshot: Optional[Snapshot] = None,
    only: Optional[Iterable[str]] = None,
    partitions: Optional[Sequence[PartitionSpec]] = None,
    where: Optional[str] = None,
) -> list[str]:
    """Keys of the buckets of ``snapshot`` (default: the latest) that need compaction, sorted;
    ``partitions``: only those of the partitions these specs (cast by
    :func:`~lakelog.connector.table.partition_specs.partition_spec`) match; ``where``: only those
    whose partition values satisfy this predicate on the partition fields."""
    snap = snapshot if snapshot is not None else store.snapshot_manager.latest()
    buckets = live_buckets(store, snap, only)
    if partitions is not None:
        present = {b.partition for b in buckets.values()}
        chosen = set().union(*(matching_partitions(store, present, spec) for spec in partitions))
        buckets = {k: b for k, b in buckets.items() if b.partition in chosen}
    if where is not None:
        chosen = partitions_where(store, {b.partition for b in buckets.values()}, where)
        buckets = {k: b for k, b in buckets.items() if b.partition in chosen}
    return sorted(k for k, b in buckets.items() if compaction_input(store, b, full=full) is not None)


def changed_buckets(store: TableStore, after_id: int, upto_id: int) -> Optional[set[str]]:
    """Keys of the buckets that snapshots ``after_id + 1 .. upto_id`` changed (any commit kind, our
    own compactions included: universal compaction may take several rounds). None when one of
    those snapshots has expired (the caller should look at every bucket)."""
    touched = touched_buckets(store, after_id, upto_id, include_compact=True)
    return None if touched is None else {bucket_key(p, b) for p, b in touched}


def load_bucket(store: TableStore, key: str, snapshot: Optional[Snapshot] = None) -> Optional[BucketFiles]:
    """Bucket ``key``'s live files in ``snapshot`` (default: the latest); None when it has none."""
    snap = snapshot if snapshot is not None else store.snapshot_manager.latest()
    return live_buckets(store, snap, [key]).get(key)


def inputs_live(b: BucketFiles, inputs: Iterable[tuple[int, str]]) -> bool:
    """Whether every (level, file name) of ``inputs`` is still live in ``b`` (i.e. a compaction of
    them has not been committed, nor lost a race, yet)."""
    live = {(f.level, f.file_name) for f in b.files}
    return all(tuple(x) in live for x in inputs)


def compact_files(store: TableStore, b: BucketFiles, *, full: bool = False) -> Optional[CommitMessage]:
    """Compact bucket ``b`` (what :func:`compaction_input` picks); None when it needs nothing.
    The files written are uncommitted until the returned message is committed."""
    files = compaction_input(store, b, full=full)
    if files is None:
        return None
    msg = compact_split(store, b.split(files), full=full)
    return None if msg is None or msg.is_empty() else msg


def compact_bucket(store: TableStore, key: str, *, full: bool = False) -> Optional[tuple[int, CommitMessage]]:
    """Compact bucket ``key`` as of the latest snapshot; return (snapshot id read, message), or None."""
    b = load_bucket(store, key)
    if b is None:
        return None
    msg = compact_files(store, b, full=full)
    return None if msg is None else (b.snapshot_id, msg)


def _file_id(m: CommitMessage, f: DataFileMeta) -> tuple[bytes, int, int, str]:
    return (m.partition, m.bucket, f.level, f.file_name)


def stale_inputs(
    store: TableStore, committables: Sequence[Committable], latest: Optional[Snapshot] = None
) -> tuple[list[Committable], list[Committable]]:
    """Split ``committables`` (in commit order) into (committable, stale): a committable is stale
    when an input file (``compact_before``, on its level) is not live any more, counting the
    effect of the committable ones before it (a chained compaction of the same bucket)."""
    snap = latest if latest is not None else store.snapshot_manager.latest()
    live = {(e.partition, e.bucket, e.file.level, e.file.file_name) for e in store.live_entries(snap)}
    ok: list[Committable] = []
    stale: list[Committable] = []
    for c in committables:
        before = {_file_id(m, f) for m in c.messages for f in m.compact_before}
        if before <= live:
            live -= before
            live |= {_file_id(m, f) for m in c.messages for f in m.compact_after}
            ok.append(c)
        else:
            stale.append(c)
    return ok, stale


def _discard(store: TableStore, c: Committable) -> int:
    """Delete what a dropped compaction wrote: its outputs that are not also its inputs (an
    upgraded file keeps its name) and not live in the latest snapshot. Returns files deleted."""
    latest = store.snapshot_manager.latest()
    live = {(e.partition, e.bucket, e.file.file_name) for e in store.live_entries(latest)}
    live_index = {e.index_file.file_name for e in store.index_entries(latest)}
    n = 0
    for m in c.messages:
        inputs = {f.file_name for f in m.compact_before}
        for f in m.compact_after + m.compact_changelog_files:
            if f.file_name in inputs or (m.partition, m.bucket, f.file_name) in live:
                continue
            n += store.delete_data_file(m.partition, m.bucket, f)
        if m.dv_file is not None and m.dv_file.file_name not in live_index:
            dv = IndexManifestEntry(0, m.partition, m.bucket, m.dv_file)
            n += store.file_io.delete(store.index_file_path(dv))
    return n


class CompactionCommitter:
    """Commits compaction committables for one commit user, at most once each, dropping stale ones.

    Dropped ids are remembered in memory; after a restart a dropped committable read again from
    the channel is found stale again (its inputs stay gone), so it is dropped again, never
    committed. Committables read from snapshots older than the table's earliest snapshot are
    ignored without touching their files: whether they were committed can no longer be told
    (their snapshot may have expired), and an uncommitted one only leaves orphan files."""

    _ATTEMPTS = 50

    def __init__(self, store: TableStore, commit_user: str, run_token: str) -> None:
        self.store = store
        self.inner = SinkCommitter(store, commit_user, run_token, compactor=True)
        self.dropped: set[str] = set()

    @property
    def commit_user(self) -> str:
        return self.inner.commit_user

    @property
    def done(self) -> set[str]:
        """Ids committed or dropped: nothing more to do for them."""
        return self.inner.committed | self.dropped

    def refresh(self) -> None:
        """Learn what the commit user committed since the last look."""
        self.inner.refresh()

    def commit(
        self, committables: Sequence[Committable], next_identifier: int, *, final: bool
    ) -> Optional[int]:
        """Commit the committables not done yet in one COMPACT snapshot; return the identifier used,
        or None when nothing was committed."""
        todo = [c for c in committables if c.id not in self.done]
        earliest = self.store.snapshot_manager.earliest_id()
        if earliest is not None:
            ancient = [c for c in todo if (planned_snapshot(c) or earliest) < earliest]
            for c in ancient:
                log.warning("ignoring compaction %s of %s: read from an expired snapshot", c.id, c.key)
                self.dropped.add(c.id)
            todo = [c for c in todo if c.id not in self.dropped]
        for _ in range(self._ATTEMPTS):
            if not todo or self.inner.finished:
                return None
            ok, stale = stale_inputs(self.store, todo)
            for c in stale:
                n = _discard(self.store, c)
                self.dropped.add(c.id)
                log.warning(
                    "compaction %s of bucket %s lost a race (its inputs were compacted by another commit); "
                    "dropped it and deleted %d file(s)",
                    c.id,
                    c.key,
                    n,
                )
            if not ok:
                return None
            try:
                return self.inner.commit(ok, next_identifier, final=final)
            except LockTimeoutError:
                raise  # the lock stayed taken for all of 'lock-acquire-timeout': no race to retry
            except CommitConflictError:
                todo = ok  # a commit between the check and ours removed inputs: check again
        raise CommitConflictError(
            f"compaction commit to {self.store.path} kept conflicting after {self._ATTEMPTS} attempts"
        )


def sorted_run_counts(store: TableStore, snapshot: Optional[Snapshot] = None) -> dict[str, int]:
    """``{bucket key: number of sorted runs}`` of ``snapshot`` (default latest); for append tables
    the number of files. Handy to watch compaction work."""
    snap = snapshot if snapshot is not None else store.snapshot_manager.latest()
    out = {}
    for key, b in live_buckets(store, snap).items():
        if store.is_primary_key_table:
            out[key] = Levels.of(b.files, num_levels(store)).number_of_sorted_runs()
        else:
            out[key] = len(b.files)
    return out


def progress_path(channel_dir: str, run_token: str) -> str:
    """Where a streaming run's planner records its last round (a dot file: the channel reader
    skips it): ``{"round": n, "snapshot": id}``, the last snapshot it has examined."""
    return os.path.join(channel_dir, f".lakelog-planner-{run_token}.json")


def read_progress(path: str) -> Optional[dict[str, int]]:
    """The progress recorded at ``path``, or None (not written yet, or unreadable)."""
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(d, dict) and isinstance(d.get("round"), int) and isinstance(d.get("snapshot"), int):
        return {"round": d["round"], "snapshot": d["snapshot"]}
    return None


def write_progress(path: str, rounds: int, snapshot_id: int) -> None:
    """Record a planner round at ``path`` (atomically; progress is advisory, so a failure is only
    logged)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"round": rounds, "snapshot": snapshot_id}, fh)
        os.replace(tmp, path)
    except OSError:
        log.debug("could not record planner progress in %s", path)
