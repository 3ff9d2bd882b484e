"""The Kafka log of a table, against a real broker: what reaches the topic, exactly once.

Each test makes its own table (and so its own topic) on the session's broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import LogSystemError, OptionError
from lakelog.connector.log.codec import COMMIT_HEADER, KIND_HEADER, USER_HEADER, decode_values
from lakelog.connector.table.changes import delta_rows
from lakelog.connector.table.log import log_config
from tests.kafka_fixtures import KafkaEndpoint
from tests.test_subscribe import collect

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])


CLIENTS = pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])


def confluent_admin(config: Any) -> Any:
    """An admin client of the test's own (the log's clients are behind lakelog's seam)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": config.bootstrap_servers})


def make(
    warehouse: Path, broker: KafkaEndpoint, name: str = "db.t", client: str = "auto", **options: str
) -> lakelog.Table:
    opts = {"bucket": "2", "log.system": "kafka", "kafka.bootstrap.servers": broker.bootstrap_servers,
            "log.kafka.client": client, **options}  # fmt: skip
    return lakelog.Catalog(str(warehouse)).create_table(
        name, SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts
    )


def rows(dt: str, ids: list[int], v: str) -> pa.Table:
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def topic_records(t: lakelog.Table, *, committed: bool = True, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Every record of the table's topic a ``read_committed`` (or uncommitted) consumer sees now."""
    config = log_config(t.store)
    assert config is not None
    end = config.list_offsets("latest", committed=committed)
    c = config.consumer(read_committed=committed)
    c.assign({p: 0 for p in end})
    out: list[dict[str, Any]] = []
    done = {p for p, e in end.items() if e == 0}
    deadline = time.time() + timeout
    while len(done) < len(end) and time.time() < deadline:
        for m in c.poll(500, 0.5):
            if m.value is not None or "lakelog.gap" in m.headers:
                out.append({"partition": m.partition, "offset": m.offset, "key": m.key, "value": m.value, "headers": m.headers})
        # the position passes transaction markers, which are never delivered as records
        for p in end:
            if c.position(p) >= end[p]:
                done.add(p)
    c.close()
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def decoded(t: lakelog.Table, records: list[dict[str, Any]]) -> list[tuple[str, int, Any]]:
    data, kinds = decode_values(
        [r["value"] for r in records], [r["key"] for r in records], [r["headers"].get(KIND_HEADER) for r in records],
        t.schema,
    )
    names = ["+I", "-U", "+U", "-D"]
    return [(names[k], r["id"], r["v"]) for k, r in zip(kinds, data.to_pylist())]


def die_after_the_snapshot(catalog: str, data: dict[str, list[Any]]) -> None:
    """In another process: open ``db.t`` of ``catalog`` (Python source of a Catalog) and write
    ``data``; the process dies after the snapshot is published, before the Kafka transaction
    commits."""
    script = textwrap.dedent(
        f"""
        import os, pyarrow as pa, lakelog
        from lakelog.connector.log import publisher
        def die(self, snapshot_id):
            self.end_offsets()
            os._exit(17)
        publisher.LogPublisher.commit = die
        t = {catalog}.get_table("db.t")
        t.write(pa.table({data!r}, schema=t.schema))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr[-2000:]


@CLIENTS
def test_every_commit_reaches_the_topic_once_with_the_snapshots_offsets(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    t = make(tmp_path, kafka_broker, client=client)
    config = log_config(t.store)
    assert config is not None and config.kafka().name == client  # 'log.kafka.client' picks the library
    t.write(rows("a", [1, 2, 3], "x"))
    t.write(rows("a", [2], "y"))
    t.delete(pa.table({"dt": ["a"], "id": [3]}))
    with t.stream_writer(commit_user="job") as w:
        w.write(rows("b", [4], "z")).commit()
        w.write(rows("b", [4], "zz")).commit()
    records = topic_records(t)
    got = decoded(t, records)
    assert sorted(got) == sorted(
        [("+I", 1, "x"), ("+I", 2, "x"), ("+I", 3, "x"), ("+I", 2, "y"), ("-D", 3, None), ("+I", 4, "z"), ("+I", 4, "zz")]
    )
    # what a streaming reader of the files emits, snapshot by snapshot, is what the topic holds
    expect = []
    for s in t.snapshots():
        ch = delta_rows(t.store, s.id - 1, s.id).to_pylist()
        expect += [(c["rowkind"], c["id"], c["v"]) for c in ch if c["rowkind"] != "-U"]
    assert sorted(got) == sorted(expect)
    # logOffsets: the offset after each snapshot's records (a transaction's commit marker takes one
    # more offset); the last snapshot's are past every record
    config = log_config(t.store)
    assert config is not None
    last = t.latest_snapshot().log_offsets
    assert set(last) == {0, 1} and all(last[p] <= e for p, e in config.list_offsets("latest").items())
    assert all(r["offset"] < last[r["partition"]] for r in records)
    by_commit: dict[tuple[bytes, bytes], list[dict[str, Any]]] = {}
    for r in records:
        by_commit.setdefault((r["headers"][USER_HEADER], r["headers"][COMMIT_HEADER]), []).append(r)
    for s in t.snapshots():
        mine = by_commit[(s.commit_user.encode(), str(s.commit_identifier).encode())]
        for r in mine:
            assert r["offset"] < s.log_offsets[r["partition"]]
    # and a key's records sit in its bucket's partition, in commit order
    ids_a2 = [r for r in records if json.loads(r["key"]) == {"dt": "a", "id": 2}]
    assert [json.loads(r["value"])["after"]["v"] for r in ids_a2] == ["x", "y"]


@CLIENTS
def test_a_writer_dying_before_its_log_transaction_loses_nothing_and_repeats_nothing(
    tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    """The commit is published (snapshot file) and the process dies before the Kafka transaction
    commits: the broker aborts it, and the next commit publishes the snapshot's changes first."""
    t = make(tmp_path, kafka_broker, client=client, **{"kafka.transaction.timeout.ms": "5000"})
    t.write(rows("a", [1], "before"))
    die_after_the_snapshot(f"lakelog.Catalog({str(tmp_path)!r})", {"dt": ["a", "a"], "id": [1, 2], "v": ["lost?", "lost?"]})
    assert t.latest_snapshot().id == 2  # the table has the commit
    assert sorted(decoded(t, topic_records(t))) == [("+I", 1, "before")]  # the log does not, yet
    t.write(rows("b", [9], "next"))  # catches up: snapshot 2, then its own
    got = decoded(t, topic_records(t))
    assert sorted(got) == sorted([("+I", 1, "before"), ("+I", 1, "lost?"), ("+I", 2, "lost?"), ("+I", 9, "next")])
    # the aborted attempt's records are invisible to read_committed readers, but took offsets
    uncommitted = topic_records(t, committed=False)
    assert len(uncommitted) > len(got)


def test_an_unreachable_broker_fails_create_table_quickly_and_leaves_nothing(tmp_path: Path) -> None:
    catalog = lakelog.Catalog(str(tmp_path))
    started = time.time()
    with pytest.raises(LogSystemError, match="127.0.0.1:9 did not answer"):
        catalog.create_table(
            "db.t", SCHEMA, primary_key=["dt", "id"], options={
                "bucket": "1", "log.system": "kafka", "kafka.bootstrap.servers": "127.0.0.1:9",
            },
        )
    assert time.time() - started < 60
    assert not catalog.table_exists("db.t")
    assert not (tmp_path / "db.db" / "t").exists()


def test_a_missing_topic_or_too_few_partitions_is_named(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    topic = f"given-{uuid.uuid4().hex[:8]}"
    with pytest.raises(LogSystemError, match=f"{topic}.*does not exist"):
        make(tmp_path, kafka_broker, **{"kafka.topic": topic, "log.system.auto-register": "false"})
    from tests.kafka_fixtures import create_topic

    create_topic(kafka_broker.bootstrap_servers, 1, name=topic)
    with pytest.raises(LogSystemError, match=f"{topic}.*1 partition.*fewer than the table's 2"):
        make(tmp_path, kafka_broker, **{"kafka.topic": topic, "log.system.auto-register": "false"})


@pytest.mark.parametrize(
    "options, match",
    [
        ({"log.format": "avro"}, "log.format"),
        ({"log.key.format": "csv"}, "log.key.format"),
        ({"log.system": "pulsar"}, "log.system"),
        ({"log.consistency": "sometimes"}, "log.consistency"),
    ],
)
def test_bad_log_options_are_refused_by_name(tmp_path: Path, kafka_broker: KafkaEndpoint, options: dict[str, str], match: str) -> None:
    with pytest.raises(OptionError, match=match):
        make(tmp_path, kafka_broker, **options)


def test_eventual_consistency_needs_a_primary_key(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    with pytest.raises(OptionError, match="eventual.*primary key"):
        lakelog.Catalog(str(tmp_path)).create_table(
            "db.t", SCHEMA, options={
                "log.system": "kafka", "log.consistency": "eventual", "kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
            },
        )


@CLIENTS
def test_a_deleted_topic_is_named_and_loses_no_commit(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    """The topic is deleted under the table: writes fail naming it before any snapshot, readers
    are told the log is gone; the files keep every committed row."""
    t = make(tmp_path, kafka_broker, client=client)
    t.write(rows("a", [1, 2], "x"))
    config = log_config(t.store)
    assert config is not None
    config.delete_topic()
    deadline = time.time() + 30
    while config.topic_partitions() is not None and time.time() < deadline:
        time.sleep(0.2)
    # the first write after it learns it from its producer (whose records cannot be delivered),
    # the next from the topic's absence
    with pytest.raises(LogSystemError, match=config.topic):
        t.write(rows("a", [3], "y"))
    with pytest.raises(LogSystemError, match=f"{config.topic}.*does not exist"):
        t.write(rows("a", [4], "z"))
    assert t.latest_snapshot().id == 1
    with pytest.raises(LogSystemError, match="does not exist"):
        t.subscribe(scan_mode="from-snapshot", snapshot_id=1)
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 2]
    config.delete_topic()  # deleting a missing topic is no error


@CLIENTS
def test_eventual_writes_reach_the_log_before_the_commit(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    t = make(tmp_path, kafka_broker, client=client, **{"log.consistency": "eventual"})
    with t.stream_writer(commit_user="ev") as w:
        w.write(rows("a", [1, 2], "x"))
        w.delete(pa.table({"dt": ["a"], "id": [2]}))
        deadline = time.time() + 5  # "as soon as written": the producer sends within milliseconds
        seen: list[Any] = []
        while len(seen) < 3 and time.time() < deadline:
            seen = decoded(t, topic_records(t, committed=False))  # nothing committed yet
        assert sorted(seen) == sorted([("+I", 1, "x"), ("+I", 2, "x"), ("-D", 2, None)])
        assert t.latest_snapshot() is None
        w.commit()
    snap = t.latest_snapshot()
    assert snap is not None and snap.log_offsets
    records = topic_records(t, committed=False)
    assert all(r["offset"] < snap.log_offsets[r["partition"]] for r in records)
    # a hybrid read from that snapshot starts after them: only newer changes follow its rows
    with t.stream_writer(commit_user="ev") as w:
        w.write(rows("a", [3], "y")).commit()
    sub = t.subscribe(scan_mode="from-snapshot-full", snapshot_id=snap.id)
    got: list[tuple[str, int, Any]] = []
    deadline = time.time() + 30
    while len(got) < 2 and time.time() < deadline:
        batch = sub.poll(0.5)
        if batch is not None:
            got += [(r["rowkind"], r["id"], r["v"]) for r in batch.to_pylist()]
    sub.close()
    assert got == [("+I", 1, "x"), ("+I", 3, "y")]


@CLIENTS
def test_a_broker_restart_loses_nothing(tmp_path: Path, client: str) -> None:
    """Writers and a subscription go on across a restart of the broker, without a manual step."""
    from lakelog.jobs.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path / "broker")
    broker.start(timeout=180.0)
    try:
        t = make(tmp_path / "wh", KafkaEndpoint(broker.bootstrap_servers, broker), client=client)
        t.write(rows("a", [1], "one"))
        sub = t.subscribe(scan_mode="from-snapshot", snapshot_id=1)
        broker.stop()
        started = time.time()
        with pytest.raises(LogSystemError):
            t.write(rows("a", [2], "while down"))  # refused with a clear error, nothing committed
        assert time.time() - started < 90
        config = log_config(t.store)
        assert config is not None
        while time.time() - started < 15:  # a client's reconnect backoff grows while the broker is away
            with pytest.raises(LogSystemError):
                config.topic_partitions(timeout=1.0)
        assert t.latest_snapshot().id == 1
        broker.start(timeout=180.0)
        # the clients of the outage are not stuck in a reconnect backoff (kafka-python's grows to 30 s)
        assert config.topic_partitions(timeout=3.0) == 2
        t.write(rows("a", [3], "three"))
        got: list[Any] = []
        deadline = time.time() + 60
        while len(got) < 2 and time.time() < deadline:
            batch = sub.poll(0.5)
            if batch is not None:
                got += [(r["id"], r["v"]) for r in batch.to_pylist()]
        sub.close()
        assert got == [(1, "one"), (3, "three")]
        assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 3]
    finally:
        broker.stop()


def test_the_log_keeps_working_across_schema_changes(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    """Records written before an ALTER are read in the table's new schema (columns matched by
    field id: renamed, added and dropped), and an old reader's subscription goes on."""
    t = make(tmp_path, kafka_broker)
    old_reader = t.subscribe(scan_mode="from-snapshot", snapshot_id=1)
    t.write(rows("a", [1], "before"))
    t.alter(lakelog.RenameColumn("v", "value"), lakelog.AddColumn("n", pa.int32()))
    t = lakelog.Catalog(str(tmp_path)).get_table("db.t")
    t.write(pa.table({"dt": ["a"], "id": [2], "value": ["after"], "n": [7]}, schema=t.schema))
    new_reader = t.subscribe(scan_mode="from-snapshot", snapshot_id=1)
    got: list[dict[str, Any]] = []
    deadline = time.time() + 30
    while len(got) < 2 and time.time() < deadline:
        batch = new_reader.poll(0.5)
        if batch is not None:
            got += batch.to_pylist()
    new_reader.close()
    assert [(r["id"], r["value"], r["n"]) for r in got] == [(1, "before", None), (2, "after", 7)]
    seen: list[dict[str, Any]] = []
    deadline = time.time() + 30
    while len(seen) < 2 and time.time() < deadline:
        batch = old_reader.poll(0.5)
        if batch is not None:
            seen += batch.to_pylist()
    old_reader.close()
    assert [(r["id"], r["v"]) for r in seen] == [(1, "before"), (2, "after")]  # in the schema it started with


def test_log_changelog_mode_all_keeps_update_before(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    opts = {"changelog-producer": "lookup"}
    upsert = make(tmp_path / "u", kafka_broker, **opts)
    everything = make(tmp_path / "a", kafka_broker, **opts, **{"log.changelog-mode": "all"})
    for t in (upsert, everything):
        t.write(rows("a", [1], "x"))
        t.write(rows("a", [1], "y"))
    assert sorted(k for k, _, _ in decoded(upsert, topic_records(upsert))) == ["+I", "+U"]
    assert sorted(k for k, _, _ in decoded(everything, topic_records(everything))) == ["+I", "+U", "-U"]


def test_log_ignore_delete_leaves_deletes_out(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    kept = make(tmp_path / "k", kafka_broker)
    ignored = make(tmp_path / "i", kafka_broker, **{"log.ignore-delete": "true"})
    for t in (kept, ignored):
        t.write(rows("a", [1, 2], "x"))
        t.delete(pa.table({"dt": ["a"], "id": [1]}))
    assert sorted(k for k, _, _ in decoded(kept, topic_records(kept))) == ["+I", "+I", "-D"]
    assert sorted(k for k, _, _ in decoded(ignored, topic_records(ignored))) == ["+I", "+I"]


@CLIENTS
def test_the_topic_is_made_as_the_log_options_say(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    from confluent_kafka.admin import ConfigResource

    t = make(tmp_path, kafka_broker, client=client, **{"log.system.partitions": "5", "log.retention": "2 h"})
    config = log_config(t.store)
    assert config is not None and config.topic_partitions() == 5
    admin = confluent_admin(config)
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, config.topic)]).values()
    assert future.result(timeout=30)["retention.ms"].value == str(2 * 3600 * 1000)
    # one broker here: a replication factor of 2 cannot be had, and the error says so
    with pytest.raises(LogSystemError, match="cannot create topic.*replication"):
        make(tmp_path / "r", kafka_broker, client=client, **{"log.system.replication": "2"})
    assert not (tmp_path / "r" / "db.db" / "t").exists()


@CLIENTS
def test_kafka_properties_reach_the_clients(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    with pytest.raises(OptionError, match="no.such.property"):
        make(tmp_path, kafka_broker, client=client, **{"kafka.no.such.property": "1"})
    t = make(tmp_path / "ok", kafka_broker, client=client, **{"kafka.client.id": "lakelog-test-client"})
    t.write(rows("a", [1], "x"))
    assert decoded(t, topic_records(t)) == [("+I", 1, "x")]


def test_writers_in_several_processes_share_one_exact_log(tmp_path: Path, kafka_broker: KafkaEndpoint) -> None:
    """Each process's publisher fences the others' (one transactional id per topic); a commit whose
    producer was fenced starts again, and a snapshot another process left unpublished is published
    by the next commit: every change reaches the log once."""
    t = make(tmp_path, kafka_broker)
    script = textwrap.dedent(
        f"""
        import sys, pyarrow as pa, lakelog
        t = lakelog.Catalog({str(tmp_path)!r}).get_table("db.t")
        w = int(sys.argv[1])
        for i in range(8):
            t.write(pa.table({{"dt": ["p"], "id": [w * 100 + i], "v": [str(i)]}}, schema=t.schema))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)], stderr=subprocess.PIPE, text=True) for w in (1, 2, 3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    t.write(rows("p", [999], "last"))  # publishes whatever a process left unpublished
    got = decoded(t, topic_records(t))
    assert sorted(i for _, i, _ in got) == sorted([w * 100 + i for w in (1, 2, 3) for i in range(8)] + [999])


@CLIENTS
def test_a_new_tables_log_starts_with_marker_zero(tmp_path: Path, kafka_broker: KafkaEndpoint, client: str) -> None:
    """The marker exists before the first commit: a writer fenced in its first commit has its
    snapshot caught up by the next writer instead of being taken for history."""
    from lakelog.connector.log.publisher import LogPublisher

    t = make(tmp_path, kafka_broker, client=client)
    config = log_config(t.store)
    assert config is not None
    pub = LogPublisher(config)
    try:
        assert pub.marker() == 0
        t.write(rows("a", [1], "x"))
        latest = t.latest_snapshot()
        assert latest is not None and pub.marker() == latest.id
    finally:
        pub.close()


@pytest.mark.parametrize(
    "key, value", [("log.system", "kafka"), ("log.consistency", "eventual"), ("kafka.topic", "other"), ("log.system.partitions", "4")]
)
def test_the_log_cannot_be_attached_or_moved_by_alter(tmp_path: Path, key: str, value: str) -> None:
    """Attaching a log to a table with history (or moving or re-partitioning it) is refused by
    name: the log is set up with the table."""
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"])
    with pytest.raises(OptionError, match=key):
        t.alter(lakelog.SetOption(key, value))


@pytest.mark.parametrize("consistency", ["transactional", "eventual"])
def test_alter_bucket_keeps_each_partitions_keys_in_their_kafka_partition(
    tmp_path: Path, kafka_broker: KafkaEndpoint, consistency: str
) -> None:
    """ALTER bucket: old partitions keep their count (and so each key its bucket and its Kafka
    partition), new partitions take the new one; a bucket beyond the topic's partitions writes
    partition bucket mod P. The log stays exact and a hybrid read equals the table."""
    from lakelog.connector.format.bucket import compute_buckets

    t = make(tmp_path, kafka_broker, **{"log.consistency": consistency})
    t.write(rows("a", list(range(20)), "x"))
    sub = t.subscribe()  # the table's rows, then the log: it follows the ALTER and both partitions
    t.alter(lakelog.SetOption("bucket", "3"))  # the topic keeps its 2 partitions
    t = lakelog.Catalog(str(tmp_path)).get_table("db.t")
    with t.stream_writer() as w:
        w.write(rows("a", list(range(10)), "y")).commit()  # old partition: still 2 buckets
        w.write(rows("b", list(range(20)), "z")).commit()  # new partition: 3 buckets
    recs = topic_records(t)
    bucket_key = list(t.store.schema.bucket_keys)  # ["id"]: the primary key less the partition
    types = t.store.field_types(bucket_key)
    for dt, n in (("a", 2), ("b", 3)):
        mine = [r for r in recs if json.loads(r["key"])["dt"] == dt]
        keys = pa.table({"id": pa.array([json.loads(r["key"])["id"] for r in mine], pa.int64())})
        want = compute_buckets(keys, bucket_key, types, n) % 2
        assert len(mine) > 0 and [r["partition"] for r in mine] == want.tolist()
        assert (n == 3) == any(b >= 2 for b in compute_buckets(keys, bucket_key, types, n).tolist())
    assert sorted((r["dt"], r["id"], r["v"]) for r in t.to_arrow().to_pylist()) == sorted(
        [("a", i, "y" if i < 10 else "x") for i in range(20)] + [("b", i, "z") for i in range(20)]
    )
    state: dict[tuple[str, int], Any] = {}
    seen = 0

    def applied(changes: list[dict[str, Any]]) -> bool:
        nonlocal seen
        for c in changes[seen:]:
            if c["rowkind"] in ("+I", "+U"):
                state[(c["dt"], c["id"])] = c["v"]
            else:
                state.pop((c["dt"], c["id"]), None)
        seen = len(changes)
        return len(state) == 40 and sum(v == "y" for v in state.values()) == 10

    with sub:
        collect(sub, applied)
    assert state == {(r["dt"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}
    with pytest.raises(OptionError, match="Kafka log"):
        t.rescale(partitions=[{"dt": "a"}])  # a rewrite would move keys between partitions
    # an overwrite would rewrite partition a with the table's 3 buckets: refused the same way; one of
    # partition b (already 3 buckets) is made, and publishes nothing to the log
    before, last = len(topic_records(t)), t.latest_snapshot()
    with pytest.raises(OptionError, match=r"dt=a.*from 2 to 3 buckets.*Kafka log.*'bucket' back to 2"):
        t.overwrite(rows("a", [1], "o"), partition={"dt": "a"})
    assert t.refresh().latest_snapshot().id == last.id
    sid = t.overwrite(rows("b", [1, 2], "o"), partition={"dt": "b"})
    snap = t.refresh().latest_snapshot()
    assert sid == snap.id and snap.commit_kind == "OVERWRITE" and snap.log_offsets == last.log_offsets
    assert len(topic_records(t)) == before
    assert sorted((r["dt"], r["id"], r["v"]) for r in t.to_arrow().to_pylist() if r["dt"] == "b") == [
        ("b", 1, "o"),
        ("b", 2, "o"),
    ]


@pytest.mark.s3
def test_the_log_of_a_table_on_s3_is_exact_and_catches_up_after_a_lost_transaction(
    kafka_broker: KafkaEndpoint, s3_catalog_args: tuple[str, dict[str, str]]
) -> None:
    """The log's bookkeeping (the snapshots' log offsets, the catch-up of a snapshot whose log
    transaction died with its writer, a hybrid read's start) through the object-store file IO."""
    wh, options = s3_catalog_args
    opts = {"bucket": "2", "log.system": "kafka", "kafka.bootstrap.servers": kafka_broker.bootstrap_servers,
            "kafka.transaction.timeout.ms": "5000"}
    t = lakelog.Catalog(wh, options=options).create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options=opts
    )
    t.write(rows("a", [1, 2, 3], "x"))
    t.delete(pa.table({"dt": ["a"], "id": [3]}))
    die_after_the_snapshot(f"lakelog.Catalog({wh!r}, options={options!r})", {"dt": ["b"], "id": [7], "v": ["lost?"]})
    assert t.latest_snapshot().id == 3
    sub = t.subscribe()  # latest-full: snapshot 3's rows from S3, then the log
    t.write(rows("a", [2], "y"))  # publishes snapshot 3's changes first, then its own
    got = decoded(t, topic_records(t))
    expect = []
    for s in t.snapshots():
        ch = delta_rows(t.store, s.id - 1, s.id).to_pylist()
        expect += [(c["rowkind"], c["id"], c["v"]) for c in ch if c["rowkind"] != "-U"]
    assert sorted(got) == sorted(expect)
    assert sorted(got) == sorted([("+I", 1, "x"), ("+I", 2, "x"), ("+I", 3, "x"), ("-D", 3, None),
                                  ("+I", 7, "lost?"), ("+I", 2, "y")])
    streamed = collect(sub, lambda out: len(out) >= 4)
    sub.close()
    assert [(r["rowkind"], r["id"], r["v"]) for r in streamed[3:]] == [("+I", 2, "y")]
    assert sorted((r["id"], r["v"]) for r in streamed[:3]) == [(1, "x"), (2, "x"), (7, "lost?")]
