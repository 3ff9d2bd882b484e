"""Vectorised bucket assignment of Paimon's fixed-bucket mode.

A row's bucket is ``abs(hash % num_buckets)`` (Java remainder), where ``hash`` is Paimon's
``BinaryRow.hashCode()`` of the bucket-key row: murmur3_x86_32 with seed 42 over the BinaryRow bytes
(row kind +I, no arity prefix), read as little-endian 4-byte words. A BinaryRow is always a multiple of
8 bytes long, so there is no tail and the result equals ``mmh3.hash(row_bytes, 42)``.

The rows are built column-wise with numpy: the fixed part (header + 8-byte slots) as 32-bit word
columns, hashed without materialising a byte matrix. Keys with variable-length parts (strings longer
than 7 bytes, non-compact decimals and timestamps) are laid out in a flat byte buffer, grouped by row
length and each group hashed as a matrix; the only Python loops run over fields, words and distinct
row lengths, never over rows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError, OptionError, SchemaError
from lakelog.connector.format.binary_row import (
    decimal_precision_scale,
    is_compact_decimal,
    is_compact_timestamp,
    null_bits_size,
    to_binary_row,
    type_label,
)
from lakelog.connector.format.types import DataType

__all__ = [
    "compute_buckets",
    "bucket_key_hashes",
    "bucket_key_hash",
    "buckets_from_hashes",
    "murmur3_32_rows",
    "murmur3_32_bytes",
    "DEFAULT_SEED",
]

DEFAULT_SEED = 42
_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M5 = np.uint32(5)
_N1 = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_MASK32 = 0xFFFFFFFF
_CHUNK_ROWS = 1 << 17  # rows per batch with variable-length parts (bounds the row matrices)
_FIXED_CHUNK_ROWS = 1 << 16  # rows per batch of fixed-size keys (keeps the word columns in cache)

_Word = Union[int, np.ndarray]  # a word column: a constant, or a uint32 array with one value per row


# ---------------------------------------------------------------------------------------------
# murmur3_x86_32 over word columns


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    high = x >> np.uint32(32 - r)
    x <<= np.uint32(r)
    x |= high
    return x


def _mix_k1_scalar(k: int) -> int:
    k = (k * 0xCC9E2D51) & _MASK32
    k = ((k << 15) | (k >> 17)) & _MASK32
    return (k * 0x1B873593) & _MASK32


def _mix_h1_scalar(h: int, k: int) -> int:
    h ^= k
    h = ((h << 13) | (h >> 19)) & _MASK32
    return (h * 5 + 0xE6546B64) & _MASK32


def _murmur_words(words: Sequence[_Word], n: int, length: int, seed: int) -> np.ndarray:
    """murmur3_x86_32 of ``n`` rows given as word columns; ``length`` is the row length in bytes.

    Leading constant columns (typically the header) are mixed once as Python ints; the state turns
    into an array at the first column that varies.
    """
    state: np.ndarray | None = None
    h = seed & _MASK32
    for word in words:
        if isinstance(word, np.ndarray) and state is None and n > 0 and bool((word == word[0]).all()):
            word = int(word[0])
        if not isinstance(word, np.ndarray):
            k_scalar = _mix_k1_scalar(int(word) & _MASK32)
            if state is None:
                h = _mix_h1_scalar(h, k_scalar)
                continue
            state ^= np.uint32(k_scalar)
        else:
            if state is None:
                state = np.full(n, h, dtype=np.uint32)
            k = np.multiply(word, _C1, dtype=np.uint32)
            k = _rotl(k, 15)
            k *= _C2
            state ^= k
        state = _rotl(state, 13)
        state *= _M5
        state += _N1
    if state is None:
        state = np.full(n, h, dtype=np.uint32)
    state ^= np.uint32(length & _MASK32)
    state ^= state >> np.uint32(16)
    state *= _F1
    state ^= state >> np.uint32(13)
    state *= _F2
    state ^= state >> np.uint32(16)
    return state.view(np.int32)


def murmur3_32_rows(rows: np.ndarray, seed: int = DEFAULT_SEED) -> np.ndarray:
    """Signed murmur3_x86_32 hash (as ``mmh3.hash``) of each row of a 2-D uint8 array ``(n, L)``.

    ``L`` must be a multiple of 4 (Paimon hashes whole 4-byte words); returns an int32 array.
    """
    matrix = np.ascontiguousarray(rows, dtype=np.uint8)
    if matrix.ndim != 2:
        raise InvalidInputError(f"murmur3_32_rows takes a 2-D array, got {matrix.ndim} dimensions")
    n, length = matrix.shape
    if length % 4:
        raise InvalidInputError(f"murmur3_32_rows: row length {length} is not a multiple of 4")
    words = matrix.view("<u4")
    columns = [words[:, j] for j in range(length // 4)]
    return _murmur_words(columns, n, length, seed)


def murmur3_32_bytes(data: bytes, seed: int = DEFAULT_SEED) -> int:
    """:func:`murmur3_32_rows` of one row given as bytes (a multiple of 4 long), in plain Python: a
    few microseconds for a short key, where building arrays for one row costs a hundred."""
    if len(data) % 4:
        raise InvalidInputError(f"murmur3_32_bytes: length {len(data)} is not a multiple of 4")
    h = seed & _MASK32
    for k in struct.unpack(f"<{len(data) // 4}I", data):
        k = (k * 0xCC9E2D51) & _MASK32
        k = (((k << 15) | (k >> 17)) * 0x1B873593) & _MASK32
        h ^= k
        h = (((((h << 13) | (h >> 19)) & _MASK32) * 5) + 0xE6546B64) & _MASK32
    h ^= len(data) & _MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def bucket_key_hash(values: Sequence[object], types: Sequence[DataType]) -> int:
    """:func:`bucket_key_hashes` of one row of Python values (the per-record path)."""
    return murmur3_32_bytes(to_binary_row(values, types))


# ---------------------------------------------------------------------------------------------
# per-field slots


@dataclass
class _Field:
    """One bucket-key field of a batch, in BinaryRow terms."""

    slot: np.ndarray  # uint64 slot per row (for variable-length rows: the low 32 bits only)
    nulls: np.ndarray | None  # bool per row, None when no row is null
    high_zero: bool = False  # the slot never uses its upper 32 bits (lets the hash skip a column)
    var_reserved: np.ndarray | None = None  # int64 bytes reserved in the variable part per row
    var_data: np.ndarray | None = None  # uint8 source buffer of the variable-length bytes
    var_start: np.ndarray | None = None  # int64 start of each row's bytes in var_data
    var_length: np.ndarray | None = None  # int64 bytes to copy per row (<= var_reserved)

    def rows(self, start: int, stop: int) -> _Field:
        """The same field restricted to rows ``start:stop`` (views, the variable-length source is shared)."""

        def cut(values: np.ndarray | None) -> np.ndarray | None:
            return None if values is None else values[start:stop]

        return _Field(
            slot=self.slot[start:stop],
            nulls=cut(self.nulls),
            high_zero=self.high_zero,
            var_reserved=cut(self.var_reserved),
            var_data=self.var_data,
            var_start=cut(self.var_start),
            var_length=cut(self.var_length),
        )


def _as_array(column: Union[pa.Array, pa.ChunkedArray]) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column


def _null_mask(array: pa.Array) -> np.ndarray | None:
    if array.null_count == 0:
        return None
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _int_values(array: pa.Array, storage: pa.DataType) -> np.ndarray:
    """Values of a fixed-width array as numpy integers of ``storage``'s width, nulls as 0."""
    if array.type != storage:
        array = array.view(storage)
    if array.null_count:
        array = pc.fill_null(array, 0)
    return array.to_numpy(zero_copy_only=False)


