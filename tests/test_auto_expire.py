"""Snapshot expiration after each commit, as Paimon's committers do: writers, overwrites, the Flink
sink's committer and dedicated compactions expire what the retention options let go; ``write-only``
writers leave it to the dedicated compaction; tags and consumers keep what they need; a long-lived
writer keeps writing correctly while the snapshots under it expire."""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import SnapshotNotFoundError
from lakelog.connector.table.write import TableWrite
from lakelog.operators.codec import Committable
from lakelog.operators.committer import SinkCommitter

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string())])


def make(catalog: lakelog.Catalog, **options: str) -> lakelog.Table:
    return catalog.create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "2", **options})


def rows(keys: list[int], v: str) -> pa.Table:
    return pa.table({"k": keys, "v": [f"{v}{k}" for k in keys]}, schema=SCHEMA)


def ids(t: lakelog.Table) -> list[int]:
    return [s.id for s in t.snapshots()]


def content(t: lakelog.Table, **scan: object) -> dict[int, str]:
    return {r["k"]: r["v"] for r in t.to_arrow(**scan).to_pylist()}


def orphans(t: lakelog.Table) -> list[str]:
    return t.remove_orphan_files(older_than_seconds=0, dry_run=True)


def test_writers_expire_by_the_retention_options(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"})
    for i in range(6):
        t.write(rows([i, i + 1], f"w{i}-"))
        latest = t.latest_snapshot().id
        assert ids(t) == list(range(max(1, latest - 2), latest + 1)), i  # never more than 3
    assert content(t) == {**{i: f"w{i}-{i}" for i in range(6)}, 6: "w5-6"}
    with pytest.raises(SnapshotNotFoundError, match="snapshot 1"):
        t.to_arrow(snapshot_id=1)
    assert orphans(t) == []  # the expired snapshots' files and manifests went with them
    t.overwrite(rows([100], "o"))
    t.delete(rows([100], "").select(["k"]))
    assert len(ids(t)) == 3 and content(t) == {}


def test_the_defaults_keep_an_hour(catalog: lakelog.Catalog) -> None:
    t = make(catalog)  # 1 h, min 10: nothing a test makes expires
    for i in range(12):
        t.write(rows([i], "d"))
    assert ids(t) == list(range(1, t.latest_snapshot().id + 1)) and len(ids(t)) > 12
    t.alter(lakelog.SetOption("snapshot.time-retained", "1 ms"))
    time.sleep(0.01)
    t.write(rows([99], "d"))
    latest = t.latest_snapshot().id
    assert ids(t) == list(range(latest - 9, latest + 1))  # the 10 newest


def test_write_only_writers_leave_expiration_to_the_dedicated_compaction(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"write-only": "true", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    for i in range(5):
        t.write(rows([i], "w"))
    assert ids(t) == [1, 2, 3, 4, 5]
    sid = t.compact(full=True)
    assert ids(t) == [sid - 1, sid]
    assert content(t) == {i: f"w{i}" for i in range(5)}


def test_tags_and_consumers_keep_what_they_need(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    t.write(rows([1], "a"))
    t.create_tag("first", snapshot_id=1)
    t.write(rows([1], "b"))
    t.store.consumer_manager.reset("job", 2)  # a streaming reader's progress: snapshot 2 comes next
    for i in range(4):
        time.sleep(0.002)
        t.write(rows([1], f"c{i}"))
    assert ids(t)[0] == 2  # the consumer's next snapshot stays
    assert content(t, tag="first") == {1: "a1"}
    t.store.consumer_manager.delete("job")
    time.sleep(0.002)
    t.write(rows([2], "d"))
    assert ids(t) == [t.latest_snapshot().id]
    assert content(t, tag="first") == {1: "a1"} and content(t) == {1: "c31", 2: "d2"}


@pytest.mark.parametrize("seed", range(3))
def test_a_stream_writer_keeps_its_trees_while_snapshots_expire(catalog: lakelog.Catalog, seed: int) -> None:
    """A long-lived writer (background compaction on) and one-shot writes and deletes interleaved,
    with only 2 snapshots kept: the table always equals the model, and nothing is left behind."""
    rnd = random.Random(seed)
    t = make(catalog, **{
        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
        "num-sorted-run.compaction-trigger": "2",
    })  # fmt: skip
    model: dict[int, str] = {}
    with t.stream_writer() as w:
        for step in range(40):
            keys = rnd.sample(range(60), 8)
            if rnd.random() < 0.2:
                t.delete(rows(keys[:3], "").select(["k"]))
                for k in keys[:3]:
                    model.pop(k, None)
            elif rnd.random() < 0.3:
                t.write(rows(keys, f"t{step}-"))
                model.update({k: f"t{step}-{k}" for k in keys})
            else:
                w.write(rows(keys, f"s{step}-")).commit()
                model.update({k: f"s{step}-{k}" for k in keys})
            assert len(ids(t)) <= 2 and content(t) == model, step
        w.commit(wait_compaction=True)
    assert content(t) == model
    assert orphans(t) == []


def test_the_sink_committer_expires_after_its_commits(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", SCHEMA, primary_key=["k"], options={"bucket": "1", "snapshot.num-retained.max": "2",
                                                    "snapshot.num-retained.min": "1"},
    )  # fmt: skip
    committer = SinkCommitter(t.store, "sink-user", "run1")
    for i in range(4):
        w = TableWrite(t.store)
        w.write(rows([i], "c"))
        committer.commit([Committable(uuid.uuid4().hex, "k", w.prepare_commit(), None)], i + 1, final=False)
        w.close()
    assert ids(t) == [3, 4]
    assert content(t) == {i: f"c{i}" for i in range(4)}
    assert not os.path.exists(os.path.join(t.path, "snapshot", "snapshot-1"))
