"""The sink's committer without Flink: a replay after snapshot expiration commits nothing twice."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa

import lakelog
from lakelog.connector.write import TableWrite
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.committer import ChannelReader, SinkCommitter

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
