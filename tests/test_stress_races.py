"""Several processes racing on one table against a model (issue 19's stress test).

Writer processes (one-shot writes, write-only writes, and a long-lived stream writer), a compactor,
an expirer and, in some rounds, a process that rolls back and one that branches (a tag of the latest
snapshot, a branch from it, the tag mostly deleted at once, a batch written to the branch, older
branches deleted), all on one primary-key table with short retention. Each writer logs what every batch it wrote was acknowledged with. At the end the table
must read as the model says:

* every snapshot in the chain reads, and the chain has no gap;
* every row read belongs to a batch a writer was told is committed (nothing resurrected, nothing
  invented), and every acknowledged batch is read whole, unless a rollback that ended after the
  write started went below the snapshot that acknowledged it;
* each writer's counter row holds the value of its newest surviving batch (the later commit wins);
* orphan cleanup afterwards finds nothing that a snapshot still needs;
* every branch kept reads the rows it held when made plus its own batch, before and after main's
  orphan cleanup (main's expirations, compactions and rollbacks must keep the files it shares);
* no write gave up (``commit.max-retries``) and no process failed.

The short version runs with the unit suite; ``soak`` runs long rounds (``LAKELOG_STRESS_ROUNDS``).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import time
import traceback
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError, SnapshotNotFoundError, TagError
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.write import TableWrite

S = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("w", pa.int64())])
ROWS = 6  # rows per batch
Opts = Optional[dict[str, str]]  # catalog options (an S3 warehouse's endpoint and keys)


def _batch(writer: int, i: int) -> pa.Table:
    base = (writer * 10_000 + i) * ROWS
    ids = [base + j for j in range(ROWS)] + [-1 - writer]  # the writer's counter row last
    return pa.table({"id": ids, "v": [i] * (ROWS + 1), "w": [writer] * (ROWS + 1)}, schema=S)


def _report(log_path: str) -> None:
    """In a child process that failed: its traceback, for the parent's assertion."""
    Path(log_path + ".error").write_text(traceback.format_exc())


def _writer(
    warehouse: str, writer: int, batches: int, style: str, log_path: str, seed: int, opts: Opts = None
) -> None:
    try:
        _write_batches(warehouse, writer, batches, style, log_path, seed, opts)
    except BaseException:
        _report(log_path)
        raise


def _write_batches(
    warehouse: str, writer: int, batches: int, style: str, log_path: str, seed: int, opts: Opts
) -> None:
    rnd = random.Random(seed)
    t = lakelog.Catalog(warehouse, options=opts).get_table("c.t")
    out = open(log_path, "w")  # noqa: SIM115 - flushed line by line, closed below
    stream = t.stream_writer() if style == "stream" else None
    try:
        for i in range(batches):
            start = time.time()
            if stream is not None:
                sid = stream.write(_batch(writer, i)).commit()
            elif style == "write-only":  # as a write-only sink's writer and committer do
                w = TableWrite(t.store, write_only=True)
                w.write(_batch(writer, i))
                sid = TableCommit(t.store).commit(w.prepare_commit())
                w.close()
            else:
                sid = t.write(_batch(writer, i))
            out.write(json.dumps({"i": i, "sid": sid, "start": start, "end": time.time()}) + "\n")
            out.flush()
            if rnd.random() < 0.3:
                time.sleep(rnd.random() * 0.01)
    finally:
        if stream is not None:
            stream.close()
        out.close()


def _loop(warehouse: str, role: str, stop_path: str, log_path: str, seed: int, opts: Opts = None) -> None:
    try:
        _run_loop(warehouse, role, stop_path, log_path, seed, opts)
    except BaseException:
        _report(log_path)
        raise


