"""Damage that used to read back without an error now names the file (issue: hardening 7-9)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError, CorruptTableError, TableNotFoundError

from .conftest import ORDERS, MakeTable


def orders(ids: list[int]) -> pa.Table:
    n = len(ids)
    data = {"dt": ["d"] * n, "id": ids, "name": [f"n{i}" for i in ids], "amount": [1.0] * n}
    return pa.table(data, schema=ORDERS)


def data_files(t: lakelog.Table) -> list[Path]:
    return sorted(Path(t.path).rglob("data-*.parquet"), key=lambda p: p.stat().st_mtime_ns)


@pytest.mark.parametrize("bucket", ["1", "-1"], ids=["primary-key", "append"])
def test_a_data_file_replaced_by_another_live_file_is_refused_by_name(
    make_table: MakeTable, bucket: str
) -> None:
    t = make_table(primary_key=("dt", "id") if bucket == "1" else None, options={"bucket": bucket})
    t.write(orders([1, 2, 3]))
    t.write(orders([10, 11, 12, 13, 14, 15, 16]))
    first, second = data_files(t)
    shutil.copyfile(second, first)  # another live file of the table, in the first one's place
    with pytest.raises(CorruptFileError, match=f"{first.name}.*(bytes|rows).*manifest records"):
        t.to_arrow()


def test_a_truncated_data_file_is_refused_by_name(make_table: MakeTable) -> None:
    t = make_table(options={"bucket": "1"})
    t.write(orders(list(range(50))))
    (f,) = data_files(t)
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size - 10)
    with pytest.raises(CorruptFileError, match=f.name):
        t.to_arrow()


def test_a_snapshot_file_holding_another_snapshot_is_refused_by_name(make_table: MakeTable) -> None:
    t = make_table()
    for i in range(3):
        t.write(orders([i]))
    snap_dir = Path(t.path) / "snapshot"
    shutil.copyfile(snap_dir / "snapshot-2", snap_dir / "snapshot-3")
    with pytest.raises(CorruptFileError, match="snapshot-3 holds snapshot 2"):
        t.to_arrow()
    with pytest.raises(CorruptFileError, match="snapshot-3 holds snapshot 2"):
        t.write(orders([9]))  # at once, not after 200 retries
    assert t.to_arrow(snapshot_id=2).num_rows == 2


def test_a_table_without_its_schema_is_reported_corrupt_and_not_recreated(
    make_table: MakeTable, catalog: lakelog.Catalog
) -> None:
    t = make_table("db.t")
    t.write(orders([1, 2]))
    os.remove(Path(t.path) / "schema" / "schema-0")
    with pytest.raises(CorruptTableError, match="snapshots but no schema"):
        catalog.get_table("db.t")
    with pytest.raises(CorruptTableError, match="would adopt them|earlier table"):
        catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], partition_by=["dt"])
    assert list((Path(t.path) / "snapshot").glob("snapshot-*"))  # nothing was touched
    with pytest.raises(TableNotFoundError):
        catalog.get_table("db.nothing")


def test_a_full_disk_leaves_no_temp_files(make_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: ENOSPC while writing metadata left ``.tmp`` files behind."""
    import errno

    t = make_table()
    t.write(orders([1]))
    real_fsync = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        t.write(orders([2]))
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert [p for p in Path(t.path).rglob("*") if p.name.endswith(".tmp")] == []
    assert t.remove_orphan_files(older_than_seconds=0, dry_run=True) == []
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1]
    t.write(orders([3]))
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 3]
