"""Paimon's bitmap file index (``file-index.bitmap.columns``): per data file and column, each
distinct value with the rows that hold it.

A read with ``column = value`` (or ``IN``) opens only the files whose index lists one of the values;
the index is best for columns with few distinct values, where a bloom filter says "maybe" for
every file. The bytes are Paimon's (``concepts/spec/fileindex.mdx``, checked against Paimon's Java
reader and writer), all big-endian, inside the file index container of ``file_index.py``:

* version 1: version byte, row count, distinct non-null values, has-null byte (then the null
  bitmap's offset); per value its bytes and its bitmap's offset; then the bitmaps;
* version 2 (Paimon's default): as version 1 up to has-null (then the null bitmap's offset and
  length), then the value entries sorted by value and cut into index blocks of at most
  ``index-block-size`` bytes: the block count, per block its first value and offset, the blocks'
  total size, the blocks (entry count; per entry value, offset, length), then the bitmaps.

Offsets count from the start of the bitmaps; a value in one row only has no bitmap, its offset is
``-1 - row``. A bitmap is a portable Roaring bitmap of row positions. Values are written as Java's
DataOutput writes them: TINYINT 1 byte, SMALLINT 2, INT/DATE/TIME 4, BIGINT 8, BOOLEAN 1, strings
as a 4-byte length and their UTF-8 bytes; timestamps as BIGINT milliseconds (precision up to 3) or
microseconds. Strings sort by their bytes, as Paimon's BinaryString does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.roaring import decode_roaring32, encode_roaring32

__all__ = [
    "BITMAP",
    "BitmapIndex",
    "bitmap_supported",
    "encode_bitmap_index",
]

BITMAP = "bitmap"
DEFAULT_BLOCK_SIZE = 16 * 1024


def bitmap_supported(t: pa.DataType) -> bool:
    """Whether Paimon's bitmap index takes this type (integers, dates, times, timestamps, strings
    and booleans)."""
    return _kind(t) is not None


def _kind(t: pa.DataType) -> Optional[str]:
    """The fixed layout of a value in the index: a struct format, or "s" for strings."""
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_int8(t):
        return ">b"
    if pa.types.is_int16(t):
        return ">h"
    if pa.types.is_int32(t) or pa.types.is_date32(t) or pa.types.is_time32(t):
        return ">i"
    if pa.types.is_int64(t) or pa.types.is_timestamp(t):
        return ">q"
    if pa.types.is_boolean(t):
        return ">?"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "s"
    return None


def _index_values(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The values as the index holds them: timestamps as int64 milliseconds (precision up to 3)
    or microseconds (Paimon's ``Timestamp.toMicros``: nanoseconds are floored), dates and times as
    int32, strings as they are."""
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.cast(t.value_type)
        t = values.type
    if pa.types.is_timestamp(t):
        raw = values.cast(pa.int64())
        if t.unit == "s":
            return pc.multiply(raw, 1000)
        if t.unit == "ns":
            if isinstance(raw, pa.ChunkedArray):
                raw = raw.combine_chunks()
            micros = np.floor_divide(raw.fill_null(0).to_numpy(zero_copy_only=False), 1000)
            mask = raw.is_null().to_numpy(zero_copy_only=False) if raw.null_count else None
            return pa.array(micros, pa.int64(), mask=mask)
        return raw
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return values.cast(pa.int32())
    if pa.types.is_large_string(t):
        return values.cast(pa.string())
    return values


def _value_bytes(kind: str, value: Any) -> bytes:
    if kind == "s":
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return struct.pack(">i", len(raw)) + raw
    return struct.pack(kind, value)


