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

from lakelog.connector.errors import SnapshotNotFoundError
from lakelog.connector.format.key_value import VALUE_KIND, RowKind
from lakelog.connector.format.options import ChangelogProducer
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.diff import diff_by_key
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.scan import plan_splits

__all__ = ["ROWKIND_COLUMN", "read_changelog", "diff_snapshots"]

_SIDE = "__lakelog_side"


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
    if store.is_primary_key_table and store.options.changelog_producer != ChangelogProducer.NONE:
        return read_changelog(store, from_id, to_snap.id)  # the changelog the table produced
    if not store.is_primary_key_table:
        if from_id == 0:  # everything up to to_snap, even when its history has expired
            return _all_rows(store, to_snap)
        return _appended_rows(store, from_id, to_snap.id)
    keep = _touched_buckets(store, from_id, to_snap.id)
    old = _state(store, from_snap, keep)
    new = _state(store, to_snap, keep)
    rows, kinds = diff_by_key(old, new, list(store.schema.primary_keys))
    return _with_kind(rows, kinds)


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


ROWKIND_COLUMN = "rowkind"


def read_changelog(store: TableStore, from_id: int, to_id: int) -> pa.Table:
    """The changelog files of snapshots ``from_id`` (exclusive) to ``to_id``, as an audit log."""
    from lakelog.connector.lsm.split_read import SplitRead

    sm = store.snapshot_manager
    read = SplitRead(store)
    parts: list[pa.Table] = []
    for sid in range(from_id + 1, to_id + 1):
        snap = sm.snapshot(sid)
        if not snap.changelog_manifest_list:
            continue
        metas = store.manifest_list.read(snap.changelog_manifest_list)
        for e in store.entries_of(metas):
            split = Split(sid, e.partition, e.bucket, e.total_buckets, [e.file])
            t = read.read_file(split, e.file, system=True)
            kinds = np.asarray(t.column(VALUE_KIND).to_numpy(), dtype=np.int64)
            names = np.array(RowKind.SHORT, dtype=object)[kinds]
            out = t.select(read.columns).cast(read.output_schema)
            parts.append(
                out.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array(names, pa.string()))
            )
    if not parts:
        empty = read.output_schema.empty_table()
        return empty.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array([], pa.string()))
    return pa.concat_tables(parts)
