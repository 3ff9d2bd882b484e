"""The PyFlink sink on a real MiniCluster: exactly-once across a failover, and batch mode."""

from __future__ import annotations

import os
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyflink")

import lakelog  # noqa: E402
from lakelog.operators.committer import COMMITTABLES_PROPERTY  # noqa: E402

pytestmark = [pytest.mark.slow]

from tests.flink.minicluster import ship_by_value, two_taskmanagers  # noqa: E402

ship_by_value(__name__)

N = 30_000
FAIL_AFTER = 8_000
KEYS = 97
BASE_KEYS = 20_000  # merge-on-write round: keys of the big run under the job's writes

APPEND_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
AGG_SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("total", pa.int64())])


SINK_CONF = two_taskmanagers()


def _env(flink_env: Any, batch: bool, restarts: int = 3) -> Any:
    return flink_env(
        mode="batch" if batch else "streaming",
        parallelism=2,
        checkpoint_interval_ms=1000,
        restarts=restarts,
        config=SINK_CONF,
    )


def _numbers(env: Any, n: int) -> Any:
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    return env.from_source(NumberSequenceSource(0, n - 1), WatermarkStrategy.no_watermarks(), "numbers")


class FailOnce:
    """Test-only map: raises once (a marker file remembers it) after ``after`` rows, but only once
    the watched table has a committed snapshot (and ``delay_s`` more have passed), so the restart
    replays over committed data. Until then it slows down (a few ms per row; never one long wait,
    which would hold up the checkpoint that the commit needs), so the failure fires however long
    the first commit takes."""

    def __init__(self, marker: str, after: int, watched: str, delay_s: float = 0.0) -> None:
        self.marker, self.after, self.watched, self.delay_s = marker, after, watched, delay_s
        self.seen = 0
        self.committed_at: Any = None

    def __call__(self, x: int) -> Any:
        from pyflink.common import Row

        self.seen += 1
        if self.seen >= self.after and not os.path.exists(self.marker):
            if self.seen % 20 == 0:
                if self.committed_at is None:
                    snap_dir = os.path.join(self.watched, "snapshot")
                    if os.path.isdir(snap_dir) and any(
                        f.startswith("snapshot-") for f in os.listdir(snap_dir)
                    ):
                        self.committed_at = time.monotonic()
                if self.committed_at is not None and time.monotonic() - self.committed_at >= self.delay_s:
                    with open(self.marker, "w") as fh:
                        fh.write(str(self.seen))
                    raise RuntimeError(f"test-only failure after {self.seen} rows")
            time.sleep(0.004)
        return Row(id=x, k=x % KEYS, v=x)


def _snapshot_checks(table: Any, *, after: int = 0, others: tuple[str, ...] = ()) -> None:
    """The sink's snapshots (those after snapshot ``after``, which the test wrote itself, and not
    of the commit users ``others``)."""
    snaps = [s for s in table.store.snapshot_manager.snapshots() if s.id > after and s.commit_user not in others]
    assert snaps
    # no commit identifier twice (per commit user and kind: Paimon pairs APPEND+COMPACT per identifier)
    idents = Counter((s.commit_user, s.commit_identifier, s.commit_kind) for s in snaps)
    assert max(idents.values()) == 1, idents
    # every commit names its committables (the committer's idempotence rests on that list), and no
    # committable is committed twice
    unnamed = [s.id for s in snaps if not (s.properties or {}).get(COMMITTABLES_PROPERTY)]
    assert not unnamed, f"snapshots without {COMMITTABLES_PROPERTY}: {unnamed}"
    ids = Counter(
        i for s in snaps if s.commit_kind == "APPEND" for i in s.properties[COMMITTABLES_PROPERTY].split(",")
    )
    assert ids and max(ids.values()) == 1, ids


def _channel(tmp_path: Any, kind: str, name: str) -> Any:
    """``channel_dir=`` for a sink: a folder channel, or None (the gate in Flink state)."""
    return str(tmp_path / name) if kind == "folder" else None


CHANNELS = pytest.mark.parametrize("channel", ["folder", "gate"])


