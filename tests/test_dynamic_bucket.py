"""Dynamic bucket mode (``bucket = -1`` on a primary-key table): Paimon's hash index files, the
index manifest of every snapshot, assignment, concurrent writers, expiration and the API the Flink
sink builds on (assigner routing, picklable state, rows with buckets)."""

from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError
from lakelog.connector.format.index_file import HASH_INDEX, read_hash_index
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.dynamic_bucket import DynamicBucketAssigner, assigner_of, key_hashes
from lakelog.connector.table.write import TableWrite

from .buckets_util import assert_keys_in_their_buckets

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def make(catalog: lakelog.Catalog, name: str = "db.d", **options: str) -> lakelog.Table:
    return catalog.create_table(
        name, SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "-1", **options}
    )


def buckets_of(t: lakelog.Table, snapshot_id: Any = None) -> dict[tuple[str, int], list[int]]:
    """{(dt, bucket): sorted ids whose hash that bucket's HASH file holds}."""
    store = t.store
    snap = t.resolve_snapshot(snapshot_id)
    by_hash = {}
    for r in t.to_arrow(snapshot_id=snap.id).to_pylist():
        by_hash[(r["dt"], int(key_hashes(store, rows(r["dt"], [r["id"]], ""))[0]))] = r["id"]
    out: dict[tuple[str, int], list[int]] = {}
    for e in store.index_entries(snap):
        dt = store.partition_values(e.partition)[0]
        hashes = read_hash_index(store.file_io, store.index_file_path(e)).tolist()
        out[(dt, e.bucket)] = sorted(by_hash[(dt, h)] for h in hashes if (dt, h) in by_hash)
    return out


def content(t: lakelog.Table, **scan: Any) -> dict[tuple[str, int], str]:
    return {(r["dt"], r["id"]): r["v"] for r in t.to_arrow(**scan).to_pylist()}


def test_assignment_of_paimon_worked_example(catalog: lakelog.Catalog) -> None:
    """The example pypaimon 2.1 produced (dynamic-bucket.md): target 3 keys a bucket."""
    t = make(catalog, **{"dynamic-bucket.target-row-num": "3"})
    s1 = t.write(rows("a", range(7), "x"))
    assert buckets_of(t) == {("a", 0): [0, 1, 2], ("a", 1): [3, 4, 5], ("a", 2): [6]}
    first = {(e.partition, e.bucket): e.index_file.file_name for e in t.store.index_entries(t.snapshot(s1))}
    t.write(pa.concat_tables([rows("a", range(5, 10), "y"), rows("b", [1], "b1")]))
    assert buckets_of(t) == {
        ("a", 0): [0, 1, 2], ("a", 1): [3, 4, 5], ("a", 2): [6, 7, 8], ("a", 3): [9], ("b", 0): [1]
    }
    entries = t.store.index_entries(t.latest_snapshot())
    assert len(entries) == 5 and {e.index_file.index_type for e in entries} == {HASH_INDEX}
    reused = {(e.partition, e.bucket) for e in entries if first.get((e.partition, e.bucket)) == e.index_file.file_name}
    assert {b for _, b in reused} == {0, 1}  # buckets 0 and 1 of 'a' got no new key: same files
    for e in entries:  # HASH file: 4 bytes a hash, row count = hashes
        assert e.index_file.file_size == 4 * e.index_file.row_count
        assert os.path.getsize(t.store.index_file_path(e)) == e.index_file.file_size
    assert t.files().column("bucket").to_pylist()  # data files live in bucket-N as in fixed mode
    assert {f["partition"] for f in t.files().to_pylist()} == {"{a}", "{b}"}
    assert_keys_in_their_buckets(t)


