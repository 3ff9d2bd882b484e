"""The dedicated compaction job (lakelog.jobs.compact) on a MiniCluster: batch through the CLI,
streaming while a writer keeps writing, and ``python -m lakelog.jobs.compact --streaming``."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.jobs.cli import main as cli_main  # noqa: E402
from lakelog.operators.compact_buckets import parse_bucket_key, sorted_run_counts  # noqa: E402

pytestmark = [pytest.mark.slow]

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)


def _pk_table(wh: str, **extra: str) -> lakelog.Table:
    return lakelog.Catalog(wh).create_table(
        "db.t",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "2", "write-only": "true", **extra},
    )


def _write(t: lakelog.Table, dt: str, i: int, expected: dict[tuple[str, int], str]) -> None:
    ids = list(range(i * 5, i * 5 + 20))  # overlaps the previous write: updates
    t.write(pa.table({"dt": [dt] * 20, "id": ids, "v": [f"w{i}"] * 20}, schema=SCHEMA))
    expected.update({(dt, k): f"w{i}" for k in ids})


def _content(t: lakelog.Table) -> dict[tuple[str, int], str]:
    rows = t.refresh().to_arrow().to_pylist()
    out = {(r["dt"], r["id"]): r["v"] for r in rows}
    assert len(out) == len(rows)
    return out


def test_batch_job_through_the_cli(tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    t = _pk_table(wh)
    expected: dict[tuple[str, int], str] = {}
    for i in range(6):
        for dt in ("a", "b"):
            _write(t, dt, i, expected)
    runs = sorted_run_counts(t.store)
    assert len(runs) == 4 and set(runs.values()) == {6}
    last = t.latest_snapshot()
    assert last is not None

    # first partition a only (a spec), then b (a predicate: --where)
    def partition(key: str) -> str:
        return str(t.store.partition_values(parse_bucket_key(key)[0])[0])

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main(["--warehouse", wh, "compact", "db.t", "--job", "--universal", "--partition", "dt=a"])
    assert rc == 0, out.getvalue()
    mid = sorted_run_counts(t.store)
    assert {k: mid[k] < runs[k] for k in runs} == {k: partition(k) == "a" for k in runs}
    assert _content(t) == expected
    out = io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out):
        rc = cli_main(
            ["--warehouse", wh, "compact", "db.t", "--job", "--universal", "--parallelism", "2", "--where", "dt >= 'b'"]
        )
    print(f"batch compaction job: {time.monotonic() - t0:.1f} s")
    assert rc == 0, out.getvalue()
    assert "compaction committed 1 snapshot(s)" in out.getvalue()
    snaps = t.refresh().snapshots()
    # one commit for all buckets of each run
    assert [s.commit_kind for s in snaps if s.id > last.id] == ["COMPACT", "COMPACT"]
    assert snaps[-1].commit_user.startswith("lakelog-compact-")
    after = sorted_run_counts(t.store)
    assert set(after) == set(runs) and all(after[k] < runs[k] for k in runs)
    assert {k: after[k] for k in runs if partition(k) == "a"} == {k: mid[k] for k in runs if partition(k) == "a"}
    assert _content(t) == expected

    # nothing left for universal compaction: no job is started at all
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--warehouse", wh, "compact", "db.t", "--job", "--universal"]) == 0
    assert "nothing to compact" in out.getvalue()
    assert len(t.refresh().snapshots()) == len(snaps)


def test_streaming_job_compacts_while_a_writer_writes(tmp_path: Any, flink_env: Any) -> None:
    from lakelog.jobs.compact import start_compaction

    # merge-on-write: write-only writers add level 0, the job pushes it up and marks older rows
    t = _pk_table(str(tmp_path / "wh"), **{"deletion-vectors.enabled": "true"})
    expected: dict[tuple[str, int], str] = {}
    for i in range(6):
        _write(t, "a", i, expected)
    env = flink_env(mode="streaming", parallelism=2, checkpoint_interval_ms=1000)
    t0 = time.monotonic()
    job = start_compaction(
        env, t.path, streaming=True, discovery_interval="500 ms", channel_dir=str(tmp_path / "ch")
    )
    assert job is not None
    # keep writing (write-only: the writer never compacts) until the job has compacted a few times
    i = 6
    while time.monotonic() - t0 < 300:
        _write(t, "a", i, expected)
        i += 1
        time.sleep(0.3)
        if sum(s.commit_kind == "COMPACT" for s in t.refresh().snapshots()) >= 3:
            _write(t, "a", i, expected)  # and one more after them
            i += 1
            break
    last_append = max(s.id for s in t.refresh().snapshots() if s.commit_kind == "APPEND")
    summary = job.stop_when_idle(6.0, timeout_s=300)
    print(f"streaming compaction: {time.monotonic() - t0:.1f} s, {i} writes; {summary}")
    assert job.status() == "FINISHED"

    snaps = t.refresh().snapshots()
    compacts = [s for s in snaps if s.commit_kind == "COMPACT"]
    assert len(compacts) >= 3 and [s.id for s in compacts] == summary.snapshots
    assert all(s.commit_user == summary.commit_user for s in compacts)
    assert sum(s.id < last_append for s in compacts) >= 3  # compacted while the writer was writing
    assert _content(t) == expected
    trigger = t.store.options.num_sorted_run_compaction_trigger
    assert max(sorted_run_counts(t.store).values()) <= trigger  # writes alone: `i` runs per bucket
    marked = {e.index_file.index_type for s in snaps for e in t.store.index_entries(s)}
    assert marked == {"DELETION_VECTORS"}  # the job marked rows instead of rewriting every file


@pytest.mark.e2e
def test_streaming_module_with_max_rounds(tmp_path: Any) -> None:
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    t = lakelog.Catalog(wh).create_table("db.log", schema, options={"bucket": "2", "bucket-key": "id"})
    for i in range(6):
        t.write(pa.table({"id": [i * 10 + k for k in range(10)], "v": [f"w{i}"] * 10}, schema=schema))
    before = {b: sorted_run_counts(t.store)[b] for b in sorted_run_counts(t.store)}
    assert set(before.values()) == {6}
    rows_before = t.to_arrow().sort_by("id")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog.jobs.compact",
            "--warehouse",
            wh,
            "--table",
            "db.log",
            "--streaming",
            "--max-rounds",
            "2",
            "--discovery-interval",
            "1 s",
            "--channel-dir",
            str(tmp_path / "ch"),
            "--checkpoint-interval-ms",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    print(f"python -m lakelog.jobs.compact --streaming --max-rounds 2: {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compaction committed" in proc.stdout, proc.stdout
    assert sorted_run_counts(t.store) == {b: 1 for b in before}  # the small files became one per bucket
    assert t.refresh().to_arrow().sort_by("id").equals(rows_before)
    latest = t.latest_snapshot()
    assert latest is not None and latest.commit_kind == "COMPACT"


def test_batch_job_compacts_a_rescaled_table(tmp_path: Any) -> None:
    """Partitions written with 2 buckets, then (after ``bucket`` went to 4) one rewritten with 4 and
    a new one written with 4: the full compaction job compacts every bucket of every partition with
    the partition's own count (the commit keeps each partition's count), and the table reads the
    same values before and after."""
    from lakelog.connector.format.schema_changes import SetOption

    from ..buckets_util import assert_keys_in_their_buckets

    wh = str(tmp_path / "wh")
    t = _pk_table(wh)
    expected: dict[tuple[str, int], str] = {}
    for i in range(4):
        for dt in ("a", "b"):
            _write(t, dt, i, expected)
    t.alter(SetOption("bucket", "4"))
    assert t.rescale(partitions=[{"dt": "b"}]) is not None
    for i in range(4, 8):
        for dt in ("a", "b", "c"):
            _write(t, dt, i, expected)

    def layout() -> dict[str, set[tuple[int, int]]]:
        out: dict[str, set[tuple[int, int]]] = {}
        for e in t.store.live_entries(t.refresh().latest_snapshot()):
            out.setdefault(t.store.partition_values(e.partition)[0], set()).add((e.bucket, e.total_buckets))
        return out

    before = layout()
    assert before == {
        "a": {(0, 2), (1, 2)},
        "b": {(b, 4) for b in range(4)},
        "c": {(b, 4) for b in range(4)},
    }
    assert _content(t) == expected
    runs = sorted_run_counts(t.store)
    assert len(runs) == 10 and max(runs.values()) > 1
    last = t.latest_snapshot()
    assert last is not None

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main(["--warehouse", wh, "compact", "db.t", "--job", "--full", "--parallelism", "2"])
    assert rc == 0, out.getvalue()
    snaps = t.refresh().snapshots()
    assert [s.commit_kind for s in snaps if s.id > last.id] == ["COMPACT"]
    assert layout() == before
    after = sorted_run_counts(t.store)
    assert set(after) == set(runs) and set(after.values()) == {1}
    assert _content(t) == expected
    assert_keys_in_their_buckets(t)
