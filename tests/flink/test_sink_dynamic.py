"""The PyFlink sink on dynamic-bucket (``bucket = -1``, Paimon's hash index) and cross-partition
upsert tables, on a real MiniCluster: one writer per partition assigns the buckets (one writer for a
cross-partition table), across checkpoints, a failover and two jobs at once."""

from __future__ import annotations

import importlib.util
import os
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.operators.committer import COMMITTABLES_PROPERTY  # noqa: E402

from ..buckets_util import assert_keys_in_their_buckets, file_keys  # noqa: E402

pytestmark = [pytest.mark.slow]

from tests.flink.minicluster import ship_by_value, two_taskmanagers  # noqa: E402

ship_by_value(__name__)

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)
ROW_NAMES = ["dt", "id", "v"]
CONF = two_taskmanagers(300)
DYNAMIC = {"bucket": "-1", "dynamic-bucket.target-row-num": "25"}


class Upserts:
    """Test-only map: number ``i`` -> Row(dt, id, v = "<tag><i>"). Dynamic tables (``move=False``):
    dt = dts[i % len(dts)], id = (7 * i) % keys. Cross-partition tables (``move=True``): id = i % keys,
    dt = dts[(i // keys) % len(dts)], so every key changes partition each round. Sleeps ``pause_s``
    every 200 rows (the job spans several checkpoints). With ``fail_marker``: raises once (the marker
    file remembers it) after ``fail_after`` rows, once the table has a committed snapshot (slowing
    down a few ms per row until then, never one long wait that would hold up that commit). With
    ``meet`` (a folder) and ``party`` (the tags of the jobs that run at once): at each row number of
    ``meet_at`` the map leaves a file and waits until every job of the party has reached that row,
    so that jobs whose clusters start at different times still write at the same time."""

    def __init__(
        self, dts: list[str], keys: int, tag: str, move: bool = False, pause_s: float = 0.2,
        fail_marker: str = "", fail_after: int = 0, watched: str = "",
        meet: str = "", party: tuple[str, ...] = (), meet_at: tuple[int, ...] = (),
    ) -> None:
        self.dts, self.keys, self.tag, self.move, self.pause_s = dts, keys, tag, move, pause_s
        self.fail_marker, self.fail_after, self.watched = fail_marker, fail_after, watched
        self.meet, self.party, self.meet_at = meet, party, meet_at
        self.seen = 0

    def rendezvous(self, i: int) -> None:
        open(os.path.join(self.meet, f"{self.tag}-{i}"), "w").close()
        deadline = time.monotonic() + 300
        while not all(os.path.exists(os.path.join(self.meet, f"{p}-{i}")) for p in self.party):
            if time.monotonic() > deadline:
                raise RuntimeError(f"test-only rendezvous at row {i}: the other jobs never came")
            time.sleep(0.05)

    def row(self, i: int) -> tuple[str, int, str]:
        if self.move:
            return self.dts[(i // self.keys) % len(self.dts)], i % self.keys, f"{self.tag}{i}"
        return self.dts[i % len(self.dts)], (7 * i) % self.keys, f"{self.tag}{i}"

    def __call__(self, i: int) -> Any:
        from pyflink.common import Row

        self.seen += 1
        if self.meet and i in self.meet_at:
            self.rendezvous(i)
        if self.pause_s and i % 200 == 0:
            time.sleep(self.pause_s)
        if self.fail_marker and self.seen >= self.fail_after and not os.path.exists(self.fail_marker):
            snap_dir = os.path.join(self.watched, "snapshot")
            if os.path.isdir(snap_dir) and any(f.startswith("snapshot-") for f in os.listdir(snap_dir)):
                with open(self.fail_marker, "w") as fh:
                    fh.write(str(self.seen))
                raise RuntimeError(f"test-only failure after {self.seen} rows")
            time.sleep(0.004)
        dt, k, v = self.row(i)
        return Row(dt=dt, id=k, v=v)


def upsert_stream(env: Any, n: int, fn: Upserts) -> Any:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    # one source subtask: the rows of a key arrive in order (the sink keeps the order per subtask)
    return (
        env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .set_parallelism(1)
        .map(fn, output_type=Types.ROW_NAMED(ROW_NAMES, [Types.STRING(), Types.LONG(), Types.STRING()]))
        .set_parallelism(1)
    )


def oracle(n: int, fn: Upserts) -> dict[Any, tuple[str, int, str]]:
    """The last row of each key: (dt, id) for dynamic tables, id for cross-partition ones."""
    out: dict[Any, tuple[str, int, str]] = {}
    for i in range(n):
        dt, k, v = fn.row(i)
        out[k if fn.move else (dt, k)] = (dt, k, v)
    return out


def table_rows(t: lakelog.Table) -> list[tuple[str, int, str]]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.refresh().to_arrow().to_pylist())


def assert_each_key_in_one_bucket(t: lakelog.Table) -> dict[str, set[int]]:
    """No key of a partition in the live files of two buckets; ``{dt: buckets}``."""
    store = t.store
    owner: dict[tuple[bytes, Any], int] = {}
    buckets: dict[str, set[int]] = {}
    for e in store.live_entries(t.latest_snapshot()):
        buckets.setdefault(store.partition_values(e.partition)[0], set()).add(e.bucket)
        for key in zip(*(c.to_pylist() for c in file_keys(t, e).columns)):
            seen = owner.setdefault((e.partition, key), e.bucket)
            assert seen == e.bucket, f"key {key} of {store.partition_values(e.partition)} in buckets {seen} and {e.bucket}"
    return buckets


def assert_exactly_once_commits(t: lakelog.Table) -> Counter[str]:
    """No (commit user, identifier, kind) twice, no committable committed twice; the commit users."""
    snaps = t.store.snapshot_manager.snapshots()
    idents = Counter((s.commit_user, s.commit_identifier, s.commit_kind) for s in snaps)
    assert max(idents.values()) == 1, [k for k, c in idents.items() if c > 1]
    ids = Counter(
        (i, s.commit_kind) for s in snaps for i in (s.properties or {}).get(COMMITTABLES_PROPERTY, "").split(",")
    )
    assert max(ids.values()) == 1, [k for k, c in ids.items() if c > 1]
    return Counter(s.commit_user for s in snaps)


def assert_pypaimon_reads_the_same(warehouse: str, name: str, t: lakelog.Table) -> None:
    if importlib.util.find_spec("pypaimon") is None:
        return  # the oracle is optional; lakelog's own checks above stand
    from ..interop_util import assert_same_rows, pp_read

    assert_same_rows(pp_read(warehouse, name), t.refresh().to_arrow(), f"pypaimon reading {name}")


@pytest.mark.parametrize(
    ("failover", "java"), [(False, True), (True, True), (False, False)], ids=["steady", "failover", "python-only"]
)
def test_streaming_upserts_into_a_dynamic_bucket_table(
    tmp_path: Any, flink_env: Any, failover: bool, java: bool
) -> None:
    """A streaming job upserts 3 partitions of a dynamic-bucket table with 25 keys per bucket over
    several checkpoints (with ``failover``: its map fails once after a commit, the job restarts from
    the checkpoint; ``python-only``: the pandas-UDF batching path). The table equals the last row
    per key, every partition got several buckets, no key lies in two buckets, the hash index agrees
    with the files, and pypaimon reads the same."""
    from lakelog.operators.sink import sink_to_lakelog

    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table(
        "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=DYNAMIC
    )
    t.write(pa.table({"dt": ["A"] * 30, "id": list(range(0, 300, 10)), "v": ["before"] * 30}, schema=SCHEMA))
    n = 4_000
    marker = str(tmp_path / "failed-once")
    fn = Upserts(["A", "B", "C"], 200, "f", fail_marker=marker if failover else "", fail_after=1_500,
                 watched=t.path)
    # the Python-only path's UDF takes the job's parallelism: 1, so that a key's rows stay in order
    env = flink_env(parallelism=2 if java else 1, checkpoint_interval_ms=500, restarts=3 if failover else 0,
                    config=CONF)
    sink_to_lakelog(upsert_stream(env, n, fn), t.path, channel_dir=str(tmp_path / "ch"), parallelism=2,
                    java=java)
    env.execute("sink-dynamic-buckets")
    assert os.path.exists(marker) == failover

    want = {("A", i): ("A", i, "before") for i in range(0, 300, 10)}
    want.update(oracle(n, fn))
    assert table_rows(t) == sorted(want.values())
    buckets = assert_each_key_in_one_bucket(t)
    assert set(buckets) == {"A", "B", "C"} and all(len(b) >= 4 for b in buckets.values()), buckets
    assert_keys_in_their_buckets(t.refresh())
    users = assert_exactly_once_commits(t)
    assert len(t.store.snapshot_manager.snapshots()) > 3, users  # committed while running
    assert_pypaimon_reads_the_same(wh, "db.d", t)


@pytest.mark.parametrize("bucket", ["-1", "2"])
def test_streaming_upserts_move_keys_between_partitions(tmp_path: Any, flink_env: Any, bucket: str) -> None:
    """Cross-partition upsert (primary key ``id`` without the partition field ``dt``; dynamic or fixed
    buckets): every key changes partition each round. Each key ends in exactly one partition, the
    one of its last row, with that row (the old partitions lost it: ``-D`` there)."""
    from lakelog.operators.sink import sink_to_lakelog

    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table(
        "db.x", SCHEMA, primary_key=["id"], partition_by=["dt"], options={"bucket": bucket}
    )
    t.write(pa.table({"dt": ["Z"] * 50, "id": list(range(50)), "v": ["before"] * 50}, schema=SCHEMA))
    n = 2_500
    fn = Upserts(["A", "B", "C"], 120, "m", move=True)
    env = flink_env(parallelism=2, checkpoint_interval_ms=500, restarts=0, config=CONF)
    sink_to_lakelog(upsert_stream(env, n, fn), t.path, channel_dir=str(tmp_path / "ch"), parallelism=2)
    env.execute("sink-cross-partition")

    want = oracle(n, fn)
    assert table_rows(t) == sorted(want.values())
    ids = [r[1] for r in table_rows(t)]
    assert len(ids) == len(set(ids)) == 120  # the 50 keys of Z moved out of it
    # the moves were committed as they happened: snapshots of the job took keys out of partitions
    # (-D there) while putting them into others (+I), Z's keys included
    first = t.store.snapshot_manager.snapshots()[0].id
    appends = [s.id for s in t.store.snapshot_manager.snapshots() if s.commit_kind == "APPEND" and s.id > first]
    assert len(appends) > 3
    moved: set[tuple[str, int]] = set()  # (partition a key left, key)
    moving_snapshots = 0
    for sid in appends:
        changes = t.changes(sid - 1, sid).to_pylist()  # a key per row pair: the old row, the new one
        old = {r["id"]: r["dt"] for r in changes if r["rowkind"] in ("-U", "-D")}
        new = {r["id"]: r["dt"] for r in changes if r["rowkind"] in ("+I", "+U")}
        here = {(dt, k) for k, dt in old.items() if k in new and new[k] != dt}
        moving_snapshots += bool(here)
        moved |= here
    assert {("Z", i) for i in range(50)} <= moved
    # which of A, B, C a snapshot catches a key leaving depends on where the checkpoints fall (a
    # snapshot may span several rounds): at least one of them, in more than one snapshot
    assert {dt for dt, _ in moved} - {"Z"} and moving_snapshots > 1, (moved, moving_snapshots)
    assert_exactly_once_commits(t)
    assert_keys_in_their_buckets(t.refresh())
    assert_pypaimon_reads_the_same(wh, "db.x", t)


def test_two_jobs_write_partitions_of_one_dynamic_bucket_table_at_once(tmp_path: Any, flink_env: Any) -> None:
    """Two streaming jobs (one MiniCluster each, through ``execute_async``, running at the same time)
    upsert different partitions of one dynamic-bucket table: nothing lost or duplicated, each key in
    one bucket, the index agrees, both commit users committed while the other ran."""
    from lakelog.operators.sink import sink_to_lakelog

    wh = str(tmp_path / "wh")
    t = lakelog.Catalog(wh).create_table(
        "db.d", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=DYNAMIC
    )
    meet = dict(meet=str(tmp_path), party=("a", "b"), meet_at=(0, 1_250))
    jobs = [(Upserts(["P1"], 150, "a", **meet), 2_500), (Upserts(["P2", "P3"], 150, "b", **meet), 2_500)]
    clients = []
    for k, (fn, n) in enumerate(jobs):
        env = flink_env(parallelism=1, checkpoint_interval_ms=500, restarts=0,
                        config={"python.fn-execution.bundle.size": "300", "python.fn-execution.bundle.time": "100"})
        sink_to_lakelog(upsert_stream(env, n, fn), t.path, channel_dir=str(tmp_path / f"ch{k}"))
        clients.append(env.execute_async(f"dynamic-job-{k}"))
    for k, client in enumerate(clients):
        result = client.get_job_execution_result()
        deadline = time.monotonic() + 400
        while not result.done():  # the result future, not the status: a local job's cluster goes away
            assert time.monotonic() < deadline, f"job {k} did not finish"
            time.sleep(0.5)
        result.result()

    want: dict[Any, tuple[str, int, str]] = {}
    for fn, n in jobs:
        want.update(oracle(n, fn))
    assert table_rows(t) == sorted(want.values())
    buckets = assert_each_key_in_one_bucket(t)
    assert set(buckets) == {"P1", "P2", "P3"}
    assert_keys_in_their_buckets(t.refresh())
    users = assert_exactly_once_commits(t)
    assert len(users) == 2, users
    seq = [s.commit_user for s in t.store.snapshot_manager.snapshots()]
    switches = sum(1 for a, b in zip(seq, seq[1:]) if a != b)
    assert switches >= 2, f"the jobs did not commit at the same time: {seq}"
    assert_pypaimon_reads_the_same(wh, "db.d", t)
