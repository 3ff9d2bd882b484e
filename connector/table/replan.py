"""Commits planned on the latest snapshot, planned again when they lose a race: a compaction or a
delete reads the table as of one snapshot, writes its files and commits; when another commit got
there first (a conflict), or an expiration removed files of the snapshot it planned on, what it
wrote is deleted and it starts over on the new latest snapshot, up to ``attempts`` times. A lost
race is never committed half: the data stays as the other commit left it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Optional

from lakelog.connector.errors import CommitConflictError, MissingFileError, SnapshotNotFoundError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.lock import LockTimeoutError
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.maintenance import after_commit

log = logging.getLogger(__name__)

__all__ = ["commit_planned"]

Planner = Callable[[Snapshot, list[CommitMessage]], None]


def commit_planned(
    store: TableStore,
    plan: Planner,
    *,
    what: str,
    advice: str,
    commit_user: Optional[str] = None,
    attempts: int = 5,
    compactor: bool = False,
    backoff: bool = False,
) -> Optional[int]:
    """Run ``plan(latest snapshot, messages)`` (it appends the commit messages of what it wrote)
    and commit them; return the snapshot id, None when the table is empty or nothing was planned.

    ``what`` names the work in messages (``"compaction of <path>"``), ``advice`` ends the error
    raised after ``attempts`` lost races; ``compactor`` is passed to the commit-time upkeep
    (:func:`~lakelog.connector.table.maintenance.after_commit`); ``backoff`` sleeps a random,
    growing while between attempts (out of step with a process that keeps committing). A commit
    lock that stays taken (:class:`LockTimeoutError`) is no race and is raised at once."""
    sm = store.snapshot_manager
    for attempt in range(attempts):
        snap = sm.latest()
        if snap is None:
            return None
        messages: list[CommitMessage] = []
        committer = TableCommit(store, commit_user)
        try:
            plan(snap, messages)
            if not messages:
                return None
            sid = committer.commit(messages)
        except (CommitConflictError, MissingFileError, SnapshotNotFoundError) as e:
            committer.discard_unpublished(messages)
            if isinstance(e, LockTimeoutError):
                raise  # the lock stayed taken for all of 'lock-acquire-timeout': no race to retry
            if not (isinstance(e, CommitConflictError) or not sm.holds(snap)):
                raise
            if attempt == attempts - 1:
                raise CommitConflictError(
                    f"{what} lost the race to other commits {attempts} times (last: {e}); {advice}"
                ) from e
            log.warning("%s lost a race (%s); planning it again", what, e)
            if backoff:
                time.sleep(random.uniform(0, 0.05 * (attempt + 1)))
            continue
        except BaseException:
            committer.discard_unpublished(messages)
            raise
        after_commit(store, compactor=compactor)  # outside the try: the files are published
        return sid
    raise AssertionError("unreachable")
