"""Which rows of several sorted runs hold the newest version of their key, found without moving rows.

A merged read of a deduplicate table keeps, for every key, its newest row. Sorting the rows of all
runs together and taking the winners moves every column of every row; here only the key columns
are looked at: each run gets a mask of its rows that win, and the caller filters each run's
columns by its mask (a sequential pass, much cheaper than a ``take`` in key order). The result is
not in key order across runs.

The runs must come oldest first, each sorted by key with a key's rows in sequence order (as data
files are), so that a key's newest row is its last one in run order: the caller checks that from
the files' sequence-number ranges before it relies on it (:func:`in_sequence_order`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.lsm.kv import _as_int64, _is_numpy_sortable, group_ends, sort_indices

__all__ = ["in_sequence_order", "newest_masks"]

# a key range at most this many times the row count is marked in a dense array (one int32 a key)
_DENSE_FACTOR = 4


def in_sequence_order(files: Sequence[DataFileMeta], key_of: Callable[[bytes], Any]) -> bool:
    """Whether, for every two of ``files`` (in the order given) whose key ranges overlap, the
    earlier one's sequence numbers are all below the later one's: then a key's rows, read file
    after file, come in sequence order. (An LSM tree read top level down, then level 0 by
    sequence, is in this order; a file whose range says otherwise sends the caller to the sort
    by sequence number.)"""
    ranges = [(key_of(f.min_key), key_of(f.max_key)) for f in files]
    for j in range(1, len(files)):
        lo_j, hi_j = ranges[j]
        for i in range(j):
            lo_i, hi_i = ranges[i]
            overlap = lo_i <= hi_j and lo_j <= hi_i
            if overlap and files[i].max_sequence_number >= files[j].min_sequence_number:
                return False
    return True


def newest_masks(runs: Sequence[pa.Table], keys: Sequence[str]) -> list[np.ndarray]:
    """For each run (a table holding at least the ``keys`` columns; oldest run first, see the
    module docstring), a boolean mask of its rows that are their key's newest row."""
    if len(keys) == 1 and all(
        _is_numpy_sortable(r.schema.field(keys[0]).type) and r.column(keys[0]).null_count == 0 for r in runs
    ):
        ints = [_as_int64(r.column(keys[0])) for r in runs]
        dense = _dense_masks(ints)
        if dense is not None:
            return dense
        return _split(_sorted_winners_int(np.concatenate(ints)), [len(a) for a in ints])
    table = pa.concat_tables([r.select(list(keys)) for r in runs], promote_options="default")
    order = sort_indices(table, keys)  # stable: equal keys stay in run order, oldest first
    ends = group_ends(table.take(pa.array(order)), keys)
    winners = np.zeros(table.num_rows, dtype=bool)
    winners[order[ends]] = True
    return _split(winners, [r.num_rows for r in runs])


def _dense_masks(ints: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """Masks through an array indexed by key (each slot: the last run holding the key), when the
    keys' range is small enough; None otherwise."""
    present = [a for a in ints if len(a)]
    if not present:
        return [np.zeros(0, dtype=bool) for _ in ints]
    lo = min(int(a[0]) for a in present)  # each run is sorted
    hi = max(int(a[-1]) for a in present)
    total = sum(len(a) for a in present)
    if hi - lo + 1 > _DENSE_FACTOR * total + 1024:
        return None
    owner = np.full(hi - lo + 1, -1, dtype=np.int32)
    lasts = []
    for i, a in enumerate(ints):
        last = np.ones(len(a), dtype=bool)  # a key's last row within the run
        if len(a) > 1:
            last[:-1] = a[1:] != a[:-1]
        lasts.append(last)
        owner[(a[last] if not last.all() else a) - lo] = i  # distinct slots: a plain assignment
    return [(owner[a - lo] == i) & last for i, (a, last) in enumerate(zip(ints, lasts))]


def _sorted_winners_int(keys: np.ndarray) -> np.ndarray:
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    last = np.ones(len(ks), dtype=bool)
    if len(ks) > 1:
        last[:-1] = ks[1:] != ks[:-1]
    winners = np.zeros(len(keys), dtype=bool)
    winners[order[last]] = True
    return winners


def _split(mask: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    return list(np.split(mask, np.cumsum(sizes)[:-1])) if sizes else []
