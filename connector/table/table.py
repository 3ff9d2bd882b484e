"""The public table handle: write, delete, read, time travel, changes, compaction, tags, schema changes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import (
    ArgumentError,
    CommitConflictError,
    InvalidInputError,
    MissingFileError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
)
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table import arguments as arg
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.maintenance import after_commit
from lakelog.connector.table.scan import fallback_splits, plan_splits
from lakelog.connector.table.write import TableWrite

if TYPE_CHECKING:
    import duckdb
    import pandas

    from lakelog.connector.format.schema import TableSchema
    from lakelog.connector.table.statistics import TableStatistics
    from lakelog.connector.table.subscribe import Subscription

log = logging.getLogger(__name__)

__all__ = ["Table", "TableScan", "BatchWriter", "StreamWriter", "FilterLike", "check_merge_engine"]


class BatchWriter:
    """Writes several batches (upserts and deletes) and commits them once, on :meth:`commit` or on
    leaving the ``with`` block; an exception inside the block aborts and leaves the table as it was."""

    def __init__(self, table: Table, *, commit_user: Optional[str] = None) -> None:
        self._table = table
        self._write = TableWrite(table._store)
        self._commit = TableCommit(table._store, arg.optional_text("commit_user", commit_user))
        _attach_eventual_log(self._write, self._commit.commit_user)
        self.snapshot_id: Optional[int] = None
        self._closed = False

    def write(self, data: Any) -> BatchWriter:
        self._write.write(data)
        return self

    def delete(self, keys: Any) -> BatchWriter:
        self._write.delete(keys)
        return self

    def commit(self) -> Optional[int]:
        """Publish everything written so far as one snapshot; return its id (None if nothing)."""
        if self._closed:
            raise RuntimeError("this writer is closed")
        self._closed = True
        msgs: list[CommitMessage] = []
        try:
            msgs = self._write.prepare_commit()
            self.snapshot_id = self._commit.commit(
                msgs,
                properties=self._write.commit_properties(),
                log_offsets=self._write.log_offsets(),
                guard=self._write.commit_guard(),
            )
        except BaseException:
            self._commit.discard_unpublished(msgs)
            self._write.abort()
            raise
        self._write.close()
        after_commit(self._table._store)
        return self.snapshot_id

    def abort(self) -> None:
        self._closed = True
        self._write.abort()

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class StreamWriter:
    """A long-lived writer that commits again and again, as a streaming job does at every
    checkpoint: its LSM trees stay in memory between commits and compaction runs in the
    background, so writing does not wait for it. A commit carries the compactions that have
    finished by then (``wait_compaction=True`` waits for all of them). Commit identifiers
    increase under one commit user, so a repeated commit is recognised and skipped; a writer given
    the ``commit_user`` of an earlier writer continues after that user's last committed identifier
    (never reusing one, which would make its new data look like a repeat).

    Close it (or use it as a context manager) to stop its compaction threads; what was written
    since the last commit is then dropped."""

    def __init__(self, table: Table, *, commit_user: Optional[str] = None) -> None:
        self._table = table
        self._write = TableWrite(table._store)
        self._commit = TableCommit(table._store, arg.optional_text("commit_user", commit_user))
        _attach_eventual_log(self._write, self._commit.commit_user)
        self._identifier = self._commit.last_committed_identifier() if commit_user is not None else 0
        self._closed = False

    @property
    def commit_user(self) -> str:
        return self._commit.commit_user

    def write(self, data: Any) -> StreamWriter:
        self._check_open()
        self._write.write(data)
        return self

    def write_changes(self, data: Any, kinds: Any) -> StreamWriter:
        """Rows with explicit row kinds (0 +I, 1 -U, 2 +U, 3 -D)."""
        self._check_open()
        self._write.write_changes(data, kinds)
        return self

    def delete(self, keys: Any) -> StreamWriter:
        self._check_open()
        self._write.delete(keys)
        return self

    def commit(self, *, wait_compaction: bool = False) -> Optional[int]:
        """Publish what was written since the last commit (and finished compactions); return the
        last snapshot id made, or None when there was nothing to commit."""
        self._check_open()
        arg.flag("wait_compaction", wait_compaction)
        msgs: list[CommitMessage] = []
        try:
            msgs = self._write.prepare_commit(wait_compaction=wait_compaction)
            self._identifier += 1
            sid = self._commit.commit(
                msgs,
                self._identifier,
                properties=self._write.commit_properties(),
                log_offsets=self._write.log_offsets(),
                guard=self._write.commit_guard(),
            )
        except CommitConflictError:
            if not msgs or any(m.new_files or m.changelog_files for m in msgs) or self._commit.published:
                self._closed = True
                self._commit.discard_unpublished(msgs)
                self._write.abort()
                raise
            # only background compactions, whose inputs another compaction has rewritten: drop them
            log.warning("compaction of %s lost a race to another compaction and was dropped", self._table)
            self._commit.discard_unpublished(msgs)
            self._reload()
            return None
        except BaseException:
            self._closed = True
            self._commit.discard_unpublished(msgs)
            self._write.abort()
            raise
        c = self._commit
        if c.compaction_discarded or c.rebased or c.index_merged or self._write.stale:
            # another compaction won a race for the same files, or another writer's rows made this
            # commit rebase its files or merge its hash index: reload the trees from the table
            self._reload()
        else:
            self._write.committed(c.published)
        if after_commit(self._table._store):
            # files of dropped partitions may sit in this writer's trees: reload them
            self._reload()
        return sid

    def _reload(self) -> None:
        """Start over from the table's files (the log writer, if any, goes on)."""
        self._write.close()
        fresh = TableWrite(self._table._store)
        fresh.eventual_log = self._write.eventual_log
        self._write = fresh

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._write.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this writer is closed")

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _attach_eventual_log(write: TableWrite, user: str) -> None:
    """Writers of a table with an eventual log send their changes to it as they write them."""
    from lakelog.connector.table.log import log_config

    config = log_config(write.store)
    if config is not None and not config.transactional:
        from lakelog.connector.log.eventual import EventualLogWriter

        write.eventual_log = EventualLogWriter(config, user)


