"""Unit tests for the sink's commit-message codec, key assignment and idempotent committer (no Flink)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.bucket import compute_buckets
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.write import TableWrite
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


def test_codec_round_trips_the_hash_index_of_a_dynamic_bucket_commit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A dynamic-bucket writer's messages carry their HASH index files and the file their view of
    the bucket started from; a committable keeps both, and committing the decoded messages records
    the same index as committing the originals would."""
    from lakelog.connector.table.commit import TableCommit

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table(
        "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "20"},
    )
    w = TableWrite(TableStore(t.store.path))
    w.write(_data(50))
    first = w.prepare_commit()
    assert len(first) == 3 and all(m.index_files and m.index_base is None for m in first)
    back = decode_committable(encode_committable(Committable("a", "k:0", first)))
    assert back.messages == first
    TableCommit(TableStore(t.store.path), "u").commit(back.messages, 1)
    w.write(_data(70))  # 20 new keys: 10 fill bucket 2 (its view started from its file), 10 open bucket 3
    second = w.prepare_commit()
    bases = {m.bucket: m.index_base for m in second if m.index_files}
    assert set(bases) == {2, 3} and bases[3] is None
    assert bases[2] == next(f.file_name for m in first if m.bucket == 2 for f in m.index_files)
    line = encode_committable(Committable("b", "k:0", second))
    assert decode_committable(line).messages == second
    TableCommit(TableStore(t.store.path), "u").commit(decode_committable(line).messages, 2)
    entries = TableStore(t.store.path).index_entries(t.refresh().latest_snapshot())
    assert sorted(e.bucket for e in entries) == [0, 1, 2, 3]
    assert sum(e.index_file.row_count for e in entries) == 70
    assert t.refresh().to_arrow().num_rows == 70


def test_codec_rejects_garbage() -> None:
    with pytest.raises(CorruptFileError):
        decode_committable("not json")
    with pytest.raises(CorruptFileError):
        decode_committable(json.dumps({"v": 99, "id": "a", "messages": []}))
    with pytest.raises(CorruptFileError):
        decode_committable(json.dumps({"v": 1, "id": "a", "messages": [{"partition": 5}]}))
    bad_index = {"partition": "", "bucket": 0, "total_buckets": -1, "index_files": [{"file_name": "i", "index_type": "DV"}]}
    with pytest.raises(CorruptFileError, match="not HASH"):
        decode_committable(json.dumps({"v": 1, "id": "a", "messages": [bad_index]}))