def test_existing_keys_stay_where_they_are(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "50"})
    rng = np.random.default_rng(3)
    expected: dict[tuple[str, int], str] = {}
    where: dict[int, int] = {}
    for step in range(8):
        ids = rng.choice(400, 60, replace=False)
        t.write(rows("a", ids.tolist(), f"s{step}"))
        expected |= {("a", int(i)): f"s{step}" for i in ids}
        if step % 3 == 2:
            gone = rng.choice(sorted(i for _, i in expected), 10, replace=False)
            t.delete(rows("a", gone.tolist(), ""))
            for i in gone:
                expected.pop(("a", int(i)))
        for b, ids_ in buckets_of(t).items():
            for i in ids_:
                assert where.setdefault(i, b[1]) == b[1], f"key {i} moved from bucket {where[i]} to {b[1]}"
    assert content(t) == expected
    sizes = [e.index_file.row_count for e in t.store.index_entries(t.latest_snapshot())]
    assert max(sizes) <= 50 and sum(sizes) >= len(expected)  # deleted keys keep their place too
    assert_keys_in_their_buckets(t)


def test_max_buckets_caps_a_partition(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "2", "dynamic-bucket.max-buckets": "3"})
    t.write(rows("a", range(20), "x"))
    t.write(rows("a", range(20, 30), "y"))
    assert {b for (_, b) in buckets_of(t)} == {0, 1, 2}
    assert len(content(t)) == 30
    assert_keys_in_their_buckets(t)


def test_initial_buckets_spread_new_keys_over_assigners(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.initial-buckets": "3"})
    t.write(rows("a", range(30), "x"))
    got = buckets_of(t)
    assert {b for (_, b) in got} == {0, 1, 2}
    store = t.store
    part = store.index_entries(t.latest_snapshot())[0].partition
    from lakelog.connector.table.dynamic_bucket import partition_hash

    for (_, b), ids in got.items():
        hashes = key_hashes(store, rows("a", ids, ""))
        channel = assigner_of(partition_hash(part), hashes, 3, 3)
        assert set((channel % 3).tolist()) == {b % 3}  # Paimon's residue classes
    assert_keys_in_their_buckets(t)


def test_commits_without_index_changes_keep_the_index_manifest(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    s1 = t.write(rows("a", range(10), "x"))
    s2 = t.write(rows("a", range(5), "y"))  # known keys only: no new hash file
    s3 = t.compact(full=True)
    s4 = t.delete(rows("a", [1], ""))
    names = {sid: t.snapshot(sid).index_manifest for sid in (s1, s2, s3, s4)}
    assert names[s1] and len(set(names.values())) == 1
    s5 = t.write(rows("a", [77], "new"))
    assert t.snapshot(s5).index_manifest != names[s1]
    assert content(t, snapshot_id=s1) == {("a", i): "x" for i in range(10)}


def test_expiration_and_orphan_cleanup_keep_exactly_the_live_index(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "4"})
    for step in range(5):
        t.write(rows("a", range(step * 3, step * 3 + 6), f"v{step}"))
    t.create_tag("keep", 2)
    tagged = {e.index_file.file_name for e in t.store.index_entries(t.snapshot(2))}
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    live = {e.index_file.file_name for e in t.store.index_entries(t.latest_snapshot())}
    assert set(os.listdir(os.path.join(t.path, "index"))) == live | tagged
    manifests = {n for n in os.listdir(os.path.join(t.path, "manifest")) if n.startswith("index-manifest-")}
    assert manifests == {t.latest_snapshot().index_manifest, t.store.tag_manager.get("keep").index_manifest}
    assert t.remove_orphan_files(older_than_seconds=0) == []
    assert content(t, tag="keep") == content(catalog.get_table("db.d"), tag="keep")
    t.delete_tag("keep")  # its files are orphans now (as its data files): orphan cleanup takes them
    t.write(rows("a", [100], "n"))
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    removed = t.remove_orphan_files(older_than_seconds=0)
    live = {e.index_file.file_name for e in t.store.index_entries(t.latest_snapshot())}
    assert set(os.listdir(os.path.join(t.path, "index"))) == live
    assert {os.path.basename(p) for p in removed if "/index/" in p} == tagged - live
    assert_keys_in_their_buckets(t)


def test_writers_of_one_partition_with_different_keys_merge_their_index(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "100"})
    t.write(rows("a", range(5), "base"))
    with t.stream_writer() as w:
        w.write(rows("a", range(100, 110), "stream"))
        w._write.flush()  # its view of the index is loaded now
        catalog.get_table("db.d").write(rows("a", range(200, 210), "other"))  # same bucket 0
        w.commit()
        assert w._commit.index_merged
        w.write(rows("a", [200, 300], "stream2")).commit()
    got = content(t)
    assert got[("a", 105)] == "stream" and got[("a", 205)] == "other" and got[("a", 200)] == "stream2"
    assert len(got) == 26
    assert_keys_in_their_buckets(t)


