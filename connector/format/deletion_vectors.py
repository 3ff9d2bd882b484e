"""Deletion vectors: which rows of a data file are deleted, in Paimon's bytes.

A deletion vector is a set of row positions of one data file. lakelog holds it as a sorted, unique
``numpy`` array of positions (``uint64``), so that applying it to a batch is one vectorised mask.

On disk (Paimon's spec, ``concepts/spec/tableindex.md``) the deletion vectors of one bucket live
in one ``DELETION_VECTORS`` index file in ``<table>/index/``: a version byte (1), then one *bin* per
data file: ``size`` (big-endian int32), the bin's data, and the CRC-32 of that data (big-endian).
The index manifest entry of the file lists, per data file, the bin's ``offset`` (where its
``size`` starts), ``length`` and ``cardinality``. The data is either

* 32-bit (the default): the magic number 1581511376 (big-endian int32) and a 32-bit Roaring
  bitmap in the portable serialization (what Java's ``org.roaringbitmap.RoaringBitmap`` writes);
  ``length`` is the data's size;
* 64-bit (``deletion-vectors.bitmap64``, the layout Iceberg reads): the magic number 1681511377
  (little-endian int32), the count of 32-bit bitmaps (little-endian int64), then for each its
  index (little-endian int32, the positions' upper 32 bits) and the bitmap; ``length`` counts the
  size and CRC fields too (as Paimon's writer records it).

Readers tell the two apart by the magic number. The Roaring bitmaps are written with array and
bitmap containers only, as Paimon writes deletion vectors (see :mod:`lakelog.connector.format.roaring`).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.roaring import decode_roaring32, encode_roaring32

__all__ = [
    "DeletionVectorMeta",
    "encode_roaring32",
    "decode_roaring32",
    "encode_bin",
    "decode_bin",
    "encode_index_file",
    "read_deletion_vector",
    "MAGIC_32",
    "MAGIC_64",
]

VERSION = 1
MAGIC_32 = 1581511376  # big-endian on disk
MAGIC_64 = 1681511377  # little-endian on disk
_MAX_32 = (1 << 31) - 1  # Paimon's 32-bit vectors hold positions up to Integer.MAX_VALUE


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector is in its index file (Paimon's ``DeletionVectorMeta``)."""

    data_file: str
    offset: int
    length: int
    cardinality: Optional[int]


# ---- bins: one data file's deletion vector ---------------------------------------------------------
def encode_bin(positions: np.ndarray, *, bitmap64: bool) -> tuple[bytes, int]:
    """(bytes of a bin: size, data, CRC; the ``length`` its index entry records) of a deletion
    vector holding sorted, unique ``positions``."""
    pos = np.asarray(positions, dtype=np.uint64)
    if bitmap64:
        highs = (pos >> np.uint64(32)).astype(np.int64)
        top = int(highs[-1]) if len(pos) else -1
        parts = [struct.pack("<i", MAGIC_64), struct.pack("<q", top + 1)]
        bounds = np.searchsorted(highs, np.arange(top + 2))
        for key in range(top + 1):
            lows = (pos[bounds[key] : bounds[key + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            parts += [struct.pack("<i", key), encode_roaring32(lows)]
        data = b"".join(parts)
        length = 4 + len(data) + 4
    else:
        if len(pos) and int(pos[-1]) > _MAX_32:
            raise ValueError(
                f"row position {int(pos[-1])} does not fit a 32-bit deletion vector; set "
                "'deletion-vectors.bitmap64' = 'true'"
            )
        data = struct.pack(">i", MAGIC_32) + encode_roaring32(pos.astype(np.uint32))
        length = len(data)
    crc = zlib.crc32(data) & 0xFFFFFFFF
    return struct.pack(">i", len(data)) + data + struct.pack(">I", crc), length


def decode_bin(buf: bytes, offset: int, length: Optional[int], where: str) -> np.ndarray:
    """The positions of the bin at ``offset`` of an index file's bytes (its size, magic number,
    checksum and the ``length`` of its index entry all checked)."""
    try:
        (size,) = struct.unpack_from(">i", buf, offset)
        data = bytes(buf[offset + 4 : offset + 4 + size])
        (crc,) = struct.unpack_from(">I", buf, offset + 4 + size)
    except struct.error:
        raise CorruptFileError(f"deletion vector at offset {offset} of {where} is cut short") from None
    if size < 4 or len(data) != size:
        raise CorruptFileError(f"deletion vector at offset {offset} of {where} is cut short")
    if zlib.crc32(data) & 0xFFFFFFFF != crc:
        raise CorruptFileError(f"deletion vector at offset {offset} of {where} fails its checksum")
    (magic_be,) = struct.unpack_from(">i", data, 0)
    (magic_le,) = struct.unpack_from("<i", data, 0)
    if magic_be == MAGIC_32:
        expected = size
        positions, used = decode_roaring32(data[4:], where)
        used += 4
    elif magic_le == MAGIC_64:
        expected = size + 8
        positions, used = _decode_bitmap64(data, where)
    else:
        raise CorruptFileError(
            f"deletion vector at offset {offset} of {where} has magic number {magic_be}, neither "
            f"{MAGIC_32} (32-bit) nor {MAGIC_64} (64-bit)"
        )
    if length is not None and length != expected:
        raise CorruptFileError(
            f"deletion vector at offset {offset} of {where} has {size} bytes; its index entry says "
            f"{length}"
        )
    if used != size:
        raise CorruptFileError(f"deletion vector at offset {offset} of {where} has trailing bytes")
    return positions


def _decode_bitmap64(data: bytes, where: str) -> tuple[np.ndarray, int]:
    try:
        (count,) = struct.unpack_from("<q", data, 4)
    except struct.error:
        raise CorruptFileError(f"64-bit deletion vector in {where} is cut short") from None
    at, parts = 12, []
    for _ in range(count):
        try:
            (key,) = struct.unpack_from("<i", data, at)
        except struct.error:
            raise CorruptFileError(f"64-bit deletion vector in {where} is cut short") from None
        lows, used = decode_roaring32(data[at + 4 :], where)
        at += 4 + used
        parts.append((np.uint64(key) << np.uint64(32)) + lows)
    return (np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)), at


# ---- index files -------------------------------------------------------------------------------------
def encode_index_file(
    vectors: dict[str, np.ndarray], *, bitmap64: bool
) -> tuple[bytes, list[DeletionVectorMeta]]:
    """(bytes of a ``DELETION_VECTORS`` index file, its per-file entries) holding the non-empty
    ``vectors`` (data file name -> sorted unique positions), in name order."""
    out = [bytes([VERSION])]
    at = 1
    metas = []
    for name in sorted(vectors):
        pos = vectors[name]
        if len(pos) == 0:
            continue
        blob, length = encode_bin(pos, bitmap64=bitmap64)
        metas.append(DeletionVectorMeta(name, at, length, len(pos)))
        out.append(blob)
        at += len(blob)
    return b"".join(out), metas


def read_deletion_vector(data: bytes, meta: DeletionVectorMeta, where: str) -> np.ndarray:
    """The positions of ``meta``'s data file in the index file ``data`` (read whole)."""
    if not data or data[0] != VERSION:
        got = data[0] if data else None
        raise CorruptFileError(f"deletion-vector index file {where} has version {got}, not {VERSION}")
    positions = decode_bin(data, meta.offset, meta.length, where)
    if meta.cardinality is not None and meta.cardinality != len(positions):
        raise CorruptFileError(
            f"deletion vector of {meta.data_file} in {where} holds {len(positions)} positions; its "
            f"index entry says {meta.cardinality}"
        )
    return positions
