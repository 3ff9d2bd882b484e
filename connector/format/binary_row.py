"""Paimon's BinaryRow: the byte layout of partitions, min/max keys, statistics and bucket keys.

Layout of one row (all integers little-endian):

* a header of ``null_bits_size(arity)`` bytes: byte 0 is the row kind (0 = +I), then one null bit per
  field at bit index ``field_index + 8``;
* one 8-byte slot per field. Fixed-size values sit in the slot (zero padded). Strings and binaries of at
  most 7 bytes sit inline: the bytes, then ``0x80 | length`` in the slot's last byte. Longer ones, and
  the non-compact DECIMAL (precision > 18) and TIMESTAMP (precision > 3) values, live in a variable part
  after the slots; their slot holds ``offset << 32 | length`` (``offset`` counted from the row start),
  except a non-compact timestamp, whose slot holds ``offset << 32 | nanos_of_millisecond``;
* the variable part, each value padded to a multiple of 8 bytes; a non-compact decimal always reserves
  16 bytes and a non-compact timestamp 8 bytes, even when null (as Java's ``RowHelper`` writes them).

Manifests store rows "serialized": a 4-byte big-endian arity, then the row.

Python values follow pyarrow's ``to_pylist()``: bool, int, float, ``decimal.Decimal``, str, bytes,
``datetime.date`` / ``time`` / ``datetime`` (naive for TIMESTAMP, UTC-aware for TIMESTAMP_LTZ).
"""

from __future__ import annotations

import calendar
import datetime as _dt
import decimal
import struct
from typing import Any, Sequence

from lakelog.connector.errors import CorruptFileError, InvalidInputError, LakelogError, SchemaError
from lakelog.connector.format.types import NESTED_ROOTS, DataType

__all__ = [
    "EMPTY_ROW",
    "to_binary_row",
    "from_binary_row",
    "serialize_row",
    "deserialize_row",
    "null_bits_size",
    "decimal_precision_scale",
    "timestamp_precision",
    "is_compact_decimal",
    "is_compact_timestamp",
    "type_label",
]

_HEADER_BITS = 8
_MAX_INLINE = 7
_STRING_ROOTS = frozenset({"CHAR", "VARCHAR"})
_BINARY_ROOTS = frozenset({"BINARY", "VARBINARY"})
_TIMESTAMP_ROOTS = frozenset({"TIMESTAMP", "TIMESTAMP_LTZ"})
_FIXED_FORMATS = {
    "TINYINT": "<b",
    "SMALLINT": "<h",
    "INT": "<i",
    "BIGINT": "<q",
    "FLOAT": "<f",
    "DOUBLE": "<d",
}
_DEFAULT_DECIMAL_PRECISION = 10
_DEFAULT_TIMESTAMP_PRECISION = 6
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_EPOCH = _dt.datetime(1970, 1, 1)
_DECIMAL_CONTEXT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)
_INLINE_FLAG = 0x80
_VAR_DECIMAL_BYTES = 16
_MILLIS_PER_DAY = 86_400_000