def test_writers_placing_one_new_key_in_two_buckets_conflict(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "2"})
    t.write(rows("a", [0], "base"))  # bucket 0 has room for one more
    w = t.stream_writer()
    w.write(rows("a", [42], "stream"))
    w._write.flush()  # 42 -> bucket 0
    catalog.get_table("db.d").write(rows("a", [5, 6, 42], "other"))  # 5 fills bucket 0; 6, 42 -> bucket 1
    with pytest.raises(CommitConflictError, match=r"bucket 0 by this writer and in bucket 1 by another"):
        w.commit()
    assert content(t)[("a", 42)] == "other"
    assert_keys_in_their_buckets(t)
    with t.stream_writer() as w2:  # a new writer loads the index again and goes on
        w2.write(rows("a", [42, 7], "again")).commit()
    assert content(t)[("a", 42)] == "again"
    assert_keys_in_their_buckets(t)


def test_stream_writer_reloads_its_view_after_others_commit(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "3"})
    other = catalog.get_table("db.d")
    with t.stream_writer() as w:
        for step in range(6):
            w.write(rows("a", [step, 10 + step], "w")).commit()
            other.write(rows("a", [10 + step, 20 + step], "o"))  # a key the writer wrote, and a new one
            w.write(rows("a", [20 + step], "w")).commit()  # a key the other writer placed
    got = content(t)
    assert all(got[("a", 20 + s)] == "w" and got[("a", 10 + s)] == "o" for s in range(6))
    assert_keys_in_their_buckets(t)


def test_overwrite_resets_the_index_of_its_partitions(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "3"})
    t.write(pa.concat_tables([rows("a", range(12), "a"), rows("b", range(4), "b")]))
    b_files = {e.index_file.file_name for e in t.store.index_entries(t.latest_snapshot()) if e.bucket >= 0
               and t.store.partition_values(e.partition) == ("b",)}
    sid = t.overwrite(rows("a", [100, 101], "o"))
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    got = buckets_of(t)
    assert {k: v for k, v in got.items() if k[0] == "a"} == {("a", 0): [100, 101]}
    entries = t.store.index_entries(t.latest_snapshot())
    assert {e.index_file.file_name for e in entries if t.store.partition_values(e.partition) == ("b",)} == b_files
    assert content(t) == {("a", 100): "o", ("a", 101): "o"} | {("b", i): "b" for i in range(4)}
    t.write(rows("a", [5], "later"))
    assert buckets_of(t)[("a", 0)] == [5, 100, 101]
    assert_keys_in_their_buckets(t)


def test_a_table_made_with_the_paimon_default_is_writable(catalog: lakelog.Catalog, warehouse: str) -> None:
    """A primary-key table created without a bucket by Paimon's connectors has bucket -1 (its
    default): lakelog writes it. lakelog's own default stays 1 (a documented divergence)."""
    from lakelog.connector.format.schema import TableSchema
    from lakelog.connector.format.schema_manager import SchemaManager

    path = os.path.join(warehouse, "db.db", "p")
    schema = TableSchema.create(SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options={})
    SchemaManager(lakelog.Catalog(warehouse).file_io, path).create_table(schema)
    t = catalog.get_table("db.p")
    assert t.options == {} and t.store.schema.bucket_mode == "HASH_DYNAMIC"
    t.write(rows("a", range(10), "x"))
    assert len(content(t)) == 10
    assert catalog.create_table("db.mine", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"]).options == {
        "bucket": "1"
    }


