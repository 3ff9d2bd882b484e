"""The PyFlink sink on a rescaled fixed-bucket table (each partition keeps the bucket count it was
written with until it is rewritten), on a real MiniCluster."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.connector.format.schema_changes import SetOption  # noqa: E402

from ..buckets_util import assert_keys_in_their_buckets, file_keys  # noqa: E402

pytestmark = [pytest.mark.slow]

from tests.flink.minicluster import ship_by_value, two_taskmanagers  # noqa: E402

ship_by_value(__name__)

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)
ROW_NAMES = ["dt", "id", "v"]
CONF = two_taskmanagers()


def rows(dt: str, ids: Any, v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


class Numbered:
    """Test-only map: number ``i`` -> Row(dt = dts[i % len(dts)], id = i % keys, v = "<tag><i>"),
    sleeping ``pause_s`` every 200 rows (so that a job spans several checkpoints)."""

    def __init__(self, dts: list[str], keys: int, tag: str, pause_s: float = 0.0) -> None:
        self.dts, self.keys, self.tag, self.pause_s = dts, keys, tag, pause_s

    def __call__(self, i: int) -> Any:
        from pyflink.common import Row

        if self.pause_s and i % 200 == 0:
            time.sleep(self.pause_s)
        return Row(dt=self.dts[i % len(self.dts)], id=i % self.keys, v=f"{self.tag}{i}")


def numbered_stream(env: Any, n: int, fn: Any) -> Any:
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    # one source subtask: the rows of a key arrive in order (the sink keeps the order per subtask)
    return (
        env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .set_parallelism(1)
        .map(fn, output_type=Types.ROW_NAMED(ROW_NAMES, [Types.STRING(), Types.LONG(), Types.STRING()]))
        .set_parallelism(1)
    )


def expected_rows(n: int, fn: Numbered) -> dict[tuple[str, int], str]:
    """Last value per key (the rows come from one source subtask, in order)."""
    out: dict[tuple[str, int], str] = {}
    for i in range(n):
        out[(fn.dts[i % len(fn.dts)], i % fn.keys)] = f"{fn.tag}{i}"
    return out


def content(t: lakelog.Table) -> dict[tuple[str, int], str]:
    got = t.refresh().to_arrow()
    keys = list(zip(got.column("dt").to_pylist(), got.column("id").to_pylist()))
    assert len(keys) == len(set(keys)), "a key appears twice"
    return {(r["dt"], r["id"]): r["v"] for r in got.to_pylist()}


def partition_buckets(t: lakelog.Table) -> dict[str, set[tuple[int, int]]]:
    """``{dt: {(bucket, total buckets)}}`` of the live files."""
    store = t.store
    out: dict[str, set[tuple[int, int]]] = {}
    for e in store.live_entries(t.latest_snapshot()):
        out.setdefault(store.partition_values(e.partition)[0], set()).add((e.bucket, e.total_buckets))
    return out


def assert_levels_are_sorted_runs(t: lakelog.Table) -> None:
    """Every level above 0 of every bucket is one sorted run (its files' key ranges do not overlap),
    as Paimon's readers and compactors require (its ``SortedRun`` refuses overlapping files)."""
    store = t.store
    levels: dict[tuple[bytes, int, int], list[tuple[Any, Any]]] = {}
    for e in store.live_entries(t.latest_snapshot()):
        if e.file.level == 0:
            continue
        keys = sorted(zip(*(c.to_pylist() for c in file_keys(t, e).columns)))
        levels.setdefault((e.partition, e.bucket, e.file.level), []).append((keys[0], keys[-1]))
    for (p, b, level), ranges in levels.items():
        ranges.sort()
        for (_, high), (low, _) in zip(ranges, ranges[1:]):
            assert high < low, (
                f"level {level} of bucket {b} of {store.partition_values(p)} holds overlapping files: "
                f"{ranges}"
            )


@pytest.mark.parametrize("java", [True, False], ids=["java-batcher", "python-only"])
def test_sink_routes_each_partition_by_its_own_count(tmp_path: Any, flink_env: Any, java: bool) -> None:
    """Partitions A and B were written with 2 buckets; the table went to 4 and only B was rewritten
    (``rescale``). A job upserting into A, B and a new partition C routes A's keys by 2, B's and
    C's by 4 (on both sink paths): its commits are accepted, every key sits in the bucket Paimon's
    hash gives for its partition's count, each level above 0 stays one sorted run (one writer per
    bucket), and the table reads as the last row per key."""
    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table(
        "db.t",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "2"},
    )
    t.write(rows("A", range(60), "a"))
    t.write(rows("B", range(60), "b"))
    t.alter(SetOption("bucket", "4"))
    assert t.rescale(partitions=[{"dt": "B"}]) is not None
    assert partition_buckets(t) == {"A": {(0, 2), (1, 2)}, "B": {(b, 4) for b in range(4)}}

    n = 3_000
    fn = Numbered(["A", "B", "C"], 121, "flink", pause_s=0.2)  # 121 keys: every (dt, id) pair
    # the input and the sink's batching stage at parallelism 1 (the Python-only path's UDF would
    # otherwise take the job's parallelism and interleave a key's rows), two writers
    env = flink_env(parallelism=1, checkpoint_interval_ms=1000, config=CONF)
    src = numbered_stream(env, n, fn)
    sink_to_lakelog(src, t.path, channel_dir=str(tmp_path / "ch"), java=java, parallelism=2)
    env.execute("sink-into-a-rescaled-table")

    want = {("A", i): f"a{i}" for i in range(60)}
    want.update({("B", i): f"b{i}" for i in range(60)})
    want.update(expected_rows(n, fn))
    assert content(t) == want
    layout = partition_buckets(t)
    assert layout == {
        "A": {(0, 2), (1, 2)},
        "B": {(b, 4) for b in range(4)},
        "C": {(b, 4) for b in range(4)},
    }
    assert_keys_in_their_buckets(t)
    assert_levels_are_sorted_runs(t)


