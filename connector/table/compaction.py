"""Compaction of tables, or of some of their partitions: compact every bucket that needs it and
commit one COMPACT snapshot, conflict-checked against concurrent commits (a compaction that loses a
race is dropped, never the data).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.options import ChangelogProducer
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.compaction import BucketCompactor, num_levels
from lakelog.connector.lsm.deletion_vectors import (
    BucketDeletionVectors,
    bucket_vectors_entry,
    slot_vector_entries,
    vectors_base,
)
from lakelog.connector.lsm.levels import (
    CompactUnit,
    Levels,
)
from lakelog.connector.lsm.split import Split
from lakelog.connector.table.partition_specs import (
    PartitionSpec,
    matching_partitions,
    partition_spec_list,
    partitions_where,
)
from lakelog.connector.table.replan import commit_planned
from lakelog.connector.table.scan import plan_splits

__all__ = ["compact_split", "compact_table"]

Progress = Callable[[int, int], None]
SortOrder = Callable[[pa.Table], np.ndarray]  # a table's row order (sort compaction)


def compact_split(
    store: TableStore, split: Split, *, full: bool = True, order: Optional[SortOrder] = None
) -> Optional[CommitMessage]:
    """Compact one bucket as of ``split`` (its files in some snapshot); None when nothing to do.

    Primary-key buckets: a full compaction into one sorted run at the top level, or with
    ``full=False`` what universal compaction picks. Append buckets: small files are rewritten
    into files of about the target size; with ``full=False`` only when the bucket holds at least
    ``compaction.min.file-num`` files; with ``order`` (a sort compaction, see
    :mod:`lakelog.connector.table.sort_compaction`) every file, its rows rewritten in that order.
    A file whose manifest record contradicts the table's
    schema (a schema file edited to drop or add the primary key) raises
    :class:`~lakelog.connector.errors.CorruptFileError` before anything is written.
    """
    layout = store.file_layout()
    for f in split.files:
        if not layout.fits_record(f):
            path = store.data_file_path(split.partition, split.bucket, f.file_name, f.external_path)
            raise layout.refused_record(path)
    dv = None
    if store.is_primary_key_table:
        levels = Levels.of(split.files, num_levels(store))
        comp = BucketCompactor(store, split.partition, split.bucket, levels)
        unit = comp.pick(full=full)
        if split.deletion_vectors is not None:
            # the base: the bucket's live index file in the split's snapshot (it may list no vector)
            index = store.index_entries(store.snapshot_manager.snapshot(split.snapshot_id))
            entry = bucket_vectors_entry(index, split.partition, split.bucket)
            base = entry.index_file.file_name if entry is not None else None
            dv = BucketDeletionVectors.of_split(split.deletion_vectors, base)
        if unit is None and (store.options.changelog_producer == ChangelogProducer.LOOKUP or dv is not None):
            unit = comp.pick_level0()  # level-0 data waits for its lookup changelog / its vectors
    else:
        levels = Levels.of([f.upgrade(0) if f.level else f for f in split.files], num_levels(store))
        comp = BucketCompactor(store, split.partition, split.bucket, levels)
        min_files = 2 if full else max(2, store.options.get(store.options.COMPACTION_MIN_FILE_NUM))
        due = len(split.files) >= min_files
        if split.deletion_vectors is not None:
            index = store.index_entries(store.snapshot_manager.snapshot(split.snapshot_id))
            entries = slot_vector_entries(index, split.partition, split.bucket)
            dv = BucketDeletionVectors.of_split(split.deletion_vectors, vectors_base(entries))
            # rows deleted by DELETEs: a full compaction drops them all, else a file past
            # 'compaction.delete-ratio-threshold' makes the bucket due (Paimon's rule)
            share = 0.0 if full else store.options.get(store.options.COMPACTION_DELETE_RATIO_THRESHOLD)
            marked = [len(dv.vectors.get(f.file_name, ())) / max(f.row_count, 1) for f in split.files]
            due = due or any(m > share for m in marked)
        unit = CompactUnit(0, list(levels.level0)) if due or (order is not None and split.files) else None
    if unit is None:
        return None
    before_upper = [f for f in split.files if f.level > 0]
    before_dv = dv.view() if dv is not None else None
    if order is not None:
        res = comp.compute(unit, False, dv.view() if dv is not None else None, order=order)
        levels.update(res.before, res.after)
        if dv is not None:
            dv.update(res.removed, {})
    elif dv is None:
        res = comp.run(unit)
    elif not store.is_primary_key_table:  # the rewritten files leave out the rows DELETEs marked
        res = comp.compute(unit, False, dv.view())
        levels.update(res.before, res.after)
        dv.update(res.removed, {})
    else:  # merge-on-write: the unit's rows supersede older rows outside it, which get marked
        inside = {f.file_name for f in unit.files}
        outside = [f for f in before_upper if f.file_name not in inside]
        res = comp.compute(unit, True, dv.view(), outside)
        levels.update(res.before, res.after)
        dv.update(res.removed, res.dv_marks)
    if (
        store.is_primary_key_table
        and store.options.changelog_producer == ChangelogProducer.LOOKUP
        and any(f.level == 0 for f in unit.files)
    ):
        # level-0 data moves up: its changelog (write-only writers leave this to compaction)
        keys = [comp.keys_of(f) for f in unit.files if f.level == 0]
        upper = [f for f in levels.all_files() if f.level > 0]
        after_dv = dv.view() if dv is not None else None
        res.changelog += comp.lookup_changelog(before_upper, upper, keys, before_dv, after_dv)
    msg = CommitMessage(
        partition=split.partition,
        bucket=split.bucket,
        total_buckets=split.total_buckets,
        compact_before=res.before,
        compact_after=res.after,
        compact_changelog_files=res.changelog,
    )
    if dv is not None and store.is_primary_key_table:
        msg.dv_view = [f.file_name for f in levels.all_files() if f.level > 0]
    if dv is not None and dv.changed:
        msg.dv_changed, msg.dv_base = True, dv.base
        msg.dv_file = dv.write(store, split.partition, split.bucket)
    elif dv is not None and not store.is_primary_key_table:
        # a DELETE committed meanwhile may have marked rows of the files this compaction rewrote:
        # it must not commit then (their rows would come back)
        msg.dv_guard, msg.dv_base = True, dv.base
    return msg


def compact_table(
    store: TableStore,
    *,
    full: bool = True,
    partitions: Optional[Sequence[PartitionSpec]] = None,
    where: Optional[str] = None,
    progress: Optional[Progress] = None,
    commit_user: Optional[str] = None,
    attempts: int = 5,
    order: Optional[SortOrder] = None,
) -> Optional[int]:
    """Compact every bucket that needs it (all of them with ``full``) and commit once as a
    COMPACT snapshot; return its id, or None when there was nothing to do. ``partitions``: only
    the buckets of the partitions these specs match (see
    :mod:`lakelog.connector.table.partition_specs`; a spec matching none compacts nothing).
    ``where``: only those of the partitions whose values satisfy this predicate on the partition
    fields (Paimon's ``where``; not together with ``partitions``).

    A compaction that loses a race (another compaction committed first, or an expiration removed
    files of the snapshot it planned on) is dropped, its files deleted, and planned again on the
    new latest snapshot, up to ``attempts`` times. ``order``: a sort compaction (every file of
    the chosen buckets rewritten in that order)."""
    if partitions is not None and where is not None:
        raise InvalidInputError(f"compaction of {store.path}: give partitions or where, not both")
    specs = partition_spec_list(store, partitions)
    if where is not None:
        partitions_where(store, [], where)  # a bad predicate fails before any work

    def plan(snap: Snapshot, messages: list[CommitMessage]) -> None:
        splits = plan_splits(store, snap)
        if specs is not None:
            present = {s.partition for s in splits}
            chosen = set().union(*(matching_partitions(store, present, spec) for spec in specs))
            splits = [s for s in splits if s.partition in chosen]
        if where is not None:
            chosen = partitions_where(store, {s.partition for s in splits}, where)
            splits = [s for s in splits if s.partition in chosen]
        for i, split in enumerate(splits):
            msg = compact_split(store, split, full=full, order=order)
            if msg is not None:
                messages.append(msg)
            if progress is not None:
                progress(i + 1, len(splits))

    return commit_planned(
        store,
        plan,
        what=f"compaction of {store.path}",
        advice="nothing was committed: run it again, or while fewer writers compact",
        commit_user=commit_user,
        attempts=attempts,
        compactor=True,
    )
