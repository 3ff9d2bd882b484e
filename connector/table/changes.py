"""Incremental reads: what changed between two snapshots, the one home of that idea.

* :func:`snapshots_between`, :func:`delta_entries_between` and :func:`touched_buckets` tell which
  snapshots, files and (partition, bucket)s the commits after one snapshot up to another made.
* :func:`delta_rows` reads the rows those commits added, with the row kinds they were written with
  (Paimon's *delta* read; what a streaming reader emits for a table without a changelog producer).
* :func:`read_changelog` reads the changelog files that a changelog producer wrote.
* :func:`diff_snapshots` is the exact change between two snapshots as an audit log (+I, -U, +U,
  -D): the table's changelog when it has a producer; for other primary-key tables the difference
  between the merged states of the two snapshots, restricted to the buckets the snapshots in
  between wrote to (a key that appears gives +I, one that disappears -D, one whose row differs -U
  then +U; values compare null-aware, and a NaN rewritten as NaN is no change); for append tables
  every row the snapshots in between added (from snapshot 0: every row, even when the early
  snapshots have expired).

Every audit log has a leading ``rowkind`` column (:data:`ROWKIND_COLUMN`) holding ``+I``, ``-U``,
``+U`` or ``-D``. COMPACT snapshots add no rows: they only rewrite files.

OVERWRITE snapshots (``Table.overwrite``, rescales) follow Paimon's ``streaming-read-overwrite``:
by default the reads above skip them (a rescale, which changes no row, shows no change; an overwrite
that changes rows is not seen, as in Paimon's streaming reads); with ``streaming-read-overwrite =
true`` (primary-key tables) an OVERWRITE shows the rows of the files it removed as ``-D`` and the
rows of the files it added as ``+I``, each merged per (partition, bucket): a full retraction and
insertion, not a minimal diff. :func:`delta_entries_between` and :func:`touched_buckets` report
OVERWRITE snapshots like any other (they tell which files changed, for lookups and compaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import MissingFileError, SnapshotNotFoundError
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakelog.connector.format.manifest import KIND_ADD, ManifestEntry
from lakelog.connector.format.options import ChangelogProducer
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.publisher import BucketChanges
from lakelog.connector.lsm.diff import diff_by_key
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.scan import deletion_vectors_of, plan_splits

__all__ = [
    "ROWKIND_COLUMN",
    "snapshots_between",
    "delta_entries_between",
    "touched_buckets",
    "delta_rows",
    "read_changelog",
    "diff_snapshots",
    "with_row_kinds",
    "log_changes",
    "snapshot_log_changes",
]

#: The leading column of an audit log: ``+I``, ``-U``, ``+U`` or ``-D``.
ROWKIND_COLUMN = "rowkind"

_COMPACT = "COMPACT"
_FROM_COMPACTION = (ChangelogProducer.LOOKUP, ChangelogProducer.FULL_COMPACTION)
_OVERWRITE = "OVERWRITE"


def reads_overwrite(store: TableStore, option: Optional[bool] = None) -> bool:
    """Whether incremental reads show OVERWRITE snapshots (``streaming-read-overwrite``: the
    table's, or ``option`` where a read's dynamic options give it; primary-key tables only)."""
    given = store.options.streaming_read_overwrite if option is None else option
    return store.is_primary_key_table and given


def overwrite_rows(store: TableStore, snapshot: Snapshot, read: Optional[SplitRead] = None) -> pa.Table:
    """The audit log of one OVERWRITE snapshot: the merged rows of the files it deleted as ``-D``,
    then the merged rows of the files it added as ``+I`` (per partition and bucket)."""
    read = read if read is not None else SplitRead(store)
    parts: list[pa.Table] = []
    entries = store.delta_entries(snapshot)
    # deletion-vector mode: the files it deleted are read with the vectors they had before it
    before = deletion_vectors_of(store, store.snapshot_manager.snapshot(snapshot.id - 1)) if (
        store.options.deletion_vectors_enabled and snapshot.id > 1
    ) else None
    for kind, code in ((1, RowKind.DELETE), (KIND_ADD, RowKind.INSERT)):
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for e in entries:
            if e.kind == kind:
                groups.setdefault((e.partition, e.bucket), []).append(e)
        vectors = before if kind == 1 else deletion_vectors_of(store, snapshot)
        splits = [
            Split(
                snapshot.id, p, b, es[0].total_buckets, [e.file for e in es],
                deletion_vectors=None if vectors is None else dict(vectors.get((p, b), {})),
            )
            for (p, b), es in sorted(groups.items(), key=lambda kv: kv[0])
        ]
        if splits:
            t = read.read_splits(splits).cast(read.output_schema)
            parts.append(with_row_kinds(t, np.full(t.num_rows, code, dtype=np.int64)))
    return _audit_log(read, parts)


def published_entries(store: TableStore, snapshot: Optional[Snapshot]) -> Optional[list[ManifestEntry]]:
    """The files whose rows the change stream has published by ``snapshot``, for a streaming read
    that starts with a snapshot's rows and then follows its changes: where the changelog comes
    from compaction, rows still below it will come as changes later, so reading them too would
    emit them twice. ``lookup``: the files above level 0; ``full-compaction``: the top level (the
    last full compaction's). None (every live file) for other tables."""
    producer = store.options.changelog_producer if store.is_primary_key_table else ChangelogProducer.NONE
    if producer not in _FROM_COMPACTION or snapshot is None:
        return None
    live = store.live_entries(snapshot)
    if producer == ChangelogProducer.LOOKUP:
        return [e for e in live if e.file.level > 0]
    from lakelog.connector.lsm.compaction import max_level

    top = max_level(store)
    return [e for e in live if e.file.level == top]


def snapshots_between(store: TableStore, from_id: int, to_id: int) -> list[Snapshot]:
    """The snapshots after ``from_id`` up to ``to_id``, in order. Raises
    :class:`~lakelog.connector.errors.SnapshotNotFoundError` when one of them has expired."""
    sm = store.snapshot_manager
    return [sm.snapshot(sid) for sid in range(from_id + 1, to_id + 1)]


def delta_entries_between(
    store: TableStore, from_id: int, to_id: int, *, include_compact: bool = False
) -> dict[int, list[ManifestEntry]]:
    """The manifest entries (ADDs and DELETEs) each snapshot after ``from_id`` up to ``to_id``
    committed, by snapshot id; COMPACT snapshots are left out unless ``include_compact``. Raises
    :class:`~lakelog.connector.errors.SnapshotNotFoundError` when one of them has expired."""
    return {
        s.id: store.delta_entries(s)
        for s in snapshots_between(store, from_id, to_id)
        if include_compact or s.commit_kind != _COMPACT
    }


def touched_buckets(
    store: TableStore, from_id: int, to_id: int, *, include_compact: bool = False
) -> Optional[set[tuple[bytes, int]]]:
    """The (partition, bucket)s that the snapshots after ``from_id`` up to ``to_id`` wrote to
    (COMPACT snapshots too with ``include_compact``); None when one of them has expired, so the
    caller must look at every bucket."""
    try:
        deltas = delta_entries_between(store, from_id, to_id, include_compact=include_compact)
    except SnapshotNotFoundError:
        return None
    return {(e.partition, e.bucket) for entries in deltas.values() for e in entries}


def with_row_kinds(table: pa.Table, kinds: np.ndarray) -> pa.Table:
    """``table`` with a leading :data:`ROWKIND_COLUMN` of the row kinds ``kinds`` (codes 0..3)."""
    names = np.array(RowKind.SHORT, dtype=object)[np.asarray(kinds, dtype=np.int64)]
    return table.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array(names, pa.string()))