def test_batch_encoder_groups_rows_into_bucket_blobs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The sink's pandas UDF body: Series in (kind first, nullable numbers with their null mask),
    one blob per (partition, bucket) out, each holding exactly that group's rows in arrival order
    with their kinds; blob keys agree with the per-row key encoder."""
    pytest.importorskip("mmh3")
    import pandas as pd

    from lakelog.operators.sink_blobs import BatchEncoder, blob_key, decode_blob

    t = _table(tmp_path)
    store = t.store
    data = pa.concat_tables([_data(60), _data(40, "2024-01-02")])
    data = data.set_column(2, "name", pa.array([None if i % 7 == 0 else f"n{i}" for i in range(100)]))
    kinds = np.array([i % 4 for i in range(100)], dtype=np.int8)
    enc = BatchEncoder(store.path, True, [False, False, False, False], None)
    series = [pd.Series(kinds)] + [c.to_pandas() for c in data.columns]
    out = enc(*series)
    assert len(out) == 100
    blobs = [b for b in out if b is not None]
    assert out[len(blobs):].isna().all()  # the blobs come first
    expected = compute_buckets(data, ["id"], store.field_types(["id"]), 3)
    seen = 0
    for blob in blobs:
        rows, ks = decode_blob(blob)
        assert rows.schema == store.schema.arrow_schema() and ks is not None
        dt, bucket = rows.column("dt")[0].as_py(), None
        ids = rows.column("id").to_pylist()
        (idx,) = np.nonzero((np.asarray(data.column("dt").to_pylist()) == dt) & np.isin(data.column("id"), ids))
        assert list(idx) == sorted(idx) and len(idx) == rows.num_rows  # arrival order kept
        assert len(set(expected[idx])) == 1
        bucket = int(expected[idx[0]])
        assert rows.equals(data.take(pa.array(idx)))
        assert ks.tolist() == kinds[idx].tolist()
        row = data.slice(int(idx[0]), 1).to_pylist()[0]
        enc.keys.key(list(row.values()))  # the per-row encoder ...
        assert blob_key(blob) == enc.keys.key(list(row.values()))  # ... agrees with the batch key
        assert blob_key(blob).endswith(f":{bucket}")
        seen += rows.num_rows
    assert seen == 100
    assert len(blobs) == len({(d, int(b)) for d, b in zip(data.column("dt").to_pylist(), expected)})


def test_batch_splitter_cuts_a_java_batch_into_the_encoders_blobs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The Python stage after the Java RowBatcher: an Arrow IPC batch as the batcher writes it (every
    field nullable, the RowKind column last) is cut into the same blobs as the pandas UDF path makes
    of the same rows; a column type the table does not have is cast, and one that cannot be stored
    fails naming the column."""
    import pandas as pd

    from lakelog.connector.errors import InvalidInputError
    from lakelog.operators.sink_blobs import (
        KIND_FIELD,
        WAKE_BLOB,
        BatchEncoder,
        BatchSplitter,
        blob_key,
        is_flush_marker,
    )

    t = _table(tmp_path)
    data = pa.concat_tables([_data(60), _data(40, "2024-01-02")])
    kinds = np.array([i % 4 for i in range(100)], dtype=np.int8)

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    loose = pa.schema([pa.field(f.name, f.type, nullable=True) for f in data.schema])
    batch = data.cast(loose).append_column(pa.field(KIND_FIELD, pa.int8(), nullable=False), pa.array(kinds))
    blobs = list(BatchSplitter(t.store.path, 128).split(ipc(batch)))
    enc = BatchEncoder(t.store.path, True, [False] * 4, 128)
    expected = [b for b in enc(pd.Series(kinds), *[c.to_pandas() for c in data.columns]) if b is not None]
    assert blobs == expected
    # the batcher's flush marker (an empty record before a checkpoint barrier) becomes one marker
    # blob per key that got rows since the previous marker, then a wake-up for the committer
    splitter = BatchSplitter(t.store.path, 128)
    list(splitter.split(ipc(batch)))
    *markers, wake = list(splitter.split(b""))
    assert sorted(blob_key(m) for m in markers) == sorted(blob_key(b) for b in expected)
    assert all(is_flush_marker(m) for m in markers) and not any(is_flush_marker(b) for b in expected)
    assert wake == WAKE_BLOB and WAKE_BLOB not in markers
    assert list(splitter.split(b"")) == [WAKE_BLOB]
    wide = batch.set_column(1, "id", data.column("id").cast(pa.int32()))  # cast back to BIGINT
    assert list(BatchSplitter(t.store.path, 128).split(ipc(wide))) == expected
    bad = batch.set_column(1, "id", pa.array([f"x{i}" for i in range(100)]))
    with pytest.raises(InvalidInputError, match="'id'"):
        list(BatchSplitter(t.store.path, 128).split(ipc(bad)))


def test_batch_encoder_null_masks_and_bad_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Nullable numbers travel as (value, is-null) so that big BIGINTs and NaN survive pandas; a value
    that does not fit the column's type fails naming the column, and so does a null in a NOT NULL column."""
    import pandas as pd

    from lakelog.connector.errors import InvalidInputError
    from lakelog.operators.sink_blobs import BatchEncoder, decode_blob

    schema = pa.schema([pa.field("id", pa.int64(), False), ("big", pa.int64()), ("f", pa.float64()), ("s", pa.int16())])
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table("db.n", schema, options={"bucket": "1", "bucket-key": "id"})
    enc = BatchEncoder(t.store.path, False, [False, True, True, True], None)
    big = 2**62 + 1
    series = [
        pd.Series([1, 2, 3]),
        pd.Series([big, 0, 5]), pd.Series([False, True, False]),
        pd.Series([float("nan"), 0.0, 1.5]), pd.Series([False, True, False]),
        pd.Series([7, 0, -3]), pd.Series([False, False, True]),
    ]
    (blob,) = [b for b in enc(*series) if b is not None]
    rows, kinds = decode_blob(blob)
    assert kinds is None
    assert rows.column("big").to_pylist() == [big, None, 5]
    f = rows.column("f").to_pylist()
    assert np.isnan(f[0]) and f[1:] == [None, 1.5]
    assert rows.column("s").to_pylist() == [7, 0, None] and rows.schema.field("s").type == pa.int16()
    series[5] = pd.Series([7, 70_000, 1])
    with pytest.raises(InvalidInputError, match="'s'"):
        enc(*series)
    with pytest.raises(InvalidInputError, match="'id'"):
        enc(pd.Series([1, None, 3], dtype=object), *series[1:])


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


