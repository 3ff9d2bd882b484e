"""Flink-free parts of the lakelog source and SQL wrapper (scan modes, filters, statement splitting)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import OptionError, SchemaError
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.scan_start import resolve_start, scan_options

from .conftest import MakeTable

SCHEMA = pa.schema(
    [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), pa.field("v", pa.string())]
)


@pytest.fixture()
def history(make_table: MakeTable) -> lakelog.Table:
    """Four snapshots: two writes, a full compaction, a write."""
    t = make_table(schema=SCHEMA)
    t.write(pa.table({"dt": ["a", "a", "b"], "id": [1, 2, 3], "v": ["x", "y", "z"]}, schema=SCHEMA))  # 1
    t.write(pa.table({"dt": ["a"], "id": [1], "v": ["X"]}, schema=SCHEMA))  # 2
    t.compact(full=True)  # 3
    t.write(pa.table({"dt": ["b"], "id": [4], "v": ["w"]}, schema=SCHEMA))  # 4
    return t


def test_parse_filter() -> None:
    e = parse_filter(
        "dt = 'a' AND (id >= 2 OR v IS NULL) AND id NOT IN (7, 8) AND id BETWEEN 1 AND 9", SCHEMA
    )
    t = pa.table({"dt": ["a", "a", "b", "a"], "id": [1, 2, 3, 8], "v": ["x", None, "z", "q"]}, schema=SCHEMA)
    assert t.filter(e).column("id").to_pylist() == [2]
    assert parse_filter(None, SCHEMA) is None
    expr = pc.field("id") > 1
    assert parse_filter(expr, SCHEMA) is expr
    with pytest.raises(SchemaError, match="nope"):
        parse_filter("nope = 1", SCHEMA)
    with pytest.raises(OptionError):
        parse_filter("id = ", SCHEMA)


def test_scan_modes(history: lakelog.Table) -> None:
    t = history
    store = t.store

    def start(streaming: bool, **opts: str) -> tuple:
        s = resolve_start(store, scan_options(store, opts), streaming=streaming)
        return s.full_snapshot, s.next_snapshot, s.incremental

    assert start(False) == (4, None, None)
    assert start(True) == (4, 5, None)
    assert start(True, **{"scan.mode": "latest"}) == (None, 5, None)
    assert start(False, **{"scan.mode": "compacted-full"}) == (3, None, None)
    assert start(True, **{"scan.mode": "compacted-full"}) == (3, 4, None)
    assert start(True, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}) == (None, 2, None)
    assert start(False, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}) == (2, None, None)
    ts = str(t.snapshot(2).time_millis)
    assert start(True, **{"scan.mode": "from-timestamp", "scan.timestamp-millis": ts}) == (None, 3, None)
    assert start(False, **{"scan.mode": "from-timestamp", "scan.timestamp-millis": ts}) == (2, None, None)
    assert start(False, **{"scan.mode": "incremental", "incremental-between": "1,4"}) == (None, None, (1, 4))
    with pytest.raises(OptionError, match="batch"):
        start(True, **{"scan.mode": "incremental", "incremental-between": "1,4"})
    with pytest.raises(OptionError):
        scan_options(store, {"scan.mode": "nonsense"})


def test_plan_batch_prunes_partitions(history: lakelog.Table) -> None:
    from lakelog.operators.source import plan_batch

    t = history
    _, all_splits = plan_batch(t.path)
    _, some = plan_batch(t.path, filter="dt = 'b'")
    assert len(some) < len(all_splits)
    assert all(t.store.partition_values(s.partition) == ("b",) for s in some)


def test_timestamp_spellings_of_start_and_range(make_table: MakeTable) -> None:
    import datetime
    import time

    t = make_table(schema=SCHEMA)
    for i in range(3):  # snapshots 1..3, at distinct milliseconds
        t.write(pa.table({"dt": ["a"], "id": [i], "v": ["x"]}, schema=SCHEMA))
        time.sleep(0.01)
    store = t.store

    def start(streaming: bool, **opts: str) -> tuple:
        s = resolve_start(store, scan_options(store, opts), streaming=streaming)
        return s.full_snapshot, s.next_snapshot, s.incremental

    # scan.timestamp: local time, as Paimon reads it (the last snapshot at or before it)
    local = datetime.datetime.fromtimestamp(t.snapshot(2).time_millis / 1000 + 0.0005)
    text = local.isoformat(sep=" ", timespec="milliseconds")
    assert start(False, **{"scan.mode": "from-timestamp", "scan.timestamp": text}) == (2, None, None)
    assert start(False, **{"scan.timestamp": text}) == (2, None, None)  # the mode follows from the option
    assert start(True, **{"scan.timestamp": text}) == (None, 3, None)
    with pytest.raises(OptionError, match="'scan.timestamp'"):
        start(False, **{"scan.timestamp": "yesterday"})
    # incremental-between-timestamp: the snapshots after t1 up to t2
    t1, t3 = t.snapshot(1).time_millis, t.snapshot(3).time_millis
    assert start(False, **{"incremental-between-timestamp": f"{t1},{t3}"}) == (None, None, (1, 3))
    assert start(False, **{"incremental-between-timestamp": f"0,{t1}"}) == (None, None, (0, 1))
    with pytest.raises(OptionError, match="neither epoch milliseconds nor a local time"):
        start(False, **{"incremental-between-timestamp": "a,b"})
    with pytest.raises(OptionError, match="must be 'start,end'"):
        start(False, **{"incremental-between-timestamp": "1"})
    # ... or as local times, as Paimon's docs write them (issue 24)
    def local(millis: int) -> str:
        return datetime.datetime.fromtimestamp(millis / 1000).isoformat(sep=" ", timespec="milliseconds")

    spec = f"{local(t1)},{local(t3)}"
    assert start(False, **{"incremental-between-timestamp": spec}) == (None, None, (1, 3))