def _audit_log(read: SplitRead, parts: Sequence[pa.Table]) -> pa.Table:
    if parts:
        return pa.concat_tables(parts)
    return with_row_kinds(read.output_schema.empty_table(), np.zeros(0, dtype=np.int64))


def _read_entry_rows(read: SplitRead, snapshot_id: int, e: ManifestEntry, *, kinds: bool) -> pa.Table:
    """One file's rows in the read's columns, with a leading row-kind column (the kinds written,
    or +I for every row when ``kinds`` is false)."""
    split = Split(snapshot_id, e.partition, e.bucket, e.total_buckets, [e.file])
    t = read.read_file(split, e.file, system=kinds)
    codes = t.column(VALUE_KIND).to_numpy() if kinds else np.zeros(t.num_rows, dtype=np.int64)
    return with_row_kinds(t.select(read.output_names).cast(read.output_schema), codes)


def delta_rows(
    store: TableStore,
    from_id: int,
    to_id: int,
    *,
    columns: Optional[Sequence[str]] = None,
    filter: Optional[pc.Expression] = None,
    read_overwrite: Optional[bool] = None,
    sequence_number: bool = False,
) -> pa.Table:
    """The rows the snapshots after ``from_id`` up to ``to_id`` added, as an audit log with the
    kinds they were written with (+I for append tables), in commit order (``read_overwrite``: a
    read's ``streaming-read-overwrite``, see :func:`reads_overwrite`; ``sequence_number``: each
    row's ``_SEQUENCE_NUMBER`` after ``rowkind``, primary-key tables). Raises
    :class:`~lakelog.connector.errors.SnapshotNotFoundError` when one of them has expired."""
    read = SplitRead(store, columns=columns, sequence_number=sequence_number)
    pk = store.is_primary_key_table
    parts: list[pa.Table] = []
    for snap in snapshots_between(store, from_id, to_id):
        if snap.commit_kind == _COMPACT:
            continue
        if snap.commit_kind == _OVERWRITE:
            if reads_overwrite(store, read_overwrite):
                parts.append(overwrite_rows(store, snap, read))
            continue
        added = [e for e in store.delta_entries(snap) if e.kind == KIND_ADD]
        parts += [_read_entry_rows(read, snap.id, e, kinds=pk) for e in added]
    out = _audit_log(read, parts)
    return out.filter(filter) if filter is not None and out.num_rows else out


