"""Unit tests for the sink's commit-message codec, key assignment and idempotent committer (no Flink)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.bucket import compute_buckets
from lakelog.connector.errors import CorruptFileError
from lakelog.connector.store import TableStore
from lakelog.connector.write import TableWrite
from lakelog.operators.codec import Committable, decode_committable, encode_committable
from lakelog.operators.committer import COMMITTABLES_PROPERTY, ChannelReader, SinkCommitter

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("blob", pa.binary()),
    ]
)


def _table(tmp_path):  # type: ignore[no-untyped-def]
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    return cat.create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "3"}
    )


def _data(n: int, dt: str = "2024-01-01") -> pa.Table:
    return pa.table(
        {
            "dt": [dt] * n,
            "id": list(range(n)),
            "name": [f"n{i}" for i in range(n)],
            "blob": [b"\x00\xff"] * n,
        },
        schema=SCHEMA,
    )


def test_codec_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = _table(tmp_path)
    w = TableWrite(TableStore(t.store.path))
    w.write(_data(50))
    msgs = w.prepare_commit()
    assert msgs
    c = Committable("abc", "k:1", msgs, {"x": "y"})
    line = encode_committable(c)
    assert "\n" not in line
    json.loads(line)  # plain JSON
    back = decode_committable(line)
    assert back == c


def test_codec_rejects_garbage() -> None:
    with pytest.raises(CorruptFileError):
        decode_committable("not json")
    with pytest.raises(CorruptFileError):
        decode_committable(json.dumps({"v": 99, "id": "a", "messages": []}))
    with pytest.raises(CorruptFileError):
        decode_committable(json.dumps({"v": 1, "id": "a", "messages": [{"partition": 5}]}))


def test_key_assigner_matches_compute_buckets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("mmh3")
    from lakelog.operators.sink import _KeyAssigner

    t = _table(tmp_path)
    store = t.store
    ka = _KeyAssigner(store.path)
    ka._setup()
    data = _data(200)
    expected = compute_buckets(data, ["id"], store.field_types(["id"]), 3)
    got = [int(ka.key_of(list(r.values())).split(":")[1]) for r in data.to_pylist()]
    assert np.array_equal(np.asarray(got), expected)


def test_committer_skips_replayed_ids_and_increases_identifiers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = _table(tmp_path)
    store = t.store
    w = TableWrite(store)
    w.write(_data(10))
    c1 = Committable("id-1", "k", w.prepare_commit())
    w.write(_data(5, "2024-01-02"))
    c2 = Committable("id-2", "k", w.prepare_commit())
    sc = SinkCommitter(store, "user-a", "run-1")
    assert sc.commit([c1], 1, final=False) == 1
    # a restarted committer whose state still says "next identifier 1" and replays c1 with c2
    sc2 = SinkCommitter(TableStore(store.path), "user-a", "run-1")
    assert "id-1" in sc2.committed
    assert sc2.commit([c1, c2], 1, final=True) == 2
    assert t.to_arrow().num_rows == 15
    snaps = store.snapshot_manager.snapshots()
    assert sorted(s.properties[COMMITTABLES_PROPERTY] for s in snaps) == ["id-1", "id-2"]
    # after the final commit of this run, a replay commits nothing
    sc3 = SinkCommitter(TableStore(store.path), "user-a", "run-1")
    assert sc3.finished
    w.write(_data(5, "2024-01-03"))
    assert sc3.commit([Committable("id-3", "k", w.prepare_commit())], 1, final=True) is None
    assert t.to_arrow().num_rows == 15


def test_channel_reader_skips_in_progress(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".part-0.inprogress").write_text(json.dumps({"id": "hidden"}) + "\n")
    (tmp_path / "part-0-0").write_text(json.dumps({"id": "a"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    r = ChannelReader(str(tmp_path))
    assert set(r.released(set())) == {"a", "b"}
    assert set(r.released({"a"})) == {"b"}
