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

Readers tell the two apart by the magic number. The Roaring portable format is written with array
and bitmap containers (no run containers, which every reader must accept and lakelog reads).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from lakelog.connector.errors import CorruptFileError

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
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4  # with run containers, fewer containers than this have no offset header
_ARRAY_MAX = 4096  # containers of more values are bitmaps
_MAX_32 = (1 << 31) - 1  # Paimon's 32-bit vectors hold positions up to Integer.MAX_VALUE


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector is in its index file (Paimon's ``DeletionVectorMeta``)."""

    data_file: str
    offset: int
    length: int
    cardinality: Optional[int]


# ---- Roaring bitmaps (32-bit, portable serialization) ----------------------------------------------
def encode_roaring32(positions: np.ndarray) -> bytes:
    """The portable Roaring serialization of sorted, unique positions below 2**32."""
    pos = np.asarray(positions, dtype=np.uint32)
    high = (pos >> 16).astype(np.uint16)
    keys, starts = np.unique(high, return_index=True)
    ends = np.append(starts[1:], len(pos))
    n = len(keys)
    cards = (ends - starts).astype(np.int64)
    bodies = []
    for s, e in zip(starts, ends):
        low = (pos[s:e] & 0xFFFF).astype(np.uint16)
        if e - s > _ARRAY_MAX:
            bits = np.zeros(1 << 16, dtype=bool)
            bits[low] = True
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            bodies.append(low.astype("<u2").tobytes())
    header = struct.pack("<II", _COOKIE_NO_RUNS, n)
    desc = np.empty(2 * n, dtype="<u2")
    desc[0::2] = keys
    desc[1::2] = cards - 1
    first = len(header) + 4 * n + 4 * n
    sizes = np.array([len(b) for b in bodies], dtype=np.int64)
    offsets = (first + np.concatenate([[0], np.cumsum(sizes)[:-1]]) if n else np.empty(0)).astype("<u4")
    return header + desc.tobytes() + offsets.tobytes() + b"".join(bodies)


def decode_roaring32(data: bytes, where: str, what: str = "deletion vector") -> tuple[np.ndarray, int]:
    """(positions as sorted ``uint64``, bytes read) of a portable Roaring bitmap at the start of
    ``data``; a malformed one raises :class:`CorruptFileError` naming ``what`` and ``where``."""
    try:
        return _decode_roaring32(memoryview(data))
    except (struct.error, ValueError, IndexError) as e:
        raise CorruptFileError(f"{what} in {where} is not a valid Roaring bitmap: {e}") from None


def _decode_roaring32(buf: memoryview) -> tuple[np.ndarray, int]:
    (cookie,) = struct.unpack_from("<I", buf, 0)
    at = 4
    runs: Optional[np.ndarray] = None
    if cookie & 0xFFFF == _COOKIE_RUNS:
        n = (cookie >> 16) + 1
        flags = np.frombuffer(buf, dtype=np.uint8, count=(n + 7) // 8, offset=at)
        runs = np.unpackbits(flags, bitorder="little")[:n].astype(bool)
        at += (n + 7) // 8
        has_offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _COOKIE_NO_RUNS:
        (n,) = struct.unpack_from("<I", buf, at)
        at += 4
        has_offsets = True
    else:
        raise ValueError(f"unknown cookie {cookie}")
    desc = np.frombuffer(buf, dtype="<u2", count=2 * n, offset=at).astype(np.uint64)
    at += 4 * n
    if has_offsets:
        at += 4 * n
    keys, cards = desc[0::2], desc[1::2] + 1
    parts = []
    for i in range(n):
        base = keys[i] << np.uint64(16)
        if runs is not None and runs[i]:
            (count,) = struct.unpack_from("<H", buf, at)
            pairs = np.frombuffer(buf, dtype="<u2", count=2 * count, offset=at + 2).astype(np.int64)
            at += 2 + 4 * count
            starts, lengths = pairs[0::2], pairs[1::2] + 1
            total = int(lengths.sum())
            # each run start..start+length-1, without a Python loop over the runs
            offs = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            low = np.repeat(starts, lengths) + offs
        elif cards[i] > _ARRAY_MAX:
            bits = np.frombuffer(buf, dtype=np.uint8, count=8192, offset=at)
            at += 8192
            low = np.flatnonzero(np.unpackbits(bits, bitorder="little"))
        else:
            low = np.frombuffer(buf, dtype="<u2", count=int(cards[i]), offset=at)
            at += 2 * int(cards[i])
        parts.append(base + low.astype(np.uint64))
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return out, at


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
