"""Row events and per-key reductions shared by the merge engines and aggregate functions, plus
Arrow/numpy array helpers (see :mod:`lakelog.connector.lsm.merge.engine`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.format.key_value import RowKind
from lakelog.connector.lsm.kv import group_ends

__all__: list[str] = []  # internal: used by the other merge modules


# --------------------------------------------------------------------------------------------------
# Row events and per-key reductions
# --------------------------------------------------------------------------------------------------

SKIP = 0  # the row does not touch the field
AGG = 1  # agg(acc, input)
AGG_REV = 2  # aggReversed(acc, input) = agg(input, acc): a row older than the sequence group's state
RETRACT = 3  # retract(acc, input)
SET = 4  # acc := input, aggregator state untouched (Paimon's initRow after a record removal)

_INSERT_KINDS = (RowKind.INSERT, RowKind.UPDATE_AFTER)


@dataclass
class MergeContext:
    """The key groups of a sorted merge input and the segment each row belongs to.

    ``final`` marks the rows at and after the last record reset of their key (the only rows that
    shape the result, apart from stateful aggregators); ``reset`` marks rows that reset the
    accumulator row (Paimon's ``row = new GenericRow(); initRow(row, kv.value())``).
    """

    n: int
    g: int
    gid: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    final: np.ndarray
    reset: np.ndarray
    fstart: np.ndarray  # first row of the final segment of each key

    @staticmethod
    def build(table: pa.Table, keys: Sequence[str]) -> MergeContext:
        n = table.num_rows
        last = _group_ends(table, keys)
        ends = np.flatnonzero(last).astype(np.int64) + 1
        starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
        gid = np.repeat(np.arange(len(ends), dtype=np.int64), ends - starts)
        return MergeContext(n, len(ends), gid, starts, ends, np.ones(n, dtype=bool), np.zeros(n, dtype=bool),
                    starts.copy())

    def set_resets(self, reset: np.ndarray) -> None:
        self.reset = reset
        if not reset.any():
            self.fstart = self.starts.copy()
            self.final = np.ones(self.n, dtype=bool)
            return
        last_reset = self.last(reset)
        self.fstart = np.where(last_reset >= 0, last_reset, self.starts)
        self.final = np.arange(self.n, dtype=np.int64) >= self.fstart[self.gid]

    # ---- per-key reductions over a row mask (row indices; -1 where no row qualifies) --------------
    # Every key has at least one row, so ufunc.reduceat over the key starts covers each key exactly.

    def first(self, mask: np.ndarray) -> np.ndarray:
        big = np.int64(self.n)
        pos = np.minimum.reduceat(np.where(mask, np.arange(self.n, dtype=np.int64), big), self.starts)
        return np.where(pos < big, pos, -1)

    def first_after(self, mask: np.ndarray, after: np.ndarray) -> np.ndarray:
        """First masked row strictly after ``after[g]`` (-1 or before the key: from its start)."""
        rows = np.arange(self.n, dtype=np.int64)
        return self.first(mask & (rows > after[self.gid]))

    def last(self, mask: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(np.where(mask, np.arange(self.n, dtype=np.int64), -1), self.starts)

    def any(self, mask: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(mask, self.starts)

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.add.reduceat(mask.astype(np.int64), self.starts)

    def reduce(self, ufunc: np.ufunc, values: np.ndarray, mask: np.ndarray, identity: Any) -> np.ndarray:
        """``ufunc`` over the masked values of each key (identity for keys without masked rows)."""
        return ufunc.reduceat(np.where(mask, values, np.asarray(identity, dtype=values.dtype)), self.starts)


def _group_ends(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Last row of each run of equal keys; numpy for integer keys, else kv.group_ends."""
    n = table.num_rows
    cols = [table.column(k) for k in keys]
    if n > 1 and all(is_int_like(c.type) and c.null_count == 0 for c in cols):
        last = np.ones(n, dtype=bool)
        change = np.zeros(n - 1, dtype=bool)
        for c in cols:
            v = int_values(c.combine_chunks())
            change |= v[1:] != v[:-1]
        last[:-1] = change
        return last
    return group_ends(table, keys)


def valid_mask(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def take_or_null(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` with nulls where ``idx`` is -1."""
    neg = idx < 0
    if neg.any():
        return arr.take(pa.array(np.where(neg, 0, idx), mask=neg))
    return arr.take(pa.array(idx))


def sequential_accumulate(ufunc: np.ufunc, values: np.ndarray, gid: np.ndarray, g: int,
                           pad: Any) -> np.ndarray:
    """Left fold of ``ufunc`` over the values of each key in order (``values``/``gid`` already masked).

    Floating-point sums must add in row order, as Paimon adds one row at a time; numpy's
    ``add.reduceat`` adds pairwise. Short keys are folded position by position (vectorised across
    keys); long keys are bucketed by length into matrices padded with the identity ``pad`` and folded
    with ``ufunc.accumulate`` along the rows.
    """
    out = np.full(g, pad, dtype=values.dtype)
    if len(values) == 0:
        return out
    counts = np.bincount(gid, minlength=g)
    present = np.flatnonzero(counts)
    lengths = counts[present]
    seg_start = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    short = lengths <= 32
    if short.any():
        sel, st, ln = present[short], seg_start[short], lengths[short]
        acc = values[st].copy()
        active = np.flatnonzero(ln > 1)
        k = 1
        while len(active):
            acc[active] = ufunc(acc[active], values[st[active] + k])
            k += 1
            active = active[ln[active] > k]
        out[sel] = acc
    long_ = np.flatnonzero(~short)
    if len(long_):
        width_class = np.ceil(np.log2(lengths[long_])).astype(np.int64)
        for wc in np.unique(width_class):
            sel = long_[width_class == wc]
            width = int(1 << int(wc))
            cols = np.arange(width, dtype=np.int64)
            idx = seg_start[sel][:, None] + cols[None, :]
            inside = cols[None, :] < lengths[sel][:, None]
            mat = np.where(inside, values[np.where(inside, idx, 0)], pad).astype(values.dtype)
            out[present[sel]] = ufunc.accumulate(mat, axis=1)[:, -1]
    return out


def final_positions(ctx: MergeContext, groups: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Row positions of the final segments of ``groups``, one position at a time.

    Yields ``(active, rows)``: indices into ``groups`` of the keys that still have rows, and the row
    at the current position of each. Used by the few folds that cannot be expressed in closed form;
    the Python loop runs over positions (the longest key), not over rows.
    """
    lo = ctx.fstart[groups]
    lengths = ctx.ends[groups] - lo
    order = np.argsort(-lengths, kind="stable")
    neg_len = -lengths[order]
    lo = lo[order]
    for k in range(int(lengths.max()) if len(lengths) else 0):
        na = int(np.searchsorted(neg_len, -k, side="left"))
        yield order[:na], lo[:na] + k


# --------------------------------------------------------------------------------------------------
# Arrow <-> numpy helpers
# --------------------------------------------------------------------------------------------------


def is_int_like(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t)
            or pa.types.is_timestamp(t) or pa.types.is_duration(t))


def _storage_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(t):
        return t
    return pa.int32() if t.bit_width == 32 else pa.int64()


def _raw_values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """The value buffer of a fixed-width array (whatever bytes sit under nulls; callers mask them)."""
    dt = np.dtype(dtype)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), dtype=dt)
    return np.frombuffer(buf, dtype=dt, count=arr.offset + len(arr))[arr.offset:]


def int_values(arr: pa.Array) -> np.ndarray:
    """Integer-like values as int64 (values under nulls are arbitrary)."""
    st = _storage_type(arr.type)
    return _raw_values(arr, st.to_pandas_dtype()).astype(np.int64)


def float_values(arr: pa.Array) -> np.ndarray:
    """Floating-point values in their own width (values under nulls are arbitrary)."""
    return _raw_values(arr, arr.type.to_pandas_dtype()).copy()


def bool_values(arr: pa.Array) -> np.ndarray:
    a = arr.fill_null(False) if arr.null_count else arr
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


def array_from_ints(values: np.ndarray, null: np.ndarray, t: pa.DataType) -> pa.Array:
    st = _storage_type(t)
    arr = pa.array(values.astype(st.to_pandas_dtype()), type=st, mask=null)
    return arr if st == t else arr.view(t)


def array_from_floats(values: np.ndarray, null: np.ndarray, t: pa.DataType) -> pa.Array:
    return pa.array(values.astype(t.to_pandas_dtype()), type=t, mask=null)


def float_from_order_key(k: np.ndarray, dtype: np.dtype) -> np.ndarray:
    bits = np.where(k < 0, k ^ np.int64(0x7FFFFFFFFFFFFFFF), k)
    return bits.view(np.float64).astype(dtype)


def list_array(t: pa.DataType, offsets: np.ndarray, child: pa.Array, null: np.ndarray) -> pa.Array:
    """A list / large list / map array of type ``t`` from offsets, its child array and a null mask."""
    n = len(offsets) - 1
    large = pa.types.is_large_list(t)
    off = pa.array(offsets.astype(np.int64 if large else np.int32))
    validity = pa.array(~null).buffers()[1] if null.any() else None
    return pa.Array.from_buffers(t, n, [validity, off.buffers()[1]], null_count=int(null.sum()),
                                 children=[child])


def is_blank(arr: pa.Array) -> np.ndarray:
    """Java ``StringUtils.isBlank``: null, empty or only whitespace."""
    if len(arr) == 0:
        return np.zeros(0, dtype=bool)
    stripped = pc.utf8_trim_whitespace(arr)
    blank = pc.fill_null(pc.equal(pc.utf8_length(stripped), 0), True)
    return np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool)

