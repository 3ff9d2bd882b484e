"""Scan planning: from a snapshot to splits, one per (partition, bucket), after pruning.

Pruning uses Arrow's own expression simplification: each candidate file becomes a fragment whose
"partition expression" states what is known about it (its partition values and min/max ranges),
and ``get_fragments(filter=...)`` drops every fragment the filter cannot match. For primary-key
tables only key statistics take part, because a value filter must see the merged row, not an
older version of it in another file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.format.binary_row import deserialize_row
from lakelog.connector.format.bitmap_index import BITMAP, BitmapIndex, bitmap_supported
from lakelog.connector.format.file_index import (
    BLOOM_FILTER,
    BloomFilter,
    bloom_hashes,
    bloom_supported,
    decode_container,
)
from lakelog.connector.format.manifest import ManifestEntry
from lakelog.connector.format.pruning import (
    conjunction,
    range_alternatives,
    surviving,
    surviving_cases,
    typed_literal,
)
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import DataType
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import referenced_columns
from lakelog.connector.table.point_filter import point_values

__all__ = ["plan_splits", "deletion_vectors_of"]


def _stats_guarantee(
    names: Sequence[str],
    types: Sequence[DataType],
    arrow_schema: pa.Schema,
    stats: Any,
    rows: int,
    wanted: set[str],
) -> list[Optional[list[pc.Expression]]]:
    """The :func:`range_alternatives` of the ``wanted`` columns by a file's statistics."""
    if not wanted.intersection(names):
        return []
    try:
        mins = deserialize_row(stats.min_values, types)
        maxs = deserialize_row(stats.max_values, types)
    except Exception:
        return []
    if len(mins) != len(names):
        return []
    nulls = stats.null_counts or [None] * len(names)
    out = []
    for i, n in enumerate(names):
        if n in wanted:
            nc = nulls[i] if i < len(nulls) else None
            out.append(range_alternatives(n, arrow_schema.field(n).type, mins[i], maxs[i], nc, rows))
    return out


def fallback_splits(
    store: TableStore,
    snapshot: Optional[Snapshot],
    *,
    filter: Optional[pc.Expression] = None,
    fallback_snapshot: Optional[int] = None,
) -> tuple[list[Split], Optional[int]]:
    """Paimon's ``scan.fallback-branch`` for a batch read of the latest ``snapshot``: the splits of
    the partitions that the fallback branch holds and ``snapshot`` does not (for an unpartitioned
    table: all of them, when ``snapshot`` holds no file), read from the fallback branch's latest
    snapshot, or ``fallback_snapshot`` (a read planned in one process and read in others pins it).
    Returns the splits and the fallback snapshot id they come from."""
    import dataclasses

    from lakelog.connector.errors import OptionError
    from lakelog.connector.format.branches import branch_location, list_branches
    from lakelog.connector.format.options import CoreOptions

    name = store.options.get(CoreOptions.SCAN_FALLBACK_BRANCH)
    if not name:
        return [], None
    key = CoreOptions.SCAN_FALLBACK_BRANCH.key
    if name == store.branch:
        raise OptionError(f"option {key!r} of {store.location} names its own branch {name!r}")
    if name not in list_branches(store.file_io, store.path):
        raise OptionError(f"option {key!r} of {store.location}: the table has no branch {name!r}")
    other = TableStore(branch_location(store.path, name), store.file_io)
    if other.schema.partition_keys != store.schema.partition_keys or (
        other.partition_types != store.partition_types
    ):
        raise OptionError(
            f"option {key!r} of {store.location}: branch {name!r} is partitioned by "
            f"{other.schema.partition_keys}, the table by {store.schema.partition_keys}"
        )
    sm = other.snapshot_manager
    fsnap = sm.latest() if fallback_snapshot is None else sm.snapshot(fallback_snapshot)
    if fsnap is None:
        return [], None
    live = store.live_entries(snapshot) if snapshot is not None else []
    if store.schema.partition_keys:
        have = {e.partition for e in live}
        splits = [s for s in plan_splits(other, fsnap, filter=filter) if s.partition not in have]
    else:
        splits = [] if live else plan_splits(other, fsnap, filter=filter)
    return [dataclasses.replace(s, branch=name) for s in splits], fsnap.id


