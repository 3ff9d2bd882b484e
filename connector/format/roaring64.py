"""64-bit Roaring bitmaps as Paimon's ``rbm64`` values hold them: Java's ``Roaring64Bitmap.serialize``.

Paimon's ``RoaringBitmap64`` wraps the RoaringBitmap library's ``Roaring64Bitmap`` (1.2 in Paimon
1.4), run-optimises it and writes it with ``serialize(DataOutput)``: not the portable 64-bit format,
but a dump of the library's structures, which only that library reads. Its layout (all integers
little-endian):

* one byte: 0 for an empty bitmap (nothing follows), else 1;
* the *ART* (adaptive radix tree) of the values' upper 48 bits, six bytes per key, big-endian: the
  number of keys (8 bytes), then the nodes depth-first, each child after its parent in key order.
  A node: its type (one byte: 0 ``Node4``, 1 ``Node16``, 2 ``Node48``, 3 ``Node256``, 4 leaf), its
  number of children (2 bytes), its prefix length and prefix (the key bytes that all keys below it
  share after the parent's branching byte), then its body:

  - ``Node4``/``Node16``: the children's key bytes in unsigned order, in a 4-byte (16-byte)
    big-endian integer (two 8-byte ones), each written little-endian; unused bytes 0;
  - ``Node48``: 256 bytes, for each key byte the child's slot (0xFF: none), in 8-byte big-endian
    groups written little-endian; the children follow in key order and fill those slots;
  - ``Node256``: a 256-bit mask of the key bytes present (bit ``b`` of 8-byte word ``w``: key byte
    ``64 w + b``);
  - leaf: the full six key bytes and its container's index (8 bytes: first level << 32 | second);

* the containers of the values' lower 16 bits: the number of first-level arrays (4 bytes); each a
  mark byte (-2), its length (4 bytes) and per slot a byte (0: empty; 1: a container follows: its
  kind, 0 runs, 1 bitmap, 2 array, its cardinality in 4 bytes and its body as in the 32-bit
  portable format, see :func:`lakelog.connector.format.roaring.containers`); then the number of
  containers (8 bytes) and the last first- and second-level index used (4 bytes each).

lakelog writes a path-compressed tree (a node type by its number of children, leaves as high as
their key is unique, as the library's insertions build it by its code) with the containers in key
order, run-optimised as Paimon writes them, and reads any such dump. The bytes are not compared
with the library's own (Paimon's merge re-serialises what it read, with new containers appended);
the interop tests check that each side reads and unites the other's values. The values are
Java ``long``s; the library orders them as unsigned numbers.
"""

from __future__ import annotations

import struct

import numpy as np

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.roaring import ARRAY, BITMAP, RUN, container_kinds, containers, read_container

__all__ = ["encode_roaring64", "decode_roaring64"]

_NODE4, _NODE16, _NODE48, _NODE256, _LEAF = range(5)
_BODY_SIZE = {_NODE4: 4, _NODE16: 16, _NODE48: 256, _NODE256: 32, _LEAF: 6 + 8}
_KIND_CODE = {RUN: 0, BITMAP: 1, ARRAY: 2}
_CODE_KIND = {v: k for k, v in _KIND_CODE.items()}
_NOT_TRIMMED = -2
_KEY_BYTES = 6


def encode_roaring64(values: np.ndarray) -> bytes:
    """The ``Roaring64Bitmap`` dump of a set of Java ``long`` values (any order, repeats allowed)."""
    v = np.unique(np.asarray(values, dtype=np.int64).view(np.uint64))  # the library's unsigned order
    if not len(v):
        return b"\x00"
    keys, cards, as_run, bodies = containers(v, run_optimize=True)
    n = len(keys)
    key_bytes = (keys << np.uint64(16)).astype(">u8").view(np.uint8).reshape(n, 8)[:, :_KEY_BYTES]
    out = bytearray(b"\x01")
    out += struct.pack("<q", n)
    _write_node(out, key_bytes, 0, n, 0)
    out += struct.pack("<ibi", 1, _NOT_TRIMMED, n)
    for kind, card, body in zip(container_kinds(cards, as_run), cards.tolist(), bodies):
        out += struct.pack("<bbi", 1, _KIND_CODE[kind], card)
        out += body
    out += struct.pack("<qii", n, 0, n - 1)
    return bytes(out)


