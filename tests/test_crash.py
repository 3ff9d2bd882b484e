"""Crash safety: kill -9 a writer at random points inside commits; the table must still read its
last good snapshot, and the next commit must succeed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog

from .conftest import ORDERS

# The child writes batch i = keys [i*7, i*7+20) with name "b<i>", committing after each batch. It
# slows the commit's file operations down at random so that kills land inside commits, and
# prints a line before each write (BEGIN), when its commit starts publishing (IN-COMMIT) and after
# it (COMMITTED): the last line the child printed tells where the kill landed.
CHILD = textwrap.dedent(
    """
    import json, random, sys, time
    import pyarrow as pa
    import lakelog
    from lakelog.connector.format import fileio, objectstore

    rnd = random.Random(int(sys.argv[3]))
    for cls in (fileio.FileIO, objectstore.S3FileIO):
        for name in ("write_bytes", "try_publish", "overwrite_atomic"):
            original = cls.__dict__.get(name)
            if original is None:
                continue
            def slow(self, *a, _o=original, **k):
                time.sleep(rnd.random() * 0.02)
                out = _o(self, *a, **k)
                time.sleep(rnd.random() * 0.02)
                return out
            setattr(cls, name, slow)

    from lakelog.connector.table import commit as commit_module

    current = [0]
    publish = commit_module.TableCommit.commit
    def traced(self, *a, **k):
        print("IN-COMMIT", current[0], flush=True)  # the data files are written; publishing starts
        return publish(self, *a, **k)
    commit_module.TableCommit.commit = traced

    t = lakelog.Catalog(sys.argv[1], options=json.loads(sys.argv[4])).get_table("db.t")
    start = int(sys.argv[2])
    for i in range(start, start + 1000):
        ids = list(range(i * 7, i * 7 + 20))
        batch = pa.table({"dt": ["p%d" % (i % 2)] * 20, "id": ids, "name": ["b%d" % i] * 20,
                          "amount": [float(i)] * 20})
        current[0] = i
        print("BEGIN", i, flush=True)
        sid = t.write(batch)
        print("COMMITTED", i, sid, flush=True)
    """
)


def _expected(batches: int) -> dict[tuple[str, int], str]:
    state: dict[tuple[str, int], str] = {}
    for i in range(1, batches + 1):
        for k in range(i * 7, i * 7 + 20):
            state[(f"p{i % 2}", k)] = f"b{i}"
    return state


def _appends(t: lakelog.Table) -> int:
    return sum(s.commit_kind == "APPEND" for s in t.snapshots())


def _content(t: lakelog.Table, snapshot_id: int | None = None) -> dict[tuple[str, int], str]:
    return {(r["dt"], r["id"]): r["name"] for r in t.to_arrow(snapshot_id=snapshot_id).to_pylist()}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def crash_warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str], int]:
    """(warehouse, catalog options, rounds): a local directory, or a prefix on the S3 server (fewer
    rounds: each request there crosses a socket)."""
    if request.param == "local":
        return str(tmp_path / "wh"), {}, 12
    server = request.getfixturevalue("s3_server")
    return server.warehouse(), server.options(), 8


@pytest.mark.slow
def test_kill_inside_commit_keeps_last_good_snapshot(
    tmp_path: Path, crash_warehouse: tuple[str, dict[str, str], int]
) -> None:
    warehouse, options, rounds = crash_warehouse
    catalog = lakelog.Catalog(warehouse, options=options)
    catalog.create_table(
        "db.t", ORDERS, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    script = os.path.join(str(tmp_path), "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    rnd = random.Random(1234)
    batches_done = 0  # batches committed so far, as seen through the table
    kills_inside_commit = 0
    for round_ in range(rounds):
        proc = subprocess.Popen(
            [sys.executable, script, warehouse, str(batches_done + 1), str(round_), json.dumps(options)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        # let it commit a few batches, then kill it at a random moment of a later commit
        target = rnd.randint(1, 3)
        begun = 0
        lines: list[str] = []
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("BEGIN"):
                begun += 1
                if begun > target:
                    time.sleep(rnd.random() * 0.12)
                    break
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        lines += [x.strip() for x in proc.stdout.read().splitlines() if x.strip()]
        t = catalog.get_table("db.t")
        latest = t.latest_snapshot()
        assert latest is not None
        # the content is exactly the batches of the committed APPEND snapshots (one per batch;
        # the writer's own compactions add COMPACT snapshots)
        committed = _appends(t)
        reported = sum(x.startswith("COMMITTED") for x in lines)
        if lines[-1].startswith("IN-COMMIT"):
            # killed while publishing: the batch is in the table entirely or not at all
            kills_inside_commit += 1
            assert committed in (batches_done + reported, batches_done + reported + 1), (round_, lines[-3:])
        else:
            assert committed == batches_done + reported, (round_, lines[-3:])
        assert _content(t) == _expected(committed), f"round {round_}: snapshot {committed} content is wrong"
        batches_done = committed
    # the next commit succeeds on top of whatever the crashes left behind
    t = catalog.get_table("db.t")
    nxt = batches_done + 1
    sid = t.write(
        pa.table(
            {
                "dt": [f"p{nxt % 2}"] * 20,
                "id": list(range(nxt * 7, nxt * 7 + 20)),
                "name": [f"b{nxt}"] * 20,
                "amount": [float(nxt)] * 20,
            },
            schema=ORDERS,
        )
    )
    assert sid is not None and _appends(t) == nxt
    assert _content(t) == _expected(nxt)
    # every snapshot is complete and readable
    appends = 0
    for s in t.snapshots():
        appends += s.commit_kind == "APPEND"
        assert _content(t, s.id) == _expected(appends)
    # crashes leave only orphans, and orphan cleanup removes them without touching live data
    removed = t.remove_orphan_files(older_than_seconds=0)
    assert _content(t) == _expected(nxt)
    assert all(not os.path.basename(p).startswith("snapshot-") for p in removed)
    assert kills_inside_commit >= 1, "no kill landed inside a commit; the test proved nothing"
