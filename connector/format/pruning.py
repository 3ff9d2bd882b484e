"""Pruning by statistics: what is known about a file or a row group (its min/max ranges, its
partition values) as Arrow expressions ("guarantees"), and which of them a filter may match.

Arrow's own expression simplification decides: each guarantee becomes a fragment's partition
expression, and ``get_fragments(filter=...)`` keeps the fragments the filter may match. A filter
Arrow cannot reason about keeps everything.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "typed_literal", "range_alternatives", "conjunction", "surviving", "surviving_cases",
    "row_groups_matching",
]


def typed_literal(v: Any, atype: pa.DataType) -> pc.Expression:
    return pc.scalar(pa.scalar(v, type=atype))


def range_alternatives(
    name: str, atype: pa.DataType, lo: Any, hi: Any, nulls: Optional[int], rows: int
) -> Optional[list[pc.Expression]]:
    """What the statistics say of a column, as alternatives one of which holds for every row: its
    range, and ``is_null`` when it holds nulls (or may); None when they say nothing usable."""
    f = pc.field(name)
    if nulls is not None and nulls == rows:
        return [f.is_null()]
    parts = []
    try:
        if lo is not None:
            parts.append(f >= typed_literal(lo, atype))
        if hi is not None:
            parts.append(f <= typed_literal(hi, atype))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return None
    if not parts:
        return None
    g = parts[0]
    for p in parts[1:]:
        g = g & p
    if nulls is None or nulls > 0:  # nulls there, or not known: a filter on nulls may match
        return [g, f.is_null()]
    return [g]


_MAX_CASES = 16  # per file or row group: columns with nulls multiply the cases


def surviving_cases(
    items: list[list[Optional[list[pc.Expression]]]], schema: pa.Schema, expr: pc.Expression
) -> list[int]:
    """Indexes of the items (files, row groups) that ``expr`` may match, each item given as the
    :func:`range_alternatives` of its columns.

    Arrow's simplification reasons about conjunctions of what is known, not disjunctions: told
    ``(a in range) or (a is null)`` it keeps every file for ``a = v``, so a column holding a single
    null would never skip. Here each item becomes its cases, one per choice of an alternative for
    every column (a row falls in one of them), and it survives when any case may match. Items with
    more than 16 cases are judged by the disjunctions instead."""
    guarantees: list[pc.Expression] = []
    owner: list[int] = []
    for i, cols in enumerate(items):
        known = [c for c in cols if c]
        cases = 1
        for c in known:
            cases *= len(c)
        if cases > _MAX_CASES:
            guarantees.append(conjunction(range_guarantee_of(c) for c in known))
            owner.append(i)
            continue
        for combo in itertools.product(*known):
            guarantees.append(conjunction(combo))
            owner.append(i)
    return sorted({owner[j] for j in surviving(guarantees, schema, expr)})


def range_guarantee_of(alternatives: list[pc.Expression]) -> pc.Expression:
    """Alternatives as one expression (their disjunction), for Arrow."""
    g = alternatives[0]
    for a in alternatives[1:]:
        g = g | a
    return g


def conjunction(parts: Iterable[Optional[pc.Expression]]) -> pc.Expression:
    out: Optional[pc.Expression] = None
    for p in parts:
        if p is None:
            continue
        out = p if out is None else (out & p)
    return out if out is not None else pc.scalar(True)


def surviving(guarantees: list[pc.Expression], schema: pa.Schema, expr: pc.Expression) -> list[int]:
    """Indexes of the guarantees that ``expr`` may match."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    if not guarantees:
        return []
    paths = [f"/lakelog-prune/{i}" for i in range(len(guarantees))]
    dataset = ds.FileSystemDataset.from_paths(
        paths,
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=guarantees,
    )
    try:
        frags = dataset.get_fragments(filter=expr)
        return [int(fr.path.rsplit("/", 1)[1]) for fr in frags]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return list(range(len(guarantees)))  # cannot reason about this filter: keep everything


# Types whose Parquet statistics read back as the column's values (pyarrow's min/max); others
# (decimals, timestamps in layouts lakelog rewrites, nested) are never used to skip a row group.
def _simple(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_date32(t)
    )


def row_groups_matching(
    metadata: Any, expr: pc.Expression, schema: pa.Schema, columns: Iterable[str]
) -> Optional[list[int]]:
    """The row groups of a Parquet file (``pq.FileMetaData``) that ``expr`` may match, judged by
    their statistics of ``columns`` (those of ``schema``, by name); None when none can be told
    apart (every row group is read)."""
    wanted = [c for c in columns if schema.get_field_index(c) >= 0 and _simple(schema.field(c).type)]
    if not wanted or metadata.num_row_groups < 2:
        return None
    index = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    if any(c not in index for c in wanted):
        return None
    items = []
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        parts = []
        for c in wanted:
            st = rg.column(index[c]).statistics
            if st is None or not st.has_min_max:
                continue
            nulls = st.null_count if st.has_null_count else None
            parts.append(range_alternatives(c, schema.field(c).type, st.min, st.max, nulls, rg.num_rows))
        items.append(parts)
    keep = surviving_cases(items, schema, expr)
    return sorted(keep) if len(keep) < metadata.num_row_groups else None