def read_changelog(
    store: TableStore,
    from_id: int,
    to_id: int,
    *,
    read_overwrite: Optional[bool] = None,
    sequence_number: bool = False,
) -> pa.Table:
    """The changelog files of the snapshots after ``from_id`` up to ``to_id``, as an audit log."""
    read = SplitRead(store, sequence_number=sequence_number)
    parts: list[pa.Table] = []
    for snap in snapshots_between(store, from_id, to_id):
        if snap.commit_kind == _OVERWRITE and reads_overwrite(store, read_overwrite):
            parts.append(overwrite_rows(store, snap, read))
        if not snap.changelog_manifest_list:
            continue
        metas = store.manifest_list.read(snap.changelog_manifest_list)
        parts += [_read_entry_rows(read, snap.id, e, kinds=True) for e in store.entries_of(metas)]
    return _audit_log(read, parts)


def _state(read: SplitRead, snap: Optional[Snapshot], keep: Optional[set[tuple[bytes, int]]]) -> pa.Table:
    splits: list[Split] = plan_splits(read.store, snap) if snap is not None else []
    if keep is not None:
        splits = [s for s in splits if (s.partition, s.bucket) in keep]
    return read.read_splits(splits)


def diff_snapshots(
    store: TableStore,
    from_id: int,
    to_id: Optional[int] = None,
    *,
    read_overwrite: Optional[bool] = None,
    sequence_number: bool = False,
) -> pa.Table:
    """What changed after snapshot ``from_id`` up to ``to_id`` (default: the latest), as an audit
    log (see the module docstring; ``read_overwrite``: a read's ``streaming-read-overwrite``;
    ``sequence_number``: each row's ``_SEQUENCE_NUMBER`` after ``rowkind``, primary-key tables,
    where a changed row's ``-U`` has its old number and its ``+U`` its new one, and a row whose
    values stayed is no change whatever its number)."""
    sm = store.snapshot_manager
    to_snap = sm.snapshot(to_id) if to_id is not None else sm.latest()
    seq = sequence_number and store.is_primary_key_table
    if to_snap is None:
        empty = SplitRead(store, sequence_number=seq).output_schema.empty_table()
        return with_row_kinds(empty, np.zeros(0, dtype=np.int64))
    if from_id < 0 or from_id > to_snap.id:
        raise ValueError(f"from_snapshot_id {from_id} must be between 0 and {to_snap.id}")
    from_snap = sm.snapshot(from_id) if from_id > 0 else None
    if store.is_primary_key_table and store.options.changelog_producer != ChangelogProducer.NONE:
        # its changelog
        return read_changelog(store, from_id, to_snap.id, read_overwrite=read_overwrite, sequence_number=seq)
    if not store.is_primary_key_table:
        if from_id == 0:  # everything up to to_snap, even when its history has expired
            read = SplitRead(store)
            t = read.read_splits(plan_splits(store, to_snap)).cast(read.output_schema)
            return with_row_kinds(t, np.zeros(t.num_rows, dtype=np.int64))
        return delta_rows(store, from_id, to_snap.id, read_overwrite=read_overwrite)
    # the range is cut at each OVERWRITE snapshot, whose own change is skipped (or read as -D/+I)
    overwrites = [s for s in _kinds_between(store, from_id, to_snap.id) if s.commit_kind == _OVERWRITE]
    parts: list[pa.Table] = []
    start, start_snap = from_id, from_snap
    read = SplitRead(store, sequence_number=seq)
    for o in overwrites:
        parts.append(_diff(read, start, start_snap, o.id - 1))
        if reads_overwrite(store, read_overwrite):
            parts.append(overwrite_rows(store, o, read))
        start, start_snap = o.id, o
    parts.append(_diff(read, start, start_snap, to_snap.id))
    parts = [p for p in parts if p.num_rows] or parts[:1]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _kinds_between(store: TableStore, from_id: int, to_id: int) -> list[Snapshot]:
    """The snapshots after ``from_id`` up to ``to_id``; [] when one has expired (the diff of the
    whole range is then all that can be told)."""
    try:
        return snapshots_between(store, from_id, to_id)
    except SnapshotNotFoundError:
        return []


