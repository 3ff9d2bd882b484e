"""Rescales on a real MiniCluster (issue 15): a streaming reader following a table through an ALTER
of ``bucket`` and a rescale; a rescale racing a streaming sink job into another partition while
the streaming compaction job runs; and ``INSERT OVERWRITE`` of a partition as a rescale in SQL."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.connector.format.schema_changes import SetOption  # noqa: E402

from ..buckets_util import assert_keys_in_their_buckets  # noqa: E402
from .sqlkit import session  # noqa: E402

pytestmark = [pytest.mark.slow]

from tests.flink.minicluster import ship_by_value  # noqa: E402

ship_by_value(__name__)

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)
ROW_NAMES = ["dt", "id", "v"]
Key = tuple[str, int]


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def content(t: lakelog.Table) -> dict[Key, str]:
    got = t.refresh().to_arrow()
    keys = list(zip(got.column("dt").to_pylist(), got.column("id").to_pylist()))
    assert len(keys) == len(set(keys)), "a key appears twice"
    return {(r["dt"], r["id"]): r["v"] for r in got.to_pylist()}


def counts(t: lakelog.Table) -> dict[str, int]:
    return {p[0]: n for p, n in t.refresh().bucket_counts().items()}


# ---- 1. a streaming reader follows a rescale ------------------------------------------------------------
class Upserts:
    """Python writes with the change rows a streaming reader must emit for them: +I for a new key,
    -U old / +U new for an updated one (every write gives new values)."""

    def __init__(self, t: lakelog.Table) -> None:
        self.t = t
        self.state: dict[Key, str] = {}
        self.changes: list[tuple[str, Key, str]] = []

    def write(self, dt: str, ids: Any, v: str) -> None:
        batch = rows(dt, ids, v)
        self.t.write(batch)
        for r in batch.to_pylist():
            key = (r["dt"], r["id"])
            if key in self.state:
                self.changes += [("-U", key, self.state[key]), ("+U", key, r["v"])]
            else:
                self.changes.append(("+I", key, r["v"]))
            self.state[key] = r["v"]


@pytest.mark.parametrize("reader", ["datastream", "sql"])
def test_streaming_reader_follows_an_alter_and_a_rescale(tmp_path: Any, flink_env: Any, reader: str) -> None:
    """A Flink streaming read (``read_lakelog``, or a streaming SQL SELECT) of a partitioned primary-key table (2 buckets) runs while Python
    upserts A and B, sets ``bucket`` to 4, rescales A, and upserts A (now 4 buckets), B (still 2)
    and a new partition C (4). The reader emits exactly the change rows of the writes (the
    OVERWRITE of the rescale none: its rows are the same), its +I/-U/+U/-D rows applied to a dict
    give the table's final content, and updates of A after the rescale come as -U/+U of the rows
    it rewrote."""
    from pyflink.common import RowKind

    from lakelog.operators.source import read_lakelog

    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    w = Upserts(t)
    w.write("A", range(40), "a")
    w.write("B", range(40), "b")
    kinds = {RowKind.INSERT: "+I", RowKind.UPDATE_BEFORE: "-U", RowKind.UPDATE_AFTER: "+U", RowKind.DELETE: "-D"}
    rescaled: list[Optional[int]] = []

    def stage_2() -> None:
        w.write("A", range(20, 60), "a2-")
        w.write("B", range(0, 80, 3), "b2-")
        t.alter(SetOption("bucket", "4"))
        rescaled.append(t.rescale(partitions=[{"dt": "A"}]))
        assert counts(t) == {"A": 4, "B": 2}

    def stage_3() -> None:
        w.write("A", range(0, 70, 2), "a3-")  # updates of rows the rescale rewrote, and new keys
        w.write("B", range(30, 50), "b3-")
        w.write("C", range(25), "c")
        t.delete(pa.table({"dt": ["A", "B"], "id": [5, 6]}))
        w.changes += [("-D", ("A", 5), w.state.pop(("A", 5))), ("-D", ("B", 6), w.state.pop(("B", 6)))]
        w.write("Z", [0], "end")  # the sentinel: every snapshot before it has been read

    # each stage starts once the reader has emitted everything written before it
    stages = [(len(w.changes), stage_2), (None, stage_3)]
    t0 = time.monotonic()
    if reader == "datastream":
        env = flink_env(
            mode="streaming", parallelism=2, checkpoint_interval_ms=500, config={"restart-strategy.type": "none"}
        )
        ds = read_lakelog(env, t.path, mode="streaming", discovery_interval=0.1, columns=ROW_NAMES)
        it = ds.execute_and_collect()
    else:
        sql = session("streaming", checkpoint_interval_ms=500, parallelism=2)
        sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{tmp_path / 'wh'}')")
        sql.execute("USE CATALOG lk")
        it = sql.execute(
            "SELECT dt, id, v FROM db.t /*+ OPTIONS('continuous.discovery-interval' = '100 ms') */"
        ).collect()
    got: list[tuple[str, Key, str]] = []
    try:
        for r in it:
            got.append((kinds[r.get_row_kind()], (r[0], r[1]), r[2]))
            if stages and stages[0][0] == len(got):
                stages.pop(0)[1]()
                if stages:
                    stages[0] = (len(w.changes), stages[0][1])
            if got[-1] == ("+I", ("Z", 0), "end0"):
                break
    finally:
        it.close()
    print(f"{reader} streaming read across a rescale: {time.monotonic() - t0:.1f} s, {len(got)} change rows")

    assert rescaled and rescaled[0] is not None
    assert t.refresh().snapshot(rescaled[0]).commit_kind == "OVERWRITE"
    assert not stages, f"the reader stopped early: {len(got)} rows"
    # exactly the writes' changes: the rescale (40 + 20 rows of A rewritten) emitted nothing
    assert Counter(got) == Counter(w.changes)
    # and in order per key (-U before its +U, the snapshots in commit order)
    per_key: dict[Key, list[tuple[str, str]]] = {}
    for kind, key, v in got:
        per_key.setdefault(key, []).append((kind, v))
    want_per_key: dict[Key, list[tuple[str, str]]] = {}
    for kind, key, v in w.changes:
        want_per_key.setdefault(key, []).append((kind, v))
    assert per_key == want_per_key
    followed: dict[Key, str] = {}
    for kind, key, v in got:
        if kind in ("+I", "+U"):
            followed[key] = v
        else:
            assert followed.pop(key) == v, f"{kind} of {key} retracts a value the reader never saw"
    assert followed == content(t) == w.state
    assert counts(t) == {"A": 4, "B": 2, "C": 4, "Z": 4}
    assert_keys_in_their_buckets(t)


# ---- 2. a rescale races a streaming sink job and the compaction job --------------------------------------
class SlowUpserts:
    """Test-only map: number ``i`` -> Row(dt = "B", id = i % keys, v = "s<i>"), sleeping ``pause_s``
    every 100 rows so that the job spans many checkpoints (and commits). From row ``n // 2`` on
    it slows down (never one long wait: the checkpoints that commit must go on) until the table
    at ``table_path`` has an OVERWRITE snapshot, for at most ``wait_s``: the second half of the
    rows is written after the rescale."""

    def __init__(self, keys: int, n: int, pause_s: float, table_path: str, wait_s: float = 150.0) -> None:
        self.keys, self.n, self.pause_s, self.table_path, self.wait_s = keys, n, pause_s, table_path, wait_s
        self.overwritten = False
        self.waited_since: Optional[float] = None

    def __call__(self, i: int) -> Any:
        from pyflink.common import Row

        from lakelog.connector.format.store import TableStore

        if i % 100 == 0 and i:
            time.sleep(self.pause_s)
        if i >= self.n // 2 and not self.overwritten:
            if self.waited_since is None:
                self.waited_since = time.monotonic()
            if i % 20 == 0:
                snaps = TableStore(self.table_path).snapshot_manager.newest_first()
                self.overwritten = any(s.commit_kind == "OVERWRITE" for s in snaps)
            if time.monotonic() - self.waited_since > self.wait_s:
                self.overwritten = True
            time.sleep(0.02)
        return Row(dt="B", id=i % self.keys, v=f"s{i}")


def unreferenced_files(t: lakelog.Table, dt: str) -> set[str]:
    """Paths of data files under partition ``dt`` that the latest snapshot does not list (files of
    a compaction not committed yet)."""
    store = t.store
    live = {
        store.data_file_path(e.partition, e.bucket, e.file.file_name)
        for e in store.live_entries(store.snapshot_manager.latest())
    }
    root = os.path.join(t.path, f"dt={dt}")
    out = set()
    for bucket in os.listdir(root) if os.path.isdir(root) else []:
        for name in os.listdir(os.path.join(root, bucket)):
            path = os.path.join(root, bucket, name)
            if path not in live and not name.startswith("."):
                out.add(path)
    return out


def _finish(client: Any, what: str, timeout_s: float = 300.0) -> None:
    # the result future, not the job status: a local job's MiniCluster goes away when it ends
    result = client.get_job_execution_result()
    deadline = time.monotonic() + timeout_s
    while not result.done():
        assert time.monotonic() < deadline, f"{what} did not finish"
        time.sleep(0.5)
    result.result()  # raises if the job failed


def test_rescale_races_a_sink_job_and_the_compaction_job(tmp_path: Any, flink_env: Any) -> None:
    """A write-only table, A and B written with 2 buckets, A with enough sorted runs to be
    compacted. The streaming compaction job and a streaming sink job upserting B run (neither may
    restart): the compaction job is started once the sink has committed into B, and Python
    rescales A to 4 buckets (``buckets=``: the option stays 2) as soon as the compactor has written
    the compaction of A's 2 buckets, then upserts A (routed by 4). The sink's second half of rows
    waits for the rescale, so it commits into B before and after it; Python upserts B at the end.

    By design: the sink's commits into B do not touch A, so the rescale's guard lets them pass; a
    compaction of A planned before the rescale names files the OVERWRITE removed, and the
    compaction committer drops it (its inputs are stale) rather than failing; compactions
    committed after the rescale compact A's 4 buckets. Checked: both jobs end FINISHED (no commit
    failed permanently), one OVERWRITE, the table is the last row per key, A has 4 buckets and B
    2, every key in its bucket by its partition's count, and the compaction job compacted."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from lakelog.jobs.compact import start_compaction
    from lakelog.operators.sink import sink_to_lakelog

    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.t",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "2", "write-only": "true"},
    )
    want: dict[Key, str] = {}

    def write(dt: str, ids: Any, v: str) -> None:
        batch = rows(dt, ids, v)
        t.write(batch)
        want.update({(r["dt"], r["id"]): r["v"] for r in batch.to_pylist()})

    for i in range(6):  # 6 sorted runs per bucket of A: over the compaction trigger (5)
        write("A", range(i * 10, i * 10 + 40), f"a{i}-")
    write("B", range(100), "b")
    assert counts(t) == {"A": 2, "B": 2}

    t0 = time.monotonic()
    n, keys = 3_000, 150
    no_restarts = {"restart-strategy.type": "none"}  # a failed commit fails the job
    env = flink_env(
        parallelism=1,
        checkpoint_interval_ms=1000,
        config={**no_restarts, "python.fn-execution.bundle.time": "100"},
    )
    src = (
        env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .set_parallelism(1)
        .map(
            SlowUpserts(keys, n, 0.4, t.path),
            output_type=Types.ROW_NAMED(ROW_NAMES, [Types.STRING(), Types.LONG(), Types.STRING()]),
        )
        .set_parallelism(1)
    )
    plan = sink_to_lakelog(src, t.path, channel_dir=str(tmp_path / "chs"), parallelism=2)
    client = env.execute_async("upsert-B")

    def sink_commits() -> int:
        return sum(s.commit_user == plan.committer.commit_user for s in t.refresh().snapshots())

    deadline = time.monotonic() + 120
    while sink_commits() == 0:
        assert time.monotonic() < deadline, "the sink job committed nothing"
        time.sleep(0.2)
    # the compaction job starts now and compacts A's 2 buckets; the rescale goes in as soon as
    # the compactor has written its output (committed only after a checkpoint, 3 s apart)
    cenv = flink_env(parallelism=2, checkpoint_interval_ms=3000, config=no_restarts)
    job = start_compaction(cenv, t.path, streaming=True, discovery_interval=0.5, channel_dir=str(tmp_path / "chc"))
    assert job is not None
    in_flight: set[str] = set()
    while not in_flight:
        assert time.monotonic() < deadline + 120, "the compaction job did not compact A"
        in_flight = unreferenced_files(t, "A")
        time.sleep(0.05)
    sid = t.rescale(partitions=[{"dt": "A"}], buckets=4)
    assert sid is not None
    assert counts(t) == {"A": 4, "B": 2} and t.options["bucket"] == "2"
    for i in range(6, 12):  # upserts into A after the rescale: the compaction job has work there again
        write("A", range(i * 10, i * 10 + 40), f"a{i}-")
        time.sleep(0.3)
    sink_running = not client.get_job_execution_result().done()
    _finish(client, "the sink job")
    write("B", range(0, keys, 7), "late")  # after the job: the last word on these keys
    summary = job.stop_when_idle(5.0, timeout_s=180)
    print(f"rescale racing a sink job and the compaction job: {time.monotonic() - t0:.1f} s; {summary}")
    assert job.status() == "FINISHED"

    assert sink_running, "the sink job ended before the writes after the rescale: no race"
    for i in range(n):
        want[("B", i % keys)] = f"s{i}"
    want.update({("B", k): f"late{k}" for k in range(0, keys, 7)})
    snaps = t.refresh().snapshots()
    assert [s.id for s in snaps if s.commit_kind == "OVERWRITE"] == [sid]
    sink_ids = [s.id for s in snaps if s.commit_user == plan.committer.commit_user]
    assert min(sink_ids) < sid < max(sink_ids), "the sink committed before and after the rescale"
    compacts = [s for s in snaps if s.commit_kind == "COMPACT"]
    assert compacts and [s.id for s in compacts] == summary.snapshots
    # which counts of A each compaction committed: never A's 2 buckets after the rescale (a stale
    # compaction over the OVERWRITE would bring back the removed files), A's 4 buckets after it
    a_counts = {
        s.id: {e.total_buckets for e in t.store.delta_entries(s) if t.store.partition_values(e.partition) == ("A",)}
        for s in compacts
    }
    print(f"rescale: snapshot {sid}; counts of A per COMPACT snapshot: {a_counts}")
    assert all(c <= {4} for i, c in a_counts.items() if i > sid)
    # the compaction of A's 2 buckets in flight at the rescale: committed before it, or (its
    # inputs gone) dropped by the compaction committer, which deletes what it wrote
    committed_before = any(c == {2} for i, c in a_counts.items() if i < sid)
    left = {f for f in in_flight if os.path.exists(f)}
    print(f"the compaction of A in flight at the rescale was {'committed' if committed_before else 'dropped'}")
    assert committed_before or not left, f"a dropped compaction left {sorted(left)}"
    assert any(c == {4} for i, c in a_counts.items() if i > sid), "A was not compacted after the rescale"
    assert content(t) == want
    assert counts(t) == {"A": 4, "B": 2}
    assert_keys_in_their_buckets(t)


