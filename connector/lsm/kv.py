"""Key-value rows in Arrow: sorting, grouping, and the vectorised merge of a key's rows.

Merging several sorted runs keeps, for every key, the row with the highest sequence number (the
deduplicate merge engine) unless a merge function says otherwise; a winning ``-U``/``-D`` row
removes the key. Everything is vectorised: Python loops never run per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, RowKind

__all__ = [
    "float_order_key",
    "comparable",
    "comparable_value",
    "sort_indices",
    "rows_differ_pairwise",
    "group_ends",
    "deduplicate_sorted",
    "MergeFunction",
    "Deduplicate",
    "DEDUPLICATE",
    "merge_sorted",
    "live_kinds",
    "drop_retractions",
]


def float_order_key(x: np.ndarray) -> np.ndarray:
    """int64 keys ordering floats like Java's ``Double.compare``: -0.0 before 0.0, every NaN equal
    (canonicalised) and after every number. Paimon compares float keys this way, so two NaN keys
    are the same key and -0.0 and 0.0 are two keys."""
    x64 = np.where(np.isnan(x), np.nan, x.astype(np.float64))
    bits = x64.view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)


def comparable(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``col`` as an array whose order and equality are Paimon's: floating-point columns become
    their :func:`float_order_key` (nulls kept), other columns are returned as they are."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_floating(arr.type):
        return arr
    values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)
    mask = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) if arr.null_count else None
    if mask is not None:
        values = np.where(mask, 0.0, values)
    return pa.array(float_order_key(values), pa.int64(), mask=mask)


def comparable_value(value: Any) -> Any:
    """One key value as :func:`comparable` orders it (floats by Java's ``Double.compare``)."""
    if isinstance(value, float):
        return int(float_order_key(np.array([value], dtype=np.float64))[0])
    return value


def _is_numpy_sortable(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)


SortKey = Union[str, tuple[str, str]]


def _sort_spec(c: SortKey) -> tuple[str, str]:
    return (c, "ascending") if isinstance(c, str) else (c[0], c[1])


def sort_indices(table: pa.Table, keys: Sequence[str], *, then: Sequence[SortKey] = ()) -> np.ndarray:
    """Stable sort order of ``table`` by ``keys`` (ascending) and then by ``then`` (names, or
    (name, "ascending"|"descending") pairs).

    Non-null integer-like ascending columns (the common case) sort through numpy; anything else
    through ``pyarrow.compute.sort_indices``, which is stable and orders nulls last.
    """
    spec = [(k, "ascending") for k in keys] + [_sort_spec(c) for c in then]
    floats = [c for c, _ in spec if pa.types.is_floating(table.schema.field(c).type)]
    if floats:  # Paimon's order of floats: -0.0 < 0.0, NaN equal to NaN and last
        table = table.select([c for c, _ in spec])
        for c in floats:
            table = table.set_column(table.schema.get_field_index(c), c, comparable(table.column(c)))
    if all(
        d == "ascending"
        and _is_numpy_sortable(table.schema.field(c).type)
        and table.column(c).null_count == 0
        for c, d in spec
    ):
        arrays = [_as_int64(table.column(c)) for c, _ in spec]
        if len(arrays) == 1:
            return np.argsort(arrays[0], kind="stable")
        return np.lexsort(tuple(reversed(arrays)))
    # nulls first: a null sequence field is older than any value, as in Paimon's comparators
    order = pc.sort_indices(table, sort_keys=spec, null_placement="at_start")
    return order.to_numpy()


def _as_int64(col: pa.ChunkedArray) -> np.ndarray:
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    t = arr.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        arr = arr.view(pa.int64() if t.bit_width == 64 else pa.int32())
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _column_changes(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """``out[i]`` is True when row ``i`` and row ``i + 1`` differ in this column (nulls compare equal)."""
    arr = comparable(col)  # floats: NaN equals NaN, -0.0 differs from 0.0 (Paimon's key equality)
    n = len(arr)
    if n < 2:
        return np.zeros(max(n - 1, 0), dtype=bool)
    a, b = arr.slice(0, n - 1), arr.slice(1)
    if pa.types.is_dictionary(arr.type):
        a, b = a.cast(arr.type.value_type), b.cast(arr.type.value_type)
    neq = pc.not_equal(a, b)
    # null-aware: differ if exactly one side is null; equal if both null
    a_null = pc.is_null(a)
    b_null = pc.is_null(b)
    differ = pc.or_kleene(pc.fill_null(neq, False), pc.xor(a_null, b_null))
    return np.asarray(differ.to_numpy(zero_copy_only=False), dtype=bool)


def rows_differ_pairwise(
    table: pa.Table, columns: Sequence[str], left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """``out[i]`` is True when rows ``left[i]`` and ``right[i]`` differ in any of ``columns``
    (nulls compare equal; nested values compare as Python values)."""
    out = np.zeros(len(left), dtype=bool)
    if not len(left):
        return out
    li, ri = pa.array(left), pa.array(right)
    for c in columns:
        col = table.column(c)
        a, b = col.take(li).combine_chunks(), col.take(ri).combine_chunks()
        try:
            neq = pc.fill_null(pc.not_equal(a, b), False)
            if pa.types.is_floating(a.type):  # NaN equals NaN, as Paimon's byte-wise row equality has it
                neq = pc.and_(
                    neq,
                    pc.invert(pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))),
                )
            differ = pc.or_kleene(neq, pc.xor(pc.is_null(a), pc.is_null(b)))
            out |= np.asarray(differ.to_numpy(zero_copy_only=False), dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            out |= np.array([x != y for x, y in zip(a.to_pylist(), b.to_pylist())], dtype=bool)
    return out


def group_ends(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Boolean mask of the last row of each run of equal keys in a key-sorted table."""
    n = table.num_rows
    last = np.ones(n, dtype=bool)
    if n < 2:
        return last
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        change |= _column_changes(table.column(k))
    last[:-1] = change
    return last


def deduplicate_sorted(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Keep the last row of each key in a table sorted by key then sequence."""
    if table.num_rows < 2:
        return table
    mask = group_ends(table, keys)
    if mask.all():
        return table
    return table.filter(pa.array(mask))


class MergeFunction(Protocol):
    """How the rows of one key combine (a merge engine). ``merge`` receives rows sorted by key,
    then ``order_by``, then ``_SEQUENCE_NUMBER``, and returns one row per key, sorted by key,
    whose ``_VALUE_KIND`` is the result's kind (a ``-D`` result removes the key)."""

    order_by: list[tuple[str, str]]

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table: ...


class Deduplicate:
    """The deduplicate merge engine: the row with the highest sequence number wins."""

    def __init__(self) -> None:
        self.order_by: list[tuple[str, str]] = []

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        return deduplicate_sorted(table, keys)


DEDUPLICATE = Deduplicate()


def merge_sorted(table: pa.Table, keys: Sequence[str], merge: MergeFunction = DEDUPLICATE) -> pa.Table:
    """Sort concatenated runs by key, order columns and sequence, then merge each key."""
    if table.num_rows == 0:
        return table
    if merge is DEDUPLICATE and len(keys) == 1:
        fast = _deduplicate_int_key(table, keys[0])
        if fast is not None:
            return fast
    order = sort_indices(table, keys, then=[*merge.order_by, SEQUENCE_NUMBER])
    if not (len(order) and (order[1:] > order[:-1]).all()):
        table = table.take(pa.array(order))
    return merge.merge(table, list(keys))


def _deduplicate_int_key(table: pa.Table, key: str) -> pa.Table | None:
    """Deduplicate on a single integer-like key entirely in numpy: one stable sort by key, a check
    that sequence numbers already ascend within each key (runs arrive oldest first), and one
    ``take`` of the winners. None when the shortcut does not apply."""
    col = table.column(key)
    if not _is_numpy_sortable(col.type) or col.null_count:
        return None
    k = _as_int64(col)
    order = np.argsort(k, kind="stable")
    ks = k[order]
    seq = _as_int64(table.column(SEQUENCE_NUMBER))[order]
    same_as_next = ks[1:] == ks[:-1]
    last = np.ones(len(ks), dtype=bool)
    last[:-1] = ~same_as_next
    if (same_as_next & (seq[1:] < seq[:-1])).any():
        # runs arrived in another order than oldest first (a merge takes them by key range): the
        # winner of each key is its row with the highest sequence number, found per group
        starts = np.flatnonzero(np.concatenate(([True], ~same_as_next)))
        top = np.maximum.reduceat(seq, starts)
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(ks))))
        last = seq == top[group]
        if int(last.sum()) != len(starts):
            return None  # one sequence number twice in a key: let the full sort order them
    return table.take(pa.array(order[last]))


def live_kinds(kinds: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Which of the row kinds ``kinds`` (``_VALUE_KIND`` values) are inserts or updates (not
    ``-U`` or ``-D``)."""
    return pc.is_in(kinds, value_set=pa.array([RowKind.INSERT, RowKind.UPDATE_AFTER], kinds.type))


def drop_retractions(table: pa.Table) -> pa.Table:
    """Remove rows whose ``_VALUE_KIND`` is ``-U`` or ``-D``."""
    keep = live_kinds(table.column(VALUE_KIND))
    if pc.all(keep).as_py() is not False:
        return table
    return table.filter(keep)