def _run_loop(warehouse: str, role: str, stop_path: str, log_path: str, seed: int, opts: Opts) -> None:
    rnd = random.Random(seed)
    t = lakelog.Catalog(warehouse, options=opts).get_table("c.t")
    out = open(log_path, "w")  # noqa: SIM115 - flushed line by line, closed below
    try:
        while not os.path.exists(stop_path):
            if role == "compactor":
                try:
                    t.compact(full=rnd.random() < 0.3)
                except CommitConflictError as e:  # the writers' own compactions kept winning
                    assert "lost the race to other commits" in str(e), e
                    out.write(json.dumps({"lost": str(e)[:200]}) + "\n")
            elif role == "expirer":
                t.expire_snapshots()
            elif role == "brancher":
                _branch_once(t, rnd, out)
                time.sleep(0.05 + rnd.random() * 0.15)
            else:  # rollback: a few snapshots back
                latest = t.store.snapshot_manager.latest_id() or 0
                earliest = t.store.snapshot_manager.earliest_id() or 0
                start = time.time()
                target = max(earliest, latest - rnd.randint(0, 3))
                if target >= 1:
                    try:
                        done = t.rollback_to(target)
                    except SnapshotNotFoundError:
                        continue  # expired between choosing it and rolling back: choose again
                    except TagError as e:  # the brancher's tag of a later snapshot, for a moment
                        assert "hold later snapshots" in str(e), e
                        continue
                    out.write(json.dumps({"target": done, "start": start, "end": time.time()}) + "\n")
                    out.flush()
                time.sleep(0.05 + rnd.random() * 0.1)
            time.sleep(rnd.random() * 0.01)
    finally:
        out.close()


def _branch_once(t: lakelog.Table, rnd: random.Random, out: Any) -> None:
    """A branch from a tag of the latest snapshot (the tag mostly deleted at once: the branch must
    then keep the files alone), what it holds, a batch of its own; now and then an older branch
    deleted. Logged for the final check."""
    n = len([name for name in t.branches() if name.startswith("b")]) + rnd.randrange(10**6) * 100
    tag, name = f"t{n}", f"b{n}"
    try:
        t.create_tag(tag)
    except SnapshotNotFoundError:
        return
    try:
        b = t.create_branch(name, tag=tag)
    finally:
        if rnd.random() < 0.7:
            t.delete_tag(tag)
    ids = sorted(r["id"] for r in b.to_arrow().to_pylist())
    own = pa.table({"id": [10**9 + n * 10 + j for j in range(3)], "v": [0] * 3, "w": [-1] * 3}, schema=S)
    b.write(own)
    out.write(json.dumps({"branch": name, "ids": ids + own.column("id").to_pylist()}) + "\n")
    branches = sorted(x for x in t.branches() if x.startswith("b"))
    if len(branches) > 3 and rnd.random() < 0.5:
        gone = rnd.choice(branches[:-1])
        t.delete_branch(gone)
        out.write(json.dumps({"deleted": gone}) + "\n")
    out.flush()


