"""Index manifests: ``<table>/manifest/index-manifest-<uuid>-<n>``, named by a snapshot's
``indexManifest``.

An index manifest is a full-state file, not a delta: it lists every live index file of its snapshot,
each as an ADD entry. A commit that changes the index writes a new manifest from the previous one
(:func:`combine_index_entries`); a commit that does not reuses the previous snapshot's name.

The Avro layout is Paimon 1.3's ``IndexManifestEntry`` (record version 1): ``_VERSION``, ``_KIND``,
``_PARTITION``, ``_BUCKET``, ``_INDEX_TYPE``, ``_FILE_NAME``, ``_FILE_SIZE``, ``_ROW_COUNT``,
``_DELETIONS_VECTORS_RANGES`` and ``_EXTERNAL_PATH``. Later writers add fields (pypaimon 2.1 writes
``_GLOBAL_INDEX``); readers resolve fields by name, so both read each other's files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.avro import ContainerWriter, avro_codec, encode_long
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.index_file import IndexFileMeta, IndexManifestEntry
from lakelog.connector.format.manifest_files import _Namer, _read_avro

__all__ = ["INDEX_MANIFEST_SCHEMA", "IndexManifestFile", "combine_index_entries"]

_RECORD_VERSION = 1
_ADD = 0


def _nullable(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


_DV_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "DeletionVectorMeta",
    "fields": [
        {"name": "f0", "type": "string"},
        {"name": "f1", "type": "int"},
        {"name": "f2", "type": "int"},
        _nullable("_CARDINALITY", "long"),
    ],
}

#: Writer schema of an index manifest (Paimon 1.3's fields; pypaimon's record names).
INDEX_MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "IndexManifestEntry",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        _nullable("_DELETIONS_VECTORS_RANGES", {"type": "array", "items": ["null", _DV_META_SCHEMA]}),
        _nullable("_EXTERNAL_PATH", "string"),
    ],
}
_SCHEMA_JSON = json.dumps(INDEX_MANIFEST_SCHEMA).encode()


def _enc_bytes(b: bytes) -> bytes:
    return encode_long(len(b)) + b


def _enc_str(s: str) -> bytes:
    return _enc_bytes(s.encode())


def _enc_dv_ranges(ranges: Optional[Sequence[Any]]) -> bytes:
    if ranges is None:
        return b"\x00"
    parts = [b"\x02"]
    if ranges:
        parts.append(encode_long(len(ranges)))
        for r in ranges:
            if r is None:
                parts.append(b"\x00")
                continue
            card = r.get("_CARDINALITY")
            parts += [
                b"\x02",
                _enc_str(str(r["f0"])),
                encode_long(int(r["f1"])),
                encode_long(int(r["f2"])),
                b"\x00" if card is None else b"\x02" + encode_long(int(card)),
            ]
    parts.append(b"\x00")
    return b"".join(parts)


def _encode(e: IndexManifestEntry) -> bytes:
    f = e.index_file
    return b"".join(
        (
            encode_long(_RECORD_VERSION),
            encode_long(e.kind),
            _enc_bytes(e.partition),
            encode_long(e.bucket),
            _enc_str(f.index_type),
            _enc_str(f.file_name),
            encode_long(f.file_size),
            encode_long(f.row_count),
            _enc_dv_ranges(f.dv_ranges),
            b"\x00" if f.external_path is None else b"\x02" + _enc_str(f.external_path),
        )
    )


def _from_record(r: Mapping[str, Any]) -> IndexManifestEntry:
    ranges = r.get("_DELETIONS_VECTORS_RANGES")
    meta = IndexFileMeta(
        index_type=r["_INDEX_TYPE"],
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        row_count=r["_ROW_COUNT"],
        dv_ranges=None if ranges is None else tuple(ranges),
        external_path=r.get("_EXTERNAL_PATH"),
    )
    return IndexManifestEntry(r["_KIND"], r["_PARTITION"], r["_BUCKET"], meta)


class IndexManifestFile:
    """Reads and writes index manifests in ``manifest_dir`` (the table's ``manifest`` directory)."""

    def __init__(self, file_io: FileIO, manifest_dir: str, *, compression: str = "zstd") -> None:
        self.file_io = file_io
        self.manifest_dir = manifest_dir.rstrip("/")
        self.codec = avro_codec(compression)
        self._namer = _Namer("index-manifest")

    def path(self, file_name: str) -> str:
        return f"{self.manifest_dir}/{file_name}"

    def write(self, entries: Iterable[IndexManifestEntry]) -> str:
        """Write a new index manifest holding ``entries`` (all ADDs); return its file name."""
        writer = ContainerWriter(_SCHEMA_JSON, self.codec)
        for e in entries:
            if e.kind != _ADD:
                raise CorruptFileError(f"an index manifest holds ADD entries only, not {e}")
            writer.add(_encode(e))
        name = self._namer.next()
        self.file_io.write_bytes(self.path(name), writer.finish())
        return name

    def read(self, file_name: str) -> list[IndexManifestEntry]:
        """All entries of one index manifest (missing or corrupt files raise errors naming it)."""
        path = self.path(file_name)
        entries = _read_avro(self.file_io, path, "index manifest", "_INDEX_TYPE", None, None, _from_record)
        for e in entries:
            if e.kind != _ADD:
                raise CorruptFileError(
                    f"index manifest {path} holds a non-ADD entry for {e.index_file.file_name}"
                )
        return entries

    def delete(self, file_name: str) -> bool:
        return self.file_io.delete(self.path(file_name))


def combine_index_entries(
    previous: Sequence[IndexManifestEntry],
    added: Sequence[IndexManifestEntry],
    *,
    dropped: Optional[Callable[[IndexManifestEntry], bool]] = None,
) -> list[IndexManifestEntry]:
    """The live index entries after a commit: ``previous`` without the entries ``dropped`` selects
    (an overwrite drops its partitions' index), then ``added``, where an added file replaces the live
    files of the same (partition, bucket, index type) as Paimon's bucketed combiner does. Entries
    ``added`` does not replace all stay, several of one bucket too (Paimon's writers give a
    partition of an unaware-bucket append table several deletion-vector files, all in bucket 0).
    Foreign deletion-vector files of bucket -1 are kept by file name."""
    new: dict[Any, Optional[IndexManifestEntry]] = {_identity(e): e for e in added}
    out: list[IndexManifestEntry] = []
    for e in previous:
        if dropped is not None and dropped(e):
            continue
        key = _identity(e)
        if key not in new:
            out.append(e)
        else:
            replacement = new[key]
            if replacement is not None:
                out.append(replacement)  # in the place of the first file it replaces
                new[key] = None
    return out + [e for e in new.values() if e is not None]


def _identity(e: IndexManifestEntry) -> Any:
    if e.bucket < 0:  # deletion vectors of an unaware-bucket table: one record per file
        return ("file", e.index_file.file_name)
    return e.slot()
