"""What the lakelog sources read, without Flink: the read plan, its splits and changes, and table rows
as the Python values Flink rows carry. Scan modes and filters are the connector's
(:mod:`lakelog.connector.table.scan_start`, :mod:`lakelog.connector.table.expressions`).

The operators that run these are in :mod:`lakelog.operators.source`; the plan pickles, so each
Flink worker re-plans the same snapshot itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError, SchemaError, SnapshotNotFoundError
from lakelog.connector.format.key_value import SEQUENCE_NUMBER
from lakelog.connector.format.options import ChangelogProducer, CoreOptions, IncrementalBetweenScanMode
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.changes import delta_rows, diff_snapshots, published_entries, read_changelog
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.scan import fallback_splits, plan_splits
from lakelog.connector.table.scan_start import ScanStart, resolve_start, scan_options
from lakelog.connector.table.system_tables import binlog_of, binlog_schema, read_optimized_entries
from lakelog.operators.table_ref import TableLike, adopt_io, adopt_lock, table_io, table_lock, table_path

__all__ = [
    "ReadPlan",
    "plan_batch",
    "table_rows",
    "check_columns",
    "KIND_CODES",
    "SHAPES",
]

#: What a read emits: the table's rows; ``audit_log``: a leading ``rowkind`` column, every row an
#: insert; ``binlog``: ``rowkind`` then every column as an array (Paimon's ``$binlog``).
SHAPES = ("rows", "audit_log", "binlog")

# audit-log row kind -> Flink RowKind ordinal (INSERT 0, UPDATE_BEFORE 1, UPDATE_AFTER 2, DELETE 3)
KIND_CODES: dict[str, int] = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


# ---- rows -------------------------------------------------------------------------------------------
RowFactory = Callable[[list[Any]], Any]


def _nested_value(v: Any, t: pa.DataType, row: RowFactory) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return row([_nested_value(v.get(t.field(i).name), t.field(i).type, row) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_nested_value(x, t.value_type, row) for x in v]
    if pa.types.is_map(t):
        return {k: _nested_value(x, t.item_type, row) for k, x in v}
    return v


def _needs_fixup(t: pa.DataType) -> bool:
    return (
        pa.types.is_struct(t)
        or pa.types.is_map(t)
        or ((pa.types.is_list(t) or pa.types.is_large_list(t)) and _needs_fixup(t.value_type))
    )


def table_rows(t: pa.Table, row: RowFactory = tuple) -> Iterator[tuple[Any, ...]]:
    """Rows of ``t`` as tuples of Python values (the Flink boundary needs Python objects).

    Timestamps with a time zone become naive UTC; structs become ``row(values)`` (tuples by
    default; the sources pass Flink's ``Row``), maps dicts.
    """
    cols: list[list[Any]] = []
    for f, col in zip(t.schema, t.columns):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            col = col.cast(pa.timestamp(f.type.unit))
        values = col.to_pylist()
        if _needs_fixup(f.type):
            values = [_nested_value(v, f.type, row) for v in values]
        cols.append(values)
    if not cols:
        return iter(())
    return zip(*cols)


def check_columns(schema: pa.Schema, columns: Optional[Sequence[str]]) -> list[str]:
    if columns is None:
        return list(schema.names)
    unknown = [c for c in columns if schema.get_field_index(c) < 0]
    if unknown:
        raise SchemaError(f"unknown column(s) {unknown}; the table has {schema.names}")
    return list(columns)


class ReadPlan:
    """What a read of one table needs: columns, filter, dynamic options, the shape of its rows
    (:data:`SHAPES`) and whether it reads only the top level (``t$ro``). Picklable (paths,
    options, strings and an Arrow schema); checks columns and filter when made."""

    def __init__(
        self,
        table_path: str,
        columns: Optional[Sequence[str]],
        filter: Union[str, pc.Expression, None],
        options: Mapping[str, str],
        audit: bool = False,
        *,
        shape: Optional[str] = None,
        read_optimized: bool = False,
    ) -> None:
        self.table_path = table_path
        self.shape = shape or ("audit_log" if audit else "rows")
        if self.shape not in SHAPES:
            raise OptionError(f"read shape {self.shape!r}: expected one of {SHAPES}")
        self.audit = self.shape != "rows"  # rows carry their kind in a column, every row an insert
        self.read_optimized = read_optimized
        # (read the fallback branch?, from which of its snapshots): fixed by the first splits() call
        self._fallback: Optional[tuple[bool, Optional[int]]] = None
        # a streaming read that emits upserts: no -U rows (see operators.source.read_lakelog_table)
        self.upsert = False
        self.options = {str(k): str(v) for k, v in options.items()}
        store = TableStore(table_path)
        # the catalog's commit lock (a consumer's first progress record takes it), for the workers
        self.lock = table_lock(store)
        self.io = table_io(store)  # its object-store file IO, for the workers
        self.schema: pa.Schema = store.schema.arrow_schema()
        self.columns = check_columns(self.schema, columns)
        self.filter = filter
        parse_filter(filter, self.schema)  # fail early on a bad filter
        self.opts = scan_options(store, self.options)
        self.sequence_number = self._sequence_number(store)
        self.output_schema = pa.schema([self.schema.field(c) for c in self.columns])
        if self.sequence_number:
            self.output_schema = self.output_schema.insert(0, pa.field(SEQUENCE_NUMBER, pa.int64(), False))
        if self.shape == "audit_log":
            self.output_schema = self.output_schema.insert(0, pa.field("rowkind", pa.string(), False))
        elif self.shape == "binlog":
            self.output_schema = binlog_schema(self.output_schema)

    def _sequence_number(self, store: TableStore) -> bool:
        """Whether the rows carry ``_SEQUENCE_NUMBER`` after ``rowkind``: audit-log and binlog reads
        of a primary-key table with ``table-read.sequence-number.enabled``, a table option only
        (Paimon: it cannot be set by SQL hints)."""
        key = CoreOptions.TABLE_READ_SEQUENCE_NUMBER_ENABLED.key
        if key in self.options:
            raise OptionError(
                f"option {key!r} cannot be set by a read's dynamic options (a SQL hint) of "
                f"{self.table_path}: set it on the table (ALTER TABLE ... SET ('{key}' = 'true'))"
            )
        return self.audit and store.is_primary_key_table and store.options.table_read_sequence_number

    def check_log_read(self) -> None:
        """Refuse a streaming read from the table's Kafka log that should carry sequence numbers:
        the log's rows have none."""
        if self.sequence_number:
            raise OptionError(
                f"'table-read.sequence-number.enabled' on {self.table_path}: the rows of its Kafka log "
                "carry no sequence numbers; read its files ('streaming-read-mode' = 'file')"
            )

    def store(self) -> TableStore:
        adopt_lock(self.table_path, self.lock)
        adopt_io(self.table_path, self.io)
        return TableStore(self.table_path)

    def expr(self) -> Optional[pc.Expression]:
        return parse_filter(self.filter, self.schema)

    def splits(self, store: TableStore, snapshot_id: Optional[int]) -> list[Split]:
        """The splits of a batch read of ``snapshot_id``; a read of the latest snapshot adds those
        of ``scan.fallback-branch``. The first call (in the client that plans the job) fixes whether
        and from which fallback snapshot, so that every worker reading the pickled plan gets the
        same list."""
        snap = store.snapshot_manager.snapshot(snapshot_id) if snapshot_id is not None else None
        out: list[Split] = []
        if snap is not None:
            entries = read_optimized_entries(store, snap) if self.read_optimized else None
            out = plan_splits(store, snap, filter=self.expr(), entries=entries)
        if self.read_optimized:
            return out
        if self._fallback is None:
            self._fallback = (snapshot_id == store.snapshot_manager.latest_id(), None)
        use, pinned = self._fallback
        if use:
            extra, fid = fallback_splits(store, snap, filter=self.expr(), fallback_snapshot=pinned)
            self._fallback = (use, fid)
            out += extra
        return out

    def follow_splits(self, store: TableStore, snapshot_id: int) -> list[Split]:
        """The splits of the snapshot a streaming read starts with: the rows its change stream has
        published (:func:`~lakelog.connector.table.changes.published_entries`), so the changes
        that follow repeat none of them."""
        snap = store.snapshot_manager.snapshot(snapshot_id)
        return plan_splits(store, snap, filter=self.expr(), entries=published_entries(store, snap))

    def reader(self, store: TableStore) -> SplitRead:
        seq = self.sequence_number
        return SplitRead(store, columns=self.columns, filter=self.expr(), sequence_number=seq)

    def changes(self, store: TableStore, from_id: int, to_id: int) -> pa.Table:
        """What changed after ``from_id`` up to ``to_id`` (a streaming read), as an audit log."""
        overwrite = self.opts.streaming_read_overwrite  # the read's (a hint or SET), else the table's
        seq = self.sequence_number
        try:
            t = diff_snapshots(store, from_id, to_id, read_overwrite=overwrite, sequence_number=seq)
        except SnapshotNotFoundError:
            # the snapshot before ``to_id`` expired (a consumer only protects ``to_id`` on): read
            # what the snapshots wrote, with the row kinds they were written with (Paimon's delta read)
            t = delta_rows(store, from_id, to_id, read_overwrite=overwrite, sequence_number=seq)
        return self._project(t)

    def incremental(self, store: TableStore, from_id: int, to_id: int) -> pa.Table:
        """``incremental-between`` (a batch read), as an audit log, by Paimon's
        ``incremental-between-scan-mode``: ``delta`` the rows the APPEND snapshots in the range
        wrote (with the kinds written), ``changelog`` their changelog files, ``diff`` the difference
        of the two snapshots; ``auto`` is ``changelog`` for tables with a changelog producer, else
        ``delta``."""
        seq = self.sequence_number
        if to_id <= from_id:
            return self._project(diff_snapshots(store, to_id, to_id, sequence_number=seq))
        mode = self.opts.get(CoreOptions.INCREMENTAL_BETWEEN_SCAN_MODE)
        producer = store.options.changelog_producer if store.is_primary_key_table else ChangelogProducer.NONE
        if mode == IncrementalBetweenScanMode.AUTO:
            has_changelog = producer != ChangelogProducer.NONE
            mode = IncrementalBetweenScanMode.CHANGELOG if has_changelog else IncrementalBetweenScanMode.DELTA
        if mode == IncrementalBetweenScanMode.DELTA:
            t = delta_rows(store, from_id, to_id, sequence_number=seq)
        elif mode == IncrementalBetweenScanMode.CHANGELOG:
            if producer == ChangelogProducer.NONE:
                raise OptionError(
                    f"'incremental-between-scan-mode' = 'changelog' reads changelog files; table "
                    f"{self.table_path} has 'changelog-producer' = 'none'"
                )
            t = read_changelog(store, from_id, to_id, sequence_number=seq)
        else:
            t = diff_snapshots(store, from_id, to_id, sequence_number=seq)
        return self._project(t)

    def _project(self, t: pa.Table) -> pa.Table:
        expr = self.expr()
        if expr is not None and t.num_rows:
            t = t.filter(expr)
        return t.select(["rowkind", *([SEQUENCE_NUMBER] if self.sequence_number else []), *self.columns])

    def shaped(self, audit: pa.Table, *, streaming: bool) -> pa.Table:
        """An audit log (leading ``rowkind``) in this read's shape (binlog: arrays, and in
        streaming reads -U/+U pairs packed into one +U row)."""
        if self.shape == "binlog":
            return binlog_of(audit, pack_updates=streaming)
        return audit


def plan_batch(
    table: TableLike,
    *,
    columns: Optional[Sequence[str]] = None,
    filter: Union[str, pc.Expression, None] = None,
    options: Optional[Mapping[str, str]] = None,
) -> tuple[ScanStart, list[Split]]:
    """The start and splits a bounded read of ``table`` (a lakelog ``Table`` or a table path) would
    read (for inspection and tests)."""
    plan = ReadPlan(table_path(table), columns, filter, options or {})
    store = plan.store()
    start = resolve_start(store, plan.opts, streaming=False)
    return start, plan.splits(store, start.full_snapshot)
