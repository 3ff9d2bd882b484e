"""The commit lock and the races it closes (issue 19, items 1-3 and 9).

Each test here failed on the code before the lock: a writer spinning at 100 % CPU, a committed batch
that no snapshot of the chain holds, a rollback leaving snapshots that point at deleted manifests,
expiration and rescale reporting benign races as errors.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.format.lock import LockTimeoutError

S = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _rows(lo: int, v: str, n: int = 10) -> pa.Table:
    return pa.table({"id": list(range(lo, lo + n)), "v": [v] * n}, schema=S)


def _ids(t: lakelog.Table, **kw: object) -> list[int]:
    return sorted(t.to_arrow(**kw).column("id").to_pylist())  # type: ignore[arg-type]


def _before_first_publish(t: lakelog.Table, race: Callable[[], None]) -> list[int]:
    """Make ``t``'s next publish run ``race`` first (others commit while it is between planning
    and publishing); returns the list that receives the id it was about to publish."""
    sm = t.store.snapshot_manager
    real = sm.try_commit
    fired: list[int] = []

    def publish(snap, parent):  # type: ignore[no-untyped-def]
        if not fired:
            race()
            fired.append(snap.id)
        return real(snap, parent)

    sm.try_commit = publish  # type: ignore[method-assign]
    return fired


def _every_snapshot_reads(t: lakelog.Table) -> None:
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(snaps[0].id, snaps[-1].id + 1)), "a gap in the chain"
    for s in snaps:
        t.to_arrow(snapshot_id=s.id)


def test_a_writer_whose_files_were_compacted_away_and_expired_reloads_them(tmp_path: Path) -> None:
    """Issue 19.1: another process compacted the stream writer's files and expiration deleted
    them; with more sorted runs than the stop trigger the writer used to retry the same missing
    inputs forever. It reloads the bucket from the latest snapshot and goes on."""
    w = str(tmp_path)
    t = lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options={
        "bucket": "1", "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "3",
        "write-buffer-size": "1 b", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    sw = t.stream_writer()
    for i in range(3):
        sw.write(_rows(10 * i, "a")).commit(wait_compaction=True)
    other = lakelog.Catalog(w).get_table("c.t")
    other.write(_rows(1000, "o"))
    other.compact(full=True)
    done = threading.Event()

    def stalled_writes() -> None:
        sw.write(_rows(100, "s"))
        sw.write(_rows(110, "s"))
        done.set()

    th = threading.Thread(target=stalled_writes, daemon=True)  # daemon: the old code never returns
    th.start()
    th.join(60)
    assert done.is_set(), "the writer spins on compaction inputs that are gone"
    sw.commit(wait_compaction=True)
    sw.close()
    t2 = lakelog.Catalog(w).get_table("c.t")
    assert _ids(t2) == list(range(30)) + list(range(100, 120)) + list(range(1000, 1010))
    _every_snapshot_reads(t2)


def test_a_commit_whose_id_others_used_and_expired_lands_on_the_chain(tmp_path: Path) -> None:
    """Issue 19.2: while a committer was between planning and publishing, others committed three
    snapshots and expiration deleted the id it was about to use; its create-if-absent used to
    succeed off the chain, and the write reported an id whose rows no read returned."""
    w = str(tmp_path)
    t = lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options={
        "bucket": "1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    t.write(_rows(0, "base", 1))
    mine, other = lakelog.Catalog(w).get_table("c.t"), lakelog.Catalog(w).get_table("c.t")

    def three_commits() -> None:  # with retention 2, ids 2 and 3 expire again
        for i in range(3):
            other.write(_rows(10 + i, "o", 1))

    fired = _before_first_publish(mine, three_commits)
    sid = mine.write(_rows(1, "mine", 1))
    assert fired == [2] and sid == 5  # ids 2-4 went to the other writer; 2 and 3 expired since
    fresh = lakelog.Catalog(w).get_table("c.t")
    assert _ids(fresh) == [0, 1, 10, 11, 12]
    assert fresh.store.snapshot_manager.latest_id() == sid
    _every_snapshot_reads(fresh)


def test_a_commit_planned_on_a_rolled_back_snapshot_plans_again_on_the_target(tmp_path: Path) -> None:
    """Issue 19.3: a rollback removed the snapshot a commit was built on and new commits reused its
    id; the commit must not publish on the reused id's stale content."""
    w = str(tmp_path)
    t = lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, "base", 1))  # 1
    t.write(_rows(1, "gone", 1))  # 2: rolled back below
    mine, other = lakelog.Catalog(w).get_table("c.t"), lakelog.Catalog(w).get_table("c.t")

    def roll_back_and_reuse_the_id() -> None:
        other.rollback_to(1)
        other.write(_rows(2, "new", 1))  # takes id 2 again, with other content

    fired = _before_first_publish(mine, roll_back_and_reuse_the_id)
    sid = mine.write(_rows(3, "mine", 1))
    assert fired == [3] and sid == 3
    fresh = lakelog.Catalog(w).get_table("c.t")
    assert _ids(fresh) == [0, 2, 3]  # the rolled-back row stays gone, the racing row stays
    _every_snapshot_reads(fresh)
    fresh.rollback_to(1)
    assert _ids(fresh) == [0]