# ---- writing ---------------------------------------------------------------------------------------
def encode_bitmap_index(
    values: pa.Array | pa.ChunkedArray, *, version: int = 2, block_size: int = DEFAULT_BLOCK_SIZE
) -> bytes:
    """The bitmap index body of one column of one data file (``values`` in row order)."""
    kind = _kind(values.type)
    if kind is None:
        raise TypeError(f"bitmap index does not support type {values.type}")
    if version not in (1, 2):
        raise ValueError(f"bitmap index version {version} (Paimon writes 1 and 2)")
    vals = _index_values(values)
    if isinstance(vals, pa.ChunkedArray):
        vals = vals.combine_chunks()
    rows = len(vals)
    encoded = pc.dictionary_encode(vals)
    dictionary = encoded.dictionary
    order = pc.sort_indices(dictionary).to_numpy()  # Arrow sorts strings by their bytes, as Paimon
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    codes = np.append(rank, -1)[codes]  # codes in value order; nulls (-1) stay -1
    by_code = np.argsort(codes, kind="stable")  # rows grouped by value, ascending within each
    counts = np.bincount(codes + 1, minlength=len(order) + 1)  # [nulls, value 0, value 1, ...]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    sorted_values = dictionary.take(pa.array(order)).to_pylist()

    null_rows = by_code[: counts[0]]
    body = bytearray()
    null_bytes = encode_roaring32(null_rows) if len(null_rows) else b""
    if len(null_rows) == 1:
        null_offset = -1 - int(null_rows[0])
    else:
        null_offset = 0
        body += null_bytes
    entries: list[tuple[Any, int, int]] = []  # (value, offset, length)
    for i, value in enumerate(sorted_values):
        n, s = int(counts[i + 1]), int(starts[i + 1])
        if n == 1:
            entries.append((value, -1 - int(by_code[s]), -1))
            continue
        bitmap = encode_roaring32(by_code[s : s + n])  # ascending: the argsort is stable
        entries.append((value, len(body), len(bitmap)))
        body += bitmap

    out = bytearray(struct.pack(">biib", version, rows, len(entries), 1 if len(null_rows) else 0))
    if len(null_rows):
        out += struct.pack(">i", null_offset)
        if version == 2:
            out += struct.pack(">i", len(null_bytes))
    if version == 1:
        for value, offset, _ in entries:
            out += _value_bytes(kind, value) + struct.pack(">i", offset)
        return bytes(out + body)
    blocks: list[tuple[Any, int, bytearray]] = []  # (first value, offset, bytes without the count)
    counts_per_block: list[int] = []
    at = 0
    for value, offset, length in entries:
        entry = _value_bytes(kind, value) + struct.pack(">ii", offset, length)
        if not blocks or 4 + len(blocks[-1][2]) + len(entry) > block_size:
            if blocks:
                at += 4 + len(blocks[-1][2])
            if 4 + len(entry) > block_size:
                raise ValueError(
                    f"a bitmap index entry of {len(entry)} bytes exceeds the block size {block_size}"
                )
            blocks.append((value, at, bytearray()))
            counts_per_block.append(0)
        blocks[-1][2].extend(entry)
        counts_per_block[-1] += 1
    out += struct.pack(">i", len(blocks))
    for first, offset, _ in blocks:
        out += _value_bytes(kind, first) + struct.pack(">i", offset)
    out += struct.pack(">i", sum(4 + len(b) for _, _, b in blocks))
    for (_, _, data), count in zip(blocks, counts_per_block):
        out += struct.pack(">i", count) + data
    return bytes(out + body)


# ---- reading ---------------------------------------------------------------------------------------
@dataclass
class BitmapIndex:
    """A decoded bitmap index: value -> (offset, length) and where the bitmaps start."""

    data: bytes
    where: str
    rows: int
    entries: dict[Any, tuple[int, int]]
    null_entry: Optional[tuple[int, int]]
    body_start: int
    blocks: int = 0  # index blocks (version 2)

    @classmethod
    def from_bytes(cls, data: bytes, arrow_type: pa.DataType, where: str) -> BitmapIndex:
        kind = _kind(arrow_type)
        if kind is None:
            raise CorruptFileError(f"bitmap index in {where}: column type {arrow_type} cannot have one")
        try:
            return _decode(data, kind, where)
        except (struct.error, UnicodeDecodeError, IndexError):
            raise CorruptFileError(f"bitmap index in {where} is cut short or malformed") from None

    def contains_any(self, values: pa.Array) -> bool:
        """Whether a row of the file holds one of ``values`` (non-null values of the column's type)."""
        return any(v in self.entries for v in _keys(values))

    def rows_of(self, values: pa.Array) -> np.ndarray:
        """The sorted row positions holding one of ``values``."""
        parts = [self._bitmap(self.entries[v]) for v in _keys(values) if v in self.entries]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.uint64)

    def _bitmap(self, entry: tuple[int, int]) -> np.ndarray:
        offset, length = entry
        if offset < 0:
            return np.array([-1 - offset], dtype=np.uint64)
        start = self.body_start + offset
        end = len(self.data) if length < 0 else start + length
        if start > len(self.data) or end > len(self.data):
            raise CorruptFileError(f"bitmap index in {self.where}: a bitmap lies outside the index")
        rows, _ = decode_roaring32(self.data[start:end], self.where, "bitmap index")
        return rows


