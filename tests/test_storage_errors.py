"""A full disk and a read-only file system surface as StorageError naming the path, with the
original OSError as the cause, and leave no temp files; missing files keep FileNotFoundError
semantics.

The full disk is real: writes go to ``/dev/full`` (through a symlink where lakelog would create a
file), which fails every write with ENOSPC. The read-only file system is a read-only bind mount
of the warehouse when the test runs as root (where permissions do not stop writes), and a
read-only directory mode otherwise.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import LakelogError, MissingFileError, StorageError
from lakelog.connector.format import data_file
from lakelog.connector.format.fileio import FileIO

from .conftest import ORDERS, MakeTable

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def _rows(ids: list[int], dt: str = "d1") -> pa.Table:
    n = len(ids)
    return pa.table({"dt": [dt] * n, "id": ids, "name": ["x"] * n, "amount": [1.0] * n}, schema=ORDERS)


def _tmp_files(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".tmp")]


# ---- a full disk -------------------------------------------------------------------------------------
@needs_dev_full
def test_fileio_write_on_a_full_disk_names_the_path_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fio = FileIO()
    target = str(tmp_path / "manifest" / "manifest-1")
    original = FileIO.temp_path

    def full_temp(self: FileIO, path: str) -> str:
        tmp = original(self, path)
        os.symlink("/dev/full", tmp)
        return tmp

    monkeypatch.setattr(FileIO, "temp_path", full_temp)
    for publish in (fio.write_bytes, fio.try_publish, fio.overwrite_atomic):
        with pytest.raises(StorageError) as e:
            publish(target, b"x" * 100_000)
        assert e.value.errno == errno.ENOSPC and e.value.filename == target
        assert target in str(e.value) and "ENOSPC" in str(e.value) and "free space" in str(e.value)
        assert isinstance(e.value.__cause__, OSError) and e.value.__cause__.errno == errno.ENOSPC
        assert isinstance(e.value, OSError) and isinstance(e.value, LakelogError)
        assert os.listdir(tmp_path / "manifest") == []  # neither the file nor a .tmp


@needs_dev_full
def test_a_data_file_on_a_full_disk_fails_the_write_by_name(
    catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = catalog.create_table("db.t", ORDERS)  # append table: files go to <table>/bucket-0
    t.write(_rows([1]))
    bucket_dir = os.path.join(t.path, "bucket-0")
    os.symlink("/dev/full", os.path.join(bucket_dir, "data-full-0.parquet"))
    monkeypatch.setattr(data_file, "new_data_file_name", lambda *a, **k: "data-full-0.parquet")
    with pytest.raises(StorageError, match=r"cannot write the data file .*data-full-0\.parquet.*ENOSPC") as e:
        t.write(_rows(list(range(100_000))))
    assert e.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert len(t.snapshots()) == 1 and t.to_arrow().num_rows == 1
    t.write(_rows([2]))  # the disk has room again
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]


@needs_dev_full
def test_a_manifest_on_a_full_disk_fails_the_commit_by_name(
    make_table: MakeTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_table()
    t.write(_rows([1]))
    original = FileIO.temp_path

    def full_temp(self: FileIO, path: str) -> str:
        tmp = original(self, path)
        if os.path.basename(os.path.dirname(path)) == "manifest":
            os.symlink("/dev/full", tmp)
        return tmp

    monkeypatch.setattr(FileIO, "temp_path", full_temp)
    with pytest.raises(StorageError, match=r"cannot write .*/manifest/.*ENOSPC"):
        t.write(_rows([2]))
    monkeypatch.undo()
    assert _tmp_files(t.path) == []
    assert len(t.snapshots()) == 1 and t.to_arrow().column("id").to_pylist() == [1]


# ---- a read-only file system -------------------------------------------------------------------------
@pytest.fixture()
def read_only_dir() -> Iterator[Callable[[str], None]]:
    """Call it with a directory to make that directory tree read-only for real: as root, where
    permissions do not stop writes, a read-only bind mount of the directory onto itself (writes
    below it fail with EROFS, as on a file system mounted read-only); otherwise mode 0555 on every
    directory in it (EACCES). Undone after the test."""
    mounted: list[str] = []
    chmodded: list[str] = []

    def make(path: str) -> None:
        if os.geteuid() == 0:
            for cmd in (["mount", "--bind", path, path], ["mount", "-o", "remount,bind,ro", path]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    pytest.skip(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
                if cmd[1] == "--bind":
                    mounted.append(path)
        else:
            for d, _, _ in os.walk(path):
                os.chmod(d, 0o555)
                chmodded.append(d)

    yield make
    for m in reversed(mounted):
        subprocess.run(["umount", m], check=True)
    for d in chmodded:
        os.chmod(d, 0o755)


@pytest.fixture()
def read_only(warehouse: str, read_only_dir: Callable[[str], None]) -> Callable[[], None]:
    """Call it to make the warehouse read-only."""
    return lambda: read_only_dir(warehouse)


def test_a_read_only_file_system_refuses_writes_by_name_and_still_reads(
    catalog: lakelog.Catalog, make_table: MakeTable, read_only: Callable[[], None]
) -> None:
    t = make_table()
    t.write(_rows([1, 2]))
    read_only()
    with pytest.raises(StorageError) as e:
        t.write(_rows([3]))
    assert e.value.errno in (errno.EROFS, errno.EACCES)
    assert e.value.filename and e.value.filename.startswith(t.path)
    assert e.value.filename in str(e.value)
    with pytest.raises(StorageError, match=r"cannot (create the directory|publish|write)"):
        catalog.create_table("db.other", ORDERS)
    with pytest.raises(StorageError):
        t.create_tag("nightly")
    # reads need no writes
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]
    assert catalog.list_tables("db") == ["t"]


def _listing(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def _pk_rows(ids: list[int]) -> pa.Table:
    return pa.table({"dt": ["d1"] * len(ids), "id": ids, "name": ["x"] * len(ids), "amount": [1.0] * len(ids)},
                    schema=ORDERS)


# case: (primary key, options, directory made read-only (relative to the table), the failing file)
_WRITERS = {
    "append data file": (None, {"bucket": "-1"}, ".", r"/bucket-0/data-[^/]*\.parquet"),
    "primary-key data file": (("dt", "id"), {"bucket": "1"}, ".", r"/bucket-0/data-[^/]*\.parquet"),
    "changelog file": (("dt", "id"), {"bucket": "1", "changelog-producer": "input"}, ".",
                       r"/bucket-0/changelog-[^/]*\.parquet"),
    "compaction output": (None, {"bucket": "-1"}, ".", r"/bucket-0/data-[^/]*\.parquet"),
    "index file": (("dt", "id"), {"bucket": "-1"}, "index", r"/index/index-[^/]*"),
}


@pytest.mark.parametrize("case", list(_WRITERS))
def test_every_file_writer_on_a_read_only_file_system_fails_by_name_and_commits_nothing(
    catalog: lakelog.Catalog, read_only_dir: Callable[[str], None], case: str
) -> None:
    """Regression: a data file written into an existing bucket directory of a read-only file system
    raised a raw ``OSError`` (EROFS): pyarrow's failure to create the file was a StorageError, but
    the cleanup after it, removing the file that was never created, failed with EROFS too (a
    read-only file system refuses the removal before it looks the name up) and replaced it. So did
    changelog files and compaction outputs, which the same writer writes. The error names the file;
    nothing is committed and nothing is left behind (for the index file, written after the bucket's
    data files, those are removed again)."""
    primary_key, options, read_only_part, failing = _WRITERS[case]
    t = catalog.create_table("db.t", ORDERS, primary_key=list(primary_key) if primary_key else None,
                             options=options)
    t.write(_pk_rows([1, 2]))
    t.write(_pk_rows([3]))
    before, snapshots, rows = _listing(t.path), len(t.snapshots()), t.to_arrow().sort_by("id")
    read_only_dir(os.path.join(t.path, read_only_part))
    with pytest.raises(StorageError) as e:
        if case == "compaction output":
            t.compact(full=True)
        else:
            t.write(_pk_rows([1, 4, 5]))
    assert e.value.errno in (errno.EROFS, errno.EACCES), e.value
    assert e.value.filename is not None and re.search(failing + "$", e.value.filename), e.value
    assert e.value.filename.startswith(t.path) and e.value.filename in str(e.value)
    assert len(t.snapshots()) == snapshots and t.to_arrow().sort_by("id").equals(rows)
    assert _listing(t.path) == before


def test_a_spill_on_a_read_only_file_system_fails_by_name(
    catalog: lakelog.Catalog, read_only_dir: Callable[[str], None], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: a write buffer spilling into a read-only temporary directory raised a raw
    ``OSError`` from ``tempfile.mkdtemp``."""
    t = catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], options={
        "bucket": "1", "write-buffer-size": "1 b", "write-buffer-spillable": "true"})
    spills = tmp_path / "tmp"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    read_only_dir(str(spills))
    with pytest.raises(StorageError, match=rf"cannot create a spill directory in {re.escape(str(spills))}") as e:
        t.write(_pk_rows([1, 2]))
    assert e.value.errno in (errno.EROFS, errno.EACCES)
    assert t.snapshots() == [] and _listing(t.path) == {"schema/schema-0"}


