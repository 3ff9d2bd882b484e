"""A schema-less reader and writer of Thrift's compact protocol, enough to edit a Parquet footer.

A struct decodes to a list of :class:`TField` in wire order, each keeping its compact type code, so
that encoding an unmodified struct gives back the same bytes, and its place in the bytes, so that a
few fields can be changed, removed or added without encoding the rest (:func:`apply_edits`).
Values: integers as ``int``, booleans as ``bool``, binaries as ``bytes``, doubles as their 8 raw
bytes, lists and sets as :class:`TList`, maps as :class:`TMap`, structs as ``list[TField]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from lakelog.connector.errors import CorruptFileError

__all__ = [
    "TField", "TList", "TMap", "read_struct", "read_struct_at", "write_struct", "field", "without_field",
    "with_field", "replaced_field", "apply_edits", "Edit", "I32", "BINARY", "LIST", "STRUCT",
]

# compact type codes
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)


@dataclass(slots=True)
class TField:
    """A struct field; a decoded one knows where it lies in the bytes: header at ``start``, value
    from ``vpos`` to ``end``."""

    id: int
    type: int
    value: Any
    start: int = -1
    vpos: int = -1
    end: int = -1


@dataclass(slots=True)
class TList:
    element_type: int
    items: list[Any]


@dataclass(slots=True)
class TMap:
    key_type: int
    value_type: int
    items: list[tuple[Any, Any]]


# ---- decoding (plain functions over bytes and an offset: footers are decoded on every file write) ------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return b, pos + 1
    out, shift = b & 0x7F, 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise CorruptFileError("Thrift varint is too long")


def _value(data: bytes, pos: int, t: int) -> tuple[Any, int]:
    if t in (I32, I64, I16):
        n, pos = _varint(data, pos)
        return (n >> 1) ^ -(n & 1), pos
    if t == BINARY:
        n, pos = _varint(data, pos)
        end = pos + n
        if end > len(data):
            raise IndexError(end)
        return data[pos:end], end
    if t == STRUCT:
        return _struct(data, pos)
    if t in (LIST, SET):
        head = data[pos]
        pos += 1
        size, et = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        items = []
        for _ in range(size):
            item, pos = _value(data, pos, et)
            items.append(item)
        return TList(et, items), pos
    if t == BYTE:
        b = data[pos]
        return (b - 256 if b > 127 else b), pos + 1
    if t in (TRUE, FALSE):  # inside a list or map: one byte per value
        return data[pos] == TRUE, pos + 1
    if t == DOUBLE:
        if pos + 8 > len(data):
            raise IndexError(pos + 8)
        return data[pos : pos + 8], pos + 8
    if t == MAP:
        size, pos = _varint(data, pos)
        if size == 0:
            return TMap(0, 0, []), pos
        kv = data[pos]
        pos += 1
        kt, vt = kv >> 4, kv & 0x0F
        pairs = []
        for _ in range(size):
            k, pos = _value(data, pos, kt)
            v, pos = _value(data, pos, vt)
            pairs.append((k, v))
        return TMap(kt, vt, pairs), pos
    raise CorruptFileError(f"unknown Thrift compact type {t}")


def _struct(data: bytes, pos: int) -> tuple[list[TField], int]:
    fields: list[TField] = []
    last = 0
    while True:
        start = pos
        head = data[pos]
        pos += 1
        if head == 0:
            return fields, pos
        t, delta = head & 0x0F, head >> 4
        if delta:
            fid = last + delta
        else:
            n, pos = _varint(data, pos)
            fid = (n >> 1) ^ -(n & 1)
        vpos = pos
        if t in (I32, I64):
            n, pos = _varint(data, pos)
            value: Any = (n >> 1) ^ -(n & 1)
        elif t in (TRUE, FALSE):
            value = t == TRUE
        else:
            value, pos = _value(data, pos, t)
        fields.append(TField(fid, t, value, start, vpos, pos))
        last = fid


def read_struct_at(data: bytes, pos: int) -> tuple[list[TField], int]:
    """Decode the struct that starts at ``pos`` of ``data`` (a Parquet page header, followed by its
    page); return it and the offset where it ends."""
    try:
        return _struct(data, pos)
    except IndexError:
        raise CorruptFileError("Thrift structure ends early") from None


def read_struct(data: Union[bytes, memoryview]) -> list[TField]:
    """Decode one struct that fills ``data``."""
    raw = bytes(data)
    try:
        out, pos = _struct(raw, 0)
    except IndexError:
        raise CorruptFileError("Thrift structure ends early") from None
    if pos != len(raw):
        raise CorruptFileError(f"{len(raw) - pos} bytes after the Thrift structure")
    return out


# ---- encoding --------------------------------------------------------------------------------------------
def _put_varint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _put_zigzag(n: int, out: bytearray) -> None:
    _put_varint((n << 1) ^ (n >> 63), out)


def _write_value(t: int, v: Any, out: bytearray) -> None:
    if t in (I32, I64, I16):
        _put_zigzag(v, out)
    elif t == BINARY:
        _put_varint(len(v), out)
        out += v
    elif t == STRUCT:
        _write_struct(v, out)
    elif t in (LIST, SET):
        n = len(v.items)
        if n < 15:
            out.append(n << 4 | v.element_type)
        else:
            out.append(0xF0 | v.element_type)
            _put_varint(n, out)
        for item in v.items:
            _write_value(v.element_type, item, out)
    elif t == BYTE:
        out.append(v & 0xFF)
    elif t in (TRUE, FALSE):
        out.append(TRUE if v else FALSE)
    elif t == DOUBLE:
        out += v
    elif t == MAP:
        _put_varint(len(v.items), out)
        if v.items:
            out.append(v.key_type << 4 | v.value_type)
            for k, x in v.items:
                _write_value(v.key_type, k, out)
                _write_value(v.value_type, x, out)
    else:
        raise ValueError(f"unknown Thrift compact type {t}")


def _write_struct(fields: list[TField], out: bytearray) -> None:
    last = 0
    for f in fields:
        t = (TRUE if f.value else FALSE) if f.type in (TRUE, FALSE) else f.type
        delta = f.id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | t)
        else:
            out.append(t)
            _put_zigzag(f.id, out)
        if t in (I32, I64):
            _put_zigzag(f.value, out)
        elif t not in (TRUE, FALSE):
            _write_value(t, f.value, out)
        last = f.id
    out.append(0)


def write_struct(fields: list[TField]) -> bytes:
    out = bytearray()
    _write_struct(fields, out)
    return bytes(out)


# ---- editing encoded bytes in place ---------------------------------------------------------------------
Edit = tuple[int, int, bytes]
"""Replace ``data[start:end]`` by the bytes."""


def _header(t: int, fid: int, prev: int) -> bytes:
    delta = fid - prev
    if 0 < delta <= 15:
        return bytes([delta << 4 | t])
    out = bytearray([t])
    _put_zigzag(fid, out)
    return bytes(out)


def without_field(data: bytes, fields: list[TField], i: int) -> Edit:
    """The edit removing decoded field ``fields[i]`` from its struct (the next field's header, which
    counts from the previous field's id, is rewritten)."""
    f = fields[i]
    prev = fields[i - 1].id if i else 0
    if i + 1 == len(fields):
        return (f.start, f.end, b"")
    nxt = fields[i + 1]
    return (f.start, nxt.vpos, _header(data[nxt.start] & 0x0F, nxt.id, prev))


def with_field(data: bytes, fields: list[TField], new: TField, struct_end: int) -> Edit:
    """The edit inserting ``new`` (encoded) into a decoded struct, in id order; ``struct_end`` is the
    offset of the struct's stop byte."""
    i = next((k for k, f in enumerate(fields) if f.id > new.id), len(fields))
    prev = fields[i - 1].id if i else 0
    out = bytearray(_header(new.type, new.id, prev))
    _write_value(new.type, new.value, out)
    if i == len(fields):
        return (struct_end, struct_end, bytes(out))
    nxt = fields[i]
    return (nxt.start, nxt.vpos, bytes(out) + _header(data[nxt.start] & 0x0F, nxt.id, new.id))


def replaced_field(fields: list[TField], i: int) -> Edit:
    """The edit encoding decoded field ``fields[i]`` again (after its value was changed)."""
    f = fields[i]
    out = bytearray(_header(f.type, f.id, fields[i - 1].id if i else 0))
    _write_value(f.type, f.value, out)
    return (f.start, f.end, bytes(out))


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    """``data`` with non-overlapping edits applied."""
    out = bytearray()
    pos = 0
    for start, end, replacement in sorted(edits):
        if start < pos:
            raise ValueError("overlapping edits")
        out += data[pos:start]
        out += replacement
        pos = end
    out += data[pos:]
    return bytes(out)


def field(fields: list[TField], fid: int) -> TField | None:
    """The field with id ``fid`` of a decoded struct, or None."""
    for f in fields:
        if f.id == fid:
            return f
    return None