# ---- 3. INSERT OVERWRITE of a partition as a rescale, in SQL ---------------------------------------------
def test_sql_insert_overwrite_rescales_a_partition(tmp_path: Path) -> None:
    """``ALTER TABLE t SET ('bucket' = '4')`` on partitions written with 2 buckets, then ``INSERT
    OVERWRITE t PARTITION (dt = 'a') SELECT k, v FROM t WHERE dt = 'a'``: partition a is rewritten
    with 4 buckets in one OVERWRITE snapshot, b keeps 2, a new partition gets 4, and no row
    changes."""
    wh = str(tmp_path / "wh")
    sql = session()
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute(
        "CREATE TABLE t (dt STRING, k INT, v STRING, PRIMARY KEY (dt, k) NOT ENFORCED) "
        "PARTITIONED BY (dt) WITH ('bucket' = '2')"
    )
    t = lakelog.Catalog(wh).get_table("default.t")
    arrow = t.store.schema.arrow_schema()
    for ids, v in ((range(30), ""), (range(0, 30, 4), "new")):  # two sorted runs per bucket
        t.write(
            pa.table(
                {
                    "dt": [dt for dt in ("a", "b") for _ in ids],
                    "k": [k for _ in ("a", "b") for k in ids],
                    "v": [f"{v}{dt}{k}" for dt in ("a", "b") for k in ids],
                },
                schema=arrow,
            )
        )
    before = sorted(tuple(r.values()) for r in t.to_arrow().to_pylist())
    assert counts(t) == {"a": 2, "b": 2}
    last = t.latest_snapshot()
    assert last is not None

    sql.execute("ALTER TABLE t SET ('bucket' = '4')")
    sql.execute("INSERT OVERWRITE t PARTITION (dt = 'a') SELECT k, v FROM t WHERE dt = 'a'")
    t = t.refresh()
    assert [s.commit_kind for s in t.snapshots() if s.id > last.id] == ["OVERWRITE"]
    assert counts(t) == {"a": 4, "b": 2}
    assert sorted(tuple(r.values()) for r in t.to_arrow().to_pylist()) == before
    assert_keys_in_their_buckets(t)

    sql.execute("INSERT INTO t VALUES ('a', 3, 'newer3'), ('b', 4, 'newer4'), ('c', 1, 'c1')")
    assert counts(t) == {"a": 4, "b": 2, "c": 4}
    got = {(r["dt"], r["k"]): r["v"] for r in t.refresh().to_arrow().to_pylist()}
    assert (got[("a", 3)], got[("b", 4)], got[("a", 4)], got[("c", 1)]) == ("newer3", "newer4", "newa4", "c1")
    assert len(got) == 61
    assert_keys_in_their_buckets(t)

