"""The commit protocol of lakelog's Flink graphs (no pyflink): idempotent, ordered commits of
committables, shared by the sink and the compaction job. The Flink operator that drives it is
:class:`lakelog.operators.channel.LakelogCommitter`.

Idempotence: every committable has a unique id. Each snapshot a :class:`SinkCommitter` makes lists
the ids it contains in the snapshot property ``lakelog.committables``; on start the committer reads
the ids already committed by its commit user and skips them, so a replay after a failover never
commits a file twice. Commit identifiers of one commit user strictly increase: the next one is
``max(identifier kept in Flink state, last identifier of this user in the table + 1)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from typing import Any, Optional, Protocol

from lakelog.connector.errors import CommitConflictError, SnapshotNotFoundError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import OverwriteScope, TableCommit
from lakelog.connector.table.maintenance import after_commit
from lakelog.operators.codec import Committable, decode_committable, merge_log_offsets, merge_properties

__all__ = [
    "Committer",
    "SinkCommitter",
    "OverwriteRequest",
    "ChannelReader",
    "WAKE",
    "commit_released",
    "COMMITTABLES_PROPERTY",
    "END_OF_INPUT_PROPERTY",
    "END_OF_INPUT",
]

END_OF_INPUT = 2**63 - 2  # a keyed event-time timer fires here at end of bounded input
WAKE = "{}"  # a committer input line that is no committable: it only starts the committer

log = logging.getLogger(__name__)

COMMITTABLES_PROPERTY = "lakelog.committables"
END_OF_INPUT_PROPERTY = "lakelog.end-of-input"


def _user_snapshots(store: TableStore, commit_user: str) -> list[tuple[int, int, dict[str, str]]]:
    """(snapshot id, commit identifier, properties) of ``commit_user``'s snapshots, newest first."""
    return [
        (s.id, s.commit_identifier, dict(s.properties or {}))
        for s in store.snapshot_manager.newest_first()
        if s.commit_user == commit_user
    ]


@dataclasses.dataclass(frozen=True)
class OverwriteRequest:
    """A sink that overwrites (SQL ``INSERT OVERWRITE``, batch only): its one commit, at end of input,
    is an OVERWRITE snapshot, as :meth:`TableCommit.overwrite` makes it. ``dynamic``: it replaces
    the partitions the rows fall into (and nothing without rows); else the partitions whose values
    match ``spec`` (partition field -> value, already of the field's type; every partition when
    empty), emptied when no rows come."""

    dynamic: bool
    spec: tuple[tuple[str, Any], ...] = ()

    def scope(self, messages: Sequence[CommitMessage]) -> OverwriteScope:
        if self.dynamic:
            return OverwriteScope(partitions=frozenset(m.partition for m in messages if m.new_files))
        return OverwriteScope(spec=self.spec)


class Committer(Protocol):
    """What the committer operator drives: :class:`SinkCommitter`, or the compaction job's
    :class:`~lakelog.operators.compact_buckets.CompactionCommitter`. Made per process by
    ``committer_class(store, commit_user, run_token)``."""

    @property
    def done(self) -> set[str]:
        """Ids of the committables finished with (committed, or dropped for good)."""
        ...

    def refresh(self) -> None:
        """Learn what other parties of the commit user committed since the last look."""
        ...

    def commit(
        self, committables: Sequence[Committable], next_identifier: int, *, final: bool
    ) -> Optional[int]:
        """Commit what is not done yet as one commit; the identifier used, or None."""
        ...


class _Superseded(Exception):
    """A commit attempt found a newer snapshot of its own commit user (raised by the guard)."""


