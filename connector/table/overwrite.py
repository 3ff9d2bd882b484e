"""Overwrites and rescales: one OVERWRITE snapshot replaces whole partitions.

* :func:`overwrite` is Paimon's ``INSERT OVERWRITE``: with ``dynamic-partition-overwrite`` (the
  default, partitioned tables) it replaces the partitions the new rows fall into, and rows nothing;
  otherwise (or for unpartitioned tables) every partition matching the static partition spec, the
  whole table without one, and an empty overwrite then empties them.
* :func:`rescale` rewrites partitions of a fixed-bucket table with another bucket count: their
  merged rows are read from one snapshot and written back into fresh buckets (the table's current
  ``bucket``, or the count given, as Paimon's ``sys.rescale`` does: the table option is left alone).
  Readers keep reading the snapshot they started on; streaming readers see no change (an
  OVERWRITE is skipped unless ``streaming-read-overwrite``). A commit into a partition being
  rescaled, made after the rescale read it, makes the rescale start again (its rows would be lost);
  compactions meanwhile do not matter (they change no row).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import (
    CommitConflictError,
    InvalidInputError,
    MissingFileError,
    OptionError,
    SnapshotNotFoundError,
)
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.lock import LockTimeoutError
from lakelog.connector.format.options import LogSystem
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.arguments import integer
from lakelog.connector.table.arrow_input import to_arrow_table
from lakelog.connector.table.commit import (
    OverwriteScope,
    TableCommit,
    overwrites_dynamically,
    partition_label,
)
from lakelog.connector.table.maintenance import after_commit
from lakelog.connector.table.partition_specs import (
    PartitionSpec,
    matching_partitions,
    partition_spec,
    partition_spec_list,
)
from lakelog.connector.table.routing import PartitionBucketCounts, partition_groups
from lakelog.connector.table.scan import plan_splits
from lakelog.connector.table.write import TableWrite

__all__ = ["overwrite", "rescale"]

log = logging.getLogger(__name__)

def _with_spec_columns(store: TableStore, table: pa.Table, spec: dict[str, Any]) -> pa.Table:
    """Rows lacking a partition column named by the static spec take its value; rows that hold
    one must match it."""
    arrow = store.schema.arrow_schema()
    for k, v in spec.items():
        if k not in table.column_names:
            table = table.append_column(arrow.field(k), pa.array([v] * table.num_rows, arrow.field(k).type))
            continue
        column = table.column(k)
        bad = (
            pc.invert(pc.fill_null(pc.equal(column, pa.scalar(v, column.type)), False))
            if v is not None
            else (pc.is_valid(column))
        )
        if table.num_rows and pc.any(bad).as_py():
            row = pc.filter(column, bad)[0].as_py()
            raise InvalidInputError(
                f"trying to overwrite partition {k}={v!r} of {store.path}, but a row holds {k}={row!r}"
            )
    return table


def overwrite(
    store: TableStore,
    data: Any,
    partition: Optional[PartitionSpec] = None,
    *,
    commit_user: Optional[str] = None,
) -> Optional[int]:
    """Overwrite partitions with ``data`` (upserts for primary-key tables) in one OVERWRITE
    snapshot; return its id, or None when nothing was committed (see the module docstring)."""
    spec = partition_spec(store, partition)
    table = _with_spec_columns(store, to_arrow_table(data), spec)
    store.check_file_records(store.live_entries(store.snapshot_manager.latest()))
    keys = list(store.schema.partition_keys)
    if overwrites_dynamically(store, store.options.dynamic_partition_overwrite):
        written = frozenset(g.partition for g in partition_groups(store, table.select(keys)))
        if not written:
            return None  # Paimon: a dynamic overwrite without rows changes nothing
        scope = OverwriteScope(partitions=written)
    else:
        scope = OverwriteScope(spec=tuple(spec.items()))
    writer = TableWrite(store, overwrite=True, overwrite_scope=scope.matcher(store))
    return _commit(store, writer, [table], scope, commit_user)


def _commit(
    store: TableStore,
    writer: TableWrite,
    batches: Iterable[pa.Table | pa.RecordBatch],
    scope: OverwriteScope,
    commit_user: Optional[str],
    guard: Any = None,
) -> Optional[int]:
    committer = TableCommit(store, commit_user)
    msgs: list[CommitMessage] = []
    try:
        for b in batches:
            if b.num_rows:
                writer.write(b)
        msgs = writer.prepare_commit()
        sid = committer.overwrite(msgs, scope, guard=guard)
    except BaseException:
        committer.discard_unpublished(msgs)
        writer.abort()
        raise
    writer.close()
    after_commit(store)
    return sid


def rescale(
    store: TableStore,
    partitions: Optional[Sequence[PartitionSpec]] = None,
    buckets: Optional[int] = None,
    *,
    commit_user: Optional[str] = None,
    attempts: int = 3,
) -> Optional[int]:
    """Rewrite partitions of a fixed-bucket table with ``buckets`` buckets (default: the table's
    ``bucket`` option) in one OVERWRITE snapshot; return its id, or None when every chosen
    partition already has that count. ``partitions``: partition specs (each a subset of the
    partition fields; every matching partition is chosen); default: every partition whose count
    differs. A spec matching no partition raises :class:`InvalidInputError`."""
    if store.schema.bucket_mode != BucketMode.HASH_FIXED:
        raise OptionError(
            f"table {store.path} has bucket = {store.options.bucket} ({store.schema.bucket_mode}): only "
            "fixed-bucket tables (bucket > 0) are rescaled"
        )
    if store.options.log_system == LogSystem.KAFKA:
        raise OptionError(
            f"table {store.path} has a Kafka log: its records go to the topic partition of their bucket, "
            "and a rewrite would move keys to other buckets, so a key would have changes in two topic "
            "partitions, whose order Kafka does not keep. ALTER 'bucket' instead: partitions written "
            "from then on take the new count, existing ones keep theirs"
        )
    target = store.options.bucket if buckets is None else integer("buckets", buckets)
    if target < 1:
        raise OptionError(f"cannot rescale {store.path} to {target} buckets: give a count greater than 0")
    specs = partition_spec_list(store, partitions)
    for attempt in range(attempts):
        snap = store.snapshot_manager.latest()
        if snap is None:
            raise SnapshotNotFoundError(f"table {store.path} has no snapshot; there is nothing to rescale")
        chosen = _chosen(store, snap, specs, target)
        if not chosen:
            return None
        scope = OverwriteScope(partitions=frozenset(chosen))
        splits = [s for s in plan_splits(store, snap) if s.partition in chosen]
        reader = SplitRead(store).to_reader(splits)
        writer = TableWrite(
            store, overwrite=True, overwrite_scope=scope.matcher(store), buckets=target, merged_rows=True
        )
        try:
            sid = _commit(store, writer, reader, scope, commit_user, _untouched_since(store, snap, chosen))
        except (CommitConflictError, MissingFileError, SnapshotNotFoundError) as e:
            expired = not store.snapshot_manager.holds(snap)
            retry = isinstance(e, CommitConflictError) and not isinstance(e, LockTimeoutError)
            if attempt == attempts - 1 or not (retry or expired):
                raise
            # another writer touched the partitions, or the snapshot read expired under the rewrite
            log.warning("rescale of %s lost a race (%s); reading the partitions again", store.path, e)
            continue
        log.info(
            "rescaled %d partition(s) of %s to %d buckets: snapshot %s", len(chosen), store.path, target, sid
        )
        return sid
    raise AssertionError("unreachable")


def _chosen(
    store: TableStore, snap: Snapshot, specs: Optional[list[dict[str, Any]]], target: int
) -> set[bytes]:
    live = store.live_entries(snap)
    counts = PartitionBucketCounts(store, store.options.bucket)
    present = {e.partition for e in live}
    counts.learn(present, live)
    if specs is None:
        return {p for p in present if counts.count(p, snap) != target}
    chosen: set[bytes] = set()
    for spec in specs:
        hit = matching_partitions(store, present, spec)
        if not hit:
            raise InvalidInputError(
                f"partition {spec} of {store.path} holds no data files; there is nothing to rescale"
            )
        chosen |= hit
    return chosen


def _untouched_since(store: TableStore, base: Snapshot, partitions: set[bytes]) -> Any:
    """A commit guard: no APPEND or OVERWRITE after ``base`` may have touched ``partitions``."""

    def guard(latest: Optional[Snapshot]) -> None:
        if latest is None or latest.id <= base.id:
            return
        for sid in range(base.id + 1, latest.id + 1):
            try:
                s = store.snapshot_manager.snapshot(sid)
            except SnapshotNotFoundError:
                raise CommitConflictError(
                    f"snapshot {sid} of {store.path} expired before the rescale could check what it wrote"
                ) from None
            if s.commit_kind == "COMPACT":
                continue
            touched = {e.partition for e in store.delta_entries(s)} & partitions
            if touched:
                raise CommitConflictError(
                    f"{s.commit_kind} snapshot {sid} wrote {partition_label(store, next(iter(touched)))} "
                    f"of {store.path} while it was being rescaled"
                )

    return guard
