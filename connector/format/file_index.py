"""File indexes: Paimon's per-data-file index container and its bloom-filter index (its bitmap
index: ``bitmap_index.py``).

``file-index.bloom-filter.columns`` makes every data file carry, per named column, a bloom filter of
its values, so that a read with ``column = value`` (or ``IN``) opens only the files that may hold
the value. The bytes are Paimon's (``concepts/spec/fileindex.mdx``), so Paimon's readers skip with
lakelog's indexes and lakelog with theirs:

* the container: magic 1493475289347502 (int64), version 1, the head's length, the column count;
  per column its name (Java modified UTF-8), its index count and per index its type name, body
  offset and length; a zero "redundant length"; then the bodies (all big-endian);
* a bloom filter body: the number of hash functions (int32), then the bit set (bit ``i`` is bit
  ``i % 8`` of byte ``i / 8``). Values hash to 64 bits (strings and binaries by XXH64, integers,
  floats' bits, dates, times and timestamps by Thomas Wang's 64-bit integer hash); hash function
  ``k`` sets bit ``|h1 + k * h2| mod bits`` in 32-bit arithmetic, ``h1``/``h2`` the low and high
  halves.

A container of at most ``file-index.in-manifest-threshold`` bytes rides in the data file's manifest
record (``_EMBEDDED_FILE_INDEX``); a larger one is written beside the data file as
``<data file>.index`` and listed among its extra files, as Paimon does.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CorruptFileError, InvalidInputError

__all__ = [
    "BLOOM_FILTER",
    "BloomFilter",
    "bloom_hashes",
    "bloom_supported",
    "encode_container",
    "decode_container",
    "build_container",
    "FileIndexConfig",
    "index_file_name",
]

MAGIC = 1493475289347502
VERSION = 1
BLOOM_FILTER = "bloom-filter"
_EMPTY = -1


def index_file_name(data_file: str, previous: Optional[str] = None) -> str:
    """The name of a data file's separate index file: ``<data file>.index``; when it replaces
    ``previous`` (a rewrite of the index), the next in Paimon's series ``<data file>-1.index``,
    ``-2.index``, ... (an old snapshot keeps the file it names)."""
    if previous is None:
        return data_file + ".index"
    stem = previous[: -len(".index")]
    head, dash, num = stem.rpartition("-")
    if dash and num.isdigit() and head:
        return f"{head}-{int(num) + 1}.index"
    return f"{stem}-1.index"


@dataclass(frozen=True)
class FileIndexConfig:
    """What every data file indexes: column -> (items, fpp) of its bloom filter, and column ->
    (version, index block size) of its bitmap index."""

    bloom: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    bitmap: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.bloom or self.bitmap)

    @property
    def columns(self) -> list[str]:
        """The indexed columns, each once (bloom-filtered ones first)."""
        return list(dict.fromkeys([*self.bloom, *self.bitmap]))


def build_container(
    config: FileIndexConfig,
    hashes: Mapping[str, np.ndarray],
    values: Mapping[str, pa.Array | pa.ChunkedArray],
) -> bytes:
    """A data file's index container: per bloom-filtered column a filter of ``hashes[column]`` (a
    column without hashes gets an empty filter), per bitmap-indexed column the bitmaps of
    ``values[column]`` (the file's values in row order)."""
    from lakelog.connector.format.bitmap_index import BITMAP, encode_bitmap_index

    bodies: dict[str, dict[str, Optional[bytes]]] = {}
    for c, (items, fpp) in config.bloom.items():
        bloom = BloomFilter.sized(items, fpp)
        h = hashes.get(c)
        if h is not None and len(h):
            bloom.add(h)
        bodies.setdefault(c, {})[BLOOM_FILTER] = bloom.to_bytes()
    for c, (version, block_size) in config.bitmap.items():
        try:
            body = encode_bitmap_index(values[c], version=version, block_size=block_size)
        except ValueError as e:
            raise InvalidInputError(f"bitmap index of column {c!r}: {e}") from None
        bodies.setdefault(c, {})[BITMAP] = body
    return encode_container(bodies)


# ---- hashing ----------------------------------------------------------------------------------------
def _wang64(key: np.ndarray) -> np.ndarray:
    """Thomas Wang's 64-bit integer hash on int64 values (Java's signed shifts and wraparound)."""
    k = key.astype(np.int64)
    with np.errstate(over="ignore"):
        k = (~k) + (k << np.int64(21))
        k = k ^ (k >> np.int64(24))
        k = (k + (k << np.int64(3))) + (k << np.int64(8))
        k = k ^ (k >> np.int64(14))
        k = (k + (k << np.int64(2))) + (k << np.int64(4))
        k = k ^ (k >> np.int64(28))
        k = k + (k << np.int64(31))
    return k.view(np.uint64)


def bloom_supported(t: pa.DataType) -> bool:
    """Whether Paimon's bloom filter hashes this type (not booleans, decimals or nested types)."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_date32(t)
        or pa.types.is_time(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
    )


def bloom_hashes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The 64-bit hash (``uint64``) Paimon's bloom filter takes of each non-null value."""
    from lakelog.connector.format.xxhash64 import xxh64_array

    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    arr = arr.filter(pc.is_valid(arr)) if arr.null_count else arr
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return xxh64_array(arr)
    if pa.types.is_float32(t):
        bits = arr.to_numpy(zero_copy_only=False).astype(np.float32)
        return _wang64(_canonical_nan(bits, np.float32).view(np.int32).astype(np.int64))
    if pa.types.is_floating(t):
        bits = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        return _wang64(_canonical_nan(bits, np.float64).view(np.int64))
    if pa.types.is_timestamp(t):
        # precision up to 3: epoch milliseconds; above: epoch microseconds, floored (Paimon's
        # Timestamp.getMillisecond / toMicros)
        raw = arr.cast(pa.timestamp(t.unit)).cast(pa.int64()).to_numpy()
        per = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1), "ns": (1, 1000)}[t.unit]
        return _wang64(raw * per[0] // per[1])
    if pa.types.is_time(t):  # TIME: milliseconds of the day as an int
        raw = arr.cast(pa.int64() if pa.types.is_time64(t) else pa.int32()).to_numpy().astype(np.int64)
        div = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        return _wang64(raw * (1000 if t.unit == "s" else 1) // div)
    if pa.types.is_date32(t):
        return _wang64(arr.cast(pa.int32()).to_numpy().astype(np.int64))
    if pa.types.is_integer(t):
        return _wang64(arr.to_numpy().astype(np.int64))
    raise TypeError(f"bloom filter index does not support type {t}")


def _canonical_nan(bits: np.ndarray, dtype: type) -> np.ndarray:
    """Java's floatToIntBits / doubleToLongBits give every NaN one bit pattern."""
    out = bits.copy()
    out[np.isnan(out)] = dtype("nan")
    return out


# ---- bloom filter ------------------------------------------------------------------------------------
@dataclass
class BloomFilter:
    """Paimon's ``BloomFilter64``: ``num_hashes`` hash functions over ``bits`` (a byte array)."""

    num_hashes: int
    bits: np.ndarray  # uint8

    @classmethod
    def sized(cls, items: int, fpp: float) -> BloomFilter:
        """The filter Paimon sizes for ``items`` expected values at false-positive rate ``fpp``."""
        nb = int(-items * math.log(fpp) / (math.log(2) * math.log(2)))
        num_bits = nb + (8 - nb % 8)
        k = max(1, int(math.floor(num_bits / items * math.log(2) + 0.5)))
        return cls(k, np.zeros(num_bits // 8, dtype=np.uint8))

    @property
    def num_bits(self) -> int:
        return len(self.bits) * 8

    def _positions(self, hashes: np.ndarray) -> np.ndarray:
        """Bit positions (len(hashes) x num_hashes) as Paimon's addHash/testHash compute them."""
        h = hashes.astype(np.uint64)
        h1 = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)
        h2 = (h >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.int64)
        i = np.arange(1, self.num_hashes + 1, dtype=np.int64)
        combined = (h1[:, None] + i[None, :] * h2[:, None]) & 0xFFFFFFFF  # Java int arithmetic
        combined = combined.astype(np.uint32).view(np.int32).astype(np.int64)
        combined = np.where(combined < 0, ~combined, combined)
        return combined % self.num_bits

    def add(self, hashes: np.ndarray) -> None:
        pos = self._positions(hashes).ravel()
        np.bitwise_or.at(self.bits, pos >> 3, (1 << (pos & 7)).astype(np.uint8))

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        pos = self._positions(hashes)
        hit = (self.bits[pos >> 3] >> (pos & 7).astype(np.uint8)) & 1
        return np.asarray(hit.all(axis=1))

    def to_bytes(self) -> bytes:
        return struct.pack(">i", self.num_hashes) + self.bits.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> BloomFilter:
        if len(data) < 5:
            raise CorruptFileError(f"bloom filter index in {where} is cut short ({len(data)} bytes)")
        (k,) = struct.unpack_from(">i", data, 0)
        if not 0 < k < 1024:
            raise CorruptFileError(f"bloom filter index in {where} has {k} hash functions")
        return cls(k, np.frombuffer(data, dtype=np.uint8, offset=4).copy())


# ---- the container --------------------------------------------------------------------------------------
def _utf(text: str) -> bytes:
    """Java's DataOutput.writeUTF: a 2-byte length, then modified UTF-8 (NUL as two bytes)."""
    raw = text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")
    return struct.pack(">H", len(raw)) + raw


def encode_container(indexes: Mapping[str, Mapping[str, Optional[bytes]]]) -> bytes:
    """A file index container: column -> index type -> body (None: an empty index)."""
    body = bytearray()
    info: list[tuple[str, list[tuple[str, int, int]]]] = []
    for column, by_type in indexes.items():
        items = []
        for kind, data in by_type.items():
            if data is None:
                items.append((kind, _EMPTY, 0))
            else:
                items.append((kind, len(body), len(data)))
                body += data
        info.append((column, items))
    names = b"".join(_utf(c) + b"".join(_utf(k) for k, _, _ in items) for c, items in info)
    head_len = 8 + 4 + 4 + 4 + sum(len(items) for _, items in info) * 8 + len(info) * 4 + 4 + len(names)
    out = bytearray(struct.pack(">qii", MAGIC, VERSION, head_len))
    out += struct.pack(">i", len(info))
    for column, items in info:
        out += _utf(column) + struct.pack(">i", len(items))
        for kind, start, length in items:
            out += _utf(kind) + struct.pack(">ii", _EMPTY if start == _EMPTY else start + head_len, length)
    out += struct.pack(">i", 0)
    return bytes(out + body)


def decode_container(data: bytes, where: str) -> dict[str, dict[str, Optional[bytes]]]:
    """column -> index type -> body (None for an empty index) of a file index container."""
    try:
        magic, version, head_len = struct.unpack_from(">qii", data, 0)
        if magic != MAGIC:
            raise CorruptFileError(f"{where} is not a file index (magic {magic})")
        if version != VERSION:
            raise CorruptFileError(f"file index {where} has version {version}, not {VERSION}")
        at = 16
        (columns,) = struct.unpack_from(">i", data, at)
        at += 4
        out: dict[str, dict[str, Optional[bytes]]] = {}
        for _ in range(columns):
            column, at = _read_utf(data, at)
            (count,) = struct.unpack_from(">i", data, at)
            at += 4
            for _ in range(count):
                kind, at = _read_utf(data, at)
                start, length = struct.unpack_from(">ii", data, at)
                at += 8
                if start == _EMPTY:
                    out.setdefault(column, {})[kind] = None
                    continue
                if start < head_len or start + length > len(data):
                    raise CorruptFileError(
                        f"file index {where}: index {kind} of {column} lies outside the file"
                    )
                out.setdefault(column, {})[kind] = bytes(data[start : start + length])
        return out
    except (struct.error, UnicodeDecodeError):
        raise CorruptFileError(f"file index {where} is cut short or malformed") from None


def _read_utf(data: bytes, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">H", data, at)
    raw = bytes(data[at + 2 : at + 2 + n])
    if len(raw) != n:
        raise struct.error("cut short")
    return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass"), at + 2 + n
