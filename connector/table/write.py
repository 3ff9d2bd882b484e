"""The write path: validate rows, assign partition and bucket, and keep one bucket writer (an LSM
tree for primary-key tables) per touched bucket. Produces plain, picklable commit messages for a
committer.

Everything on the row path is vectorised: one stable sort of the buffer's partition columns groups
the rows, each partition's rows get their buckets at once (a hash modulo the partition's own bucket
count; an assigner of the hash index in dynamic bucket mode; the key index for cross-partition
updates, see ``routing``, ``dynamic_bucket``, ``cross_partition``), and each bucket writer sorts and
merges its own rows in Arrow. Python loops run over partitions and buckets only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import (
    CommitConflictError,
    InvalidInputError,
    OptionError,
    SnapshotNotFoundError,
)
from lakelog.connector.format.bucket import bucket_key_hashes, buckets_from_hashes
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.defaults import default_values
from lakelog.connector.format.fileio import storage_errors
from lakelog.connector.format.index_file import HASH_INDEX, IndexManifestEntry
from lakelog.connector.format.key_value import VALUE_KIND, RowKind
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.manifest_files import _Namer
from lakelog.connector.format.options import ChangelogProducer, MergeEngine
from lakelog.connector.format.schema import BucketMode
from lakelog.connector.format.sketches import UNION_FUNCTIONS, check_column
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.eventual import EventualLogWriter
from lakelog.connector.lsm.bucket_writer import ARRIVAL
from lakelog.connector.lsm.merge.engine import merge_function_for
from lakelog.connector.table.arrow_input import conform, to_arrow_table
from lakelog.connector.table.routing import (
    BucketGroup,
    PartitionBucketCounts,
    partition_groups,
    split_by_bucket,
)
from lakelog.connector.table.routing import bucket_groups as bucket_groups

__all__ = ["TableWrite", "bucket_groups"]

FULL_COMPACTION_PROPERTY = "lakelog.full-compaction"
_ASSIGNED = "__lakelog_assigned_bucket"
PartitionFilter = Callable[[bytes], bool]


class TableWrite:
    """Buffers rows and turns them into level-0 files; compacts the touched buckets as the table's
    options ask; hands out commit messages on :meth:`prepare_commit`.

    The buffer is bounded by ``write-buffer-size``: when full it is flushed into level-0 files or,
    with ``write-buffer-spillable``, sorted and spilled to local disk and merged into one level-0
    run at the next :meth:`prepare_commit`.

    A writer keeps the table's schema and options as they were when it started: an ``ALTER TABLE``
    while it runs does not change how it writes (Paimon's running writers behave the same). Each
    partition is written with the bucket count its files record, new partitions with the writer's.

    ``overwrite=True`` makes an overwrite's writer: previous files are ignored (sequence numbers
    start again, dynamic-bucket indexes start empty), every partition is written with ``buckets``
    (default: the table's count), and ``overwrite_scope`` names the partitions the overwrite
    replaces (a cross-partition table must not move keys out of the others). ``merged_rows``: the
    rows are a table's merged rows, one per key (a rescale), stored as they are rather than merged
    again (an aggregation's ``count`` would count them anew).

    ``keep_view=True``: in dynamic bucket modes the writer never loads its partitions' indexes (or
    the cross-partition key index) again when others commit; its own state stays authoritative. For
    a writer that is the only one of its partitions and hands its messages to a committer that
    commits them later (a Flink sink writer flushes again before its previous flush is committed:
    loading the latest snapshot then would forget the keys it placed meanwhile).
    """

    def __init__(
        self,
        store: TableStore,
        *,
        write_only: Optional[bool] = None,
        overwrite: bool = False,
        overwrite_scope: Optional[PartitionFilter] = None,
        buckets: Optional[int] = None,
        merged_rows: bool = False,
        keep_view: bool = False,
    ) -> None:
        store = store.with_schema(store.schema)  # the writer's own view: an ALTER does not reach it
        self.store = store
        self.schema = store.schema
        opts = store.options
        self.mode = self.schema.bucket_mode
        self.overwrite = overwrite
        self.num_buckets = opts.bucket if buckets is None else int(buckets)
        if buckets is not None:
            if not overwrite:
                raise OptionError("TableWrite(buckets=...) rewrites partitions: it needs overwrite=True")
            if self.num_buckets < 1 or self.mode != BucketMode.HASH_FIXED:
                raise OptionError(
                    f"cannot write {store.path} with {buckets} buckets: only fixed-bucket tables "
                    "(bucket > 0) are rescaled, to a count greater than 0"
                )
        self.pk = list(self.schema.primary_keys)
        self.keys = store.key_names
        self.partition_keys = list(self.schema.partition_keys)
        self.bucket_keys = list(self.schema.bucket_keys) if self.mode != BucketMode.BUCKET_UNAWARE else []
        self.arrow_schema = self.schema.arrow_schema()
        self._field_types = {f.name: f.type for f in self.schema.fields}
        self._defaults = default_values(self.schema.fields, self.schema.options)
        self.write_only = (opts.write_only if write_only is None else write_only) or overwrite
        self.spillable = bool(opts.write_buffer_spillable)
        self.merge = merge_function_for(store) if self.pk else None
        if merged_rows and self.pk:  # rows already merged (a rescale): stored as they are
            from lakelog.connector.lsm.kv import DEDUPLICATE

            self.merge = DEDUPLICATE
        # columns of serialized sets (rbm32, sketches): each value is checked before it is written, so
        # that no compaction ever meets one it cannot unite
        self._set_columns = [(c, spec.name) for c, spec in getattr(self.merge, "aggregators", {}).items()
                             if spec.name in UNION_FUNCTIONS]
        self._rowkind_field = opts.get(opts.ROWKIND_FIELD) if self.pk else None
        self._buffer: list[pa.Table] = []
        self._buffered_bytes = 0
        self._arrival = 0
        self._write_buffer_size = int(opts.write_buffer_size)
        self._buckets: dict[tuple[bytes, int], Any] = {}
        self._restored: set[bytes] = set()
        self._spill_dir: Optional[str] = None
        self._delta_commits: Optional[int] = None
        self._compactor_pool: Optional[ThreadPoolExecutor] = None
        self._pool_lock = threading.Lock()
        self.full_compacted = False  # a full-compaction.delta-commits compaction ran in this commit
        self.stale = False  # a compaction found its inputs gone (see KeyValueBucketWriter): reload
        self.eventual_log: Optional[EventualLogWriter] = None  # set by writers of eventual logs
        self._assigned: Optional[bool] = None  # rows come with buckets (write_bucketed) or not
        self.counts = PartitionBucketCounts(store, self.num_buckets)
        self.overwrite_scope = overwrite_scope
        self.keep_view = keep_view
        # the snapshot the restored state reflects (dynamic modes refresh it when others commit)
        self.view_snapshot_id: Optional[int] = None
        self.assigner: Any = None
        self.key_index: Any = None
        self._hash_indexes: dict[tuple[bytes, int], Any] = {}
        self._index_entries: dict[tuple[bytes, int], IndexManifestEntry] = {}
        self._index_namer = _Namer("index")
        if self.mode == BucketMode.HASH_DYNAMIC:
            from lakelog.connector.table.dynamic_bucket import DynamicBucketAssigner

            self.assigner = DynamicBucketAssigner(store)

    # ---- input --------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        table = to_arrow_table(data)
        kinds = None
        if self._rowkind_field:
            kinds = _row_kinds_from_field(table, self._rowkind_field)
        table = conform(
            table, self.arrow_schema, required=self.pk, types=self._field_types, defaults=self._defaults
        )
        self._append(table, RowKind.INSERT if kinds is None else kinds)

    def write_changes(self, data: Any, kinds: Sequence[int] | np.ndarray) -> None:
        """Write rows with explicit row kinds (0 +I, 1 -U, 2 +U, 3 -D), e.g. a Flink changelog."""
        if not self.pk:
            raise InvalidInputError("row kinds other than +I need a primary-key table")
        table = conform(
            to_arrow_table(data), self.arrow_schema, required=self.pk, allow_missing=True,
            types=self._field_types, defaults=self._defaults,
        )
        k = np.asarray(kinds, dtype=np.int8)
        if len(k) != table.num_rows or ((k < 0) | (k > 3)).any():
            raise InvalidInputError("kinds must hold one row kind (0..3) per row")
        self._append(table, k)

    def write_bucketed(self, data: Any, buckets: Sequence[int] | np.ndarray, kinds: Any = None) -> None:
        """Write rows whose buckets were decided upstream (a Flink assigner stage, Paimon's
        ``write(row, bucket)``): one bucket per row, in each row's own partition. ``kinds`` as in
        :meth:`write_changes` (default +I). A writer takes either such rows or rows it routes itself."""
        if self._assigned is False:
            raise InvalidInputError("this writer routes its rows itself; use another for write_bucketed()")
        self._assigned = True
        table = to_arrow_table(data)
        table = conform(table, self.arrow_schema, required=self.pk, allow_missing=kinds is not None)
        b = np.asarray(buckets, dtype=np.int32)
        if len(b) != table.num_rows or (b < 0).any():
            raise InvalidInputError("buckets must hold one bucket (>= 0) per row")
        table = table.append_column(_ASSIGNED, pa.array(b, pa.int32()))
        if kinds is None:
            self._append(table, RowKind.INSERT)
            return
        k = np.asarray(kinds, dtype=np.int8)
        if len(k) != table.num_rows or ((k < 0) | (k > 3)).any():
            raise InvalidInputError("kinds must hold one row kind (0..3) per row")
        self._append(table, k)

    def delete(self, data: Any) -> None:
        if not self.pk:
            raise InvalidInputError("delete() needs a primary-key table; this table has no primary key")
        table = to_arrow_table(data)
        missing = [k for k in self.pk if k not in table.column_names]
        if missing:
            raise InvalidInputError(f"delete() rows must hold every primary-key column; missing {missing}")
        provided = set(table.column_names)
        table = conform(
            table, self.arrow_schema, required=self.pk, allow_missing=True, types=self._field_types,
            defaults=self._defaults,
        )
        self._append(self._fill_not_null(table, provided), RowKind.DELETE)

    def _fill_not_null(self, table: pa.Table, provided: set[str]) -> pa.Table:
        """Give NOT NULL columns that a delete omitted a placeholder value. Only engines that
        ignore a deleted row's values (deduplicate, first-row) accept that."""
        missing = [f for f in self.arrow_schema if not f.nullable and f.name not in provided]
        if not missing:
            return table
        engine = self.store.options.merge_engine
        if engine not in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW):
            names = [f.name for f in missing]
            raise InvalidInputError(
                f"delete() rows must hold the NOT NULL column(s) {names}: the {engine.value} merge engine "
                "uses a deleted row's values"
            )
        for f in missing:
            i = table.schema.get_field_index(f.name)
            table = table.set_column(i, f, pa.nulls(table.num_rows, f.type).fill_null(_zero(f.type)))
        return table

    def _append(self, table: pa.Table, kind: int | np.ndarray) -> None:
        if _ASSIGNED not in table.column_names:
            if self._assigned:
                raise InvalidInputError("this writer takes rows with buckets (write_bucketed) only")
            self._assigned = False
        if self.pk and not isinstance(kind, int) or kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE):
            table, kind = self._drop_ignored_kinds(table, kind)
        if table.num_rows == 0:
            return
        for k in self.pk:
            if table.column(k).null_count:
                raise InvalidInputError(f"primary-key column {k!r} holds null(s); nothing was written")
        for column, function in self._set_columns:
            check_column(function, table.column(column), column)
        n = table.num_rows
        kinds = np.full(n, kind, dtype=np.int8) if isinstance(kind, int) else kind
        if self.eventual_log is not None:  # the log gets the changes now, before any commit
            self.eventual_log.send(table, kinds, self._row_buckets(table), self.schema.id)
        table = table.append_column(VALUE_KIND, pa.array(kinds, pa.int8()))
        table = table.append_column(
            ARRIVAL, pa.array(np.arange(self._arrival, self._arrival + n, dtype=np.int64))
        )
        self._arrival += n
        self._buffer.append(table)
        self._buffered_bytes += table.nbytes
        if self._buffered_bytes >= self._write_buffer_size:
            self.flush(spill=self.spillable)

    def conformed(self, data: Any) -> pa.Table:
        """``data`` in the table's columns and types (what :meth:`write_changes` would take)."""
        return conform(to_arrow_table(data), self.arrow_schema, required=self.pk, allow_missing=True)

    def row_buckets(self, table: pa.Table) -> np.ndarray:
        """The bucket of every row of ``table`` (which holds at least the bucket key's columns)."""
        return self._row_buckets(table)

    def _row_buckets(self, table: pa.Table) -> np.ndarray:
        """Each row's bucket as :meth:`flush` will route it: rows placed upstream keep theirs, and a
        fixed-bucket table hashes each partition's rows with that partition's count (the count its
        files record, which an ``ALTER`` of ``bucket`` does not change)."""
        if _ASSIGNED in table.column_names:
            return table.column(_ASSIGNED).to_numpy().astype(np.int32, copy=False)
        if self.mode != BucketMode.HASH_FIXED:
            return np.zeros(table.num_rows, dtype=np.int32)
        parts = partition_groups(self.store, table)
        self._restore({g.partition for g in parts} - self._restored)
        hashes = bucket_key_hashes(table, self.bucket_keys, self.store.field_types(self.bucket_keys))
        out = np.empty(table.num_rows, dtype=np.int32)
        for g in parts:
            out[g.rows] = buckets_from_hashes(hashes[g.rows], self.total_buckets(g.partition))
        return out

    def log_offsets(self) -> Optional[dict[int, int]]:
        """An eventual log's offset after this writer's records per partition (None without one)."""
        return self.eventual_log.flush() if self.eventual_log is not None else None

    def _drop_ignored_kinds(
        self, table: pa.Table, kind: int | np.ndarray
    ) -> tuple[pa.Table, int | np.ndarray]:
        """Drop -U rows with ``ignore-update-before`` (and -U/-D with ``ignore-delete``)."""
        opts = self.store.options
        ignored = set()
        if opts.ignore_update_before:
            ignored.add(RowKind.UPDATE_BEFORE)
        if opts.ignore_delete:
            ignored |= {RowKind.UPDATE_BEFORE, RowKind.DELETE}
        if not ignored:
            return table, kind
        kinds = np.full(table.num_rows, kind, dtype=np.int8) if isinstance(kind, int) else kind
        keep = ~np.isin(kinds, list(ignored))
        return table.filter(pa.array(keep)), kinds[keep]

    # ---- flush ----------------------------------------------------------------------------------
    def flush(self, *, spill: bool = False) -> None:
        """Turn the buffer into one sorted run per touched bucket: a level-0 file, or with
        ``spill`` a sorted chunk on local disk."""
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer, promote_options="default")
        self._buffer = []
        self._buffered_bytes = 0
        self._refresh()
        if self.schema.cross_partition_update and not self._assigned:
            table = self._resolve_cross_partition(table)
        groups = self._route(table)
        # each bucket writer then takes and sorts its own rows by key, the buckets in parallel
        if _ASSIGNED in table.column_names:
            table = table.drop_columns([_ASSIGNED])
        if self.schema.cross_partition_update:
            from lakelog.connector.table.cross_partition import BUCKET_COLUMN

            if BUCKET_COLUMN in table.column_names:
                table = table.drop_columns([BUCKET_COLUMN])
        work = [(self._bucket(partition, bucket), rows) for _, partition, bucket, rows in groups]
        _in_parallel(lambda wr: wr[0].add(table.take(pa.array(wr[1])), spill=spill), work)

    def _route(self, table: pa.Table) -> list[BucketGroup]:
        """The (partition values, partition, bucket, rows) groups of a buffer (see the class)."""
        parts = partition_groups(self.store, table)
        self._restore({g.partition for g in parts} - self._restored)
        assigned = None
        if _ASSIGNED in table.column_names:
            assigned = table.column(_ASSIGNED).to_numpy()
        elif self.schema.cross_partition_update:
            from lakelog.connector.table.cross_partition import BUCKET_COLUMN

            assigned = table.column(BUCKET_COLUMN).to_numpy()
        hashes = None
        if self.mode == BucketMode.HASH_DYNAMIC or (self.mode == BucketMode.HASH_FIXED and assigned is None):
            hashes = bucket_key_hashes(table, self.bucket_keys, self.store.field_types(self.bucket_keys))
        out: list[BucketGroup] = []
        for g in parts:
            new: Optional[np.ndarray] = None  # dynamic buckets: rows whose key the index lacked
            if assigned is not None:
                buckets = assigned[g.rows]
                self._check_assigned(g.partition, buckets)
            elif self.mode == BucketMode.HASH_FIXED:
                assert hashes is not None
                buckets = buckets_from_hashes(hashes[g.rows], self.total_buckets(g.partition))
            elif self.mode == BucketMode.HASH_DYNAMIC:
                assert hashes is not None
                buckets, new = self.assigner.assign_new(g.partition, hashes[g.rows])
            else:
                buckets = np.zeros(len(g.rows), dtype=np.int32)
            for bucket, rows in split_by_bucket(g.rows, buckets):
                out.append((g.values, g.partition, bucket, rows))
            if self.mode == BucketMode.HASH_DYNAMIC:
                assert hashes is not None
                # a key the assigner knew is in its bucket's hash set already (both were loaded
                # from one snapshot): only new keys grow the sets; rows placed upstream all count
                rows = g.rows if new is None else g.rows[new]
                for bucket, of_bucket in split_by_bucket(rows, buckets if new is None else buckets[new]):
                    self._hash_index(g.partition, bucket).add(hashes[of_bucket])
        return out

    def _check_assigned(self, partition: bytes, buckets: np.ndarray) -> None:
        if self.mode != BucketMode.HASH_FIXED or not len(buckets):
            return
        n = self.total_buckets(partition)
        if int(buckets.max()) >= n:
            from lakelog.connector.table.commit import partition_label

            raise InvalidInputError(
                f"Try to write {partition_label(self.store, partition)} of {self.store.path} into bucket "
                f"{int(buckets.max())}, but the partition has {n} buckets"
            )

    def total_buckets(self, partition: bytes) -> int:
        """The bucket count a partition is written with (-1 in dynamic bucket modes)."""
        if self.mode != BucketMode.HASH_FIXED:
            return -1
        if self.overwrite:
            return self.num_buckets
        return self.counts.count(partition)

    def _bucket(self, partition: bytes, bucket: int) -> Any:
        from lakelog.connector.lsm.bucket_writer import AppendBucketWriter, KeyValueBucketWriter

        slot = (partition, bucket)
        w = self._buckets.get(slot)
        if w is None:
            cls = KeyValueBucketWriter if self.pk else AppendBucketWriter
            w = cls(self, partition, bucket, [])
            self._buckets[slot] = w
        return w

    def committed_files(self, partition: bytes, bucket: int) -> list[DataFileMeta]:
        """The bucket's files in the latest snapshot (a bucket writer whose view went stale reloads
        them; see ``KeyValueBucketWriter``)."""
        _, live = self.store.on_latest(self.store.live_entries)
        return [e.file for e in live if e.partition == partition and e.bucket == bucket]

    def committed_vectors(self, partition: bytes, bucket: int) -> Any:
        """The bucket's deletion vectors in the latest snapshot (deletion-vector mode)."""
        from lakelog.connector.lsm.deletion_vectors import BucketDeletionVectors, bucket_vectors_entry

        _, index = self.store.on_latest(self.store.index_entries)
        return BucketDeletionVectors.load(self.store, bucket_vectors_entry(index, partition, bucket))

    def _hash_index(self, partition: bytes, bucket: int) -> Any:
        from lakelog.connector.table.dynamic_bucket import BucketHashIndex

        slot = (partition, bucket)
        index = self._hash_indexes.get(slot)
        if index is None:
            index = BucketHashIndex.load(self.store, self._index_entries.get(slot))
            self._hash_indexes[slot] = index
        return index

    def _restore(self, partitions: set[bytes]) -> None:
        """Load each touched partition's committed state, all from one snapshot: its buckets' files
        (LSM trees and sequence numbers), bucket count, and dynamic-bucket index. An overwrite's
        writer starts every partition empty."""
        if not partitions:
            return
        if self.overwrite:
            if self.assigner is not None:
                for p in partitions:
                    self.assigner.load_empty(p)
            self._restored |= partitions
            return
        from lakelog.connector.lsm.bucket_writer import AppendBucketWriter, KeyValueBucketWriter

        dynamic = self.mode == BucketMode.HASH_DYNAMIC
        vectors = self.pk and self.store.options.deletion_vectors_enabled

        def read(snap: Optional[Snapshot]) -> tuple[list[Any], list[IndexManifestEntry]]:
            wanted = dynamic or vectors
            return self.store.live_entries(snap), (self.store.index_entries(snap) if wanted else [])

        latest, (live, index) = self.store.on_latest(read)  # retried when expired under us
        if self.view_snapshot_id is None:
            self.view_snapshot_id = latest.id if latest is not None else 0
        files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self.store.check_file_records(live)  # a schema file edited to drop or add the primary key
        for e in live:
            if e.partition in partitions:
                files.setdefault((e.partition, e.bucket), []).append(e.file)
        if self.mode == BucketMode.HASH_FIXED:
            self.counts.learn([p for p in partitions if not self.counts.known(p)], live)
        if dynamic:
            for e in index:
                if e.partition in partitions and e.index_file.index_type == HASH_INDEX:
                    self._index_entries[(e.partition, e.bucket)] = e
            for p in partitions:
                if not self.assigner.loaded(p):
                    self.assigner.load(p, index)
        for (p, b), fs in files.items():
            if (p, b) in self._buckets:
                continue
            if not self.pk:
                self._buckets[(p, b)] = AppendBucketWriter(self, p, b, fs)
                continue
            dv = None
            if vectors:
                from lakelog.connector.lsm.deletion_vectors import BucketDeletionVectors, bucket_vectors_entry

                dv = BucketDeletionVectors.load(self.store, bucket_vectors_entry(index, p, b))
            self._buckets[(p, b)] = KeyValueBucketWriter(self, p, b, fs, dv)
        self._restored |= partitions

    # ---- dynamic modes: refreshing the view, cross-partition keys --------------------------------
    def _pending(self) -> bool:
        """Whether rows were flushed that no commit message has carried yet (compactions in flight
        do not count: dropping them loses nothing)."""
        for w in self._buckets.values():
            if w.new_files or getattr(w, "spills", None) or getattr(w, "changelog", None):
                return True
        return any(i.changed for i in self._hash_indexes.values())

    def _refresh(self) -> None:
        """Dynamic bucket modes: when another writer committed since this writer loaded its
        indexes, and it holds nothing uncommitted, load them again (before routing rows by them)."""
        if self.overwrite or self.keep_view:
            return
        if not (self.mode == BucketMode.HASH_DYNAMIC or self.schema.cross_partition_update):
            return
        if self.view_snapshot_id is None:
            return
        if (self.store.snapshot_manager.latest_id() or 0) == self.view_snapshot_id or self._pending():
            return
        self.reload()

    def reload(self) -> None:
        """Forget every restored partition (they load again from the latest snapshot when written)."""
        for w in self._buckets.values():
            if self.pk:
                w.close()
        self._buckets.clear()
        self._restored.clear()
        self._hash_indexes.clear()
        self._index_entries.clear()
        self.counts = PartitionBucketCounts(self.store, self.num_buckets)
        if self.assigner is not None:
            from lakelog.connector.table.dynamic_bucket import DynamicBucketAssigner

            self.assigner = DynamicBucketAssigner(self.store)
        self.key_index = None
        self.view_snapshot_id = None

    def committed(self, snapshot_ids: Sequence[int]) -> None:
        """Tell the writer which snapshots its last messages made: when they directly follow its
        view, the view moves on to them (no other writer committed in between)."""
        if not snapshot_ids or self.view_snapshot_id is None:
            return
        ids = sorted(snapshot_ids)
        if ids == list(range(self.view_snapshot_id + 1, ids[-1] + 1)):
            self.view_snapshot_id = ids[-1]

    def commit_guard(self) -> Optional[Callable[[Optional[Snapshot]], None]]:
        """For cross-partition tables: a commit guard refusing to commit when another writer
        committed rows since this writer loaded its key index (a key could then live in two
        partitions). None for other tables (their conflicts are checked by the committer)."""
        if not self.schema.cross_partition_update or self.overwrite:
            return None

        def guard(latest: Optional[Snapshot]) -> None:
            view = self.view_snapshot_id
            if view is None or latest is None or latest.id <= view:
                return
            sm = self.store.snapshot_manager
            for sid in range(view + 1, latest.id + 1):
                try:
                    kind = sm.snapshot(sid).commit_kind
                except SnapshotNotFoundError:
                    kind = "expired"
                if kind != "COMPACT":
                    raise CommitConflictError(
                        f"cross-partition table {self.store.path} got {kind} snapshot {sid} from another "
                        f"writer after this writer loaded its key index (snapshot {view}); a key could now "
                        "live in two partitions. Cross-partition upsert takes one writer at a time: write "
                        "the rows again"
                    )

        return guard

    def _resolve_cross_partition(self, table: pa.Table) -> pa.Table:
        from lakelog.connector.table.cross_partition import KeyIndex, locked_by

        if self.key_index is None:
            index = KeyIndex(self.store, default_buckets=self.num_buckets)
            if self.overwrite:
                scope = self.overwrite_scope
                snap = self.store.snapshot_manager.latest()
                index.bootstrap(snap, skip=scope if scope is not None else (lambda p: True))
            else:
                latest, _ = self.store.on_latest(lambda snap: index.bootstrap(snap))
                if self.view_snapshot_id is None:
                    self.view_snapshot_id = latest.id if latest is not None else 0
            self.key_index = index
        locked = locked_by(self.overwrite_scope) if self.overwrite else None
        engine = self.store.options.merge_engine
        return self.key_index.resolve(table, engine, locked=locked)

    def delta_commits_before(self) -> int:
        """APPEND snapshots since the last one marked as ending a full compaction (for
        ``full-compaction.delta-commits`` across writers); 0 when that option is not set."""
        if self._delta_commits is None and not self.store.options.full_compaction_delta_commits:
            self._delta_commits = 0
        if self._delta_commits is None:
            count = 0
            for s in self.store.snapshot_manager.newest_first():
                if (s.properties or {}).get(FULL_COMPACTION_PROPERTY) == "true":
                    break
                count += s.commit_kind == "APPEND"
            self._delta_commits = count
        return self._delta_commits

    def commit_properties(self) -> Optional[dict[str, str]]:
        """Snapshot properties for the commit of the last :meth:`prepare_commit`."""
        return {FULL_COMPACTION_PROPERTY: "true"} if self.full_compacted else None

    def spill_dir(self) -> str:
        """A new directory under the system's temporary directory for this writer's spills."""
        if self._spill_dir is None:
            with storage_errors("create a spill directory in", tempfile.gettempdir()):
                self._spill_dir = tempfile.mkdtemp(prefix="lakelog-spill-")
        return self._spill_dir

    # ---- output ---------------------------------------------------------------------------------
    def prepare_commit(self, *, wait_compaction: bool = True) -> list[CommitMessage]:
        """Flush, compact as configured, and return one message per bucket with changes.

        Compactions run in the background. With ``wait_compaction`` (one-shot writes) the commit
        waits for them, so it carries their results; without (a long-lived writer committing
        again and again, e.g. every checkpoint), it carries the compactions that have finished,
        and the others join a later commit."""
        self.flush()
        self.full_compacted = False
        self.delta_commits_before()
        writers = list(self._buckets.values())
        if self.pk:
            msgs = _in_parallel(lambda w: w.prepare_commit(wait_compaction=wait_compaction), writers)
        else:
            msgs = [w.prepare_commit() for w in writers]
        try:
            if self.mode == BucketMode.HASH_DYNAMIC:
                _in_parallel(self._index_of, msgs)  # HASH files are written (and synced) side by side
            if self.overwrite and self.pk:
                msgs = [self._as_top_level(m) for m in msgs]
        except BaseException:
            # the bucket writers handed their files over, and the caller never gets them to discard
            from lakelog.connector.table.commit import TableCommit

            with contextlib.suppress(OSError):  # best effort: the error that got us here is the one to report
                TableCommit(self.store).discard_unpublished(msgs)
            raise
        return [m for m in msgs if not m.is_empty()]

    def _index_of(self, m: CommitMessage) -> None:
        """Dynamic buckets: a message's new HASH file (when its bucket got new keys) and its base."""
        index = self._hash_indexes.get((m.partition, m.bucket))
        if index is not None:
            m.index_base, m.index_files = index.prepare_commit(
                self.store, m.partition, m.bucket, self._index_namer
            )
        else:  # only known keys: the bucket's file is still the one restored
            restored = self._index_entries.get((m.partition, m.bucket))
            m.index_base = restored.index_file.file_name if restored is not None else None

    def _as_top_level(self, m: CommitMessage) -> CommitMessage:
        """An overwrite's bucket written as one sorted run (non-overlapping files) goes straight to
        the top level, where a full compaction would have put it (no rewrite: metadata only)."""
        from lakelog.connector.lsm.compaction import max_level
        from lakelog.connector.lsm.split_read import key_decoder, sections

        files = m.new_files
        if not files or any(f.level != 0 for f in files) or m.compact_before:
            return m  # (a compaction that took them up already: deletion-vector mode)
        if any(len(s) > 1 for s in sections(files, key_decoder(self.store.key_types))):
            return m
        top = max_level(self.store)
        m.new_files = [f.upgrade(top) for f in files]
        return m

    def compacting(self) -> bool:
        """Whether a background compaction of some bucket is still running (its result joins a
        later :meth:`prepare_commit`)."""
        return any(getattr(w, "_running", None) is not None for w in self._buckets.values())

    def compaction_executor(self) -> ThreadPoolExecutor:
        """The threads that run this writer's background compactions (Parquet encoding and Arrow
        kernels release the GIL, so they overlap with the writing thread)."""
        with self._pool_lock:  # bucket writers flush on several threads
            if self._compactor_pool is None:
                workers = max(1, min(_COMPACT_THREADS, os.cpu_count() or 1))
                self._compactor_pool = ThreadPoolExecutor(workers, thread_name_prefix="lakelog-compact")
            return self._compactor_pool

    def compact(self, *, full: bool = False) -> None:
        """Compact every bucket this writer holds (used by dedicated compaction runs)."""
        for w in self._buckets.values():
            w.compact(full=full)

    def abort(self) -> None:
        """Drop buffered rows and delete files written but not committed."""
        self._buffer = []
        for w in self._buckets.values():
            w.abort()
        self._hash_indexes.clear()
        self.close()

    def close(self) -> None:
        """Release local resources; compactions still in flight are discarded (what was not
        handed out by :meth:`prepare_commit` is not committed)."""
        for w in self._buckets.values():
            if self.pk:
                w.close()
        if self._compactor_pool is not None:
            self._compactor_pool.shutdown(wait=True)
            self._compactor_pool = None
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None

    @property
    def changelog_producer(self) -> ChangelogProducer:
        return self.store.options.changelog_producer


