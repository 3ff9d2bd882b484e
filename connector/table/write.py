"""The write path: validate rows, assign partition and bucket, and keep one bucket writer (an LSM
tree for primary-key tables) per touched bucket. Produces plain, picklable commit messages for a
committer.

Everything on the row path is vectorised: one stable sort of the buffer's (partition, bucket)
columns groups the rows, and each bucket writer sorts and merges its own rows in Arrow. Python
loops run over (partition, bucket) groups only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.binary_row import serialize_row
from lakelog.connector.format.bucket import compute_buckets
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.defaults import default_values
from lakelog.connector.format.key_value import VALUE_KIND, RowKind
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.options import ChangelogProducer, MergeEngine
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.eventual import EventualLogWriter
from lakelog.connector.lsm.bucket_writer import ARRIVAL
from lakelog.connector.lsm.kv import group_ends, sort_indices
from lakelog.connector.lsm.merge.engine import merge_function_for
from lakelog.connector.table.arrow_input import conform, to_arrow_table

__all__ = ["TableWrite", "bucket_groups"]

FULL_COMPACTION_PROPERTY = "lakelog.full-compaction"
_BUCKET = "__lakelog_bucket"


class TableWrite:
    """Buffers rows and turns them into level-0 files; compacts the touched buckets as the table's
    options ask; hands out commit messages on :meth:`prepare_commit`.

    The buffer is bounded by ``write-buffer-size``: when full it is flushed into level-0 files or,
    with ``write-buffer-spillable``, sorted and spilled to local disk and merged into one level-0
    run at the next :meth:`prepare_commit`.
    """

    def __init__(self, store: TableStore, *, write_only: Optional[bool] = None) -> None:
        self.store = store
        self.schema = store.schema
        opts = store.options
        self.num_buckets = opts.bucket
        self.pk = list(self.schema.primary_keys)
        if self.pk and self.num_buckets < 1:
            raise OptionError(
                f"table {store.path} is a primary-key table with bucket = {self.num_buckets} (dynamic or "
                "postponed bucket mode), which lakelog cannot write: it keeps no hash index. "
                "Use a fixed 'bucket'."
            )
        self.keys = store.key_names
        self.partition_keys = list(self.schema.partition_keys)
        self.bucket_keys = list(self.schema.bucket_keys) if self.num_buckets > 0 else []
        self.arrow_schema = self.schema.arrow_schema()
        self._field_types = {f.name: f.type for f in self.schema.fields}
        self._defaults = default_values(self.schema.fields, self.schema.options)
        self.write_only = opts.write_only if write_only is None else write_only
        self.spillable = bool(opts.write_buffer_spillable)
        self.merge = merge_function_for(store) if self.pk else None
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
        if self.pk and not isinstance(kind, int) or kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE):
            table, kind = self._drop_ignored_kinds(table, kind)
        if table.num_rows == 0:
            return
        for k in self.pk:
            if table.column(k).null_count:
                raise InvalidInputError(f"primary-key column {k!r} holds null(s); nothing was written")
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
        if self.num_buckets > 0:
            types = self.store.field_types(self.bucket_keys)
            return compute_buckets(table, self.bucket_keys, types, self.num_buckets)
        return np.zeros(table.num_rows, dtype=np.int32)

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
        # each bucket writer then takes and sorts its own rows by key, the buckets in parallel
        groups = [
            (partition, bucket, rows) for _, partition, bucket, rows in bucket_groups(self.store, table)
        ]
        self._restore({p for p, _, _ in groups} - self._restored)
        work = [(self._bucket(partition, bucket), rows) for partition, bucket, rows in groups]
        _in_parallel(lambda wr: wr[0].add(table.take(pa.array(wr[1])), spill=spill), work)

    def _bucket(self, partition: bytes, bucket: int) -> Any:
        from lakelog.connector.lsm.bucket_writer import AppendBucketWriter, KeyValueBucketWriter

        slot = (partition, bucket)
        w = self._buckets.get(slot)
        if w is None:
            cls = KeyValueBucketWriter if self.pk else AppendBucketWriter
            w = cls(self, partition, bucket, [])
            self._buckets[slot] = w
        return w

    def _restore(self, partitions: set[bytes]) -> None:
        """Load each touched bucket's committed files (its LSM tree and sequence numbers)."""
        if not partitions:
            return
        from lakelog.connector.lsm.bucket_writer import AppendBucketWriter, KeyValueBucketWriter

        _, live = self.store.on_latest(self.store.live_entries)  # retried when expired under us
        files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for e in live:
            if e.partition in partitions:
                files.setdefault((e.partition, e.bucket), []).append(e.file)
        cls = KeyValueBucketWriter if self.pk else AppendBucketWriter
        for (p, b), fs in files.items():
            if (p, b) not in self._buckets:
                self._buckets[(p, b)] = cls(self, p, b, fs)
        self._restored |= partitions

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
        if self._spill_dir is None:
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
        return [m for m in msgs if not m.is_empty()]

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


BucketGroup = tuple[tuple[Any, ...], bytes, int, np.ndarray]


def bucket_groups(store: TableStore, table: pa.Table) -> list[BucketGroup]:
    """The rows of ``table`` (in the table's columns) grouped by (partition, bucket): one
    ``(partition values, serialized partition, bucket, row indices)`` per group, the indices in
    arrival order (a stable sort of the small group columns only)."""
    opts = store.options
    partition_keys = list(store.schema.partition_keys)
    if opts.bucket > 0:
        bucket_keys = list(store.schema.bucket_keys)
        buckets = compute_buckets(table, bucket_keys, store.field_types(bucket_keys), opts.bucket)
    else:
        buckets = np.zeros(table.num_rows, dtype=np.int32)
    groups = table.select(partition_keys).append_column(_BUCKET, pa.array(buckets, pa.int32()))
    if groups.num_rows == 0:
        return []
    group_cols = partition_keys + [_BUCKET]
    order = sort_indices(groups, group_cols)
    return [
        (values, serialize_row(list(values), store.partition_types), bucket, order[start:stop])
        for values, bucket, start, stop in _group_bounds(groups.take(pa.array(order)), partition_keys)
    ]


def _group_bounds(
    groups: pa.Table, partition_keys: Sequence[str]
) -> Iterator[tuple[tuple[Any, ...], int, int, int]]:
    """(partition values, bucket, start, stop) of each run of equal (partition..., bucket) in
    ``groups``, a table of those columns sorted by them."""
    ends = np.flatnonzero(group_ends(groups, list(partition_keys) + [_BUCKET]))
    buckets = groups.column(_BUCKET)
    start = 0
    for end in ends:
        stop = int(end) + 1
        values = tuple(groups.column(k)[start].as_py() for k in partition_keys)
        yield values, int(buckets[start].as_py()), start, stop
        start = stop