def test_drop_table_on_a_read_only_file_system_fails_by_name(
    catalog: lakelog.Catalog, make_table: MakeTable, read_only: Callable[[], None]
) -> None:
    """Regression: dropping a table on a read-only file system reported success and deleted nothing."""
    t = make_table()
    t.write(_rows([1]))
    read_only()
    with pytest.raises(StorageError, match=rf"cannot delete {re.escape(t.path)}"):
        catalog.drop_table("db.t")
    assert catalog.get_table("db.t").to_arrow().num_rows == 1


# ---- what stays FileNotFoundError ------------------------------------------------------------------
def test_missing_files_keep_file_not_found_semantics(tmp_path: Path) -> None:
    fio = FileIO()
    with pytest.raises(MissingFileError) as e:
        fio.read_bytes(str(tmp_path / "nope"))
    assert isinstance(e.value, FileNotFoundError)
    assert fio.list_dir(str(tmp_path / "nope")) == []
    assert fio.delete(str(tmp_path / "nope")) is False
    assert fio.delete_empty_dir(str(tmp_path / "nope")) is False
    with pytest.raises(FileNotFoundError):
        fio.mtime(str(tmp_path / "nope"))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"")
    assert fio.delete_empty_dir(str(tmp_path / "d")) is False
    os.remove(tmp_path / "d" / "f")
    assert fio.delete_empty_dir(str(tmp_path / "d")) is True


def test_a_storage_error_pickles_with_its_message() -> None:
    import pickle

    e = StorageError("cannot write /x: No space left on device (ENOSPC)", "/x", errno.ENOSPC)
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) and isinstance(back, StorageError)