class SinkCommitter:
    """Commits batches of committables for one commit user, skipping ids already committed."""

    _ATTEMPTS = 50

    def __init__(
        self,
        store: TableStore,
        commit_user: str,
        run_token: str,
        *,
        compactor: bool = False,
        overwrite: Optional[OverwriteRequest] = None,
    ) -> None:
        self.store = store
        self.commit_user = commit_user
        self.run_token = run_token
        self.compactor = compactor  # the compaction job's: expires for write-only writers
        self.overwrite = overwrite
        self.table_commit = TableCommit(store, commit_user)
        self.table_commit.verify_new_files = True  # committables are replayed after a failover
        self.committed: set[str] = set()
        self.last_identifier = 0
        self.finished = False
        self.seen = store.snapshot_manager.latest_id() or 0  # the newest snapshot looked at
        for _, ident, props in _user_snapshots(store, commit_user):
            self._learn(ident, props)

    def _learn(self, ident: int, props: dict[str, str]) -> None:
        self.last_identifier = max(self.last_identifier, ident)
        text = props.get(COMMITTABLES_PROPERTY)
        if text:
            self.committed.update(text.split(","))
        if props.get(END_OF_INPUT_PROPERTY) == self.run_token:
            self.finished = True

    def _newer_of_user(self, upto: Optional[int]) -> list[Snapshot]:
        """This commit user's snapshots after ``self.seen`` up to ``upto`` (expired ones skipped)."""
        out = []
        sm = self.store.snapshot_manager
        for sid in range(self.seen + 1, (upto or 0) + 1):
            try:
                s = sm.snapshot(sid)
            except SnapshotNotFoundError:
                continue
            if s.commit_user == self.commit_user:
                out.append(s)
        return out

    def refresh(self) -> None:
        """Learn what this commit user committed since the last look. Another committer of the same
        user can commit meanwhile: one of a job attempt that is still being cancelled."""
        latest = self.store.snapshot_manager.latest_id()
        for s in self._newer_of_user(latest):
            self._learn(s.commit_identifier, dict(s.properties or {}))
        self.seen = max(self.seen, latest or 0)

    @property
    def done(self) -> set[str]:
        """Ids of the committables this commit user has committed."""
        return self.committed

    def commit(
        self, committables: Sequence[Committable], next_identifier: int, *, final: bool
    ) -> Optional[int]:
        """Commit the committables not committed yet as one commit; return the identifier used, or
        None when nothing was committed.

        ``final`` marks the commit made at end of input (from committables not yet released by a
        checkpoint); once this run has made it, a replay commits nothing more (everything the run
        produced is in the table by then).
        """
        for _ in range(self._ATTEMPTS):
            self.refresh()
            if self.finished:
                log.info(
                    "commit user %s already finished this run; skipping %d committables",
                    self.commit_user,
                    len(committables),
                )
                return None
            todo = [c for c in committables if c.id not in self.committed and self._files_exist(c)]
            if self.overwrite is not None and not final:
                raise CommitConflictError(
                    f"sink into {self.store.path}: an overwrite commits once, at end of input; run it "
                    "in batch mode"
                )
            if not todo and (self.overwrite is None or self.overwrite.dynamic):
                return None  # (a static overwrite without rows still empties its partitions)
            messages = _cancel_chained_compactions([m for c in todo for m in c.messages])
            props = merge_properties(todo) or {}
            props[COMMITTABLES_PROPERTY] = ",".join(c.id for c in todo)
            if final:
                props[END_OF_INPUT_PROPERTY] = self.run_token
            identifier = max(int(next_identifier), self.last_identifier + 1)
            offsets = merge_log_offsets(todo)
            views = [c.view for c in todo if c.view is not None]
            view = min(views) if views else None

            def guard(latest: Optional[Snapshot], view: Optional[int] = view) -> None:
                self._guard(latest)
                if view is not None:
                    self._check_key_index_view(latest, view)

            try:
                if self.overwrite is not None:
                    sid = self.table_commit.overwrite(
                        messages, self.overwrite.scope(messages), identifier, properties=props, guard=guard
                    )
                else:
                    sid = self.table_commit.commit(
                        messages, identifier, properties=props, guard=guard, log_offsets=offsets
                    )
            except _Superseded:
                continue  # the same commit user committed meanwhile: look again
            if sid is None:
                return None  # only empty messages: nothing to record
            self.committed.update(c.id for c in todo)
            self.last_identifier = identifier
            self.finished = final
            after_commit(self.store, compactor=self.compactor)
            log.info("committed %d committables as identifier %d (snapshot %s)", len(todo), identifier, sid)
            if self.table_commit.compaction_discarded and not final and not self.compactor:
                self._writers_are_stale()
            return identifier
        raise CommitConflictError(
            f"committer of {self.commit_user} on {self.store.path}: another committer of the same "
            f"commit user kept committing; gave up after {self._ATTEMPTS} attempts"
        )

    def _writers_are_stale(self) -> None:
        """A compaction of the sink's writers lost a race (another compaction rewrote its input
        files) and was dropped; its rows are committed. The writers still see the files they
        compacted into, so every later compaction of theirs would be dropped too (and a lookup
        changelog would wait): fail the job over, so that they start again from the table, as
        Paimon's committer does on a compaction conflict. (Nothing is committed twice: the
        committables are recorded in the snapshot just published.)"""
        raise CommitConflictError(
            f"sink into {self.store.path}: a compaction of its writers lost a race to another "
            "compaction of the same files and was dropped (the rows are committed); failing over so "
            "that the writers reload the table. Several compactions of one table at once: set "
            "'write-only' on the writers and run the dedicated compaction job"
        )

    def _guard(self, latest: Optional[Snapshot]) -> None:
        """Abandon a commit attempt if this commit user committed since the last look."""
        if latest is not None and self._newer_of_user(latest.id):
            raise _Superseded()

    def _check_key_index_view(self, latest: Optional[Snapshot], view: int) -> None:
        """Cross-partition tables: the writer placed its rows by a key index loaded from snapshot
        ``view``; another commit user's rows committed after it could put a key into two
        partitions. Refuse then (the Python write's commit guard refuses the same; compactions do
        not count). This commit user's own snapshots are the writer's own earlier flushes."""
        if latest is None or latest.id <= view:
            return
        sm = self.store.snapshot_manager
        for sid in range(view + 1, latest.id + 1):
            try:
                s = sm.snapshot(sid)
            except SnapshotNotFoundError:
                continue
            if s.commit_user != self.commit_user and s.commit_kind != "COMPACT":
                raise CommitConflictError(
                    f"cross-partition table {self.store.path} got {s.commit_kind} snapshot {sid} from "
                    f"another writer ({s.commit_user}) after the sink's writer loaded its key index "
                    f"(snapshot {view}); a key could now live in two partitions. A cross-partition "
                    "table takes one writing job at a time"
                )

    def _files_exist(self, c: Committable) -> bool:
        """A committable whose new files are gone was committed long ago (its snapshots and files
        expired since) or aborted: committing it would break the table, so it is skipped."""
        store = self.store
        for m in c.messages:
            for f in m.new_files + m.changelog_files:
                if not store.file_io.file_exists(store.data_file_path(m.partition, m.bucket, f.file_name)):
                    log.warning(
                        "committable %s of %s names the missing file %s; skipped (committed before "
                        "and expired, or aborted)",
                        c.id,
                        self.commit_user,
                        f.file_name,
                    )
                    return False
        return True