# ---- the API a Flink sink builds on -----------------------------------------------------------------


def test_assigner_routing_and_residues_follow_paimon() -> None:
    hashes = np.array([-7, 0, 5, 2**31 - 1, -(2**31)], dtype=np.int32)
    # channel = (abs(partHash % channels) + abs(keyHash % assigners)) % channels, Java remainders
    got = assigner_of(-11, hashes, 4, 3)
    # Java: -11 % 4 == -3, so the partition's first channel is 3; -7 % 3 == -1, so key -7 goes to +1
    want = [(3 + abs(int(np.fmod(h, 3)))) % 4 for h in hashes.tolist()]
    assert want[0] == (3 + 1) % 4
    assert got.tolist() == want


def test_assigner_subtasks_and_picklable_state(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "4"})
    t.write(rows("a", range(6), "x"))
    store = t.store
    part = store.index_entries(t.latest_snapshot())[0].partition
    from lakelog.connector.table.dynamic_bucket import partition_hash

    batch = rows("a", range(100, 140), "y")
    hashes = key_hashes(store, batch)
    channels = assigner_of(partition_hash(part), hashes, 2, 2)
    subtasks = [
        DynamicBucketAssigner(store, num_assigners=2, assign_id=i, num_channels=2, keep_state=True) for i in range(2)
    ]
    buckets = np.empty(len(hashes), np.int32)
    for i, a in enumerate(subtasks):
        mine = channels == i
        buckets[mine] = a.assign(part, hashes[mine])
        assert set((buckets[mine][np.isin(buckets[mine], [0, 1])] % 2).tolist()) <= {0, 1}
    with pytest.raises(lakelog.LakelogError, match="route rows with assigner_of"):
        subtasks[0].assign(part, hashes[channels == 1])
    # each subtask holds only the hashes routed to it (as Paimon's): together, the whole index
    whole = DynamicBucketAssigner(store).index(part).size + len(np.unique(hashes))
    assert 0 < subtasks[0].index(part).size < whole
    assert subtasks[0].index(part).size + subtasks[1].index(part).size == whole
    # a subtask restarted from its checkpointed state places its uncommitted keys where they were
    state = pickle.loads(pickle.dumps(subtasks[1].state()))
    again = DynamicBucketAssigner.restore(pickle.loads(pickle.dumps(store)), state, num_assigners=2, assign_id=1,
                                          num_channels=2)
    assert (again.assign(part, hashes[channels == 1]) == buckets[channels == 1]).all()
    assert pickle.loads(pickle.dumps(subtasks[0])).assign(part, hashes[:0]).tolist() == []
    # writers keyed by (partition, bucket) write rows with their buckets; one commit publishes all
    writers: dict[int, TableWrite] = {}
    for b in np.unique(buckets).tolist():
        w = writers[b] = TableWrite(store)
        sel = buckets == b
        w.write_bucketed(batch.filter(pa.array(sel)), buckets[sel])
    msgs = [m for w in writers.values() for m in w.prepare_commit()]
    assert all(m.index_files for m in msgs)
    TableCommit(store).commit(msgs)
    for a in subtasks + [again]:
        a.prune_committed()
        assert a.state().assigned == {} or all(len(h) == 0 for h, _ in a.state().assigned.values())
    assert len(content(t)) == 46
    assert_keys_in_their_buckets(t)


def test_hash_grouping_refuses_tables_that_need_an_assigner(catalog: lakelog.Catalog) -> None:
    """The Flink sink's grouping stage hashes bucket keys (bucket_groups): for dynamic buckets and
    cross-partition keys it must refuse instead of routing keys by a hash the table does not use."""
    from lakelog.connector.table.routing import bucket_groups

    d = make(catalog)
    x = catalog.create_table("db.x", SCHEMA, primary_key=["id"], partition_by=["dt"], options={"bucket": "2"})
    for t in (d, x):
        with pytest.raises(lakelog.LakelogError, match="assigner"):
            bucket_groups(t.store, rows("a", [1], "x"))


