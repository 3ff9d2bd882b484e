"""The sink's committer without Flink: a replay after snapshot expiration commits nothing twice;
an overwriting committer commits once, at end of input."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError
from lakelog.connector.table.write import TableWrite
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.committer import ChannelReader, OverwriteRequest, SinkCommitter

SCHEMA = pa.schema([pa.field("id", pa.int64(), False)])


def _table(tmp: Path) -> lakelog.Table:
    return lakelog.Catalog(str(tmp / "wh")).create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "id"})


def _committable(t: lakelog.Table, ids: list[int]) -> Committable:
    w = TableWrite(t.store)
    w.write(pa.table({"id": ids}, schema=SCHEMA))
    c = Committable(uuid.uuid4().hex, "k", w.prepare_commit(), None)
    w.close()
    return c


def _replay(t: lakelog.Table, channel: str) -> None:
    """What a restarted committer does: open, read the released committables, commit them."""
    again = SinkCommitter(t.store, "sink-user", "run1")
    released = ChannelReader(channel).released(again.committed)
    again.commit([decode_committable(x) for x in released.values()], 1, final=False)


def test_committed_channel_files_are_removed_and_not_replayed_after_expiration(tmp_path: Path) -> None:
    t = _table(tmp_path)
    channel = str(tmp_path / "channel")
    os.makedirs(channel)
    c = _committable(t, [1, 2, 3])
    with open(os.path.join(channel, "part-0"), "w") as fh:
        fh.write(encode_committable(c) + "\n")
    committer = SinkCommitter(t.store, "sink-user", "run1")
    reader = ChannelReader(channel)
    released = reader.released(committer.committed)
    assert list(released) == [c.id]
    committer.commit([c], 1, final=False)
    reader.released(committer.committed)  # the next round prunes the fully committed file
    assert os.listdir(channel) == []
    for i in range(3):
        t.write(pa.table({"id": [100 + i]}, schema=SCHEMA))
    t.expire_snapshots(retain_min=1, retain_max=1)
    _replay(t, channel)
    assert sorted(t.refresh().to_arrow().column("id").to_pylist()) == [1, 2, 3, 100, 101, 102]


def test_a_committable_whose_files_are_gone_is_skipped(tmp_path: Path) -> None:
    """Even when its channel file survived (a crash before pruning), a committable committed long ago
    whose snapshots expired and whose files were compacted away and removed is not committed again."""
    t = _table(tmp_path)
    channel = str(tmp_path / "channel")
    os.makedirs(channel)
    c = _committable(t, [1, 2, 3])
    with open(os.path.join(channel, "part-0"), "w") as fh:
        fh.write(encode_committable(c) + "\n")
    SinkCommitter(t.store, "sink-user", "run1").commit([c], 1, final=False)
    for i in range(3):
        t.write(pa.table({"id": [100 + i]}, schema=SCHEMA))
    t.compact(full=True)
    t.expire_snapshots(retain_min=1, retain_max=1)
    t.remove_orphan_files(older_than_seconds=0)
    _replay(t, channel)
    assert sorted(t.refresh().to_arrow().column("id").to_pylist()) == [1, 2, 3, 100, 101, 102]


def test_two_committers_of_one_commit_user_never_commit_a_committable_twice(tmp_path: Path) -> None:
    """A committer of a job attempt being cancelled (a zombie) and the restarted one share a commit
    user and read the same channel. Each commit looks at the snapshots its user made meanwhile (and
    again after every lost race), so each committable lands once and identifiers keep increasing."""
    import threading

    t = _table(tmp_path)
    cs = [_committable(t, [i]) for i in range(40)]
    zombie = SinkCommitter(t.store, "sink-user", "run1")
    restarted = SinkCommitter(t.store, "sink-user", "run1")
    assert zombie.commit(cs[:2], 1, final=False) == 1
    assert restarted.commit(cs[:3], 1, final=False) == 2  # learned of the zombie's commit first
    errors: list[BaseException] = []

    def run(c: SinkCommitter, order: list[Committable]) -> None:
        try:
            for i in range(3, len(order), 3):
                c.commit(order[:i], 1, final=False)
            c.commit(order, 1, final=False)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c, cs)) for c in (zombie, restarted)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    got = t.refresh().to_arrow().column("id").to_pylist()
    assert sorted(got) == list(range(40))
    snaps = [s for s in t.store.snapshot_manager.snapshots() if s.commit_user == "sink-user"]
    idents = [s.commit_identifier for s in snaps]
    assert idents == sorted(set(idents))
    ids = [i for s in snaps for i in (s.properties or {})["lakelog.committables"].split(",")]
    assert sorted(ids) == sorted(c.id for c in cs)


def test_a_writer_commits_what_the_channel_released_only_once_and_never_an_unreleased_one(
    tmp_path: Path,
) -> None:
    """After a restart a writer commits the released committables itself (the committer may not run
    yet): only finished channel files count, and the committer that starts later commits nothing
    twice."""
    from lakelog.operators.committer import commit_released

    t = _table(tmp_path)
    channel = str(tmp_path / "channel")
    os.makedirs(channel)
    released, unreleased = _committable(t, [7, 8]), _committable(t, [9])
    with open(os.path.join(channel, "part-0"), "w") as fh:
        fh.write(encode_committable(released) + "\n{}\n")  # a WAKE line is no committable
    with open(os.path.join(channel, ".part-1.inprogress"), "w") as fh:  # its checkpoint is not done
        fh.write(encode_committable(unreleased) + "\n")
    writer_side = SinkCommitter(t.store, "sink-user", "run1")
    committer = SinkCommitter(t.store, "sink-user", "run1")  # started before the writer committed
    assert commit_released(writer_side, ChannelReader(channel)) == 1
    assert released.id in writer_side.done
    assert released.id not in committer.done
    committer.refresh()  # what the committer does on each poll: it learns what the writer committed
    assert released.id in committer.done
    assert commit_released(committer, ChannelReader(channel)) is None
    assert released.id in committer.done and unreleased.id not in committer.done
    assert sorted(t.refresh().to_arrow().column("id").to_pylist()) == [7, 8]


def test_a_level_0_file_moved_up_by_the_lookup_compaction_stays_moved(tmp_path: Path) -> None:
    """The lookup producer moves a new level-0 file up under the same name (an upgrade: before at
    level 0, after at a higher level). The committer took it for a file written and removed again in
    one commit and dropped both sides, leaving the file at level 0; the next writer then found no
    older row and produced +I where -U/+U was due (issue 13)."""
    schema = pa.schema([pa.field("k", pa.int32(), False), ("v", pa.string())])
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", schema, primary_key=["k"], options={"changelog-producer": "lookup"}
    )
    for run, rows in enumerate(([(1, "a")], [(1, "a2"), (2, "b")])):
        w = TableWrite(t.store)
        w.write(pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=schema))
        c = Committable(uuid.uuid4().hex, "k", w.prepare_commit(), None)
        w.close()
        SinkCommitter(t.store, f"sink-{run}", "run").commit([c], 1, final=True)
    assert {f["level"] for f in t.files().to_pylist()} == {5}
    last = t.latest_snapshot().id
    got = t.changes(last - 1, last).to_pylist()
    assert got == [
        {"rowkind": "-U", "k": 1, "v": "a"},
        {"rowkind": "+U", "k": 1, "v": "a2"},
        {"rowkind": "+I", "k": 2, "v": "b"},
    ]


def test_an_overwriting_committer_commits_once_at_end_of_input(tmp_path: Path) -> None:
    """The committer of an INSERT OVERWRITE: its end-of-input commit is an OVERWRITE snapshot (a
    static one empties the table without committables, a dynamic one then does nothing); it never
    commits before end of input, and a replay of the finished run commits nothing."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1, 2]}, schema=SCHEMA))
    dynamic = SinkCommitter(t.store, "dyn", "run1", overwrite=OverwriteRequest(dynamic=True))
    assert dynamic.commit([], 1, final=True) is None
    static = SinkCommitter(t.store, "static", "run1", overwrite=OverwriteRequest(dynamic=False))
    c = _committable(t, [7])
    with pytest.raises(CommitConflictError, match="batch mode"):
        static.commit([c], 1, final=False)
    assert static.commit([c], 1, final=True) == 1
    assert t.refresh().to_arrow().column("id").to_pylist() == [7]
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "OVERWRITE"]
    again = SinkCommitter(t.store, "static", "run1", overwrite=OverwriteRequest(dynamic=False))
    assert again.commit([], 2, final=True) is None  # the run finished: nothing is emptied again
    empty = SinkCommitter(t.store, "empty", "run2", overwrite=OverwriteRequest(dynamic=False))
    assert empty.commit([], 1, final=True) == 1
    assert t.refresh().to_arrow().num_rows == 0