@CHANNELS
def test_streaming_exactly_once_across_failover(tmp_path, flink_env, channel) -> None:  # type: ignore[no-untyped-def]
    from pyflink.common import Types

    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    # the gate's round also runs the primary-key tables merge-on-write: a repeated commit would
    # double a sum, a lost mark resurrect an old one
    dv = {"deletion-vectors.enabled": "true"} if channel == "gate" else {}
    app = cat.create_table("db.events", APPEND_SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    agg = cat.create_table(
        "db.sums",
        AGG_SCHEMA,
        primary_key=["k"],
        options={
            "bucket": "2",
            "merge-engine": "aggregation",
            "fields.total.aggregate-function": "sum",
            **dv,
            # level 0 goes up as soon as two of its files wait, not five
            **({"num-sorted-run.compaction-trigger": "2"} if dv else {}),
        },
    )
    if dv:
        # a big compacted run under the job's level-0 files: the job's keys at 0 and many other
        # keys (negative) that the job never writes. Pushing level 0 up then marks the old rows
        # of the job's keys instead of rewriting the run, whatever the job's timing; without it
        # level 0 is as big as the run above and universal compaction rewrites both.
        base_keys = pa.array(range(-BASE_KEYS, KEYS), pa.int64())
        agg.write(pa.table({"k": base_keys, "total": pa.repeat(0, len(base_keys)).cast(pa.int64())}))
        agg.compact(full=True)
    marker = str(tmp_path / "failed-once")
    env = _env(flink_env, batch=False)
    rows = _numbers(env, N).map(
        FailOnce(marker, FAIL_AFTER, app.store.path),
        output_type=Types.ROW_NAMED(["id", "k", "v"], [Types.LONG(), Types.LONG(), Types.LONG()]),
    )
    events = rows.map(
        lambda r: __import__("pyflink.common", fromlist=["Row"]).Row(id=r[0], v=r[2]),
        output_type=Types.ROW_NAMED(["id", "v"], [Types.LONG(), Types.LONG()]),
    )
    sums = rows.map(
        lambda r: __import__("pyflink.common", fromlist=["Row"]).Row(k=r[1], total=r[2]),
        output_type=Types.ROW_NAMED(["k", "total"], [Types.LONG(), Types.LONG()]),
    )
    sink_to_lakelog(
        events, app.store.path, channel_dir=_channel(tmp_path, channel, "ch-events"), flush_interval=500
    )
    sink_to_lakelog(
        sums, agg.store.path, channel_dir=_channel(tmp_path, channel, "ch-sums"), flush_interval=500
    )
    # a changelog (+I/-U/+U) from a streaming GROUP BY into a deduplicating primary-key table
    from pyflink.table import StreamTableEnvironment

    from lakelog.operators.sink import sink_table_to_lakelog

    dedup = cat.create_table("db.counts", AGG_SCHEMA, primary_key=["k"], options={"bucket": "2", **dv})
    t_env = StreamTableEnvironment.create(env)
    t_env.create_temporary_view("r", t_env.from_data_stream(rows))
    grouped = t_env.sql_query("SELECT k % 10 AS k, SUM(v) AS total FROM r GROUP BY k % 10")
    sink_table_to_lakelog(
        t_env, grouped, dedup.store.path, channel_dir=_channel(tmp_path, channel, "ch-counts")
    )
    t0 = time.monotonic()
    t_start = time.time() * 1000
    env.execute("lakelog-sink-exactly-once")
    elapsed = time.monotonic() - t0
    print(f"streaming job: {elapsed:.1f} s")
    assert os.path.exists(marker), "the test-only failure never fired"

    got = app.to_arrow()
    assert got.num_rows == N
    assert pc.count_distinct(got.column("id")).as_py() == N
    assert pc.sum(got.column("v")).as_py() == N * (N - 1) // 2

    sums_got = agg.to_arrow().sort_by("k")
    expected = [sum(range(k, N, KEYS)) for k in range(KEYS)]
    base = BASE_KEYS if dv else 0
    assert sums_got.column("k").to_pylist() == list(range(-base, KEYS))
    assert sums_got.column("total").to_pylist() == [0] * base + expected
    _snapshot_checks(app)
    _snapshot_checks(agg, after=2 if dv else 0)
    _snapshot_checks(dedup)
    counts = dedup.to_arrow().sort_by("k")
    assert counts.column("total").to_pylist() == [
        sum(x for x in range(N) if (x % KEYS) % 10 == k) for k in range(10)
    ]
    if dv:  # the sums were kept by marks, not only by rewrites
        kinds = {e.index_file.index_type for s in agg.snapshots() for e in agg.store.index_entries(s)}
        assert kinds == {"DELETION_VECTORS"}, kinds
    snaps = app.store.snapshot_manager.snapshots()
    print(
        f"append table: {len(snaps)} snapshots, first commit {(snaps[0].time_millis - t_start) / 1000:.1f} s "
        f"after submit, last {(snaps[-1].time_millis - t_start) / 1000:.1f} s"
    )
    assert len(app.store.snapshot_manager.snapshots()) > 1  # committed while running, not only at the end


LOOKUP_N = 6_000
LOOKUP_FAIL_AFTER = 2_000


def test_lookup_join_exactly_once_across_failover(tmp_path, flink_env) -> None:  # type: ignore[no-untyped-def]
    """Issue 22: an exactly-once job with a lookup join, sharded by bucket and holding its shards on
    disk (lookup.cache = full), fails once mid-stream and restarts from its checkpoint: every probe
    is joined and committed exactly once, with the dimension's rows."""
    from pyflink.common import Row, Types

    from lakelog.operators.lookup import lookup_join
    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    dim_schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    dim = cat.create_table("db.dim", dim_schema, primary_key=["id"], options={"bucket": "4", "lookup.cache": "full"})
    dim.write(pa.table({"id": list(range(0, KEYS, 2)), "name": [f"d{i}" for i in range(0, KEYS, 2)]}, schema=dim_schema))
    out_schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("k", pa.int64()),
                            pa.field("name", pa.string())])  # fmt: skip
    out = cat.create_table("db.joined", out_schema, options={"bucket": "2", "bucket-key": "id"})
    marker = str(tmp_path / "failed-once")
    env = _env(flink_env, batch=False)
    rows = _numbers(env, LOOKUP_N).map(
        FailOnce(marker, LOOKUP_FAIL_AFTER, out.store.path),
        output_type=Types.ROW_NAMED(["id", "k", "v"], [Types.LONG(), Types.LONG(), Types.LONG()]),
    )
    joined = lookup_join(rows, dim, {"k": "id"}, join_type="left", shuffle=True, parallelism=2, columns=["name"])
    picked = joined.map(
        lambda r: Row(id=r[0], k=r[1], name=r[3]),
        output_type=Types.ROW_NAMED(["id", "k", "name"], [Types.LONG(), Types.LONG(), Types.STRING()]),
    )
    sink_to_lakelog(picked, out.store.path, flush_interval=500)
    env.execute("lakelog-lookup-exactly-once")
    assert os.path.exists(marker), "the test-only failure never fired"
    got = out.to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == list(range(LOOKUP_N))  # each probe once
    assert got.column("name").to_pylist() == [
        f"d{i % KEYS}" if i % KEYS % 2 == 0 else None for i in range(LOOKUP_N)
    ]
    _snapshot_checks(out)