FilterLike = Union[pc.Expression, str, None]
T = TypeVar("T")
_READ_ATTEMPTS = 5


class TableScan:
    """One read of a table: a projection, a filter and a snapshot, fixed when the scan is made.

    Plan it (:meth:`plan`: one split per partition and bucket, after pruning; splits pickle, so
    they can be read anywhere with :meth:`read_split`) or read it whole (:meth:`to_arrow`,
    :meth:`to_reader`, :meth:`to_pandas`, :meth:`to_duckdb`). Primary-key tables are merged on
    read; only key filters prune files before the merge, value filters apply to merged rows.
    """

    def __init__(
        self,
        table: Table,
        *,
        columns: Optional[Sequence[str]] = None,
        filter: FilterLike = None,
        snapshot_id: Optional[int] = None,
        timestamp: Any = None,
        tag: Optional[str] = None,
    ) -> None:
        self.table = table
        self.snapshot: Optional[Snapshot] = table.resolve_snapshot(snapshot_id, timestamp=timestamp, tag=tag)
        store = table._store
        snap = self.snapshot
        if snap is not None and snap.schema_id > store.schema.id:
            store.refresh_schema()  # another handle or process changed the schema
        time_travel = snapshot_id is not None or timestamp is not None or tag is not None
        if snap is not None and time_travel and snap.schema_id != store.schema.id:
            # as Paimon does, a snapshot read by id, time or tag shows the columns it was written with
            store = store.with_schema(store.schema_manager.schema(snap.schema_id))
        self._store = store
        self._time_travel = time_travel
        self.columns = arg.names("columns", columns) if columns is not None else None
        self.filter: Optional[pc.Expression] = parse_filter(filter, store.schema.arrow_schema())
        self._splits: Optional[list[Split]] = None

    def _read(self) -> SplitRead:
        return SplitRead(self._store, columns=self.columns, filter=self.filter)

    def _expired(self, error: Exception, *, retry: bool) -> bool:
        """After ``error`` (a missing file or snapshot): whether to read again because the scan's
        snapshot was expired while being read and the scan reads the latest snapshot (it moves on
        to the new latest). Raises SnapshotExpiredError naming the snapshot when it cannot."""
        snap = self.snapshot
        sm = self.table._store.snapshot_manager
        if snap is None or sm.holds(snap):
            return False  # not an expiration: the error stands
        if retry and not self._time_travel:
            self.snapshot, self._splits = sm.latest(), None
            return True
        raise SnapshotExpiredError(
            f"snapshot {snap.id} of {self.table.identifier} was expired while it was being read; keep it "
            "longer ('snapshot.num-retained.min', 'snapshot.time-retained'), or tag it or read it "
            "through a consumer"
        ) from error

    def _attempt(self, read: Callable[[], T]) -> T:
        for attempt in range(_READ_ATTEMPTS):
            try:
                return read()
            except (MissingFileError, SnapshotNotFoundError) as e:
                if not self._expired(e, retry=attempt < _READ_ATTEMPTS - 1):
                    raise
        raise AssertionError("unreachable")

    def plan(self) -> list[Split]:
        """The splits to read (one per partition and bucket with live files), after pruning."""

        def plan() -> list[Split]:
            if self._splits is None:
                splits = plan_splits(self._store, self.snapshot, filter=self.filter)
                if not self._time_travel:  # 'scan.fallback-branch': the partitions the table lacks
                    splits += fallback_splits(self._store, self.snapshot, filter=self.filter)[0]
                self._splits = splits
            return list(self._splits)

        return self._attempt(plan)

    def read_split(self, split: Split) -> pa.Table:
        """The rows of one split (from :meth:`plan`), projected and filtered."""
        try:
            return self._read().read_splits([split])
        except (MissingFileError, SnapshotNotFoundError) as e:
            self._expired(e, retry=False)
            raise

    def to_arrow(self) -> pa.Table:
        """The scan's rows, in no particular order (a bucket whose sorted runs overlap is merged
        file by file, without sorting its rows by key; :meth:`to_reader` streams key order)."""
        return self._attempt(lambda: self._read().read_splits(self.plan()))

    def to_reader(self, *, max_chunksize: Optional[int] = None) -> pa.RecordBatchReader:
        """A streaming ``RecordBatchReader``: memory holds one key-range section at a time. Its
        snapshot is fixed once it starts: an expiration under it raises SnapshotExpiredError."""
        max_chunksize = arg.optional_integer("max_chunksize", max_chunksize, minimum=1)
        reader = self._read().to_reader(self.plan(), max_chunksize=max_chunksize)

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                yield from reader
            except (MissingFileError, SnapshotNotFoundError) as e:
                self._expired(e, retry=False)
                raise

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        yield from self.to_reader()

    def to_pandas(self) -> pandas.DataFrame:
        return self.to_arrow().to_pandas()

    def to_duckdb(
        self, name: Optional[str] = None, connection: Optional[duckdb.DuckDBPyConnection] = None
    ) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over the rows (registered as view ``name`` when given). The rows are
        read once into Arrow, so the relation can be queried any number of times."""
        import duckdb

        arg.optional_text("name", name)
        con = connection if connection is not None else duckdb.connect()
        rel = con.from_arrow(self.to_arrow())
        if name:
            con.register(name, rel)
        return rel


class Table:
    """A lakelog table (Paimon format) opened from a :class:`~lakelog.Catalog`."""

    def __init__(self, store: TableStore, identifier: str) -> None:
        self._store = store
        self.identifier = identifier
        # told of every schema this handle commits (a JDBC catalog keeps a copy of the options)
        self.schema_listener: Optional[Callable[[TableSchema], None]] = None

    def __repr__(self) -> str:
        return f"Table({self.identifier!r}, path={self._store.location!r})"

    # ---- description ----------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The directory that opens this table (a branch's: ``<table>/branch/branch-<name>``)."""
        return self._store.location

    @property
    def branch_name(self) -> str:
        """The branch this handle reads and writes (``main`` unless opened by :meth:`branch`)."""
        return self._store.branch

    @property
    def schema(self) -> pa.Schema:
        return self._store.schema.arrow_schema()

    @property
    def primary_keys(self) -> list[str]:
        return list(self._store.schema.primary_keys)

    @property
    def partition_keys(self) -> list[str]:
        return list(self._store.schema.partition_keys)

    @property
    def options(self) -> dict[str, str]:
        return dict(self._store.schema.options)

    @property
    def store(self) -> TableStore:
        """The low-level handle (paths, managers); picklable."""
        return self._store

    def refresh(self) -> Table:
        """Pick up schema changes made by other handles or processes."""
        self._store.refresh_schema()
        return self

    # ---- writing ----------------------------------------------------------------------------------
    def writer(self, *, commit_user: Optional[str] = None) -> BatchWriter:
        """A writer for several batches that commits once (use as a context manager)."""
        return BatchWriter(self, commit_user=commit_user)

    def stream_writer(self, *, commit_user: Optional[str] = None) -> StreamWriter:
        """A long-lived writer committing repeatedly, with background compaction (see
        :class:`StreamWriter`)."""
        return StreamWriter(self, commit_user=commit_user)

    def write(self, data: Any) -> Optional[int]:
        """Upsert (primary-key table) or append rows in one atomic commit; return the snapshot id."""
        with self.writer() as w:
            w.write(data)
        return w.snapshot_id

    def delete(self, keys: Any) -> Optional[int]:
        """Delete rows by primary key (rows holding at least the primary-key columns)."""
        with self.writer() as w:
            w.delete(keys)
        return w.snapshot_id

    def delete_where(self, filter: Any, *, commit_user: Optional[str] = None) -> Optional[int]:
        """Delete the rows ``filter`` matches (a SQL-like string, ``"dt = '2024-06-01' AND id IN (1,
        2)"``, or a pyarrow expression; a row whose filter is null stays) in one commit; return the
        snapshot id, None when no row matched.

        Primary-key tables: the keys of the matching rows are deleted (``-D`` rows, as SQL's
        ``DELETE``). Append tables need ``'deletion-vectors.enabled' = 'true'``: the matching rows
        are marked in their files' deletion vectors, as Paimon deletes from append tables (see
        :mod:`lakelog.connector.table.append_delete`)."""
        commit_user = arg.optional_text("commit_user", commit_user)
        if not self._store.is_primary_key_table:
            from lakelog.connector.table.append_delete import delete_where

            return delete_where(self._store, filter, commit_user=commit_user)
        if filter is None or (isinstance(filter, str) and not filter.strip()):
            raise InvalidInputError(f"delete_where on {self.identifier} needs a filter; to delete every row, "
                                    "overwrite the table")
        keys = self.to_arrow(columns=self.primary_keys, filter=filter)
        if keys.num_rows == 0:
            return None
        with self.writer(commit_user=commit_user) as w:
            w.delete(keys)
        return w.snapshot_id

    def overwrite(
        self, data: Any, partition: Optional[dict[str, Any]] = None, *, commit_user: Optional[str] = None
    ) -> Optional[int]:
        """Replace partitions with ``data`` in one OVERWRITE snapshot (Paimon's ``INSERT
        OVERWRITE``); return its id, or None when nothing was committed.

        With ``dynamic-partition-overwrite`` (default true) on a partitioned table only the
        partitions the rows fall into are replaced, and no rows change nothing. Otherwise every
        partition matching the static ``partition`` spec (a dict of some partition fields; rows
        lacking those columns take its values) is replaced, the whole table without one, and no
        rows empty them. New partitions get the table's current bucket count, so an overwrite of a
        partition written with another count rescales it."""
        from lakelog.connector.table.overwrite import overwrite

        commit_user = arg.optional_text("commit_user", commit_user)
        return overwrite(self._store, data, partition, commit_user=commit_user)

    def rescale(
        self, partitions: Optional[Sequence[dict[str, Any]]] = None, buckets: Optional[int] = None
    ) -> Optional[int]:
        """Rewrite partitions of a fixed-bucket table with ``buckets`` buckets (default: the
        table's ``bucket`` option, e.g. after ``alter(SetOption("bucket", "8"))``) in one
        OVERWRITE snapshot; ``buckets`` leaves the table's option as it is, as Paimon's
        ``sys.rescale`` does. ``partitions``: specs of the partitions to rewrite (default: every
        partition whose count differs). Returns the snapshot id, None when there was nothing to do.
        Readers keep reading; streaming readers see no change. See
        :mod:`lakelog.connector.table.overwrite`."""
        from lakelog.connector.table.overwrite import rescale

        return rescale(self._store, partitions, buckets)

    def bucket_counts(self, snapshot_id: Optional[int] = None) -> dict[tuple[Any, ...], int]:
        """The bucket count each partition's files record (-1 in dynamic bucket modes), by
        partition values."""
        snap = self.resolve_snapshot(snapshot_id)
        out: dict[tuple[Any, ...], int] = {}
        for e in self._store.live_entries(snap):
            out.setdefault(self._store.partition_values(e.partition), e.total_buckets)
        return out

    # ---- snapshots and time travel ---------------------------------------------------------------
    def snapshots(self) -> list[Snapshot]:
        return self._store.snapshot_manager.snapshots()

    def latest_snapshot(self) -> Optional[Snapshot]:
        return self._store.snapshot_manager.latest()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self._store.snapshot_manager.snapshot(arg.integer("snapshot_id", snapshot_id))

    def resolve_snapshot(
        self,
        snapshot_id: Optional[int] = None,
        *,
        timestamp: Union[int, float, Any, None] = None,
        tag: Optional[str] = None,
    ) -> Optional[Snapshot]:
        """The snapshot a read sees: by id, by time (the last one at or before it), by tag, or latest."""
        given = sum(x is not None for x in (snapshot_id, timestamp, tag))
        if given > 1:
            raise ArgumentError("give at most one of the arguments 'snapshot_id', 'timestamp' and 'tag'")
        sm = self._store.snapshot_manager
        if snapshot_id is not None:
            return sm.snapshot(arg.integer("snapshot_id", snapshot_id))
        if tag is not None:
            return self._store.tag_manager.get(arg.text("tag", tag))
        if timestamp is not None:
            millis = arg.point_in_time("timestamp", timestamp)
            s = sm.earlier_or_equal_time_millis(millis)
            if s is None:
                raise SnapshotNotFoundError(f"no snapshot of {self.identifier} at or before {timestamp!r}")
            return s
        return sm.latest()

    # ---- reading ------------------------------------------------------------------------------------
    def scan(
        self,
        *,
        columns: Optional[Sequence[str]] = None,
        filter: FilterLike = None,
        snapshot_id: Optional[int] = None,
        timestamp: Any = None,
        tag: Optional[str] = None,
    ) -> TableScan:
        """A read of this table: ``columns`` (default all), a ``filter`` (a pyarrow expression or a
        SQL-like string such as ``"dt = '2024-06-01' AND amount > 10"``), as of a snapshot id, a
        time (the last snapshot at or before it) or a tag (default: the latest snapshot). The
        snapshot is fixed when the scan is made, so its reads agree with each other."""
        return TableScan(
            self, columns=columns, filter=filter, snapshot_id=snapshot_id, timestamp=timestamp, tag=tag
        )

    def to_arrow(self, **scan: Any) -> pa.Table:
        """The table's rows (merged): ``t.scan(**scan).to_arrow()``."""
        return self.scan(**scan).to_arrow()

    def to_reader(self, *, max_chunksize: Optional[int] = None, **scan: Any) -> pa.RecordBatchReader:
        """A streaming ``RecordBatchReader`` (memory holds one key-range section at a time):
        ``t.scan(**scan).to_reader()``."""
        return self.scan(**scan).to_reader(max_chunksize=max_chunksize)

    def to_pandas(self, **scan: Any) -> pandas.DataFrame:
        """``t.scan(**scan).to_pandas()``."""
        return self.scan(**scan).to_pandas()

    def to_duckdb(
        self,
        name: Optional[str] = None,
        connection: Optional[duckdb.DuckDBPyConnection] = None,
        **scan: Any,
    ) -> duckdb.DuckDBPyRelation:
        """``t.scan(**scan).to_duckdb(name, connection)``."""
        return self.scan(**scan).to_duckdb(name, connection)

    def plan(self, **scan: Any) -> list[Split]:
        """``t.scan(**scan).plan()``: the splits to read, one per partition and bucket."""
        return self.scan(**scan).plan()

    def changes(self, from_snapshot_id: int, to_snapshot_id: Optional[int] = None) -> pa.Table:
        """What changed after ``from_snapshot_id`` up to ``to_snapshot_id`` (default latest), as rows
        with a leading ``rowkind`` column (+I, -U, +U, -D), like Paimon's ``$audit_log`` (then
        ``_SEQUENCE_NUMBER`` when the table sets ``table-read.sequence-number.enabled``)."""
        from lakelog.connector.table.changes import diff_snapshots

        start = arg.integer("from_snapshot_id", from_snapshot_id, minimum=0)
        end = arg.optional_integer("to_snapshot_id", to_snapshot_id, minimum=0)
        seq = self._store.options.table_read_sequence_number
        return diff_snapshots(self._store, start, end, sequence_number=seq)

    def subscribe(self, **options: Any) -> Subscription:
        """The table's changes as they happen, as Arrow batches with a leading ``rowkind`` column
        (see :class:`~lakelog.connector.table.subscribe.Subscription` for the options: ``scan_mode``,
        ``snapshot_id``, ``timestamp``, ``consumer_id``, ``columns``, ``filter``). From the Kafka log
        for tables with one, else from the files."""
        from lakelog.connector.table.subscribe import Subscription

        return Subscription(self, **options)

    # ---- maintenance ----------------------------------------------------------------------------------
    def compact(
        self,
        full: bool = True,
        *,
        partitions: Optional[Sequence[dict[str, Any]]] = None,
        where: Optional[str] = None,
        progress: Any = None,
        order_strategy: Optional[str] = None,
        order_by: Optional[Union[Sequence[str], str]] = None,
    ) -> Optional[int]:
        """Compact the buckets that need it (every bucket into one sorted run at the top level
        with ``full``, universal compaction's picks without); return the COMPACT snapshot id, None
        when there was nothing to do. ``partitions``: specs (``{"dt": "2024-06-01"}``, some of the
        partition fields) of the partitions to compact; or ``where``: a predicate on the partition
        fields (``"dt >= '2024-06-01' AND hh IN (1, 2)"``); default: all of them.

        ``order_strategy`` (``order``, ``zorder``, ``hilbert``) and ``order_by`` (columns): a sort
        compaction of an append table with ``bucket = -1``: every file of the chosen partitions is
        rewritten with its rows in that order, so that filters on those columns skip files (see
        :mod:`lakelog.connector.table.sort_compaction`)."""
        from lakelog.connector.table.compaction import compact_table
        from lakelog.connector.table.sort_compaction import optional_order

        full = arg.flag("full", full)
        where = arg.optional_text("where", where)
        progress = arg.callback("progress", progress)
        order = optional_order(self._store, order_strategy, order_by)
        return compact_table(self._store, full=full, partitions=partitions, where=where, progress=progress,
                             order=order)

    def rewrite_file_index(self, *, partitions: Optional[Sequence[dict[str, Any]]] = None) -> Optional[int]:
        """Give the live data files (of ``partitions``) the file indexes the table's options ask for
        now (``file-index.bloom-filter.columns``), without rewriting data; return the COMPACT
        snapshot's id, None when no index changed (Paimon's ``rewrite_file_index``)."""
        from lakelog.connector.table.file_index_rewrite import rewrite_file_index

        return rewrite_file_index(self._store, partitions=partitions)

    def analyze(self, columns: Optional[Sequence[str]] = None, *, all_columns: bool = False) -> Optional[int]:
        """Compute statistics of the latest snapshot (Paimon's ``ANALYZE``): the merged row count and
        size, and column statistics of ``columns`` (or of every atomic column with ``all_columns``);
        commit them in an ``ANALYZE`` snapshot and return its id (None: the table has no snapshot).
        See :mod:`lakelog.connector.table.statistics`."""
        from lakelog.connector.table.statistics import analyze

        all_columns = arg.flag("all_columns", all_columns)
        names = arg.names("columns", columns) if columns is not None else None
        return analyze(self, names, all_columns=all_columns)

    def statistics(self, snapshot_id: Optional[int] = None) -> Optional[TableStatistics]:
        """The statistics a snapshot (default: the latest) references, None without any."""
        from lakelog.connector.table.statistics import snapshot_statistics

        return snapshot_statistics(self._store, self.resolve_snapshot(snapshot_id))

    def expire_snapshots(self, **overrides: Any) -> list[int]:
        """Expire snapshots by the table's retention options (overridable); return expired ids."""
        from lakelog.connector.table.maintenance import expire_snapshots

        for name in ("retain_min", "retain_max", "older_than_millis"):
            if overrides.get(name) is not None:
                overrides[name] = arg.integer(name, overrides[name])
        if overrides.get("max_deletes") is not None:
            overrides["max_deletes"] = arg.integer("max_deletes", overrides["max_deletes"], minimum=0)
        return expire_snapshots(self._store, **overrides)

    def rollback_to(self, snapshot_id: Optional[int] = None, *, tag: Optional[str] = None) -> int:
        """Roll back to a snapshot (by id, or the one ``tag`` holds): later snapshots, and the files
        only they referenced, are removed; see :func:`~lakelog.connector.table.maintenance.rollback_to`.
        Safe beside writers: it holds the commit lock throughout."""
        from lakelog.connector.table.maintenance import rollback_to

        if (snapshot_id is None) == (tag is None):
            raise ArgumentError(
                "rollback_to needs exactly one of the arguments 'snapshot_id' and 'tag', "
                f"got snapshot_id={snapshot_id!r}, tag={tag!r}"
            )
        snapshot_id = arg.optional_integer("snapshot_id", snapshot_id)
        tag = arg.optional_text("tag", tag)
        return rollback_to(self._store, snapshot_id=snapshot_id, tag=tag)

    def rollback_to_as_latest(self, snapshot_id: Optional[int] = None, *, tag: Optional[str] = None) -> int:
        """Publish the files of an earlier snapshot (by id, or the one ``tag`` holds) as a new latest
        snapshot, keeping every snapshot and tag in between (Paimon's ``rollback_to_as_latest``);
        returns the new snapshot's id. See :mod:`lakelog.connector.table.rollback_latest`."""
        from lakelog.connector.table.rollback_latest import rollback_to_as_latest

        if (snapshot_id is None) == (tag is None):
            raise ArgumentError(
                "rollback_to_as_latest needs exactly one of the arguments 'snapshot_id' and 'tag', "
                f"got snapshot_id={snapshot_id!r}, tag={tag!r}"
            )
        sid = arg.optional_integer("snapshot_id", snapshot_id)
        return rollback_to_as_latest(self._store, snapshot_id=sid, tag=arg.optional_text("tag", tag))[2]

    def expire_partitions(self) -> list[dict[str, Any]]:
        """Drop the partitions older than ``partition.expiration-time`` (as writers do at commit,
        every ``partition.expiration-check-interval``); return their values."""
        from lakelog.connector.table.partition_expire import expire_partitions

        return expire_partitions(self._store)

    def remove_orphan_files(
        self, older_than_seconds: Optional[float] = None, *, dry_run: bool = False
    ) -> list[str]:
        """Delete unreferenced files older than ``older_than_seconds`` (default: the table's
        ``orphan-clean.older-than``, 1 day); return their paths."""
        from lakelog.connector.table.maintenance import remove_orphan_files

        if older_than_seconds is not None:
            older_than_seconds = arg.seconds("older_than_seconds", older_than_seconds)
        dry_run = arg.flag("dry_run", dry_run)
        return remove_orphan_files(self._store, older_than_seconds=older_than_seconds, dry_run=dry_run)

    def files(self, snapshot_id: Optional[int] = None) -> pa.Table:
        """One row per live data file: partition, bucket, level, file name, rows, size, sequence range."""
        from lakelog.connector.table.system_tables import files_table

        return files_table(self._store, self.resolve_snapshot(snapshot_id))

    # ---- tags -------------------------------------------------------------------------------------------
    def create_tag(self, name: str, snapshot_id: Optional[int] = None) -> None:
        """Tag a snapshot (default: the latest). Under the commit lock, so that no expiration removes
        the snapshot's files between finding it and recording the tag."""
        arg.text("name", name)
        sm = self._store.snapshot_manager
        with sm.lock():
            snap = self.resolve_snapshot(snapshot_id)
            if snap is None:
                raise SnapshotNotFoundError(f"{self.identifier} has no snapshot to tag")
            self._store.tag_manager.create(name, snap)

    def delete_tag(self, name: str) -> None:
        self._store.tag_manager.delete(arg.text("name", name))

    def tags(self) -> dict[str, int]:
        return {name: s.id for name, s in self._store.tag_manager.list().items()}

    # ---- branches ---------------------------------------------------------------------------------------
    def branch(self, name: str) -> Table:
        """Branch ``name`` of this table, to read and write like any table (``main``: main)."""
        from lakelog.connector.format.branches import MAIN, branch_location, check_branch_name

        if arg.text("name", name) != MAIN:
            check_branch_name(name)  # no path of another directory
        base = self.identifier.split("$", 1)[0]
        store = TableStore(branch_location(self._store.path, name), self._store.file_io)
        store.snapshot_manager.lock_provider = self._store.snapshot_manager.lock_provider
        table = Table(store, base if name == MAIN else f"{base}$branch_{name}")
        if name == MAIN:
            table.schema_listener = self.schema_listener
        return table

    def branches(self) -> list[str]:
        """The table's branches other than main, by name."""
        from lakelog.connector.format.branches import list_branches

        return list_branches(self._store.file_io, self._store.path)

    def create_branch(self, name: str, *, tag: Optional[str] = None) -> Table:
        """Create branch ``name`` from this branch: empty with the latest schema, or from ``tag``
        (its snapshot becomes the branch's first). Returns the branch."""
        from lakelog.connector.table.branches import create_branch

        create_branch(self._store, arg.text("name", name), tag=arg.optional_text("tag", tag))
        return self.branch(name)

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name`` (its own files are left to :meth:`remove_orphan_files`)."""
        from lakelog.connector.table.branches import delete_branch

        delete_branch(self._store, arg.text("name", name))

    def fast_forward(self, name: str) -> int:
        """Make main what branch ``name`` is; returns main's new latest snapshot id (see
        :func:`lakelog.connector.table.branches.fast_forward`)."""
        from lakelog.connector.table.branches import fast_forward

        latest = fast_forward(self._store, arg.text("name", name))
        if self.schema_listener is not None:
            self.schema_listener(self._store.schema)
        return latest

    # ---- schema evolution --------------------------------------------------------------------------------
    def alter(self, *changes: Any) -> Table:
        """Apply schema changes (see :mod:`lakelog.connector.format.schema`) atomically."""
        from lakelog.connector.format.schema_changes import apply_changes

        latest = self._store.schema_manager.latest() or self._store.schema
        has_snapshots = self._store.snapshot_manager.latest_id() is not None
        changed = apply_changes(latest, list(changes), has_snapshots=has_snapshots)
        check_merge_engine(self._store.with_schema(changed))
        new = self._store.schema_manager.commit_changes(*changes)
        self._store.schema = new
        if self.schema_listener is not None:
            self.schema_listener(new)
        return self



def check_merge_engine(store: TableStore) -> None:
    """Build the table's merge engine once, so that options it cannot follow (an aggregate
    function that does not fit its column's type) fail when the table is created or altered,
    naming the option, not when rows are first written."""
    if store.schema.primary_keys:
        from lakelog.connector.lsm.merge.engine import merge_function_for

        merge_function_for(store)