class ChannelReader:
    """Reads committables that the FileSink channel has released: lines of finished part files
    (in-progress and pending files start with a dot and are skipped). Finished files never change,
    so each is read once; lines already committed are dropped.

    A finished file whose committables are all committed is deleted: the channel does not grow
    without end, and a later run cannot replay it after the snapshots that recorded its ids have
    expired (the committer would no longer know they were committed)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._seen: set[str] = set()
        self._lines: dict[str, str] = {}
        self._file_ids: dict[str, set[str]] = {}

    def released(self, committed: set[str]) -> dict[str, str]:
        """``{id: line}`` of released committables not in ``committed``, in file order."""
        self._prune(committed)
        for root, dirs, files in os.walk(self.directory):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith("."):
                    continue
                path = os.path.join(root, name)
                if path in self._seen:
                    continue
                ids = self._file_ids.setdefault(path, set())
                with open(path, encoding="utf-8") as fh:
                    for line in fh:
                        line = line.strip()
                        if not line:
                            continue
                        d = json.loads(line)
                        if isinstance(d, dict) and isinstance(d.get("id"), str):
                            self._lines[d["id"]] = line
                            ids.add(d["id"])
                self._seen.add(path)
        for i in [i for i in self._lines if i in committed]:
            del self._lines[i]
        return dict(self._lines)

    def _prune(self, committed: set[str]) -> None:
        for path, ids in list(self._file_ids.items()):
            if ids <= committed:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
                del self._file_ids[path]  # stays in _seen: never read again


def _cancel_chained_compactions(messages: list[CommitMessage]) -> list[CommitMessage]:
    """Within one commit, a file that one compaction wrote and a later one removed never becomes
    visible: drop it from both sides (one commit publishes all compaction results at once).

    A file is the same file only on the same level: an upgrade (a file moved up without a rewrite,
    as the lookup producer's compaction of level 0 does) removes it from one level and adds it to
    another under the same name, and must stay."""
    after = {(m.partition, m.bucket, f.file_name, f.level) for m in messages for f in m.compact_after}
    before = {(m.partition, m.bucket, f.file_name, f.level) for m in messages for f in m.compact_before}
    chained = after & before
    if not chained:
        return messages
    out = []
    for m in messages:

        def keep(f: DataFileMeta, m: CommitMessage = m) -> bool:
            return (m.partition, m.bucket, f.file_name, f.level) not in chained

        out.append(
            dataclasses.replace(
                m,
                compact_before=[f for f in m.compact_before if keep(f)],
                compact_after=[f for f in m.compact_after if keep(f)],
            )
        )
    return out


def commit_released(committer: Committer, reader: ChannelReader, next_identifier: int = 0) -> Optional[int]:
    """Commit the committables ``reader``'s channel released and ``committer`` has not committed yet
    (one commit); return the identifier used, or None. Any party of the commit user may do this:
    released committables are final, and :class:`SinkCommitter`'s guard keeps concurrent passes
    from committing anything twice."""
    released = reader.released(committer.done)
    if not released:
        return None
    batch = [decode_committable(line) for line in released.values()]
    return committer.commit(batch, next_identifier, final=False)