class CompactOnce:
    """Test-only map: once (a marker file remembers it) the table has two snapshots and ``after``
    rows have passed, compacts the whole table itself, as another process would (its own commit
    user). Slows down a little until then, so that
    the job is still writing when it happens."""

    def __init__(self, marker: str, after: int, table_path: str) -> None:
        self.marker, self.after, self.table_path = marker, after, table_path
        self.seen = 0

    def __call__(self, x: int) -> Any:
        from pyflink.common import Row

        self.seen += 1
        if self.seen >= self.after and not os.path.exists(self.marker):
            if self.seen % 50 == 0:
                from lakelog.connector.format.store import TableStore
                from lakelog.connector.table.compaction import compact_table

                store = TableStore(self.table_path)
                if len(store.snapshot_manager.snapshots()) >= 2:
                    compact_table(store, full=True, commit_user="another-compaction")
                    with open(self.marker, "w") as fh:
                        fh.write("done")
            time.sleep(0.002)
        return Row(k=x % KEYS, total=1)


def test_a_sink_whose_compaction_lost_a_race_fails_over_and_compacts_again(  # type: ignore[no-untyped-def]
    tmp_path, flink_env
) -> None:
    """Another process compacts the table while the sink's writers compact it too: the writers'
    next compaction is dropped (its inputs are gone; the rows commit), the job fails over so that
    the writers reload the table, and they compact again afterwards. Before, such a writer went on
    with its stale view and every later compaction of it was dropped."""
    from pyflink.common import Types

    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    sums = cat.create_table(
        "db.sums",
        AGG_SCHEMA,
        primary_key=["k"],
        options={"bucket": "2", "merge-engine": "aggregation", "fields.total.aggregate-function": "sum",
                 "num-sorted-run.compaction-trigger": "2"},
    )
    marker = str(tmp_path / "compacted")
    env = _env(flink_env, batch=False)
    rows = _numbers(env, N).map(
        CompactOnce(marker, 4_000, sums.store.path),
        output_type=Types.ROW_NAMED(["k", "total"], [Types.LONG(), Types.LONG()]),
    )
    sink_to_lakelog(rows, sums.store.path, commit_user="the-sink", flush_interval=500)
    env.execute("lakelog-sink-compaction-race")
    assert os.path.exists(marker), "the other compaction never ran"
    snaps = sums.store.snapshot_manager.snapshots()
    (other,) = [s.id for s in snaps if s.commit_user == "another-compaction"]
    got = sums.to_arrow().sort_by("k")
    assert got.column("total").to_pylist() == [len(range(k, N, KEYS)) for k in range(KEYS)]
    later = [s.id for s in snaps if s.commit_user == "the-sink" and s.commit_kind == "COMPACT" and s.id > other]
    assert later, [(s.id, s.commit_user, s.commit_kind) for s in snaps]
    _snapshot_checks(sums, others=("another-compaction",))


