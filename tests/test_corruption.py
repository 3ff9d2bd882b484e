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


# ---- issue 19, item 7: a schema file that contradicts the data files' layout ----------------------------
def _edit_schema(t: lakelog.Table, schema_id: int, **changes: object) -> Path:
    import json

    path = Path(t.path) / "schema" / f"schema-{schema_id}"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return path


def _table_state(t: lakelog.Table) -> tuple[list[str], list[str]]:
    root = Path(t.path)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "schema" not in p.parts)
    return files, sorted(os.listdir(root / "snapshot"))


def test_a_schema_file_edited_to_drop_the_primary_key_is_refused_as_corrupt(
    make_table: MakeTable, catalog: lakelog.Catalog
) -> None:
    """Read as an append table, the key-value files would bring the deleted row 1 back (and every
    older version of row 2); a compaction would then make that permanent."""
    t = make_table(partition_by=None, options={"bucket": "1"})
    t.write(orders([1, 2]))
    t.write(orders([2]))
    t.delete(orders([1]).select(["dt", "id"]))
    schema_file = _edit_schema(t, 0, primaryKeys=[])
    edited = catalog.get_table("db.t")
    assert edited.primary_keys == []
    before = _table_state(edited)
    attempts = {
        "read": lambda: edited.to_arrow(),
        "changes": lambda: edited.changes(0),
        "write": lambda: edited.write(orders([7])),
        "compact": lambda: edited.compact(full=True),
        "compact-universal": lambda: edited.compact(full=False),
        "overwrite": lambda: edited.overwrite(orders([7])),
    }
    for what, attempt in attempts.items():
        with pytest.raises(CorruptFileError) as e:
            attempt()
        msg = str(e.value)
        assert str(schema_file) in msg and "data-" in msg and "no primary key" in msg, (what, msg)
        assert _table_state(edited) == before, what  # nothing written, nothing committed


def test_a_schema_file_edited_to_add_a_primary_key_is_refused_as_corrupt(
    make_table: MakeTable, catalog: lakelog.Catalog
) -> None:
    t = make_table(primary_key=None, partition_by=None, options={"bucket": "1", "bucket-key": "id"})
    t.write(orders([1, 1, 2]))  # an append table keeps both rows of id 1
    schema_file = _edit_schema(t, 0, primaryKeys=["dt", "id"])
    edited = catalog.get_table("db.t")
    before = _table_state(edited)
    for attempt in (edited.to_arrow, lambda: edited.write(orders([7])), lambda: edited.compact(full=True)):
        with pytest.raises(CorruptFileError, match=f"{schema_file}.*primary key \\['dt', 'id'\\]"):
            attempt()
        assert _table_state(edited) == before


def test_schema_files_that_disagree_on_the_primary_key_are_refused(
    make_table: MakeTable, catalog: lakelog.Catalog
) -> None:
    t = make_table(partition_by=None, options={"bucket": "1"})
    t.write(orders([1, 2]))
    t.write(orders([3]))
    t.alter(lakelog.AddColumn("note", pa.string()))
    t.write(pa.table({"dt": ["d"], "id": [4], "name": ["n4"], "amount": [1.0], "note": ["x"]}))
    _edit_schema(t, 0, primaryKeys=["id"])  # an older schema, still read for the older files
    with pytest.raises(CorruptFileError, match="schema-0 and .*schema-1 .*different primary keys"):
        catalog.get_table("db.t").to_arrow()


def test_the_layout_check_reads_only_the_footer_already_open(make_table: MakeTable) -> None:
    """Reading opens each data file once, as before: the size check, the footer's checksum, the
    layout check and the read itself all use the one handle the file IO opened."""
    import pyarrow.parquet as pq

    from lakelog.connector.format.fileio import FileIO

    t = make_table(options={"bucket": "1"})
    for i in range(3):
        t.write(orders([i, i + 10]))
    opened: list[str] = []
    parquet_files: list[object] = []
    real_open, real_init = FileIO.open_input, pq.ParquetFile.__init__

    def counting_open(self: FileIO, path: str) -> object:
        opened.append(path)
        return real_open(self, path)

    def counting_init(self: pq.ParquetFile, source: object, *args: object, **kwargs: object) -> None:
        parquet_files.append(source)
        real_init(self, source, *args, **kwargs)  # type: ignore[arg-type]

    FileIO.open_input = counting_open  # type: ignore[method-assign]
    pq.ParquetFile.__init__ = counting_init  # type: ignore[method-assign]
    try:
        assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]
    finally:
        FileIO.open_input = real_open  # type: ignore[method-assign]
        pq.ParquetFile.__init__ = real_init  # type: ignore[method-assign]
    data = [p for p in opened if p.endswith(".parquet")]
    assert len(data) == len(set(data)) == 3
    assert len(parquet_files) == 3


