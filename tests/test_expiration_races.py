"""Expiration racing writers, compactions and readers (issue: hardening 11).

With a small retention, an expirer removes files while others work. An append must never fail for
files it does not need, a compaction whose inputs were expired is planned again, a read of the
latest snapshot moves on to the new latest, and a read of an older snapshot that expires under it
says so (SnapshotExpiredError), not 'missing file'.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import SnapshotExpiredError

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string())])


@pytest.mark.parametrize("primary_key", [True, False], ids=["primary-key", "append"])
def test_appends_compactions_and_reads_survive_a_racing_expirer(tmp_path: Path, primary_key: bool) -> None:
    catalog = lakelog.Catalog(str(tmp_path))
    t = catalog.create_table(
        "db.t", SCHEMA, primary_key=["k"] if primary_key else None, options={"bucket": "2"} if primary_key else {}
    )
    stop = threading.Event()
    errors: Counter[str] = Counter()
    expired_reads = [0]

    def expirer() -> None:
        other = catalog.get_table("db.t")
        while not stop.is_set():
            other.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)

    def reader() -> None:
        other = catalog.get_table("db.t")
        while not stop.is_set():
            s = other.latest_snapshot()
            if s is None or s.id < 2:
                continue
            try:
                other.to_arrow(snapshot_id=s.id - 1)
            except SnapshotExpiredError:
                expired_reads[0] += 1
            except Exception as e:  # noqa: BLE001 - counted and asserted below
                errors[f"old read: {type(e).__name__}: {e}"] += 1
            try:
                other.to_arrow()
            except Exception as e:  # noqa: BLE001
                errors[f"latest read: {type(e).__name__}: {e}"] += 1

    threads = [threading.Thread(target=expirer), threading.Thread(target=reader)]
    for th in threads:
        th.start()
    oracle: dict[int, str] = {}
    rows = 0
    try:
        for i in range(50):
            keys = [i % 13, (i * 7) % 13]
            try:
                t.write(pa.table({"k": keys, "v": [str(i)] * 2}, schema=SCHEMA))
                oracle.update({k: str(i) for k in keys})
                rows += 2
            except Exception as e:  # noqa: BLE001
                errors[f"append: {type(e).__name__}: {e}"] += 1
            if i % 10 == 9:
                try:
                    t.compact(full=True)
                except Exception as e:  # noqa: BLE001
                    errors[f"compact: {type(e).__name__}: {e}"] += 1
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert dict(errors) == {}
    got = t.to_arrow()
    if primary_key:
        assert {r["k"]: r["v"] for r in got.to_pylist()} == oracle
    else:
        assert got.num_rows == rows
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []


def test_a_time_travel_read_expired_under_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "1"})
    for i in range(3):
        t.write(pa.table({"k": [i], "v": ["a"]}, schema=SCHEMA))
    t.compact(full=True)
    scan = t.scan(snapshot_id=2)
    scan.plan()
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    with pytest.raises(SnapshotExpiredError, match="snapshot 2 .*expired while it was being read"):
        scan.to_arrow()
    latest = t.scan()
    latest.plan()
    t.write(pa.table({"k": [9], "v": ["b"]}, schema=SCHEMA))
    t.compact(full=True)
    t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=2**62)
    assert sorted(latest.to_arrow().column("k").to_pylist()) == [0, 1, 2, 9]  # moved on to the new latest
