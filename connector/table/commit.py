"""The committer: publishes snapshots atomically, with optimistic concurrency and idempotence.

A commit writes its delta manifest once, then loops: read the latest snapshot, check conflicts,
write manifest lists, and try to create ``snapshot-<latest + 1>``. Creation never overwrites, so
exactly one of several racing committers wins each id and the others retry on the new base.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Optional

from lakelog.connector.errors import (
    CommitConflictError,
    LogSystemError,
    MissingFileError,
    OptionError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX, IndexFileMeta, IndexManifestEntry
from lakelog.connector.format.index_manifest import combine_index_entries
from lakelog.connector.format.manifest import DataFileMeta, ManifestEntry, ManifestFileMeta, merge_entries
from lakelog.connector.format.options import IMMUTABLE_KEYS, CoreOptions, LogSystem, changed_options
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.publisher import LogPublisher
from lakelog.connector.lsm.deletion_vectors import vectors_base
from lakelog.connector.lsm.rebase import rebase_file
from lakelog.connector.table.changes import log_changes, snapshot_log_changes
from lakelog.connector.table.log import log_publisher
from lakelog.connector.table.partition_specs import spec_matcher
from lakelog.connector.table.routing import PartitionBucketCounts
from lakelog.connector.table.statistics import inherited_statistics

__all__ = [
    "TableCommit",
    "BATCH_COMMIT_IDENTIFIER",
    "CommitKind",
    "OverwriteScope",
    "overwrites_dynamically",
    "partition_label",
]

log = logging.getLogger(__name__)

BATCH_COMMIT_IDENTIFIER = 9223372036854775807  # Long.MAX_VALUE, as Paimon's batch writers use
WRITER_VERSION = "lakelog-0.1.0"
_FENCED_RETRIES = 5  # attempts a commit makes while other processes' publishers keep fencing its own


class CommitKind:
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


@dataclass
class _Delta:
    entries: list[ManifestEntry]
    changelog: list[ManifestEntry]
    kind: str
    messages: list[CommitMessage] = field(default_factory=list)  # the messages of the entries


@dataclass(frozen=True)
class OverwriteScope:
    """Which partitions an OVERWRITE commit replaces: exactly ``partitions`` (serialized; dynamic
    partition overwrite), else every partition whose values match ``spec`` (static: a subset of the
    partition fields, all partitions when empty)."""

    partitions: Optional[frozenset[bytes]] = None
    spec: Optional[tuple[tuple[str, Any], ...]] = None

    def matcher(self, store: TableStore) -> Callable[[bytes], bool]:
        if self.partitions is not None:
            chosen = self.partitions
            return lambda p: p in chosen
        return spec_matcher(store, dict(self.spec or ()))

    def describe(self) -> str:
        if self.partitions is not None:
            return f"{len(self.partitions)} partition(s) written"
        return "{" + ", ".join(f"{k}={v}" for k, v in self.spec or ()) + "}"


def overwrites_dynamically(store: TableStore, dynamic: bool) -> bool:
    """Whether an overwrite that asks for Paimon's dynamic partition overwrite (``dynamic``, from
    ``dynamic-partition-overwrite``) gets it: only a partitioned table replaces just the partitions
    written; an unpartitioned table's overwrite always replaces it whole."""
    return dynamic and bool(store.schema.partition_keys)


def partition_label(store: TableStore, partition: bytes) -> str:
    """A partition as Paimon names it in messages: ``partition {k=v, ...}``, or ``table``."""
    keys = store.schema.partition_keys
    if not keys:
        return "table"
    values = store.partition_values(partition)
    default = store.options.partition_default_name
    return "partition {" + ", ".join(f"{k}={default if v is None else v}" for k, v in zip(keys, values)) + "}"


