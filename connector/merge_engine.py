"""Merge engines of primary-key tables, vectorised over Arrow.

A merge takes the rows of one or more sorted runs of a bucket, sorted by key, then by the engine's
``order_by`` columns (``sequence.field``), then by ``_SEQUENCE_NUMBER`` (see :func:`sort_for_merge`),
and returns one row per key. The engines follow Apache Paimon's merge functions:

* ``deduplicate``: the last row wins; a winning ``-U``/``-D`` removes the key. ``ignore-delete``
  drops ``-U``/``-D`` input rows first.
* ``partial-update``: the latest non-null value of each field; ``fields.<seq>.sequence-group``
  guards a group of fields by sequence field(s) (a true partial update: nulls overwrite, retractions
  clear the group's fields, aggregate functions inside groups); deletes need ``ignore-delete``,
  ``partial-update.remove-record-on-delete`` or sequence groups
  (``partial-update.remove-record-on-sequence-group``).
* ``aggregation``: ``fields.<f>.aggregate-function`` (default ``fields.default-aggregate-function``,
  else ``last_non_null_value``) with retraction where Paimon allows it,
  ``fields.<f>.ignore-retract`` and ``aggregation.remove-record-on-delete``.
* ``first-row``: the first row wins; ``-U``/``-D`` need ``ignore-delete``.

Everything is computed per column with numpy / pyarrow.compute over all keys at once. Paimon's
merge functions fold the rows of a key one at a time (``add``); here every fold is expressed through
per-row *events* (aggregate, aggregate an older row, retract, set the accumulator) and per-key
"find the deciding row" reductions, so the result equals Paimon's fold without a per-row loop.
A few rare combinations fold sequentially over row positions (vectorised across keys): ``product``
with retractions or on DECIMAL, ``count`` / ``first_non_null_value`` fed older sequence-group rows,
and ``listagg`` with ``distinct`` fed older sequence-group rows (a per-key loop over those keys).

Output: one row per key, sorted by key, same columns; ``_SEQUENCE_NUMBER`` is the key's largest;
``_VALUE_KIND`` is 0 (+I) for a live row and 3 (-D) when the key is removed (the values of a -D row
are not meaningful). Sequence values compare nulls first (the oldest) in both sort orders, as
Paimon's sequence comparator does; :func:`merge_sort_indices` sorts that way.

:func:`apply_rowkind_field` rewrites ``_VALUE_KIND`` from a ``rowkind.field`` column for the writer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, Callable, Optional, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind, group_ends
from lakelog.connector.options import CoreOptions, MergeEngine, SortOrder
from lakelog.connector.schema import TableSchema
from lakelog.connector.types import DataField

__all__ = [
    "MergeFunction",
    "merge_function",
    "apply_rowkind_field",
    "sort_for_merge",
    "merge_sort_indices",
    "DeduplicateMergeFunction",
    "FirstRowMergeFunction",
    "PartialUpdateMergeFunction",
    "AggregateMergeFunction",
    "SUPPORTED_AGGREGATE_FUNCTIONS",
]


class MergeFunction(Protocol):
    """Merges the rows of each key (see the module docstring)."""

    order_by: list[tuple[str, str]]

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table: ...


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
class _Ctx:
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
    def build(table: pa.Table, keys: Sequence[str]) -> _Ctx:
        n = table.num_rows
        last = _group_ends(table, keys)
        ends = np.flatnonzero(last).astype(np.int64) + 1
        starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
        gid = np.repeat(np.arange(len(ends), dtype=np.int64), ends - starts)
        return _Ctx(n, len(ends), gid, starts, ends, np.ones(n, dtype=bool), np.zeros(n, dtype=bool),
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
    if n > 1 and all(_is_int_like(c.type) and c.null_count == 0 for c in cols):
        last = np.ones(n, dtype=bool)
        change = np.zeros(n - 1, dtype=bool)
        for c in cols:
            v = _ints(c.combine_chunks())
            change |= v[1:] != v[:-1]
        last[:-1] = change
        return last
    return group_ends(table, keys)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]`` with nulls where ``idx`` is -1."""
    neg = idx < 0
    if neg.any():
        return arr.take(pa.array(np.where(neg, 0, idx), mask=neg))
    return arr.take(pa.array(idx))


def _sequential_accumulate(ufunc: np.ufunc, values: np.ndarray, gid: np.ndarray, g: int,
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


def _positions(ctx: _Ctx, groups: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
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


def _is_int_like(t: pa.DataType) -> bool:
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


def _ints(arr: pa.Array) -> np.ndarray:
    """Integer-like values as int64 (values under nulls are arbitrary)."""
    st = _storage_type(arr.type)
    return _raw_values(arr, st.to_pandas_dtype()).astype(np.int64)


def _floats(arr: pa.Array) -> np.ndarray:
    """Floating-point values in their own width (values under nulls are arbitrary)."""
    return _raw_values(arr, arr.type.to_pandas_dtype()).copy()


def _bools(arr: pa.Array) -> np.ndarray:
    a = arr.fill_null(False) if arr.null_count else arr
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=bool)


def _from_ints(values: np.ndarray, null: np.ndarray, t: pa.DataType) -> pa.Array:
    st = _storage_type(t)
    arr = pa.array(values.astype(st.to_pandas_dtype()), type=st, mask=null)
    return arr if st == t else arr.view(t)


def _from_floats(values: np.ndarray, null: np.ndarray, t: pa.DataType) -> pa.Array:
    return pa.array(values.astype(t.to_pandas_dtype()), type=t, mask=null)


def _float_order_key(x: np.ndarray) -> np.ndarray:
    """int64 keys ordering floats like Java's ``Double.compare`` (-0.0 < 0.0, NaN largest)."""
    x64 = np.where(np.isnan(x), np.nan, x.astype(np.float64))
    bits = x64.view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)


def _float_from_key(k: np.ndarray, dtype: np.dtype) -> np.ndarray:
    bits = np.where(k < 0, k ^ np.int64(0x7FFFFFFFFFFFFFFF), k)
    return bits.view(np.float64).astype(dtype)


def _list_like(t: pa.DataType, offsets: np.ndarray, child: pa.Array, null: np.ndarray) -> pa.Array:
    """A list / large list / map array of type ``t`` from offsets, its child array and a null mask."""
    n = len(offsets) - 1
    large = pa.types.is_large_list(t)
    off = pa.array(offsets.astype(np.int64 if large else np.int32))
    validity = pa.array(~null).buffers()[1] if null.any() else None
    return pa.Array.from_buffers(t, n, [validity, off.buffers()[1]], null_count=int(null.sum()),
                                 children=[child])


def _blank(arr: pa.Array) -> np.ndarray:
    """Java ``StringUtils.isBlank``: null, empty or only whitespace."""
    if len(arr) == 0:
        return np.zeros(0, dtype=bool)
    stripped = pc.utf8_trim_whitespace(arr)
    blank = pc.fill_null(pc.equal(pc.utf8_length(stripped), 0), True)
    return np.asarray(blank.to_numpy(zero_copy_only=False), dtype=bool)


# --------------------------------------------------------------------------------------------------
# Field aggregators
# --------------------------------------------------------------------------------------------------

