"""DELETE on append tables with deletion vectors (issue 21): rows marked, never rewritten, by
filter; compaction drops them; races with compaction; a random model of appends, deletes,
compactions, expirations and rollbacks against a list of rows."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import random
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError, InvalidInputError, SchemaError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX
from lakelog.connector.table.append_delete import _mark
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.compaction import compact_split
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.scan import plan_splits

S = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("name", pa.string()), ("dt", pa.string())])
DV = {"deletion-vectors.enabled": "true"}
LAYOUTS = {"unaware": {"bucket": "-1"}, "bucketed": {"bucket": "3", "bucket-key": "id"}}


def _rows(ids: list[int], dt: str = "a") -> pa.Table:
    return pa.table(
        {"id": ids, "v": [i % 7 for i in ids], "name": [f"n{i}" for i in ids], "dt": [dt] * len(ids)}, S
    )


def _ids(t: lakelog.Table, **scan: Any) -> list[int]:
    return sorted(t.to_arrow(**scan).column("id").to_pylist())


def _vector_files(t: lakelog.Table) -> list[str]:
    snap = t.latest_snapshot()
    return [e.index_file.file_name for e in t.store.index_entries(snap) if e.index_file.index_type == DELETION_VECTORS_INDEX]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_delete_marks_rows_in_an_append_snapshot_and_compaction_drops_them(
    catalog: lakelog.Catalog, layout: str
) -> None:
    t = catalog.create_table("db.t", S, partition_by=["dt"], options={**DV, **LAYOUTS[layout]})
    t.write(pa.concat_tables([_rows(list(range(10))), _rows(list(range(10, 15)), "b")]))
    t.write(_rows(list(range(15, 30))))
    files = sorted(t.files().column("file_path").to_pylist())
    before = t.latest_snapshot().id

    sid = t.delete_where("id IN (1, 12, 20) OR (v = 3 AND dt = 'a')")
    gone = {1, 12, 20} | {i for i in range(30) if i % 7 == 3 and not 10 <= i < 15}
    assert _ids(t) == [i for i in range(30) if i not in gone]
    snap = t.snapshot(sid)
    assert snap.commit_kind == "APPEND" and snap.delta_record_count == 0
    assert sorted(t.files().column("file_path").to_pylist()) == files  # no data file rewritten
    assert _ids(t, snapshot_id=before) == list(range(30))  # time travel sees the rows
    assert _vector_files(t)
    # filters, projections and pandas read the same rows; deleting again changes nothing
    assert _ids(t, filter="id < 5") == [i for i in range(5) if i not in gone]
    assert t.delete_where("id = 1") is None and t.delete_where("id = 999") is None
    assert t.to_pandas(columns=["name"]).shape[0] == 30 - len(gone)
    # a second delete in a bucket that already has vectors keeps the first one's marks
    t.delete_where(pa.compute.field("id") == 0)
    gone.add(0)
    assert _ids(t) == [i for i in range(30) if i not in gone]

    t.compact(full=True)
    assert _ids(t) == [i for i in range(30) if i not in gone]
    assert _vector_files(t) == []  # rewritten without the deleted rows
    assert sum(t.files().column("record_count").to_pylist()) == 30 - len(gone)


def test_delete_refusals_name_what_is_wrong(catalog: lakelog.Catalog) -> None:
    plain = catalog.create_table("db.plain", S)
    plain.write(_rows([1]))
    with pytest.raises(InvalidInputError, match="deletion-vectors.enabled"):
        plain.delete_where("id = 1")
    t = catalog.create_table("db.t", S, options=DV)
    t.write(_rows([1, 2]))
    with pytest.raises(InvalidInputError, match="needs a filter"):
        t.delete_where("  ")
    with pytest.raises(InvalidInputError, match="needs a filter on its columns"):
        t.delete_where(pa.compute.scalar(True))
    with pytest.raises(SchemaError, match="zz"):
        t.delete_where("zz = 1")
    assert _ids(t) == [1, 2]
    # primary-key tables delete the keys the filter matches
    pk = catalog.create_table("db.pk", S, primary_key=["id"], options={"bucket": "2"})
    pk.write(_rows([1, 2, 3]))
    pk.delete_where("v >= 2")
    assert _ids(pk) == [1]


def test_delete_ratio_threshold_decides_when_a_bucket_compacts(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", S, options={**DV, "compaction.delete-ratio-threshold": "0.25"})
    t.write(_rows(list(range(8))))
    t.delete_where("id < 2")  # 2 of 8: not past the share
    assert t.compact(full=False) is None and _vector_files(t)
    t.delete_where("id = 2")  # 3 of 8
    assert t.compact(full=False) is not None
    assert _vector_files(t) == [] and _ids(t) == list(range(3, 8))


def test_a_compaction_planned_before_a_delete_does_not_bring_its_rows_back(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", S, options=DV)
    t.write(_rows([1, 2, 3]))
    t.write(_rows([4, 5, 6]))
    store = t.store
    (split,) = plan_splits(store, store.snapshot_manager.latest())
    compaction = compact_split(store, split, full=True)  # files without vectors: rewritten as they are
    assert compaction is not None and compaction.dv_guard
    t.delete_where("id IN (2, 5)")
    with pytest.raises(CommitConflictError, match="changed since this compaction began"):
        TableCommit(store).commit([compaction])
    TableCommit(store).discard_unpublished([compaction])
    assert _ids(t) == [1, 3, 4, 6]
    t.compact()
    assert _ids(t) == [1, 3, 4, 6]


def test_a_delete_planned_before_a_compaction_is_planned_again(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.t", S, options=DV)
    t.write(_rows([1, 2, 3]))
    t.write(_rows([4, 5, 6]))
    store = t.store
    expr = parse_filter("id = 5", store.schema.arrow_schema())
    messages: list[CommitMessage] = []
    _mark(store, plan_splits(store, store.snapshot_manager.latest(), filter=expr), expr,
          store.schema.arrow_schema(), messages)
    t.compact()  # rewrites the file the delete marks (no vectors yet: the bucket's vectors stay)
    with pytest.raises(CommitConflictError, match="was rewritten since this delete read it"):
        TableCommit(store).commit(messages)
    TableCommit(store).discard_unpublished(messages)
    assert _ids(t) == [1, 2, 3, 4, 5, 6]
    assert t.delete_where("id = 5") is not None  # planned on the compacted file
    assert _ids(t) == [1, 2, 3, 4, 6]


def test_sql_like_filters_on_partitions_and_indexes_skip_files(catalog: lakelog.Catalog) -> None:
    """A delete reads only the files that may hold matching rows (partition pruning, statistics,
    bloom filters): here the others are gone from disk, and the delete still works."""
    t = catalog.create_table(
        "db.t", S, partition_by=["dt"], options={**DV, "file-index.bloom-filter.columns": "name"}
    )
    t.write(_rows([1, 2, 3], "a"))
    keep = set(Path(t.path).rglob("*.parquet"))
    t.write(_rows([4, 5, 6], "b"))
    for p in set(Path(t.path).rglob("*.parquet")) - keep:
        p.unlink()
    assert t.delete_where("dt = 'a' AND name = 'n2'") is not None
    assert _ids(t, filter="dt = 'a'") == [1, 3]


# ---- a random model ----------------------------------------------------------------------------
def _predicate(rng: random.Random, next_id: int) -> str:
    k = rng.randrange(4)
    if k == 0:
        return f"id IN ({', '.join(str(rng.randrange(max(next_id, 1))) for _ in range(3))})"
    if k == 1:
        return f"v = {rng.randrange(7)} AND dt = '{rng.choice('ab')}'"
    if k == 2:
        lo = rng.randrange(max(next_id, 1))
        return f"id BETWEEN {lo} AND {lo + rng.randrange(5)}"
    return f"name = 'n{rng.randrange(max(next_id, 1))}' OR v > 5"


def _matches(row: dict[str, Any], pred: str) -> bool:
    t = pa.Table.from_pylist([row], S)
    return t.filter(parse_filter(pred, S)).num_rows == 1


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("seed", [1, 2])
def test_appends_deletes_compactions_expirations_and_rollbacks_match_a_model(
    catalog: lakelog.Catalog, layout: str, seed: int
) -> None:
    rng = random.Random(seed)
    t = catalog.create_table(
        f"db.t{seed}", S, partition_by=["dt"],
        options={**DV, **LAYOUTS[layout], "snapshot.num-retained.min": "3", "snapshot.num-retained.max": "6"},
    )
    model: list[dict[str, Any]] = []
    history: dict[int, list[dict[str, Any]]] = {}  # snapshot id -> its rows
    next_id = 0
    for _ in range(45):
        op = rng.choices(["append", "delete", "compact", "expire", "rollback"], [4, 4, 2, 1, 1])[0]
        if op == "append":
            n = rng.randrange(1, 12)
            batch = [
                {"id": i, "v": rng.randrange(7), "name": f"n{i}", "dt": rng.choice("ab")}
                for i in range(next_id, next_id + n)
            ]
            next_id += n
            sid = t.write(pa.Table.from_pylist(batch, S))
            model += batch
        elif op == "delete":
            pred = _predicate(rng, next_id)
            sid = t.delete_where(pred)
            hit = [r for r in model if _matches(r, pred)]
            assert (sid is None) == (not hit), pred
            model = [r for r in model if not _matches(r, pred)]
        elif op == "compact":
            sid = t.compact(full=rng.random() < 0.5)
        elif op == "expire":
            t.expire_snapshots()
            sid = None
        else:
            live = sorted(s.id for s in t.snapshots() if s.id in history)
            if len(live) < 2:
                continue
            target = rng.choice(live[:-1])
            t.rollback_to(target)
            model = list(history[target])
            history = {k: v for k, v in history.items() if k <= target}
            sid = None
        if sid is not None:
            history[sid] = list(model)
        assert _ids(t) == sorted(r["id"] for r in model), op
        for s in t.snapshots():  # every retained snapshot reads as it was
            if s.id in history:
                assert _ids(t, snapshot_id=s.id) == sorted(r["id"] for r in history[s.id]), (op, s.id)
    # orphan cleanup keeps every file (data and vector) that a retained snapshot needs
    t.remove_orphan_files(older_than_seconds=0)
    for s in t.snapshots():
        if s.id in history:
            assert _ids(t, snapshot_id=s.id) == sorted(r["id"] for r in history[s.id]), s.id
    assert _ids(t) == sorted(r["id"] for r in model)


# ---- processes racing -------------------------------------------------------------------------
def _race_worker(warehouse: str, role: str, start: float, until: float, out: str) -> None:
    """Runs ``role`` from ``start`` until ``until`` (wall clock): the three roles overlap."""
    try:
        t = lakelog.Catalog(warehouse).get_table("db.t")
        done: list[int] = []
        time.sleep(max(0.0, start - time.time()))
        i = -1
        while time.time() < until and (i < 180 or role == "compact"):
            i += 1
            if role == "append":
                ids = list(range(1000 + i * 10, 1000 + i * 10 + 10))
                t.write(_rows(ids, "ab"[i % 2]))
                done += ids
            elif role == "delete":
                victims = [2 * i, 2 * i + 1]  # rows of the first writes, each deleted once
                try:
                    t.delete_where(f"id IN ({victims[0]}, {victims[1]})")
                    done += victims
                except CommitConflictError:
                    pass  # lost every attempt to compactions: nothing deleted
                time.sleep(0.1)  # room for compactions (a delete changes the vectors they start from)
            else:
                with contextlib.suppress(CommitConflictError):  # lost five races: the next round tries
                    t.compact(full=True)
                time.sleep(0.02)
        Path(out).write_text(",".join(map(str, done)))
    except BaseException:
        Path(out + ".error").write_text(traceback.format_exc())


@pytest.mark.e2e
@pytest.mark.parametrize("layout", LAYOUTS)
def test_processes_appending_deleting_and_compacting_lose_nothing_and_resurrect_nothing(
    warehouse: str, layout: str, tmp_path: Path
) -> None:
    t = lakelog.Catalog(warehouse).create_table("db.t", S, partition_by=["dt"], options={**DV, **LAYOUTS[layout]})
    for k in range(4):
        t.write(pa.concat_tables([_rows(list(range(k * 100, k * 100 + 50)), "a"),
                                  _rows(list(range(k * 100 + 50, k * 100 + 100)), "b")]))
    ctx = mp.get_context("spawn")
    roles = ["append", "delete", "compact"]
    outs = [str(tmp_path / f"{r}.out") for r in roles]
    start = time.time() + 4  # after the spawned interpreters have started
    procs = [ctx.Process(target=_race_worker, args=(warehouse, r, start, start + 5, o)) for r, o in zip(roles, outs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    for o in outs:
        assert not Path(o + ".error").exists(), Path(o + ".error").read_text()
    appended = {int(x) for x in Path(outs[0]).read_text().split(",")}
    deleted = {int(x) for x in Path(outs[1]).read_text().split(",")}
    t = lakelog.Catalog(warehouse).get_table("db.t")
    assert _ids(t) == sorted((set(range(400)) | appended) - deleted)
    t.compact(full=True)
    assert _ids(t) == sorted((set(range(400)) | appended) - deleted)
    assert _vector_files(t) == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pypaimon_reads_the_deletes_at_every_snapshot(warehouse: str, layout: str) -> None:
    pytest.importorskip("pypaimon")
    from tests.interop_util import pp_read

    t = lakelog.Catalog(warehouse).create_table("db.t", S, partition_by=["dt"], options={**DV, **LAYOUTS[layout]})
    t.write(pa.concat_tables([_rows(list(range(20)), "a"), _rows(list(range(20, 30)), "b")]))
    t.delete_where("v = 2 OR id = 25")
    t.write(_rows(list(range(30, 40)), "a"))
    t.delete_where("id IN (3, 31, 33)")
    t.compact(full=True)
    for s in t.snapshots():
        got = pp_read(warehouse, "db.t", snapshot_id=s.id)
        assert sorted(got.column("id").to_pylist()) == _ids(t, snapshot_id=s.id), s.id


def test_the_compaction_jobs_planner_compacts_a_bucket_past_the_delete_ratio(catalog: lakelog.Catalog) -> None:
    """The dedicated compaction job's planner (operators.compact_buckets, as the Flink job and
    ``lakelog compact --job`` use it) reads an append bucket's vectors as a scan does: a file past
    'compaction.delete-ratio-threshold' makes the bucket due, and its compaction drops the rows."""
    pytest.importorskip("pyflink")
    from lakelog.operators.compact_buckets import compact_bucket, plan_compaction

    t = catalog.create_table("db.t", S, options={**DV, "compaction.delete-ratio-threshold": "0.25"})
    t.write(_rows(list(range(8))))
    t.delete_where("id < 2")  # 2 of 8: not due
    assert plan_compaction(t.store) == []
    t.delete_where("id = 2")  # 3 of 8: due
    (key,) = plan_compaction(t.store)
    done = compact_bucket(t.store, key)
    assert done is not None
    TableCommit(t.store).commit([done[1]])
    assert _vector_files(t) == [] and _ids(t) == list(range(3, 8))
    assert sum(t.files().column("record_count").to_pylist()) == 5