def _check_branches(t: lakelog.Table, log: list[dict[str, Any]]) -> int:
    deleted = {e["deleted"] for e in log if "deleted" in e}
    kept = [e for e in log if "branch" in e and e["branch"] not in deleted]
    assert sorted(t.branches()) == sorted(e["branch"] for e in kept)
    for e in kept:
        b = t.branch(e["branch"])
        assert sorted(r["id"] for r in b.to_arrow().to_pylist()) == sorted(e["ids"]), e["branch"]
        for s in b.snapshots():
            b.to_arrow(snapshot_id=s.id)
    return len(kept)


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _round(
    tmp: Path, seed: int, *, writers: int, batches: int, rollbacks: bool, s3: Optional[tuple[str, dict[str, str]]] = None,
    extra: Optional[dict[str, str]] = None, branches: bool = False,
) -> dict[str, int]:
    """One round; ``s3``: (warehouse, catalog options) of an S3 warehouse (default: a local one);
    ``extra``: more table options."""
    rnd = random.Random(seed)
    warehouse, opts = s3 if s3 is not None else (str(tmp / "wh"), None)
    rmin = rnd.randint(1, 2)
    options = {
        "bucket": str(rnd.choice([1, 2, 4])),
        "snapshot.num-retained.min": str(rmin),
        "snapshot.num-retained.max": str(rmin + rnd.randint(0, 1)),
        "num-sorted-run.compaction-trigger": "2",
        "num-sorted-run.stop-trigger": "3",
        **(extra or {}),
    }
    lakelog.Catalog(warehouse, options=opts).create_table("c.t", S, primary_key=["id"], options=options)
    ctx = mp.get_context("spawn")
    styles = ["one-shot", "write-only", "stream", "write-only", "one-shot", "stream"]
    procs = []
    for k in range(writers):
        args = (warehouse, k, batches, styles[k % len(styles)], str(tmp / f"w{k}.log"), seed * 100 + k, opts)
        procs.append(ctx.Process(target=_writer, args=args))
    stop = str(tmp / "stop")
    roles = ["compactor", "expirer"] + (["rollback"] if rollbacks else []) + (["brancher"] if branches else [])
    loops = [
        ctx.Process(target=_loop, args=(warehouse, r, stop, str(tmp / f"{r}.log"), seed * 100 + 50 + j, opts))
        for j, r in enumerate(roles)
    ]
    for p in procs + loops:
        p.start()
    for p in procs:
        p.join(600)
    Path(stop).touch()
    for p in loops:
        p.join(120)
    codes = {f"writer {k}": p.exitcode for k, p in enumerate(procs)} | {
        r: p.exitcode for r, p in zip(roles, loops)
    }
    errors = [f.read_text() for f in sorted(tmp.glob("*.error"))]
    assert all(c == 0 for c in codes.values()) and not errors, (options, codes, errors)

    t = lakelog.Catalog(warehouse, options=opts).get_table("c.t")
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(snaps[0].id, snaps[-1].id + 1)), "a gap in the chain"
    for s in snaps:
        t.to_arrow(snapshot_id=s.id)
    got = {r["id"]: (r["v"], r["w"]) for r in t.to_arrow().to_pylist()}
    backs = _read_log(tmp / "rollback.log") if rollbacks else []
    acked = 0
    for k in range(writers):
        entries = _read_log(tmp / f"w{k}.log")
        assert len(entries) == batches, f"writer {k} wrote {len(entries)} of {batches} batches"
        survivors = []
        for e in entries:
            acked += 1
            rows = _batch(k, e["i"]).to_pylist()[:ROWS]
            seen = [r["id"] in got for r in rows]
            may_be_gone = any(b["end"] > e["start"] and b["target"] < e["sid"] for b in backs)
            if all(seen):
                survivors.append(e["i"])
            else:
                assert may_be_gone and not any(seen), (options, k, e, seen)
        counter = got.get(-1 - k)
        if survivors:
            assert counter == (max(survivors), k), (options, k, counter, survivors)
    for key, (v, w) in got.items():  # nothing that no writer wrote
        assert key < 0 or key // ROWS == w * 10_000 + v, key
    branch_log = _read_log(tmp / "brancher.log") if branches else []
    kept = _check_branches(t, branch_log) if branches else 0
    removed = t.remove_orphan_files(older_than_seconds=0)
    fresh = lakelog.Catalog(warehouse, options=opts).get_table("c.t")
    assert {r["id"] for r in fresh.to_arrow().to_pylist()} == set(got)
    for s in fresh.snapshots():
        fresh.to_arrow(snapshot_id=s.id)
    if branches:
        assert _check_branches(fresh, branch_log) == kept
    return {"acked": acked, "snapshots": snaps[-1].id, "rollbacks": len(backs), "orphans": len(removed),
            "branches": kept}


@pytest.mark.parametrize("seed,rollbacks", [(1, False), (2, True)])
def test_writers_compactor_expirer_and_rollbacks_race_against_the_model(
    tmp_path: Path, seed: int, rollbacks: bool
) -> None:
    stats = _round(tmp_path, seed, writers=4, batches=12, rollbacks=rollbacks, branches=rollbacks)
    assert stats["acked"] == 48
    assert not rollbacks or stats["branches"] >= 1


@pytest.mark.s3
def test_racing_processes_on_an_s3_warehouse_against_the_model(
    tmp_path: Path, s3_catalog_args: tuple[str, dict[str, str]]
) -> None:
    """The same race on an S3 warehouse: conditional creates and leases instead of links and flock."""
    stats = _round(tmp_path, 3, writers=3, batches=8, rollbacks=True, s3=s3_catalog_args)
    assert stats["acked"] == 24


def test_racing_processes_on_a_merge_on_write_table_against_the_model(tmp_path: Path) -> None:
    """The same race on a table with deletion vectors: every writer's compaction marks rows, the
    compactor's too, and the committer must drop those whose bucket moved on under them."""
    stats = _round(tmp_path, 4, writers=4, batches=12, rollbacks=True, extra={"deletion-vectors.enabled": "true"},
                   branches=True)
    assert stats["acked"] == 48


# CI runs four long rounds (about 25 s each); LAKELOG_STRESS_ROUNDS=20 runs more
_ROUNDS = int(os.environ.get("LAKELOG_STRESS_ROUNDS", "4"))


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 100 + _ROUNDS))
def test_many_rounds_of_racing_processes_against_the_model(tmp_path: Path, seed: int) -> None:
    _round(tmp_path, seed, writers=4, batches=50, rollbacks=seed % 2 == 0, branches=seed == 101)
