"""The Kafka log through PyFlink, on a MiniCluster and a real broker.

- The sink into a transactional log across an injected failover: the topic's committed records,
  replayed, equal the table's change stream (count, keys, values, order per key).
- The sink into an eventual log across a failover: every change arrives, repeats only, and an upsert
  replay equals the table.
- A streaming read of a log table (read_lakelog): the snapshot's rows, then the log's changes.
- Flink's own Kafka SQL connector (``debezium-json``) reads the topic and rebuilds the table.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.table.changes import delta_rows
from tests.flink.test_sink_flink import KEYS as SINK_KEYS
from tests.flink.test_sink_flink import FailOnce, _env, _numbers, _snapshot_checks
from tests.kafka_fixtures import KafkaEndpoint
from tests.test_log_store import topic_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N = 4_000
KEYS = 50
SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("total", pa.int64())])


def _log_table(tmp_path: Path, broker: KafkaEndpoint, name: str, **options: str) -> lakelog.Table:
    opts = {
        "bucket": "2",
        "log.system": "kafka",
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        **options,
    }
    return lakelog.Catalog(str(tmp_path / "wh")).create_table(name, SCHEMA, primary_key=["k"], options=opts)


def _replay(changes: list[tuple[str, int, Any]]) -> dict[int, Any]:
    state: dict[int, Any] = {}
    for kind, k, v in changes:
        if kind in ("-D", "-U"):
            state.pop(k, None)
        else:
            state[k] = v
    return state


def _per_key(changes: list[tuple[str, int, Any]]) -> dict[int, list[tuple[str, Any]]]:
    out: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for kind, k, v in changes:
        out[k].append((kind, v))
    return dict(out)


def _table_changes(t: lakelog.Table) -> list[tuple[str, int, Any]]:
    """What the files say each snapshot changed, in snapshot order (upsert mode: no -U)."""
    out = []
    for s in t.snapshots():
        for c in delta_rows(t.store, s.id - 1, s.id).to_pylist():
            if c["rowkind"] != "-U":
                out.append((c["rowkind"], c["k"], c["total"]))
    return out


def _run_sink(tmp_path: Path, flink_env: Any, table: lakelog.Table, marker: str) -> None:
    from pyflink.common import Row, Types

    from lakelog.operators.sink import sink_to_lakelog

    env = _env(flink_env, batch=False)
    rows = _numbers(env, N).map(
        FailOnce(marker, N // 3, table.store.path),
        output_type=Types.ROW_NAMED(["id", "k", "v"], [Types.LONG(), Types.LONG(), Types.LONG()]),
    )
    sums = rows.map(
        lambda r: Row(k=r[1] % KEYS, total=r[2]),
        output_type=Types.ROW_NAMED(["k", "total"], [Types.LONG(), Types.LONG()]),
    )
    sink_to_lakelog(sums, table, channel_dir=str(tmp_path / "channel"), flush_interval=500)
    env.execute("lakelog-log-sink")
    assert os.path.exists(marker), "the test-only failure never fired"


def test_the_sink_publishes_a_transactional_log_exactly_once_across_a_failover(
    tmp_path: Path, flink_env: Any, kafka_broker: KafkaEndpoint
) -> None:
    t = _log_table(tmp_path, kafka_broker, "db.tx")
    _run_sink(tmp_path, flink_env, t, str(tmp_path / "failed-once"))
    _snapshot_checks(t)
    log_changes = decoded_k(t, topic_records(t))
    table_changes = _table_changes(t)
    assert len(log_changes) == len(table_changes)  # none lost, none repeated
    assert _per_key(log_changes) == _per_key(table_changes)  # same values, same order per key
    assert _replay(log_changes) == {r["k"]: r["total"] for r in t.to_arrow().to_pylist()}


def test_the_sink_writes_an_eventual_log_at_once_and_repeats_only_after_a_failover(
    tmp_path: Path, flink_env: Any, kafka_broker: KafkaEndpoint
) -> None:
    t = _log_table(tmp_path, kafka_broker, "db.ev", **{"log.consistency": "eventual"})
    _run_sink(tmp_path, flink_env, t, str(tmp_path / "failed-once"))
    log_changes = decoded_k(t, topic_records(t, committed=False))
    final = {r["k"]: r["total"] for r in t.to_arrow().to_pylist()}
    assert _replay(log_changes) == final  # an upsert replay equals the table
    # every value the job wrote for a key reached the log (the input rows, repeats allowed)
    written = defaultdict(set)
    for x in range(N):
        written[(x % SINK_KEYS) % KEYS].add(x)  # FailOnce makes k = x % its KEYS
    seen = defaultdict(set)
    for _, k, v in log_changes:
        seen[k].add(v)
    assert all(written[k] <= seen[k] for k in written)
    assert len(log_changes) >= N


def decoded_k(t: lakelog.Table, records: list[dict[str, Any]]) -> list[tuple[str, int, Any]]:
    from lakelog.connector.log.codec import KIND_HEADER, decode_values

    data, kinds = decode_values(
        [r["value"] for r in records],
        [r["key"] for r in records],
        [r["headers"].get(KIND_HEADER) for r in records],
        t.schema,
    )
    names = ["+I", "-U", "+U", "-D"]
    return [(names[k], r["k"], r["total"]) for k, r in zip(kinds, data.to_pylist())]


def test_a_streaming_read_of_a_log_table_hands_over_from_files_to_the_log(
    tmp_path: Path, flink_env: Any, kafka_broker: KafkaEndpoint
) -> None:
    from pyflink.common import RowKind

    from lakelog.operators.source import read_lakelog

    t = _log_table(tmp_path, kafka_broker, "db.read")
    t.write(pa.table({"k": [1, 2], "total": [10, 20]}, schema=SCHEMA))
    env = flink_env(mode="streaming", parallelism=1, checkpoint_interval_ms=500)
    ds = read_lakelog(env, t, mode="streaming")
    got: list[tuple[Any, tuple[Any, ...]]] = []
    it = ds.execute_and_collect()
    started = None
    try:
        for r in it:
            got.append((r.get_row_kind(), tuple(r)))
            if len(got) == 2:
                started = time.monotonic()
                t.write(pa.table({"k": [1, 3], "total": [11, 30]}, schema=SCHEMA))
                t.delete(pa.table({"k": [2]}))
            if len(got) >= 5:
                break
    finally:
        it.close()
    assert started is not None
    named = sorted((str(kind), row) for kind, row in got)
    assert sorted((str(k), r) for k, r in got[:2]) == [
        (str(RowKind.INSERT), (1, 10)),
        (str(RowKind.INSERT), (2, 20)),
    ]
    assert named == sorted(
        [
            (str(RowKind.INSERT), (1, 10)),
            (str(RowKind.INSERT), (2, 20)),
            (str(RowKind.INSERT), (1, 11)),
            (str(RowKind.INSERT), (3, 30)),
            (str(RowKind.DELETE), (2, None)),
        ]
    )


def test_flinks_own_kafka_connector_rebuilds_the_table_from_the_log(
    tmp_path: Path, flink_env: Any, kafka_broker: KafkaEndpoint
) -> None:
    from pyflink.table import StreamTableEnvironment

    from tests.flink.kafka_jars import kafka_connector_jar

    t = _log_table(tmp_path, kafka_broker, "db.foreign")
    t.write(pa.table({"k": [1, 2, 3], "total": [10, 20, 30]}, schema=SCHEMA))
    t.write(pa.table({"k": [2], "total": [21]}, schema=SCHEMA))
    t.delete(pa.table({"k": [3]}))
    topic = t.options["kafka.topic"]
    env = flink_env(mode="streaming", parallelism=1)
    env.add_jars(kafka_connector_jar())
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        f"""CREATE TABLE src (k BIGINT, total BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (
            'connector' = 'kafka', 'topic' = '{topic}',
            'properties.bootstrap.servers' = '{kafka_broker.bootstrap_servers}',
            'properties.isolation.level' = 'read_committed',
            'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',
            'format' = 'debezium-json')"""
    )
    rows = list(t_env.execute_sql("SELECT k, total FROM src").collect())
    state: dict[int, Any] = {}
    from pyflink.common import RowKind

    for r in rows:
        if r.get_row_kind() in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
            state.pop(r[0], None)
        else:
            state[r[0]] = r[1]
    assert state == {r["k"]: r["total"] for r in t.to_arrow().to_pylist()} == {1: 10, 2: 21}


def test_insert_overwrite_of_a_log_table_runs_as_a_job_and_publishes_nothing(
    tmp_path: Path, kafka_broker: KafkaEndpoint
) -> None:
    """INSERT OVERWRITE into a table with a Kafka log streams through the sink like any other (alone
    or in a statement set): one OVERWRITE snapshot that keeps the log's offsets, and no record in the
    log (as Table.overwrite). An overwrite that would change a partition's bucket count (keys would
    change topic partition) fails naming the partition and the counts."""
    from tests.flink.sqlkit import session

    wh = tmp_path / "wh"
    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int64(), False), ("v", pa.string())])
    t = lakelog.Catalog(str(wh)).create_table(
        "db.t", schema, primary_key=["dt", "k"], partition_by=["dt"],
        options={"bucket": "2", "log.system": "kafka", "kafka.bootstrap.servers": kafka_broker.bootstrap_servers},
    )  # fmt: skip
    t.write(pa.table({"dt": ["a"] * 5 + ["b"] * 5, "k": list(range(5)) * 2, "v": ["old"] * 10}, schema=schema))
    published = len(topic_records(t))
    assert published == 10
    sql = session(parallelism=2)
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    result = sql.execute("INSERT OVERWRITE db.t SELECT 'a', k, 'new' FROM (VALUES (1), (2)) AS x(k)")
    assert "job" in result.message  # the sink wrote the rows, not the client
    sql.execute("BEGIN STATEMENT SET")
    sql.execute("INSERT OVERWRITE db.t PARTITION (dt = 'b') SELECT k, 'set' FROM (VALUES (7)) AS x(k)")
    sql.execute("END")
    snaps = t.refresh().snapshots()
    assert [s.commit_kind for s in snaps] == ["APPEND", "OVERWRITE", "OVERWRITE"]
    assert snaps[1].log_offsets == snaps[2].log_offsets == snaps[0].log_offsets
    assert sorted((r["dt"], r["k"], r["v"]) for r in t.to_arrow().to_pylist()) == [
        ("a", 1, "new"), ("a", 2, "new"), ("b", 7, "set"),
    ]  # fmt: skip
    assert len(topic_records(t)) == published
    t.write(pa.table({"dt": ["a"], "k": [3], "v": ["later"]}, schema=schema))  # later writes reach the log
    assert len(topic_records(t)) == published + 1
    # partition a has 2 buckets; with the table at 3, an overwrite of a would move its keys
    sql.execute("ALTER TABLE db.t SET ('bucket' = '3')")
    last = t.refresh().latest_snapshot()
    text = refused_job(sql, "INSERT OVERWRITE db.t SELECT 'a', k, 'x' FROM (VALUES (1)) AS x(k)")
    assert "dt=a" in text and "from 2 to 3 buckets" in text and "Kafka log" in text, text
    assert t.refresh().latest_snapshot().id == last.id


def refused_job(sql: Any, stmt: str) -> str:
    """The message of the failure of ``stmt``'s job."""
    try:
        sql.execute(stmt)
    except Exception as e:  # noqa: BLE001 - the runner's error, whatever its class
        return str(e)
    raise AssertionError(f"{stmt} did not fail")