def plan_splits(
    store: TableStore,
    snapshot: Optional[Snapshot],
    *,
    filter: Optional[pc.Expression] = None,
    entries: Optional[list[ManifestEntry]] = None,
) -> list[Split]:
    """Live files of ``snapshot`` grouped into splits, after partition pruning and file skipping."""
    if snapshot is None:
        return []
    if entries is None:
        entries = store.live_entries(snapshot)
    schema = store.schema
    arrow_schema = schema.arrow_schema()
    if filter is not None and entries:
        entries = _prune(store, entries, filter, arrow_schema)
        entries = _skip_by_file_index(store, entries, filter, arrow_schema)
    groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for e in entries:
        groups.setdefault((e.partition, e.bucket), []).append(e)
    vectors = deletion_vectors_of(store, snapshot)
    splits = []
    for (part, bucket), es in groups.items():
        split = Split(snapshot.id, part, bucket, es[0].total_buckets, [e.file for e in es])
        if vectors is not None:
            split.deletion_vectors = dict(vectors.get((part, bucket), {}))
        splits.append(split)
    splits.sort(key=lambda s: (s.partition, s.bucket))
    return splits


def deletion_vectors_of(
    store: TableStore, snapshot: Snapshot
) -> Optional[dict[tuple[bytes, int], dict[str, Any]]]:
    """Deletion-vector mode: each (partition, bucket)'s deletion files in ``snapshot``, for
    :attr:`Split.deletion_vectors`; None otherwise."""
    if not store.options.deletion_vectors_enabled:
        return None
    from lakelog.connector.format.index_file import DELETION_VECTORS_INDEX
    from lakelog.connector.lsm.deletion_vectors import deletion_files

    out: dict[tuple[bytes, int], dict[str, Any]] = {}
    for e in store.index_entries(snapshot):
        if e.index_file.index_type == DELETION_VECTORS_INDEX:
            out.setdefault((e.partition, e.bucket), {}).update(deletion_files(store, e))
    return out


def _prune(
    store: TableStore, entries: list[ManifestEntry], expr: pc.Expression, arrow_schema: pa.Schema
) -> list[ManifestEntry]:
    schema = store.schema
    wanted = set(referenced_columns(expr, arrow_schema.names))
    if not wanted:
        return entries
    pkeys = list(schema.partition_keys)
    ptypes = store.partition_types
    # 1. partition pruning, once per distinct partition
    if wanted.intersection(pkeys):
        parts = sorted({e.partition for e in entries})
        guarantees = []
        for p in parts:
            values = deserialize_row(p, ptypes)
            guarantees.append(
                conjunction(
                    (pc.field(k) == typed_literal(v, arrow_schema.field(k).type))
                    if v is not None
                    else pc.field(k).is_null()
                    for k, v in zip(pkeys, values)
                )
            )
        keep_parts = {parts[i] for i in surviving(guarantees, arrow_schema, expr)}
        entries = [e for e in entries if e.partition in keep_parts]
    # 2. file skipping by min/max statistics (a primary-key table's values too in deletion-vector
    #    mode, where each file above level 0 is read alone)
    if store.is_primary_key_table and not store.options.deletion_vectors_enabled:
        names, types = store.key_names, store.key_types
        stat_of = lambda f: f.key_stats  # noqa: E731
    else:
        names = [f.name for f in schema.fields]
        types = [f.type for f in schema.fields]
        stat_of = lambda f: f.value_stats  # noqa: E731
    if not wanted.intersection(names):
        return entries
    items: list[list[Optional[list[pc.Expression]]]] = []
    for e in entries:
        f = e.file
        if store.is_primary_key_table and store.options.deletion_vectors_enabled and f.level == 0:
            items.append([])  # level 0 is for compaction, not read: nothing known, kept
            continue
        if (
            stat_of(f) is f.value_stats
            and f.value_stats_cols is not None
            and list(f.value_stats_cols) != names
        ):
            items.append([])  # stats over another column set: don't guess
            continue
        if f.schema_id != schema.id:
            items.append([])  # stats of an older schema: skip pruning for safety
            continue
        items.append(_stats_guarantee(names, types, arrow_schema, stat_of(f), f.row_count, wanted))
    keep = set(surviving_cases(items, arrow_schema, expr))
    return [e for i, e in enumerate(entries) if i in keep]


