"""Sort compaction of append tables (Paimon's ``compact`` with ``order_strategy`` and ``order_by``):
each partition's rows rewritten in an order that keeps close values of the ``order_by`` columns in
the same files, so that the file statistics of those columns skip files for a filter on them.

Three orders, as Paimon names them:

* ``order``: lexicographic by the columns (best for filters on the first column);
* ``zorder``: the Z-order curve, the bits of the columns interleaved (filters on any of them);
* ``hilbert``: the Hilbert curve (like Z-order, with no long jumps between neighbours).

For the two curves each value becomes an unsigned 64-bit number in the column's own order: integers,
dates and times with the sign bit flipped, floating point numbers by their IEEE bits (Java's
``Double.compare`` order), decimals through their float value, strings and binaries by their
first 8 bytes, booleans as 0 and 1; nulls are the smallest. Then each column's numbers are replaced
by their rank among its distinct values, in the high bits, so that every column takes an equal
part in the curve's first splits whatever its range (Paimon interleaves the raw bytes, where a
column of small integers only varies in its last bits). All of it is vectorised over the rows (a
loop over the 64 bits of each column, never over rows).

A partition is sorted in memory, one bucket at a time. The rewrite commits as a COMPACT snapshot that
replaces exactly the files it read, conflict-checked as every compaction is: rows appended while it
ran stay (Paimon's sort compaction is an INSERT OVERWRITE of the partitions, which drops them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.kv import float_order_key

__all__ = ["ORDER_STRATEGIES", "sort_order", "check_sort_compaction", "optional_order"]

ORDER_STRATEGIES = ("order", "zorder", "hilbert")
_SIGN = np.uint64(1 << 63)
_BITS = 64


def check_sort_compaction(store: TableStore, strategy: str, order_by: Sequence[str]) -> tuple[str, list[str]]:
    """(strategy, columns) checked against the table; :class:`OptionError` names what is wrong."""
    s = str(strategy).strip().lower()
    if s not in ORDER_STRATEGIES:
        raise OptionError(
            f"order_strategy {strategy!r}: expected one of {', '.join(ORDER_STRATEGIES)} (or none)")
    where = f"sort compaction of {store.path}"
    if store.is_primary_key_table:
        raise OptionError(f"{where}: lakelog sorts append tables only (a primary-key table's files are "
                          "sorted by its key)")
    if store.schema.bucket_mode != BucketMode.BUCKET_UNAWARE:
        raise OptionError(f"{where}: only append tables with 'bucket' = '-1' are sorted, as in Paimon (a "
                          "bucketed append table keeps its rows in the order they were written)")
    cols = [c.strip() for c in order_by if c.strip()]
    if not cols:
        raise OptionError(f"{where}: order_by names no column")
    fields = {f.name: f for f in store.schema.fields}
    for c in cols:
        f = fields.get(c)
        if f is None:
            raise OptionError(f"{where}: order_by column {c!r} is not a column of the table "
                              f"({', '.join(fields)})")
        if f.type.root in ("ARRAY", "MAP", "MULTISET", "ROW"):
            raise OptionError(f"{where}: order_by column {c!r} is of type {f.type.root}, which has no order")
    return s, cols


def sort_order(strategy: str, columns: Sequence[str]) -> Callable[[pa.Table], np.ndarray]:
    """The row order (indices) of a table under ``strategy`` by ``columns``."""

    def order(table: pa.Table) -> np.ndarray:
        if strategy == "order":
            keys = [(c, "ascending") for c in columns]
            return np.asarray(pc.sort_indices(table, sort_keys=keys, null_placement="at_start"))
        values = [_spread(_unsigned(table.column(c))) for c in columns]
        if strategy == "hilbert" and len(values) > 1:
            values = _hilbert_transpose(values)
        words = _interleave(values)
        return np.lexsort(words[::-1])

    return order


# ---- values as order-preserving unsigned 64-bit numbers ------------------------------------------------
def _unsigned(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_dictionary(t):
        arr, t = arr.cast(t.value_type), t.value_type
    if pa.types.is_boolean(t):
        out = np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.uint64)
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        x = np.asarray(arr.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
        out = float_order_key(x).view(np.uint64) ^ _SIGN
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        out = _first_8_bytes(arr.cast(pa.large_binary()))
    else:  # integers, dates, times, timestamps
        storage = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width]
        ints = arr.view(storage) if not pa.types.is_integer(t) else arr
        x = np.asarray(ints.fill_null(0).to_numpy(zero_copy_only=False)).astype(np.int64)
        out = x.view(np.uint64) ^ _SIGN
    # nulls before every value (a value that maps to 0 ties with them, which costs nothing)
    return np.where(valid, out, np.uint64(0))


def _spread(u: np.ndarray) -> np.ndarray:
    """Order-keeping numbers using the whole 64 bits: each value's rank among the column's distinct
    values, in the high bits. A curve interleaves bits from the most significant down, so a
    column whose values differ only in their low bits (small integers, short ranges) would
    otherwise be ordered after every bit of the others."""
    distinct, rank = np.unique(u, return_inverse=True)
    width = max(int(len(distinct) - 1).bit_length(), 1)
    return rank.astype(np.uint64).reshape(-1) << np.uint64(_BITS - width)


def _first_8_bytes(arr: pa.Array) -> np.ndarray:
    """Big-endian numbers of the first 8 bytes of each value (shorter values padded with zeros)."""
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    idx = offsets[:-1, None] + np.arange(8)
    inside = idx < offsets[1:, None]
    gathered = np.where(inside, data[np.clip(idx, 0, max(len(data) - 1, 0))] if len(data) else 0, 0)
    weights = np.uint64(1) << (np.uint64(8) * np.arange(7, -1, -1, dtype=np.uint64))
    return (gathered.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)


# ---- curves -------------------------------------------------------------------------------------------
def _interleave(values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The bits of ``values`` interleaved, most significant first: bit b of every column in turn.
    Returned as k words of 64 bits, the first the most significant."""
    k = len(values)
    n = len(values[0]) if k else 0
    words = [np.zeros(n, dtype=np.uint64) for _ in range(k)]
    one = np.uint64(1)
    for b in range(_BITS - 1, -1, -1):
        for c, v in enumerate(values):
            pos = (_BITS - 1 - b) * k + c  # 0: the most significant bit of the result
            bit = (v >> np.uint64(b)) & one
            words[pos // _BITS] |= bit << np.uint64(_BITS - 1 - pos % _BITS)
    return words


def _hilbert_transpose(values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The Hilbert index of each point, in the "transposed" form whose interleaved bits are the
    index (J. Skilling, "Programming the Hilbert curve", 2004), for every row at once."""
    x = [v.copy() for v in values]
    k = len(x)
    q = np.uint64(1 << (_BITS - 1))
    while q > 1:
        p = q - np.uint64(1)
        for i in range(k):
            high = (x[i] & q) != 0
            if i == 0:
                x[0] = np.where(high, x[0] ^ p, x[0])
                continue
            t = (x[0] ^ x[i]) & p
            x[0] = np.where(high, x[0] ^ p, x[0] ^ t)
            x[i] = np.where(high, x[i], x[i] ^ t)
        q >>= np.uint64(1)
    for i in range(1, k):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = np.uint64(1 << (_BITS - 1))
    while q > 1:
        t = np.where((x[k - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    return [v ^ t for v in x]


def optional_order(
    store: TableStore, strategy: Optional[str], order_by: Optional[Sequence[str] | str]
) -> Optional[Callable[[pa.Table], np.ndarray]]:
    """The sort order a compaction asks for (None: an ordinary compaction), checked."""
    none = strategy is None or str(strategy).strip().lower() in ("", "none")
    cols = [c for c in (order_by.split(",") if isinstance(order_by, str) else order_by or [])]
    if none:
        if any(c.strip() for c in cols):
            raise OptionError("order_by needs an order_strategy ('order', 'zorder' or 'hilbert')")
        return None
    s, checked = check_sort_compaction(store, str(strategy), cols)
    return sort_order(s, checked)
