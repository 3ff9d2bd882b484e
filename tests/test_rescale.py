"""Bucket rescale: ``ALTER ... SET ('bucket' = N)`` for new partitions, per-partition counts kept by
old ones, ``Table.rescale`` / ``lakelog rescale`` rewriting partitions in one OVERWRITE snapshot,
and ``Table.overwrite`` with Paimon's semantics."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError, InvalidInputError, OptionError
from lakelog.connector.format.schema_changes import SetOption
from lakelog.jobs.cli import main as cli

from .buckets_util import assert_keys_in_their_buckets

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: lakelog.Table, **scan: Any) -> dict[tuple[str, int], str]:
    return {(r["dt"], r["id"]): r["v"] for r in t.to_arrow(**scan).to_pylist()}


def make(catalog: lakelog.Catalog, name: str = "db.t", **options: str) -> lakelog.Table:
    return catalog.create_table(
        name, SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2", **options}
    )


def test_alter_bucket_applies_to_new_partitions_old_ones_keep_their_count(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(40), "a1"))
    t.alter(SetOption("bucket", "5"))
    t.write(rows("a", range(20, 60), "a2"))  # an old partition: still 2 buckets
    t.write(rows("b", range(40), "b1"))  # a new one: 5
    assert t.bucket_counts() == {("a",): 2, ("b",): 5}
    assert_keys_in_their_buckets(t)
    want = {("a", i): "a1" for i in range(20)} | {("a", i): "a2" for i in range(20, 60)}
    assert content(t) == want | {("b", i): "b1" for i in range(40)}
    t.compact(full=True)
    assert t.bucket_counts() == {("a",): 2, ("b",): 5}
    assert_keys_in_their_buckets(t)
    # a new handle reads the new option too
    t2 = catalog.get_table("db.t")
    t2.write(rows("c", range(10), "c1"))
    assert t2.bucket_counts()[("c",)] == 5


def test_stream_writer_open_across_the_alter_keeps_its_routing(catalog: lakelog.Catalog) -> None:
    """The stream writer shares the table handle that is altered: it must keep writing each
    partition with one count (Paimon's running writers keep theirs), never a key into a bucket of
    another count."""
    t = make(catalog)
    t.write(rows("a", range(30), "a0"))
    with t.stream_writer() as w:
        w.write(rows("a", range(10), "s1")).commit()
        t.alter(SetOption("bucket", "4"))
        w.write(rows("a", range(10, 20), "s2")).write(rows("n", range(20), "s2")).commit()
        t.write(rows("m", range(20), "m"))  # a one-shot writer started after the change
        w.write(rows("m", range(5), "s3")).commit()  # the old writer into the new count's partition
        w.write(rows("n", range(5), "s4")).commit(wait_compaction=True)
    counts = t.bucket_counts()
    assert counts[("a",)] == 2 and counts[("m",)] == 4
    assert counts[("n",)] == 2  # first written by the writer started before the change
    assert_keys_in_their_buckets(t)
    got = content(t)
    assert got[("a", 5)] == "s1" and got[("a", 15)] == "s2" and got[("a", 25)] == "a0"
    assert got[("m", 3)] == "s3" and got[("m", 10)] == "m" and got[("n", 3)] == "s4" and got[("n", 7)] == "s2"


def test_bucket_cannot_change_to_or_from_dynamic_once_written(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.alter(SetOption("bucket", "3"))  # no snapshot yet: free, as in Paimon
    t.write(rows("a", range(3), "x"))
    with pytest.raises(OptionError, match="cannot change from 3 to -1"):
        t.alter(SetOption("bucket", "-1"))
    d = catalog.create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "-1"})
    d.write(rows("a", range(3), "x"))
    with pytest.raises(OptionError, match="cannot change from -1"):
        d.alter(SetOption("bucket", "4"))


def test_rescale_rewrites_partitions_in_one_overwrite_and_keeps_every_row(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(100), "a"))
    t.write(rows("b", range(50), "b"))
    t.delete(rows("a", range(0, 100, 7), ""))
    before_id = t.latest_snapshot().id
    before = content(t)
    t.alter(SetOption("bucket", "6"))
    sid = t.rescale(partitions=[{"dt": "a"}])
    snap = t.snapshot(sid)
    assert snap.commit_kind == "OVERWRITE" and sid == before_id + 1
    assert snap.delta_record_count is not None and snap.total_record_count == len(before)
    assert t.bucket_counts() == {("a",): 6, ("b",): 2}
    assert content(t) == before
    assert content(t, snapshot_id=before_id) == before  # time travel across the rescale
    assert_keys_in_their_buckets(t)
    # a rescaled partition is one sorted run per bucket at the top level: nothing left to compact
    assert {f["level"] for f in t.files().to_pylist() if f["partition"] == "{a}"} == {5}
    assert t.rescale() is not None and t.bucket_counts() == {("a",): 6, ("b",): 6}
    assert t.rescale() is None  # every partition has the table's count
    t.write(rows("a", range(95, 110), "later"))
    assert content(t)[("a", 105)] == "later" and content(t)[("a", 1)] == "a"
    assert_keys_in_their_buckets(t)


def test_rescale_to_an_explicit_count_leaves_the_option(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(20), "a"))
    t.rescale(buckets=3)
    assert t.options["bucket"] == "2" and t.bucket_counts() == {("a",): 3}
    t.write(rows("a", range(10, 30), "a2"))  # written with the partition's own count
    t.write(rows("z", range(5), "z"))
    assert t.bucket_counts() == {("a",): 3, ("z",): 2}
    assert_keys_in_their_buckets(t)


def test_rescale_refusals(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    with pytest.raises(lakelog.LakelogError, match="no snapshot"):
        t.rescale()
    t.write(rows("a", range(5), "a"))
    with pytest.raises(InvalidInputError, match="holds no data files"):
        t.rescale(partitions=[{"dt": "nope"}])
    with pytest.raises(InvalidInputError, match="not a partition field"):
        t.rescale(partitions=[{"id": 1}])
    d = catalog.create_table("db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "-1"})
    d.write(rows("a", range(3), "x"))
    with pytest.raises(OptionError, match="only fixed-bucket tables"):
        d.rescale()


def test_a_commit_with_another_count_than_the_partition_is_refused(catalog: lakelog.Catalog) -> None:
    """Paimon's commit check: files of one partition must record one bucket count. A writer that
    learned a partition's count before it was rescaled cannot add files with the old count."""
    t = make(catalog)
    t.write(rows("a", range(20), "a"))
    w = t.stream_writer()
    w.write(rows("a", range(5), "w1")).commit()  # learns: a has 2 buckets
    t.rescale(buckets=4)
    w.write(rows("a", range(5, 10), "w2"))
    with pytest.raises(CommitConflictError, match=r"Total buckets of partition \{dt=a\}.* changed from 4 to 2"):
        w.commit()
    assert t.bucket_counts() == {("a",): 4}
    assert_keys_in_their_buckets(t)
    assert content(t)[("a", 7)] == "a"


def test_rescale_racing_an_append_into_its_partition_starts_again(
    catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write into the partition between the rescale's read and its commit would be overwritten:
    the rescale reads again. Writes into other partitions and compactions are not in its way."""
    from lakelog.connector.table import overwrite as ow

    t = make(catalog)
    t.write(rows("a", range(30), "a"))
    t.write(rows("b", range(30), "b"))
    calls = {"n": 0}
    real = ow._commit

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            other = catalog.get_table("db.t")
            other.write(rows("b", range(5), "b-during"))
            other.write(rows("a", range(5), "a-during"))
            other.compact(full=True)
        return real(*args, **kwargs)

    monkeypatch.setattr(ow, "_commit", racing)
    t.alter(SetOption("bucket", "3"))
    t.rescale(partitions=[{"dt": "a"}])
    assert calls["n"] == 2
    got = content(t)
    assert got[("a", 2)] == "a-during" and got[("b", 2)] == "b-during" and got[("a", 20)] == "a"
    assert t.bucket_counts() == {("a",): 3, ("b",): 2}


def test_readers_keep_reading_while_a_partition_is_rescaled(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"snapshot.num-retained.min": "5"})
    t.write(rows("a", range(3000), "a"))
    want = content(t)
    scan = t.scan()
    splits = scan.plan()
    reader = t.to_reader(max_chunksize=100)
    first = reader.read_next_batch()
    done = threading.Event()
    errors: list[BaseException] = []

    def rescale() -> None:
        try:
            catalog.get_table("db.t").rescale(buckets=7)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        done.set()

    th = threading.Thread(target=rescale)
    th.start()
    th.join(60)
    assert done.is_set() and not errors
    rest = pa.Table.from_batches([first, *reader], schema=first.schema)
    assert {(r["dt"], r["id"]): r["v"] for r in rest.to_pylist()} == want
    planned = pa.concat_tables([scan.read_split(s) for s in splits])
    assert {(r["dt"], r["id"]): r["v"] for r in planned.to_pylist()} == want
    assert content(t) == want and t.bucket_counts() == {("a",): 7}


def test_streaming_reads_skip_a_rescale_by_default(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    s1 = t.write(rows("a", range(10), "a"))
    s2 = t.write(rows("a", range(5), "b"))
    sid = t.rescale(buckets=3)
    s4 = t.write(rows("a", [1, 20], "c"))
    assert t.changes(s2, sid).num_rows == 0  # the rescale changes no row and shows none
    got = [(r["rowkind"], r["id"], r["v"]) for r in t.changes(s1, s4).to_pylist()]
    assert got == [
        ("-U", 0, "a"), ("+U", 0, "b"), ("-U", 1, "a"), ("+U", 1, "b"), ("-U", 2, "a"), ("+U", 2, "b"),
        ("-U", 3, "a"), ("+U", 3, "b"), ("-U", 4, "a"), ("+U", 4, "b"), ("-U", 1, "b"), ("+U", 1, "c"),
        ("+I", 20, "c"),
    ]


def test_streaming_read_overwrite_reads_an_overwrite_as_retract_and_insert(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"streaming-read-overwrite": "true"})
    s1 = t.write(rows("a", range(3), "a"))
    t.write(rows("b", [7], "b"))
    sid = t.overwrite(rows("a", [1, 5], "new"))
    got = sorted((r["rowkind"], r["dt"], r["id"], r["v"]) for r in t.changes(s1 + 1, sid).to_pylist())
    assert got == [
        ("+I", "a", 1, "new"), ("+I", "a", 5, "new"),
        ("-D", "a", 0, "a"), ("-D", "a", 1, "a"), ("-D", "a", 2, "a"),
    ]
    rescaled = t.rescale(buckets=4)
    got = [(r["rowkind"], r["id"]) for r in t.changes(sid, rescaled).to_pylist()]
    assert sorted(got) == [("+I", 1), ("+I", 5), ("+I", 7), ("-D", 1), ("-D", 5), ("-D", 7)]


def test_streaming_reads_skip_an_overwrite_of_an_append_table(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.app", SCHEMA, partition_by=["dt"], options={"bucket": "2", "bucket-key": "id"})
    s1 = t.write(rows("a", range(4), "a"))
    t.alter(SetOption("bucket", "3"))
    sid = t.rescale()
    s3 = t.write(rows("a", [9], "n"))
    assert t.changes(s1, sid).num_rows == 0
    assert [(r["rowkind"], r["id"]) for r in t.changes(s1, s3).to_pylist()] == [("+I", 9)]
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [0, 1, 2, 3, 9]
    assert_keys_in_their_buckets(t)


def test_overwrite_dynamic_partitions(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(pa.concat_tables([rows("a", range(5), "a"), rows("b", range(5), "b")]))
    sid = t.overwrite(rows("a", [1, 9], "new"))
    snap = t.snapshot(sid)
    assert snap.commit_kind == "OVERWRITE" and snap.delta_record_count == 2 - 5 and snap.total_record_count == 7
    assert content(t) == {("a", 1): "new", ("a", 9): "new"} | {("b", i): "b" for i in range(5)}
    assert t.overwrite(rows("a", [], "")) is None  # no rows: no snapshot, nothing replaced
    assert t.overwrite(rows("b", [], ""), partition={"dt": "b"}) is None
    assert t.latest_snapshot().id == sid


def test_overwrite_static_partitions(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-partition-overwrite": "false"})
    t.write(pa.concat_tables([rows("a", range(5), "a"), rows("b", range(5), "b")]))
    # rows lacking the partition column take the spec's value
    sid = t.overwrite(pa.table({"id": [3], "v": ["x"]}), partition={"dt": "a"})
    assert content(t) == {("a", 3): "x"} | {("b", i): "b" for i in range(5)}
    with pytest.raises(InvalidInputError, match="dt='a'.*dt='b'"):
        t.overwrite(rows("b", [1], "x"), partition={"dt": "a"})
    # an empty static overwrite empties the partition; without a spec, the whole table
    sid = t.overwrite(rows("b", [], ""), partition={"dt": "b"})
    assert t.snapshot(sid).commit_kind == "OVERWRITE" and content(t) == {("a", 3): "x"}
    sid = t.overwrite(rows("c", [1], "c"))
    assert content(t) == {("c", 1): "c"} and t.snapshot(sid).total_record_count == 1


def test_overwrite_rescales_the_partitions_it_writes(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(30), "a"))
    t.alter(SetOption("bucket", "5"))
    t.overwrite(rows("a", range(10), "o"))
    assert t.bucket_counts() == {("a",): 5}
    assert content(t) == {("a", i): "o" for i in range(10)}
    assert_keys_in_their_buckets(t)


def test_overwrite_of_an_unpartitioned_table_replaces_it(catalog: lakelog.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = catalog.create_table("db.u", schema, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    t.overwrite(pa.table({"id": [9], "v": ["z"]}, schema=schema))
    assert t.to_arrow().to_pylist() == [{"id": 9, "v": "z"}]
    t.overwrite(schema.empty_table())  # unpartitioned: static, so an empty overwrite truncates
    assert t.to_arrow().num_rows == 0


def test_rescale_keeps_aggregated_values(catalog: lakelog.Catalog) -> None:
    schema = pa.schema(
        [pa.field("k", pa.int64(), False), ("s", pa.int64()), ("c", pa.int64()), ("l", pa.string()),
         ("m", pa.int64())]
    )
    t = catalog.create_table("db.agg", schema, primary_key=["k"], options={
        "bucket": "2", "merge-engine": "aggregation", "fields.s.aggregate-function": "sum",
        "fields.c.aggregate-function": "count", "fields.l.aggregate-function": "listagg",
        "fields.m.aggregate-function": "max",
    })
    for i in range(3):
        t.write(pa.table({"k": [1, 2], "s": [i, 10], "c": [1, 1], "l": [f"x{i}", "y"], "m": [i, -i]}, schema=schema))
    before = sorted(t.to_arrow().to_pylist(), key=lambda r: r["k"])
    t.rescale(buckets=5)
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["k"]) == before
    t.write(pa.table({"k": [1], "s": [100], "c": [1], "l": ["z"], "m": [0]}, schema=schema))
    row = next(r for r in t.to_arrow().to_pylist() if r["k"] == 1)
    assert row["s"] == before[0]["s"] + 100 and row["l"] == before[0]["l"] + ",z"


def test_expire_and_orphan_cleanup_after_a_rescale(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(50), "a"))
    want = content(t)
    t.rescale(buckets=3)
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    import os

    old_dirs = [d for d in os.listdir(os.path.join(t.path, "dt=a")) if d.startswith("bucket-")]
    files = {os.path.basename(f["file_path"]) for f in t.files().to_pylist()}
    on_disk = {n for d in old_dirs for n in os.listdir(os.path.join(t.path, "dt=a", d)) if n.endswith(".parquet")}
    assert on_disk == files  # the 2-bucket files went with the expired snapshot
    assert t.remove_orphan_files(older_than_seconds=0) == []
    assert content(t) == want


def test_cli_rescale(catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    t = make(catalog)
    t.write(pa.concat_tables([rows("a", range(10), "a"), rows("b", range(10), "b")]))
    t.alter(SetOption("bucket", "4"))
    assert cli(["--warehouse", warehouse, "rescale", "--table", "db.t", "--partition", "dt=a"]) == 0
    out = capsys.readouterr().out
    assert "dt=a: 2 -> 4 buckets" in out and "OVERWRITE" in out
    assert cli(["--warehouse", warehouse, "rescale", "db.t"]) == 0
    assert "dt=b: 2 -> 4" in capsys.readouterr().out
    assert cli(["--warehouse", warehouse, "rescale", "db.t"]) == 0
    assert "nothing to rescale" in capsys.readouterr().out
    assert cli(["--warehouse", warehouse, "rescale", "db.t", "--partition", "dt"]) == 2
    assert cli(["--warehouse", warehouse, "rescale", "db.t", "--partition", "dt=zz"]) == 2
    assert "holds no data files" in capsys.readouterr().err
    assert catalog.get_table("db.t").bucket_counts() == {("a",): 4, ("b",): 4}


def test_rescale_of_an_unpartitioned_table(catalog: lakelog.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = catalog.create_table("db.u", schema, primary_key=["id"], options={"bucket": "3"})
    t.write(pa.table({"id": list(range(100)), "v": ["a"] * 100}, schema=schema))
    t.alter(SetOption("bucket", "7"))
    t.write(pa.table({"id": [5, 500], "v": ["b", "b"]}, schema=schema))  # still 3 buckets
    assert t.bucket_counts() == {(): 3}
    sid = t.rescale()
    assert t.snapshot(sid).commit_kind == "OVERWRITE" and t.bucket_counts() == {(): 7}
    got = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert len(got) == 101 and got[5] == "b" and got[500] == "b" and got[6] == "a"
    assert_keys_in_their_buckets(t)