def null_bits_size(arity: int) -> int:
    """Bytes of the header (row kind + null bits) of a row with ``arity`` fields."""
    return ((arity + 63 + _HEADER_BITS) // 64) * 8


def type_label(data_type: DataType) -> str:
    """A short SQL-like name of a type for error messages."""
    root = data_type.root
    if root == "DECIMAL":
        precision, scale = decimal_precision_scale(data_type)
        return f"DECIMAL({precision}, {scale})"
    if root in _TIMESTAMP_ROOTS:
        return f"{root}({timestamp_precision(data_type)})"
    if root in _STRING_ROOTS or root in _BINARY_ROOTS:
        return root if data_type.length is None else f"{root}({data_type.length})"
    return root


def decimal_precision_scale(data_type: DataType) -> tuple[int, int]:
    """(precision, scale) of a DECIMAL, with Paimon's defaults (10, 0)."""
    precision = data_type.precision if data_type.precision is not None else _DEFAULT_DECIMAL_PRECISION
    scale = data_type.scale if data_type.scale is not None else 0
    return precision, scale


def timestamp_precision(data_type: DataType) -> int:
    """Precision of a TIMESTAMP / TIMESTAMP_LTZ, with Paimon's default 6."""
    return data_type.precision if data_type.precision is not None else _DEFAULT_TIMESTAMP_PRECISION


def is_compact_decimal(data_type: DataType) -> bool:
    """True when the decimal is stored as an unscaled long in its slot (precision <= 18)."""
    return decimal_precision_scale(data_type)[0] <= 18


def is_compact_timestamp(data_type: DataType) -> bool:
    """True when the timestamp is stored as epoch millis in its slot (precision <= 3)."""
    return timestamp_precision(data_type) <= 3


def _check_supported(data_type: DataType, pos: int) -> None:
    root = data_type.root
    if root in NESTED_ROOTS:
        raise SchemaError(f"BinaryRow field {pos}: nested type {root} is not supported in a BinaryRow")
    known = (
        root == "BOOLEAN"
        or root in _FIXED_FORMATS
        or root in _STRING_ROOTS
        or root in _BINARY_ROOTS
        or root in _TIMESTAMP_ROOTS
        or root in ("DECIMAL", "DATE", "TIME")
    )
    if not known:
        raise SchemaError(f"BinaryRow field {pos}: unsupported type {root}")


# ---------------------------------------------------------------------------------------------
# value -> internal representation


def _unscaled_decimal(value: Any, data_type: DataType) -> int:
    """The unscaled integer of ``value`` at the type's scale (HALF_UP), checked against precision."""
    precision, scale = decimal_precision_scale(data_type)
    if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int)):
        raise TypeError(f"expected decimal.Decimal or int, got {type(value).__name__}")
    number = decimal.Decimal(value)
    if not number.is_finite():
        raise ValueError("decimal value is not finite")
    quantum = decimal.Decimal(1).scaleb(-scale)
    unscaled = int(number.quantize(quantum, context=_DECIMAL_CONTEXT).scaleb(scale, context=_DECIMAL_CONTEXT))
    if abs(unscaled) >= 10**precision:
        raise ValueError(f"{value} does not fit precision {precision}")
    return unscaled


def _unscaled_bytes(unscaled: int) -> bytes:
    """Minimal big-endian two's-complement bytes, as Java's BigInteger.toByteArray()."""
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def _timestamp_parts(value: Any, data_type: DataType) -> tuple[int, int]:
    """(epoch millis, nanos of millisecond) of a datetime for TIMESTAMP / TIMESTAMP_LTZ."""
    if not isinstance(value, _dt.datetime):
        raise TypeError(f"expected datetime.datetime, got {type(value).__name__}")
    if data_type.root == "TIMESTAMP" and value.tzinfo is not None:
        raise ValueError("TIMESTAMP (without time zone) takes a naive datetime")
    # utctimetuple() converts an aware value to UTC and keeps a naive one as it is.
    seconds = calendar.timegm(value.utctimetuple())
    micros = value.microsecond
    extra_nanos = int(getattr(value, "nanosecond", 0) or 0)  # pandas.Timestamp
    return seconds * 1000 + micros // 1000, (micros % 1000) * 1000 + extra_nanos


def _date_days(value: Any) -> int:
    if isinstance(value, _dt.date):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"expected datetime.date, got {type(value).__name__}")


def _time_millis(value: Any) -> int:
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"expected datetime.time, got {type(value).__name__}")


def _var_bytes(value: Any, data_type: DataType) -> bytes:
    if data_type.root in _STRING_ROOTS:
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        return value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    return bytes(value)


# ---------------------------------------------------------------------------------------------
# encoding


