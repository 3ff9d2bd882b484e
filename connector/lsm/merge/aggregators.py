"""Aggregate functions of the aggregation and partial-update engines, vectorised over all keys
(see :mod:`lakelog.connector.lsm.merge.engine`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.sketches import unite
from lakelog.connector.format.types import DataField
from lakelog.connector.lsm.kv import float_order_key
from lakelog.connector.lsm.merge.events import (
    AGG,
    AGG_REV,
    RETRACT,
    SET,
    SKIP,
    MergeContext,
    array_from_floats,
    array_from_ints,
    bool_values,
    final_positions,
    float_from_order_key,
    float_values,
    int_values,
    is_blank,
    is_int_like,
    list_array,
    sequential_accumulate,
    take_or_null,
    valid_mask,
)

__all__ = ["SUPPORTED_AGGREGATE_FUNCTIONS"]


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
    "merge_map_with_keytime": (frozenset({"MAP"}), "MAP<key, ROW<value fields..., ts STRING>>"),
    "nested_update": (frozenset({"ARRAY"}), "ARRAY<ROW<...>>"),
    "nested_partial_update": (frozenset({"ARRAY"}), "ARRAY<ROW<...>>"),
    "rbm32": (frozenset({"VARBINARY"}), "VARBINARY / BYTES"),
    "rbm64": (frozenset({"VARBINARY"}), "VARBINARY / BYTES"),
    "hll_sketch": (frozenset({"VARBINARY"}), "VARBINARY / BYTES"),
    "theta_sketch": (frozenset({"VARBINARY"}), "VARBINARY / BYTES"),
    "last_value": (None, ""),
    "last_non_null_value": (None, ""),
    "first_value": (None, ""),
    "first_non_null_value": (None, ""),
    "primary-key": (None, ""),
}

SUPPORTED_AGGREGATE_FUNCTIONS = frozenset(_TYPE_RULES) | {"first_not_null_value"}
"""Aggregate functions lakelog merges (``first_not_null_value`` is Paimon's legacy spelling)."""

_RETRACTABLE = frozenset({"sum", "product", "count", "last_value", "last_non_null_value", "collect",
                          "merge_map", "primary-key", "nested_update"})


@dataclass(frozen=True)
class AggregateSpec:
    name: str
    column: str
    ignore_retract: bool = False
    distinct: bool = False
    delimiter: str = ","
    nested_key: tuple[str, ...] = ()  # nested_update
    count_limit: Optional[int] = None  # nested_update
    ts_index: int = -1  # merge_map_with_keytime: the timestamp's field in the map's ROW values


def aggregate_spec(name: str, f: DataField, options: CoreOptions) -> AggregateSpec:
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
    if name in ("hll_sketch", "theta_sketch"):
        from lakelog.connector.format.sketches import require_datasketches

        require_datasketches(name, f.name)
    nested_key: tuple[str, ...] = ()
    if name in ("nested_update", "nested_partial_update"):
        element = f.type.element
        if element is None or element.root != "ROW":
            inner = element.root if element else "?"
            raise OptionError(f"aggregate function {name!r} does not fit field {f.name!r} of type "
                              f"ARRAY<{inner}> (option {key!r}): it needs ARRAY<ROW<...>>")
        nested_key = tuple(options.field_nested_key(f.name))
        if name == "nested_partial_update" and not nested_key:
            raise OptionError(
                f"aggregate function 'nested_partial_update' of field {f.name!r} needs option "
                f"{CoreOptions.FIELD_NESTED_KEY.key_for(f.name)!r}: the nested rows' key")
        names = [n.name for n in element.fields or ()]
        unknown = [k for k in nested_key if k not in names]
        if unknown:
            raise OptionError(
                f"option {CoreOptions.FIELD_NESTED_KEY.key_for(f.name)!r} names {unknown}, not fields of the "
                f"nested rows of {f.name!r} ({', '.join(names)})")
    ts_index = _keytime_ts_index(f, options, key) if name == "merge_map_with_keytime" else -1
    return AggregateSpec(name, f.name, options.field_ignore_retract(f.name), options.field_distinct(f.name),
                         options.field_list_agg_delimiter(f.name), nested_key,
                         options.field_count_limit(f.name), ts_index)


def _keytime_ts_index(f: DataField, options: CoreOptions, key: str) -> int:
    """merge_map_with_keytime: the index of the timestamp field in the map's ROW values, checked as
    Paimon's factory checks it (a ROW of at least two fields; ``fields.<f>.ts-field`` or the last
    field). Paimon compares the timestamps as strings (``getString``), so lakelog asks for a string
    field up front where Paimon's merge would fail on another type at its first compaction."""
    value = f.type.value
    if value is None or value.root != "ROW":
        inner = value.root if value is not None else "?"
        raise OptionError(f"aggregate function 'merge_map_with_keytime' does not fit field {f.name!r} "
                          f"(option {key!r}): the map's values must be ROW, not {inner}")
    fields = list(value.fields or ())
    if len(fields) < 2:
        raise OptionError(f"aggregate function 'merge_map_with_keytime' of field {f.name!r} needs ROW values "
                          f"of at least 2 fields (a value and a timestamp), not {len(fields)}")
    names = [x.name for x in fields]
    chosen = options.field_ts_field(f.name)
    if chosen is None:
        index = len(fields) - 1
    elif chosen in names:
        index = names.index(chosen)
    else:
        raise OptionError(f"option {CoreOptions.FIELD_TS_FIELD.key_for(f.name)!r} names {chosen!r}, not a "
                          f"field of the ROW values of {f.name!r} ({', '.join(names)})")
    if fields[index].type.root not in ("CHAR", "VARCHAR"):
        raise OptionError(
            f"the timestamp field {names[index]!r} of {f.name!r} (merge_map_with_keytime) is "
            f"{fields[index].type.root}: Paimon compares these timestamps as strings, so it must be "
            "CHAR, VARCHAR or STRING")
    return index


def _check_retract(spec: AggregateSpec, op: np.ndarray) -> np.ndarray:
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


def fold_aggregate(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    op = _check_retract(spec, op)
    fn = _FOLDS[spec.name]
    return fn(spec, arr, op, ctx)


# ---- selection aggregators ------------------------------------------------------------------------


def _fold_last_value(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg = input; aggReversed = agg(input, acc) = acc (no-op); retract = null
    p = ctx.last(ctx.final & ((op == AGG) | (op == SET) | (op == RETRACT)))
    p = np.where((p >= 0) & (op[np.maximum(p, 0)] == RETRACT), -1, p)
    return take_or_null(arr, p)


def _fold_primary_key(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg = input; aggReversed no-op; retract = input
    return take_or_null(arr, ctx.last(ctx.final & ((op == AGG) | (op == SET) | (op == RETRACT))))


def _fold_last_non_null(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg: non-null input wins; retract: a non-null input clears; aggReversed(acc, in) = agg(in, acc):
    # an older row fills the field only while it is null.
    valid = valid_mask(arr)
    setting = ctx.final & valid & ((op == AGG) | (op == SET) | (op == RETRACT))
    p = ctx.last(setting)
    result = np.where((p >= 0) & (op[np.maximum(p, 0)] != RETRACT), p, -1)
    rev = ctx.final & valid & (op == AGG_REV)
    if rev.any():
        q = ctx.first_after(rev, np.where(p >= 0, p, ctx.fstart - 1))
        result = np.where(result < 0, q, result)
    return take_or_null(arr, result)


def _fold_first_value(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
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
    return take_or_null(arr, result)


def _fold_first_non_null(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg: the first non-null input initializes and wins. aggReversed(acc, in) = agg(in, acc):
    # initializes keeping a non-null acc; otherwise takes the input (even null).
    valid = valid_mask(arr)
    if (op == AGG_REV).any():
        return _scan_first_non_null(arr, op, valid, ctx)
    init_before = ctx.any(~ctx.final & (op == AGG) & valid)
    f = ctx.first(ctx.final & (op == AGG) & valid)
    base = ctx.last(ctx.final & (op == SET))
    return take_or_null(arr, np.where(~init_before & (f >= 0), f, base))


def _scan_first_non_null(arr: pa.Array, op: np.ndarray, valid: np.ndarray, ctx: MergeContext) -> pa.Array:
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
    return take_or_null(arr, acc)


# ---- numeric aggregators ----------------------------------------------------------------------------


def _fold_sum(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg/aggReversed: acc + in (nulls ignored); retract: acc - in (-in on a null acc)
    valid = valid_mask(arr)
    ev = ctx.final & valid & (op != SKIP)
    neg = op == RETRACT
    none = ~ctx.any(ev)
    t = arr.type
    if pa.types.is_decimal(t):
        return _decimal_sum(arr, ev, neg, ctx, none)
    if pa.types.is_floating(t):
        v = float_values(arr)
        v = np.where(neg, -v, v)
        idx = np.flatnonzero(ev)
        sums = sequential_accumulate(np.add, v[idx], ctx.gid[idx], ctx.g, v.dtype.type(-0.0))
        return array_from_floats(sums, none, t)
    iv = int_values(arr)
    iv = np.where(neg, -iv, iv)
    with np.errstate(over="ignore"):
        sums = ctx.reduce(np.add, iv, ev, 0)
    return array_from_ints(sums, none, t)


def _decimal_sum(
    arr: pa.Array, ev: np.ndarray, neg: np.ndarray, ctx: MergeContext, none: np.ndarray
) -> pa.Array:
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
    return take_or_null(s, out).cast(t)


def _fold_product(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg/aggReversed: acc * in (nulls ignored); retract: acc / in, a no-op on a null acc or input
    valid = valid_mask(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    ret = ctx.final & valid & (op == RETRACT)
    t = arr.type
    if pa.types.is_decimal(t) or ret.any():
        return _scan_product(spec, arr, op, valid, ctx)
    none = ~ctx.any(ev)
    if pa.types.is_floating(t):
        v = float_values(arr)
        prods = ctx.reduce(np.multiply, v, ev, 1)
        return array_from_floats(prods, none, t)
    with np.errstate(over="ignore"):
        prods = ctx.reduce(np.multiply, int_values(arr), ev, 1)
    return array_from_ints(prods, none, t)  # int64 wrap-around multiplication narrows like Java's


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


def _scan_product(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, valid: np.ndarray, ctx: MergeContext
) -> pa.Array:
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
            for grp_pos, rows in final_positions(ctx, groups):
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
    xs: np.ndarray = float_values(arr) if is_float else int_values(arr)
    acc = np.zeros(ctx.g, dtype=xs.dtype)
    for grp_pos, rows in final_positions(ctx, groups):
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
        return array_from_floats(acc, null, t)
    return array_from_ints(acc, null, t)


def _fold_count(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg(acc, in): acc null -> 1; in null -> acc; else acc + 1. retract: acc null -> 1; in null -> acc;
    # else acc - 1. aggReversed(acc, in) = agg(in, acc).
    valid = valid_mask(arr)
    iv = int_values(arr)
    if (ctx.final & (op == AGG_REV)).any():
        return _scan_count(arr, iv, op, valid, ctx)
    ev = ctx.final & (op != SKIP)
    first = ctx.first(ev)
    delta = np.where(valid & (op == AGG), 1, np.where(valid & (op == RETRACT), -1, 0)).astype(np.int64)
    delta[first[first >= 0]] = 0
    total = ctx.reduce(np.add, delta, ev, 0)
    start = np.where((first >= 0) & (op[np.maximum(first, 0)] == SET), iv[np.maximum(first, 0)], 1)
    return array_from_ints(start + total, first < 0, arr.type)


def _scan_count(
    arr: pa.Array, iv: np.ndarray, op: np.ndarray, valid: np.ndarray, ctx: MergeContext
) -> pa.Array:
    groups = np.arange(ctx.g)
    acc = np.zeros(ctx.g, dtype=np.int64)
    null = np.ones(ctx.g, dtype=bool)
    for grp_pos, rows in final_positions(ctx, groups):
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
    return array_from_ints(acc, null, arr.type)


def _fold_extreme(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # max/min of the non-null inputs (agg and aggReversed are symmetric)
    largest = spec.name == "max"
    valid = valid_mask(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    none = ~ctx.any(ev)
    t = arr.type
    ufunc = np.maximum if largest else np.minimum
    if pa.types.is_floating(t):
        keys = float_order_key(float_values(arr))
        ident = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
        best = ctx.reduce(ufunc, keys, ev, ident)
        return array_from_floats(float_from_order_key(best, np.dtype(t.to_pandas_dtype())), none, t)
    if is_int_like(t):
        ident = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
        best = ctx.reduce(ufunc, int_values(arr), ev, ident)
        return array_from_ints(best, none, t)
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
    return take_or_null(arr, pick)


def _fold_bool(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    valid = valid_mask(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    b = bool_values(arr).astype(np.uint8)
    if spec.name == "bool_and":
        res = ctx.reduce(np.minimum, b, ev, 1)
    else:
        res = ctx.reduce(np.maximum, b, ev, 0)
    return pa.array(res.astype(bool), type=arr.type, mask=~ctx.any(ev))


# ---- listagg --------------------------------------------------------------------------------------


def _group_lists(
    ctx: MergeContext, rows: np.ndarray, child: pa.Array, t: pa.DataType, null: np.ndarray
) -> pa.Array:
    """A list array with one entry per key from ``child`` values whose key order is ``rows``' gid."""
    counts = np.bincount(ctx.gid[rows], minlength=ctx.g) if len(rows) else np.zeros(ctx.g, np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return list_array(t, offsets, child, null)


def _fold_listagg(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg: blank/null inputs are skipped; a blank accumulator is replaced; else acc + delimiter + in.
    # aggReversed(acc, in) = agg(in, acc): prepends (and replaces a null/blank accumulator, even by a
    # null or blank input).
    nb = ~is_blank(arr)
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
    fb = take_or_null(arr, fallback).cast(pa.string())
    out = pc.if_else(pa.array(has_f), joined, fb)
    return out.cast(arr.type)


def _split_tokens(strings: pa.Array, delimiter: str) -> pa.Array:
    if delimiter == "":
        return pc.utf8_split_whitespace(strings)
    return pc.split_pattern(strings, delimiter)


def _listagg_distinct(spec: AggregateSpec, arr: pa.Array, f: np.ndarray, appends: np.ndarray,
                      ctx: MergeContext) -> pa.Array:
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
    keep = first_i & ~from_first[parent] & ~is_blank(flat)
    kept = np.flatnonzero(keep)
    order = np.lexsort((tok_pos[kept], prow[kept], ctx.gid[prow[kept]]))
    kept = kept[order]
    firsts_str = take_or_null(arr.cast(pa.string()), f)
    parts_rows = np.concatenate([np.flatnonzero(has_f), ctx.gid[prow[kept]]])
    parts_vals = pa.concat_arrays([firsts_str.filter(pa.array(has_f)), flat.take(pa.array(kept))])
    order2 = np.lexsort((np.concatenate([np.zeros(int(has_f.sum()), np.int64), np.arange(1, len(kept) + 1)]),
                         parts_rows))
    counts_g = np.bincount(parts_rows, minlength=ctx.g)
    offsets = np.concatenate(([0], np.cumsum(counts_g))).astype(np.int64)
    lists = list_array(pa.list_(pa.string()), offsets, parts_vals.take(pa.array(order2)), ~has_f)
    return pc.binary_join(lists, spec.delimiter)


def _listagg_distinct_sequential(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext
) -> pa.Array:
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


def _fold_collect(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg/aggReversed: acc ++ input (distinct: without repeats); retract: each retracted element
    # removes its first remaining occurrence; a null accumulator stays null. Wrapped for
    # ignore-retract, aggReversed is the wrapper's default agg(input, acc): older rows prepend.
    valid = valid_mask(arr)
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
        return list_array(arr.type, offsets, child, null)
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
    return list_array(arr.type, offsets, child.take(pa.array(kept)), null)


def _fold_merge_map(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg: the input's entries override; aggReversed = agg(in, acc): existing entries win;
    # retract: removes the input's keys; a null accumulator stays null.
    valid = valid_mask(arr)
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
    return list_array(arr.type, offsets, child.take(pa.array(chosen)), null)


def _fold_merge_map_keytime(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext
) -> pa.Array:
    # Paimon's FieldMergeMapWithKeyTimeAgg. agg(acc, in): a null side gives the other as it is, so a
    # key's first map is taken whole (entries with a null value or timestamp too); then each entry
    # of each later map in turn: a null value removes its key, a null timestamp is skipped, and
    # otherwise it replaces the held entry if there is none, or it has a null value or timestamp, or
    # a smaller timestamp. So after a key's last removal the largest timestamp wins, the first of a
    # tie. No retraction. Older sequence-group rows and record resets fold row by row.
    valid = valid_mask(arr)
    if (ctx.final & valid & ((op == AGG_REV) | (op == SET))).any():
        return _merge_map_keytime_sequential(spec, arr, op, ctx)
    ins = ctx.final & valid & (op == AGG)
    null = ~ctx.any(ins)
    base_row = ctx.first(ins)
    child, parent, pos = _explode(arr, np.flatnonzero(ins))
    n = len(parent)
    if not n:
        return list_array(arr.type, np.zeros(ctx.g + 1, dtype=np.int64), child, null)
    g = ctx.gid[parent]
    kid = _value_ids(child.field(0), spec.column)
    value = child.field(1)
    has_row = valid_mask(value)
    stamp = value.field(spec.ts_index)
    has_ts = has_row & valid_mask(stamp)
    order = np.lexsort((pos, parent, kid, g))  # each (key, map key) run in the order of arrival
    run_start = np.ones(n, dtype=bool)
    run_start[1:] = (g[order][1:] != g[order][:-1]) | (kid[order][1:] != kid[order][:-1])
    run_id = np.cumsum(run_start) - 1
    nruns = int(run_id[-1]) + 1
    at = np.arange(n)
    base = (parent == base_row[g])[order]

    def last_where(mask: np.ndarray) -> np.ndarray:
        out = np.full(nruns, -1, dtype=np.int64)
        np.maximum.at(out, run_id[mask], at[mask])
        return out

    last_base = last_where(base)  # the first map's own repeats of a key: its last one counts (a put)
    last_removal = last_where(~base & ~has_row[order])
    rank = _java_string_rank(stamp)[order]
    cand = (~base | (at == last_base[run_id])) & has_ts[order] & (at > last_removal[run_id])
    best = np.full(nruns, -1, dtype=np.int64)
    np.maximum.at(best, run_id[cand], rank[cand])
    first_best = np.full(nruns, n, dtype=np.int64)
    top = cand & (rank == best[run_id])
    np.minimum.at(first_best, run_id[top], at[top])
    held = (last_removal < 0) & (last_base >= 0)  # no candidate: the first map's entry stays as it is
    pick = np.where(first_best < n, first_best, np.where(held, last_base, -1))
    present = pick >= 0
    chosen = order[pick[present]]
    first_seen = order[np.flatnonzero(run_start)][present]  # entries in the order their keys came
    chosen = chosen[np.lexsort((pos[first_seen], parent[first_seen]))]
    counts = np.bincount(g[chosen], minlength=ctx.g)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return list_array(arr.type, offsets, child.take(pa.array(chosen)), null)


def _java_string_rank(strings: pa.Array) -> np.ndarray:
    """Dense ranks of strings in Java's ``String.compareTo`` order (UTF-16 code units; nulls get any
    rank). Arrow orders by UTF-8 bytes, the code point order, which differs only where a character
    above U+FFFF meets one in U+E000..U+FFFF: those rare arrays are ranked in Python."""
    if pc.any(pc.match_substring_regex(strings, "[\\x{E000}-\\x{10FFFF}]")).as_py():
        texts = strings.to_pylist()
        keys = sorted({t.encode("utf-16-be") for t in texts if t is not None})
        where = {k: i for i, k in enumerate(keys)}
        return np.array([-1 if t is None else where[t.encode("utf-16-be")] for t in texts], dtype=np.int64)
    ranks = pc.rank(strings.fill_null(""), sort_keys="ascending", tiebreaker="dense")
    return np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.int64)


def _merge_map_keytime_sequential(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext
) -> pa.Array:
    """merge_map_with_keytime folded row by row, as Paimon's agg / aggReversed, per key."""
    ts_name = arr.type.item_type[spec.ts_index].name
    values = arr.to_pylist()

    def agg(acc: Optional[list], x: Optional[list]) -> Optional[list]:
        if acc is None or x is None:
            return x if acc is None else acc
        out = {_hashable(k): (k, v) for k, v in acc}
        for k, row in x:
            if row is None:
                out.pop(_hashable(k), None)
                continue
            ts = row[ts_name]
            if ts is None:
                continue
            held = out.get(_hashable(k), (k, None))[1]
            if held is None or held[ts_name] is None or _java_newer(ts, held[ts_name]):
                out[_hashable(k)] = (k, row)
        return list(out.values())

    return pa.array(_fold_row_by_row(values, op, ctx, agg), type=arr.type)


def _java_newer(a: str, b: str) -> bool:
    """``a.compareTo(b) > 0`` in Java (UTF-16 code units)."""
    return a.encode("utf-16-be") > b.encode("utf-16-be")


def _hashable(k: Any) -> Any:
    return repr(k) if isinstance(k, (dict, list)) else k


# ---- nested_update --------------------------------------------------------------------------------


def _fold_nested_update(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # Paimon's FieldNestedUpdateAgg. agg: the accumulator's rows, then the input's non-null rows;
    # without nested-key the rows are appended up to count-limit; with it a row replaces the row of
    # its key (keeping that row's place), and a new key enters while fewer than count-limit are held.
    # A null input leaves the accumulator. Folded here over all keys at once; retractions, older
    # sequence-group rows and record resets fold row by row (_nested_update_sequential).
    valid = valid_mask(arr)
    if (ctx.final & valid & ((op == RETRACT) | (op == AGG_REV) | (op == SET))).any():
        return _nested_update_sequential(spec, arr, op, ctx)
    limit = spec.count_limit if spec.count_limit is not None else np.iinfo(np.int64).max
    ins = ctx.final & valid & (op == AGG)
    null = ~ctx.any(ins)
    child, parent, _ = _explode(arr, np.flatnonzero(ins))
    elems = np.flatnonzero(valid_mask(child))  # null nested rows are dropped
    g = ctx.gid[parent[elems]]
    if not spec.nested_key:
        # elements arrive grouped by key in order: each one's rank among its key's elements
        starts = np.searchsorted(g, g, side="left")
        chosen = elems[np.arange(len(elems)) - starts < limit]
    else:
        rows = child.take(pa.array(elems))
        per_key = _per_nested_key(spec, g, rows, {"i": pa.array(np.arange(len(elems)))},
                                  [("i", "min"), ("i", "max")])  # fmt: skip
        first = per_key.column("i_min").to_numpy()
        last = per_key.column("i_max").to_numpy()
        kg = per_key.column("g").to_numpy()
        order = np.lexsort((first, kg))  # the keys of each row in order of their first arrival
        kg, last = kg[order], last[order]
        rank = np.arange(len(kg)) - np.searchsorted(kg, kg, side="left")
        chosen = elems[last[rank < limit]]
    counts = np.bincount(ctx.gid[parent[chosen]], minlength=ctx.g)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return list_array(arr.type, offsets, child.take(pa.array(chosen)), null)


def _per_nested_key(
    spec: AggregateSpec, g: np.ndarray, rows: pa.StructArray, values: dict[str, pa.Array],
    aggregations: list[tuple[str, str]],
) -> pa.Table:
    """``values`` (columns beside the nested rows ``rows`` of key groups ``g``) aggregated per (key,
    nested key): columns ``g``, the nested-key fields and ``<value>_<aggregation>``."""
    keys = {f"k{j}": rows.field(k) for j, k in enumerate(spec.nested_key)}
    try:
        return pa.table({"g": pa.array(g), **keys, **values}).group_by(
            ["g", *keys], use_threads=False).aggregate(aggregations)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        raise InvalidInputError(
            f"field {spec.column!r}: lakelog cannot compare the nested-key fields "
            f"{list(spec.nested_key)} (their types are not comparable)") from None


def _fold_nested_partial_update(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext
) -> pa.Array:
    # Paimon's FieldNestedPartialUpdateAgg: the accumulator's and the input's non-null rows, one per
    # nested key, each field the last non-null value given for it. Nested keys in the order they
    # first arrived (Paimon's hash map has none). No retraction. Older sequence-group rows and
    # record resets fold row by row.
    valid = valid_mask(arr)
    if (ctx.final & valid & ((op == AGG_REV) | (op == SET))).any():
        return _nested_update_sequential(spec, arr, op, ctx)
    ins = ctx.final & valid & (op == AGG)
    null = ~ctx.any(ins)
    child, parent, _ = _explode(arr, np.flatnonzero(ins))
    elems = np.flatnonzero(valid_mask(child))
    rows = child.take(pa.array(elems))
    g = ctx.gid[parent[elems]]
    pos = np.arange(len(elems))
    names = [f.name for f in arr.type.value_type]
    # per nested field: the position of its last non-null value in each (key, nested key) group
    lasts = {f"p{j}": pa.array(np.where(valid_mask(rows.field(n)), pos, -1)) for j, n in enumerate(names)}
    per_key = _per_nested_key(spec, g, rows, {"i": pa.array(pos), **lasts},
                              [("i", "min")] + [(c, "max") for c in lasts])  # fmt: skip
    order = np.lexsort((per_key.column("i_min").to_numpy(), per_key.column("g").to_numpy()))
    fields = [take_or_null(rows.field(n), per_key.column(f"p{j}_max").to_numpy()[order])
              for j, n in enumerate(names)]
    merged = pa.StructArray.from_arrays(fields, fields=list(arr.type.value_type))
    counts = np.bincount(per_key.column("g").to_numpy()[order], minlength=ctx.g)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return list_array(arr.type, offsets, merged, null)


def _nested_update_sequential(
    spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext
) -> pa.Array:
    """nested_update (and nested_partial_update) folded row by row, as Paimon's agg / aggReversed /
    retract, per key."""
    limit = spec.count_limit if spec.count_limit is not None else np.iinfo(np.int64).max
    partial = spec.name == "nested_partial_update"
    values = arr.to_pylist()

    def key(row: dict) -> Any:
        return repr([row[k] for k in spec.nested_key]) if spec.nested_key else None

    def agg(acc: Optional[list], x: Optional[list]) -> Optional[list]:
        if x is None:
            return acc
        if not spec.nested_key:
            if acc is not None and len(acc) >= limit:
                return acc
            held = [r for r in acc or [] if r is not None]
            return held + [r for r in x if r is not None][: limit - len(acc or [])]
        rows: dict[Any, dict] = {}
        if partial:  # nested_partial_update: each field takes the last non-null value given
            for r in [r for r in acc or [] if r is not None] + [r for r in x if r is not None]:
                cur = rows.setdefault(key(r), dict.fromkeys(r))
                cur.update({k: v for k, v in r.items() if v is not None})
            return list(rows.values())
        for r in acc or []:
            if r is not None:
                rows[key(r)] = r
        for r in x:
            if r is not None and (key(r) in rows or len(rows) < limit):
                rows[key(r)] = r
        return list(rows.values())

    def retract(acc: Optional[list], x: Optional[list]) -> Optional[list]:
        if acc is None or x is None:
            return acc
        gone = [r for r in x if r is not None]
        if not spec.nested_key:
            return [r for r in acc if r is not None and r not in gone]
        keys = {key(r) for r in gone}
        return [r for r in acc if r is not None and key(r) not in keys]

    return pa.array(_fold_row_by_row(values, op, ctx, agg, retract), type=arr.type)


def _fold_row_by_row(
    values: list, op: np.ndarray, ctx: MergeContext, agg: Callable[[Any, Any], Any],
    retract: Optional[Callable[[Any, Any], Any]] = None,
) -> list:
    """Each key's final segment folded in order, as Paimon calls agg / aggReversed (``agg(x, acc)``) /
    retract, starting from a null accumulator: one value per key."""
    out: list = []
    for g in range(ctx.g):
        acc: Any = None
        for r in range(int(ctx.fstart[g]), int(ctx.ends[g])):
            o, x = op[r], values[r]
            if o == AGG:
                acc = agg(acc, x)
            elif o == AGG_REV:
                acc = agg(x, acc)
            elif o == RETRACT and retract is not None:
                acc = retract(acc, x)
            elif o == SET:
                acc = x
        out.append(acc)
    return out


# ---- set unions: rbm32, rbm64, hll_sketch, theta_sketch --------------------------------------------------


def _fold_union(spec: AggregateSpec, arr: pa.Array, op: np.ndarray, ctx: MergeContext) -> pa.Array:
    # agg(acc, in): a null input leaves acc; a null acc takes the input's bytes as they are; else the
    # union of both, written afresh. A union is symmetric, so aggReversed is the same; no retraction.
    valid = valid_mask(arr)
    ev = ctx.final & valid & ((op == AGG) | (op == AGG_REV) | (op == SET))
    counts = ctx.count(ev)
    pick = np.where(counts == 1, ctx.last(ev), -1)
    multi = np.flatnonzero(counts > 1)
    if not len(multi):
        return take_or_null(arr, pick)
    rows = np.flatnonzero(ev & (counts[ctx.gid] > 1))
    values = arr.take(pa.array(rows)).to_pylist()
    bounds = np.concatenate(([0], np.cumsum(counts[multi])))
    where = f"field {spec.column!r} (aggregate function {spec.name!r})"
    united = [unite(spec.name, values[a:b], where) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    pick[multi] = len(arr) + np.arange(len(multi))
    return take_or_null(pa.concat_arrays([arr, pa.array(united, type=arr.type)]), pick)


_FOLDS: dict[str, Callable[[AggregateSpec, pa.Array, np.ndarray, MergeContext], pa.Array]] = {
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
    "merge_map_with_keytime": _fold_merge_map_keytime,
    "nested_update": _fold_nested_update,
    "nested_partial_update": _fold_nested_partial_update,
    "rbm32": _fold_union,
    "rbm64": _fold_union,
    "hll_sketch": _fold_union,
    "theta_sketch": _fold_union,
    "primary-key": _fold_primary_key,
}

