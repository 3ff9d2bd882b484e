"""A compact, vectorised hash index for lookup joins (no Python objects per row).

Every key (one or more columns) is hashed to a 64-bit value with numpy, column by column, in bulk:

* integers, booleans, dates, times, timestamps, durations: the value as a 64-bit integer, mixed by
  the splitmix64 finaliser (a bijection, so one such column needs no equality check);
* floats: the IEEE bits of the float64 value (-0.0 folded into 0.0; NaN never matches);
* strings and binaries: a polynomial over the bytes (mod 2^64), then mixed with the length;
* decimals: their 16 (or 32) stored bytes, mixed word by word.

Several columns are combined by ``mix(h * GOLDEN + column_hash)``. The index is a sorted array of
hashes with the row position of each (16 bytes a row); probing is ``np.searchsorted`` for a whole
batch. Hash equality is verified against the stored key values, except for a single integer-like
column, so collisions never produce a wrong match. :func:`py_key_hash` computes the same hash for
Python values (ints, str, bytes) without Arrow, for the per-record path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, Union

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import SchemaError

__all__ = [
    "HashIndex",
    "key_kind",
    "column_hash",
    "combine_hashes",
    "py_value_hash",
    "py_combine",
    "EXACT_KINDS",
]

MASK = (1 << 64) - 1
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_P = 0x100000001B3
_SLICE = 1 << 16  # rows hashed at a time (bounds the temporary memory of string hashing)

# kinds whose single-column hash is a bijection of the value: no equality check needed
EXACT_KINDS = ("int", "uint64", "temporal")

Alloc = Callable[[int, Any], np.ndarray]  # np.empty, or SpillDir.empty for a state on disk

_pow_cache: np.ndarray = np.ones(1, dtype=np.uint64)


def _powers(n: int) -> np.ndarray:
    """``P**i mod 2**64`` for i < n (at least)."""
    global _pow_cache
    if len(_pow_cache) < n:
        size = max(n, 2 * len(_pow_cache))
        p = np.full(size, _P, dtype=np.uint64)
        p[0] = 1
        _pow_cache = np.cumprod(p, dtype=np.uint64)
    return _pow_cache


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(_M1)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(_M2)
    return x ^ (x >> np.uint64(31))


def _mix_py(x: int) -> int:
    x ^= x >> 30
    x = (x * _M1) & MASK
    x ^= x >> 27
    x = (x * _M2) & MASK
    return x ^ (x >> 31)


def key_kind(t: pa.DataType, column: str) -> str:
    """How values of Arrow type ``t`` are hashed; SchemaError for types that cannot be keys."""
    if pa.types.is_dictionary(t):
        return key_kind(t.value_type, column)
    if pa.types.is_uint64(t):
        return "uint64"
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "int"
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return "temporal"
    if pa.types.is_floating(t):
        return "float"
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "bytes"
    if pa.types.is_decimal(t):
        return "decimal"
    raise SchemaError(f"column {column!r} of type {t} cannot be a lookup key")


def _ints(a: pa.Array) -> np.ndarray:
    """Integer-like values as uint64 (two's complement), nulls as 0."""
    t = a.type
    if pa.types.is_uint64(t):
        return np.asarray(a.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.uint64)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        a = a.cast(pa.int32())
    elif not (pa.types.is_integer(t) or pa.types.is_boolean(t)):
        a = a.cast(pa.int64())
    v = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return v.view(np.uint64)


def _bytes_hash(a: pa.Array) -> np.ndarray:
    t = a.type
    if pa.types.is_fixed_size_binary(t):
        a = a.cast(pa.binary())
        t = a.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    n = len(a)
    bufs = a.buffers()
    raw = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[a.offset : a.offset + n + 1]
    off: np.ndarray = raw.astype(np.int64)
    lens = np.diff(off)
    base = int(off[0])
    total = int(off[-1]) - base
    if total <= 0:
        h = np.zeros(n, dtype=np.uint64)
    else:
        data = np.frombuffer(bufs[2], dtype=np.uint8)[base : base + total]
        starts = off[:-1] - base
        rel = np.arange(total, dtype=np.int64) - np.repeat(starts, lens)
        contrib = (data.astype(np.uint64) + np.uint64(1)) * _powers(int(lens.max()))[rel]
        cs = np.zeros(total + 1, dtype=np.uint64)
        np.cumsum(contrib, dtype=np.uint64, out=cs[1:])
        h = cs[off[1:] - base] - cs[starts]
    return _mix(h ^ _mix(lens.astype(np.uint64)))


def _decimal_hash(a: pa.Array) -> np.ndarray:
    words = a.type.byte_width // 8
    n = len(a)
    raw = np.frombuffer(a.buffers()[1], dtype=np.uint64)[a.offset * words : (a.offset + n) * words]
    w = raw.reshape(n, words)
    h = _mix(w[:, 0].copy())
    for j in range(1, words):
        h = _mix(h ^ w[:, j])
    return h


def _array_hash(a: pa.Array, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    n = len(a)
    if a.null_count:
        valid = np.asarray(a.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    else:
        valid = np.ones(n, dtype=bool)
    if kind in ("int", "uint64", "temporal"):
        return _mix(_ints(a)), valid
    if kind == "float":
        f = np.asarray(a.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        f = f + 0.0  # folds -0.0 into 0.0 (and copies)
        nan = np.isnan(f)
        if nan.any():
            valid &= ~nan
            f[nan] = 0.0
        return _mix(f.view(np.uint64)), valid
    if kind == "bytes":
        return _bytes_hash(a), valid
    if kind == "decimal":
        return _decimal_hash(a), valid
    raise SchemaError(f"cannot hash values of type {a.type}")


def column_hash(col: Union[pa.Array, pa.ChunkedArray], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(hash, valid) for every value of ``col``; invalid (null, NaN) values never match."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    hs: list[np.ndarray] = []
    vs: list[np.ndarray] = []
    for arr in chunks:
        for start in range(0, len(arr), _SLICE):
            h, v = _array_hash(arr.slice(start, _SLICE), kind)
            hs.append(h)
            vs.append(v)
    if not hs:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
    if len(hs) == 1:
        return hs[0], vs[0]
    return np.concatenate(hs), np.concatenate(vs)


def combine_hashes(hashes: Sequence[np.ndarray]) -> np.ndarray:
    h = hashes[0]
    for x in hashes[1:]:
        h = _mix(h * np.uint64(_GOLDEN) + x)
    return h


def py_combine(hashes: Sequence[int]) -> int:
    h = hashes[0]
    for x in hashes[1:]:
        h = _mix_py((h * _GOLDEN + x) & MASK)
    return h


def py_value_hash(value: object, kind: str, t: pa.DataType) -> Optional[int]:
    """The hash of one Python value, when a fast path exists (ints, str, bytes), else None.

    Returns -1 for an integer that the column cannot hold (it matches nothing)."""
    if kind == "int" and type(value) is int:
        if -(1 << 63) <= value < (1 << 63):
            return _mix_py(value & MASK)
        return -1
    if kind == "uint64" and type(value) is int:
        return _mix_py(value) if 0 <= value <= MASK else -1
    if kind == "bytes":
        if type(value) is str and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            data = value.encode("utf-8")
        elif type(value) is bytes and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            data = value
        else:
            return None
        h = 0
        for b in reversed(data):
            h = (h * _P + b + 1) & MASK
        return _mix_py(h ^ _mix_py(len(data)))
    return None


class HashIndex:
    """Sorted key hashes with the row position of each: probe with :meth:`candidates`."""

    __slots__ = ("h", "pos")

    def __init__(self, h: np.ndarray, pos: np.ndarray) -> None:
        self.h = h
        self.pos = pos

    @staticmethod
    def empty() -> HashIndex:
        return HashIndex(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))

    @staticmethod
    def build(h: np.ndarray, pos: np.ndarray) -> HashIndex:
        order = np.argsort(h, kind="stable")
        return HashIndex(h[order], pos[order])

    def __len__(self) -> int:
        return len(self.h)

    @property
    def nbytes(self) -> int:
        return int(self.h.nbytes + self.pos.nbytes)

    def candidates(self, probe: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row position) of every stored hash equal to a valid probe hash, in probe
        order (then in insertion order)."""
        lo = np.searchsorted(self.h, probe, side="left")
        hi = np.searchsorted(self.h, probe, side="right")
        cnt = hi - lo
        cnt[~valid] = 0
        total = int(cnt.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pi = np.repeat(np.arange(len(probe), dtype=np.int64), cnt)
        first = np.cumsum(cnt) - cnt
        idx = np.repeat(lo - first, cnt) + np.arange(total, dtype=np.int64)
        return pi, self.pos[idx]

    def positions(self, h: int) -> np.ndarray:
        """Row positions stored under hash ``h``."""
        x = np.uint64(h)
        lo = int(np.searchsorted(self.h, x, side="left"))
        if lo == len(self.h) or self.h[lo] != x:
            return self.pos[:0]
        return self.pos[lo : int(np.searchsorted(self.h, x, side="right"))]

    def keep(self, alive: np.ndarray, alloc: Alloc = np.empty) -> HashIndex:
        """Without the entries of dead rows (``alloc`` makes the new arrays, on disk or not)."""
        m = alive[self.pos]
        if m.all():
            return self
        n = int(np.count_nonzero(m))
        return HashIndex(
            np.compress(m, self.h, out=alloc(n, np.uint64)), np.compress(m, self.pos, out=alloc(n, np.int64))
        )

    def merged(self, h: np.ndarray, pos: np.ndarray, alloc: Alloc = np.empty) -> HashIndex:
        """With more entries: sorted, then merged in one pass (each new entry goes after the
        stored entries of an equal hash, so equal hashes stay in insertion order)."""
        if not len(h):
            return self
        order = np.argsort(h, kind="stable")
        h, pos = h[order], pos[order]
        n = len(self.h) + len(h)
        at = np.searchsorted(self.h, h, side="right") + np.arange(len(h), dtype=np.int64)
        old = np.ones(n, dtype=bool)
        old[at] = False
        hh, pp = alloc(n, np.uint64), alloc(n, np.int64)
        hh[at], pp[at] = h, pos
        hh[old], pp[old] = self.h, self.pos
        return HashIndex(hh, pp)

    def remapped(self, new_pos: np.ndarray, alloc: Alloc = np.empty) -> HashIndex:
        return HashIndex(self.h, np.take(new_pos, self.pos, out=alloc(len(self.pos), np.int64)))


class RowStore:
    """Rows as a list of record batches with their start positions: ``take`` costs what it takes.

    (``ChunkedArray.take`` in pyarrow 16 concatenates every chunk first, i.e. costs the whole table.)
    Appending adds a batch; past ``max_batches`` everything is merged into one. With a ``spill``
    (a :class:`~lakelog.operators.lookup_spill.SpillDir`) every batch is a view of a mapped file:
    appended rows are written to disk, merges and compactions stream from file to file."""

    __slots__ = ("schema", "batches", "offsets", "_arrays", "spill")

    def __init__(self, schema: pa.Schema, batches: Sequence[pa.RecordBatch] = (), spill: Any = None) -> None:
        self.schema = schema
        self.spill = spill
        self.batches = [b for b in batches if b.num_rows]
        self.offsets = np.cumsum([0] + [b.num_rows for b in self.batches], dtype=np.int64)
        self._arrays = [b.columns for b in self.batches]

    def values_at(self, pos: int, columns: Sequence[int]) -> list[object]:
        """Python values (``as_py``) of the columns at indexes ``columns`` of row ``pos``."""
        b = 0 if len(self.batches) == 1 else int(np.searchsorted(self.offsets, pos, side="right")) - 1
        arrays = self._arrays[b]
        local = pos - int(self.offsets[b])
        return [arrays[i][local].as_py() for i in columns]

    @property
    def num_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.batches)

    @staticmethod
    def _batches_of(t: pa.Table, schema: pa.Schema) -> list[pa.RecordBatch]:
        t = t.combine_chunks()
        if t.schema != schema:
            t = pa.Table.from_arrays(t.columns, schema=schema)
        return t.to_batches()

    def appended(self, t: pa.Table, max_batches: int = 64, *, on_disk: bool = False) -> RowStore:
        """With the rows of ``t`` after these (``on_disk``: ``t``'s chunks are already mapped views
        written by this store's spill, taken as they are)."""
        if on_disk:
            new = [pa.RecordBatch.from_arrays(b.columns, schema=self.schema) for b in t.to_batches()]
        else:
            new = self._batches_of(t, self.schema)
            if self.spill is not None:
                new = self.spill.batches(new, self.schema)
        batches = self.batches + new
        if len(batches) > max_batches:
            if self.spill is not None:
                batches = self.spill.batches(batches, self.schema)
            else:
                batches = self._batches_of(pa.Table.from_batches(batches, schema=self.schema), self.schema)
        return RowStore(self.schema, batches, self.spill)

    def to_disk(self, spill: Any) -> RowStore:
        """These rows written to ``spill``'s mapped files."""
        return RowStore(self.schema, spill.batches(self.batches, self.schema), spill)

    def take(self, pos: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """Rows at ``pos`` (all valid), one chunk per column."""
        sub = pa.schema([self.schema.field(c) for c in columns])
        if not len(pos) or not self.batches:
            return sub.empty_table()
        if len(self.batches) == 1:
            return pa.Table.from_batches([self.batches[0].select(columns)]).take(pa.array(pos))
        which = np.searchsorted(self.offsets, pos, side="right") - 1
        order = np.argsort(which, kind="stable")
        sw = which[order]
        bounds = np.flatnonzero(np.diff(sw)) + 1
        parts = []
        for seg in np.split(np.arange(len(order)), bounds):
            b = int(sw[seg[0]])
            local = pos[order[seg]] - self.offsets[b]
            parts.append(self.batches[b].select(columns).take(pa.array(local)))
        got = pa.Table.from_batches(parts, schema=sub).combine_chunks()
        if len(parts) == 1 or bool((np.diff(order) > 0).all()):
            return got
        inverse = np.empty(len(order), dtype=np.int64)
        inverse[order] = np.arange(len(order), dtype=np.int64)
        return got.take(pa.array(inverse))

    def take_nullable(self, pos: np.ndarray, schema: pa.Schema) -> pa.Table:
        """Rows at ``pos`` of ``schema``'s columns; -1 gives a row of nulls."""
        valid = pos >= 0
        if valid.all():
            t = self.take(pos, schema.names)
        else:
            got = self.take(pos[valid], schema.names)
            idx = np.full(len(pos), -1, dtype=np.int64)
            idx[valid] = np.arange(int(valid.sum()), dtype=np.int64)
            t = got.take(pa.array(idx, mask=~valid))
        return pa.Table.from_arrays(t.columns, schema=schema)

    def filtered(self, mask: np.ndarray, columns: Sequence[str]) -> pa.Table:
        sub = pa.schema([self.schema.field(c) for c in columns])
        parts = [
            b.select(columns).filter(pa.array(mask[int(s) : int(s) + b.num_rows]))
            for b, s in zip(self.batches, self.offsets)
        ]
        return pa.Table.from_batches(parts, schema=sub) if parts else sub.empty_table()

    def compacted(self, keep: np.ndarray) -> RowStore:
        """Only the rows at ``keep`` (sorted), in one batch (on disk: streamed file to file)."""
        if self.spill is None:
            return RowStore(self.schema, self._batches_of(self.take(keep, self.schema.names), self.schema))
        mask = np.zeros(self.num_rows, dtype=bool)
        mask[keep] = True
        return RowStore(self.schema, self.spill.batches(self._masked(mask), self.schema), self.spill)

    def _masked(self, mask: np.ndarray) -> Iterable[pa.RecordBatch]:
        for b, s in zip(self.batches, self.offsets):
            yield b.filter(pa.array(mask[int(s) : int(s) + b.num_rows]))
