"""Avro's binary encoding and object container files, as far as manifests need them: zig-zag
varints, block compression (null, deflate, snappy, zstandard, bzip2, xz), the file header with its
metadata and sync marker, and a writer of blocks. Decoding of foreign layouts goes through fastavro.
"""

from __future__ import annotations

import bz2
import functools
import io
import json
import lzma
import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import fastavro

from lakelog.connector.errors import OptionError

__all__ = [
    "avro_codec",
    "encode_long",
    "read_long",
    "ContainerWriter",
    "decode_file",
    "schema_shape",
    "strip_logical_types",
]

# Uncompressed bytes per Avro block (Avro's default sync interval).
_BLOCK_BYTES = 64000
_AVRO_MAGIC = b"Obj\x01"




def _varlong(n: int) -> bytes:
    """Zig-zag variable-length encoding of an Avro int or long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [_varlong(i) for i in range(1 << 14)]


def encode_long(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 16384 else _varlong(n)


def read_long(d: bytes, p: int) -> tuple[int, int]:
    b = d[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    acc = b & 0x7F
    shift = 7
    p += 1
    while True:
        b = d[p]
        p += 1
        acc |= (b & 0x7F) << shift
        if b < 0x80:
            return (acc >> 1) ^ -(acc & 1), p
        shift += 7
        if shift > 63:
            raise ValueError(f"malformed varint at byte {p}")


@functools.cache
def _zstd() -> Any:
    """A module with ``compress``/``decompress`` for zstd, or None."""
    try:
        from compression import zstd  # type: ignore[import-not-found]

        return zstd
    except ImportError:
        pass
    try:
        from backports import zstd  # type: ignore[import-not-found,no-redef]

        return zstd
    except ImportError:
        return None


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "zstandard":
        return bytes(_zstd().compress(data))
    if codec == "bzip2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data)
    raise OptionError(f"unsupported Avro codec {codec!r} for option 'manifest.compression'")


def avro_codec(compression: str) -> str:
    """Map a Paimon ``manifest.compression`` value to the Avro codec written.

    ``zstd`` (Paimon's default) becomes Avro's ``zstandard``; without a zstd module
    (``backports.zstd`` before Python 3.14) it falls back to ``deflate``.
    """
    lower = compression.strip().lower()
    if lower in ("zstd", "zstandard"):
        return "zstandard" if _zstd() is not None else "deflate"
    if lower in ("null", "none", "uncompressed"):
        return "null"
    if lower in ("deflate", "bzip2", "xz"):
        return lower
    raise OptionError(
        f"unsupported value {compression!r} for option 'manifest.compression' "
        "(supported: zstd, deflate, bzip2, xz, none)"
    )


def _parse_header(data: bytes) -> tuple[dict[str, bytes], bytes, int]:
    """Split an Avro container file into (metadata, sync marker, offset of the first block)."""
    if data[:4] != _AVRO_MAGIC:
        raise ValueError("not an Avro object container file (bad magic)")
    pos = 4
    meta: dict[str, bytes] = {}
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            _size, pos = read_long(data, pos)
        for _ in range(count):
            klen, pos = read_long(data, pos)
            key = data[pos : pos + klen].decode()
            pos += klen
            vlen, pos = read_long(data, pos)
            meta[key] = data[pos : pos + vlen]
            pos += vlen
    sync = data[pos : pos + 16]
    if len(sync) != 16:
        raise ValueError("truncated Avro header")
    if "avro.schema" not in meta:
        raise ValueError("Avro header has no schema")
    return meta, sync, pos + 16


def _encode_header(meta: Mapping[str, bytes], sync: bytes) -> bytes:
    out = bytearray(_AVRO_MAGIC)
    out += encode_long(len(meta))
    for key, value in meta.items():
        kb = key.encode()
        out += encode_long(len(kb)) + kb + encode_long(len(value)) + value
    out += b"\x00" + sync
    return bytes(out)


class ContainerWriter:
    """Collects encoded records into compressed Avro blocks of one container file."""

    def __init__(self, schema_json: bytes, codec: str) -> None:
        self.codec = codec
        self.sync = os.urandom(16)
        self.parts: list[bytes] = [
            _encode_header({"avro.codec": codec.encode(), "avro.schema": schema_json}, self.sync)
        ]
        self.size = len(self.parts[0])
        self.pending: list[bytes] = []
        self.pending_size = 0

    def add(self, record: bytes) -> None:
        self.pending.append(record)
        self.pending_size += len(record)
        if self.pending_size >= _BLOCK_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        body = _compress(self.codec, b"".join(self.pending))
        block = b"".join((encode_long(len(self.pending)), encode_long(len(body)), body, self.sync))
        self.parts.append(block)
        self.size += len(block)
        self.pending = []
        self.pending_size = 0

    def finish(self) -> bytes:
        self.flush()
        return b"".join(self.parts)


def decode_file(
    data: bytes, shape: Any, key_field: str, fast: Callable[[bytes, int], list[Any]] | None
) -> tuple[list[Any], bool]:
    """Decode an Avro container file: (values, True) through ``fast`` when the writer schema has
    exactly ``shape``, else (fastavro record dicts, False)."""
    meta, sync, body = _parse_header(data)
    if meta.get("avro.codec") == b"zstandard" and _zstd() is None:
        raise ValueError("the file uses Avro codec 'zstandard': install backports.zstd to read it")
    schema = json.loads(meta["avro.schema"])
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError(f"writer schema is not a record: {str(schema)[:80]}")
    if key_field not in {f.get("name") for f in schema.get("fields", [])}:
        raise ValueError(f"writer schema {schema.get('name')!r} has no field {key_field}")
    if fast is not None and schema_shape(schema) == shape:
        out: list[Any] = []
        for block in fastavro.block_reader(io.BytesIO(data)):
            raw = block.bytes_.getvalue()  # type: ignore[attr-defined]
            out.extend(fast(raw, block.num_records))
        return out, True
    plain = strip_logical_types(schema)
    if plain != schema:
        meta = dict(meta)
        meta["avro.schema"] = json.dumps(plain).encode()
        data = _encode_header(meta, sync) + data[body:]
    return list(fastavro.reader(io.BytesIO(data))), False


def strip_logical_types(schema: Any) -> Any:
    """The same schema with every ``logicalType`` annotation dropped (same binary encoding)."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        if "logicalType" in schema:
            return strip_logical_types(schema["type"])
        return {k: strip_logical_types(v) for k, v in schema.items()}
    return schema


def schema_shape(schema: Any) -> Any:
    """The binary layout of a schema: field names and types, without names, docs or logical types."""
    if isinstance(schema, str):
        return "int" if schema == "long" else schema  # int and long share one encoding
    if isinstance(schema, list):
        return tuple(schema_shape(s) for s in schema)
    if isinstance(schema, dict):
        t = schema.get("type")
        if t == "record":
            fields = schema.get("fields", [])
            return ("record", tuple((f.get("name"), schema_shape(f.get("type"))) for f in fields))
        if t == "array":
            return ("array", schema_shape(schema.get("items")))
        if t in ("map", "enum", "fixed"):
            return (t, json.dumps(schema, sort_keys=True))
        return schema_shape(t)
    return repr(schema)