@CHANNELS
def test_restart_commits_the_restored_checkpoint_without_new_committables(  # type: ignore[no-untyped-def]
    tmp_path, flink_env, channel
) -> None:
    """The committer polls every 4 s here and the failure comes 2.5 s after the first commit, so
    the restored checkpoint's committable is released but not committed yet; the one writer key
    waits for it and sends the committer nothing. PyFlink opens a Python function only when an
    element reaches it and fires no restored timer, so before the fix the committer never ran
    again and the job hung until the writer's restart wait ran out."""
    from pyflink.common import Types

    from lakelog.operators.sink import sink_to_lakelog

    # each of the 2 map subtasks sees half the rows: after its 1_500th it slows to 4 ms a row until
    # the first commit (+ 2.5 s), so 4_500 rows give it an 18 s window even on a loaded machine
    n = 12_000
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    app = cat.create_table("db.events", APPEND_SCHEMA, options={"bucket": "1", "bucket-key": "id"})
    marker = str(tmp_path / "failed-once")
    env = _env(flink_env, batch=False, restarts=1)
    rows = _numbers(env, n).map(
        FailOnce(marker, 1_500, app.store.path, delay_s=2.5),
        output_type=Types.ROW_NAMED(["id", "k", "v"], [Types.LONG(), Types.LONG(), Types.LONG()]),
    )
    events = rows.map(
        lambda r: __import__("pyflink.common", fromlist=["Row"]).Row(id=r[0], v=r[2]),
        output_type=Types.ROW_NAMED(["id", "v"], [Types.LONG(), Types.LONG()]),
    )
    plan = sink_to_lakelog(
        events,
        app.store.path,
        channel_dir=_channel(tmp_path, channel, "ch"),
        poll_interval_ms=4_000,
        restart_wait_s=40,
    )
    assert plan.committer.gated == (channel == "gate")
    env.execute("lakelog-sink-restart-without-new-committables")
    assert os.path.exists(marker), "the test-only failure never fired"
    got = app.to_arrow()
    assert got.num_rows == n
    assert pc.count_distinct(got.column("id")).as_py() == n
    _snapshot_checks(app)


def test_batch_mode_commits_at_end_of_input(tmp_path, flink_env) -> None:  # type: ignore[no-untyped-def]
    from pyflink.common import Row, Types

    from lakelog.operators.sink import sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    agg = cat.create_table(
        "db.sums",
        AGG_SCHEMA,
        primary_key=["k"],
        options={"bucket": "3", "merge-engine": "aggregation", "fields.total.aggregate-function": "sum"},
    )
    n = 20_000
    env = _env(flink_env, batch=True)
    ds = _numbers(env, n).map(
        lambda x: Row(k=x % KEYS, total=x),
        output_type=Types.ROW_NAMED(["k", "total"], [Types.LONG(), Types.LONG()]),
    )
    sink_to_lakelog(ds, agg.store.path)
    # a Flink Table with rows of several partitions reaching one writer subtask, not sorted by key
    # (regression: keyed state of the batch backend keeps only the current key's rows)
    from pyflink.table import StreamTableEnvironment

    from lakelog.operators.sink import sink_table_to_lakelog

    part_schema = pa.schema(
        [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())]
    )
    parts = cat.create_table(
        "db.parts", part_schema, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    t_env = StreamTableEnvironment.create(env)
    values = t_env.sql_query(
        "SELECT * FROM (VALUES ('a', CAST(1 AS BIGINT), 'x'), ('b', CAST(2 AS BIGINT), 'y'), "
        "('a', CAST(3 AS BIGINT), 'z'), ('c', CAST(4 AS BIGINT), 'w')) AS T(dt, id, v)"
    )
    sink_table_to_lakelog(t_env, values, parts.store.path)
    t0 = time.monotonic()
    env.execute("lakelog-sink-batch")
    print(f"batch job: {time.monotonic() - t0:.1f} s")
    got = agg.to_arrow().sort_by("k")
    assert got.column("total").to_pylist() == [sum(range(k, n, KEYS)) for k in range(KEYS)]
    snaps = agg.store.snapshot_manager.snapshots()
    assert len([s for s in snaps if s.commit_kind == "APPEND"]) == 1
    got_parts = sorted((r["dt"], r["id"], r["v"]) for r in parts.to_arrow().to_pylist())
    assert got_parts == [("a", 1, "x"), ("a", 3, "z"), ("b", 2, "y"), ("c", 4, "w")]


TYPES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("big", pa.int64()),
        ("small", pa.int16()),
        ("f", pa.float64()),
        ("flag", pa.bool_()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("amt", pa.decimal128(10, 2)),
        ("d", pa.date32()),
        ("t", pa.time32("ms")),
        ("ts", pa.timestamp("us")),
    ]
)