def test_nested_columns_have_type_codes_with_their_children() -> None:
    from lakelog.operators.sink_blobs import java_type_code

    row = pa.struct([pa.field("a", pa.int32()), pa.field("b c", pa.string(), False)])
    assert java_type_code(pa.list_(pa.field("item", pa.int64()))) == "list(6974656d~n~i64)"
    assert java_type_code(row) == "row(61~n~i32,622063~r~str)"
    got = java_type_code(pa.map_(pa.field("key", pa.string(), False), pa.field("value", row)))
    assert got == "map(6b6579~r~str,76616c7565~n~row(61~n~i32,622063~r~str))"


def test_dynamic_options_of_a_job_are_checked_and_immutable_ones_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lakelog.connector.errors import OptionError
    from lakelog.operators.table_ref import store_with_options

    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", pa.schema([pa.field("k", pa.int64(), False)]), primary_key=["k"]
    )
    store = store_with_options(t.path, {"write-buffer-size": "1 mb"})
    assert int(store.options.write_buffer_size) == 1 << 20 and store.schema.id == t.store.schema.id
    assert "write-buffer-size" not in lakelog.Catalog(str(tmp_path)).get_table("db.t").options
    with pytest.raises(OptionError, match="merge-engine"):
        store_with_options(t.path, {"merge-engine": "first-row"})
    with pytest.raises(OptionError, match="write-bufer-size"):
        store_with_options(t.path, {"write-bufer-size": "1 mb"})
    # a job's stages must route by one count: 'bucket' changes by ALTER or sys.rescale only
    with pytest.raises(OptionError, match="'bucket' cannot be set for one job"):
        store_with_options(t.path, {"bucket": "4"})