_NUMERIC_ROOTS = frozenset({"DECIMAL", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"})
_COMPARABLE_ROOTS = _NUMERIC_ROOTS | {"CHAR", "VARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ"}

_TYPE_RULES: dict[str, tuple[Optional[frozenset[str]], str]] = {
    "sum": (_NUMERIC_ROOTS, "a numeric type (DECIMAL, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE)"),
    "product": (_NUMERIC_ROOTS, "a numeric type (DECIMAL, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE)"),
    "count": (frozenset({"INT", "BIGINT"}), "INT or BIGINT"),
    "max": (_COMPARABLE_ROOTS, "a comparable type (CHAR, VARCHAR, numeric, DATE, TIME, TIMESTAMP)"),
    "min": (_COMPARABLE_ROOTS, "a comparable type (CHAR, VARCHAR, numeric, DATE, TIME, TIMESTAMP)"),
    "listagg": (frozenset({"VARCHAR"}), "VARCHAR / STRING"),
    "bool_and": (frozenset({"BOOLEAN"}), "BOOLEAN"),
    "bool_or": (frozenset({"BOOLEAN"}), "BOOLEAN"),
    "collect": (frozenset({"ARRAY"}), "ARRAY"),
    "merge_map": (frozenset({"MAP"}), "MAP"),
    "last_value": (None, ""),
    "last_non_null_value": (None, ""),
    "first_value": (None, ""),
    "first_non_null_value": (None, ""),
    "primary-key": (None, ""),
}

SUPPORTED_AGGREGATE_FUNCTIONS = frozenset(_TYPE_RULES) | {"first_not_null_value"}
"""Aggregate functions lakelog merges (``first_not_null_value`` is Paimon's legacy spelling)."""

_RETRACTABLE = frozenset({"sum", "product", "count", "last_value", "last_non_null_value", "collect",
                          "merge_map", "primary-key"})


@dataclass(frozen=True)
class _AggSpec:
    name: str
    column: str
    ignore_retract: bool = False
    distinct: bool = False
    delimiter: str = ","


def _agg_spec(name: str, f: DataField, options: CoreOptions) -> _AggSpec:
    name = name.strip().lower()
    if name == "first_not_null_value":
        name = "first_non_null_value"
    key = CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(f.name)
    if name not in _TYPE_RULES:
        raise OptionError(
            f"aggregate function {name!r} of field {f.name!r} (option {key!r}) is not supported by "
            f"lakelog; supported: {', '.join(sorted(SUPPORTED_AGGREGATE_FUNCTIONS))}")
    roots, what = _TYPE_RULES[name]
    if roots is not None and f.type.root not in roots:
        raise OptionError(
            f"aggregate function {name!r} does not fit field {f.name!r} of type {f.type.root} "
            f"(option {key!r}): it needs {what}")
    return _AggSpec(name, f.name, options.field_ignore_retract(f.name), options.field_distinct(f.name),
                    options.field_list_agg_delimiter(f.name))


def _check_retract(spec: _AggSpec, op: np.ndarray) -> np.ndarray:
    """Paimon's retract(): functions without retraction fail unless ``ignore-retract`` is set."""
    if not (op == RETRACT).any():
        return op
    if spec.ignore_retract:
        return np.where(op == RETRACT, SKIP, op).astype(np.int8)
    if spec.name not in _RETRACTABLE:
        raise InvalidInputError(
            f"aggregate function {spec.name!r} of field {spec.column!r} does not support retraction "
            f"(-U/-D rows); to ignore retraction messages configure "
            f"'fields.{spec.column}.ignore-retract' = 'true'")
    return op


def _fold(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    op = _check_retract(spec, op)
    fn = _FOLDS[spec.name]
    return fn(spec, arr, op, ctx)


# ---- selection aggregators ------------------------------------------------------------------------


def _fold_last_value(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg = input; aggReversed = agg(input, acc) = acc (no-op); retract = null
    p = ctx.last(ctx.final & ((op == AGG) | (op == SET) | (op == RETRACT)))
    p = np.where((p >= 0) & (op[np.maximum(p, 0)] == RETRACT), -1, p)
    return _take(arr, p)


def _fold_primary_key(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg = input; aggReversed no-op; retract = input
    return _take(arr, ctx.last(ctx.final & ((op == AGG) | (op == SET) | (op == RETRACT))))


def _fold_last_non_null(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg: non-null input wins; retract: a non-null input clears; aggReversed(acc, in) = agg(in, acc):
    # an older row fills the field only while it is null.
    valid = _valid(arr)
    setting = ctx.final & valid & ((op == AGG) | (op == SET) | (op == RETRACT))
    p = ctx.last(setting)
    result = np.where((p >= 0) & (op[np.maximum(p, 0)] != RETRACT), p, -1)
    rev = ctx.final & valid & (op == AGG_REV)
    if rev.any():
        q = ctx.first_after(rev, np.where(p >= 0, p, ctx.fstart - 1))
        result = np.where(result < 0, q, result)
    return _take(arr, result)


def _fold_first_value(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg: the first call initializes and takes the input, later calls keep the accumulator.
    # aggReversed(acc, in) = agg(in, acc): initializes keeping acc, afterwards takes the input.
    # A record reset (initRow) sets the accumulator but leaves the aggregator initialized.
    aggs = (op == AGG) | (op == AGG_REV)
    init_before = ctx.any(~ctx.final & aggs)
    f = ctx.first(ctx.final & aggs)
    init_at = np.where(init_before, ctx.fstart - 1, f)
    later_rev = ctx.final & (op == AGG_REV) & (np.arange(ctx.n) > init_at[ctx.gid])
    q = ctx.last(later_rev)
    base = ctx.last(ctx.final & (op == SET))
    f_is_agg = (f >= 0) & (op[np.maximum(f, 0)] == AGG)
    result = np.where(q >= 0, q, np.where(~init_before & f_is_agg, f, base))
    return _take(arr, result)


def _fold_first_non_null(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg: the first non-null input initializes and wins. aggReversed(acc, in) = agg(in, acc):
    # initializes keeping a non-null acc; otherwise takes the input (even null).
    valid = _valid(arr)
    if (op == AGG_REV).any():
        return _scan_first_non_null(arr, op, valid, ctx)
    init_before = ctx.any(~ctx.final & (op == AGG) & valid)
    f = ctx.first(ctx.final & (op == AGG) & valid)
    base = ctx.last(ctx.final & (op == SET))
    return _take(arr, np.where(~init_before & (f >= 0), f, base))


def _scan_first_non_null(arr: pa.Array, op: np.ndarray, valid: np.ndarray, ctx: _Ctx) -> pa.Array:
    """first_non_null_value over all rows of each key, one position at a time (index accumulators)."""
    acc = np.full(ctx.g, -1, dtype=np.int64)
    init = np.zeros(ctx.g, dtype=bool)
    lengths = ctx.ends - ctx.starts
    order = np.argsort(-lengths, kind="stable")
    neg_len = -lengths[order]
    for k in range(int(lengths.max()) if ctx.g else 0):
        na = int(np.searchsorted(neg_len, -k, side="left"))
        grp = order[:na]
        rows = ctx.starts[grp] + k
        o = op[rows]
        v = valid[rows]
        a = acc[grp]
        i = init[grp]
        a = np.where(ctx.reset[rows], -1, a)
        a = np.where(o == SET, rows, a)
        agg = (o == AGG) & ~i & v
        a = np.where(agg, rows, a)
        i = i | agg
        rev = o == AGG_REV
        rev_init = rev & ~i & (a >= 0)
        rev_take = rev & ~rev_init
        a = np.where(rev_take, np.where(v, rows, -1), a)
        i = i | rev_init
        acc[grp] = a
        init[grp] = i
    return _take(arr, acc)


# ---- numeric aggregators ----------------------------------------------------------------------------


def _numeric_result(arr: pa.Array, values: np.ndarray, null: np.ndarray) -> pa.Array:
    if pa.types.is_floating(arr.type):
        return _from_floats(values, null, arr.type)
    return _from_ints(values, null, arr.type)


def _fold_sum(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg/aggReversed: acc + in (nulls ignored); retract: acc - in (-in on a null acc)
    valid = _valid(arr)
    ev = ctx.final & valid & (op != SKIP)
    neg = op == RETRACT
    none = ~ctx.any(ev)
    t = arr.type
    if pa.types.is_decimal(t):
        return _decimal_sum(arr, ev, neg, ctx, none)
    if pa.types.is_floating(t):
        v = _floats(arr)
        v = np.where(neg, -v, v)
        idx = np.flatnonzero(ev)
        sums = _sequential_accumulate(np.add, v[idx], ctx.gid[idx], ctx.g, v.dtype.type(-0.0))
        return _from_floats(sums, none, t)
    iv = _ints(arr)
    iv = np.where(neg, -iv, iv)
    with np.errstate(over="ignore"):
        sums = ctx.reduce(np.add, iv, ev, 0)
    return _from_ints(sums, none, t)


def _decimal_sum(arr: pa.Array, ev: np.ndarray, neg: np.ndarray, ctx: _Ctx, none: np.ndarray) -> pa.Array:
    t = arr.type
    wide = pa.decimal128(38, t.scale)
    idx = np.flatnonzero(ev)
    vals = arr.take(pa.array(idx)).cast(wide)
    if neg[idx].any():
        vals = pc.if_else(pa.array(neg[idx]), pc.negate(vals), vals)
    grouped = pa.table({"g": pa.array(ctx.gid[idx]), "v": vals}).group_by("g", use_threads=False)
    agg = grouped.aggregate([("v", "sum")])
    g = agg.column("g").to_numpy()
    s = agg.column("v_sum").combine_chunks()
    # Paimon's Decimal.fromBigDecimal returns null when the sum exceeds the precision
    limit = pa.scalar(Decimal(10) ** (t.precision - t.scale), wide)
    over = pc.greater_equal(pc.abs(s), limit)
    s = pc.if_else(over, pa.scalar(None, wide), s)
    out = np.full(ctx.g, -1, dtype=np.int64)
    out[g] = np.arange(len(g))
    return _take(s, out).cast(t)


def _fold_product(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg/aggReversed: acc * in (nulls ignored); retract: acc / in, a no-op on a null acc or input
    valid = _valid(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    ret = ctx.final & valid & (op == RETRACT)
    t = arr.type
    if pa.types.is_decimal(t) or ret.any():
        return _scan_product(spec, arr, op, valid, ctx)
    none = ~ctx.any(ev)
    if pa.types.is_floating(t):
        v = _floats(arr)
        prods = ctx.reduce(np.multiply, v, ev, 1)
        return _from_floats(prods, none, t)
    with np.errstate(over="ignore"):
        prods = ctx.reduce(np.multiply, _ints(arr), ev, 1)
    return _from_ints(prods, none, t)  # int64 wrap-around multiplication narrows like Java's


def _java_int_div(a: np.ndarray, b: np.ndarray, column: str) -> np.ndarray:
    """Java integer division (truncating; MIN / -1 overflows to MIN); division by zero fails."""
    if (b == 0).any():
        raise InvalidInputError(f"product of field {column!r}: a retraction divides by zero")
    q = np.abs(a) // np.abs(b)
    q = np.where((a < 0) ^ (b < 0), -q, q)
    return np.where((a == np.iinfo(np.int64).min) & (b == -1), a, q)


def _wrap(values: np.ndarray, t: pa.DataType) -> np.ndarray:
    """Wrap int64 values to the width of the integer type ``t`` (Java's narrowing casts)."""
    if t.bit_width == 64:
        return values
    return values.astype(t.to_pandas_dtype()).astype(np.int64)


def _decimal_fit(v: Decimal, precision: int, scale: int) -> Optional[Decimal]:
    """Paimon's Decimal.fromBigDecimal: rescale half-up; null when the precision is exceeded."""
    q = v.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    digits = len(q.as_tuple().digits)
    return None if q != 0 and digits > precision else q


def _scan_product(spec: _AggSpec, arr: pa.Array, op: np.ndarray, valid: np.ndarray, ctx: _Ctx) -> pa.Array:
    """product folded position by position: integer division on retraction is not associative and
    DECIMAL rounds at every step."""
    t = arr.type
    groups = np.arange(ctx.g)
    null = np.ones(ctx.g, dtype=bool)
    mul_op = (op == AGG) | (op == AGG_REV) | (op == SET)
    if pa.types.is_decimal(t):
        values = arr.to_pylist()
        dacc: list[Optional[Decimal]] = [None] * ctx.g
        with localcontext() as dctx:
            dctx.prec = 120
            for grp_pos, rows in _positions(ctx, groups):
                for g, r in zip(groups[grp_pos].tolist(), rows.tolist()):
                    x = values[r]
                    if x is None or not (mul_op[r] or op[r] == RETRACT):
                        continue
                    cur = dacc[g]
                    if mul_op[r]:
                        dacc[g] = x if cur is None else _decimal_fit(cur * x, t.precision, t.scale)
                    elif cur is not None:
                        if x == 0:
                            raise InvalidInputError(
                                f"product of field {spec.column!r}: a retraction divides by zero")
                        dacc[g] = _decimal_fit(cur / x, t.precision, t.scale)
        return pa.array(dacc, type=t)
    is_float = pa.types.is_floating(t)
    xs: np.ndarray = _floats(arr) if is_float else _ints(arr)
    acc = np.zeros(ctx.g, dtype=xs.dtype)
    for grp_pos, rows in _positions(ctx, groups):
        grp = groups[grp_pos]
        v = valid[rows]
        a = acc[grp]
        an = null[grp]
        x = xs[rows]
        mul = v & mul_op[rows]
        div = v & (op[rows] == RETRACT) & ~an
        with np.errstate(all="ignore"):
            prod = np.where(an, x, a * x)
            if is_float:
                quo = a / np.where(div, x, 1)
            else:
                quo = a.copy()
                quo[div] = _java_int_div(a[div], x[div], spec.column)
        new = np.where(mul, prod, np.where(div, quo, a))
        acc[grp] = new if is_float else _wrap(new, t)
        null[grp] = an & ~mul
    if is_float:
        return _from_floats(acc, null, t)
    return _from_ints(acc, null, t)


def _fold_count(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg(acc, in): acc null -> 1; in null -> acc; else acc + 1. retract: acc null -> 1; in null -> acc;
    # else acc - 1. aggReversed(acc, in) = agg(in, acc).
    valid = _valid(arr)
    iv = _ints(arr)
    if (ctx.final & (op == AGG_REV)).any():
        return _scan_count(arr, iv, op, valid, ctx)
    ev = ctx.final & (op != SKIP)
    first = ctx.first(ev)
    delta = np.where(valid & (op == AGG), 1, np.where(valid & (op == RETRACT), -1, 0)).astype(np.int64)
    delta[first[first >= 0]] = 0
    total = ctx.reduce(np.add, delta, ev, 0)
    start = np.where((first >= 0) & (op[np.maximum(first, 0)] == SET), iv[np.maximum(first, 0)], 1)
    return _from_ints(start + total, first < 0, arr.type)


def _scan_count(arr: pa.Array, iv: np.ndarray, op: np.ndarray, valid: np.ndarray, ctx: _Ctx) -> pa.Array:
    groups = np.arange(ctx.g)
    acc = np.zeros(ctx.g, dtype=np.int64)
    null = np.ones(ctx.g, dtype=bool)
    for grp_pos, rows in _positions(ctx, groups):
        grp = groups[grp_pos]
        o = op[rows]
        v = valid[rows]
        x = iv[rows]
        a = acc[grp]
        an = null[grp]
        step = np.where(an, 1, a + np.where(v, 1, 0))
        down = np.where(an, 1, a - np.where(v, 1, 0))
        # aggReversed: agg(accumulator=in, inputField=acc)
        rev = np.where(~v, 1, np.where(an, x, x + 1))
        new = np.select([o == AGG, o == RETRACT, o == AGG_REV, o == SET], [step, down, rev, x], a)
        acc[grp] = new
        null[grp] = an & (o == SKIP)
    return _from_ints(acc, null, arr.type)


def _fold_extreme(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # max/min of the non-null inputs (agg and aggReversed are symmetric)
    largest = spec.name == "max"
    valid = _valid(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    none = ~ctx.any(ev)
    t = arr.type
    ufunc = np.maximum if largest else np.minimum
    if pa.types.is_floating(t):
        keys = _float_order_key(_floats(arr))
        ident = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
        best = ctx.reduce(ufunc, keys, ev, ident)
        return _from_floats(_float_from_key(best, np.dtype(t.to_pandas_dtype())), none, t)
    if _is_int_like(t):
        ident = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
        best = ctx.reduce(ufunc, _ints(arr), ev, ident)
        return _from_ints(best, none, t)
    idx = np.flatnonzero(ev)
    sub = pa.table({"g": pa.array(ctx.gid[idx]), "v": arr.take(pa.array(idx))})
    order = pc.sort_indices(sub, sort_keys=[("g", "ascending"), ("v", "ascending")]).to_numpy()
    gs = ctx.gid[idx][order]
    pick = np.full(ctx.g, -1, dtype=np.int64)
    if len(order):
        if largest:
            boundary = np.flatnonzero(np.append(gs[1:] != gs[:-1], True))
        else:
            boundary = np.flatnonzero(np.insert(gs[1:] != gs[:-1], 0, True))
        pick[gs[boundary]] = idx[order[boundary]]
    return _take(arr, pick)


def _fold_bool(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    valid = _valid(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    b = _bools(arr).astype(np.uint8)
    if spec.name == "bool_and":
        res = ctx.reduce(np.minimum, b, ev, 1)
    else:
        res = ctx.reduce(np.maximum, b, ev, 0)
    return pa.array(res.astype(bool), type=arr.type, mask=~ctx.any(ev))


# ---- listagg --------------------------------------------------------------------------------------


def _group_lists(ctx: _Ctx, rows: np.ndarray, child: pa.Array, t: pa.DataType, null: np.ndarray) -> pa.Array:
    """A list array with one entry per key from ``child`` values whose key order is ``rows``' gid."""
    counts = np.bincount(ctx.gid[rows], minlength=ctx.g) if len(rows) else np.zeros(ctx.g, np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return _list_like(t, offsets, child, null)


def _fold_listagg(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg: blank/null inputs are skipped; a blank accumulator is replaced; else acc + delimiter + in.
    # aggReversed(acc, in) = agg(in, acc): prepends (and replaces a null/blank accumulator, even by a
    # null or blank input).
    nb = ~_blank(arr)
    rev = ctx.final & (op == AGG_REV)
    if spec.distinct and rev.any():
        return _listagg_distinct_sequential(spec, arr, op, ctx)
    starters = ctx.final & nb & ((op == AGG) | (op == AGG_REV) | (op == SET))
    f = ctx.first(starters)
    has_f = f >= 0
    after = ctx.final & nb & (np.arange(ctx.n) > np.where(has_f, f, ctx.ends)[ctx.gid])
    appends = after & (op == AGG)
    prepends = after & (op == AGG_REV)
    if spec.distinct:
        joined = _listagg_distinct(spec, arr, f, appends, ctx)
    else:
        rows = np.concatenate([np.flatnonzero(prepends), f[has_f], np.flatnonzero(appends)])
        big = np.int64(ctx.n + 1)
        sort_key = np.concatenate([-np.flatnonzero(prepends) - big, np.zeros(int(has_f.sum()), np.int64),
                                   np.flatnonzero(appends) + big])
        order = np.lexsort((sort_key, ctx.gid[rows]))
        rows = rows[order]
        lists = _group_lists(ctx, rows, arr.take(pa.array(rows)).cast(pa.string()), pa.list_(pa.string()),
                             ~has_f)
        joined = pc.binary_join(lists, spec.delimiter)
    # no non-blank input: the accumulator is the last older-row input (null or blank) or the base
    fallback = ctx.last(rev)
    base = ctx.last(ctx.final & (op == SET))
    fallback = np.where(fallback >= 0, fallback, base)
    fb = _take(arr, fallback).cast(pa.string())
    out = pc.if_else(pa.array(has_f), joined, fb)
    return out.cast(arr.type)


def _split_tokens(strings: pa.Array, delimiter: str) -> pa.Array:
    if delimiter == "":
        return pc.utf8_split_whitespace(strings)
    return pc.split_pattern(strings, delimiter)


def _listagg_distinct(spec: _AggSpec, arr: pa.Array, f: np.ndarray, appends: np.ndarray,
                      ctx: _Ctx) -> pa.Array:
    """Distinct listagg: the first value whole, then each new non-blank token once."""
    has_f = f >= 0
    app = np.flatnonzero(appends)
    rows = np.concatenate([f[has_f], app])
    from_first = np.concatenate([np.ones(int(has_f.sum()), bool), np.zeros(len(app), bool)])
    strings = arr.take(pa.array(rows)).cast(pa.string())
    tokens = _split_tokens(strings, spec.delimiter)
    counts = np.asarray(pc.list_value_length(tokens).fill_null(0).to_numpy(zero_copy_only=False),
                        dtype=np.int64)
    parent = np.repeat(np.arange(len(rows)), counts)
    flat = pc.list_flatten(tokens)
    tok_pos = np.arange(len(flat)) - np.repeat(np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    prow = rows[parent]
    # order of tokens: the first value's tokens first, then by row and position
    rank = np.where(from_first[parent], -1, prow)
    table = pa.table({"g": pa.array(ctx.gid[prow]), "tok": flat, "r": pa.array(rank),
                      "p": pa.array(tok_pos), "i": pa.array(np.arange(len(flat)))})
    ordered = table.sort_by([("g", "ascending"), ("r", "ascending"), ("p", "ascending")])
    firsts = ordered.group_by(["g", "tok"], use_threads=False).aggregate([("i", "first")])
    first_i = np.zeros(len(flat), dtype=bool)
    first_i[firsts.column("i_first").to_numpy()] = True
    keep = first_i & ~from_first[parent] & ~_blank(flat)
    kept = np.flatnonzero(keep)
    order = np.lexsort((tok_pos[kept], prow[kept], ctx.gid[prow[kept]]))
    kept = kept[order]
    firsts_str = _take(arr.cast(pa.string()), f)
    parts_rows = np.concatenate([np.flatnonzero(has_f), ctx.gid[prow[kept]]])
    parts_vals = pa.concat_arrays([firsts_str.filter(pa.array(has_f)), flat.take(pa.array(kept))])
    order2 = np.lexsort((np.concatenate([np.zeros(int(has_f.sum()), np.int64), np.arange(1, len(kept) + 1)]),
                         parts_rows))
    counts_g = np.bincount(parts_rows, minlength=ctx.g)
    offsets = np.concatenate(([0], np.cumsum(counts_g))).astype(np.int64)
    lists = _list_like(pa.list_(pa.string()), offsets, parts_vals.take(pa.array(order2)), ~has_f)
    return pc.binary_join(lists, spec.delimiter)


def _listagg_distinct_sequential(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    """Distinct listagg fed older sequence-group rows: Paimon's fold, run per affected key."""
    delim = spec.delimiter
    values = arr.cast(pa.string())

    def blank(s: Optional[str]) -> bool:
        return s is None or s.strip() == ""

    def split(s: str) -> list[str]:
        return s.split() if delim == "" else s.split(delim)

    def agg(acc: Optional[str], x: Optional[str]) -> Optional[str]:
        if blank(x):
            return acc
        if blank(acc):
            return x
        assert acc is not None and x is not None
        seen = set(split(acc))
        out = [acc]
        for tok in split(x):
            if blank(tok) or tok in seen:
                continue
            seen.add(tok)
            out.append(tok)
        return delim.join(out)

    result: list[Optional[str]] = []
    for g in range(ctx.g):
        lo, hi = int(ctx.fstart[g]), int(ctx.ends[g])
        seg = values.slice(lo, hi - lo).to_pylist()
        acc: Optional[str] = None
        for j, x in enumerate(seg):
            o = op[lo + j]
            if o == AGG:
                acc = agg(acc, x)
            elif o == AGG_REV:
                acc = agg(x, acc)
            elif o == SET:
                acc = x
        result.append(acc)
    return pa.array(result, type=pa.string()).cast(arr.type)


# ---- collect / merge_map ------------------------------------------------------------------------


def _explode(arr: pa.Array, rows: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Elements of the list/map values at ``rows``: (flattened child, parent row, position)."""
    sub = arr.take(pa.array(rows))
    offsets = np.asarray(sub.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    counts = np.diff(offsets)
    parent = np.repeat(rows, counts)
    pos = np.arange(offsets[-1] - offsets[0]) - np.repeat(offsets[:-1] - offsets[0], counts)
    child = sub.values if not pa.types.is_map(sub.type) else pa.StructArray.from_arrays(
        [sub.keys, sub.items], fields=[sub.type.key_field, sub.type.item_field])
    child = child.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return child, parent, pos


def _value_ids(values: pa.Array, column: str) -> np.ndarray:
    try:
        enc = pc.dictionary_encode(values, null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        raise InvalidInputError(
            f"field {column!r}: lakelog cannot compare elements of type {values.type} for "
            "distinct/retracting collect or merge_map") from None
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _fold_collect(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg/aggReversed: acc ++ input (distinct: without repeats); retract: each retracted element
    # removes its first remaining occurrence; a null accumulator stays null. Wrapped for
    # ignore-retract, aggReversed is the wrapper's default agg(input, acc): older rows prepend.
    valid = _valid(arr)
    ins = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    ret = ctx.final & valid & (op == RETRACT)
    null = ~ctx.any(ins)
    # position of each row's elements in the accumulated list (row order; prepends reversed in front)
    seq_key = np.arange(ctx.n, dtype=np.int64)
    if spec.ignore_retract:
        seq_key = np.where(op == AGG_REV, -seq_key - ctx.n - 1, seq_key)
    if not spec.distinct and not ret.any():
        rows = np.flatnonzero(ins)
        rows = rows[np.lexsort((seq_key[rows], ctx.gid[rows]))]
        child, parent, _ = _explode(arr, rows)
        counts = np.bincount(ctx.gid[parent], minlength=ctx.g) if len(parent) else np.zeros(ctx.g, np.int64)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return _list_like(arr.type, offsets, child, null)
    rows = np.flatnonzero(ins | ret)
    child, parent, pos = _explode(arr, rows)
    vid = _value_ids(child, spec.column)
    sign = np.where(op[parent] == RETRACT, -1, 1).astype(np.int64)
    g = ctx.gid[parent]
    # group elements by (key, value) in list order
    order = np.lexsort((pos, seq_key[parent], vid, g))
    gs, vs, ss = g[order], vid[order], sign[order]
    run_start = np.ones(len(order), dtype=bool)
    if len(order):
        run_start[1:] = (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])
    run_id = np.cumsum(run_start) - 1
    keep_sorted = np.zeros(len(order), dtype=bool)
    if len(order):
        if spec.distinct:
            # present iff the last touching element is an insert; kept occurrence: the first insert
            # after the last retraction of the value
            last_ret = np.full(run_id[-1] + 1, -1, dtype=np.int64)
            ri = np.flatnonzero(ss < 0)
            np.maximum.at(last_ret, run_id[ri], ri)
            cand = (ss > 0) & (np.arange(len(order)) > last_ret[run_id])
            first_cand = np.full(run_id[-1] + 1, -1, dtype=np.int64)
            ci = np.flatnonzero(cand)[::-1]
            first_cand[run_id[ci]] = ci
            chosen = first_cand[first_cand >= 0]
            keep_sorted[chosen] = True
        else:
            # clamped running count per (key, value): S_t = max(0, S_{t-1} + x_t); the survivors are
            # the last S inserted occurrences
            c = np.cumsum(ss)
            base = np.concatenate(([0], c))[np.flatnonzero(run_start)]
            cr = c - base[run_id]
            run_starts = np.flatnonzero(run_start)
            low = np.minimum.reduceat(cr, run_starts)
            final_c = cr[np.append(run_starts[1:] - 1, len(cr) - 1)]
            survivors = final_c - np.minimum(0, low)
            ins_e = (ss > 0).astype(np.int64)
            ins_cum = np.cumsum(ins_e)
            ins_base = np.concatenate(([0], ins_cum))[run_starts]
            ins_total = np.add.reduceat(ins_e, run_starts)
            from_end = ins_total[run_id] - (ins_cum - ins_base[run_id])
            keep_sorted = (ss > 0) & (from_end < survivors[run_id])
    kept = order[keep_sorted]
    kept = kept[np.lexsort((pos[kept], seq_key[parent[kept]], g[kept]))]
    counts = np.bincount(g[kept], minlength=ctx.g) if len(kept) else np.zeros(ctx.g, np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return _list_like(arr.type, offsets, child.take(pa.array(kept)), null)


def _fold_merge_map(spec: _AggSpec, arr: pa.Array, op: np.ndarray, ctx: _Ctx) -> pa.Array:
    # agg: the input's entries override; aggReversed = agg(in, acc): existing entries win;
    # retract: removes the input's keys; a null accumulator stays null.
    valid = _valid(arr)
    ins = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    ret = ctx.final & valid & (op == RETRACT)
    null = ~ctx.any(ins)
    rows = np.flatnonzero(ins | ret)
    child, parent, pos = _explode(arr, rows)
    kid = _value_ids(child.field(0), spec.column)
    o = op[parent]
    g = ctx.gid[parent]
    n = len(parent)
    order = np.lexsort((pos, parent, kid, g))
    gs, ks, os_ = g[order], kid[order], o[order]
    run_start = np.ones(n, dtype=bool)
    if n:
        run_start[1:] = (gs[1:] != gs[:-1]) | (ks[1:] != ks[:-1])
    run_id = np.cumsum(run_start) - 1
    chosen_pos = np.zeros(0, dtype=np.int64)
    first_pos = np.zeros(0, dtype=np.int64)
    if n:
        nruns = int(run_id[-1]) + 1
        ar = np.arange(n)
        last_ret = np.full(nruns, -1, dtype=np.int64)
        ri = np.flatnonzero(os_ == RETRACT)
        np.maximum.at(last_ret, run_id[ri], ri)
        after = ar > last_ret[run_id]
        fwd = after & ((os_ == AGG) | (os_ == SET))
        last_fwd = np.full(nruns, -1, dtype=np.int64)
        fi = np.flatnonzero(fwd)
        np.maximum.at(last_fwd, run_id[fi], fi)
        # the first older row holding the key: its last entry for the key
        rev = after & (os_ == AGG_REV)
        rev_row = np.full(nruns, np.iinfo(np.int64).max, dtype=np.int64)
        rv = np.flatnonzero(rev)
        np.minimum.at(rev_row, run_id[rv], parent[order][rv])
        in_first_rev = rev & (parent[order] == rev_row[run_id])
        last_rev = np.full(nruns, -1, dtype=np.int64)
        lr = np.flatnonzero(in_first_rev)
        np.maximum.at(last_rev, run_id[lr], lr)
        value_at = np.where(last_fwd >= 0, last_fwd, last_rev)
        present = value_at >= 0
        anyins = after & (os_ != RETRACT)
        first_ins = np.full(nruns, n, dtype=np.int64)
        ai = np.flatnonzero(anyins)
        np.minimum.at(first_ins, run_id[ai], ai)
        chosen_pos = order[value_at[present]]
        first_pos = order[first_ins[present]]
    # entries ordered by their first insertion after the last removal
    sort = np.lexsort((pos[first_pos], parent[first_pos]))
    chosen = chosen_pos[sort]
    counts = np.bincount(g[chosen], minlength=ctx.g) if len(chosen) else np.zeros(ctx.g, np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return _list_like(arr.type, offsets, child.take(pa.array(chosen)), null)


_FOLDS: dict[str, Callable[[_AggSpec, pa.Array, np.ndarray, _Ctx], pa.Array]] = {
    "sum": _fold_sum,
    "product": _fold_product,
    "count": _fold_count,
    "max": _fold_extreme,
    "min": _fold_extreme,
    "last_value": _fold_last_value,
    "last_non_null_value": _fold_last_non_null,
    "first_value": _fold_first_value,
    "first_non_null_value": _fold_first_non_null,
    "listagg": _fold_listagg,
    "bool_and": _fold_bool,
    "bool_or": _fold_bool,
    "collect": _fold_collect,
    "merge_map": _fold_merge_map,
    "primary-key": _fold_primary_key,
}


# --------------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------------


def _order_by(options: CoreOptions) -> list[tuple[str, str]]:
    order = "descending" if options.sequence_field_sort_order == SortOrder.DESCENDING else "ascending"
    return [(f, order) for f in options.sequence_field]


def _kinds(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column(VALUE_KIND).to_numpy(), dtype=np.int8)


def _is_insert(kinds: np.ndarray) -> np.ndarray:
    return (kinds == RowKind.INSERT) | (kinds == RowKind.UPDATE_AFTER)


def _output(table: pa.Table, ctx: _Ctx, kind: np.ndarray, rows: np.ndarray,
            values: dict[str, pa.Array]) -> pa.Table:
    """One row per key: key columns from the key's last row, max sequence, ``kind``, merged values."""
    seq = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
    max_seq = np.maximum.reduceat(seq, ctx.starts) if ctx.n else seq
    rows_arr = pa.array(rows)
    cols: list[pa.Array] = []
    for f in table.schema:
        if f.name == SEQUENCE_NUMBER:
            cols.append(pa.array(max_seq, type=f.type))
        elif f.name == VALUE_KIND:
            cols.append(pa.array(kind, type=pa.int8()).cast(f.type))
        elif f.name in values:
            cols.append(values[f.name].cast(f.type) if values[f.name].type != f.type else values[f.name])
        else:
            cols.append(table.column(f.name).take(rows_arr).combine_chunks())
    return pa.Table.from_arrays(cols, schema=table.schema)


def _value_columns(table: pa.Table, keys: Sequence[str]) -> list[str]:
    skip = set(keys) | {SEQUENCE_NUMBER, VALUE_KIND}
    return [n for n in table.column_names if n not in skip]


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _empty(table: pa.Table) -> bool:
    return table.num_rows == 0


@dataclass
class DeduplicateMergeFunction:
    """``deduplicate``: the last row of each key (``ignore-delete`` drops -U/-D rows first)."""

    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = _Ctx.build(table, keys)
        kinds = _kinds(table)
        ins = _is_insert(kinds)
        active = ins if self.ignore_delete else np.ones(ctx.n, dtype=bool)
        last = ctx.last(active)
        kind = np.where((last >= 0) & ins[np.maximum(last, 0)], RowKind.INSERT, RowKind.DELETE)
        rows = np.where(last >= 0, last, ctx.ends - 1)
        return _output(table, ctx, kind.astype(np.int8), rows, {})


@dataclass
class FirstRowMergeFunction:
    """``first-row``: the first row of each key; -U/-D rows need ``ignore-delete``."""

    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = _Ctx.build(table, keys)
        ins = _is_insert(_kinds(table))
        if not self.ignore_delete and not ins.all():
            raise InvalidInputError(
                "By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records. "
                "You can config 'ignore-delete' to ignore the DELETE/UPDATE_BEFORE records.")
        first = ctx.first(ins)
        kind = np.where(first >= 0, RowKind.INSERT, RowKind.DELETE).astype(np.int8)
        rows = np.where(first >= 0, first, ctx.ends - 1)
        return _output(table, ctx, kind, rows, {})


@dataclass
class AggregateMergeFunction:
    """``aggregation``: per-field aggregate functions (see the module docstring)."""

    aggregators: dict[str, _AggSpec]
    primary_keys: list[str]
    nullable: dict[str, bool]
    remove_record_on_delete: bool = False
    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = _Ctx.build(table, keys)
        kinds = _kinds(table)
        ins = _is_insert(kinds)
        active = ins if self.ignore_delete else np.ones(ctx.n, dtype=bool)
        reset = active & (kinds == RowKind.DELETE) if self.remove_record_on_delete else np.zeros(ctx.n, bool)
        ctx.set_resets(reset)
        base_op = np.where(ins, AGG, np.where(active & ~reset, RETRACT, SKIP)).astype(np.int8)
        last = ctx.last(active)
        kind = np.where((last >= 0) & ~reset[np.maximum(last, 0)], RowKind.INSERT, RowKind.DELETE)
        kind = kind.astype(np.int8)
        values: dict[str, pa.Array] = {}
        for name in _value_columns(table, keys):
            arr = _column(table, name)
            if name in self.primary_keys or name not in self.aggregators:
                values[name] = _take(arr, np.where(last >= 0, last, ctx.ends - 1))
                continue
            op = base_op
            if not self.nullable.get(name, True):
                op = np.where(reset, SET, base_op).astype(np.int8)
            values[name] = _fold(self.aggregators[name], arr, op, ctx)
        return _output(table, ctx, kind, ctx.ends - 1, values)


@dataclass
class _SeqGroup:
    seq_fields: tuple[str, ...]
    fields: list[str]
    partial_delete: bool = False


@dataclass
class PartialUpdateMergeFunction:
    """``partial-update``: latest non-null values, sequence groups, aggregate functions in groups."""

    primary_keys: list[str]
    nullable: dict[str, bool]
    groups: list[_SeqGroup]
    aggregators: dict[str, _AggSpec]
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = _Ctx.build(table, keys)
        kinds = _kinds(table)
        # Paimon's initRow when a key's first row is a retraction: the non-nullable fields take that
        # row's values before the row itself is merged. Modelled as a virtual copy of the row in front.
        first = ctx.starts[~_is_insert(kinds[ctx.starts])]
        virtual = np.zeros(ctx.n, dtype=bool)
        if len(first):
            table = table.take(pa.array(np.insert(np.arange(ctx.n), first, first)))
            virtual = np.insert(virtual, first, True)
            ctx = _Ctx.build(table, keys)
            kinds = _kinds(table)
        ins = _is_insert(kinds)
        ret = ~ins & ~virtual
        active = ins | (ret & (not self.ignore_delete))
        events: dict[str, tuple[np.ndarray, _AggSpec]] = {}
        if self.groups:
            reset, events = self._groups_events(table, ctx, kinds, ins, active, virtual)
        else:
            if (ret & active).any() and not self.remove_record_on_delete:
                raise InvalidInputError(
                    "By default, Partial update can not accept delete records, you can choose one of "
                    "the following solutions: 1. Configure 'ignore-delete' to ignore delete records. "
                    "2. Configure 'partial-update.remove-record-on-delete' to remove the whole row when "
                    "receiving delete records. 3. Configure 'sequence-group's to retract partial "
                    "columns. Also configure 'partial-update.remove-record-on-sequence-group' to remove "
                    "the whole row when receiving deleted records of specified sequence group.")
            reset = active & (kinds == RowKind.DELETE) & self.remove_record_on_delete
        ctx.set_resets(reset)
        has_reset = ctx.any(reset)
        base_row = reset | (virtual & ~has_reset[ctx.gid])
        last_row_reset = reset[ctx.ends - 1]
        kind = np.where(last_row_reset | ~ctx.any(ins), RowKind.DELETE, RowKind.INSERT).astype(np.int8)
        values: dict[str, pa.Array] = {}
        for name in _value_columns(table, keys):
            arr = _column(table, name)
            if name in self.primary_keys:
                values[name] = _take(arr, ctx.ends - 1)
                continue
            set_rows = base_row & (not self.nullable.get(name, True))
            if name in events:
                op, spec = events[name]
            else:
                op, spec = np.where(ins, AGG, SKIP).astype(np.int8), _AggSpec("last_non_null_value", name)
            op = np.where(set_rows & (op == SKIP), SET, op).astype(np.int8)
            values[name] = _fold(spec, arr, op, ctx)
        return _output(table, ctx, kind, ctx.ends - 1, values)

    def _groups_events(self, table: pa.Table, ctx: _Ctx, kinds: np.ndarray, ins: np.ndarray,
                       active: np.ndarray, virtual: np.ndarray
                       ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, _AggSpec]]]:
        n = ctx.n
        info = []
        for grp in self.groups:
            missing = [f for f in grp.seq_fields if f not in table.column_names]
            if missing:
                raise InvalidInputError(f"sequence group field(s) {missing} are missing from the merge input")
            cols = [_column(table, f) for f in grp.seq_fields]
            nonempty = np.zeros(n, dtype=bool)
            for c in cols:
                nonempty |= _valid(c)
            base_cols = [c if not self.nullable.get(f, True) else pa.nulls(n, c.type)
                         for f, c in zip(grp.seq_fields, cols)]
            rank, base_rank = _tuple_ranks(cols, base_cols)
            info.append((nonempty, rank, base_rank))
        first_row = np.zeros(n, dtype=bool)
        first_row[ctx.starts] = True
        is_delete = kinds == RowKind.DELETE
        reset = np.zeros(n, dtype=bool)
        is_new: list[np.ndarray] = []
        for _ in range(n + 1):
            is_new = []
            for nonempty, rank, base_rank in info:
                contrib = np.where(active & nonempty, rank, -1)
                contrib = np.where(reset | virtual, base_rank, contrib)
                seg_start = first_row | reset
                seg = np.cumsum(seg_start)
                width = np.int64(max(int(rank.max(initial=0)), int(base_rank.max(initial=0))) + 2)
                shifted = contrib + 1 + seg * width
                running = np.maximum.accumulate(shifted) - seg * width - 1
                before = np.where(first_row, -1, np.concatenate(([-1], running[:-1])))
                is_new.append(active & nonempty & (rank >= before))
            new_reset = np.zeros(n, dtype=bool)
            for grp, new in zip(self.groups, is_new):
                if grp.partial_delete:
                    new_reset |= is_delete & new
            if np.array_equal(new_reset, reset):
                break
            reset = new_reset
        ctx.set_resets(reset)
        events: dict[str, tuple[np.ndarray, _AggSpec]] = {}
        retract = active & ~ins & ~reset
        for grp, new, (nonempty, _, _) in zip(self.groups, is_new, info):
            for f in grp.seq_fields:
                events[f] = (np.where(new & ~reset, AGG, SKIP).astype(np.int8), _AggSpec("last_value", f))
            for f in grp.fields:
                spec = self.aggregators.get(f)
                if spec is None:
                    op = np.where(new & ins, AGG, np.where(new & retract, RETRACT, SKIP))
                    events[f] = (op.astype(np.int8), _AggSpec("last_value", f))
                else:
                    op = np.where(nonempty & ins, np.where(new, AGG, AGG_REV),
                                  np.where(nonempty & retract, RETRACT, SKIP))
                    events[f] = (op.astype(np.int8), spec)
        return reset, events


def _tuple_ranks(cols: list[pa.Array], base_cols: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Dense ranks of the rows' sequence tuples and of their base tuples (nulls first, lexicographic)."""
    n = len(cols[0]) if cols else 0
    both = pa.table({f"c{i}": pa.concat_arrays([c, b]) for i, (c, b) in enumerate(zip(cols, base_cols))})
    order = pc.sort_indices(both, sort_keys=[(f"c{i}", "ascending") for i in range(len(cols))],
                            null_placement="at_start").to_numpy()
    sorted_t = both.take(pa.array(order))
    change = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        diff = np.zeros(len(order) - 1, dtype=bool)
        for name in sorted_t.column_names:
            c = sorted_t.column(name).combine_chunks()
            a, b = c.slice(0, len(c) - 1), c.slice(1)
            neq = pc.fill_null(pc.not_equal(a, b), False)
            differ = pc.or_(neq, pc.xor(pc.is_null(a), pc.is_null(b)))
            diff |= np.asarray(differ.to_numpy(zero_copy_only=False), dtype=bool)
        change[1:] = diff
    dense = np.cumsum(change)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = dense
    return ranks[:n], ranks[n:]


# --------------------------------------------------------------------------------------------------
# Factory and validation
# --------------------------------------------------------------------------------------------------


def _field_map(schema: TableSchema) -> dict[str, DataField]:
    return {f.name: f for f in schema.fields}


def _require_field(fields: dict[str, DataField], name: str, option: str) -> DataField:
    f = fields.get(name)
    if f is None:
        raise OptionError(f"field {name!r} named in option {option!r} does not exist in the table schema")
    return f


def _check_sequence_fields(schema: TableSchema, options: CoreOptions) -> list[str]:
    fields = _field_map(schema)
    seq = options.sequence_field
    for s in seq:
        _require_field(fields, s, CoreOptions.SEQUENCE_FIELD.key)
    return seq


def merge_function(schema: TableSchema, options: CoreOptions) -> MergeFunction:
    """The merge function of a primary-key table (validates the engine's options)."""
    engine = options.merge_engine
    seq_fields = _check_sequence_fields(schema, options)
    _check_no_agg_on_sequence_field(options, seq_fields)
    order_by = _order_by(options)
    if engine == MergeEngine.DEDUPLICATE:
        return DeduplicateMergeFunction(options.ignore_delete, order_by)
    if engine == MergeEngine.FIRST_ROW:
        if seq_fields:
            raise OptionError("option 'sequence.field' cannot be used with 'merge-engine' = 'first-row'")
        return FirstRowMergeFunction(options.ignore_delete, [])
    if engine == MergeEngine.AGGREGATION:
        return _aggregation(schema, options, seq_fields, order_by)
    if engine == MergeEngine.PARTIAL_UPDATE:
        return _partial_update(schema, options, order_by)
    raise OptionError(f"merge engine {engine!r} is not supported")


def _nullable(schema: TableSchema) -> dict[str, bool]:
    pk = set(schema.primary_keys)
    return {f.name: f.type.nullable and f.name not in pk for f in schema.fields}


def _check_no_agg_on_sequence_field(options: CoreOptions, seq_fields: list[str]) -> None:
    for s in seq_fields:
        key = CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(s)
        if options.raw(key) is not None:
            raise OptionError(f"option {key!r}: should not define aggregation on sequence field {s!r}")


def _aggregation(schema: TableSchema, options: CoreOptions, seq_fields: list[str],
                 order_by: list[tuple[str, str]]) -> AggregateMergeFunction:
    pks = list(schema.primary_keys)
    aggs: dict[str, _AggSpec] = {}
    for f in schema.fields:
        if f.name in pks:
            continue
        if f.name in seq_fields:
            aggs[f.name] = _AggSpec("last_value", f.name)
            continue
        name = options.field_aggregate_function(f.name) or "last_non_null_value"
        aggs[f.name] = _agg_spec(name, f, options)
    return AggregateMergeFunction(aggs, pks, _nullable(schema), options.aggregation_remove_record_on_delete,
                                  options.ignore_delete, order_by)


def _partial_update(schema: TableSchema, options: CoreOptions,
                    order_by: list[tuple[str, str]]) -> PartialUpdateMergeFunction:
    fields = _field_map(schema)
    pks = list(schema.primary_keys)
    groups: list[_SeqGroup] = []
    protected: dict[str, tuple[str, ...]] = {}
    seq_of: dict[str, tuple[str, ...]] = {}
    for seq, members in options.sequence_groups().items():
        key = CoreOptions.FIELD_SEQUENCE_GROUP.key_for(",".join(seq))
        if not seq:
            raise OptionError(f"option {key!r} names no sequence field")
        for s in seq:
            _require_field(fields, s, key)
            if s in seq_of and seq_of[s] != seq:
                raise OptionError(f"sequence field {s!r} is used by more than one sequence group ({key!r})")
            seq_of[s] = seq
        for m in members:
            _require_field(fields, m, key)
            if m in seq:
                continue
            if m in protected:
                raise OptionError(f"field {m!r} is defined repeatedly by multiple groups: {key!r}")
            protected[m] = seq
        groups.append(_SeqGroup(tuple(seq), [m for m in members if m not in seq]))
    for m in protected:
        if m in seq_of:
            raise OptionError(f"field {m!r} is both a sequence field and a member of a sequence group")
    ignore_delete = options.ignore_delete
    remove_on_delete = options.partial_update_remove_record_on_delete
    remove_groups = options.get(CoreOptions.PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP) or []
    if remove_on_delete and ignore_delete:
        raise OptionError("options 'ignore-delete' and 'partial-update.remove-record-on-delete' have "
                          "conflicting behavior so should not be enabled at the same time")
    if remove_groups and ignore_delete:
        raise OptionError("options 'ignore-delete' and 'partial-update.remove-record-on-sequence-group' "
                          "have conflicting behavior so should not be enabled at the same time")
    if remove_on_delete and groups:
        raise OptionError("sequence-group and 'partial-update.remove-record-on-delete' have conflicting "
                          "behavior so should not be enabled at the same time")
    for r in remove_groups:
        if r not in seq_of:
            raise OptionError(f"field {r!r} defined in option 'partial-update.remove-record-on-sequence-"
                              "group' must be part of sequence groups")
    for grp in groups:
        grp.partial_delete = any(s in remove_groups for s in grp.seq_fields)
    aggs: dict[str, _AggSpec] = {}
    for f in schema.fields:
        if f.name in pks or f.name in seq_of:
            continue
        name = options.field_aggregate_function(f.name)
        if name is None:
            continue
        if name != "last_non_null_value" and f.name not in protected:
            raise OptionError(
                f"Must use sequence group for aggregation functions but not found for field {f.name!r} "
                f"(option {CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(f.name)!r})")
        aggs[f.name] = _agg_spec(name, f, options)
    return PartialUpdateMergeFunction(pks, _nullable(schema), groups, aggs, ignore_delete, remove_on_delete,
                                      order_by)


# --------------------------------------------------------------------------------------------------
# Sorting and row kinds
# --------------------------------------------------------------------------------------------------


def merge_sort_indices(table: pa.Table, keys: Sequence[str], order_by: Sequence[tuple[str, str]]) -> pa.Array:
    """Stable order for a merge: keys, then ``order_by`` (nulls first, as Paimon's sequence comparator
    orders them), then ``_SEQUENCE_NUMBER``."""
    sort_keys = [(k, "ascending") for k in keys] + list(order_by) + [(SEQUENCE_NUMBER, "ascending")]
    return pc.sort_indices(table, sort_keys=sort_keys, null_placement="at_start")


def sort_for_merge(table: pa.Table, keys: Sequence[str], order_by: Sequence[tuple[str, str]]) -> pa.Table:
    return table.take(merge_sort_indices(table, keys, order_by))


_ROW_KIND_STRINGS = pa.array(list(RowKind.SHORT))


def apply_rowkind_field(table: pa.Table, options: CoreOptions) -> pa.Table:
    """Set ``_VALUE_KIND`` from the ``rowkind.field`` column ('+I', '-U', '+U', '-D')."""
    name = options.rowkind_field
    if name is None:
        return table
    if name not in table.column_names:
        raise InvalidInputError(f"the column {name!r} named by option 'rowkind.field' is missing")
    col = table.column(name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        raise InvalidInputError(f"the 'rowkind.field' column {name!r} must be a string column, "
                                f"not {col.type}")
    idx = pc.index_in(col.cast(pa.string()), value_set=_ROW_KIND_STRINGS)
    if idx.null_count:
        bad = col.filter(pc.is_null(idx)).slice(0, 1).to_pylist()[0]
        raise InvalidInputError(
            f"invalid row kind {bad!r} in 'rowkind.field' column {name!r}: expected '+I', '-U', '+U' or '-D'")
    kinds = idx.cast(pa.int8())
    if VALUE_KIND in table.column_names:
        return table.set_column(table.column_names.index(VALUE_KIND), VALUE_KIND, kinds)
    return table.append_column(pa.field(VALUE_KIND, pa.int8(), nullable=False), kinds)