def test_a_replay_whose_files_a_rollback_removed_after_the_check_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted committer checks that a committable's files exist, but a rollback that removes
    the snapshot holding them may run between that check and the publish: the publish checks again
    under the commit lock and fails (the restart after it skips the committable)."""
    from lakelog.connector.errors import MissingFileError

    t = _table(tmp_path)
    t.write(pa.table({"id": [0]}, schema=SCHEMA))
    c = _committable(t, [1, 2])
    SinkCommitter(t.store, "sink-user", "run1").commit([c], 1, final=False)  # snapshot 2
    t.rollback_to(1)  # removes snapshot 2 and its files
    again = SinkCommitter(t.store, "sink-user", "run1")
    assert not again._files_exist(c)  # a restart after the rollback skips it
    monkeypatch.setattr(SinkCommitter, "_files_exist", lambda self, c: True)  # checked before the rollback
    with pytest.raises(MissingFileError, match=r"adds the file .* which is gone .* nothing was committed"):
        again.commit([c], 1, final=False)
    assert sorted(t.refresh().to_arrow().column("id").to_pylist()) == [0]
    assert [s.id for s in t.snapshots()] == [1]


def test_a_dropped_compaction_of_the_writers_fails_the_job_over_after_its_rows_commit(tmp_path: Path) -> None:
    """Another compaction rewrote the files a sink writer compacted: the commit keeps the writer's
    rows and drops its compaction, then fails (the job fails over) since the writer's view is stale.
    A replay commits nothing twice; a writer started afresh compacts again."""
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.p", schema, primary_key=["id"], options={"bucket": "1", "num-sorted-run.compaction-trigger": "2"}
    )

    def rows(ids: range, v: str) -> pa.Table:
        return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=schema)

    w = TableWrite(t.store, keep_view=True)
    committer = SinkCommitter(t.store, "sink-user", "run1")
    for i in range(3):
        w.write(rows(range(i * 10, i * 10 + 20), f"w{i}"))
        committer.commit([Committable(f"c{i}", "k", w.prepare_commit(), None)], i + 1, final=False)
    other = t.compact(full=True)  # another commit user rewrites every file the writer knows
    assert other is not None
    w.write(rows(range(5, 15), "late"))
    late = Committable("c-late", "k", w.prepare_commit(wait_compaction=True), None)
    assert any(m.compact_before for m in late.messages)
    with pytest.raises(CommitConflictError, match="lost a race .* failing over so that the writers reload"):
        committer.commit([late], 4, final=False)
    got = {r["id"]: r["v"] for r in t.refresh().to_arrow().to_pylist()}
    assert [got[i] for i in (4, 5, 14, 15, 39)] == ["w0", "late", "late", "w1", "w2"] and len(got) == 40
    assert t.latest_snapshot().commit_kind == "APPEND"  # the rows landed, the compaction did not
    again = SinkCommitter(t.store, "sink-user", "run1")  # after the failover: a replay is a no-op
    assert again.commit([late], 5, final=False) is None
    fresh = TableWrite(t.store, keep_view=True)  # the restarted writer starts from the table
    for i in range(3):
        fresh.write(rows(range(30 + i, 32 + i), f"n{i}"))
        again.commit([Committable(f"n{i}", "k", fresh.prepare_commit(wait_compaction=True), None)], 6 + i,
                     final=False)
    assert [s.id for s in t.refresh().snapshots() if s.commit_kind == "COMPACT" and s.commit_user == "sink-user"
            and s.id > other]
    assert len(t.to_arrow().to_pylist()) == 40