def test_sql_counts_a_log_tables_updates_once(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    """Issue 25, 2: the log's records of a table without a changelog producer are the rows as
    written (an update is a +I, a delete holds the key), so a SQL read of a log table is upserts
    with the primary key and Flink derives the retractions: COUNT(*) stays the number of rows
    (it went 3 -> 4 on an update before)."""
    from tests.flink.sqlkit import session, stream_changes

    t = _log_table(tmp_path, kafka_broker, "db.counted")
    t.write(pa.table({"k": [1, 2, 3], "total": [10, 20, 30]}, schema=SCHEMA))
    sql = session("streaming", checkpoint_interval_ms=500)
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='file://{tmp_path / 'wh'}')")
    res = sql.execute("SELECT COUNT(*), SUM(total) FROM lk.db.counted")

    def change() -> None:
        t.write(pa.table({"k": [1, 4], "total": [11, 40]}, schema=SCHEMA))  # update + insert
        t.delete(pa.table({"k": [2]}))

    got = stream_changes(
        res, lambda g: g[-1][0] in ("INSERT", "UPDATE_AFTER") and g[-1][1] == (3, 81), 120, then=(1, change)
    )
    totals = [row for kind, row in got if kind in ("INSERT", "UPDATE_AFTER")]
    assert (3, 60) in totals and totals[-1] == (3, 81), got
    assert max(c for c, _ in totals) <= 4, got  # never an update counted as a row
