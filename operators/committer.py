"""The sink's committer logic (no pyflink here): idempotent, ordered commits of writer committables.

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
from typing import Optional

from lakelog.connector.commit import TableCommit
from lakelog.connector.manifest import DataFileMeta
from lakelog.connector.store import TableStore
from lakelog.connector.write import CommitMessage
from lakelog.operators.codec import Committable, merge_properties

__all__ = [
    "SinkCommitter",
    "ChannelReader",
    "COMMITTABLES_PROPERTY",
    "END_OF_INPUT_PROPERTY",
    "committed_ids",
]

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


def committed_ids(store: TableStore, commit_user: str) -> set[str]:
    """Ids of the committables ``commit_user`` has committed (from snapshot properties)."""
    ids: set[str] = set()
    for _, _, props in _user_snapshots(store, commit_user):
        text = props.get(COMMITTABLES_PROPERTY)
        if text:
            ids.update(text.split(","))
    return ids


class SinkCommitter:
    """Commits batches of committables for one commit user, skipping ids already committed."""

    def __init__(self, store: TableStore, commit_user: str, run_token: str) -> None:
        self.store = store
        self.commit_user = commit_user
        self.run_token = run_token
        self.table_commit = TableCommit(store, commit_user)
        self.committed: set[str] = set()
        self.last_identifier = 0
        self.finished = False
        for _, ident, props in _user_snapshots(store, commit_user):
            self.last_identifier = max(self.last_identifier, ident)
            text = props.get(COMMITTABLES_PROPERTY)
            if text:
                self.committed.update(text.split(","))
            if props.get(END_OF_INPUT_PROPERTY) == run_token:
                self.finished = True

    def commit(
        self, committables: Sequence[Committable], next_identifier: int, *, final: bool
    ) -> Optional[int]:
        """Commit the committables not committed yet as one commit; return the identifier used, or
        None when nothing was committed.

        ``final`` marks the commit made at end of input (from committables not yet released by a
        checkpoint); once this run has made it, a replay commits nothing more (everything the run
        produced is in the table by then).
        """
        if self.finished:
            log.info(
                "commit user %s already finished this run; skipping %d committables",
                self.commit_user,
                len(committables),
            )
            return None
        todo = [c for c in committables if c.id not in self.committed and self._files_exist(c)]
        if not todo:
            return None
        messages = _cancel_chained_compactions([m for c in todo for m in c.messages])
        props = merge_properties(todo) or {}
        props[COMMITTABLES_PROPERTY] = ",".join(c.id for c in todo)
        if final:
            props[END_OF_INPUT_PROPERTY] = self.run_token
        identifier = max(int(next_identifier), self.last_identifier + 1)
        sid = self.table_commit.commit(messages, identifier, properties=props)
        if sid is None:
            return None  # only empty messages: nothing to record
        self.committed.update(c.id for c in todo)
        self.last_identifier = identifier
        self.finished = final
        log.info("committed %d committables as identifier %d (snapshot %s)", len(todo), identifier, sid)
        return identifier


    def _files_exist(self, c: Committable) -> bool:
        """A committable whose new files are gone was committed long ago (its snapshots and files
        expired since) or aborted: committing it would break the table, so it is skipped."""
        store = self.store
        for m in c.messages:
            for f in m.new_files + m.changelog_files:
                if not store.file_io.exists(store.data_file_path(m.partition, m.bucket, f.file_name)):
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
    visible: drop it from both sides (one commit publishes all compaction results at once)."""
    after = {(m.partition, m.bucket, f.file_name) for m in messages for f in m.compact_after}
    before = {(m.partition, m.bucket, f.file_name) for m in messages for f in m.compact_before}
    chained = after & before
    if not chained:
        return messages
    out = []
    for m in messages:

        def keep(f: DataFileMeta, m: CommitMessage = m) -> bool:
            return (m.partition, m.bucket, f.file_name) not in chained

        out.append(
            dataclasses.replace(
                m,
                compact_before=[f for f in m.compact_before if keep(f)],
                compact_after=[f for f in m.compact_after if keep(f)],
            )
        )
    return out
