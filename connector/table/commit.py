"""The committer: publishes snapshots atomically, with optimistic concurrency and idempotence.

A commit writes its delta manifest once, then loops: read the latest snapshot, check conflicts,
write manifest lists, and try to create ``snapshot-<latest + 1>``. Creation never overwrites, so
exactly one of several racing committers wins each id and the others retry on the new base.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.errors import CommitConflictError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.manifest import DataFileMeta, ManifestEntry, ManifestFileMeta, merge_entries
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore

__all__ = ["TableCommit", "BATCH_COMMIT_IDENTIFIER", "CommitKind"]

log = logging.getLogger(__name__)

BATCH_COMMIT_IDENTIFIER = 9223372036854775807  # Long.MAX_VALUE, as Paimon's batch writers use
WRITER_VERSION = "lakelog-0.1.0"


class CommitKind:
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"


@dataclass
class _Delta:
    entries: list[ManifestEntry]
    changelog: list[ManifestEntry]
    kind: str


class TableCommit:
    """Commits messages from writers as snapshots of ``store``'s table."""

    def __init__(self, store: TableStore, commit_user: Optional[str] = None) -> None:
        self.store = store
        self.commit_user = commit_user or str(uuid.uuid4())
        # set by commit(): True when the appended files committed but the compaction did not; a
        # long-lived writer must then reload its levels from the table
        self.compaction_discarded = False

    def commit(
        self,
        messages: Sequence[CommitMessage],
        commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        properties: Optional[dict[str, str]] = None,
        guard: Optional[Callable[[Optional[Snapshot]], None]] = None,
    ) -> Optional[int]:
        """Publish ``messages``; return the id of the last snapshot made, or None if there was
        nothing to commit.

        New files go into an APPEND snapshot; compaction results (``compact_before`` /
        ``compact_after``) into a COMPACT snapshot after it, as Paimon does. A commit whose
        (commit user, identifier) is already in the table is skipped and returns that snapshot id.

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
        appends, compacts = _split(messages)
        last: Optional[int] = None
        self.compaction_discarded = False
        if appends.entries or appends.changelog:
            last = self._commit_delta(appends, commit_identifier, properties, guard)
        if compacts.entries or compacts.changelog:
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

    def _discard_compaction(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the files that uncommitted compaction results wrote (never an upgraded input)."""
        store = self.store
        for m in messages:
            inputs = {f.file_name for f in m.compact_before}
            for f in m.compact_after + m.compact_changelog_files:
                if f.file_name not in inputs:
                    store.file_io.delete(store.data_file_path(m.partition, m.bucket, f.file_name))

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
    ) -> int:
        store = self.store
        ptypes = store.partition_types
        delta_metas = store.manifest_file.write(delta.entries, ptypes) if delta.entries else []
        changelog_metas = store.manifest_file.write(delta.changelog, ptypes) if delta.changelog else []
        deleted = [e for e in delta.entries if e.kind == 1]
        added_rows = sum(e.file.row_count for e in delta.entries if e.kind == 0)
        deleted_rows = sum(e.file.row_count for e in deleted)
        attempts = store.options.commit_max_retries + 1
        for attempt in range(attempts):
            latest = store.snapshot_manager.latest()
            if guard is not None:
                try:
                    guard(latest)
                except BaseException:
                    for meta in delta_metas + changelog_metas:  # written for this commit only
                        store.file_io.delete(store.manifest_dir + "/" + meta.file_name)
                    raise
            if deleted:
                self._check_deletes_are_live(latest, deleted)
            base_metas = self._base_manifests(latest)
            base_name, base_size = store.manifest_list.write(base_metas)
            delta_name, delta_size = store.manifest_list.write(delta_metas)
            cl_name, cl_size = store.manifest_list.write(changelog_metas) if changelog_metas else (None, None)
            new_id = (latest.id + 1) if latest else 1
            total = (latest.total_record_count or 0) if latest else 0
            snapshot = Snapshot(
                id=new_id,
                schema_id=store.schema.id,
                base_manifest_list=base_name,
                delta_manifest_list=delta_name,
                changelog_manifest_list=cl_name,
                commit_user=self.commit_user,
                commit_identifier=identifier,
                commit_kind=delta.kind,
                time_millis=int(time.time() * 1000),
                total_record_count=total + added_rows - deleted_rows,
                delta_record_count=added_rows - deleted_rows,
                changelog_record_count=sum(e.file.row_count for e in delta.changelog)
                if delta.changelog
                else None,
                base_manifest_list_size=base_size,
                delta_manifest_list_size=delta_size,
                changelog_manifest_list_size=cl_size,
                properties=properties,
                writer_version=WRITER_VERSION,
            )
            if store.snapshot_manager.try_commit(snapshot):
                return new_id
            # Lost the race for this id: drop our manifest lists and retry on the new latest.
            for name in (base_name, delta_name, cl_name):
                if name:
                    store.file_io.delete(store.manifest_dir + "/" + name)
            time.sleep(min(0.001 * (2 ** min(attempt, 8)), 0.2))
        raise CommitConflictError(
            f"gave up committing to {store.path} after {attempts} attempts (option 'commit.max-retries')"
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


def _split(messages: Sequence[CommitMessage]) -> tuple[_Delta, _Delta]:
    appends = _Delta([], [], CommitKind.APPEND)
    compacts = _Delta([], [], CommitKind.COMPACT)
    for m in messages:

        def entry(kind: int, f: DataFileMeta, m: CommitMessage = m) -> ManifestEntry:
            return ManifestEntry(kind, m.partition, m.bucket, m.total_buckets, f)

        appends.entries += [entry(0, f) for f in m.new_files]
        appends.changelog += [entry(0, f) for f in m.changelog_files]
        compacts.entries += [entry(1, f) for f in m.compact_before]
        compacts.entries += [entry(0, f) for f in m.compact_after]
        compacts.changelog += [entry(0, f) for f in m.compact_changelog_files]
    return appends, compacts
