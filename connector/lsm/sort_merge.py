"""Bounded-memory merge of sorted runs, vectorised chunk by chunk.

Each run is a stream of key-sorted chunks (a file read batch by batch). The merge repeatedly
takes, from every run, the rows whose key is at most the *cutoff*: the smallest of the last keys
of the runs' current chunks. Every key at or below the cutoff is then complete in hand (no run
can hold it further on), so those rows are merged with one sort and one pass of the merge
function. Memory holds about one chunk per run, whatever the size of the bucket.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.lsm.kv import (
    DEDUPLICATE,
    MergeFunction,
    comparable,
    comparable_value,
    drop_retractions,
    merge_sorted,
)

__all__ = ["merge_streams", "rows_at_or_below"]


def _key_tuple(t: pa.Table, keys: Sequence[str], row: int) -> tuple[Any, ...]:
    """The key of row ``row`` in Paimon's order (floats by Java's ``Double.compare``)."""
    return tuple(comparable_value(t.column(k)[row].as_py()) for k in keys)


def rows_at_or_below(t: pa.Table, keys: Sequence[str], cutoff: tuple[Any, ...]) -> int:
    """How many leading rows of the key-sorted table ``t`` have a key <= ``cutoff``."""
    n = t.num_rows
    if n == 0:
        return 0
    if _key_tuple(t, keys, n - 1) <= cutoff:
        return n
    if len(keys) == 1:
        col = t.column(keys[0])
        typ = col.type
        if pa.types.is_integer(typ):
            arr = col.to_numpy()
            return int(np.searchsorted(arr, cutoff[0], side="right"))
    # lexicographic (k1, ..., kn) <= (c1, ..., cn), built from the last column outwards
    mask: Optional[pa.ChunkedArray] = None
    for k, c in reversed(list(zip(keys, cutoff))):
        col = comparable(t.column(k))
        scalar = pa.scalar(c, type=col.type)
        if mask is None:
            mask = pc.less_equal(col, scalar)
        else:
            mask = pc.or_(pc.less(col, scalar), pc.and_(pc.equal(col, scalar), mask))
    assert mask is not None
    return int(pc.sum(mask).as_py() or 0)


class _Run:
    def __init__(self, chunks: Iterator[pa.Table]) -> None:
        self._chunks = chunks
        self.current: Optional[pa.Table] = None
        self.advance()

    def advance(self) -> None:
        self.current = None
        for t in self._chunks:
            if t.num_rows:
                self.current = t
                return


def merge_streams(
    runs: Sequence[Iterator[pa.Table]],
    keys: Sequence[str],
    *,
    merge: MergeFunction = DEDUPLICATE,
    drop_deletes: bool = True,
) -> Iterator[pa.Table]:
    """Merge key-sorted runs chunk by chunk; yields key-sorted merged tables."""
    live = [r for r in (_Run(it) for it in runs) if r.current is not None]
    if len(live) == 1:  # a single run is merged already
        run = live[0]
        while run.current is not None:
            out = run.current
            yield drop_retractions(out) if drop_deletes else out
            run.advance()
        return
    while live:
        cutoff = min(
            _key_tuple(r.current, keys, r.current.num_rows - 1) for r in live if r.current is not None
        )
        taken: list[pa.Table] = []
        for r in live:
            cur = r.current
            assert cur is not None
            k = rows_at_or_below(cur, keys, cutoff)
            if k == 0:
                continue
            taken.append(cur.slice(0, k))
            if k == cur.num_rows:
                r.advance()
            else:
                r.current = cur.slice(k)
        live = [r for r in live if r.current is not None]
        if not taken:
            continue
        if len(taken) == 1:
            merged = taken[0]  # no other run holds these keys, and each run is merged already
        else:
            merged = merge_sorted(pa.concat_tables(taken, promote_options="default"), keys, merge)
        yield drop_retractions(merged) if drop_deletes else merged