class Phased:
    """Test-only map: number ``i`` -> Row(dt = "A" or "B" before ``switch``, "D" from it on, id =
    i % keys, v = "p<i>"); at ``switch`` it changes the table's ``bucket`` to 4 itself (an ALTER
    while the job runs, deterministic: before any row of "D" exists)."""

    def __init__(self, switch: int, keys: int, warehouse: str, table: str) -> None:
        self.switch, self.keys, self.warehouse, self.table = switch, keys, warehouse, table

    def __call__(self, i: int) -> Any:
        from pyflink.common import Row

        if i == self.switch:
            t = lakelog.Catalog(self.warehouse).get_table(self.table)
            if t.options["bucket"] != "4":
                t.alter(SetOption("bucket", "4"))
        dt = ("A", "B")[i % 2] if i < self.switch else "D"
        return Row(dt=dt, id=i % self.keys, v=f"p{i}")


def test_sink_keeps_its_planned_count_for_partitions_new_after_an_alter(
    tmp_path: Any, flink_env: Any
) -> None:
    """A job planned while the table had 2 buckets keeps writing as its schema says (as Paimon's
    running writers do): an ALTER to 4 while it runs does not change its routing, a partition it
    first sees after the ALTER gets 2 buckets in the splitter and in the writers alike, and its
    commits are accepted. The next job, planned after the ALTER, writes a new partition with 4."""
    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    n, switch = 2_000, 1_000
    fn = Phased(switch, 150, str(tmp_path / "wh"), "db.t")
    env = flink_env(parallelism=1, checkpoint_interval_ms=500, config=CONF)
    sink_to_lakelog(numbered_stream(env, n, fn), t.path, channel_dir=str(tmp_path / "ch"), parallelism=2)
    env.execute("sink-across-an-alter")
    assert t.refresh().options["bucket"] == "4"  # the job's own map altered the table

    want = {}
    for i in range(n):
        want[(("A", "B")[i % 2] if i < switch else "D", i % 150)] = f"p{i}"
    assert content(t) == want
    assert partition_buckets(t) == {dt: {(0, 2), (1, 2)} for dt in ("A", "B", "D")}
    assert_keys_in_their_buckets(t)

    env2 = flink_env(parallelism=1, checkpoint_interval_ms=500, config=CONF)
    fn2 = Numbered(["A", "E"], 40, "q")
    sink_to_lakelog(numbered_stream(env2, 400, fn2), t.path, channel_dir=str(tmp_path / "ch2"), parallelism=2)
    env2.execute("sink-after-the-alter")
    want.update(expected_rows(400, fn2))
    assert content(t) == want
    layout = partition_buckets(t)
    assert layout["A"] == {(0, 2), (1, 2)} and layout["E"] == {(b, 4) for b in range(4)}
    assert_keys_in_their_buckets(t)
    assert_levels_are_sorted_runs(t)


def test_writer_refuses_rows_routed_by_another_count(tmp_path: Any) -> None:
    """A partition rescaled after the splitter learned its count: the writer's TableWrite learns the
    new count from the partition's files and refuses the blob (naming partition and counts) instead
    of writing its keys into buckets of the old count; rows routed by the right count pass."""
    from lakelog.connector.errors import CommitConflictError
    from lakelog.connector.table.write import TableWrite
    from lakelog.operators.sink import LakelogWriter, WriterConfig
    from lakelog.operators.sink_blobs import BatchSplitter, blob_key, decode_group, open_store

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    t.write(rows("A", range(20), "a"))
    t.alter(SetOption("bucket", "4"))
    sink = pa.BufferOutputStream()
    batch = rows("A", range(20), "x")
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_table(batch)
    data = sink.getvalue().to_pybytes()
    stale = list(BatchSplitter(t.path, None, t.store.schema.id).split(data))  # learns A: 2 buckets
    t.rescale(partitions=[{"dt": "A"}])  # now 4
    fresh = list(BatchSplitter(t.path, None, t.store.schema.id).split(data))

    cfg = WriterConfig(t.path, "u", "r", None, None, True, None, 1.0, t.store.schema.id)
    writer = LakelogWriter(cfg)
    writer.store = open_store(t.path, cfg.schema_id)
    tw = TableWrite(open_store(t.path, cfg.schema_id))
    assert {decode_group(b)[2] for b in stale} == {2}
    with pytest.raises(CommitConflictError, match=r"dt=A.*\[2\] buckets.*record 4"):
        writer._check_count(blob_key(stale[0]), tw, {2})
    assert {decode_group(b)[2] for b in fresh} == {4}
    for blob in fresh:
        writer._check_count(blob_key(blob), tw, {4})
    tw.close()
