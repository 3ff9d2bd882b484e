"""Table index files in the format layer: HASH index bytes, index manifests (Avro, full state),
and how a commit's index entries combine with the previous snapshot's."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.index_file import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    IndexFileMeta,
    IndexManifestEntry,
    decode_hash_index,
    encode_hash_index,
)
from lakelog.connector.format.index_manifest import IndexManifestFile, combine_index_entries


def entry(p: bytes, b: int, name: str, kind: str = HASH_INDEX, rows: int = 3) -> IndexManifestEntry:
    return IndexManifestEntry(0, p, b, IndexFileMeta(kind, name, 4 * rows, rows))


def test_hash_index_is_big_endian_int32_without_header() -> None:
    hashes = np.array([-300363099, 1, -1, 2**31 - 1], dtype=np.int32)
    data = encode_hash_index(hashes)
    assert len(data) == 16 and data[4:8] == b"\x00\x00\x00\x01" and data[8:12] == b"\xff\xff\xff\xff"
    assert decode_hash_index(data).tolist() == hashes.tolist()
    with pytest.raises(CorruptFileError, match="not a multiple of 4"):
        decode_hash_index(b"\x00" * 5, "index-x")


def test_index_manifest_round_trip_and_java_layout(tmp_path: Path) -> None:
    f = IndexManifestFile(FileIO(), str(tmp_path))
    dv = IndexFileMeta(
        DELETION_VECTORS_INDEX, "index-dv-0", 100, 2,
        dv_ranges=({"f0": "data-1.parquet", "f1": 1, "f2": 20, "_CARDINALITY": 3},
                   {"f0": "data-2.parquet", "f1": 21, "f2": 9, "_CARDINALITY": None}),
        external_path="file:/x/index-dv-0",
    )
    entries = [entry(b"\x00\x00\x00\x01p", 0, "index-a-0"), IndexManifestEntry(0, b"\x00", 3, dv)]
    name = f.write(entries)
    assert name.startswith("index-manifest-") and name.endswith("-0")
    assert f.read(name) == entries
    with open(tmp_path / name, "rb") as fh:
        reader = fastavro.reader(fh)
        fields = [x["name"] for x in reader.writer_schema["fields"]]
        records = list(reader)
    assert fields == ["_VERSION", "_KIND", "_PARTITION", "_BUCKET", "_INDEX_TYPE", "_FILE_NAME", "_FILE_SIZE",
                      "_ROW_COUNT", "_DELETIONS_VECTORS_RANGES", "_EXTERNAL_PATH"]
    assert records[0]["_VERSION"] == 1 and records[0]["_DELETIONS_VECTORS_RANGES"] is None
    with pytest.raises(CorruptFileError, match="ADD entries only"):
        f.write([IndexManifestEntry(1, b"", 0, entries[0].index_file)])


def test_reads_a_pypaimon_index_manifest(tmp_path: Path) -> None:
    """pypaimon 2.1 writes an extra ``_GLOBAL_INDEX`` field and non-null DV items: read by name."""
    schema = {
        "type": "record", "name": "IndexManifestEntry", "fields": [
            {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"},
            {"name": "_PARTITION", "type": "bytes"}, {"name": "_BUCKET", "type": "int"},
            {"name": "_INDEX_TYPE", "type": "string"}, {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"}, {"name": "_ROW_COUNT", "type": "long"},
            {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
            {"name": "_GLOBAL_INDEX", "type": ["null", "bytes"], "default": None},
        ],
    }
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"_VERSION": 1, "_KIND": 0, "_PARTITION": b"p", "_BUCKET": 2,
                                   "_INDEX_TYPE": "HASH", "_FILE_NAME": "index-u-0", "_FILE_SIZE": 12,
                                   "_ROW_COUNT": 3, "_EXTERNAL_PATH": None, "_GLOBAL_INDEX": None}],
                    codec="zstandard")
    (tmp_path / "index-manifest-pp").write_bytes(buf.getvalue())
    got = IndexManifestFile(FileIO(), str(tmp_path)).read("index-manifest-pp")
    assert got == [entry(b"p", 2, "index-u-0")]


def test_combine_replaces_per_bucket_and_drops_overwritten_partitions() -> None:
    a, b = b"\x00\x00\x00\x01a", b"\x00\x00\x00\x01b"
    previous = [entry(a, 0, "i-0"), entry(a, 1, "i-1"), entry(b, 0, "i-2"),
                entry(b"", -1, "dv-1", DELETION_VECTORS_INDEX), entry(b"", -1, "dv-2", DELETION_VECTORS_INDEX)]
    got = combine_index_entries(previous, [entry(a, 1, "i-3"), entry(a, 2, "i-4")])
    assert [e.index_file.file_name for e in got] == ["i-0", "i-3", "i-2", "dv-1", "dv-2", "i-4"]
    got = combine_index_entries(previous, [entry(a, 0, "i-5")], dropped=lambda e: e.partition == a)
    assert [e.index_file.file_name for e in got] == ["i-2", "dv-1", "dv-2", "i-5"]


def test_table_store_pickles(catalog: lakelog.Catalog) -> None:
    """Regression: a TableStore did not pickle (its manifest file namers hold a lock), though it is
    meant to travel to Flink workers. A copy names files with a UUID of its own."""
    t = catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64(), False)]), primary_key=["id"])
    t.write(pa.table({"id": [1, 2]}))
    copy = pickle.loads(pickle.dumps(t.store))
    assert copy.manifest_file.new_file_name().rsplit("-", 1)[0] != t.store.manifest_file.new_file_name().rsplit("-", 1)[0]
    assert copy.live_entries(copy.snapshot_manager.latest())
