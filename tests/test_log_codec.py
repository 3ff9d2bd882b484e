"""The log's record format: Debezium JSON that lakelog and other Kafka readers read back exactly."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from lakelog.connector.log.codec import decode_values, encode_changes, kind_header

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), False),
        pa.field("id", pa.int64(), False),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("f", pa.float64()),
        ("f32", pa.float32()),
        ("d", pa.decimal128(10, 2)),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("day", pa.date32()),
        ("t", pa.time32("ms")),
        ("ts", pa.timestamp("us")),
        ("ts9", pa.timestamp("ns")),
        ("ltz", pa.timestamp("ms", tz="UTC")),
        ("arr", pa.list_(pa.int32())),
    ]
)
ROWS = pa.table(
    {
        "dt": ["2024-06-01", "2024-06-02", "x"],
        "id": [1, -2, 2**62],
        "b": [True, None, False],
        "i8": [-128, 0, None],
        "f": [1.5, float("nan"), float("-inf")],
        "f32": [0.1, None, -0.0],
        "d": [Decimal("123.45"), Decimal("-0.01"), None],
        "s": ['quote " back \\ newline \n tab \t', "ctrl \x01 é ünï 😀", None],
        "bin": [b"\x00\xff", None, b""],
        "day": [dt.date(2024, 6, 1), dt.date(1970, 1, 1), None],
        "t": [dt.time(1, 2, 3, 400000), None, dt.time(23, 59, 59)],
        "ts": [dt.datetime(2024, 6, 1, 12, 34, 56, 123456), None, dt.datetime(1900, 1, 1)],
        "ts9": pa.array([1_717_245_296_123_456_789, None, -1], pa.timestamp("ns")),
        "ltz": pa.array([dt.datetime(2024, 6, 1, 12, 0, tzinfo=dt.timezone.utc), None, None], pa.timestamp("ms", tz="UTC")),
        "arr": [[1, 2], None, []],
    },
    schema=SCHEMA,
)


def test_every_record_is_debezium_json_with_a_json_key() -> None:
    kinds = np.array([0, 2, 3], np.int8)
    rec = encode_changes(ROWS, kinds, ["dt", "id"], upsert=True)
    docs = [json.loads(v) for v in rec.values]
    assert [d["op"] for d in docs] == ["c", "c", "d"]
    assert docs[0]["before"] is None and docs[0]["after"]["id"] == 1
    assert docs[2]["after"] is None and docs[2]["before"]["id"] == 2**62
    assert docs[0]["after"]["d"] == 123.45 and docs[1]["after"]["f"] == "NaN" and docs[2]["before"]["f"] == "-Infinity"
    assert docs[0]["after"]["ts"] == "2024-06-01 12:34:56.123456"
    assert docs[0]["after"]["ltz"] == "2024-06-01 12:00:00.000Z"
    assert docs[0]["after"]["day"] == "2024-06-01" and docs[0]["after"]["t"] == "01:02:03.400"
    assert docs[0]["after"]["bin"] == "AP8="
    assert docs[0]["after"]["s"] == ROWS.column("s")[0].as_py()
    assert [json.loads(k) for k in rec.keys] == [
        {"dt": "2024-06-01", "id": 1},
        {"dt": "2024-06-02", "id": -2},
        {"dt": "x", "id": 2**62},
    ]


def test_records_decode_back_to_the_same_rows_and_kinds() -> None:
    kinds = np.array([0, 1, 3], np.int8)
    rec = encode_changes(ROWS, kinds, ["dt", "id"], upsert=False)
    headers = [kind_header(int(k)) for k in rec.kinds]
    rows, got_kinds = decode_values(list(rec.values), rec.keys, headers, SCHEMA)
    assert got_kinds.tolist() == [0, 1, 3]
    expected = ROWS.to_pylist()
    for got, want in zip(rows.to_pylist(), expected):
        for name in SCHEMA.names:
            g, w = got[name], want[name]
            if isinstance(w, float) and w != w:
                assert g != g, name
            else:
                assert g == w, (name, g, w)


def test_upsert_mode_leaves_update_before_out_and_foreign_readers_see_ops() -> None:
    t = ROWS.slice(0, 2)
    rec = encode_changes(t, np.array([1, 2], np.int8), ["dt", "id"], upsert=True)
    assert rec.kinds.tolist() == [2] and len(rec.values) == 1
    rows, kinds = decode_values(list(rec.values), rec.keys, [None], SCHEMA)  # no lakelog header
    assert kinds.tolist() == [0]  # a foreign reader sees +U as an insert (Debezium 'c')
    assert rows.column("id").to_pylist() == [-2]


def test_append_tables_write_no_key_and_tombstones_read_as_deletes() -> None:
    rec = encode_changes(ROWS.slice(0, 1), np.array([0], np.int8), [], upsert=False)
    assert rec.keys == [None]
    rows, kinds = decode_values([None], [b'{"dt":"a","id":7}'], [None], SCHEMA)
    assert kinds.tolist() == [3] and rows.column("id").to_pylist() == [7] and rows.column("s").to_pylist() == [None]


def test_the_kafka_client_is_picked_as_log_kafka_client_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakelog.connector.errors import LogSystemError
    from lakelog.connector.log import client

    assert client.pick_client("kafka-python", "db.t") == "kafka-python"
    assert client.pick_client("confluent-kafka", "db.t") == "confluent-kafka"
    assert client.pick_client("auto", "db.t") == "confluent-kafka"  # the faster one, when installed
    monkeypatch.setattr(client, "installed", lambda name: name == "kafka-python")
    assert client.pick_client("auto", "db.t") == "kafka-python"
    with pytest.raises(LogSystemError, match=r"'confluent-kafka', which is not installed: pip install 'lakelog\[kafka-fast\]'"):
        client.pick_client("confluent-kafka", "db.t")
    monkeypatch.setattr(client, "installed", lambda name: False)
    with pytest.raises(LogSystemError, match=r"no Kafka client is installed: pip install 'lakelog\[kafka\]'"):
        client.pick_client("auto", "db.t")


def test_kafka_options_become_kafka_python_arguments() -> None:
    from kafka import KafkaProducer

    from lakelog.connector.errors import OptionError
    from lakelog.connector.log.client_kafka_python import KafkaPythonClient

    class Config:
        bootstrap_servers = "h1:9092,h2:9092"
        table, topic = "db.t", "x"
        properties = {"ssl.ca.location": "/ca.pem", "security.protocol": "SSL", "acks": "all", "linger.ms": "7",
                      "sasl.username": "u", "enable.idempotence": "true"}  # fmt: skip

    kw = KafkaPythonClient(Config())._kwargs(KafkaProducer.DEFAULT_CONFIG, "producer")
    assert kw["bootstrap_servers"] == ["h1:9092", "h2:9092"]
    assert (kw["ssl_cafile"], kw["security_protocol"], kw["acks"], kw["linger_ms"]) == ("/ca.pem", "SSL", "all", 7)
    assert kw["sasl_plain_username"] == "u" and kw["enable_idempotence"] is True
    Config.properties = {"no.such.property": "1"}
    with pytest.raises(OptionError, match=r"kafka-python takes no option 'kafka.no.such.property'"):
        KafkaPythonClient(Config())._kwargs(KafkaProducer.DEFAULT_CONFIG, "producer")
