"""Incremental changes between two snapshots, as an audit log (+I, -U, +U, -D).

For primary-key tables the change is the exact difference between the merged states of the two
snapshots, restricted to the buckets that the snapshots in between wrote to: a key that appears
gives +I, one that disappears gives -D, and one whose row differs gives -U (old) then +U (new).
Append tables only ever add rows: their change is every row of the files that APPEND snapshots
in between added (from snapshot 0: every row, even when the early snapshots have expired).
Values compare null-aware, and a NaN rewritten as NaN is no change.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import SnapshotNotFoundError
from lakelog.connector.kv import RowKind, sort_indices
from lakelog.connector.read import SplitRead
from lakelog.connector.scan import Split, plan_splits
from lakelog.connector.snapshot import Snapshot
from lakelog.connector.store import TableStore

__all__ = ["diff_snapshots", "ROWKIND_COLUMN"]

ROWKIND_COLUMN = "rowkind"
_SIDE = "__lakelog_side"


def _rows_differ(a: pa.Array, b: pa.Array) -> np.ndarray:
    from lakelog.connector.kv import _column_changes

    n = len(a)
    both = pa.concat_arrays([a, b]) if n else a
    # interleave a[i], b[i] so that neighbours compare
    idx = np.empty(2 * n, dtype=np.int64)
    idx[0::2] = np.arange(n)
    idx[1::2] = np.arange(n) + n
    inter = both.take(pa.array(idx))
    try:
        changes = _column_changes(inter)[0::2]
        if pa.types.is_floating(a.type) and n:  # NaN == NaN here: rewriting a NaN is no change
            both_nan = pc.and_(pc.is_nan(a), pc.is_nan(b))
            changes &= ~np.asarray(pc.fill_null(both_nan, False).to_numpy(zero_copy_only=False), dtype=bool)
        return changes
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        la, lb = a.to_pylist(), b.to_pylist()  # nested types: compare as Python values
        return np.array([x != y for x, y in zip(la, lb)], dtype=bool)


def _touched_buckets(store: TableStore, from_id: int, to_id: int) -> Optional[set[tuple[bytes, int]]]:
    sm = store.snapshot_manager
    touched: set[tuple[bytes, int]] = set()
    for sid in range(from_id + 1, to_id + 1):
        try:
            s = sm.snapshot(sid)
        except SnapshotNotFoundError:
            return None  # an expired snapshot in between: compare every bucket
        if s.commit_kind == "COMPACT":
            continue
        for e in store.delta_entries(s):
            touched.add((e.partition, e.bucket))
    return touched


def _state(store: TableStore, snap: Optional[Snapshot], keep: Optional[set[tuple[bytes, int]]]) -> pa.Table:
    read = SplitRead(store)
    splits: list[Split] = plan_splits(store, snap) if snap is not None else []
    if keep is not None:
        splits = [s for s in splits if (s.partition, s.bucket) in keep]
    return read.read_splits(splits)


def _with_kind(t: pa.Table, kinds: np.ndarray) -> pa.Table:
    names = np.array(RowKind.SHORT, dtype=object)
    return t.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array(names[kinds], pa.string()))


def diff_snapshots(store: TableStore, from_id: int, to_id: Optional[int] = None) -> pa.Table:
    sm = store.snapshot_manager
    to_snap = sm.snapshot(to_id) if to_id is not None else sm.latest()
    if to_snap is None:
        return _with_kind(store.schema.arrow_schema().empty_table(), np.zeros(0, dtype=np.int64))
    if from_id < 0 or from_id > to_snap.id:
        raise ValueError(f"from_snapshot_id {from_id} must be between 0 and {to_snap.id}")
    from_snap = sm.snapshot(from_id) if from_id > 0 else None
    if not store.is_primary_key_table:
        if from_id == 0:  # everything up to to_snap, even when its history has expired
            return _all_rows(store, to_snap)
        return _appended_rows(store, from_id, to_snap.id)
    keep = _touched_buckets(store, from_id, to_snap.id)
    old = _state(store, from_snap, keep)
    new = _state(store, to_snap, keep)
    return _diff(old, new, list(store.schema.primary_keys))


def _all_rows(store: TableStore, snap: Snapshot) -> pa.Table:
    read = SplitRead(store)
    t = read.read_splits(plan_splits(store, snap)).cast(read.output_schema)
    return _with_kind(t, np.zeros(t.num_rows, dtype=np.int64))


def _appended_rows(store: TableStore, from_id: int, to_id: int) -> pa.Table:
    sm = store.snapshot_manager
    read = SplitRead(store)
    parts = []
    for sid in range(from_id + 1, to_id + 1):
        s = sm.snapshot(sid)
        if s.commit_kind == "COMPACT":
            continue
        for e in store.delta_entries(s):
            if e.kind == 0:
                split = Split(sid, e.partition, e.bucket, e.total_buckets, [e.file])
                parts.append(read.read_file(split, e.file, system=False).select(read.columns))
    t = pa.concat_tables(parts) if parts else read.output_schema.empty_table()
    return _with_kind(t.cast(read.output_schema), np.zeros(t.num_rows, dtype=np.int64))


def _diff(old: pa.Table, new: pa.Table, pk: list[str]) -> pa.Table:
    schema = new.schema
    old = old.cast(schema)
    both = pa.concat_tables(
        [
            old.append_column(_SIDE, pa.array(np.zeros(old.num_rows, dtype=np.int8))),
            new.append_column(_SIDE, pa.array(np.ones(new.num_rows, dtype=np.int8))),
        ]
    )
    both = both.take(pa.array(sort_indices(both, pk, then=[_SIDE])))
    n = both.num_rows
    if n == 0:
        return _with_kind(schema.empty_table(), np.zeros(0, dtype=np.int64))
    from lakelog.connector.kv import group_ends

    ends = group_ends(both, pk)
    starts = np.ones(n, dtype=bool)
    starts[1:] = ends[:-1]
    side = both.column(_SIDE).to_numpy()
    pair_first = starts & ~ends  # old row followed by the new row of the same key
    kinds = np.where(side == 0, RowKind.DELETE, RowKind.INSERT).astype(np.int64)
    keep = np.ones(n, dtype=bool)
    first_idx = np.flatnonzero(pair_first)
    if len(first_idx):
        values = [c for c in schema.names if c not in pk]
        differ = np.zeros(len(first_idx), dtype=bool)
        a_idx, b_idx = pa.array(first_idx), pa.array(first_idx + 1)
        for c in values:
            col = both.column(c)
            differ |= _rows_differ(col.take(a_idx).combine_chunks(), col.take(b_idx).combine_chunks())
        kinds[first_idx] = RowKind.UPDATE_BEFORE
        kinds[first_idx + 1] = RowKind.UPDATE_AFTER
        keep[first_idx[~differ]] = False
        keep[first_idx[~differ] + 1] = False
    out = both.drop_columns([_SIDE]).filter(pa.array(keep))
    return _with_kind(out, kinds[keep])
