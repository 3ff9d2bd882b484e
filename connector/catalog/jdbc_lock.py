"""A table's commit lock as a row of Paimon's ``paimon_distributed_locks``, with a lease that a
paused holder cannot outlive unnoticed.

Paimon's lock (and this one, on the same rows, so lakelog's and Paimon's writers of one table
exclude each other): a holder INSERTs ``<catalog-key>.<db>.<table>`` (a key violation means another
holds it), DELETEs it to release; a waiter first deletes the row when it is older than its
``expire_time_seconds`` by the database server's clock. Paimon's holder never renews (its rows
expire after ``lock-acquire-timeout``, 8 min) and has no fencing: a holder paused past the expiry
resumes and commits as if it still held the lock, and its release deletes whoever's row is there.

What lakelog adds, in the same three columns:

* **A lease.** The holder writes ``expire_time_seconds`` = ``lock-lease-timeout`` (30 s) and a thread
  renews the row every third of it: ``UPDATE ... SET acquired_at = <server now> WHERE lock_id = ?
  AND acquired_at = <the value it last wrote>``. A waiter (lakelog's or Paimon's) takes over only a
  row not renewed for its lease by the server's clock, so a crashed or killed holder frees the lock
  after one lease. No client's clock is compared with another's.
* **Fencing.** ``acquired_at`` as last written is the holder's token: a row taken over is a new
  row with a later time, so the holder's next renewal (or its release) matches nothing. A renewal
  that matches proves no one else held the lock since the last one. :meth:`Hold.lost` answers
  False without asking the database only within half a lease of the last successful renewal (no
  waiter can have seen the row stale yet: the row's time is no earlier than when that renewal was
  sent); otherwise it renews there and then, and a renewal that fails (or cannot reach the database)
  means lost. A holder paused past its lease thus learns on resuming that it lost the lock, and
  :meth:`~lakelog.connector.format.snapshot.SnapshotManager.try_commit` checks its publish.
* A release deletes only its own row (``AND acquired_at = <token>``).

Within one process the lock is reentrant for the thread holding it and queued for the others (the
commit lock's in-process behaviour, :mod:`lakelog.connector.format.lock`). Timestamps are UTC by
the server's clock: Paimon's JVMs sharing the lock should run with ``-Duser.timezone=UTC`` on
PostgreSQL (its driver writes ``acquired_at`` in the JVM's zone).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from typing import Any, Optional

from lakelog.connector.catalog.jdbc_connect import JdbcTarget, SqlDatabase, Tx
from lakelog.connector.catalog.jdbc_tables import LOCKS, lock_sql
from lakelog.connector.errors import MetastoreError, OptionError
from lakelog.connector.format.lock import Hold, LockTimeoutError, reentrant

__all__ = ["JdbcLock"]

_databases: dict[tuple[str, str, str], SqlDatabase] = {}
_databases_guard = threading.Lock()


def _forget_after_fork() -> None:
    # a child of fork() has none of its parent's threads: a guard one of them held stays held
    global _databases, _databases_guard
    _databases = {}
    _databases_guard = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _database(target: JdbcTarget, role: str) -> SqlDatabase:
    """One connection per process, database and role: acquiring, and renewing (so that a waiter
    held up by a busy database never delays a holder's renewals behind it in this process)."""
    key = (target.uri, target.identity, role)
    with _databases_guard:
        db = _databases.get(key)
        if db is None:
            db = _databases[key] = SqlDatabase(target)
        return db


class _RowHold(Hold):
    """The lock row ``lock_id`` as this process holds it: renewed by a thread until released."""

    def __init__(self, lock: JdbcLock, lock_id: str, token: Any, taken: float) -> None:
        self.lock, self.lock_id = lock, lock_id
        self.token = token  # acquired_at as this holder last wrote it
        self.renewed = taken  # monotonic time at which the last successful renewal was sent
        self.lapsed = False
        self._sql = lock_sql(lock.target.dialect)
        self._db = _database(lock.target, "renew")
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lakelog-jdbc-lease-{lock_id}", daemon=True)
        self._thread.start()

    def _renew(self) -> Optional[bool]:
        """Renew once: True if the row was still this holder's, False if it is not (lost), None
        when the database could not be asked."""
        with self._mutex:
            if self.lapsed:
                return False
            sent = time.monotonic()
            try:
                rows = self._db.autocommit(
                    lambda tx: tx.query(self._sql["renew"], (self.lock_id, self.token)),
                    what=f"renew the lock {self.lock_id!r}",
                )
            except MetastoreError:
                return None
            if rows:
                self.token, self.renewed = rows[0][0], sent
                return True
            self.lapsed = True
            return False

    def _loop(self) -> None:
        while not self._stop.wait(self.lock.lease_s / 3):
            if self._renew() is False:
                return  # taken over: renewing cannot win it back

    def lost(self) -> bool:
        if self.lapsed:
            return True
        if time.monotonic() - self.renewed < self.lock.lease_s / 2:
            return False
        return self._renew() is not True

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._mutex:
            if self.lapsed:
                return  # the row is another holder's now
            with contextlib.suppress(MetastoreError):  # an unreleased row lapses after its lease
                self._db.autocommit(lambda tx: tx.execute(self._sql["release"], (self.lock_id, self.token)),
                                    what=f"release the lock {self.lock_id!r}")


class JdbcLock:
    """The commit lock of one table in a JDBC catalog's database: a
    :attr:`~lakelog.connector.format.snapshot.SnapshotManager.lock_provider`. It pickles (the
    target holds the driver properties a worker needs to connect) and connects lazily in each
    process."""

    def __init__(
        self,
        target: JdbcTarget,
        catalog_key: str,
        database: str,
        table: str,
        table_path: str,
        *,
        lease_s: float,
        max_sleep_s: float,
        acquire_timeout_s: Optional[float] = None,
        key_max_length: int = 255,
    ) -> None:
        self.target = target
        self.catalog_key, self.database, self.table = catalog_key, database, table
        self.table_path = table_path.rstrip("/")
        self.lease_s, self.max_sleep_s = lease_s, max_sleep_s
        self.acquire_timeout_s = acquire_timeout_s
        self.key_max_length = key_max_length

    def __repr__(self) -> str:
        return f"JdbcLock({self.catalog_key}.{self.database}.{self.table} in {self.target.uri})"

    def lock_id(self, snapshot_dir: str) -> str:
        """``<catalog-key>.<db>.<table>`` as Paimon's ``JdbcCatalogLock`` spells it; a branch's
        snapshots lock ``<table>$branch_<name>`` (Paimon's object name of a branch)."""
        rel = os.path.relpath(snapshot_dir.rstrip("/"), self.table_path)
        name = self.table
        parts = rel.split(os.sep)
        branch = len(parts) == 3 and parts[0] == "branch" and parts[2] == "snapshot"
        if branch and parts[1].startswith("branch-"):
            name = f"{self.table}$branch_{parts[1][len('branch-'):]}"
        lock_id = f"{self.catalog_key}.{self.database}.{name}"
        if len(lock_id) > self.key_max_length:
            raise OptionError(
                f"the commit lock {lock_id!r} has {len(lock_id)} characters, more than 'lock-key-max-length' "
                f"({self.key_max_length}) lets {LOCKS}.lock_id hold: use a shorter 'catalog-key' or name"
            )
        return lock_id

    def __call__(self, snapshot_dir: str, timeout_s: float) -> contextlib.AbstractContextManager[Hold]:
        lock_id = self.lock_id(snapshot_dir)
        timeout = self.acquire_timeout_s if self.acquire_timeout_s is not None else timeout_s
        sql = lock_sql(self.target.dialect)
        expire = max(1, math.ceil(self.lease_s))
        holder = {"text": "an unknown holder"}

        def attempt(tx: Tx) -> list[tuple[Any, ...]]:
            tx.execute(sql["clear_stale"], (lock_id,))
            return tx.query(sql["acquire"], (lock_id, expire))

        def describe(tx: Tx) -> str:
            rows = tx.query(sql["holder"], (lock_id,))
            if not rows:
                return "no one now"
            at, lease, age = rows[0]
            return f"a holder that took or renewed it at {at} UTC ({float(age):.1f} s ago; lease {lease} s)"

        def take(deadline: float) -> Hold:
            db = _database(self.target, "acquire")
            pause = 0.002
            while True:
                sent = time.monotonic()
                rows = db.autocommit(attempt, what=f"take the commit lock {lock_id!r}")
                if rows:
                    return _RowHold(self, lock_id, rows[0][0], sent)
                now = time.monotonic()
                if now >= deadline:
                    with contextlib.suppress(MetastoreError):
                        holder["text"] = db.autocommit(describe, what="describe the lock's holder")
                    raise LockTimeoutError(
                        f"the commit lock {lock_id!r} (a row of {LOCKS} in {self.target.uri}) stayed "
                        f"taken for {timeout:g} s (held by {holder['text']}); nothing was committed. A "
                        "paused or hung process holds it: resume or stop it, or raise 'lock-acquire-timeout'"
                    )
                time.sleep(min(pause, max(deadline - now, 0.0)))
                pause = min(pause * 2, self.max_sleep_s)

        def give(hold: Hold) -> None:
            assert isinstance(hold, _RowHold)
            hold.release()

        key = f"jdbc:{self.target.identity}:{lock_id}"
        return reentrant(key, timeout, take, give, lambda: holder["text"])  # type: ignore[return-value]