def _keys(values: pa.Array) -> list[Any]:
    vals = _index_values(values)
    out = [v for v in vals.to_pylist() if v is not None]
    return [v.encode("utf-8") if isinstance(v, str) else v for v in out]


def _reader(data: bytes, kind: str) -> Callable[[int], tuple[Any, int]]:
    if kind == "s":

        def read_string(at: int) -> tuple[Any, int]:
            (n,) = struct.unpack_from(">i", data, at)
            raw = data[at + 4 : at + 4 + n]
            if n < 0 or len(raw) != n:
                raise struct.error("string cut short")
            return bytes(raw), at + 4 + n

        return read_string
    size = struct.calcsize(kind)

    def read_fixed(at: int) -> tuple[Any, int]:
        return struct.unpack_from(kind, data, at)[0], at + size

    return read_fixed


def _decode(data: bytes, kind: str, where: str) -> BitmapIndex:
    version, rows, distinct, has_null = struct.unpack_from(">biib", data, 0)
    at = 10
    read = _reader(data, kind)
    null_entry: Optional[tuple[int, int]] = None
    if version not in (1, 2):
        raise CorruptFileError(f"bitmap index in {where} has version {version} (lakelog reads 1 and 2)")
    if has_null:
        (null_offset,) = struct.unpack_from(">i", data, at)
        at += 4
        null_length = -1
        if version == 2:
            (null_length,) = struct.unpack_from(">i", data, at)
            at += 4
        null_entry = (null_offset, null_length)
    entries: dict[Any, tuple[int, int]] = {}
    if version == 1:
        listed: list[tuple[Any, int]] = []
        for _ in range(distinct):
            value, at = read(at)
            (offset,) = struct.unpack_from(">i", data, at)
            at += 4
            listed.append((value, offset))
        # lengths: up to the next bitmap's offset (the last one runs to the end)
        stored = sorted((o, v) for v, o in listed if o >= 0)
        ends = {v: (stored[i + 1][0] - o if i + 1 < len(stored) else -1) for i, (o, v) in enumerate(stored)}
        entries = {v: (o, ends.get(v, -1)) for v, o in listed}
        if null_entry is not None and null_entry[0] >= 0:
            nxt = [o for o, _ in stored if o > null_entry[0]]
            null_entry = (null_entry[0], nxt[0] - null_entry[0] if nxt else -1)
        return BitmapIndex(data, where, rows, entries, null_entry, at)
    (blocks,) = struct.unpack_from(">i", data, at)
    at += 4
    block_offsets = []
    for _ in range(blocks):
        _, at = read(at)
        (offset,) = struct.unpack_from(">i", data, at)
        at += 4
        block_offsets.append(offset)
    (blocks_size,) = struct.unpack_from(">i", data, at)
    at += 4
    index_start = at
    for offset in block_offsets:
        pos = index_start + offset
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(count):
            value, pos = read(pos)
            offset_, length = struct.unpack_from(">ii", data, pos)
            pos += 8
            entries[value] = (offset_, length)
    if len(entries) != distinct:
        raise CorruptFileError(
            f"bitmap index in {where} lists {len(entries)} values, its head says {distinct}"
        )
    return BitmapIndex(data, where, rows, entries, null_entry, index_start + blocks_size, blocks)