def test_splitter_routes_each_partition_by_its_own_bucket_count(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A table rescaled from 3 to 5 buckets: the splitter routes the old partition by the 3 buckets
    its files record, a new one by 5, a partition whose files go away later still by what it learned
    first; each blob carries that count and its key names a bucket below it."""
    from lakelog.connector.format.schema_changes import SetOption
    from lakelog.operators.sink_blobs import BatchSplitter, blob_key, decode_group
    from lakelog.operators.sink_keys import flink_key_group, parse_key

    t = _table(tmp_path)
    t.write(_data(50, "old"))
    t.alter(SetOption("bucket", "5"))
    data = pa.concat_tables([_data(400, "old"), _data(400, "new")])

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    splitter = BatchSplitter(t.store.path, 128, t.store.schema.id)
    blobs = list(splitter.split(ipc(data)))
    store = TableStore(t.store.path)
    seen: dict[str, dict[int, str]] = {}
    for blob in blobs:
        rows, kinds, total = decode_group(blob)
        assert kinds is None and rows.schema.metadata is None
        partition, bucket = parse_key(blob_key(blob))
        (dt,) = store.partition_values(partition)
        assert set(rows.column("dt").to_pylist()) == {dt}
        assert total == {"old": 3, "new": 5}[dt]
        keys = list(store.schema.bucket_keys)
        want = compute_buckets(rows, keys, store.field_types(keys), total)
        assert (want == bucket).all()
        seen.setdefault(dt, {})[bucket] = blob_key(blob)
    assert sorted(seen["old"]) == [0, 1, 2] and sorted(seen["new"]) == [0, 1, 2, 3, 4]
    # balanced for the partition's own count: 2 writers get 2 and 1 of the old partition's buckets
    per_writer = sorted(
        sum(1 for k in seen["old"].values() if flink_key_group(k, 128) * 2 // 128 == w) for w in (0, 1)
    )
    assert per_writer == [1, 2]
    # a count, once learned, stays for the job (a rescale meanwhile makes the writer refuse, the
    # restarted job learns it again)
    t.rescale(partitions=[{"dt": "old"}])
    again = list(splitter.split(ipc(_data(30, "old"))))
    assert {decode_group(b)[2] for b in again} == {3}
    fresh = list(BatchSplitter(t.store.path, 128, t.store.schema.id).split(ipc(_data(30, "old"))))
    assert {decode_group(b)[2] for b in fresh} == {5}


def test_splitter_keeps_the_planned_schemas_count_for_new_partitions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A sink planned at schema 3 buckets keeps routing new partitions by 3 after an ALTER to 6 (its
    writers write by that schema too)."""
    from lakelog.connector.format.schema_changes import SetOption
    from lakelog.operators.sink_blobs import BatchEncoder, decode_group

    t = _table(tmp_path)
    planned = t.store.schema.id
    t.alter(SetOption("bucket", "6"))
    data = _data(200, "fresh")
    enc = BatchEncoder(t.store.path, False, [False] * 4, None, planned)
    blobs = [b for b in enc(*[c.to_pandas() for c in data.columns]) if b is not None]
    assert {decode_group(b)[2] for b in blobs} == {3}
    latest = BatchEncoder(t.store.path, False, [False] * 4, None)
    blobs = [b for b in latest(*[c.to_pandas() for c in data.columns]) if b is not None]
    assert {decode_group(b)[2] for b in blobs} == {6}


def test_sink_routes_tables_that_need_a_bucket_assigner_to_one_writer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Dynamic-bucket tables are split into one blob per partition (one writer per partition, whose
    TableWrite assigns buckets); cross-partition upsert tables (dynamic or fixed buckets) into one
    blob per batch under one key, rows in arrival order. Writers fed these blobs, committing through
    the committable codec and the sink's committer, make the table a plain-Python write would:
    every key in one bucket, a key that moved partition gone from the old one."""
    from lakelog.operators.codec import Committable, decode_committable, encode_committable
    from lakelog.operators.sink_blobs import (
        BatchSplitter,
        SinkRouting,
        blob_key,
        decode_group,
        sink_routing,
    )
    from lakelog.operators.sink_keys import parse_key

    from .buckets_util import assert_keys_in_their_buckets

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    dynamic = cat.create_table("db.dyn", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"],
                               options={"bucket": "-1", "dynamic-bucket.target-row-num": "30"})
    cross = cat.create_table("db.cross", SCHEMA, primary_key=["id"], partition_by=["dt"],
                             options={"bucket": "-1"})
    cross_fixed = cat.create_table("db.cross_fixed", SCHEMA, primary_key=["id"], partition_by=["dt"],
                                   options={"bucket": "2"})
    assert sink_routing(dynamic.store) == SinkRouting.PARTITION
    assert sink_routing(cross.store) == sink_routing(cross_fixed.store) == SinkRouting.SINGLE
    assert sink_routing(_table(tmp_path).store) == SinkRouting.BUCKET
    assert sink_routing(cat.create_table("db.app", SCHEMA, options={"bucket": "-1"}).store) == SinkRouting.BUCKET

    def ipc(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    jobs = iter(range(100))

    def sink(t: lakelog.Table, batches: list[pa.Table]) -> dict[str, set[str]]:
        """Split each batch, write each key's blobs with its own TableWrite (one flush per batch, as
        a writer flushes per checkpoint), commit every flush's committables at once."""
        splitter = BatchSplitter(t.store.path, 128)
        writers: dict[str, TableWrite] = {}
        lines, dts_of_key = [], {}
        for i, batch in enumerate(batches):
            for blob in splitter.split(ipc(batch)):
                rows, kinds, total = decode_group(blob)
                key = blob_key(blob)
                dts_of_key.setdefault(key, set()).update(rows.column("dt").to_pylist())
                w = writers.setdefault(key, TableWrite(TableStore(t.store.path), keep_view=True))
                if total is not None:
                    assert total == w.total_buckets(parse_key(key)[0]) == -1
                w.write(rows)
            for key, w in writers.items():
                lines.append(encode_committable(Committable(f"{key}-{i}", key, w.prepare_commit())))
        # one commit of every flush, as after several checkpoints the committer's poll finds them all
        committer = SinkCommitter(TableStore(t.store.path), f"job-{next(jobs)}", "run")
        committer.commit([decode_committable(line) for line in lines], 1, final=False)
        return dts_of_key

    def batch(dt: str, ids: range, name: str) -> pa.Table:
        return pa.table({"dt": [dt] * len(ids), "id": list(ids), "name": [name] * len(ids),
                         "blob": [b""] * len(ids)}, schema=SCHEMA)

    keys = sink(dynamic, [pa.concat_tables([batch("a", range(50), "1"), batch("b", range(20), "1")]),
                          pa.concat_tables([batch("a", range(40, 100), "2"), batch("b", range(10), "2")])])
    assert sorted(map(sorted, keys.values())) == [["a"], ["b"]]  # one writer key per partition
    got = {(r["dt"], r["id"]): r["name"] for r in dynamic.refresh().to_arrow().to_pylist()}
    want = {**{("a", i): "1" for i in range(40)}, **{("a", i): "2" for i in range(40, 100)},
            **{("b", i): "2" for i in range(10)}, **{("b", i): "1" for i in range(10, 20)}}
    assert got == want
    assert len({e.bucket for e in dynamic.store.index_entries(dynamic.latest_snapshot())}) >= 4
    assert_keys_in_their_buckets(dynamic.refresh())
    for t in (cross, cross_fixed):
        # key 1 moves a -> b -> a within one batch, keys 0..9 move a -> b in the next batch
        first = pa.concat_tables([batch("a", range(10), "1"), batch("b", range(1, 2), "moved"),
                                  batch("a", range(1, 2), "back")])
        keys = sink(t, [first])
        assert list(keys.values()) == [{"a", "b"}]  # one writer key for the whole table
        rows = t.refresh().to_arrow().to_pylist()
        want_rows = [(i, "a", "back" if i == 1 else "1") for i in range(10)]
        assert sorted((r["id"], r["dt"], r["name"]) for r in rows) == want_rows
        sink(t, [batch("b", range(5), "2"), batch("b", range(3, 8), "3")])  # a later job moves 0..7
        rows = t.refresh().to_arrow().to_pylist()
        want_rows = [(i, "b", "2" if i < 3 else "3") for i in range(8)] + [(8, "a", "1"), (9, "a", "1")]
        assert sorted((r["id"], r["dt"], r["name"]) for r in rows) == want_rows