class _RowWriter:
    """Builds one BinaryRow: a fixed part of header + slots, and a growing variable part."""

    def __init__(self, arity: int) -> None:
        self.header = null_bits_size(arity)
        self.fixed_size = self.header + 8 * arity
        self.fixed = bytearray(self.fixed_size)
        self.var = bytearray()

    def slot(self, pos: int) -> int:
        return self.header + 8 * pos

    def set_null_bit(self, pos: int) -> None:
        index = pos + _HEADER_BITS
        self.fixed[index // 8] |= 1 << (index % 8)

    def put_slot(self, pos: int, word: int) -> None:
        struct.pack_into("<Q", self.fixed, self.slot(pos), word & 0xFFFFFFFFFFFFFFFF)

    def append_var(self, data: bytes, reserve: int) -> int:
        """Append ``data`` zero-padded to ``reserve`` bytes; returns its offset from the row start."""
        offset = self.fixed_size + len(self.var)
        self.var += data
        self.var += bytes(reserve - len(data))
        return offset

    def put_bytes(self, pos: int, data: bytes) -> None:
        length = len(data)
        if length <= _MAX_INLINE:
            start = self.slot(pos)
            self.fixed[start : start + length] = data
            self.fixed[start + 7] = _INLINE_FLAG | length
        else:
            offset = self.append_var(data, (length + 7) & ~7)
            self.put_slot(pos, (offset << 32) | length)

    def finish(self) -> bytes:
        return bytes(self.fixed) + bytes(self.var)


def _write_null(writer: _RowWriter, pos: int, data_type: DataType) -> None:
    writer.set_null_bit(pos)
    # Java's RowHelper keeps the variable-part space of non-compact decimals and timestamps.
    if data_type.root == "DECIMAL" and not is_compact_decimal(data_type):
        writer.put_slot(pos, writer.append_var(b"", _VAR_DECIMAL_BYTES) << 32)
    elif data_type.root in _TIMESTAMP_ROOTS and not is_compact_timestamp(data_type):
        writer.put_slot(pos, writer.append_var(b"", 8) << 32)


def _write_value(writer: _RowWriter, pos: int, value: Any, data_type: DataType) -> None:
    root = data_type.root
    start = writer.slot(pos)
    fmt = _FIXED_FORMATS.get(root)
    if fmt is not None:
        if fmt in ("<f", "<d"):
            struct.pack_into(fmt, writer.fixed, start, float(value))
        else:
            if isinstance(value, float):
                raise TypeError("expected an integer, got float")
            struct.pack_into(fmt, writer.fixed, start, int(value))
    elif root == "BOOLEAN":
        if not isinstance(value, (bool, int)):
            raise TypeError(f"expected bool, got {type(value).__name__}")
        writer.fixed[start] = 1 if value else 0
    elif root == "DATE":
        struct.pack_into("<i", writer.fixed, start, _date_days(value))
    elif root == "TIME":
        struct.pack_into("<i", writer.fixed, start, _time_millis(value))
    elif root in _STRING_ROOTS or root in _BINARY_ROOTS:
        writer.put_bytes(pos, _var_bytes(value, data_type))
    elif root == "DECIMAL":
        unscaled = _unscaled_decimal(value, data_type)
        if is_compact_decimal(data_type):
            struct.pack_into("<q", writer.fixed, start, unscaled)
        else:
            data = _unscaled_bytes(unscaled)
            writer.put_slot(pos, (writer.append_var(data, _VAR_DECIMAL_BYTES) << 32) | len(data))
    elif root in _TIMESTAMP_ROOTS:
        millis, nanos = _timestamp_parts(value, data_type)
        if is_compact_timestamp(data_type):
            struct.pack_into("<q", writer.fixed, start, millis)
        else:
            offset = writer.append_var(struct.pack("<q", millis), 8)
            writer.put_slot(pos, (offset << 32) | nanos)
    else:  # pragma: no cover - _check_supported rejects everything else
        raise SchemaError(f"BinaryRow field {pos}: unsupported type {root}")


def to_binary_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """Encode one row as BinaryRow bytes (row kind +I, no arity prefix)."""
    if len(values) != len(types):
        raise InvalidInputError(f"BinaryRow: {len(values)} values for {len(types)} fields")
    writer = _RowWriter(len(types))
    for pos, (value, data_type) in enumerate(zip(values, types)):
        if value is None and data_type.root in NESTED_ROOTS:
            writer.set_null_bit(pos)  # a null nested field (e.g. the stats of a list column)
            continue
        _check_supported(data_type, pos)
        if value is None:
            _write_null(writer, pos, data_type)
            continue
        try:
            _write_value(writer, pos, value, data_type)
        except LakelogError:
            raise
        except (TypeError, ValueError, OverflowError, struct.error, decimal.InvalidOperation) as exc:
            raise InvalidInputError(
                f"BinaryRow field {pos}: cannot encode {value!r} as {type_label(data_type)}: {exc}"
            ) from exc
    return writer.finish()


def serialize_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """Encode one row as stored in manifests: 4-byte big-endian arity, then the BinaryRow."""
    return struct.pack(">i", len(types)) + to_binary_row(values, types)


EMPTY_ROW: bytes = serialize_row([], [])
"""The serialized row of arity 0 (an unpartitioned table's partition): 12 bytes, all zero."""


# ---------------------------------------------------------------------------------------------
# decoding


def _read_var(data: memoryview, slot_word: int, start: int) -> bytes:
    if slot_word & (1 << 63):
        length = (slot_word >> 56) & 0x7F
        if length > _MAX_INLINE:
            raise ValueError(f"inline length {length} exceeds 7")
        return bytes(data[start : start + length])
    offset = slot_word >> 32
    length = slot_word & 0xFFFFFFFF
    if offset + length > len(data):
        raise ValueError(f"variable-length data [{offset}, {offset + length}) is out of the row's bounds")
    return bytes(data[offset : offset + length])


def _decimal_from_unscaled(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal(unscaled).scaleb(-scale, context=_DECIMAL_CONTEXT)


def _datetime_from_parts(millis: int, nanos: int, data_type: DataType) -> _dt.datetime:
    value = _EPOCH + _dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)
    if data_type.root == "TIMESTAMP_LTZ":
        return value.replace(tzinfo=_dt.timezone.utc)
    return value


def _read_field(data: memoryview, header: int, pos: int, data_type: DataType) -> Any:
    root = data_type.root
    start = header + 8 * pos
    if start + 8 > len(data):
        raise ValueError(f"slot [{start}, {start + 8}) is out of the row's bounds ({len(data)} bytes)")
    fmt = _FIXED_FORMATS.get(root)
    if fmt is not None:
        return struct.unpack_from(fmt, data, start)[0]
    if root == "BOOLEAN":
        return data[start] != 0
    if root == "DATE":
        return _dt.date.fromordinal(_EPOCH_ORDINAL + struct.unpack_from("<i", data, start)[0])
    if root == "TIME":
        millis = struct.unpack_from("<i", data, start)[0]
        if not 0 <= millis < _MILLIS_PER_DAY:
            raise ValueError(f"time of day {millis} ms is out of range")
        seconds, milli = divmod(millis, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return _dt.time(hour, minute, second, milli * 1000)
    word = struct.unpack_from("<Q", data, start)[0]
    if root in _STRING_ROOTS:
        return _read_var(data, word, start).decode("utf-8")
    if root in _BINARY_ROOTS:
        return _read_var(data, word, start)
    if root == "DECIMAL":
        _, scale = decimal_precision_scale(data_type)
        if is_compact_decimal(data_type):
            return _decimal_from_unscaled(struct.unpack_from("<q", data, start)[0], scale)
        raw = _read_var(data, word & 0x7FFFFFFFFFFFFFFF, start)
        return _decimal_from_unscaled(int.from_bytes(raw, "big", signed=True), scale)
    if root in _TIMESTAMP_ROOTS:
        if is_compact_timestamp(data_type):
            return _datetime_from_parts(struct.unpack_from("<q", data, start)[0], 0, data_type)
        offset = word >> 32
        if offset + 8 > len(data):
            raise ValueError(f"timestamp millis at {offset} is out of the row's bounds")
        millis = struct.unpack_from("<q", data, offset)[0]
        return _datetime_from_parts(millis, word & 0xFFFFFFFF, data_type)
    raise SchemaError(f"BinaryRow field {pos}: unsupported type {root}")  # pragma: no cover


def from_binary_row(data: bytes, types: Sequence[DataType], what: str | None = None) -> tuple[Any, ...]:
    """Decode BinaryRow bytes (no arity prefix) into Python values; ``what`` names the source in errors."""
    view = memoryview(data)
    header = null_bits_size(len(types))
    label = what or "BinaryRow"
    if len(view) < header + 8 * len(types):
        raise CorruptFileError(f"{label}: {len(view)} bytes are too short for a row of {len(types)} fields")
    values: list[Any] = []
    for pos, data_type in enumerate(types):
        index = pos + _HEADER_BITS
        if view[index // 8] & (1 << (index % 8)):
            values.append(None)
            continue
        _check_supported(data_type, pos)
        try:
            values.append(_read_field(view, header, pos, data_type))
        except LakelogError:
            raise
        except (ValueError, OverflowError, struct.error, UnicodeDecodeError) as exc:
            raise CorruptFileError(f"{label}: field {pos} ({type_label(data_type)}): {exc}") from exc
    return tuple(values)


def deserialize_row(data: bytes, types: Sequence[DataType], what: str | None = None) -> tuple[Any, ...]:
    """Inverse of :func:`serialize_row`. Empty bytes or an arity-0 row give ``()``."""
    if not data:
        return ()
    label = what or "serialized BinaryRow"
    if len(data) < 4:
        raise CorruptFileError(f"{label}: {len(data)} bytes are too short for the arity prefix")
    arity = struct.unpack_from(">i", data, 0)[0]
    if arity == 0:
        return ()
    if arity != len(types):
        raise CorruptFileError(f"{label}: row has arity {arity}, expected {len(types)} fields")
    return from_binary_row(bytes(memoryview(data)[4:]), types, label)