def _skip_by_file_index(
    store: TableStore, entries: list[ManifestEntry], expr: pc.Expression, arrow_schema: pa.Schema
) -> list[ManifestEntry]:
    """Drop the files whose bloom-filter or bitmap index says they hold none of the values the
    filter pins a column to (``column = v``, ``IN``). Files of a merge-on-read primary-key table are
    skipped by key columns only (a newer version of a row elsewhere may change its other columns);
    files without an index for the column (older ones, Paimon's without it) are kept, and so are
    files whose bitmap was written for another type of the column (before an ALTER)."""
    opts = store.options
    if not opts.get(opts.FILE_INDEX_READ_ENABLED):
        return entries
    pinned = point_values(expr, arrow_schema)
    if store.is_primary_key_table and not opts.deletion_vectors_enabled:
        pinned = {c: v for c, v in pinned.items() if c in store.schema.primary_keys}
    if not pinned:
        return entries
    hashes = {c: bloom_hashes(v) for c, v in pinned.items() if bloom_supported(v.type)}
    bitmaps = {c: v for c, v in pinned.items() if bitmap_supported(v.type)}
    if not hashes and not bitmaps:
        return entries
    overlays = store.is_primary_key_table and opts.deletion_vectors_enabled  # level 0 is merged on read
    same_type: dict[int, set[str]] = {}  # schema id -> pinned columns typed as now
    kept = []
    for e in entries:
        if overlays and e.file.level == 0:
            kept.append(e)  # its deletes and updates overlay the files above, whatever their values
            continue
        indexes = _file_indexes(store, e)
        if indexes and not _may_hold(store, e, indexes, hashes, bitmaps, arrow_schema, same_type):
            continue
        kept.append(e)
    return kept


def _may_hold(
    store: TableStore,
    e: ManifestEntry,
    indexes: dict[str, dict[str, Optional[bytes]]],
    hashes: dict[str, Any],
    bitmaps: dict[str, pa.Array],
    arrow_schema: pa.Schema,
    same_type: dict[int, set[str]],
) -> bool:
    """Whether ``e``'s indexes leave it possible that a row holds each pinned column's values."""
    name = e.file.file_name
    for c, h in hashes.items():
        body = indexes.get(c, {}).get(BLOOM_FILTER)
        if body is not None and not BloomFilter.from_bytes(body, name).might_contain(h).any():
            return False
    for c, values in bitmaps.items():
        body = indexes.get(c, {}).get(BITMAP)
        if body is None:
            continue
        sid = e.file.schema_id
        if sid not in same_type:
            current = {f.name: f.type for f in store.schema.fields}
            schema = store.schema if sid == store.schema.id else store.schema_manager.schema(sid)
            written = schema.fields
            same_type[sid] = {f.name for f in written if current.get(f.name) == f.type}
        if c not in same_type[sid]:
            continue
        if not BitmapIndex.from_bytes(body, arrow_schema.field(c).type, name).contains_any(values):
            return False
    return True


def _file_indexes(store: TableStore, e: ManifestEntry) -> Optional[dict[str, dict[str, Optional[bytes]]]]:
    """The file index container of a data file: embedded in its record, or its ``.index`` file."""
    f = e.file
    if f.embedded_file_index:
        return decode_container(f.embedded_file_index, f.file_name)
    for extra in f.extra_files:
        if extra.endswith(".index"):
            path = store.data_file_path(e.partition, e.bucket, extra)
            return decode_container(store.file_io.read_bytes(path), path)
    return None