def test_cross_partition_commit_after_another_writer_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A cross-partition sink writer's committables name the snapshot its key index was loaded from;
    the committer refuses them when another commit user committed rows after it (a key could then
    live in two partitions), not for compactions or the sink's own earlier commits."""
    from lakelog.connector.errors import CommitConflictError

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table("db.x", SCHEMA, primary_key=["id"], partition_by=["dt"], options={"bucket": "2"})
    t.write(_data(5, "a"))
    w = TableWrite(TableStore(t.store.path), keep_view=True)
    committer = SinkCommitter(TableStore(t.store.path), "sink", "run")

    def flush(rows: pa.Table, cid: str) -> Committable:
        w.write(rows)
        c = Committable(cid, "k:0", w.prepare_commit(), view=w.view_snapshot_id)
        back = decode_committable(encode_committable(c))
        assert back == c and back.view == 1
        return back

    committer.commit([flush(_data(3, "b"), "c1")], 1, final=False)  # moves keys 0..2 to b
    t.compact(full=True)  # another commit user's compaction: no news for the key index
    committer.commit([flush(_data(2, "c"), "c2")], 2, final=False)  # its own commit before: fine
    got = sorted((r["id"], r["dt"]) for r in t.refresh().to_arrow().to_pylist())
    assert got == [(0, "c"), (1, "c"), (2, "b"), (3, "a"), (4, "a")]
    cat.get_table("db.x").write(_data(1, "d"))  # another writer moves key 0 to d
    pending = flush(_data(1, "e"), "c3")
    with pytest.raises(CommitConflictError, match=r"cross-partition table .* another writer .* one writing job"):
        committer.commit([pending], 3, final=False)
    assert sorted((r["id"], r["dt"]) for r in t.refresh().to_arrow().to_pylist())[0] == (0, "d")
