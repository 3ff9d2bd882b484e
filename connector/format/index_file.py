"""Table index files: the records an index manifest lists, and the bytes of Paimon's ``HASH`` index.

A dynamic-bucket table (``bucket = -1`` with a primary key holding every partition field) keeps, per
partition and bucket, one ``HASH`` index file: the distinct 32-bit key hashes ever written to that
bucket, each as a big-endian int32, with no header, footer or checksum (Paimon's spec,
``concepts/spec/tableindex.md``). Readers must not assume an order; lakelog writes them ascending.
Index files live in ``<table>/index/`` and are named ``index-<uuid>-<n>``, like Paimon's.

Deletion-vector index files (``DELETION_VECTORS``) of tables written by Paimon share the manifest;
lakelog keeps their records as they are and never writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.fileio import FileIO

__all__ = [
    "HASH_INDEX",
    "DELETION_VECTORS_INDEX",
    "IndexFileMeta",
    "IndexManifestEntry",
    "encode_hash_index",
    "decode_hash_index",
    "read_hash_index",
]

HASH_INDEX = "HASH"
DELETION_VECTORS_INDEX = "DELETION_VECTORS"


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    """One index file as an index manifest records it.

    ``dv_ranges`` are the deletion-vector ranges of a ``DELETION_VECTORS`` file, kept as decoded
    (records with ``f0`` data file, ``f1`` offset, ``f2`` length, ``_CARDINALITY``); None for
    ``HASH`` files, whose ``row_count`` is the number of hashes and ``file_size`` four times that.
    """

    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: Optional[tuple[Any, ...]] = None
    external_path: Optional[str] = None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    """An index file of one (partition, bucket). On disk every entry is an ADD (``kind`` 0): an index
    manifest lists the full set of live index files of its snapshot."""

    kind: int
    partition: bytes
    bucket: int
    index_file: IndexFileMeta

    def slot(self) -> tuple[bytes, int, str]:
        """What identifies a bucketed index: at most one live file per (partition, bucket, type)."""
        return (self.partition, self.bucket, self.index_file.index_type)


def encode_hash_index(hashes: np.ndarray) -> bytes:
    """The bytes of a ``HASH`` index file holding ``hashes`` (int32 values), in the given order."""
    return np.ascontiguousarray(hashes, dtype=">i4").tobytes()


def decode_hash_index(data: bytes, path: str = "<hash index>") -> np.ndarray:
    """The int32 hashes of a ``HASH`` index file (in file order)."""
    if len(data) % 4:
        raise CorruptFileError(f"hash index file {path} has {len(data)} bytes, not a multiple of 4")
    return np.frombuffer(data, dtype=">i4").astype(np.int32)


def read_hash_index(file_io: FileIO, path: str) -> np.ndarray:
    """The hashes of the ``HASH`` index file at ``path``; missing files raise ``MissingFileError``."""
    return decode_hash_index(file_io.read_bytes(path), path)
