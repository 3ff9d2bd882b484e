"""Flink-free parts of the compaction job (lakelog.operators.compact_buckets): planning, per-bucket
compaction, and the committer that drops compactions which lost a race."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.compact_buckets import (
    CompactionCommitter,
    bucket_key,
    changed_buckets,
    committable_key,
    compact_bucket,
    inputs_live,
    load_bucket,
    parse_bucket_key,
    plan_compaction,
    planned_snapshot,
    sorted_run_counts,
    stale_inputs,
)

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)


def _pk_table(tmp_path: Any, writes: int = 6, **opts: str) -> lakelog.Table:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table(
        "db.t",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "2", "write-only": "true", **opts},
    )
    for i in range(writes):
        ids = list(range(i * 5, i * 5 + 20))  # overlapping keys: later writes update earlier rows
        t.write(pa.table({"dt": ["a"] * 20, "id": ids, "v": [f"w{i}"] * 20}, schema=SCHEMA))
    return t


def _rows(t: lakelog.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.refresh().to_arrow().to_pylist())


def _committable(t: lakelog.Table, key: str, full: bool = False) -> Committable:
    done = compact_bucket(t.store, key, full=full)
    assert done is not None
    sid, msg = done
    return Committable(uuid.uuid4().hex, committable_key(key, sid), [msg], None)


def _exists(t: lakelog.Table, c: Committable) -> list[bool]:
    st = t.store
    return [
        os.path.exists(st.data_file_path(m.partition, m.bucket, f.file_name))
        for m in c.messages
        for f in m.compact_after
    ]


def test_keys() -> None:
    assert parse_bucket_key(bucket_key(b"\x00\x01", 3)) == (b"\x00\x01", 3)
    with pytest.raises(InvalidInputError, match="nope"):
        parse_bucket_key("nope")
    c = Committable("x", committable_key("00:1", 42), [], None)
    assert planned_snapshot(c) == 42
    assert planned_snapshot(Committable("y", "00:1", [], None)) is None


def test_plan_compact_and_commit(tmp_path: Any) -> None:
    t = _pk_table(tmp_path)
    before = _rows(t)
    runs = sorted_run_counts(t.store)
    assert len(runs) == 2 and min(runs.values()) >= 5  # write-only: one level-0 run per write
    keys = plan_compaction(t.store)
    assert keys == sorted(runs)
    assert plan_compaction(t.store, full=True) == keys
    # only the buckets that the snapshots changed
    assert changed_buckets(t.store, 0, 1) == set(keys)
    assert changed_buckets(t.store, 6, 6) == set()

    committer = CompactionCommitter(t.store, "compactor", "run1")
    cs = [_committable(t, k) for k in keys]
    ident = committer.commit(cs, 1, final=False)
    assert ident == 1
    snap = t.refresh().latest_snapshot()
    assert snap is not None and snap.commit_kind == "COMPACT" and snap.commit_user == "compactor"
    assert _rows(t) == before
    after = sorted_run_counts(t.store)
    assert all(after[k] < runs[k] for k in keys)
    # the same committables again (a replay): nothing happens, in this or a new committer
    assert committer.commit(cs, 2, final=False) is None
    assert CompactionCommitter(t.store, "compactor", "run2").commit(cs, 2, final=False) is None
    assert t.refresh().latest_snapshot().id == snap.id  # type: ignore[union-attr]
    # a full compaction leaves one run per bucket; then nothing is left to plan
    committer.commit(
        [_committable(t, k, full=True) for k in plan_compaction(t.store, full=True)], 2, final=True
    )
    assert set(sorted_run_counts(t.store).values()) == {1}
    assert plan_compaction(t.store, full=True) == []
    assert _rows(t) == before
    # the committable line codec carries the planned snapshot
    line = encode_committable(cs[0])
    assert planned_snapshot(decode_committable(line)) == planned_snapshot(cs[0])


def test_lost_race_is_dropped_and_cleaned(tmp_path: Any) -> None:
    t = _pk_table(tmp_path)
    before = _rows(t)
    keys = plan_compaction(t.store)
    loser = [_committable(t, k) for k in keys]
    assert all(all(_exists(t, c)) for c in loser)
    b = load_bucket(t.store, keys[0])
    assert b is not None
    assert inputs_live(b, [(f.level, f.file_name) for f in loser[0].messages[0].compact_before])
    # another compaction (a writer's, or Table.compact) commits first
    t.compact(full=True)
    won = t.refresh().latest_snapshot()
    ok, stale = stale_inputs(t.store, loser)
    assert ok == [] and len(stale) == len(loser)
    committer = CompactionCommitter(t.store, "compactor", "run1")
    assert committer.commit(loser, 1, final=False) is None
    assert t.refresh().latest_snapshot().id == won.id  # type: ignore[union-attr]
    assert not any(any(_exists(t, c)) for c in loser)  # the loser's outputs are gone
    assert {c.id for c in loser} <= committer.done
    assert _rows(t) == before
    # appended data after the race still counts, and a later compaction commits
    t.write(pa.table({"dt": ["a"], "id": [1000], "v": ["new"]}, schema=SCHEMA))
    assert _rows(t) == sorted(before + [("a", 1000, "new")])


def test_chained_and_partial_conflicts(tmp_path: Any) -> None:
    t = _pk_table(tmp_path)
    keys = plan_compaction(t.store)
    first = _committable(t, keys[0])
    other = _committable(t, keys[1])
    # a compaction of the other bucket commits first (say, by another job): only ours of that
    # bucket is stale, the first still commits
    CompactionCommitter(t.store, "someone-else", "x").commit([other], 1, final=False)
    stale_other = Committable(uuid.uuid4().hex, other.key, other.messages, None)
    committer = CompactionCommitter(t.store, "compactor", "run1")
    assert committer.commit([first, stale_other], 1, final=False) == 1
    assert stale_other.id in committer.dropped and first.id in committer.inner.committed
    assert all(_exists(t, first))


def test_ancient_committables_are_ignored(tmp_path: Any) -> None:
    t = _pk_table(tmp_path, writes=6, **{"snapshot.num-retained.min": "1"})
    keys = plan_compaction(t.store)
    old = _committable(t, keys[0])
    t.compact(full=True)
    t.write(pa.table({"dt": ["a"], "id": [1], "v": ["x"]}, schema=SCHEMA))
    t.expire_snapshots(retain_min=1, retain_max=1)
    committer = CompactionCommitter(t.store, "compactor", "run1")
    assert committer.commit([old], 1, final=False) is None
    assert old.id in committer.dropped
    assert all(_exists(t, old))  # unknown fate: left for remove_orphan_files, never deleted here


def test_append_tables_compact_runs_of_small_files(tmp_path: Any) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    t = cat.create_table(
        "db.log", schema, options={"bucket": "1", "bucket-key": "id", "compaction.min.file-num": "4"}
    )
    for i in range(3):
        t.write(pa.table({"id": [i], "v": [f"x{i}"]}, schema=schema))
    assert plan_compaction(t.store) == []  # 3 small files < compaction.min.file-num
    assert len(plan_compaction(t.store, full=True)) == 1
    t.write(pa.table({"id": [3, 4], "v": ["x3", "x4"]}, schema=schema))
    keys = plan_compaction(t.store)
    assert len(keys) == 1
    before = t.to_arrow().to_pylist()
    CompactionCommitter(t.store, "c", "r").commit([_committable(t, keys[0])], 1, final=False)
    assert sorted_run_counts(t.store) == {keys[0]: 1}
    assert t.refresh().to_arrow().to_pylist() == before  # same rows, same order
    assert plan_compaction(t.store, full=True) == []  # one file: nothing more, ever


def test_restart_commits_released_compactions_once(tmp_path: Any) -> None:
    """What the streaming job's committer does after a restart: it reads the channel's finished
    files again, and commits only what its commit user has not committed yet."""
    from lakelog.operators.committer import ChannelReader

    t = _pk_table(tmp_path)
    before = _rows(t)
    keys = plan_compaction(t.store)
    released = [_committable(t, k) for k in keys]
    channel = tmp_path / "channel"
    channel.mkdir()
    (channel / "part-0-0").write_text("".join(encode_committable(c) + "\n" for c in released))
    (channel / ".part-0-1.inprogress").write_text(encode_committable(_committable(t, keys[0])) + "\n")

    first = CompactionCommitter(t.store, "compactor", "run1")
    lines = ChannelReader(str(channel)).released(first.done)
    assert sorted(lines) == sorted(c.id for c in released)  # in-progress files are not released
    assert first.commit([decode_committable(x) for x in lines.values()], 1, final=False) == 1
    n_snaps = len(t.refresh().snapshots())
    # a restart (new committer and reader, same commit user): nothing is committed again
    again = CompactionCommitter(t.store, "compactor", "run2")
    assert ChannelReader(str(channel)).released(again.done) == {}
    assert again.commit(released, 1, final=True) is None
    assert len(t.refresh().snapshots()) == n_snaps
    assert _rows(t) == before


def test_cli_flags_need_a_job(tmp_path: Any, capsys: Any) -> None:
    from lakelog.jobs.cli import main

    t = _pk_table(tmp_path, writes=2)
    wh = str(tmp_path / "wh")
    assert main(["--warehouse", wh, "compact", "db.t", "--max-rounds", "2"]) == 2
    assert "--max-rounds needs --streaming" in capsys.readouterr().err
    assert main(["--warehouse", wh, "compact", "db.t", "--job", "--idle-timeout", "3"]) == 2
    assert "--idle-timeout needs --streaming" in capsys.readouterr().err
    assert main(["--warehouse", wh, "compact", "db.t", "--parallelism", "2"]) == 2
    assert "--parallelism needs --job or --streaming" in capsys.readouterr().err
    assert main(["--warehouse", wh, "compact", "db.t", "--full", "--universal", "--job"]) == 2
    # the in-process compaction is unchanged (full by default)
    assert main(["--warehouse", wh, "compact", "db.t"]) == 0
    assert "compaction committed snapshot" in capsys.readouterr().out
    assert set(sorted_run_counts(t.store).values()) == {1}