class TableCommit:
    """Commits messages from writers as snapshots of ``store``'s table."""

    def __init__(self, store: TableStore, commit_user: Optional[str] = None) -> None:
        self.store = store
        self.commit_user = commit_user or str(uuid.uuid4())
        # set by commit(): True when the appended files committed but the compaction did not, or
        # when new files were rewritten above another writer's (rebased); a long-lived writer must
        # then reload its levels from the table
        self.compaction_discarded = False
        self.rebased = False
        # set by commit(): the ids of the snapshots it published (an APPEND, then a COMPACT); when it
        # raises, what is not in them was not published
        self.published: list[int] = []
        # deletion-vector files a later compaction of the same commit replaced (see _check_dv_bases)
        self._unpublished_vectors: list[IndexManifestEntry] = []
        self._log: Optional[LogPublisher] = None  # the log's publisher during a commit of a log table
        self._eventual_offsets: Optional[dict[int, int]] = None
        # dynamic bucket mode: the hash index check (its cache of index files lives between commits);
        # ``index_merged`` tells that another writer's index additions were merged into this commit
        self._hash_index: Any = None
        self.index_merged = False
        # check, under the commit lock, that every file a commit adds exists: for committers that
        # replay messages after a restart (a Flink sink's), whose files a rollback or an expiration
        # may have removed with the snapshot that had committed them; a missing one fails the commit
        self.verify_new_files = False
        self._new_statistics: Optional[str] = None  # the file an ANALYZE commit publishes

    def commit(
        self,
        messages: Sequence[CommitMessage],
        commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        properties: Optional[dict[str, str]] = None,
        guard: Optional[Callable[[Optional[Snapshot]], None]] = None,
        log_offsets: Optional[dict[int, int]] = None,
    ) -> Optional[int]:
        """Publish ``messages``; return the id of the last snapshot made, or None if there was
        nothing to commit. ``log_offsets`` (writers of an eventual log) are the offsets after the
        writer's log records, kept in the snapshot's ``logOffsets``.

        New files go into an APPEND snapshot; compaction results (``compact_before`` /
        ``compact_after``) into a COMPACT snapshot after it, as Paimon does. A commit whose
        (commit user, identifier) is already in the table is skipped and returns that snapshot id.

        The later commit wins: when another writer committed rows to a bucket of a primary-key
        table with sequence numbers at or above this commit's new files (both started from the
        same snapshot), those files are rewritten above them first (see :class:`_SequenceRebase`);
        where that cannot keep the changelog exact, :class:`CommitConflictError` names the bucket
        and nothing is committed.

        ``guard(latest)`` is called before every attempt at the first snapshot, with the snapshot
        it would follow; an exception it raises abandons the commit (nothing is published) and
        propagates. Since a lost race makes the attempt start again, the guard sees every snapshot
        that precedes the one published.
        """
        done = self._find_committed(commit_identifier)
        if done is not None:
            log.info(
                "commit %s of %s already in snapshot %s; skipped", commit_identifier, self.commit_user, done
            )
            return done
        self._eventual_offsets = log_offsets
        publisher = log_publisher(self.store)
        if publisher is None:
            return self._commit(messages, commit_identifier, properties, guard)
        with publisher.session() as self._log:
            try:
                return self._commit(messages, commit_identifier, properties, guard)
            finally:
                self._log = None

    def _commit(
        self,
        messages: Sequence[CommitMessage],
        commit_identifier: int,
        properties: Optional[dict[str, str]],
        guard: Optional[Callable[[Optional[Snapshot]], None]],
    ) -> Optional[int]:
        self.compaction_discarded = False
        self.rebased = False
        self.index_merged = False
        self.published = []
        rebase = _SequenceRebase(self.store, messages) if self.store.is_primary_key_table else None
        appends, _ = _split(messages)
        last: Optional[int] = None
        if appends.entries or appends.changelog or any(m.index_files or m.dv_delete for m in messages):
            last = self._commit_delta(appends, commit_identifier, properties, guard, rebase)
        if rebase is not None and rebase.buckets:
            # the rebased buckets' compactions were computed from the files as they were: drop them
            self.rebased = True
            dropped = [m for m in messages if (m.partition, m.bucket) in rebase.buckets]
            self._discard_compaction(dropped)
            if any(m.compact_before or m.compact_after for m in dropped):
                self.compaction_discarded = True
            messages = [m for m in messages if (m.partition, m.bucket) not in rebase.buckets]
        _, compacts = _split(messages)
        if compacts.entries or compacts.changelog or compacts.messages:
            try:
                first_guard = guard if last is None else None  # our own APPEND snapshot is not news
                last = self._commit_delta(compacts, commit_identifier, properties, first_guard)
            except CommitConflictError:
                if last is None:
                    raise
                # The new files are committed; only the compaction lost a race (another compaction
                # removed its input files). Drop its output: the data stays as committed.
                log.warning(
                    "compaction of %s conflicted and was dropped; the appended data is committed",
                    self.store.path,
                )
                self._discard_compaction(messages)
                self.compaction_discarded = True
        return last

    def commit_statistics(self, file_name: str) -> int:
        """Publish the statistics file ``file_name`` (written by
        :func:`~lakelog.connector.table.statistics.write_statistics`) in an ``ANALYZE`` snapshot
        that changes no data; return its id."""
        self._new_statistics = file_name
        try:
            self.published = []
            return self._commit_delta(_Delta([], [], CommitKind.ANALYZE), BATCH_COMMIT_IDENTIFIER, None)
        finally:
            self._new_statistics = None

    def overwrite(
        self,
        messages: Sequence[CommitMessage],
        scope: OverwriteScope,
        commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        properties: Optional[dict[str, str]] = None,
        guard: Optional[Callable[[Optional[Snapshot]], None]] = None,
    ) -> Optional[int]:
        """Publish ``messages`` as one OVERWRITE snapshot that replaces the partitions of ``scope``
        (Paimon's semantics): DELETE entries for every live file of those partitions in the latest
        snapshot, ADD entries for the new files, and the partitions' index replaced by the new index
        files. Changelog files are dropped (an overwrite carries no changelog); compaction results,
        if any, follow in a COMPACT snapshot. A dynamic scope without new files commits nothing
        (returns None). New files outside a static scope raise :class:`CommitConflictError`.

        Retried on concurrent commits: each attempt replaces what the partitions hold in the latest
        snapshot then (rows committed meanwhile into them are overwritten, as in Paimon). ``guard``
        is called before each attempt, as in :meth:`commit`."""
        done = self._find_committed(commit_identifier)
        if done is not None:
            return done
        self.compaction_discarded = False
        self.rebased = False
        self.index_merged = False
        self.published = []
        store = self.store
        if scope.partitions is not None and not scope.partitions:
            return None
        match = scope.matcher(store)
        outside = sorted({m.partition for m in messages if m.new_files and not match(m.partition)})
        if outside:
            raise CommitConflictError(
                f"trying to overwrite {scope.describe()} of {store.path}, but the new rows of "
                f"{partition_label(store, outside[0])} do not belong to it"
            )
        if store.options.log_system == LogSystem.KAFKA:
            self._check_log_partitions_keep_counts(messages)
        appends, compacts = _split([dataclasses.replace(m, changelog_files=[]) for m in messages])
        appends.kind = CommitKind.OVERWRITE
        self._discard_changelog(messages)
        last = self._commit_delta(appends, commit_identifier, properties, guard, None, overwrite=match)
        if compacts.entries:
            try:
                last = self._commit_delta(compacts, commit_identifier, properties)
            except CommitConflictError:
                log.warning("compaction after the overwrite of %s conflicted and was dropped", store.path)
                self._discard_compaction(messages)
                self.compaction_discarded = True
        return last

    def _check_log_partitions_keep_counts(self, messages: Sequence[CommitMessage]) -> None:
        """A table with a Kafka log sends a bucket's records to one topic partition, and Kafka keeps
        order only within a partition. An overwrite that rewrote a partition with another bucket
        count (the table's, after an ALTER of ``bucket``) would send the keys' later changes to other
        topic partitions than their earlier ones: refuse it, as :func:`rescale` refuses log tables."""
        written = {(m.partition, m.total_buckets) for m in messages if m.new_files}
        if not written:
            return
        store = self.store
        before = PartitionBucketCounts(store, 0)  # 0: the partition has no live files
        before.learn({p for p, _ in written}, store.live_entries(store.snapshot_manager.latest()))
        for partition, count in sorted(written):
            old = before.count(partition)
            if old and old != count:
                raise OptionError(
                    f"overwrite of {partition_label(store, partition)} of {store.path} would rewrite it "
                    f"from {old} to {count} buckets, but the table has a Kafka log: its keys' later "
                    "changes would go to other topic partitions than their earlier ones, and Kafka keeps "
                    "no order across partitions. On a log table a partition keeps the count it was "
                    f"first written with; to overwrite it, set 'bucket' back to {old} for the overwrite"
                )

    def _discard_changelog(self, messages: Sequence[CommitMessage]) -> None:
        for m in messages:
            for f in m.changelog_files + m.compact_changelog_files:
                self.store.delete_data_file(m.partition, m.bucket, f)

    def discard_unpublished(self, messages: Sequence[CommitMessage]) -> None:
        """After :meth:`commit` raised: delete the files of ``messages`` that it did not publish
        (everything when it published nothing; the compaction's output when only the APPEND went
        through). For writers whose messages are never committed again; a Flink committer that
        replays its committables must keep them instead."""
        store = self.store
        appended = len(self.published) > 0
        self._discard_compaction([m for m in messages if not m.dv_delete])
        if appended:
            return
        for m in messages:
            for f in m.new_files + m.changelog_files:
                store.delete_data_file(m.partition, m.bucket, f)
            for meta in m.index_files + ([m.dv_file] if m.dv_delete and m.dv_file is not None else []):
                entry = IndexManifestEntry(0, m.partition, m.bucket, meta)
                store.file_io.delete(store.index_file_path(entry))

    def last_committed_identifier(self) -> int:
        """The highest commit identifier this commit user has committed (0 if none); batch commits
        (:data:`BATCH_COMMIT_IDENTIFIER`) do not count. Identifiers of one user only grow, so the
        newest snapshot of the user with an ordinary identifier holds it."""
        for s in self.store.snapshot_manager.newest_first():
            if s.commit_user == self.commit_user and s.commit_identifier != BATCH_COMMIT_IDENTIFIER:
                return int(s.commit_identifier)
        return 0

    def _discard_compaction(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the files that uncommitted compaction results wrote (never an upgraded input),
        their deletion vectors included."""
        store = self.store
        for m in messages:
            inputs = {f.file_name for f in m.compact_before}
            for f in m.compact_after + m.compact_changelog_files:
                if f.file_name not in inputs:
                    store.delete_data_file(m.partition, m.bucket, f)
            if m.dv_file is not None:
                dv = IndexManifestEntry(0, m.partition, m.bucket, m.dv_file)
                store.file_io.delete(store.index_file_path(dv))

    def _find_committed(self, identifier: int) -> Optional[int]:
        if identifier == BATCH_COMMIT_IDENTIFIER:
            return None  # batch commits carry no order, so they are never deduplicated
        return self.store.snapshot_manager.find_commit(self.commit_user, identifier)

    def _commit_delta(
        self,
        delta: _Delta,
        identifier: int,
        properties: Optional[dict[str, str]],
        guard: Optional[Callable[[Optional[Snapshot]], None]] = None,
        rebase: Optional[_SequenceRebase] = None,
        *,
        overwrite: Optional[Callable[[bytes], bool]] = None,
    ) -> int:
        """Publish ``delta`` as one snapshot after the latest, retrying lost races. Every manifest
        and manifest list written for an attempt that did not publish is deleted, and so is every
        file a failed commit wrote (a failure leaves nothing behind). With ``overwrite`` (a matcher
        of the partitions replaced) the attempt deletes their live files and index first."""
        store = self.store
        added = list(delta.entries)
        hash_index = None
        if delta.kind == CommitKind.APPEND and store.schema.bucket_mode == BucketMode.HASH_DYNAMIC:
            from lakelog.connector.table.index_commit import HashIndexCommit

            if self._hash_index is None:
                self._hash_index = HashIndexCommit(store)
            hash_index = self._hash_index
        ptypes = store.partition_types
        written: list[str] = []  # manifests and manifest lists of this commit not (yet) published

        def write_manifests(entries: list[ManifestEntry]) -> list[ManifestFileMeta]:
            metas = store.manifest_file.write(entries, ptypes) if entries else []
            written.extend(m.file_name for m in metas)
            return metas

        def write_list(metas: list[ManifestFileMeta]) -> tuple[str, int]:
            name, size = store.manifest_list.write(metas)
            written.append(name)
            return name, size

        def drop(names: Sequence[str]) -> None:
            for name in names:
                store.file_io.delete(store.manifest_dir + "/" + name)
                if name in written:
                    written.remove(name)

        published = False
        fenced = 0
        pub = self._log
        changes = log_changes(store, delta.kind, delta.entries, delta.changelog) if pub is not None else []
        replaced: Optional[list[ManifestEntry]] = None  # an overwrite's deletes, for the last attempt
        locked = contextlib.ExitStack()
        try:
            delta_metas = [] if overwrite is not None else write_manifests(delta.entries)
            changelog_metas = write_manifests(delta.changelog)
            max_retries = self._max_retries()
            for attempt in range(max_retries):
                if attempt == 1:  # lost a race: hold the commit lock from now on, so as not to lose again
                    locked.enter_context(store.snapshot_manager.lock())
                latest = store.snapshot_manager.latest()
                if guard is not None:
                    guard(latest)
                attempt_files: list[str] = []
                try:
                    live: Optional[list[ManifestEntry]] = None
                    if overwrite is not None:
                        live = store.live_entries(latest)
                        deletes = [_deleted(e) for e in live if e.bucket >= 0 and overwrite(e.partition)]
                        if replaced is None or _ids(deletes) != _ids(replaced):
                            drop([m.file_name for m in delta_metas])
                            delta.entries = deletes + added
                            delta_metas = write_manifests(delta.entries)
                            replaced = deletes
                    if rebase is not None and rebase.check(latest):
                        # another writer's rows landed above ours: commit rebased copies of our files
                        drop([m.file_name for m in delta_metas + changelog_metas])
                        delta = _split(rebase.messages)[0]
                        delta_metas = write_manifests(delta.entries)
                        changelog_metas = write_manifests(delta.changelog)
                    if overwrite is None:
                        deleted = [e for e in delta.entries if e.kind == 1]
                        if deleted:
                            self._check_deletes_are_live(latest, deleted)
                        live = self._check_total_buckets(latest, delta.entries, live)
                    index_manifest = self._index_manifest(latest, delta, overwrite, hash_index)
                    previous_index = latest.index_manifest if latest is not None else None
                    if index_manifest is not None and index_manifest != previous_index:
                        attempt_files.append(index_manifest)
                    known = {m.file_name for m in store.manifest_metas(latest)} if latest else set()
                    base_metas = self._base_manifests(latest)
                except (MissingFileError, SnapshotNotFoundError):
                    drop(attempt_files)
                    if hash_index is not None:
                        hash_index.abandon()
                    if latest is None or store.snapshot_manager.holds(latest):
                        raise
                    continue  # the snapshot this attempt built on was expired under it: start again
                except BaseException:
                    drop(attempt_files)
                    raise
                if latest is not None:
                    attempt_files += [m.file_name for m in base_metas if m.file_name not in known]
                    written.extend(attempt_files)  # merged manifests written for this attempt
                base_name, base_size = write_list(base_metas)
                delta_name, delta_size = write_list(delta_metas)
                cl_name, cl_size = write_list(changelog_metas) if changelog_metas else (None, None)
                attempt_files += [n for n in (base_name, delta_name, cl_name) if n]
                snapshot = self._snapshot(
                    latest, delta, identifier, properties, (base_name, base_size), (delta_name, delta_size),
                    (cl_name, cl_size), index_manifest,
                )
                previous: dict[int, int] = dict(latest.log_offsets or {}) if latest else {}
                if pub is not None:  # the log: catch up, then this snapshot's changes, before it exists
                    try:
                        pub.begin(latest, partial(snapshot_log_changes, store), _snapshot_or_none(store))
                        pub.produce(self.commit_user, identifier, delta.kind, changes)
                        snapshot.log_offsets = {**previous, **pub.end_offsets()}
                    except LogSystemError:
                        # another process's publisher fenced ours: like a lost race, start again
                        if not pub.was_fenced or fenced >= _FENCED_RETRIES:
                            raise
                        fenced += 1
                        drop(attempt_files)
                        if hash_index is not None:
                            hash_index.abandon()
                        continue
                elif self._eventual_offsets is not None or previous:
                    ours = self._eventual_offsets or {}
                    parts = set(ours) | set(previous)
                    snapshot.log_offsets = {p: max(ours.get(p, 0), previous.get(p, 0)) for p in parts}
                if self._publish_snapshot(snapshot, latest, delta):
                    published = True
                    self.published.append(snapshot.id)
                    written.clear()
                    if rebase is not None:
                        rebase.committed()
                    if pub is not None:
                        self._publish(pub, snapshot)
                    if hash_index is not None:
                        self.index_merged = self.index_merged or hash_index.merged
                        hash_index.published()
                    self._delete_unpublished_vectors()
                    return snapshot.id
                # Lost the race for this id: drop what this attempt wrote and retry on the new latest.
                if pub is not None:
                    pub.abort()
                drop(attempt_files)
                if hash_index is not None:
                    hash_index.abandon()
                time.sleep(min(0.001 * (2 ** min(attempt, 8)), 0.2))
            raise CommitConflictError(
                f"gave up committing to {store.path} after {max_retries} attempts "
                "(option 'commit.max-retries')"
            )
        finally:
            locked.close()
            if not published:
                drop(list(written))
                if rebase is not None:
                    rebase.abandon()
                if hash_index is not None:
                    hash_index.abandon()

    def _publish_snapshot(self, snapshot: Snapshot, parent: Optional[Snapshot], delta: _Delta) -> bool:
        """Publish ``snapshot`` after ``parent``; with :attr:`verify_new_files`, first check under
        the commit lock that the files it adds are all there (see there)."""
        sm = self.store.snapshot_manager
        if not self.verify_new_files and parent is not None:
            return sm.try_commit(snapshot, parent)
        with sm.lock():
            store, fio = self.store, self.store.file_io
            if parent is None and not fio.file_exists(store.schema_manager.schema_path(snapshot.schema_id)):
                # the table's first snapshot, and its schema is gone: the table was dropped (or renamed
                # on an object store: copied, then the old objects deleted under this lock) after this
                # writer opened it; committing would leave a snapshot that no table owns
                raise TableNotFoundError(
                    f"cannot commit to {store.path}: the table is gone (dropped, or renamed, after this "
                    "writer opened it); nothing was committed. Open the table by its name again"
                )
            if parent is None:
                self._check_layout_unchanged()
            if not self.verify_new_files:
                return sm.try_commit(snapshot, parent)
            for e in delta.entries + delta.changelog:
                path = store.data_file_path(e.partition, e.bucket, e.file.file_name, e.file.external_path)
                if e.kind == 0 and not fio.file_exists(path):
                    raise MissingFileError(
                        f"commit to {self.store.path} adds the file {path}, which is gone (an expiration or "
                        "a rollback removed the snapshot that held it); nothing was committed"
                    )
            return sm.try_commit(snapshot, parent)

    def _check_layout_unchanged(self) -> None:
        """Before a table's first snapshot: refuse when an ALTER changed the table's layout (its
        primary key or an immutable option, which a table without snapshots may change) after this
        writer opened it, since its files were written for the old layout."""
        store = self.store
        latest = store.schema_manager.latest()
        if latest is None or latest.id == store.schema.id:
            return
        ours, theirs = store.schema, latest
        keys = changed_options(ours.options, theirs.options, IMMUTABLE_KEYS | {CoreOptions.BUCKET.key})
        if ours.primary_keys != theirs.primary_keys:
            keys.insert(0, "primary key")
        if keys:
            raise CommitConflictError(
                f"cannot commit to {store.location}: its {', '.join(keys)} changed (schema {theirs.id}) "
                f"after this writer opened it (schema {ours.id}), and its files follow the old layout; "
                "nothing was committed. Open the table again and write the rows again"
            )

    def _publish(self, pub: LogPublisher, snapshot: Snapshot) -> None:
        """Commit the log transaction of a published snapshot. When that fails the snapshot stands
        (its data is committed): its changes are published again at once from its files by a new
        producer, and failing that, by the next commit."""
        try:
            pub.commit(snapshot.id)
            return
        except LogSystemError as e:
            first = e
        try:
            pub.catch_up(snapshot, partial(snapshot_log_changes, self.store), _snapshot_or_none(self.store))
        except LogSystemError as e:
            log.warning(
                "snapshot %s of %s is committed but its changes did not reach the log (%s; then %s); the "
                "next "
                "commit publishes them",
                snapshot.id,
                self.store.path,
                first,
                e,
            )

    def _max_retries(self) -> int:
        """Attempts at one snapshot: the first and ``commit.max-retries`` more."""
        return int(self.store.options.commit_max_retries) + 1

    def _index_manifest(
        self,
        latest: Optional[Snapshot],
        delta: _Delta,
        overwrite: Optional[Callable[[bytes], bool]],
        hash_index: Any,
    ) -> Optional[str]:
        """The index manifest of the snapshot after ``latest``: the previous one when the commit
        changes no index file, else a new full-state manifest."""
        store = self.store
        previous = store.index_entries(latest)
        self._unpublished_vectors = []  # this attempt's (see _check_dv_bases)
        drops: list[Callable[[IndexManifestEntry], bool]] = []
        if delta.kind == CommitKind.COMPACT:  # a compaction's deletion vectors
            vector_messages = [m for m in delta.messages if m.dv_changed or m.dv_guard]
            self._check_dv_views(latest, [m for m in delta.messages if m.dv_view is not None])
        else:  # an append table's DELETE
            vector_messages = [m for m in delta.messages if m.dv_delete]
            self._check_dv_targets(latest, vector_messages)
        added: list[IndexManifestEntry] = []
        if vector_messages:
            final = self._check_dv_bases(previous, vector_messages)
            added = [IndexManifestEntry(0, p, b, f) for (p, b, _), f in final.items() if f is not None]
            replaced = set(final)  # every old file of those buckets goes (Paimon's may be several)
            if any(e.slot() in replaced for e in previous):
                drops.append(lambda e: e.slot() in replaced)
        if delta.kind != CommitKind.COMPACT:  # the writers' hash indexes (dynamic buckets)
            if hash_index is not None:
                added += hash_index.resolve(previous, delta.messages)
            else:
                added += [
                    IndexManifestEntry(0, m.partition, m.bucket, f)
                    for m in delta.messages
                    for f in m.index_files
                ]
        if overwrite is not None and any(e.bucket >= 0 and overwrite(e.partition) for e in previous):
            drops.append(lambda e: e.bucket >= 0 and overwrite(e.partition))
        dropped = (lambda e: any(d(e) for d in drops)) if drops else None
        if not added and dropped is None:
            return latest.index_manifest if latest is not None else None
        entries = combine_index_entries(previous, added, dropped=dropped)
        if not entries and (latest is None or not latest.index_manifest):
            return None
        return store.index_manifest_file.write(entries)

    def _check_dv_bases(
        self, previous: Sequence[IndexManifestEntry], changed: Sequence[CommitMessage]
    ) -> dict[tuple[bytes, int, str], Optional[IndexFileMeta]]:
        """Deletion vectors are replaced a bucket at a time: a compaction's new file holds every
        vector of its bucket as the compaction saw them, so the bucket's live file must still be
        the one it started from (another compaction would otherwise lose its marks). Compactions
        of one bucket in one commit (a sink's flushes between two checkpoints) chain, in order:
        each starts from the file of the one before. Returns each bucket's file after the commit
        (None: no vectors left); the files a later one of the chain replaced are never published
        and are deleted once the commit is (see :meth:`_delete_unpublished_vectors`)."""
        slots: dict[tuple[bytes, int, str], list[IndexManifestEntry]] = {}
        for e in previous:
            slots.setdefault(e.slot(), []).append(e)
        live = {slot: vectors_base(es) for slot, es in slots.items()}
        final: dict[tuple[bytes, int, str], Optional[IndexFileMeta]] = {}
        for m in changed:
            slot = (m.partition, m.bucket, DELETION_VECTORS_INDEX)
            now = live.get(slot)
            if now != m.dv_base:
                where = partition_label(self.store, m.partition)
                what = "delete" if m.dv_delete else "compaction"
                raise CommitConflictError(
                    f"the deletion vectors of bucket {m.bucket} of {where} in {self.store.path} changed "
                    f"since this {what} began ({m.dv_base} is now {now})"
                )
            if not m.dv_changed:
                continue  # a guard: checked, changes nothing
            replaced = final.get(slot)
            if replaced is not None:
                self._unpublished_vectors.append(IndexManifestEntry(0, m.partition, m.bucket, replaced))
            final[slot] = m.dv_file
            live[slot] = m.dv_file.file_name if m.dv_file is not None else None
        return final

    def _delete_unpublished_vectors(self) -> None:
        """Once a snapshot is published: delete the deletion-vector files that a later compaction
        of the same bucket in the same commit replaced (no snapshot ever named them)."""
        for e in self._unpublished_vectors:
            self.store.file_io.delete(self.store.index_file_path(e))
        self._unpublished_vectors = []

    def _check_dv_targets(self, latest: Optional[Snapshot], messages: Sequence[CommitMessage]) -> None:
        """A DELETE of an append table marks rows of files it read: every file its vectors name
        must still be live (a compaction that rewrote one meanwhile copied the rows it marks)."""
        if not messages:
            return
        live: dict[tuple[bytes, int], set[str]] = {}
        for e in self.store.live_entries(latest):
            live.setdefault((e.partition, e.bucket), set()).add(e.file.file_name)
        for m in messages:
            named = {r["f0"] for r in (m.dv_file.dv_ranges or ()) if r is not None} if m.dv_file else set()
            gone = sorted(named - live.get((m.partition, m.bucket), set()))
            if gone:
                where = partition_label(self.store, m.partition)
                raise CommitConflictError(
                    f"data file {gone[0]} of bucket {m.bucket} of {where} in {self.store.path} was rewritten "
                    "since this delete read it"
                )

    def _check_dv_views(self, latest: Optional[Snapshot], messages: Sequence[CommitMessage]) -> None:
        """A merge-on-write compaction marked the older rows of its keys in the files above level
        0 it knew of: when another commit has put other files there since (a compaction of its
        own), those may hold older rows it never marked, so it must not commit.

        Compactions of one bucket in one commit chain (each began where the one before ended), so
        the files above level 0 after all of them must be what the last one saw: they differ when,
        and only when, the chain began from other files than the bucket's committed ones. (The
        chain is checked as a whole since a committer may have cancelled a file one of them wrote
        and the next one removed.)"""
        if not messages:
            return
        upper: dict[tuple[bytes, int], set[str]] = {}
        for e in self.store.live_entries(latest):
            if e.file.level > 0:
                upper.setdefault((e.partition, e.bucket), set()).add(e.file.file_name)
        last: dict[tuple[bytes, int], CommitMessage] = {}
        for m in messages:  # in commit order
            key = (m.partition, m.bucket)
            now = upper.setdefault(key, set())
            now -= {f.file_name for f in m.compact_before}
            now |= {f.file_name for f in m.compact_after if f.level > 0}
            last[key] = m
        for key, m_last in last.items():
            if upper[key] != set(m_last.dv_view or ()):
                where = partition_label(self.store, m_last.partition)
                raise CommitConflictError(
                    f"the files above level 0 of bucket {m_last.bucket} of {where} in {self.store.path} "
                    "changed since this compaction looked up its keys in them"
                )

    def _check_total_buckets(
        self, latest: Optional[Snapshot], entries: list[ManifestEntry], live: Optional[list[ManifestEntry]]
    ) -> Optional[list[ManifestEntry]]:
        """Paimon's rule for every commit but an overwrite: all files of a partition record one bucket
        count (``_TOTAL_BUCKETS``; -1 of dynamic buckets is not checked). A writer that routed rows by
        another count than the partition's files would put keys into the wrong buckets."""
        new: dict[bytes, set[int]] = {}
        for e in entries:
            if e.kind == 0 and e.total_buckets > 0:
                new.setdefault(e.partition, set()).add(e.total_buckets)
        if not new:
            return live
        store = self.store
        for p, totals in new.items():
            if len(totals) > 1:
                raise CommitConflictError(
                    f"commit to {store.path} writes {partition_label(store, p)} with bucket counts "
                    f"{sorted(totals)} at once. Give up committing."
                )
        if live is None:
            live = store.live_entries(latest)
        for e in live:
            wanted = new.get(e.partition)
            if wanted is None or e.total_buckets <= 0 or e.total_buckets in wanted:
                continue
            raise CommitConflictError(
                f"Total buckets of {partition_label(store, e.partition)} of {store.path} changed from "
                f"{e.total_buckets} to {next(iter(wanted))} without overwrite. Give up committing. "
                "(Another writer rescaled it, or this writer started before a rescale: write the rows "
                "again, or rescale the partition first)"
            )
        return live

    def _snapshot(
        self,
        latest: Optional[Snapshot],
        delta: _Delta,
        identifier: int,
        properties: Optional[dict[str, str]],
        base: tuple[str, int],
        delta_list: tuple[str, int],
        changelog_list: tuple[Optional[str], Optional[int]],
        index_manifest: Optional[str] = None,
    ) -> Snapshot:
        added_rows = sum(e.file.row_count for e in delta.entries if e.kind == 0)
        deleted_rows = sum(e.file.row_count for e in delta.entries if e.kind == 1)
        total = (latest.total_record_count or 0) if latest else 0
        return Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=self.store.schema.id,
            base_manifest_list=base[0],
            delta_manifest_list=delta_list[0],
            changelog_manifest_list=changelog_list[0],
            index_manifest=index_manifest,
            commit_user=self.commit_user,
            commit_identifier=identifier,
            commit_kind=delta.kind,
            time_millis=int(time.time() * 1000),
            total_record_count=total + added_rows - deleted_rows,
            delta_record_count=added_rows - deleted_rows,
            changelog_record_count=(
                sum(e.file.row_count for e in delta.changelog) if delta.changelog else None
            ),
            base_manifest_list_size=base[1],
            delta_manifest_list_size=delta_list[1],
            changelog_manifest_list_size=changelog_list[1],
            properties=properties,
            writer_version=WRITER_VERSION,
            statistics=self._new_statistics or inherited_statistics(self.store, latest),
        )

    def _check_deletes_are_live(self, latest: Optional[Snapshot], deleted: list[ManifestEntry]) -> None:
        # a file counts as live on its level only: an upgrade to another level is a change too
        live = {
            (e.partition, e.bucket, e.file.level, e.file.file_name) for e in self.store.live_entries(latest)
        }
        gone = [
            e.file.file_name
            for e in deleted
            if (e.partition, e.bucket, e.file.level, e.file.file_name) not in live
        ]
        if gone:
            raise CommitConflictError(
                f"commit to {self.store.path} would delete file(s) {gone[:5]} that are no longer in the "
                f"latest snapshot {latest.id if latest else None} (another commit, probably a compaction, "
                "removed them); redo the compaction on the new snapshot"
            )

    def _base_manifests(self, latest: Optional[Snapshot]) -> list[ManifestFileMeta]:
        """The previous snapshot's base and delta manifests, merged when there are too many."""
        if latest is None:
            return []
        store = self.store
        metas = store.manifest_metas(latest)
        opts = store.options
        if len(metas) < opts.manifest_merge_min_count:
            return metas
        live = merge_entries(store.entries_of(metas))
        return store.manifest_file.write(live, store.partition_types) if live else []


