"""The table's commit lock: one holder at a time, across threads, processes and machines.

Publishing a snapshot is a create-if-absent of ``snapshot-<id>``, so two committers never both win
one id. That alone does not keep the chain whole once snapshots are deleted: a committer that built
on snapshot N could create ``snapshot-N+1`` after others had used that id and an expiration (or a
rollback) had deleted it again, and its snapshot would land off the chain readers follow. The lock
closes that window: a commit checks under it that its parent is still the latest snapshot and
publishes in the same hold, and expiration, rollback, tag creation and a consumer's first record
change the chain only while they hold it.

Two kinds, behind one shape (:func:`file_lock`, :func:`lease_lock`; a file IO picks one):

* **flock** on ``snapshot/.lock``, for local (and mounted) file systems: the kernel releases it
  when its holder dies, so a crash never leaves it taken. A holder that is paused (not dead) keeps
  it: the others wait up to ``lock-acquire-timeout`` and fail, naming the lock file and the holder.
* **Leases** for object stores, which have no flock but create objects if absent: the lock is a
  sequence of lease objects ``snapshot/.lease-<epoch>``. The holder of the highest epoch holds the
  lock while it renews its lease (a thread rewrites it every third of ``lease_s``) and until it
  marks it released. A waiter takes the next epoch with a create-if-absent (so of several waiters
  exactly one wins) once the top lease is released, or once it has seen the top lease unchanged
  for longer than its lease: its holder died or is paused. No clocks are compared between
  machines: a waiter times a lease by its own clock, from when it first saw it unchanged. The epoch
  is a fencing token: a holder that was paused past its lease *notices* when it resumes (its
  :meth:`Hold.lost` is True once a later epoch exists), and a commit then checks, before it
  reports success, that what it published is still on the chain (see
  :meth:`~lakelog.connector.format.snapshot.SnapshotManager.try_commit`).

Within one process both kinds are reentrant for the thread that holds them (a commit that holds
the lock for a whole attempt publishes under the same hold), and other threads of the process
queue on an in-process lock before they touch the store. Paimon's own writers take neither (see the
README: Paimon's Java writers beside lakelog's are as safe as Paimon's own file IO makes them).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Optional

from lakelog.connector.errors import CommitConflictError, CorruptFileError, MissingFileError
from lakelog.connector.format.fileio import storage_errors

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.format.fileio import FileIO

__all__ = [
    "LOCK_FILE",
    "LEASE_PREFIX",
    "LockTimeoutError",
    "Hold",
    "LockProvider",
    "reentrant",
    "file_lock",
    "lease_lock",
    "register_catalog_lock",
    "catalog_lock",
    "holding_external",
    "serialised_by_catalog",
    "external_lock_held",
]

LOCK_FILE = ".lock"  # in a table's (or branch's) snapshot directory
LEASE_PREFIX = ".lease-"
DEFAULT_LEASE_S = 30.0
_LEASE_NAME = re.compile(r"^\.lease-(\d{12})$")
_KEEP_LEASES = 8  # older lease objects are deleted by the holder of a newer epoch


# A catalog's lock for one table (a metastore's lock table): called with the snapshot directory and
# the timeout in seconds, it returns a context manager holding the table's commit lock. It must
# pickle: jobs ship it to the Flink workers that commit.
LockProvider = Callable[[str, float], "contextlib.AbstractContextManager[Hold]"]


class LockTimeoutError(CommitConflictError, TimeoutError):
    """The table's commit lock stayed taken for longer than ``lock-acquire-timeout``."""


class Hold:
    """A held lock, as the ``with`` block sees it."""

    def lost(self) -> bool:
        """Whether another process may hold the lock now (a lease that lapsed while its holder was
        paused and was taken over); always False for flock, which cannot lapse."""
        return False


class _Queue:
    """One lock as this process holds it: the in-process queue, the store-level hold and depth."""

    def __init__(self) -> None:
        self.queue = threading.RLock()
        self.hold: Optional[Hold] = None
        self.depth = 0


_registry: dict[str, _Queue] = {}
_registry_guard = threading.Lock()