def _typed_rows() -> list[tuple[Any, ...]]:
    import datetime as dt
    from decimal import Decimal

    rows = []
    for i in range(200):
        rows.append(
            (
                i,
                None if i % 5 == 0 else 2**62 + i,  # a big BIGINT next to nulls (pandas would make floats)
                None if i % 7 == 0 else i - 100,
                float("nan") if i == 3 else (None if i % 11 == 0 else i / 4),
                None if i % 13 == 0 else i % 2 == 0,
                None if i % 17 == 0 else f"s{i}é",
                None if i % 19 == 0 else bytes([i % 256, 0, 255]),
                None if i % 23 == 0 else Decimal(i) / Decimal(4),
                dt.date(2024, 1, 1) + dt.timedelta(days=i),
                dt.time(12, 30, i % 60, 123_000),
                # (PyFlink's Python -> Java SQL_TIMESTAMP carries milliseconds, even from_collection)
                dt.datetime(2024, 2, 29, 23, 59, 59, 123_000) + dt.timedelta(hours=i),
            )
        )
    return rows


@pytest.mark.parametrize("java", [True, False], ids=["java-batcher", "python-only"])
def test_types_and_kinds_round_trip_through_the_sink(tmp_path, flink_env, java: bool) -> None:  # type: ignore[no-untyped-def]
    """Every supported column type, with nulls, a NaN and a BIGINT beyond 2^53, through the Arrow
    hand-over of both sink paths (rows batched by the Java operator, or by a pandas UDF): insert-only
    into an append table, changelog (with -U/-D rows) into a primary-key table."""
    import math

    from pyflink.common import Row, RowKind

    from lakelog.operators.sink import row_type_of, sink_to_lakelog

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    app = cat.create_table("db.app", TYPES_SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    pk = cat.create_table("db.pk", TYPES_SCHEMA, primary_key=["id"], options={"bucket": "3"})
    rows = _typed_rows()
    env = _env(flink_env, batch=True)
    env.set_parallelism(1)  # from_collection is one subtask: keep each key's changes in order
    row_type = row_type_of(TYPES_SCHEMA)
    names = TYPES_SCHEMA.names
    app_ds = env.from_collection([Row(**dict(zip(names, r))) for r in rows], type_info=row_type)
    sink_to_lakelog(app_ds, app.store.path, java=java)

    def with_kind(r: tuple[Any, ...], kind: Any) -> Any:
        row = Row(**dict(zip(names, r)))
        row.set_row_kind(kind)
        return row

    changes = [with_kind(r, RowKind.INSERT) for r in rows]
    changes += [with_kind(rows[i], RowKind.DELETE) for i in range(0, 200, 10)]  # deleted again
    changes += [
        with_kind(rows[1], RowKind.UPDATE_BEFORE),
        with_kind(rows[2][:1] + rows[1][1:], RowKind.UPDATE_AFTER),
    ]
    pk_ds = env.from_collection(changes, type_info=row_type)
    sink_to_lakelog(pk_ds, pk.store.path, java=java)
    env.execute("lakelog-sink-types")

    def normalized(t: pa.Table) -> list[tuple[Any, ...]]:
        out = []
        for r in t.sort_by("id").to_pylist():
            out.append(tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r.values()))
        return out

    expected = pa.Table.from_pylist([dict(zip(names, r)) for r in rows], schema=TYPES_SCHEMA)
    assert app.to_arrow().schema == TYPES_SCHEMA
    assert normalized(app.to_arrow()) == normalized(expected)
    keep = [r for i, r in enumerate(rows) if i % 10 != 0]
    keep = [rows[2][:1] + rows[1][1:] if r[0] == 2 else r for r in keep]
    expected_pk = pa.Table.from_pylist([dict(zip(names, r)) for r in keep], schema=TYPES_SCHEMA)
    assert normalized(pk.to_arrow()) == normalized(expected_pk)


