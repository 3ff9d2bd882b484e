"""The difference between two keyed states, as changelog rows (-D, +I, -U/+U pairs)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakelog.connector.format.key_value import RowKind
from lakelog.connector.lsm.kv import group_ends, rows_differ_pairwise, sort_indices

__all__ = ["diff_by_key", "semi_join"]

_SIDE = "__lakelog_side"


_ROW = "__lakelog_row"


def semi_join(table: pa.Table, keys_table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Rows of ``table`` whose key (``keys``) appears in ``keys_table``, in ``table``'s order. Only
    the keys go through the join (Arrow's hash join cannot carry nested non-key columns)."""
    if table.num_rows == 0 or keys_table.num_rows == 0:
        return table.slice(0, 0)
    rows = table.select(list(keys)).append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    hit = rows.join(keys_table.select(list(keys)), keys=list(keys), join_type="left semi", use_threads=False)
    return table.take(pa.array(np.sort(hit.column(_ROW).to_numpy())))


def diff_by_key(
    old: pa.Table,
    new: pa.Table,
    pk: Sequence[str],
    *,
    dedupe: bool = True,
    ignore: Sequence[str] = (),
) -> tuple[pa.Table, np.ndarray]:
    """Changelog turning ``old`` into ``new`` (both one row per key, same columns).

    Returns the rows (sorted by key) and their kinds: a key only in ``new`` is +I, only in ``old``
    -D, in both -U (old row) then +U (new row). With ``dedupe``, keys whose rows are equal give
    nothing; without it they give an identical -U/+U pair (Paimon's default for rewritten keys).
    ``ignore`` names columns left out of that comparison.
    """
    schema = new.schema
    old = old.select(schema.names).cast(schema)
    both = pa.concat_tables(
        [
            old.append_column(_SIDE, pa.array(np.zeros(old.num_rows, dtype=np.int8))),
            new.append_column(_SIDE, pa.array(np.ones(new.num_rows, dtype=np.int8))),
        ]
    )
    n = both.num_rows
    if n == 0:
        return schema.empty_table(), np.zeros(0, dtype=np.int8)
    both = both.take(pa.array(sort_indices(both, pk, then=[_SIDE])))
    ends = group_ends(both, pk)
    starts = np.ones(n, dtype=bool)
    starts[1:] = ends[:-1]
    side = both.column(_SIDE).to_numpy()
    kinds = np.where(side == 0, RowKind.DELETE, RowKind.INSERT).astype(np.int8)
    keep = np.ones(n, dtype=bool)
    first = np.flatnonzero(starts & ~ends)  # an old row followed by the new row of the same key
    if len(first):
        kinds[first] = RowKind.UPDATE_BEFORE
        kinds[first + 1] = RowKind.UPDATE_AFTER
        if dedupe:
            values = [c for c in schema.names if c not in pk and c not in ignore]
            same = ~rows_differ_pairwise(both, values, first, first + 1)
            keep[first[same]] = False
            keep[first[same] + 1] = False
    out = both.drop_columns([_SIDE]).filter(pa.array(keep))
    return out, kinds[keep]
