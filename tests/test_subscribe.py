"""t.subscribe(): changes as they happen, from the Kafka log (hybrid with the files) or the files.

The hand-over from a snapshot's files to the log must be exact: readers started at random moments
while writers commit receive every change once, none missing, none repeated.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import LogSystemError
from lakelog.connector.table.changes import snapshot_log_changes
from tests.kafka_fixtures import KafkaEndpoint

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.int64())])


def make(tmp: Path, broker: Optional[KafkaEndpoint], **options: str) -> lakelog.Table:
    opts = {"bucket": "3", **options}
    if broker is not None:
        opts.update({"log.system": "kafka", "kafka.bootstrap.servers": broker.bootstrap_servers})
    return lakelog.Catalog(str(tmp)).create_table("db.t", SCHEMA, primary_key=["k"], options=opts)


def rows(keys: list[int], v: int) -> pa.Table:
    return pa.table({"k": keys, "v": [v] * len(keys)}, schema=SCHEMA)


def collect(sub: Any, until: Any, timeout: float = 60.0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        batch = sub.poll(0.2)
        if batch is not None:
            out += batch.to_pylist()
        elif until(out):
            return out
    raise AssertionError(f"timed out with {len(out)} changes")


def expected_changes(t: lakelog.Table, after: int, upto: int) -> dict[int, list[tuple[str, Any]]]:
    """Per key, the changes of snapshots after ``after`` up to ``upto``, as the files say."""
    per_key: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for sid in range(after + 1, upto + 1):
        changes = snapshot_log_changes(t.store, t.snapshot(sid))
        assert changes is not None
        for ch in changes:
            for kind, r in zip(ch.kinds, ch.rows.to_pylist()):
                if kind != 1:  # the log's upsert mode leaves -U out
                    per_key[r["k"]].append((["+I", "-U", "+U", "-D"][kind], r["v"]))
    return per_key


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_hybrid_reads_started_while_writers_commit_get_every_change_once(
    tmp_path: Path, kafka_broker: KafkaEndpoint, client: str
) -> None:
    t = make(tmp_path, kafka_broker, **{"log.kafka.client": client})
    t.write(rows(list(range(20)), 0))
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        other = lakelog.Catalog(str(tmp_path)).get_table("db.t")
        try:
            with other.stream_writer() as w:
                step = 1
                while not stop.is_set():
                    keys = rnd.sample(range(40), 3)
                    if rnd.random() < 0.2:
                        other.delete(pa.table({"k": keys[:1]}))
                    else:
                        w.write(rows(keys, seed * 1000 + step)).commit()
                    step += 1
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    for th in threads:
        th.start()
    readers = []
    try:
        for _ in range(4):
            time.sleep(random.uniform(0.2, 1.0))
            sub = t.subscribe()  # latest-full: the snapshot's rows, then its changes from the log
            start = sub._consumed
            readers.append((start, sub))
        time.sleep(1.5)
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert errors == []
    final = t.latest_snapshot().id
    final_state = {r["k"]: r["v"] for r in t.to_arrow().to_pylist()}
    for start, sub in readers:
        expect = expected_changes(t, start, final)
        n_expected = sum(len(v) for v in expect.values())
        full = {r["k"]: r["v"] for r in t.to_arrow(snapshot_id=start).to_pylist()}
        wanted = len(full) + n_expected
        got = collect(sub, lambda out, wanted=wanted: len(out) >= wanted)
        sub.close()
        snapshot_rows = got[: len(full)]
        assert {r["k"]: r["v"] for r in snapshot_rows} == full and all(r["rowkind"] == "+I" for r in snapshot_rows)
        per_key: dict[int, list[tuple[str, Any]]] = defaultdict(list)
        for r in got[len(full) :]:
            per_key[r["k"]].append((r["rowkind"], r["v"]))
        assert dict(per_key) == dict(expect), f"reader started at snapshot {start}"
        state = dict(full)
        for r in got[len(full) :]:
            if r["rowkind"] == "-D":
                state.pop(r["k"], None)
            else:
                state[r["k"]] = r["v"]
        assert state == final_state


@pytest.mark.kafka
def test_a_log_shorter_than_the_snapshots_is_bridged_by_the_files(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    t = make(tmp_path, kafka_broker)
    for v in range(1, 6):
        t.write(rows([v, v + 10], v))
    # the log loses its first records (as its retention would), the snapshots remain
    from lakelog.connector.table.log import log_config

    config = log_config(t.store)
    assert config is not None
    cut = t.snapshot(3).log_offsets
    from confluent_kafka import TopicPartition

    from tests.test_log_store import confluent_admin

    admin = confluent_admin(config)

    futures = admin.delete_records([TopicPartition(config.topic, p, o) for p, o in cut.items()])
    for f in futures.values():
        f.result(timeout=30)
    sub = t.subscribe(scan_mode="from-snapshot", snapshot_id=2)  # needs snapshot 2's changes on
    got = collect(sub, lambda out: len(out) >= 8)
    sub.close()
    assert sorted((r["k"], r["v"]) for r in got) == sorted((k, v) for v in range(2, 6) for k in (v, v + 10))
    # when the files do not cover the lost offsets either, the reader says what is missing
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    with pytest.raises(LogSystemError, match=r"no longer holds partition .*offsets .*snapshot.time-retained"):
        t.subscribe(scan_mode="from-snapshot", snapshot_id=2)


def test_tables_without_a_log_are_followed_through_their_files(tmp_path: Path) -> None:
    t = make(tmp_path, None)
    t.write(rows([1, 2], 1))
    with t.subscribe(consumer_id="reader") as sub:
        first = collect(sub, lambda out: len(out) >= 2)
        t.write(rows([2, 3], 2))
        t.delete(pa.table({"k": [1]}))
        later = collect(sub, lambda out: len(out) >= 3)
    assert sorted((r["rowkind"], r["k"], r["v"]) for r in first) == [("+I", 1, 1), ("+I", 2, 1)]
    assert sorted((r["rowkind"], r["k"]) for r in later) == [("+I", 2), ("+I", 3), ("-D", 1)]
    assert t.store.consumer_manager.get("reader") == 4  # consumed snapshots 1-3
    t.write(rows([9], 9))
    with t.subscribe(consumer_id="reader") as sub:  # resumes after the last snapshot it consumed
        assert [(r["k"], r["v"]) for r in collect(sub, lambda out: len(out) >= 1)] == [(9, 9)]


@pytest.mark.kafka
def test_streaming_read_mode_file_reads_a_log_table_from_its_files(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    t = make(tmp_path, kafka_broker, **{"streaming-read-mode": "file"})
    t.write(rows([1], 1))
    with t.subscribe(scan_mode="from-snapshot", snapshot_id=1) as sub:
        assert sub._tail is None  # no Kafka consumer: the files are followed
        got = collect(sub, lambda out: len(out) >= 1)
    assert [(r["k"], r["v"]) for r in got] == [(1, 1)]
    t.alter(lakelog.SetOption("streaming-read-mode", "log"))
    with t.subscribe(scan_mode="from-snapshot", snapshot_id=1) as sub:
        assert sub._tail is not None
        assert [(r["k"], r["v"]) for r in collect(sub, lambda out: len(out) >= 1)] == [(1, 1)]


@pytest.mark.parametrize("log", [False, pytest.param(True, marks=pytest.mark.kafka)], ids=["files", "kafka"])
def test_a_consumer_that_read_only_the_full_snapshot_resumes_after_it(
    tmp_path: Path, request: pytest.FixtureRequest, log: bool
) -> None:
    """Issue 19.5: a consumer that had read only the initial full snapshot stored no progress, so
    it read everything again on resume, and nothing protected the snapshots after it."""
    broker = request.getfixturevalue("kafka_broker") if log else None
    t = make(tmp_path, broker, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    t.write(rows([1, 2, 3], 1))
    t.write(rows([3, 4], 2))
    with t.subscribe(consumer_id="reader") as sub:
        full = collect(sub, lambda out: len(out) >= 4)
    assert sorted((r["rowkind"], r["k"], r["v"]) for r in full) == [
        ("+I", 1, 1), ("+I", 2, 1), ("+I", 3, 2), ("+I", 4, 2)]
    assert t.store.consumer_manager.get("reader") == 3  # the full snapshot 2 is consumed
    for i in range(3):
        t.write(rows([10 + i], 3))  # retention 1: the consumer keeps snapshots 3 on from expiring
    assert t.store.snapshot_manager.earliest_id() == 3
    with t.subscribe(consumer_id="reader") as sub:  # only what came after the full snapshot
        later = collect(sub, lambda out: len(out) >= 3)
        time.sleep(0.5)
        assert sub.poll(0.5) is None
    assert sorted((r["rowkind"], r["k"]) for r in later) == [("+I", 10), ("+I", 11), ("+I", 12)]


def test_a_new_consumer_cannot_start_at_an_expired_snapshot(tmp_path: Path) -> None:
    from lakelog.connector.errors import SnapshotExpiredError

    t = make(tmp_path, None, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    for i in range(3):
        t.write(rows([i], i))
    with pytest.raises(SnapshotExpiredError, match=r"consumer 'late' .* snapshot 1 next, but it has expired"):
        t.subscribe(consumer_id="late", scan_mode="from-snapshot", snapshot_id=1)
    assert t.store.consumer_manager.get("late") is None