def _write_node(out: bytearray, keys: np.ndarray, lo: int, hi: int, depth: int) -> None:
    """The subtree of the sorted, distinct keys ``keys[lo:hi]`` below ``depth`` key bytes; a key's
    container is the one at its own index (containers are written in key order)."""
    if hi - lo == 1:
        out += struct.pack("<bhb", _LEAF, 0, 0)
        out += keys[lo].tobytes()
        out += struct.pack("<q", lo)
        return
    first, last = keys[lo], keys[hi - 1]
    shared = depth
    while first[shared] == last[shared]:  # sorted: what the first and last share, all share
        shared += 1
    branch = keys[lo:hi, shared]
    child_keys, child_starts = np.unique(branch, return_index=True)
    count = len(child_keys)
    kind = _NODE4 if count <= 4 else _NODE16 if count <= 16 else _NODE48 if count <= 48 else _NODE256
    out += struct.pack("<bhb", kind, count, shared - depth)
    out += first[depth:shared].tobytes()
    if kind in (_NODE4, _NODE16):
        slots = np.zeros(_BODY_SIZE[kind], dtype=np.uint8)
        slots[:count] = child_keys
        # big-endian integers of 4 (8) key bytes, each written little-endian
        width = 4 if kind == _NODE4 else 8
        out += slots.reshape(-1, width)[:, ::-1].tobytes()
    elif kind == _NODE48:
        slots = np.full(256, 0xFF, dtype=np.uint8)
        slots[child_keys] = np.arange(count, dtype=np.uint8)
        out += slots.reshape(32, 8)[:, ::-1].tobytes()
    else:
        present = np.zeros(256, dtype=bool)
        present[child_keys] = True
        out += np.packbits(present, bitorder="little").tobytes()
    ends = np.append(child_starts[1:], hi - lo)
    for s, e in zip(child_starts.tolist(), ends.tolist()):
        _write_node(out, keys, lo + s, lo + e, shared + 1)


def decode_roaring64(data: bytes, where: str, what: str = "the value") -> tuple[np.ndarray, int]:
    """(the values as ``int64``, in the library's unsigned order; the bytes read) of a
    ``Roaring64Bitmap`` dump at the start of ``data``; a malformed one raises
    :class:`CorruptFileError` naming ``what`` and ``where``."""
    try:
        return _decode(memoryview(data))
    except (struct.error, ValueError, IndexError, KeyError) as e:
        raise CorruptFileError(f"{what} in {where} is not a serialized Roaring64Bitmap: {e}") from None


def _decode(buf: memoryview) -> tuple[np.ndarray, int]:
    if buf[0] == 0:
        return np.empty(0, dtype=np.int64), 1
    if buf[0] != 1:
        raise ValueError(f"first byte {buf[0]}, expected 0 or 1")
    (n_keys,) = struct.unpack_from("<q", buf, 1)
    leaves: list[tuple[bytes, int]] = []
    at = 9
    pending = 1  # nodes still to read, depth-first
    while pending:
        kind, count, prefix = struct.unpack_from("<bhb", buf, at)
        if kind not in _BODY_SIZE or count < 0 or prefix < 0:
            raise ValueError(f"bad ART node at byte {at} (type {kind}, {count} children)")
        at += 4 + prefix
        if kind == _LEAF:
            leaves.append((bytes(buf[at:at + _KEY_BYTES]), struct.unpack_from("<q", buf, at + _KEY_BYTES)[0]))
        else:
            pending += count
        at += _BODY_SIZE[kind]
        pending -= 1
        if len(leaves) > n_keys:
            break
    if len(leaves) != n_keys:
        raise ValueError(f"the tree holds {len(leaves)} keys, its header says {n_keys}")
    (first_level,) = struct.unpack_from("<i", buf, at)
    at += 4
    held: dict[int, np.ndarray] = {}
    for i in range(first_level):
        _mark, second_level = struct.unpack_from("<bi", buf, at)
        at += 5
        for j in range(second_level):
            if buf[at] == 0:
                at += 1
                continue
            if buf[at] != 1:
                raise ValueError(f"bad container mark {buf[at]} at byte {at}")
            code, card = struct.unpack_from("<bi", buf, at + 1)
            low, at = read_container(buf, at + 6, _CODE_KIND[code], card)
            if len(low) != card:
                raise ValueError(f"a container says it holds {card} values and holds {len(low)}")
            held[(i << 32) | j] = low
    at += 16  # the number of containers and the last indexes used
    if at > len(buf):
        raise ValueError("truncated")
    parts = []
    previous = b""
    for key, index in leaves:
        if key <= previous:  # a tree lists its leaves in key order
            raise ValueError(f"the tree's keys are out of order at {key.hex()}")
        previous = key
        base = np.uint64(int.from_bytes(key + b"\x00\x00", "big"))
        parts.append(base + held[index])
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return out.view(np.int64), at