def _cast(array: pa.Array, target: pa.DataType, name: str, label: str) -> pa.Array:
    if array.type == target:
        return array
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"bucket key column {name!r}: cannot use {array.type} as {label}: {exc}") from exc


def _unsigned_slot(values: np.ndarray) -> np.ndarray:
    """Zero-extend integers of 1, 2, 4 or 8 bytes into uint64 slots (little-endian byte copy)."""
    unsigned = values.view(np.dtype(f"u{values.dtype.itemsize}"))
    return unsigned.astype(np.uint64, copy=False)


def _epoch_units(array: pa.Array) -> tuple[np.ndarray, int]:
    """Raw int64 values of a timestamp array and the number of its units per second."""
    unit = array.type.unit
    per_second = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    return _int_values(array, pa.int64()).astype(np.int64, copy=False), per_second


def _timestamp_field(array: pa.Array, data_type: DataType, name: str) -> _Field:
    if not pa.types.is_timestamp(array.type):
        raise SchemaError(
            f"bucket key column {name!r}: {array.type} is not a timestamp ({type_label(data_type)})"
        )
    raw, per_second = _epoch_units(array)
    nulls = _null_mask(array)
    if per_second >= 1000:
        millis = np.floor_divide(raw, per_second // 1000)
        nanos = np.remainder(raw, per_second // 1000) * (1_000_000_000 // per_second)
    else:
        millis = raw * 1000
        nanos = np.zeros(len(raw), dtype=np.int64)
    if is_compact_timestamp(data_type):
        return _Field(slot=millis.view(np.uint64), nulls=nulls)
    n = len(raw)
    length = np.full(n, 8, dtype=np.int64)
    if nulls is not None:
        nanos = np.where(nulls, 0, nanos)
        length[nulls] = 0
    return _Field(
        slot=nanos.astype(np.uint64),
        nulls=nulls,
        var_reserved=np.full(n, 8, dtype=np.int64),
        var_data=np.ascontiguousarray(millis, dtype="<i8").view(np.uint8),
        var_start=np.arange(n, dtype=np.int64) * 8,
        var_length=length,
    )


def _decimal_words(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(low uint64, high int64) halves of the unscaled 128-bit values of a decimal128 array."""
    buffer = array.buffers()[1]
    words = np.frombuffer(buffer, dtype="<u8", count=2 * (array.offset + len(array)))
    words = words.reshape(-1, 2)[array.offset :]
    low = words[:, 0].copy()
    high = words[:, 1].view(np.int64).copy()
    nulls = _null_mask(array)
    if nulls is not None:
        low[nulls] = 0
        high[nulls] = 0
    return low, high


def _decimal_field(array: pa.Array, data_type: DataType, name: str) -> _Field:
    precision, scale = decimal_precision_scale(data_type)
    label = type_label(data_type)
    if not pa.types.is_decimal(array.type):
        raise SchemaError(f"bucket key column {name!r}: {array.type} is not a decimal ({label})")
    array = _cast(array, pa.decimal128(max(precision, 1), scale), name, label)
    low, high = _decimal_words(array)
    nulls = _null_mask(array)
    if is_compact_decimal(data_type):
        return _Field(slot=low, nulls=nulls)
    n = len(array)
    # Big-endian 16-byte two's complement, then drop redundant leading sign bytes (BigInteger.toByteArray).
    big_endian = np.empty((n, 16), dtype=np.uint8)
    big_endian[:, :8] = high.astype(">i8").view(np.uint8).reshape(n, 8)
    big_endian[:, 8:] = low.astype(">u8").view(np.uint8).reshape(n, 8)
    sign = np.where(high < 0, np.uint8(0xFF), np.uint8(0))
    skip = np.zeros(n, dtype=np.int64)
    still = np.ones(n, dtype=bool)
    for j in range(15):
        redundant = (big_endian[:, j] == sign) & ((big_endian[:, j + 1] & 0x80) == (sign & 0x80))
        still &= redundant
        skip += still
    length = 16 - skip
    if nulls is not None:
        length[nulls] = 0
    return _Field(
        slot=length.astype(np.uint64),
        nulls=nulls,
        var_reserved=np.full(n, 16, dtype=np.int64),
        var_data=big_endian.reshape(-1),
        var_start=np.arange(n, dtype=np.int64) * 16 + skip,
        var_length=length,
    )


def _bytes_field(array: pa.Array, data_type: DataType, name: str) -> _Field:
    kind = array.type
    if pa.types.is_fixed_size_binary(kind):
        array = array.cast(pa.binary())
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        array = array.cast(pa.large_binary())
    elif pa.types.is_string(kind) or pa.types.is_binary(kind):
        array = array.cast(pa.binary())
    else:
        try:
            array = array.cast(pa.large_binary())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(
                f"bucket key column {name!r}: {kind} cannot be used as {type_label(data_type)}"
            ) from exc
    n = len(array)
    offset_type = "<i8" if pa.types.is_large_binary(array.type) else "<i4"
    raw_offsets = np.frombuffer(array.buffers()[1], dtype=offset_type, count=array.offset + n + 1)
    offsets: np.ndarray = raw_offsets[array.offset :].astype(np.int64)
    starts: np.ndarray = offsets[:-1]
    lengths = offsets[1:] - starts
    nulls = _null_mask(array)
    if nulls is not None:
        lengths = np.where(nulls, 0, lengths)
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    inline = lengths <= 7
    slot = np.zeros(n, dtype=np.uint64)
    for j in range(7):
        take = inline & (lengths > j)
        if not take.any():
            break
        byte = padded[np.where(take, starts + j, len(data))]
        slot |= byte.astype(np.uint64) << np.uint64(8 * j)
    flag = ((np.uint64(0x80) | lengths.astype(np.uint64)) << np.uint64(56)) * inline.astype(np.uint64)
    slot |= flag
    if nulls is not None:
        slot[nulls] = 0
    if bool(inline.all()):
        return _Field(slot=slot, nulls=nulls)
    outline = ~inline
    slot[outline] = lengths[outline].astype(np.uint64)
    reserved = np.where(outline, (lengths + 7) & ~7, 0)
    return _Field(
        slot=slot,
        nulls=nulls,
        var_reserved=reserved,
        var_data=data,
        var_start=starts,
        var_length=np.where(outline, lengths, 0),
    )


def _time_millis(array: pa.Array, data_type: DataType, name: str) -> np.ndarray:
    kind = array.type
    if pa.types.is_time32(kind):
        raw = _int_values(array, pa.int32()).astype(np.int64)
    elif pa.types.is_time64(kind):
        raw = _int_values(array, pa.int64()).astype(np.int64)
    else:
        raise SchemaError(f"bucket key column {name!r}: {kind} is not a time ({type_label(data_type)})")
    per_second = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[kind.unit]
    if per_second == 1:
        return (raw * 1000).astype(np.int32)
    return np.floor_divide(raw, per_second // 1000).astype(np.int32)


_INT_TYPES = {
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
}
_STORAGE = {
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.int32(),
    "DOUBLE": pa.int64(),
    "DATE": pa.int32(),
}


def _field(column: Union[pa.Array, pa.ChunkedArray], data_type: DataType, name: str) -> _Field:
    array = _as_array(column)
    root = data_type.root
    label = type_label(data_type)
    if root in _INT_TYPES:
        array = _cast(array, _INT_TYPES[root], name, label)
        values = _int_values(array, _STORAGE[root])
        return _Field(
            slot=_unsigned_slot(values),
            nulls=_null_mask(array),
            high_zero=root != "BIGINT" and root != "DOUBLE",
        )
    if root == "BOOLEAN":
        array = _cast(array, pa.bool_(), name, label)
        filled = pc.fill_null(array, False) if array.null_count else array
        values = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.uint64)
        return _Field(slot=values, nulls=_null_mask(array), high_zero=True)
    if root == "TIME":
        return _Field(
            slot=_unsigned_slot(_time_millis(array, data_type, name)), nulls=_null_mask(array), high_zero=True
        )
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return _bytes_field(array, data_type, name)
    if root == "DECIMAL":
        return _decimal_field(array, data_type, name)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _timestamp_field(array, data_type, name)
    if root in ("ARRAY", "MULTISET", "MAP", "ROW"):
        raise SchemaError(f"bucket key column {name!r}: nested type {root} cannot be a bucket key")
    raise SchemaError(f"bucket key column {name!r}: unsupported type {root}")


# ---------------------------------------------------------------------------------------------
# rows -> hashes


def _header_words(fields: Sequence[_Field], n: int, header: int) -> list[_Word]:
    """The header as 32-bit word columns: row kind 0, then one null bit per field at index pos + 8."""
    words: list[_Word] = [0] * (header // 4)
    for pos, field in enumerate(fields):
        if field.nulls is None:
            continue
        bit = pos + 8
        index = bit // 32
        current = words[index]
        column = np.zeros(n, dtype=np.uint32) if not isinstance(current, np.ndarray) else current
        column |= field.nulls.astype(np.uint32) << np.uint32(bit % 32)
        words[index] = column
    return words


def _slot_words(field: _Field) -> list[_Word]:
    halves = np.ascontiguousarray(field.slot, dtype="<u8").view("<u4").reshape(-1, 2)
    if field.high_zero:
        return [halves[:, 0], 0]
    return [halves[:, 0], halves[:, 1]]


def _hash_fixed(fields: Sequence[_Field], n: int, seed: int) -> np.ndarray:
    header = null_bits_size(len(fields))
    words = _header_words(fields, n, header)
    for field in fields:
        words.extend(_slot_words(field))
    return _murmur_words(words, n, header + 8 * len(fields), seed)


def _gather_var(field: _Field, rows: np.ndarray, width: int) -> np.ndarray:
    """The variable-length bytes of ``rows`` as a ``(len(rows), width)`` matrix, zero past each length."""
    assert field.var_data is not None and field.var_start is not None and field.var_length is not None
    source = np.concatenate([field.var_data, np.zeros(width + 8, dtype=np.uint8)])
    windows = np.lib.stride_tricks.sliding_window_view(source, width)
    block = windows[field.var_start[rows]]  # copies one row of ``width`` bytes per selected row
    lengths = field.var_length[rows]
    shortest = int(lengths.min()) if len(lengths) else width
    if shortest < width:
        tail = block[:, shortest:]
        tail[np.arange(shortest, width, dtype=np.int64)[None, :] >= lengths[:, None]] = 0
    return block


def _group_rows(keys: np.ndarray) -> list[np.ndarray]:
    """Row indices grouped by equal rows of the 2-D int64 array ``keys`` (one sort, no per-row loop)."""
    n = len(keys)
    if n == 0:
        return []
    if bool((keys == keys[0]).all()):
        return [np.arange(n, dtype=np.int64)]
    # Mixed-radix code of each row's key; the values are small (variable-part widths).
    code = np.zeros(n, dtype=np.int64)
    scale = 1
    for column in keys.T:
        low = int(column.min())
        span = int(column.max()) - low + 1
        if scale * span >= 1 << 62:
            _, code = np.unique(keys, axis=0, return_inverse=True)
            code = code.reshape(-1).astype(np.int64)
            break
        code += (column - low) * scale
        scale *= span
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    cuts = np.nonzero(sorted_code[1:] != sorted_code[:-1])[0] + 1
    return np.split(order, cuts)


def _hash_variable(fields: Sequence[_Field], n: int, seed: int) -> np.ndarray:
    """Hash rows with variable-length parts: rows are grouped by their layout (the bytes each field
    reserves in the variable part), so that within a group every offset is the same and the group's
    rows form one matrix."""
    header = null_bits_size(len(fields))
    fixed_size = header + 8 * len(fields)
    header_words = np.zeros((n, header // 8), dtype="<u8")
    for pos, field in enumerate(fields):
        if field.nulls is not None:
            bit = pos + 8
            header_words[:, bit // 64] |= field.nulls.astype(np.uint64) << np.uint64(bit % 64)
    var_fields = [pos for pos, field in enumerate(fields) if field.var_reserved is not None]
    reserved = np.stack([fields[pos].var_reserved for pos in var_fields], axis=1)  # type: ignore[misc]
    groups = _group_rows(reserved)
    hashes = np.empty(n, dtype=np.int32)
    for rows in groups:
        layout = reserved[rows[0]].tolist()
        width_of = dict(zip(var_fields, layout))
        length = fixed_size + sum(layout)
        matrix = np.zeros((len(rows), length), dtype=np.uint8)
        words = matrix.view("<u8")
        words[:, : header // 8] = header_words[rows]
        cursor = fixed_size
        for pos, field in enumerate(fields):
            slot = field.slot[rows]
            width = width_of.get(pos, 0)
            if width:
                slot = slot | np.uint64(cursor << 32)
                matrix[:, cursor : cursor + width] = _gather_var(field, rows, width)
                cursor += width
            words[:, header // 8 + pos] = slot
        hashes[rows] = murmur3_32_rows(matrix, seed)
    return hashes


def bucket_key_hashes(
    table: Union[pa.Table, pa.RecordBatch],
    bucket_key: Sequence[str],
    types: Sequence[DataType],
    seed: int = DEFAULT_SEED,
) -> np.ndarray:
    """Paimon's ``BinaryRow.hashCode()`` of each row's bucket-key row, as an int32 array."""
    if len(bucket_key) != len(types):
        raise SchemaError(
            f"bucket key {list(bucket_key)} has {len(bucket_key)} columns but {len(types)} types"
        )
    if not bucket_key:
        raise SchemaError("the bucket key is empty")
    names = table.schema.names
    for name in bucket_key:
        if names.count(name) != 1:
            raise SchemaError(f"bucket key column {name!r} is not exactly once in the data")
    n = table.num_rows
    fields = [_field(table.column(name), data_type, name) for name, data_type in zip(bucket_key, types)]
    fixed_only = all(field.var_reserved is None for field in fields)
    chunk = _FIXED_CHUNK_ROWS if fixed_only else _CHUNK_ROWS
    hash_rows = _hash_fixed if fixed_only else _hash_variable
    result = np.empty(n, dtype=np.int32)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        result[start:stop] = hash_rows([field.rows(start, stop) for field in fields], stop - start, seed)
    return result


def buckets_from_hashes(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    """``abs(hash % num_buckets)`` with Java's remainder (sign of the dividend), as int32."""
    if num_buckets <= 0:
        raise OptionError(f"option 'bucket': fixed-bucket assignment needs bucket > 0, got {num_buckets}")
    remainder = np.fmod(np.asarray(hashes, dtype=np.int64), num_buckets)
    return np.abs(remainder).astype(np.int32)


def compute_buckets(
    table: Union[pa.Table, pa.RecordBatch],
    bucket_key: Sequence[str],
    types: Sequence[DataType],
    num_buckets: int,
) -> np.ndarray:
    """The fixed bucket (0 .. num_buckets-1) of every row, as an int32 array."""
    if num_buckets <= 0:
        raise OptionError(f"option 'bucket': fixed-bucket assignment needs bucket > 0, got {num_buckets}")
    return buckets_from_hashes(bucket_key_hashes(table, bucket_key, types), num_buckets)
