"""The lease form of the commit lock (for object stores), run here on local files.

Holders in other processes: one that releases, one that is killed (its lease lapses), one that is
paused past its lease (it notices on resuming) - and a commit whose lease lapsed while it published.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.lock import LEASE_PREFIX, LockTimeoutError, lease_lock
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.table import Table

LEASE_S = 0.6


def _hold(directory: str, marker: str, seconds: float, report: str) -> None:
    with lease_lock(FileIO(), directory, 60, lease_s=LEASE_S) as hold:
        Path(marker).write_text(str(os.getpid()))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # a busy holder: its renewals keep the lease
            time.sleep(0.05)
        Path(report).write_text("lost" if hold.lost() else "held")


def _start(tmp: Path, seconds: float) -> tuple[Any, str, str]:
    marker, report = str(tmp / "marker"), str(tmp / "report")
    for p in (marker, report):
        if os.path.exists(p):
            os.remove(p)
    proc = mp.get_context("spawn").Process(target=_hold, args=(str(tmp / "locks"), marker, seconds, report))
    proc.start()
    deadline = time.monotonic() + 60
    while not os.path.exists(marker):
        assert time.monotonic() < deadline and proc.is_alive(), "the holder did not start"
        time.sleep(0.02)
    return proc, marker, report


def _epochs(tmp: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmp / "locks") if n.startswith(LEASE_PREFIX))


def test_a_renewed_lease_excludes_others_and_a_released_one_is_taken_at_once(tmp_path: Path) -> None:
    proc, _, report = _start(tmp_path, 3 * LEASE_S)  # held for longer than its lease: renewed
    try:
        waiter = lease_lock(FileIO(), str(tmp_path / "locks"), 1.5, lease_s=LEASE_S)
        with pytest.raises(LockTimeoutError, match=r"\.lease-\* stayed taken for 1\.5 s \(held by pid"), waiter:
            pass
        t0 = time.monotonic()
        with lease_lock(FileIO(), str(tmp_path / "locks"), 60, lease_s=LEASE_S) as hold:
            waited = time.monotonic() - t0
            assert Path(report).read_text() == "held"  # it held the lock all along, and released it
            assert not hold.lost()
    finally:
        proc.join(60)
    assert waited < 3 * LEASE_S  # taken once released, without waiting out a lease
    assert _epochs(tmp_path) == [f"{LEASE_PREFIX}{1:012d}", f"{LEASE_PREFIX}{2:012d}"]


def test_the_lease_of_a_killed_holder_lapses(tmp_path: Path) -> None:
    proc, _, _ = _start(tmp_path, 60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    t0 = time.monotonic()
    with lease_lock(FileIO(), str(tmp_path / "locks"), 30, lease_s=LEASE_S):
        waited = time.monotonic() - t0
    assert LEASE_S <= waited < 10 * LEASE_S  # after a lease unchanged, and not much later


def test_a_holder_paused_past_its_lease_notices_that_it_lost_the_lock(tmp_path: Path) -> None:
    proc, _, report = _start(tmp_path, 4 * LEASE_S)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        with lease_lock(FileIO(), str(tmp_path / "locks"), 30, lease_s=LEASE_S) as hold:
            assert not hold.lost()
            os.kill(proc.pid, signal.SIGCONT)  # it resumes while another process holds the lock
            proc.join(30)
            assert Path(report).read_text() == "lost"
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGCONT)
        proc.join(30)


class _LeasedFileIO(FileIO):
    """Local files with the lease lock, as an object store has it."""

    def lock(self, path: str, timeout_s: float) -> Any:
        return lease_lock(self, os.path.dirname(path), timeout_s, lease_s=LEASE_S)


def _leased_table(tmp: Path) -> Table:
    schema = pa.schema([pa.field("id", pa.int64(), False)])
    lakelog.Catalog(str(tmp)).create_table("c.t", schema, primary_key=["id"], options={"bucket": "1"})
    path = str(tmp / "c.db" / "t")
    return Table(TableStore(path, _LeasedFileIO()), "c.t")


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids)}, schema=pa.schema([pa.field("id", pa.int64(), False)]))


def test_commits_expirations_and_rollbacks_run_under_leases(tmp_path: Path) -> None:
    t = _leased_table(tmp_path)
    for i in range(5):
        t.write(_rows(i))
    t.rollback_to(3)
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    t.write(_rows(9))
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 9]
    assert [s.id for s in t.snapshots()] == [3, 4]
    assert len([n for n in os.listdir(tmp_path / "c.db" / "t" / "snapshot") if n.startswith(LEASE_PREFIX)]) <= 9


def test_a_commit_whose_lease_lapsed_keeps_a_snapshot_on_the_chain_and_takes_back_one_off_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A committer paused between checking its parent and publishing: when it resumes and finds its
    lease taken over, it keeps its snapshot if the parent is still there (or expired after it),
    and takes it back when a rollback removed the parent (new commits would build on it)."""
    from lakelog.connector.format import lock

    t = _leased_table(tmp_path)
    t.write(_rows(0))
    t.write(_rows(1))
    monkeypatch.setattr(lock._Lease, "lost", lambda self: True)  # every hold has lapsed
    assert t.write(_rows(2)) == 3  # nobody changed anything: the snapshot stands
    sm = t.store.snapshot_manager
    real_follows = sm._follows
    fired: list[int] = []

    def rolled_back_while_paused(snapshot_id: int, parent: Any) -> bool:
        ok = real_follows(snapshot_id, parent)
        if ok and not fired:  # validated; then paused; meanwhile another process rolls back
            fired.append(snapshot_id)
            for sid in range(2, snapshot_id):
                sm.delete(sid)
            sm.commit_hint_latest(1)
        return ok

    monkeypatch.setattr(sm, "_follows", rolled_back_while_paused)
    sid = t.write(_rows(5))
    assert fired == [4] and sid == 2  # taken back from id 4 (above the gap), published after 1
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 5]
