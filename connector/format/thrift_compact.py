"""A schema-less reader and writer of Thrift's compact protocol, enough to edit a Parquet footer.

A struct decodes to a list of :class:`TField` in wire order, each keeping its compact type code, so
that encoding an unmodified struct gives back the same bytes. Values: integers as ``int``, booleans
as ``bool``, binaries as ``bytes``, doubles as their 8 raw bytes, lists and sets as :class:`TList`,
maps as :class:`TMap`, structs as ``list[TField]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from lakelog.connector.errors import CorruptFileError

__all__ = [
    "TField", "TList", "TMap", "read_struct", "write_struct", "field", "I32", "BINARY", "LIST", "STRUCT"
]

# compact type codes
TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
_INTS = (I16, I32, I64)


@dataclass
class TField:
    id: int
    type: int
    value: Any


@dataclass
class TList:
    element_type: int
    items: list[Any]


@dataclass
class TMap:
    key_type: int
    value_type: int
    items: list[tuple[Any, Any]]


class _Reader:
    def __init__(self, data: Union[bytes, memoryview]) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise CorruptFileError("Thrift structure ends early")
        b = self.data[self.pos]
        self.pos += 1
        return int(b)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptFileError("Thrift structure ends early")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise CorruptFileError("Thrift varint is too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t: int) -> Any:
        if t in _INTS:
            return self.zigzag()
        if t == BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if t in (TRUE, FALSE):  # inside a list or map: one byte per value
            return self.byte() == TRUE
        if t == DOUBLE:
            return self.take(8)
        if t == BINARY:
            return self.take(self.varint())
        if t in (LIST, SET):
            head = self.byte()
            size, et = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return TList(et, [self.value(et) for _ in range(size)])
        if t == MAP:
            size = self.varint()
            if size == 0:
                return TMap(0, 0, [])
            kv = self.byte()
            kt, vt = kv >> 4, kv & 0x0F
            return TMap(kt, vt, [(self.value(kt), self.value(vt)) for _ in range(size)])
        if t == STRUCT:
            return self.struct()
        raise CorruptFileError(f"unknown Thrift compact type {t}")

    def struct(self) -> list[TField]:
        fields: list[TField] = []
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return fields
            t, delta = head & 0x0F, head >> 4
            fid = last + delta if delta else self.zigzag()
            value = (t == TRUE) if t in (TRUE, FALSE) else self.value(t)
            fields.append(TField(fid, t, value))
            last = fid


def read_struct(data: Union[bytes, memoryview]) -> list[TField]:
    """Decode one struct that fills ``data``."""
    r = _Reader(data)
    out = r.struct()
    if r.pos != len(r.data):
        raise CorruptFileError(f"{len(r.data) - r.pos} bytes after the Thrift structure")
    return out


def _varint(n: int, out: bytearray) -> None:
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _write_value(t: int, v: Any, out: bytearray) -> None:
    if t in _INTS:
        _zigzag(v, out)
    elif t == BYTE:
        out.append(v & 0xFF)
    elif t in (TRUE, FALSE):
        out.append(TRUE if v else FALSE)
    elif t == DOUBLE:
        out += v
    elif t == BINARY:
        _varint(len(v), out)
        out += v
    elif t in (LIST, SET):
        n = len(v.items)
        if n < 15:
            out.append(n << 4 | v.element_type)
        else:
            out.append(0xF0 | v.element_type)
            _varint(n, out)
        for item in v.items:
            _write_value(v.element_type, item, out)
    elif t == MAP:
        _varint(len(v.items), out)
        if v.items:
            out.append(v.key_type << 4 | v.value_type)
            for k, x in v.items:
                _write_value(v.key_type, k, out)
                _write_value(v.value_type, x, out)
    elif t == STRUCT:
        _write_struct(v, out)
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
            _zigzag(f.id, out)
        if t not in (TRUE, FALSE):
            _write_value(t, f.value, out)
        last = f.id
    out.append(0)


def write_struct(fields: list[TField]) -> bytes:
    out = bytearray()
    _write_struct(fields, out)
    return bytes(out)


def field(fields: list[TField], fid: int) -> TField | None:
    """The field with id ``fid`` of a decoded struct, or None."""
    for f in fields:
        if f.id == fid:
            return f
    return None