@pytest.mark.parametrize("damage", ["schema file", "schema directory", "everything but data files"])
def test_a_damaged_table_can_be_dropped(make_table: MakeTable, catalog: lakelog.Catalog, damage: str) -> None:
    """Regression: ``drop_table`` refused a table whose schema file was missing ("does not exist"),
    so the only way to get rid of a table that cannot be opened was to delete its directory by hand.
    Dropping a damaged table removes its directory, and the name is free again."""
    t = make_table("db.t")
    t.write(orders([1, 2]))
    root = Path(t.path)
    if damage == "schema file":
        os.remove(root / "schema" / "schema-0")
    elif damage == "schema directory":
        shutil.rmtree(root / "schema")
    else:
        for d in ("schema", "snapshot", "manifest"):
            shutil.rmtree(root / d)
    catalog.drop_table("db.t")
    assert not root.exists()
    with pytest.raises(TableNotFoundError):
        catalog.drop_table("db.t")
    catalog.drop_table("db.t", missing_ok=True)
    fresh = catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], partition_by=["dt"])
    assert fresh.to_arrow().num_rows == 0


def _rename_in_footer(path: Path, column: str, new: bytes) -> None:
    """Overwrite the name of ``column`` in the file's footer (Parquet schema) with ``new``, as long."""
    from lakelog.connector.format import thrift_compact as tc
    from lakelog.connector.format.parquet_footer import read_footer

    cut, footer = read_footer(str(path))
    schema = tc.field(tc.read_struct(footer), 2)
    assert schema is not None
    name = next(f for e in schema.value.items for f in e if f.id == 4 and f.value == column.encode())
    assert len(new) == len(column) and name.end - len(new) >= name.vpos
    with open(path, "r+b") as fh:
        fh.seek(cut + name.end - len(new))
        fh.write(new)


@pytest.mark.parametrize("new", [b"nbme", b"n\xffme"], ids=["other-name", "not-utf-8"])
def test_a_damaged_column_name_in_a_footer_is_refused_by_name(
    make_table: MakeTable, monkeypatch: pytest.MonkeyPatch, new: bytes
) -> None:
    """Regression: pyarrow leaves out the columns to read that a file lacks, and the read then failed
    with a raw KeyError; a name that is no UTF-8 failed with a raw UnicodeDecodeError. (The file
    is written without the footer checksum, which would catch the damage first, as Paimon's and
    pypaimon's files are.)"""
    from lakelog.connector.format import parquet_layout

    monkeypatch.setattr(parquet_layout, "DEFAULT_LAYOUT", parquet_layout.WriteLayout(checksums=False))
    t = make_table(options={"bucket": "1"})
    t.write(orders([1, 2, 3]))
    (f,) = data_files(t)
    _rename_in_footer(f, "name", new)
    with pytest.raises(CorruptFileError, match=f.name):
        t.to_arrow()


def test_a_data_file_missing_a_column_of_its_schema_is_refused_by_name(make_table: MakeTable) -> None:
    from lakelog.connector.format.data_file import iter_data_file, read_data_file

    t = make_table(options={"bucket": "1"})
    t.write(orders([1, 2, 3]))
    (f,) = data_files(t)
    with pytest.raises(CorruptFileError, match=rf"{f.name} lacks the column\(s\) \['nope'\]"):
        read_data_file(str(f), ["id", "nope"])
    with pytest.raises(CorruptFileError, match=f.name):
        next(iter_data_file(str(f), ["nope"]))