_WRITE_THREADS = 4
_COMPACT_THREADS = 4


def _in_parallel(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(x) for x in items]`` on a few threads (Parquet encoding and Arrow kernels release the
    GIL); each bucket writer is only ever used by one of them."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(_WRITE_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


def _zero(t: pa.DataType) -> pa.Scalar:
    """A placeholder value of type ``t``."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.scalar(b"", t)
    if pa.types.is_fixed_size_binary(t):
        return pa.scalar(b"\x00" * t.byte_width, t)
    if pa.types.is_boolean(t):
        return pa.scalar(False, t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        return pa.scalar([], t)
    if pa.types.is_struct(t):
        return pa.scalar({f.name: _zero(f.type).as_py() for f in t}, t)
    return pa.scalar(0, pa.int64()).cast(t)


def _row_kinds_from_field(table: pa.Table, name: str) -> np.ndarray:
    """Row kinds from a ``rowkind.field`` column holding +I, -U, +U, -D."""
    if name not in table.column_names:
        raise InvalidInputError(f"the column {name!r} named by option 'rowkind.field' is missing")
    col = table.column(name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        raise InvalidInputError(
            f"the 'rowkind.field' column {name!r} must be a string column, not {col.type}"
        )
    codes = pc.index_in(col, value_set=pa.array(list(RowKind.SHORT), col.type))
    if codes.null_count:
        bad = pc.filter(col, pc.is_null(codes)).slice(0, 3).to_pylist()
        raise InvalidInputError(
            f"the 'rowkind.field' column {name!r} holds {bad}; allowed: {list(RowKind.SHORT)}"
        )
    return np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int8)