def test_an_update_only_commit_still_names_its_buckets_index(catalog: lakelog.Catalog) -> None:
    """A commit writing only known keys adds no hash; its messages must still name the HASH file
    its rows were placed by, so that a rescale or overwrite of the partition in between is caught."""
    t = make(catalog, **{"dynamic-bucket.target-row-num": "2"})
    t.write(rows("a", range(6), "v1"))
    with t.stream_writer() as w:
        w.write(rows("a", [4], "v2"))
        w._write.flush()
        catalog.get_table("db.d").overwrite(rows("a", [7, 8, 9, 4], "ow"))  # 4 now in another bucket
        with pytest.raises(CommitConflictError, match="rewritten"):
            w.commit()
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {7: "ow", 8: "ow", 9: "ow", 4: "ow"}
    assert_keys_in_their_buckets(t)


def test_one_commit_takes_several_flushes_of_a_writer(catalog: lakelog.Catalog) -> None:
    """A Flink committer commits every committable a checkpoint released in one commit: a writer's
    consecutive flushes, each message's index base the file of the flush before. The last file of
    each bucket goes live; the ones in between are deleted; a chain on top of another writer's
    additions is merged."""
    t = make(catalog, **{"dynamic-bucket.target-row-num": "4"})
    t.write(rows("a", range(3), "base"))
    w = TableWrite(t.store)
    flushes = []
    for step in range(3):  # 3 flushes growing bucket 0 then 1, 2 ... before any commit
        w.write(rows("a", range(3 + step * 3, 6 + step * 3), f"s{step}"))
        flushes.append(w.prepare_commit(wait_compaction=True))
    by_bucket: dict[int, list[Any]] = {}
    for msgs in flushes:
        for m in msgs:
            by_bucket.setdefault(m.bucket, []).append(m)
    assert any(len(ms) > 1 and ms[1].index_base == ms[0].index_files[0].file_name for ms in by_bucket.values())
    catalog.get_table("db.d").write(rows("b", [1], "other partition"))  # news in another partition only
    written = {f.file_name for msgs in flushes for m in msgs for f in m.index_files}
    commit = TableCommit(t.store, "flink")
    commit.commit([m for msgs in flushes for m in msgs], 1)
    live = {e.index_file.file_name for e in t.store.index_entries(t.latest_snapshot())}
    index_dir = set(os.listdir(os.path.join(t.path, "index")))
    assert index_dir == referenced(t)  # the files in between are gone, nothing else is
    assert written - live and not (written - live) & index_dir
    assert content(t) == {**{("a", i): "base" for i in range(3)},
                          **{("a", i): f"s{(i - 3) // 3}" for i in range(3, 12)}, ("b", 1): "other partition"}
    assert_keys_in_their_buckets(t)
    # two flushes on top of another writer's additions to the same bucket: merged once, in order
    w.write(rows("a", [100], "x"))
    first = w.prepare_commit(wait_compaction=True)
    w.write(rows("a", [101], "y"))
    second = w.prepare_commit(wait_compaction=True)
    catalog.get_table("db.d").write(rows("a", [200], "other writer"))
    commit.commit(first + second, 2)
    assert commit.index_merged
    got = content(t)
    assert got[("a", 100)] == "x" and got[("a", 101)] == "y" and got[("a", 200)] == "other writer"
    assert set(os.listdir(os.path.join(t.path, "index"))) == referenced(t)
    assert_keys_in_their_buckets(t)


def referenced(t: lakelog.Table) -> set[str]:
    """The index files some snapshot of ``t`` lists."""
    sm = t.store.snapshot_manager
    return {
        e.index_file.file_name
        for sid in range(1, (sm.latest_id() or 0) + 1)
        for e in t.store.index_entries(sm.snapshot(sid))
    }