def _forget_after_fork() -> None:
    # a child of fork() holds no lock of its parent's and none of its threads: start afresh (the
    # lock files it inherited open share their locks with the parent's: they are not reused)
    global _registry, _registry_guard, _open_files
    _registry = {}
    _registry_guard = threading.Lock()
    _open_files = {}


os.register_at_fork(after_in_child=_forget_after_fork)


def _queue(key: str) -> _Queue:
    with _registry_guard:
        q = _registry.get(key)
        if q is None:
            q = _registry[key] = _Queue()
        return q


@contextmanager
def reentrant(
    key: str,
    timeout_s: float,
    take: Callable[[float], Hold],
    give: Callable[[Hold], None],
    describe: Callable[[], str],
) -> Iterator[Hold]:
    """Hold lock ``key``: queue in-process, then ``take(deadline)`` the store-level lock unless this
    thread holds it already; ``give`` it back when the outermost block ends."""
    q = _queue(key)
    deadline = time.monotonic() + timeout_s
    if not q.queue.acquire(timeout=max(timeout_s, 0.0)):
        _timeout(key, timeout_s, describe())
    try:
        if q.depth == 0:
            q.hold = take(deadline)
        q.depth += 1
        assert q.hold is not None
        try:
            yield q.hold
        finally:
            q.depth -= 1
            if q.depth == 0:
                hold, q.hold = q.hold, None
                give(hold)
    finally:
        q.queue.release()


def _timeout(path: str, timeout_s: float, holder: str) -> None:
    raise LockTimeoutError(
        f"the commit lock {path} stayed taken for {timeout_s:g} s (held by {holder}); nothing was "
        "committed. A paused or hung process holds it: resume or stop it, or raise "
        "'lock-acquire-timeout'"
    )


def _me() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"


# ---- flock ------------------------------------------------------------------------------------------
class _FileHold(Hold):
    def __init__(self, fd: int) -> None:
        self.fd = fd


# Lock files stay open between holds (opening one and writing its holder note cost a few hundred
# microseconds a commit); at most this many idle ones, the least recently used closed first.
_MAX_OPEN_LOCK_FILES = 64
_open_files: dict[str, int] = {}  # path -> fd, in order of use
_NOTE_BYTES = 160  # the holder note, padded to a fixed width: rewritten without a truncate


def file_lock(path: str, timeout_s: float) -> Iterator[Hold]:
    """Hold the lock file ``path`` exclusively (created when missing) for the ``with`` block."""

    def take(deadline: float) -> Hold:
        return _FileHold(_flock(path, deadline, timeout_s))

    def give(hold: Hold) -> None:
        assert isinstance(hold, _FileHold)
        try:
            fcntl.flock(hold.fd, fcntl.LOCK_UN)
        except OSError:
            _forget_file(path)

    return reentrant(path, timeout_s, take, give, lambda: _file_holder(path))  # type: ignore[return-value]


