"""Deletion vectors (``'deletion-vectors.enabled' = 'true'``): merge-on-write primary-key tables.

The bytes (Roaring bitmaps, bins, index files) against pyroaring's CRoaring; what a table does with
them: compactions mark superseded rows instead of rewriting files, reads open each file alone, every
snapshot reads as committed, vectors follow snapshots through expiration, tags and orphan cleanup,
racing compactions never lose a mark, and bad input or damaged files fail naming what is wrong.
The engines and producers with deletion vectors: tests/test_engine_model.py; the table model:
tests/test_model.py; Paimon's readers and writers: tests/test_interop_*.py.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError, LakelogError, MissingFileError, OptionError
from lakelog.connector.format.deletion_vectors import (
    MAGIC_32,
    MAGIC_64,
    decode_bin,
    decode_roaring32,
    encode_bin,
    encode_index_file,
    encode_roaring32,
    read_deletion_vector,
)
from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.compaction import compact_split
from lakelog.connector.table.scan import plan_splits

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())])
DV = {"bucket": "1", "deletion-vectors.enabled": "true"}


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids), "n": ids}, schema=SCHEMA)


def keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids}, schema=pa.schema([pa.field("id", pa.int64(), False)]))


def content(t: lakelog.Table, **kw: object) -> dict[int, str]:
    return {r["id"]: r["v"] for r in t.to_arrow(**kw).to_pylist()}  # type: ignore[arg-type]


def vector_entries(t: lakelog.Table) -> list:  # type: ignore[type-arg]
    snap = t.latest_snapshot()
    return [e for e in t.store.index_entries(snap) if e.index_file.index_type == DELETION_VECTORS_INDEX]


# ---- the bytes ----------------------------------------------------------------------------------------
def test_roaring_bitmaps_are_what_croaring_reads_and_writes() -> None:
    """Our portable Roaring serialization is read by CRoaring (pyroaring), and we read CRoaring's,
    run containers included (Java's writer run-optimises 64-bit vectors)."""
    pyroaring = pytest.importorskip("pyroaring")
    rng = np.random.default_rng(7)
    for trial in range(60):
        hi = int(rng.choice([50, 70_000, 1 << 20, (1 << 31) - 1]))
        pos = np.unique(rng.integers(0, hi, int(rng.integers(0, 30_000)))).astype(np.uint64)
        ours = encode_roaring32(pos)
        assert list(pyroaring.BitMap.deserialize(ours)) == pos.tolist(), trial
        theirs = pyroaring.BitMap(pos.astype(np.uint32).tolist())
        theirs.add_range(3_000_000, 3_070_000)  # a long run: a run container once optimised
        theirs.run_optimize()
        got, used = decode_roaring32(theirs.serialize(), "x")
        assert used == len(theirs.serialize()) and got.tolist() == list(theirs), trial


@pytest.mark.parametrize("bitmap64", [False, True], ids=["32-bit", "64-bit"])
def test_bins_round_trip_with_the_length_paimon_records(bitmap64: bool) -> None:
    pos = np.array([0, 1, 5, 70_000, 2**31 - 1] + ([2**33 + 3] if bitmap64 else []), dtype=np.uint64)
    blob, length = encode_bin(pos, bitmap64=bitmap64)
    (size,) = struct.unpack_from(">i", blob, 0)
    if bitmap64:  # Paimon's 64-bit writer counts the size and CRC fields in
        assert struct.unpack_from("<i", blob, 4)[0] == MAGIC_64 and length == size + 8
    else:
        assert struct.unpack_from(">i", blob, 4)[0] == MAGIC_32 and length == size
    assert decode_bin(blob, 0, length, "f").tolist() == pos.tolist()
    data, metas = encode_index_file({"a.parquet": pos, "b.parquet": pos[:2], "empty": pos[:0]}, bitmap64=bitmap64)
    assert [m.data_file for m in metas] == ["a.parquet", "b.parquet"]
    assert data[0] == 1 and metas[0].offset == 1 and metas[1].cardinality == 2
    assert read_deletion_vector(data, metas[1], "f").tolist() == [0, 1]
    with pytest.raises(ValueError, match="bitmap64"):
        encode_bin(np.array([2**31], dtype=np.uint64), bitmap64=False)


def test_damaged_bins_are_refused_naming_the_file() -> None:
    data, metas = encode_index_file({"a": np.arange(10, dtype=np.uint64)}, bitmap64=False)
    m = metas[0]
    flipped = bytearray(data)
    flipped[m.offset + 12] ^= 0xFF
    with pytest.raises(CorruptFileError, match="index-x.*checksum"):
        read_deletion_vector(bytes(flipped), m, "index-x")
    with pytest.raises(CorruptFileError, match="cut short"):
        read_deletion_vector(data[:-6], m, "index-x")
    wrong = type(m)(m.data_file, m.offset, m.length, 11)
    with pytest.raises(CorruptFileError, match="holds 10 positions; its index entry says 11"):
        read_deletion_vector(data, wrong, "index-x")
    with pytest.raises(CorruptFileError, match="version"):
        read_deletion_vector(b"\x02" + data[1:], m, "index-x")


# ---- tables -------------------------------------------------------------------------------------------
def test_updates_mark_rows_instead_of_rewriting_the_files_above(catalog: lakelog.Catalog) -> None:
    """After a full compaction the bucket is one big file at the top level. Updating a few keys
    commits a small file and marks the updated keys' old positions: the big file stays live and
    unchanged, and reads return the new values once each."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(list(range(10_000))))
    t.compact(full=True)
    big = {f.file_name for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files}
    t.write(rows([5, 77, 9_999], "new"))
    t.delete(keys([6]))
    live = [f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files]
    assert big <= {f.file_name for f in live}  # the big file was not rewritten
    (entry,) = vector_entries(t)
    ranges = {r["f0"]: r["_CARDINALITY"] for r in entry.index_file.dv_ranges}
    assert ranges == {next(iter(big)): 4}  # 5, 77, 9999 updated; 6 deleted
    got = t.to_arrow()
    assert got.num_rows == 9_999 and sorted(got.column("id").to_pylist()) == [i for i in range(10_000) if i != 6]
    c = content(t)
    assert c[5] == c[77] == c[9_999] == "new" and c[4] == "x"



def test_a_new_file_moves_up_as_it_is_unless_it_holds_a_retraction(catalog: lakelog.Catalog) -> None:
    """A commit's level-0 file of distinct keys and no retraction is moved above level 0 without
    a rewrite (its name stays), its keys' older rows marked; a file holding a delete is rewritten,
    so that no file above level 0 holds a retraction (Paimon's readers rely on that)."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(list(range(100))))
    t.write(rows([3, 4, 200], "new"))
    commit_files = {e.file.file_name for e in t.store.delta_entries(t.store.snapshot_manager.snapshot(3))
                    if e.file.level == 0}
    live = [f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files]
    assert commit_files and commit_files <= {f.file_name for f in live if f.level > 0}  # moved, not rewritten
    t.delete(keys([5]))
    delete_files = {e.file.file_name for e in t.store.delta_entries(t.store.snapshot_manager.snapshot(5))
                    if e.file.level == 0}
    live = [f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files]
    assert delete_files and not delete_files & {f.file_name for f in live}  # rewritten without the -D
    assert all(f.level > 0 and f.delete_row_count == 0 for f in live)
    for f in live:
        kinds = pq_kinds(t, f)
        assert set(kinds) <= {0}, f"{f.file_name} holds row kinds {set(kinds)}"
    c = content(t)
    assert len(c) == 100 and 5 not in c and c[3] == c[4] == c[200] == "new" and c[6] == "x"


def pq_kinds(t: lakelog.Table, f: object) -> list[int]:
    import pyarrow.parquet as pq

    path = t.store.data_file_path(b"", 0, f.file_name, None)  # type: ignore[attr-defined]
    return pq.read_table(path, columns=["_VALUE_KIND"]).column(0).to_pylist()

def test_a_value_filter_skips_files_because_no_merge_is_needed(catalog: lakelog.Catalog) -> None:
    """Merge-on-read cannot skip a file by a value column (a newer version elsewhere may change
    the value); with deletion vectors each file is read alone, so value statistics prune."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    for i in range(4):
        t.write(rows(list(range(i * 100, i * 100 + 100)), f"w{i}"))
    expr = pa.compute.field("n") >= 350
    files = [f for s in plan_splits(t.store, t.latest_snapshot(), filter=expr) for f in s.files if f.level > 0]
    assert 0 < len(files) < len([f for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files])
    assert sorted(t.to_arrow(filter=expr).column("id").to_pylist()) == list(range(350, 400))


def test_every_snapshot_reads_as_committed_paimon_readers_wait_for_the_compaction(
    catalog: lakelog.Catalog, warehouse: str
) -> None:
    """A commit makes an APPEND snapshot (the new level-0 file) and a COMPACT one (it pushed up and
    marked). lakelog reads the APPEND snapshot as committed (level 0 merged on read); Paimon's
    readers skip level 0, so they see the rows from the COMPACT snapshot on."""
    from tests.interop_util import pp_read

    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows([1, 2, 3]))
    t.write(rows([2], "two"))
    kinds = [(s.id, s.commit_kind) for s in t.snapshots()]
    assert kinds == [(1, "APPEND"), (2, "COMPACT"), (3, "APPEND"), (4, "COMPACT")]
    assert content(t, snapshot_id=3) == content(t, snapshot_id=4) == {1: "x", 2: "two", 3: "x"}
    assert content(t, snapshot_id=1) == {1: "x", 2: "x", 3: "x"}
    assert {r["id"]: r["v"] for r in pp_read(warehouse, "db.t", snapshot_id=3).to_pylist()} == {
        1: "x", 2: "x", 3: "x"
    }
    assert {r["id"]: r["v"] for r in pp_read(warehouse, "db.t").to_pylist()} == content(t)


def test_write_only_writers_rows_are_read_before_the_compaction_job_runs(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options={**DV, "write-only": "true"})
    t.write(rows(list(range(50))))
    t.write(rows([3, 4], "new"))
    assert all(f.level == 0 for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files)
    assert content(t)[3] == "new" and len(content(t)) == 50
    sid = t.compact(full=False)  # the compaction job's pass: level 0 goes up, marks are made
    assert sid is not None and t.latest_snapshot().commit_kind == "COMPACT"
    assert all(f.level > 0 for s in plan_splits(t.store, t.latest_snapshot()) for f in s.files)
    assert content(t)[3] == "new" and len(content(t)) == 50


def test_bitmap64_vectors_carry_the_64_bit_magic(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.t", SCHEMA, primary_key=["id"], options={**DV, "deletion-vectors.bitmap64": "true"}
    )
    t.write(rows(list(range(100))))
    t.compact(full=True)
    t.write(rows([1, 2], "new"))
    (entry,) = vector_entries(t)
    data = t.store.file_io.read_bytes(t.store.index_file_path(entry))
    first = entry.index_file.dv_ranges[0]
    assert struct.unpack_from("<i", data, first["f1"] + 4)[0] == MAGIC_64
    assert content(t)[1] == "new" and len(content(t)) == 100


@pytest.mark.parametrize(
    "options,primary_key,fragments",
    [
        ({"merge-engine": "first-row"}, ["id"], ["first-row", "nothing to mark"]),
        ({"changelog-producer": "full-compaction"}, ["id"], ["'full-compaction'", "'lookup'"]),
        ({"deletion-vectors.enabled": "maybe"}, ["id"], ["'deletion-vectors.enabled'", "'maybe'"]),
    ],
    ids=["first-row", "full-compaction", "malformed"],
)
def test_combinations_paimon_refuses_are_refused_naming_them(
    catalog: lakelog.Catalog, options: dict[str, str], primary_key: list[str] | None, fragments: list[str]
) -> None:
    with pytest.raises(OptionError) as e:
        catalog.create_table("db.t", SCHEMA, primary_key=primary_key, options={**DV, **options})
    for f in fragments:
        assert f in str(e.value), e.value
    assert not catalog.table_exists("db.t")


def test_the_mode_is_fixed_when_the_table_is_created(catalog: lakelog.Catalog) -> None:
    """Switching an existing table's mode would leave levels whose keys overlap without marks."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    t.write(rows([1]))
    with pytest.raises(LakelogError, match="deletion-vectors.enabled"):
        t.alter(lakelog.SetOption("deletion-vectors.enabled", "true"))
    assert content(t) == {1: "x"}


def test_a_damaged_or_missing_vector_file_fails_the_read_naming_it(catalog: lakelog.Catalog) -> None:
    """Never a silent read of the rows a vector deletes."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(list(range(100))))
    t.compact(full=True)
    t.write(rows([1], "new"))
    (entry,) = vector_entries(t)
    path = t.store.index_file_path(entry)
    data = bytearray(Path(path).read_bytes())
    data[8] ^= 0x55
    Path(path).write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=os.path.basename(path)):
        t.to_arrow()
    os.remove(path)
    with pytest.raises(MissingFileError, match=os.path.basename(path)):
        catalog.get_table("db.t").to_arrow()


def test_vectors_follow_snapshots_through_expiration_tags_and_orphan_cleanup(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(list(range(200))))
    t.compact(full=True)
    for i in range(6):
        t.write(rows([i, 100 + i], f"w{i}"))
        if i == 1:
            t.create_tag("mid")
    want, tagged = content(t), content(t, tag="mid")
    index_dir = Path(t.store.index_dir)
    t.expire_snapshots(retain_max=2, retain_min=1)
    live = {e.index_file.file_name for s in t.snapshots() for e in t.store.index_entries(s)}
    live |= {e.index_file.file_name for e in t.store.index_entries(t.store.tag_manager.get("mid"))}
    assert {p.name for p in index_dir.iterdir()} == live  # expired vectors gone, the tag's kept
    (index_dir / "index-00000000-0000-0000-0000-000000000000-0").write_bytes(b"\x01")  # a failed commit's
    removed = t.remove_orphan_files(older_than_seconds=0)
    assert [os.path.basename(p) for p in removed if "/index/" in p] == ["index-00000000-0000-0000-0000-000000000000-0"]
    assert content(t) == want and content(t, tag="mid") == tagged


def test_racing_compactions_never_lose_a_mark(catalog: lakelog.Catalog) -> None:
    """Two compactions planned on one snapshot both change the bucket's vectors; the one committed
    second started from vectors that are gone, so it is refused (nothing of it published) and its
    files removed; the table keeps the first one's marks."""
    from lakelog.connector.errors import CommitConflictError

    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options={**DV, "write-only": "true"})
    t.write(rows(list(range(100))))
    t.compact(full=True)
    t.write(rows([1, 2], "new"))
    (split,) = plan_splits(t.store, t.latest_snapshot())
    first = compact_split(t.store, split, full=False)
    second = compact_split(t.store, split, full=False)
    assert first is not None and second is not None and first.dv_changed and second.dv_changed
    TableCommit(t.store).commit([first])
    before = sorted(os.listdir(t.store.index_dir))
    # its inputs are gone; and were they not, its vectors' base is: each check refuses it alone
    vectors_only = dataclasses.replace(second, compact_before=[], compact_after=[], dv_view=None)
    # a view of the files above level 0 that is not the bucket's (another compaction rewrote one)
    viewed = dataclasses.replace(
        first, compact_before=[], compact_after=[], dv_changed=False,
        dv_view=[*(first.dv_view or []), "data-gone.parquet"],
    )
    for msg, why in (
        (second, "no longer in the latest snapshot"),
        (vectors_only, "deletion vectors of bucket 0"),
        (viewed, "files above level 0 of bucket 0 .* changed since this compaction looked up its keys"),
    ):
        with pytest.raises(CommitConflictError, match=why):
            TableCommit(t.store).commit([msg])
    loser = TableCommit(t.store)
    with pytest.raises(CommitConflictError):
        loser.commit([second])
    loser.discard_unpublished([second])  # what compact_table and the compaction job do then
    assert second.dv_file is not None
    assert sorted(os.listdir(t.store.index_dir)) == [n for n in before if n != second.dv_file.file_name]
    assert content(t)[1] == "new" and len(content(t)) == 100


# pypaimon 2.1 reads 32-bit vectors only ("Invalid magic number" for 64-bit ones); Paimon's Java
# reader checks the 64-bit ones (tests/test_interop_paimon_java.py)
@pytest.mark.parametrize(
    "options",
    [{}, {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
     {"merge-engine": "partial-update"}],
    ids=["deduplicate", "aggregation", "partial-update"],
)
def test_pypaimon_reads_every_compacted_snapshot_as_lakelog_does(warehouse: str, options: dict[str, str]) -> None:
    from tests.interop_util import pp_read

    schema = pa.schema([pa.field("dt", pa.string(), False), *SCHEMA])
    t = lakelog.Catalog(warehouse).create_table(
        "db.t", schema, primary_key=["dt", "id"], partition_by=["dt"], options={**DV, "bucket": "2", **options}
    )
    rng = np.random.default_rng(3)
    for i in range(12):
        ids = sorted(set(rng.integers(0, 60, 15).tolist()))
        t.write(pa.table({"dt": [f"d{i % 2}"] * len(ids), "id": ids, "v": [f"w{i}"] * len(ids), "n": ids},
                         schema=schema))
        if i % 4 == 3 and "merge-engine" not in options:
            gone = sorted(set(rng.integers(0, 60, 6).tolist()))
            t.delete(pa.table({"dt": ["d1"] * len(gone), "id": gone}, schema=schema.remove(3).remove(2)))
        if i == 5:
            t.compact(full=True)
    snaps = [s.id for s in t.snapshots() if s.commit_kind == "COMPACT"]
    assert len(snaps) >= 10
    for sid in snaps:
        want = sorted(map(tuple, (r.values() for r in t.to_arrow(snapshot_id=sid).to_pylist())))
        got = sorted(map(tuple, (r.values() for r in pp_read(warehouse, "db.t", snapshot_id=sid).to_pylist())))
        assert got == want, f"snapshot {sid}"


def test_a_writer_on_a_stale_view_of_the_bucket_never_commits_its_lookups(catalog: lakelog.Catalog) -> None:
    """A long-lived writer restores the bucket, then another writer rewrites the files above level
    0 (a full compaction, which marks nothing, so the bucket's vectors stay as they were). The first
    writer's compaction looked its keys up in files that are gone and not in the new ones: the
    committer drops it (the rows commit at level 0), and no older row comes back."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(list(range(100))))
    t.compact(full=True)
    with t.stream_writer() as w:
        w.write(rows([1, 2], "stream"))
        w.commit()  # the writer holds the bucket as of now
        t.write(rows(list(range(50, 60)), "other"))
        t.compact(full=True)  # rewrites the top level: new files, no marks
        w.write(rows([55], "stream"))
        w.commit()
    got = content(t)
    assert len(got) == 100 and got[1] == got[2] == got[55] == "stream" and got[56] == "other"
    assert t.to_arrow().num_rows == 100  # each key once
    t.write(rows([3], "later"))  # a later commit compacts what was left at level 0
    assert content(t)[55] == "stream" and t.to_arrow().num_rows == 100


def test_compactions_of_one_bucket_chain_in_one_commit(catalog: lakelog.Catalog) -> None:
    """A sink flushes several times between two checkpoints and commits all of it at once: each
    flush's compaction began where the one before ended (its vectors, its files above level 0).
    The commit takes the chain in order, publishes the last vector file only and deletes the
    ones the chain replaced; a chain that began from vectors other than the bucket's is refused.
    (Before, the second flush's vectors were refused as stale and the sink never compacted.)"""
    from lakelog.connector.errors import CommitConflictError
    from lakelog.connector.table.write import TableWrite
    from lakelog.operators.committer import _cancel_chained_compactions

    opts = {**DV, "num-sorted-run.compaction-trigger": "2"}
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options=opts)
    t.write(rows(list(range(1000))))
    t.compact(full=True)
    w = TableWrite(t.store, keep_view=True)
    msgs = []
    for i in range(3):
        w.write(rows([i, 10 + i, 500], f"f{i}"))
        msgs += w.prepare_commit(wait_compaction=True)
    assert [m.dv_changed for m in msgs] == [True, True, True]
    assert msgs[1].dv_base == msgs[0].dv_file.file_name  # type: ignore[union-attr]
    chained = _cancel_chained_compactions(msgs)  # as the sink's committer does
    # a chain that began from other vectors: refused, nothing published
    stale = [dataclasses.replace(chained[0], dv_base="index-gone"), *chained[1:]]
    with pytest.raises(CommitConflictError, match="deletion vectors of bucket 0"):
        vectors_only = dict(new_files=[], compact_before=[], compact_after=[], dv_view=None)
        TableCommit(t.store).commit([dataclasses.replace(m, **vectors_only) for m in stale])  # type: ignore[arg-type]
    sid = TableCommit(t.store).commit(chained, 1)
    assert t.store.snapshot_manager.snapshot(sid).commit_kind == "COMPACT"  # the compaction landed
    (entry,) = vector_entries(t)
    assert entry.index_file.file_name == msgs[-1].dv_file.file_name  # type: ignore[union-attr]
    left = set(os.listdir(t.store.index_dir))
    assert msgs[0].dv_file.file_name not in left and msgs[1].dv_file.file_name not in left  # type: ignore[union-attr]
    got = content(t)
    assert len(got) == 1000 and got[500] == "f2" and [got[i] for i in (0, 1, 2, 10, 11, 12)] == [
        "f0", "f1", "f2", "f0", "f1", "f2"
    ]
    assert t.to_arrow().num_rows == 1000