def _diff(read: SplitRead, from_id: int, from_snap: Optional[Snapshot], to_id: int) -> pa.Table:
    """The state difference of primary-key snapshots ``from_id`` and ``to_id`` (touched buckets),
    in ``read``'s columns (its sequence numbers compared with nothing)."""
    if to_id <= from_id:
        return with_row_kinds(read.output_schema.empty_table(), np.zeros(0, dtype=np.int64))
    store = read.store
    to_snap = store.snapshot_manager.snapshot(to_id)
    keep = touched_buckets(store, from_id, to_id)
    old = _state(read, from_snap, keep)
    new = _state(read, to_snap, keep)
    ignore = [SEQUENCE_NUMBER] if read.sequence_number else []
    rows, kinds = diff_by_key(old, new, list(store.schema.primary_keys), ignore=ignore)
    return with_row_kinds(rows, kinds)


def log_changes(
    store: TableStore, commit_kind: str, entries: Sequence[ManifestEntry], changelog: Sequence[ManifestEntry]
) -> list[BucketChanges]:
    """What one snapshot publishes to the table's log, by bucket: what a streaming reader of the
    table's files emits for it. Tables with a changelog producer publish their changelog files
    (``input``: with the APPEND snapshot; ``lookup`` and ``full-compaction``: with the COMPACT
    snapshot that carries them); other primary-key tables and append tables publish the rows their
    APPEND snapshots add, with the row kinds written. OVERWRITE snapshots publish nothing (Paimon's
    ``streaming-read-overwrite`` default)."""
    pk = store.is_primary_key_table
    producer = store.options.changelog_producer if pk else ChangelogProducer.NONE
    if commit_kind == "APPEND":
        if producer == ChangelogProducer.NONE:
            chosen = [e for e in entries if e.kind == KIND_ADD]
            kinds = pk
        elif producer == ChangelogProducer.INPUT:
            chosen, kinds = list(changelog), True
        else:
            return []
    elif commit_kind == "COMPACT" and producer in _FROM_COMPACTION:
        chosen, kinds = list(changelog), True
    else:
        return []
    read = SplitRead(store)
    by_bucket: dict[int, list[pa.Table]] = {}
    for e in sorted(chosen, key=lambda e: (e.bucket, e.file.min_sequence_number)):
        by_bucket.setdefault(e.bucket, []).append(_read_entry_rows(read, 0, e, kinds=kinds))
    out = []
    for bucket, parts in by_bucket.items():
        audit = pa.concat_tables(parts)
        codes = pc.index_in(audit.column(ROWKIND_COLUMN), value_set=pa.array(list(RowKind.SHORT))).to_numpy()
        rows = audit.drop_columns([ROWKIND_COLUMN])
        out.append(BucketChanges(bucket, rows, np.asarray(codes, np.int8), store.schema.id))
    return out


def snapshot_log_changes(store: TableStore, snapshot: Snapshot) -> Optional[list[BucketChanges]]:
    """:func:`log_changes` of a committed snapshot; None when its files have expired."""
    try:
        changelog: list[ManifestEntry] = []
        if snapshot.changelog_manifest_list:
            changelog = store.entries_of(store.manifest_list.read(snapshot.changelog_manifest_list))
        return log_changes(store, snapshot.commit_kind, store.delta_entries(snapshot), changelog)
    except (MissingFileError, SnapshotNotFoundError):
        return None