@pytest.mark.parametrize(
    ("column", "bad"),
    [("s", {"s": 70_000}), ("id", {"id": None}), ("n", {"n": Decimal("1.005")})],
    ids=["overflow", "null-in-not-null", "decimal-places"],
)
def test_bad_values_fail_the_job_naming_the_column(
    tmp_path, flink_env, column: str, bad: dict[str, Any]
) -> None:  # type: ignore[no-untyped-def]
    """A value the column cannot hold fails the job with the column's name, and nothing is committed."""
    from pyflink.common import Row, Types

    from lakelog.operators.sink import sink_to_lakelog

    schema = pa.schema([pa.field("id", pa.int64(), False), ("s", pa.int16()), ("n", pa.decimal128(6, 2))])
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.bad", schema, options={"bucket": "1", "bucket-key": "id"}
    )
    env = _env(flink_env, batch=True, restarts=0)
    env.set_parallelism(1)
    rows = [{"id": i, "s": i, "n": Decimal("1.50")} for i in range(10)]
    rows[5] = {**rows[5], **bad}
    row_type = Types.ROW_NAMED(["id", "s", "n"], [Types.LONG(), Types.LONG(), Types.BIG_DEC()])
    sink_to_lakelog(env.from_collection([Row(**r) for r in rows], type_info=row_type), t.store.path)
    with pytest.raises(Exception) as info:
        env.execute("lakelog-sink-bad-values")
    assert f"column '{column}'" in str(info.value)
    assert t.store.snapshot_manager.latest_id() is None


def test_rows_without_a_declared_type_are_typed_first(tmp_path, flink_env) -> None:  # type: ignore[no-untyped-def]
    """A stream of plain Python tuples (no output_type, so Java sees pickled bytes) still reaches the
    table: the sink maps it into the table's row type (by position) before the Java batcher."""
    from lakelog.operators.sink import sink_to_lakelog

    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.untyped", APPEND_SCHEMA, options={"bucket": "2", "bucket-key": "id"}
    )
    env = _env(flink_env, batch=True)
    env.set_parallelism(1)
    sink_to_lakelog(env.from_collection([(i, i * 10) for i in range(50)]), t.store.path)
    env.execute("lakelog-sink-untyped")
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "v": i * 10} for i in range(50)
    ]


@pytest.mark.parametrize("path", ["java-batcher", "python-only", "untyped"])
def test_each_keys_changes_keep_their_order_when_the_job_is_wider_than_its_input(
    tmp_path, flink_env, path: str
) -> None:  # type: ignore[no-untyped-def]
    """A one-subtask input (from_collection) in a job of parallelism 2: every sink step before the
    writers' key_by runs at the input's parallelism and is connected one to one, so each key's last
    change wins, on both batching paths and for rows of an undeclared type. (A rebalance there would
    spread one key's rows over two subtasks and interleave them again at the writer.)"""
    from pyflink.common import Row, Types

    from lakelog.operators.sink import sink_to_lakelog

    keys, n = 5, 4000
    t = lakelog.Catalog(str(tmp_path / "wh")).create_table(
        "db.order", AGG_SCHEMA, primary_key=["k"], options={"bucket": "2"}
    )
    env = _env(flink_env, batch=True)
    assert env.get_parallelism() == 2
    if path == "untyped":
        ds = env.from_collection([(i % keys, i) for i in range(n)])
    else:
        row_type = Types.ROW_NAMED(["k", "total"], [Types.LONG(), Types.LONG()])
        ds = env.from_collection([Row(k=i % keys, total=i) for i in range(n)], type_info=row_type)
    sink_to_lakelog(ds, t.store.path, java=path != "python-only")
    env.execute(f"lakelog-sink-order-{path}")
    got = {r["k"]: r["total"] for r in t.to_arrow().to_pylist()}
    assert got == {k: n - keys + k for k in range(keys)}