def test_rollbacks_racing_two_writer_threads_leave_every_snapshot_readable(tmp_path: Path) -> None:
    """Issue 19.3 as the probe ran it: two writers, eight rollbacks; the old code left snapshots
    whose manifests the rollback had deleted (every read failed with MissingFileError)."""
    w = str(tmp_path)
    lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options={"bucket": "2"})
    lakelog.Catalog(w).get_table("c.t").write(_rows(0, "base", 1))
    stop = threading.Event()
    errors: list[BaseException] = []
    written: dict[int, list[tuple[int, int]]] = {1: [], 2: []}  # (snapshot id, key) per writer

    def writer(k: int) -> None:
        tt = lakelog.Catalog(w).get_table("c.t")
        i = 0
        try:
            while not stop.is_set():
                key = k * 100_000 + i
                written[k].append((tt.write(_rows(key, "w", 1)), key))
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in written]
    for th in threads:
        th.start()
    r = lakelog.Catalog(w).get_table("c.t")
    targets = []
    try:
        for _ in range(8):
            time.sleep(0.1)
            latest = r.store.snapshot_manager.latest_id()
            assert latest is not None
            targets.append(r.rollback_to(max(1, latest - 2)))
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    assert not errors, errors
    fresh = lakelog.Catalog(w).get_table("c.t")
    _every_snapshot_reads(fresh)
    # every key a write reported is read unless a later rollback went below its snapshot
    seen = set(_ids(fresh))
    for pairs in written.values():
        for sid, key in pairs:
            assert (key in seen) or any(tg < sid for tg in targets), (sid, key)
    fresh.rollback_to(1)
    assert _ids(fresh) == [0]


def _hold_lock(warehouse: str, acquired: str, seconds: float) -> None:
    t = lakelog.Catalog(warehouse).get_table("c.t")
    with t.store.snapshot_manager.lock():
        Path(acquired).write_text(str(os.getpid()))
        time.sleep(seconds)


def test_the_lock_excludes_other_processes_and_a_timeout_names_its_holder(tmp_path: Path) -> None:
    w = str(tmp_path / "wh")
    t = lakelog.Catalog(w).create_table(
        "c.t", S, primary_key=["id"], options={"bucket": "1", "lock-acquire-timeout": "300 ms"}
    )
    t.write(_rows(0, "a", 1))
    acquired = str(tmp_path / "acquired")
    holder = mp.get_context("spawn").Process(target=_hold_lock, args=(w, acquired, 4.0))
    holder.start()
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(acquired) and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = Path(acquired).read_text()
        t0 = time.monotonic()
        with pytest.raises(LockTimeoutError, match=rf"snapshot/\.lock stayed taken for 0\.3 s \(held by pid {pid}"):
            t.write(_rows(1, "b", 1))
        assert time.monotonic() - t0 >= 0.3
        assert _ids(t) == [0]  # nothing was committed
        assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []  # nor left behind
        # with the default timeout (8 min) the commit waits for the holder and then goes through
        t.alter(lakelog.SetOption("lock-acquire-timeout", "8 min"))
        t2 = lakelog.Catalog(w).get_table("c.t")
        t2.write(_rows(1, "b", 1))
        assert time.monotonic() - t0 > 2.0  # it waited for the holder's 4 s
    finally:
        holder.join(60)
    assert holder.exitcode == 0
    assert _ids(lakelog.Catalog(w).get_table("c.t")) == [0, 1]