class _SequenceRebase:
    """Keeps "the later commit wins" in primary-key buckets that several writers write at once.

    Before each attempt, :meth:`check` compares this commit's new files with the bucket's live
    files in the snapshot the attempt would follow. Where the bucket already holds a sequence number
    at or above the smallest of ours (another writer, started from the same snapshot, committed
    first), our new files and input-changelog files are rewritten with their numbers raised above
    the bucket's (:func:`~lakelog.connector.lsm.rebase.rebase_file`), and :attr:`messages` carry
    the copies. The originals are deleted once the copies are published; a commit that fails keeps
    them (and deletes the copies), so a replay of the same messages still finds its files.

    A bucket whose commit also carries changelog produced by compaction (the lookup and
    full-compaction producers) cannot be rebased without making that changelog wrong: the commit
    fails with :class:`CommitConflictError` naming the bucket, before anything is published.
    """

    def __init__(self, store: TableStore, messages: Sequence[CommitMessage]) -> None:
        self.store = store
        self.original = list(messages)
        self.messages = list(messages)
        self.buckets: set[tuple[bytes, int]] = set()  # buckets whose files were rebased
        self._offsets: dict[tuple[bytes, int], int] = {}
        self._copies: list[tuple[bytes, int, DataFileMeta]] = []
        self._first = {
            (m.partition, m.bucket): min(f.min_sequence_number for f in m.new_files)
            for m in messages
            if m.new_files
        }

    def check(self, latest: Optional[Snapshot]) -> bool:
        """Rebase against ``latest``; True when :attr:`messages` changed."""
        if latest is None or not self._first:
            return False
        top: dict[tuple[bytes, int], int] = {}
        for e in self.store.live_entries(latest):
            key = (e.partition, e.bucket)
            if key in self._first:
                top[key] = max(top.get(key, -1), e.file.max_sequence_number)
        offsets = {k: top[k] - first + 1 for k, first in self._first.items() if top.get(k, -1) >= first}
        if offsets == self._offsets:
            return False
        for m in self.original:
            if (m.partition, m.bucket) in offsets and m.compact_changelog_files:
                partition = self.store.partition_dir(self.store.partition_values(m.partition))
                producer = self.store.options.changelog_producer.value
                raise CommitConflictError(
                    f"bucket {m.bucket} of partition {partition!r} of {self.store.path} was written by "
                    f"another writer since this writer started, and this commit's changelog ({producer} "
                    "producer) was computed without those rows; several writers of one bucket cannot "
                    "produce an exact changelog: write the bucket from one writer, or write again"
                )
        self.abandon()
        self.messages = [self._rebased(m, offsets.get((m.partition, m.bucket))) for m in self.original]
        self._offsets, self.buckets = offsets, set(offsets)
        log.info("rebased new files of %d bucket(s) of %s over another writer", len(offsets), self.store.path)
        return True

    def _rebased(self, m: CommitMessage, offset: Optional[int]) -> CommitMessage:
        if offset is None:
            return m

        def copies(files: list[DataFileMeta], changelog: bool = False) -> list[DataFileMeta]:
            out: list[DataFileMeta] = []
            for f in files:
                new = rebase_file(self.store, m.partition, m.bucket, f, offset, changelog=changelog)
                self._copies += [(m.partition, m.bucket, c) for c in new]
                out += new
            return out

        return dataclasses.replace(
            m,
            new_files=copies(m.new_files),
            changelog_files=copies(m.changelog_files, changelog=True),
            compact_before=[],
            compact_after=[],
            compact_changelog_files=[],
        )

    def committed(self) -> None:
        """The rebased copies are published: delete the originals they replace."""
        for m in self.original:
            if (m.partition, m.bucket) in self.buckets:
                for f in m.new_files + m.changelog_files:
                    self.store.delete_data_file(m.partition, m.bucket, f)
        self._copies = []

    def abandon(self) -> None:
        """Delete the copies not (or not yet) published."""
        for partition, bucket, f in self._copies:
            self.store.delete_data_file(partition, bucket, f)
        self._copies = []


