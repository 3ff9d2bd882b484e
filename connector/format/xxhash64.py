"""XXH64 (seed 0) of every value of an Arrow binary or string array, vectorised with numpy.

Paimon's bloom-filter file index hashes strings and binaries with XXH64 (``LongHashFunction.xx()``
of zero-allocation-hashing, seed 0), so lakelog must produce the same 64-bit values. The algorithm
is the published XXH64 (Yann Collet's specification): values are processed together, a column of
8-byte lanes at a time, and values of very different lengths in separate groups, so memory stays
about the size of the group's bytes. Arithmetic is modulo 2**64 (numpy's unsigned wraparound).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["xxh64_array"]

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_GROUP_BYTES = 32 << 20  # padded bytes of one group of values hashed together


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


def _merge(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    h = h ^ _round(np.zeros_like(v), v)
    return h * _P1 + _P4


def xxh64_array(values: pa.Array) -> np.ndarray:
    """The XXH64 of each value (``uint64``); nulls hash as empty values (callers skip them)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
    if pa.types.is_fixed_size_binary(values.type):
        width = values.type.byte_width
        data = np.frombuffer(values.buffers()[1], dtype=np.uint8)[values.offset * width :]
        offsets = np.arange(len(values) + 1, dtype=np.int64) * width
    else:
        large = pa.types.is_large_binary(values.type)
        bufs = values.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[
            values.offset : values.offset + len(values) + 1
        ].astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lengths = offsets[1:] - offsets[:-1]
    out = np.empty(len(values), dtype=np.uint64)
    if not len(values):
        return out
    # group values by length, so that padding each to its group's longest value stays small
    order = np.argsort(lengths, kind="stable")
    sorted_len = lengths[order]
    start, n = 0, len(order)
    while start < n:
        lo, hi = start + 1, n  # the largest end whose padded size fits the budget (at least one row)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if (mid - start) * max(int(sorted_len[mid - 1]), 8) <= _GROUP_BYTES:
                lo = mid
            else:
                hi = mid - 1
        idx = order[start:lo]
        out[idx] = _hash_group(data, offsets[idx], lengths[idx], int(sorted_len[lo - 1]))
        start = lo
    return out


def _hash_group(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """XXH64 of the values at ``starts`` with ``lengths`` (all at most ``width`` bytes)."""
    n = len(starts)
    padded = (width + 8) // 8 * 8
    mat = np.zeros((n, padded), dtype=np.uint8)
    # the group is sorted by length: the values that have a byte at column c are a suffix
    first = np.searchsorted(lengths, np.arange(1, width + 1), side="left")
    for c in range(width):
        mat[first[c] :, c] = data[starts[first[c] :] + c]
    lanes8 = mat.view("<u8")  # n x (padded / 8)
    ln = lengths.astype(np.uint64)
    h = np.full(n, _P5, dtype=np.uint64)  # values shorter than 32 bytes
    stripes = lengths // 32
    long_rows = stripes > 0
    with np.errstate(over="ignore"):
        if long_rows.any():
            rows = np.flatnonzero(long_rows)
            v1 = np.full(len(rows), _P1 + _P2, dtype=np.uint64)
            v2 = np.full(len(rows), _P2, dtype=np.uint64)
            v3 = np.zeros(len(rows), dtype=np.uint64)
            v4 = np.full(len(rows), np.uint64(0) - _P1, dtype=np.uint64)
            for s in range(int(stripes.max())):
                live = stripes[rows] > s
                sel = rows[live]
                base = s * 4
                v1[live] = _round(v1[live], lanes8[sel, base])
                v2[live] = _round(v2[live], lanes8[sel, base + 1])
                v3[live] = _round(v3[live], lanes8[sel, base + 2])
                v4[live] = _round(v4[live], lanes8[sel, base + 3])
            acc = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                acc = _merge(acc, v)
            h[rows] = acc
        h = h + ln
        # the tail after the 32-byte stripes: 8-byte lanes, then one 4-byte word, then bytes
        done = stripes * 32
        rest = lengths - done
        for k in range(3):  # at most three 8-byte lanes remain
            live = rest >= 8 * (k + 1)
            if not live.any():
                break
            lane_idx = (done[live] // 8) + k
            lane = lanes8[np.flatnonzero(live), lane_idx]
            hk = h[live] ^ _round(np.zeros(int(live.sum()), dtype=np.uint64), lane)
            h[live] = _rotl(hk, 27) * _P1 + _P4
        done = done + (rest // 8) * 8
        rest = lengths - done
        live = rest >= 4
        if live.any():
            rows = np.flatnonzero(live)
            pos = done[live]
            word = (
                mat[rows, pos].astype(np.uint64)
                | (mat[rows, pos + 1].astype(np.uint64) << np.uint64(8))
                | (mat[rows, pos + 2].astype(np.uint64) << np.uint64(16))
                | (mat[rows, pos + 3].astype(np.uint64) << np.uint64(24))
            )
            hk = h[live] ^ (word * _P1)
            h[live] = _rotl(hk, 23) * _P2 + _P3
            done = done + live * 4
        rest = lengths - done
        for k in range(3):  # at most three single bytes remain
            live = rest > k
            if not live.any():
                break
            rows = np.flatnonzero(live)
            byte = mat[rows, done[live] + k].astype(np.uint64)
            hk = h[live] ^ (byte * _P5)
            h[live] = _rotl(hk, 11) * _P1
        h = h ^ (h >> np.uint64(33))
        h = h * _P2
        h = h ^ (h >> np.uint64(29))
        h = h * _P3
        h = h ^ (h >> np.uint64(32))
    return h