def test_the_lock_is_reentrant_for_its_thread_and_excludes_the_others(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table("c.t", S, primary_key=["id"], options={"bucket": "1"})
    sm = t.store.snapshot_manager
    order: list[str] = []
    with sm.lock(), sm.lock():  # the holder may take it again (a locked attempt publishes under it)
        th = threading.Thread(target=lambda: (sm.lock().__enter__(), order.append("other")))
        th.start()
        time.sleep(0.2)
        order.append("holder")
    th.join(10)
    assert order == ["holder", "other"]


def test_expirations_beside_commit_time_expiration_report_no_error(tmp_path: Path) -> None:
    """Issue 19.9: ``expire_snapshots()`` beside the expiration every commit runs used to raise
    MissingFileError (a manifest the other expiration had deleted)."""
    w = str(tmp_path)
    t = lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options={
        "bucket": "2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
        "num-sorted-run.compaction-trigger": "2"})
    stop = threading.Event()
    errors: list[BaseException] = []

    def expirer() -> None:
        tt = lakelog.Catalog(w).get_table("c.t")
        while not stop.is_set():
            try:
                tt.expire_snapshots()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

    threads = [threading.Thread(target=expirer) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        for i in range(40):
            t.write(_rows(i * 3, f"v{i}", 5))  # overlapping keys: compactions rewrite files
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    assert not errors, errors[:3]
    assert _ids(t) == list(range(40 * 3 + 2))
    _every_snapshot_reads(t)


def test_a_tag_made_while_its_snapshot_expires_keeps_its_files(tmp_path: Path) -> None:
    """Between finding the snapshot to tag and writing the tag, an expiration in another thread
    used to delete the snapshot's files (the tag then named missing files)."""
    w = str(tmp_path)
    opts = {"bucket": "1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
            "num-sorted-run.compaction-trigger": "2"}
    t = lakelog.Catalog(w).create_table("c.t", S, primary_key=["id"], options=opts)
    t.write(_rows(0, "v", 5))
    t.write(_rows(0, "w", 5))
    tm = t.store.tag_manager
    real = tm.create

    def others_commit_meanwhile() -> None:
        other = lakelog.Catalog(w).get_table("c.t")
        for i in range(3):
            other.write(_rows(0, f"x{i}", 5))
        other.compact(full=True)  # the tagged snapshot's files are replaced, then expired

    def racing_create(name, snapshot, time_retained=None):  # type: ignore[no-untyped-def]
        th = threading.Thread(target=others_commit_meanwhile)
        th.start()
        th.join(2.0)  # under the lock the other thread waits for the tag; before, it ran to the end
        real(name, snapshot, time_retained)
        racing.append(th)

    racing: list[threading.Thread] = []
    tm.create = racing_create  # type: ignore[method-assign]
    t.create_tag("nightly")
    racing[0].join(60)
    tagged = t.to_arrow(tag="nightly")  # the tag's files are still there
    assert sorted(tagged.column("v").to_pylist()) == ["w"] * 5


def test_rescale_whose_snapshot_expires_under_it_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19.9: a rescale whose snapshot expired while it read the partition (and whose guard
    then met expired snapshots) used to fail with MissingFileError / SnapshotExpiredError."""
    from lakelog.connector.table import overwrite

    w = str(tmp_path)
    schema = pa.schema([pa.field("p", pa.int32(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(w).create_table("c.t", schema, primary_key=["p", "id"], partition_by=["p"], options={
        "bucket": "2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
        "write-only": "true"})  # three sorted runs per bucket, which the racing compaction rewrites
    for i in range(3):
        t.write(pa.table({"p": [0] * 100, "id": list(range(100)), "v": [f"a{i}"] * 100}, schema=schema))
    t.alter(lakelog.SetOption("bucket", "3"))
    other = lakelog.Catalog(w).get_table("c.t")
    real = overwrite.plan_splits
    raced: list[int] = []

    def plan_then_race(store, snap, *a, **kw):  # type: ignore[no-untyped-def]
        splits = real(store, snap, *a, **kw)
        if not raced:  # the partition is compacted and the snapshot read expires before the rewrite
            other.write(pa.table({"p": [1], "id": [1], "v": ["b"]}, schema=schema))
            other.compact(full=True)  # a dedicated compaction expires snapshots, even write-only
            raced.append(snap.id)
        return splits

    monkeypatch.setattr(overwrite, "plan_splits", plan_then_race)
    t.rescale(partitions=[{"p": 0}])
    assert raced
    fresh = lakelog.Catalog(w).get_table("c.t")
    p0 = fresh.to_arrow(filter="p = 0")
    assert sorted(p0.column("id").to_pylist()) == list(range(100))
    assert set(p0.column("v").to_pylist()) == {"a2"}
    assert {r["bucket"] for r in fresh.files().to_pylist() if r["partition"] == "{0}"} == {0, 1, 2}
    _every_snapshot_reads(fresh)


@pytest.mark.kafka
def test_a_rollback_of_a_table_with_a_kafka_log_is_refused(tmp_path: Path, kafka_broker) -> None:  # type: ignore[no-untyped-def]
    """The log keeps the removed snapshots' changes (its readers would keep them) and its
    publication marker would take the ids new commits reuse for published ones."""
    from lakelog.connector.errors import OptionError

    t = lakelog.Catalog(str(tmp_path)).create_table("c.t", S, primary_key=["id"], options={
        "bucket": "1", "log.system": "kafka", "kafka.bootstrap.servers": kafka_broker.bootstrap_servers})
    t.write(_rows(0, "a", 2))
    t.write(_rows(0, "b", 2))
    with pytest.raises(OptionError, match=r"it has a Kafka log.*writing corrections"):
        t.rollback_to(1)
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert set(t.to_arrow().column("v").to_pylist()) == {"b"}


def test_a_lock_file_made_again_after_a_drop_is_the_one_locked(tmp_path: Path) -> None:
    """Lock files stay open between holds; a table dropped and created again has a new lock file,
    and a hold on the old (deleted) one would exclude nobody."""
    catalog = lakelog.Catalog(str(tmp_path))
    t = catalog.create_table("c.t", S, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, "a", 1))  # the lock file is open now
    lock_path = os.path.join(t.store.snapshot_manager.snapshot_dir, ".lock")
    catalog.drop_table("c.t")
    t2 = catalog.create_table("c.t", S, primary_key=["id"], options={"bucket": "1"})
    t2.write(_rows(1, "b", 1))
    with t2.store.snapshot_manager.lock() as hold:
        held = os.fstat(hold.fd).st_ino  # type: ignore[attr-defined]
        assert held == os.stat(lock_path).st_ino  # the open (deleted) old file is never the new one


def test_a_writer_of_a_dropped_table_finds_it_gone_and_leaves_no_snapshot(tmp_path: Path) -> None:
    """A handle opened before the table was dropped: its commit would be the first snapshot of a
    table that no longer exists. Under the commit lock the schema is checked: the write fails,
    saying so, and no snapshot or data file stays behind."""
    from lakelog.connector.errors import TableNotFoundError

    catalog = lakelog.Catalog(str(tmp_path))
    t = catalog.create_table("c.t", S, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, "a", 1))
    stale = catalog.get_table("c.t")
    catalog.drop_table("c.t")
    with pytest.raises(TableNotFoundError, match="gone"):
        stale.write(_rows(1, "b", 1))
    table_dir = tmp_path / "c.db" / "t"
    left = [p for p in table_dir.rglob("*") if p.is_file()] if table_dir.exists() else []
    assert not [p for p in left if p.name.startswith(("snapshot-", "data-"))], left
    assert not catalog.table_exists("c.t")