def _snapshot_or_none(store: TableStore) -> Callable[[int], Optional[Snapshot]]:
    def get(snapshot_id: int) -> Optional[Snapshot]:
        try:
            return store.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            return None

    return get
def _deleted(e: ManifestEntry) -> ManifestEntry:
    return ManifestEntry(1, e.partition, e.bucket, e.total_buckets, e.file)


def _ids(entries: Sequence[ManifestEntry]) -> list[tuple[Any, ...]]:
    return [e.identifier() for e in entries]


def _split(messages: Sequence[CommitMessage]) -> tuple[_Delta, _Delta]:
    appends = _Delta([], [], CommitKind.APPEND, list(messages))
    compacts = _Delta([], [], CommitKind.COMPACT)
    for m in messages:

        def entry(kind: int, f: DataFileMeta, m: CommitMessage = m) -> ManifestEntry:
            return ManifestEntry(kind, m.partition, m.bucket, m.total_buckets, f)

        appends.entries += [entry(0, f) for f in m.new_files]
        appends.changelog += [entry(0, f) for f in m.changelog_files]
        compacts.entries += [entry(1, f) for f in m.compact_before]
        compacts.entries += [entry(0, f) for f in m.compact_after]
        compacts.changelog += [entry(0, f) for f in m.compact_changelog_files]
        if (m.dv_changed or m.dv_view is not None or m.dv_guard) and not m.dv_delete:
            compacts.messages.append(m)  # its deletion vectors (and its view) go with the compaction
    return appends, compacts
