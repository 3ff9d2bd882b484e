"""The JDBC commit lock (``lock.enabled``): rows of Paimon's ``paimon_distributed_locks`` with a
renewed lease and fencing, on SQLite and on a real PostgreSQL server; holders in other processes
that release, are killed (SIGKILL) or paused past their lease (SIGSTOP, SIGCONT: they notice);
racing creates, drops and commits from several processes."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.catalog.jdbc import JdbcMetastore
from lakelog.connector.catalog.jdbc_lock import JdbcLock
from lakelog.connector.errors import OptionError
from lakelog.connector.format.lock import LockTimeoutError
from lakelog.connector.format.snapshot import SnapshotManager
from tests.jdbc_workers import SCHEMA

ROOT = Path(__file__).resolve().parent.parent
LEASE_S = 3.0


@pytest.fixture()
def locking(jdbc_options: dict[str, str], tmp_path: Path) -> lakelog.Catalog:
    options = {**jdbc_options, "lock.enabled": "true", "lock-lease-timeout": f"{LEASE_S:g} s",
               "lock-acquire-timeout": "20 s"}
    return lakelog.Catalog(str(tmp_path / "wh"), options=options)


def _sql(cat: lakelog.Catalog, sql: str, *args: Any, write: bool = False) -> Any:
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    if write:
        return ms.db.run(lambda tx: tx.execute(sql, args))
    return ms.db.run(lambda tx: tx.query(sql, args), write=False)


def _lock_rows(cat: lakelog.Catalog) -> list[tuple[Any, ...]]:
    """The lock rows of this catalog (the PostgreSQL tests' catalogs share one lock table)."""
    rows = _sql(cat, "SELECT lock_id, acquired_at, expire_time_seconds FROM paimon_distributed_locks")
    return [tuple(r) for r in rows if str(r[0]).startswith(_key(cat) + ".")]


def _manager(cat: lakelog.Catalog, name: str = "db.t") -> SnapshotManager:
    if not cat.table_exists(name):
        cat.create_table(name, SCHEMA, primary_key=["id"])
    return cat.get_table(name).store.snapshot_manager


def _key(cat: lakelog.Catalog) -> str:
    return str(cat.metastore.key)  # type: ignore[attr-defined]


# ---- in one process ------------------------------------------------------------------------------------------
def test_a_hold_is_paimons_row_and_release_deletes_it(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    with sm.lock() as hold:
        rows = _lock_rows(locking)
        assert [(r[0], r[2]) for r in rows] == [(f"{_key(locking)}.db.t", int(LEASE_S))]
        assert not hold.lost()
        with sm.lock() as inner:  # reentrant for this thread
            assert inner is hold
    assert _lock_rows(locking) == []


def test_other_threads_queue_behind_the_holder(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    order: list[str] = []
    with sm.lock():
        def other() -> None:
            with sm.lock():
                order.append("other")

        th = threading.Thread(target=other)
        th.start()
        time.sleep(0.3)
        order.append("holder")
    th.join(10)
    assert order == ["holder", "other"]


def test_the_holder_renews_its_row(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    with sm.lock() as hold:
        first = _lock_rows(locking)[0][1]
        time.sleep(LEASE_S / 3 + 0.6)
        assert _lock_rows(locking)[0][1] != first  # renewed by the thread
        time.sleep(LEASE_S)  # longer than a lease: the renewals keep it
        assert not hold.lost()
        assert len(_lock_rows(locking)) == 1


def test_a_row_taken_over_tells_the_holder_and_its_release_keeps_the_new_row(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    lock_id = f"{_key(locking)}.db.t"
    with sm.lock() as hold:
        # what a waiter does once the row is stale: delete it and insert its own
        _sql(locking, "DELETE FROM paimon_distributed_locks WHERE lock_id = ?", lock_id, write=True)
        _sql(locking, "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) VALUES (?, 480)",
             lock_id, write=True)
        assert not hold.lost()  # renewed less than half a lease ago: no waiter could have seen it stale
        hold.renewed -= LEASE_S  # type: ignore[attr-defined]  # as after a pause
        assert hold.lost()
    assert [r[0] for r in _lock_rows(locking)] == [lock_id]  # the other's row stays


def test_a_release_deletes_only_its_own_row(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    lock_id = f"{_key(locking)}.db.t"
    with sm.lock():
        _sql(locking, "DELETE FROM paimon_distributed_locks WHERE lock_id = ?", lock_id, write=True)
        _sql(locking, "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) VALUES (?, 480)",
             lock_id, write=True)
    assert [(r[0], r[2]) for r in _lock_rows(locking)] == [(lock_id, 480)]


def test_a_paimon_row_blocks_until_its_expiry_by_the_servers_clock(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    lock_id = f"{_key(locking)}.db.t"
    # Paimon's acquisition: acquired_at defaults to CURRENT_TIMESTAMP, expiry = its acquire timeout
    _sql(locking, "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) VALUES (?, 2)",
         lock_id, write=True)
    start = time.monotonic()
    with sm.lock():
        waited = time.monotonic() - start
    assert 1.0 <= waited <= 6.0, waited
    _sql(locking, "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) VALUES (?, 480)",
         lock_id, write=True)
    sm.lock_timeout_s = 0.5
    quick = JdbcLock(**{**sm.lock_provider.__dict__, "acquire_timeout_s": 0.5})  # type: ignore[union-attr]
    match = f"{lock_id}.*paimon_distributed_locks.*lease 480 s"
    with pytest.raises(LockTimeoutError, match=match), quick(sm.snapshot_dir, 0.5):
        pass


def test_lock_ids_follow_paimons_names(locking: lakelog.Catalog) -> None:
    sm = _manager(locking)
    provider = sm.lock_provider
    assert isinstance(provider, JdbcLock)
    table = sm.table_path
    assert provider.lock_id(f"{table}/snapshot") == f"{_key(locking)}.db.t"
    assert provider.lock_id(f"{table}/branch/branch-b1/snapshot") == f"{_key(locking)}.db.t$branch_b1"
    long = JdbcLock(**{**provider.__dict__, "key_max_length": 5})
    with pytest.raises(OptionError, match="lock-key-max-length"):
        long.lock_id(f"{table}/snapshot")


def test_tables_opened_by_path_find_the_catalogs_lock_by_location(locking: lakelog.Catalog, tmp_path: Path) -> None:
    """The catalog registers its warehouse: a table (or a branch) opened by path in this process
    commits under the metastore's lock; a table elsewhere keeps the file lock."""
    from lakelog.connector.format.lock import catalog_lock
    from lakelog.connector.format.store import TableStore

    _manager(locking)
    path = locking.table_path("db.t")
    lock = catalog_lock(path)
    assert isinstance(lock, JdbcLock) and lock.lock_id(f"{path}/snapshot") == f"{_key(locking)}.db.t"
    branch = catalog_lock(f"{path}/branch/branch-b1")
    assert isinstance(branch, JdbcLock)
    assert branch.lock_id(f"{path}/branch/branch-b1/snapshot") == f"{_key(locking)}.db.t$branch_b1"
    with TableStore(path).snapshot_manager.lock():
        assert [r[0] for r in _lock_rows(locking)] == [f"{_key(locking)}.db.t"]
    assert catalog_lock(locking.warehouse) is None  # the warehouse itself is no table
    assert catalog_lock(str(tmp_path / "elsewhere" / "db.db" / "t")) is None


# ---- holders in other processes ---------------------------------------------------------------------------
class Worker:
    def __init__(self, command: str, cat: lakelog.Catalog, **args: Any) -> None:
        payload = json.dumps({"warehouse": cat.warehouse, "options": cat.options, **args})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.jdbc_workers", command, payload], cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )

    def expect(self, word: str, timeout: float = 60) -> str:
        assert self.proc.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        line = result[0].strip() if result else ""
        if not line.startswith(word):
            self.proc.kill()
            raise AssertionError(f"expected {word!r}, got {line!r}; stderr:\n{self.proc.stderr.read()}")  # type: ignore[union-attr]
        return line

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


@pytest.fixture()
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.close()


def _start(workers: list[Worker], command: str, cat: lakelog.Catalog, **args: Any) -> Worker:
    w = Worker(command, cat, **args)
    workers.append(w)
    return w


@pytest.mark.e2e
def test_a_holder_in_another_process_releases(locking: lakelog.Catalog, workers: list[Worker]) -> None:
    sm = _manager(locking)
    w = _start(workers, "hold", locking, table="db.t")
    w.expect("held")
    quick = JdbcLock(**{**sm.lock_provider.__dict__, "acquire_timeout_s": 0.5})  # type: ignore[union-attr]
    with pytest.raises(LockTimeoutError), quick(sm.snapshot_dir, 0.5):
        pass
    w.send("release")
    w.expect("released")
    start = time.monotonic()
    with sm.lock():
        assert time.monotonic() - start < 1.0


def _holds_the_row_until_released(locking: lakelog.Catalog, sm: SnapshotManager, w: Worker) -> None:
    """``w`` holds the table's lock row: this process cannot take it; released, the row is gone."""
    w.expect("held")
    assert [r[0] for r in _lock_rows(locking)] == [f"{_key(locking)}.db.t"]
    quick = JdbcLock(**{**sm.lock_provider.__dict__, "acquire_timeout_s": 0.3})  # type: ignore[union-attr]
    with pytest.raises(LockTimeoutError), quick(sm.snapshot_dir, 0.3):
        pass
    w.send("release")
    w.expect("released")
    assert _lock_rows(locking) == []


@pytest.mark.e2e
def test_a_pickled_store_takes_the_same_lock_in_another_process(locking: lakelog.Catalog, workers: list[Worker],
                                                                tmp_path: Path) -> None:
    sm = _manager(locking)
    pickled = tmp_path / "store.pickle"
    pickled.write_bytes(pickle.dumps(locking.get_table("db.t").store))
    w = _start(workers, "hold", locking, pickled=str(pickled))
    _holds_the_row_until_released(locking, sm, w)


@pytest.mark.e2e
def test_a_table_opened_by_path_in_a_worker_takes_the_lock_a_job_ships(locking: lakelog.Catalog,
                                                                        workers: list[Worker], tmp_path: Path) -> None:
    """A job's workers open tables by path, with no catalog: the lock the job's plan carries
    (:func:`~lakelog.operators.table_ref.table_lock`, found by the table's location in the client)
    makes their commits exclude the catalog's other clients."""
    from lakelog.operators.table_ref import table_lock

    sm = _manager(locking)
    path = locking.table_path("db.t")
    lock = table_lock(path)  # by path: the catalog registered its warehouse in this process
    assert isinstance(lock, JdbcLock)
    shipped = tmp_path / "lock.pickle"
    shipped.write_bytes(pickle.dumps((path, lock)))
    w = _start(workers, "hold", locking, adopt=str(shipped))
    _holds_the_row_until_released(locking, sm, w)


@pytest.mark.e2e
def test_a_killed_holder_frees_the_lock_after_one_lease(locking: lakelog.Catalog, workers: list[Worker]) -> None:
    sm = _manager(locking)
    w = _start(workers, "hold", locking, table="db.t")
    w.expect("held")
    time.sleep(0.5)
    w.proc.send_signal(signal.SIGKILL)
    w.proc.wait(10)
    killed = time.monotonic()
    with sm.lock() as hold:
        takeover = time.monotonic() - killed
        assert not hold.lost()
    print(f"takeover after SIGKILL: {takeover:.2f} s (lease {LEASE_S:g} s)")
    assert LEASE_S * 0.5 <= takeover <= LEASE_S + 2.0, takeover


@pytest.mark.e2e
def test_a_holder_paused_past_its_lease_learns_it_lost_the_lock(locking: lakelog.Catalog,
                                                                 workers: list[Worker]) -> None:
    sm = _manager(locking)
    w = _start(workers, "hold", locking, table="db.t")
    w.expect("held")
    w.send("check")
    assert w.expect("lost") == "lost False"
    w.proc.send_signal(signal.SIGSTOP)
    paused = time.monotonic()
    try:
        with sm.lock() as hold:
            takeover = time.monotonic() - paused
            w.proc.send_signal(signal.SIGCONT)
            w.send("check")
            assert w.expect("lost") == "lost True"
            w.send("release")
            w.expect("released")
            # the paused holder's release deleted nothing of ours
            assert [r[0] for r in _lock_rows(locking)] == [f"{_key(locking)}.db.t"]
            assert not hold.lost()
            hold.renewed -= LEASE_S  # type: ignore[attr-defined]  # make it ask the database
            assert not hold.lost()
    finally:
        if w.proc.poll() is None:
            os.kill(w.proc.pid, signal.SIGCONT)
    print(f"takeover after SIGSTOP: {takeover:.2f} s (lease {LEASE_S:g} s)")
    assert takeover >= LEASE_S * 0.5


# ---- racing processes ------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_racing_creates_and_drops_of_one_name_have_one_winner(jdbc_options: dict[str, str], tmp_path: Path,
                                                              workers: list[Worker]) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"), options=jdbc_options)
    cat.create_database("db")
    at = time.time() + 3.0
    racers = [_start(workers, "create", cat, table="db.race", at=at) for _ in range(4)]
    answers = sorted(r.expect("") for r in racers)
    assert answers == ["exists", "exists", "exists", "won"]
    assert cat.list_tables("db") == ["race"] and cat.get_table("db.race").to_arrow().num_rows == 0
    at = time.time() + 3.0
    droppers = [_start(workers, "drop", cat, table="db.race", at=at) for _ in range(3)]
    assert sorted(d.expect("") for d in droppers) == ["dropped", "missing", "missing"]
    assert cat.list_tables("db") == [] and not os.path.exists(cat.table_path("db.race"))


@pytest.mark.e2e
def test_racing_commits_under_the_jdbc_lock_land_exactly_once(locking: lakelog.Catalog,
                                                              workers: list[Worker]) -> None:
    _manager(locking)
    writers, commits = 4, 8
    at = time.time() + 3.0
    procs = [_start(workers, "commit", locking, table="db.t", commits=commits, base=1000 * i, writer=i, at=at)
             for i in range(writers)]
    for p in procs:
        p.expect("done", timeout=240)
    t = locking.get_table("db.t")
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))  # one chain, no gap
    appends = [s for s in snaps if s.commit_kind == "APPEND"]  # the rest: compactions the writes started
    assert len(appends) == writers * commits
    ids = sorted(t.to_arrow().column("id").to_pylist())
    assert ids == sorted(1000 * i + k for i in range(writers) for k in range(commits))
    per_user: dict[str, list[int]] = {}
    for s in appends:
        per_user.setdefault(s.commit_user, []).append(s.commit_identifier)
    # every t.write() is a batch commit of a user of its own: each landed exactly once
    assert len(per_user) == writers * commits and all(len(v) == 1 for v in per_user.values())
    assert _lock_rows(locking) == []
    assert pa.types.is_int64(t.schema.field("id").type)
