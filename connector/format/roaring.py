"""32-bit Roaring bitmaps in the portable serialization (the RoaringFormatSpec), held as numpy arrays.

The format is what Java's ``org.roaringbitmap.RoaringBitmap`` and CRoaring read and write: the
values' upper 16 bits select a *container*, which holds the lower 16 bits as a sorted array (at most
4,096 values), a 65,536-bit bitmap, or a list of runs. lakelog holds a bitmap as a sorted, unique
numpy array and converts at the edges:

* Paimon's deletion vectors and bitmap file indexes are written with array and bitmap containers
  only, as Paimon writes them (``run_optimize=False``);
* the values of the ``rbm32`` aggregate function are written as Paimon's ``RoaringBitmap32`` writes
  them: run-optimised, so a container becomes a list of runs whenever that is strictly smaller
  (``run_optimize=True``).

Every reader here accepts all three container kinds.
"""

from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from lakelog.connector.errors import CorruptFileError

__all__ = ["encode_roaring32", "decode_roaring32", "containers", "container_kinds", "read_container"]

_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4  # with run containers, fewer containers than this have no offset header
_ARRAY_MAX = 4096  # containers of more values are bitmaps
_BITMAP_BYTES = 8192


def encode_roaring32(positions: np.ndarray, *, run_optimize: bool = False) -> bytes:
    """The portable Roaring serialization of sorted, unique values below 2**32."""
    pos = np.asarray(positions, dtype=np.uint32)
    keys, cards, as_run, bodies = containers(pos.astype(np.uint64), run_optimize=run_optimize)
    n = len(keys)
    desc = np.empty(2 * n, dtype="<u2")
    desc[0::2] = keys
    desc[1::2] = cards - 1
    if as_run.any():
        flags = np.packbits(as_run, bitorder="little").tobytes()
        header = struct.pack("<I", _COOKIE_RUNS | ((n - 1) << 16)) + flags
        with_offsets = n >= _NO_OFFSET_THRESHOLD
    else:
        header = struct.pack("<II", _COOKIE_NO_RUNS, n)
        with_offsets = True
    offsets = b""
    if with_offsets:
        first_body = len(header) + 4 * n + 4 * n
        sizes = np.array([len(b) for b in bodies], dtype=np.int64)
        offsets = (first_body + np.concatenate([[0], np.cumsum(sizes)[:-1]]) if n else np.empty(0)).astype(
            "<u4").tobytes()
    return header + desc.tobytes() + offsets + b"".join(bodies)


def containers(
    values: np.ndarray, *, run_optimize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
    """The Roaring containers of sorted, unique ``uint64`` values: (each container's key, the values
    above the lower 16 bits; its cardinality; whether it is a list of runs; its body). A body is an
    array of the lower 16 bits (at most 4,096 values), a 65,536-bit bitmap, or, with
    ``run_optimize`` and where strictly smaller, ``<count> (<start> <length - 1>)*``; all
    little-endian, the same bytes in the 32-bit portable format and Java's 64-bit containers."""
    high = values >> np.uint64(16)
    keys, starts = np.unique(high, return_index=True)
    ends = np.append(starts[1:], len(values)).astype(np.int64)
    n = len(keys)
    cards = (ends - starts).astype(np.int64)
    low_all = (values & np.uint64(0xFFFF)).astype(np.int64)
    # runs per container: a run starts wherever a value is not its predecessor + 1
    run_start = np.ones(len(values), dtype=bool)
    if len(values) > 1:
        run_start[1:] = low_all[1:] != low_all[:-1] + 1
    run_start[starts] = True
    nruns = np.add.reduceat(run_start.astype(np.int64), starts) if n else np.zeros(0, np.int64)
    plain_size = np.where(cards > _ARRAY_MAX, _BITMAP_BYTES, 2 * cards)
    as_run = run_optimize & ((2 + 4 * nruns) < plain_size)
    bodies = []
    for i, (s, e) in enumerate(zip(starts, ends)):
        low = low_all[s:e]
        if as_run[i]:
            first = np.flatnonzero(run_start[s:e])
            lengths = np.diff(np.append(first, e - s))
            pairs = np.empty(2 * len(first), dtype="<u2")
            pairs[0::2] = low[first]
            pairs[1::2] = lengths - 1
            bodies.append(struct.pack("<H", len(first)) + pairs.tobytes())
        elif e - s > _ARRAY_MAX:
            bits = np.zeros(1 << 16, dtype=bool)
            bits[low] = True
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            bodies.append(low.astype("<u2").tobytes())
    return keys, cards, np.asarray(as_run, dtype=bool), bodies


def decode_roaring32(data: bytes, where: str, what: str = "deletion vector") -> tuple[np.ndarray, int]:
    """(values as sorted ``uint64``, bytes read) of a portable Roaring bitmap at the start of
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
    kinds = container_kinds(cards, runs if runs is not None else np.zeros(n, dtype=bool))
    for i, kind in enumerate(kinds):
        low, at = read_container(buf, at, kind, int(cards[i]))
        parts.append((keys[i] << np.uint64(16)) + low)
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return out, at


RUN, BITMAP, ARRAY = "run", "bitmap", "array"


def container_kinds(cards: np.ndarray, as_run: np.ndarray) -> list[str]:
    """Each container's kind: its run flag, else a bitmap above 4,096 values, else an array."""
    return [RUN if run else BITMAP if card > _ARRAY_MAX else ARRAY
            for card, run in zip(np.asarray(cards).tolist(), np.asarray(as_run).tolist())]


def read_container(buf: memoryview, at: int, kind: str, card: int) -> tuple[np.ndarray, int]:
    """(the lower 16 bits it holds, as sorted ``uint64``; the offset after it) of the container body
    at ``at`` (the layouts of :func:`containers`)."""
    if kind == RUN:
        (count,) = struct.unpack_from("<H", buf, at)
        pairs = np.frombuffer(buf, dtype="<u2", count=2 * count, offset=at + 2).astype(np.int64)
        at += 2 + 4 * count
        starts, lengths = pairs[0::2], pairs[1::2] + 1
        total = int(lengths.sum())
        # each run start..start+length-1, without a Python loop over the runs
        offs = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        low = np.repeat(starts, lengths) + offs
    elif kind == BITMAP:
        bits = np.frombuffer(buf, dtype=np.uint8, count=_BITMAP_BYTES, offset=at)
        at += _BITMAP_BYTES
        low = np.flatnonzero(np.unpackbits(bits, bitorder="little"))
    else:
        low = np.frombuffer(buf, dtype="<u2", count=card, offset=at)
        at += 2 * card
    return low.astype(np.uint64), at