def _lock_fd(path: str) -> int:
    """An open descriptor of the lock file ``path`` (kept open for the next hold)."""
    with _registry_guard:
        fd = _open_files.pop(path, None)
        if fd is not None:
            _open_files[path] = fd  # most recently used last
            return fd
    with storage_errors("open the commit lock", path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    with _registry_guard:
        _open_files[path] = fd
        idle = [p for p in _open_files if p != path and _registry.get(p, _Queue()).depth == 0]
        for old in idle[: max(0, len(_open_files) - _MAX_OPEN_LOCK_FILES)]:
            os.close(_open_files.pop(old))
    return fd


def _forget_file(path: str) -> None:
    with _registry_guard:
        fd = _open_files.pop(path, None)
    if fd is not None:
        os.close(fd)


def _flock(path: str, deadline: float, timeout_s: float) -> int:
    pause = 0.0005
    while True:
        fd = _lock_fd(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                _forget_file(path)
                with storage_errors("take the commit lock", path):
                    raise
        else:
            # the file may have been deleted and made again (a dropped and recreated table) since
            # it was opened: a lock on the old file would exclude nobody
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                with contextlib.suppress(OSError):  # who holds it, for a waiter that gives up
                    os.pwrite(fd, _me().encode()[:_NOTE_BYTES].ljust(_NOTE_BYTES), 0)
                return fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            _forget_file(path)
            continue
        if time.monotonic() >= deadline:
            _timeout(path, timeout_s, _file_holder(path))
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _file_holder(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(200).strip()
    except OSError:
        return "an unknown process"
    return text or "an unknown process"


# ---- leases -----------------------------------------------------------------------------------------
def _lease_path(directory: str, epoch: int) -> str:
    return f"{directory}/{LEASE_PREFIX}{epoch:012d}"


def _lease_content(owner: str, lease_s: float, renewals: int, state: str) -> bytes:
    return json.dumps({
        "owner": owner, "holder": _me(), "lease_ms": int(lease_s * 1000), "renewals": renewals,
        "state": state,
    }).encode()


class _Lease(Hold):
    """Epoch ``epoch`` of the lease sequence in ``directory``, held by this process: renewed by a
    thread until released."""

    def __init__(self, file_io: FileIO, directory: str, epoch: int, lease_s: float, owner: str) -> None:
        self.file_io, self.directory, self.epoch = file_io, directory, epoch
        self.lease_s, self.owner = lease_s, owner
        self.path = _lease_path(directory, epoch)
        self.renewals = 0
        self.renewed = time.monotonic()  # when the lease was last written
        self.lapsed = False  # a later epoch was found after a gap in the renewals
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"lakelog-lease-{epoch}", daemon=True)
        self._thread.start()

    def _overtaken(self) -> bool:
        return self.file_io.file_exists(_lease_path(self.directory, self.epoch + 1))

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            if self.lost():
                return  # paused past the lease and taken over: renewing would only hide it
            self.renewals += 1
            try:
                data = _lease_content(self.owner, self.lease_s, self.renewals, "held")
                self.file_io.overwrite_atomic(self.path, data)
                self.renewed = time.monotonic()
            except Exception:  # noqa: BLE001 - a lapse shows in lost(); the next round tries again
                continue

    def lost(self) -> bool:
        if self.lapsed:
            return True
        if time.monotonic() - self.renewed < self.lease_s * 2 / 3:
            return False  # renewed recently: no waiter can have seen it unchanged for a lease
        self.lapsed = self._overtaken()
        return self.lapsed

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        try:
            if not self._overtaken():
                data = _lease_content(self.owner, self.lease_s, -1, "released")
                self.file_io.overwrite_atomic(self.path, data)
        except Exception:  # noqa: BLE001 - an unreleased lease lapses after lease_s
            pass


def _epochs(file_io: FileIO, directory: str) -> list[int]:
    out = []
    for name in file_io.list_dir(directory):
        m = _LEASE_NAME.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def _read_lease(file_io: FileIO, path: str) -> Optional[tuple[bytes, dict[str, Any]]]:
    try:
        data = file_io.read_bytes(path)
    except MissingFileError:
        return None
    try:
        state = json.loads(data)
        if not isinstance(state, dict) or not isinstance(state.get("lease_ms"), int):
            raise ValueError("not a lease")
    except ValueError as e:
        raise CorruptFileError(f"lease {path} of the commit lock is malformed ({e}): delete it") from None
    return data, state


def lease_lock(file_io: FileIO, directory: str, timeout_s: float, lease_s: float = DEFAULT_LEASE_S) -> Any:
    """Hold the lease lock of ``directory`` (objects ``.lease-<epoch>`` in it) for the ``with``
    block; see the module docstring. ``file_io`` must create objects if absent (``try_publish``)."""
    seen: dict[int, tuple[bytes, float]] = {}  # epoch -> (content, when first seen so)
    last = {"holder": "an unknown process"}

    def free(epoch: int) -> bool:
        if epoch == 0:
            return True
        got = _read_lease(file_io, _lease_path(directory, epoch))
        if got is None:
            return True  # cleaned up: only epochs below a newer one are deleted
        data, state = got
        last["holder"] = str(state.get("holder", "an unknown process"))
        if state.get("state") == "released":
            return True
        now = time.monotonic()
        first = seen.get(epoch)
        if first is None or first[0] != data:
            seen[epoch] = (data, now)  # new or renewed since the last look: time it from now
            return False
        return now - first[1] > state["lease_ms"] / 1000

    def take(deadline: float) -> Hold:
        owner = uuid.uuid4().hex
        pause = 0.005
        epochs: Optional[list[int]] = None
        while True:
            if epochs is None:  # listed once; then only the top lease is read while it is held
                epochs = _epochs(file_io, directory)
            top = epochs[-1] if epochs else 0
            if free(top):
                content = _lease_content(owner, lease_s, 0, "held")
                if file_io.try_publish(_lease_path(directory, top + 1), content):
                    for old in epochs[:-_KEEP_LEASES]:
                        file_io.delete(_lease_path(directory, old))
                    return _Lease(file_io, directory, top + 1, lease_s, owner)
                epochs = None  # another waiter took that epoch: list again at once
                continue
            if time.monotonic() >= deadline:
                _timeout(f"{directory}/{LEASE_PREFIX}*", timeout_s, last["holder"])
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def give(hold: Hold) -> None:
        assert isinstance(hold, _Lease)
        hold.release()

    return reentrant(f"{directory}/{LEASE_PREFIX}", timeout_s, take, give, lambda: last["holder"])


# ---- catalog locks by location ------------------------------------------------------------------
# A table opened by path (a Flink job's operators, SQL statements, the compaction job) has no
# catalog to ask for its lock: the catalog registers its warehouse here, and a job ships each
# table's lock to its workers, which register the table's path (see
# lakelog.operators.table_ref.adopt_lock). Without this, such a commit would take the file IO's
# lock while the catalog's other clients take the metastore's, and the two would not exclude
# each other.
_CATALOG_LOCKS: dict[str, Callable[[str], Optional[LockProvider]]] = {}
_CATALOG_LOCKS_MUTEX = threading.Lock()


def register_catalog_lock(root: str, provider_of: Callable[[str], Optional[LockProvider]]) -> None:
    """Use ``provider_of(table_path)`` as the commit lock of every table under ``root`` (a
    warehouse, or one table's directory) that this process opens without a lock of its own; the
    longest registered root containing a table wins."""
    with _CATALOG_LOCKS_MUTEX:
        _CATALOG_LOCKS[root.rstrip("/")] = provider_of


def catalog_lock(table_path: str) -> Optional[LockProvider]:
    """The lock a catalog registered for the table at ``table_path`` (see
    :func:`register_catalog_lock`), or None: the file IO's lock serves."""
    path = table_path.rstrip("/")
    with _CATALOG_LOCKS_MUTEX:
        roots = [r for r in _CATALOG_LOCKS if path == r or path.startswith(r + "/")]
        if not roots:
            return None
        provider_of = _CATALOG_LOCKS[max(roots, key=len)]
    return provider_of(path)


# ---- is a catalog's lock held? ----------------------------------------------------------------------
# An object store that ignores conditional creates may still be written while a catalog's lock
# (a metastore's lock table) serialises the writers: its file IO asks this before publishing.
_EXTERNAL = threading.local()


@contextmanager
def serialised_by_catalog() -> Iterator[None]:
    """Mark this thread, for the block, as serialised by its catalog (holding a catalog's lock, or
    inside the metastore transaction that registers a new table)."""
    _EXTERNAL.depth = getattr(_EXTERNAL, "depth", 0) + 1
    try:
        yield
    finally:
        _EXTERNAL.depth -= 1


@contextmanager
def holding_external(cm: contextlib.AbstractContextManager[Hold]) -> Iterator[Hold]:
    """Enter the catalog lock ``cm``, marking this thread as holding it for the block."""
    with cm as hold, serialised_by_catalog():
        yield hold


def external_lock_held() -> bool:
    """Whether this thread holds a catalog's lock (see :func:`holding_external`)."""
    return getattr(_EXTERNAL, "depth", 0) > 0
