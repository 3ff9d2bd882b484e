"""Table statistics, Paimon's ``ANALYZE``: the merged row count, an estimate of the merged size and
per-column statistics of one snapshot, kept in a statistics file that snapshots reference.

* :func:`analyze` reads a snapshot (merged, as a query sees it), computes the statistics and
  commits them in an ``ANALYZE`` snapshot whose ``statistics`` field names the new file,
  ``statistics/stat-<uuid>-0`` under the table directory (Paimon's name and JSON layout).
* Later commits carry the file forward while the table's schema stays the one it was computed on
  (:func:`inherited_statistics`, as Paimon's commit does); expiration, rollback and orphan cleanup
  keep a file as long as a snapshot or tag references it (lakelog.connector.table.maintenance).
* :func:`read_statistics` reads one back; ``t$statistics`` shows it (Paimon's columns).

Which statistics each column gets follows Flink's ``ANALYZE TABLE ... FOR COLUMNS``, the statement
Paimon's Flink catalog takes them from: the null count and number of distinct values of every
atomic column; min and max of numbers, dates, times and timestamps (as the text Paimon's
serializers write); the average (truncated) and largest length of strings (characters) and bytes.
Unlike Flink (``APPROX_COUNT_DISTINCT``) the distinct counts are exact, and unlike Flink's path
(which reports no size) ``mergedRecordSize`` is the snapshot's data size scaled by the merged share
of its rows, as Paimon's Spark ``ANALYZE`` computes it. Nested columns (ARRAY, MAP, ROW) have no
statistics: a request for one by name is refused.
"""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CorruptFileError, SchemaError, SnapshotNotFoundError
from lakelog.connector.format.schema import DataField
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import ATOMIC_ROOTS

if TYPE_CHECKING:
    from lakelog.connector.table.table import Table

__all__ = [
    "ColumnStatistics",
    "TableStatistics",
    "STATISTICS_DIR",
    "analyze",
    "compute_statistics",
    "statistics_path",
    "read_statistics",
    "write_statistics",
    "inherited_statistics",
    "snapshot_statistics",
]

log = logging.getLogger(__name__)

STATISTICS_DIR = "statistics"
_PREFIX = "stat-"
# distinct values of one column kept before they are reduced again (memory stays near this many)
_UNIQUE_FLUSH = 1 << 20


@dataclass(frozen=True)
class ColumnStatistics:
    """Paimon's ``ColStats``: ``min``/``max`` as the text Paimon's serializers read back."""

    column_id: int
    distinct_count: Optional[int] = None
    min: Optional[str] = None
    max: Optional[str] = None
    null_count: Optional[int] = None
    avg_len: Optional[int] = None
    max_len: Optional[int] = None

    _KEYS = (
        ("colId", "column_id"), ("distinctCount", "distinct_count"), ("min", "min"), ("max", "max"),
        ("nullCount", "null_count"), ("avgLen", "avg_len"), ("maxLen", "max_len"),
    )  # fmt: skip

    def to_json_object(self) -> dict[str, Any]:
        return {k: getattr(self, a) for k, a in self._KEYS if getattr(self, a) is not None}

    @classmethod
    def from_json_object(cls, obj: Any, where: str) -> ColumnStatistics:
        if not isinstance(obj, dict) or not isinstance(obj.get("colId"), int):
            raise CorruptFileError(f"{where}: a column's statistics need an integer 'colId', got {obj!r}")
        values: dict[str, Any] = {}
        for key, attr in cls._KEYS:
            v = obj.get(key)
            wanted = str if key in ("min", "max") else int
            if v is not None and (not isinstance(v, wanted) or isinstance(v, bool)):
                raise CorruptFileError(f"{where}: '{key}' must be {wanted.__name__}, got {v!r}")
            values[attr] = v
        return cls(**values)


@dataclass(frozen=True)
class TableStatistics:
    """Paimon's ``Statistics``: what ``ANALYZE`` found in snapshot ``snapshot_id``."""

    snapshot_id: int
    schema_id: int
    merged_record_count: Optional[int]
    merged_record_size: Optional[int]
    columns: dict[str, ColumnStatistics] = field(default_factory=dict)

    def to_json(self) -> str:
        obj: dict[str, Any] = {"snapshotId": self.snapshot_id, "schemaId": self.schema_id}
        if self.merged_record_count is not None:
            obj["mergedRecordCount"] = self.merged_record_count
        if self.merged_record_size is not None:
            obj["mergedRecordSize"] = self.merged_record_size
        obj["colStats"] = self.column_json_object()
        return jackson_pretty(obj)

    def column_json_object(self) -> dict[str, Any]:
        return {name: c.to_json_object() for name, c in self.columns.items()}

    @classmethod
    def from_json(cls, data: bytes, where: str) -> TableStatistics:
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CorruptFileError(f"statistics file {where} is not JSON: {e}") from e
        if not isinstance(obj, dict):
            raise CorruptFileError(f"statistics file {where} does not hold an object")
        for key in ("snapshotId", "schemaId"):
            if not isinstance(obj.get(key), int):
                raise CorruptFileError(f"statistics file {where}: '{key}' must be an integer")
        for key in ("mergedRecordCount", "mergedRecordSize"):
            if obj.get(key) is not None and not isinstance(obj[key], int):
                raise CorruptFileError(f"statistics file {where}: '{key}' must be an integer")
        cols = obj.get("colStats") or {}
        if not isinstance(cols, dict):
            raise CorruptFileError(f"statistics file {where}: 'colStats' must be an object")
        return cls(
            obj["snapshotId"], obj["schemaId"], obj.get("mergedRecordCount"), obj.get("mergedRecordSize"),
            {str(k): ColumnStatistics.from_json_object(v, f"statistics file {where}, column {k!r}")
             for k, v in cols.items()},
        )  # fmt: skip


def jackson_pretty(obj: Any, indent: int = 0) -> str:
    """JSON as Jackson's default pretty printer writes it (Paimon's ``JsonSerdeUtil.toJson``):
    ``"key" : value``, two-space indents, ``{ }`` for an empty object."""
    if isinstance(obj, dict):
        if not obj:
            return "{ }"
        pad = "  " * (indent + 1)
        items = [f"{pad}{json.dumps(k)} : {jackson_pretty(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    return json.dumps(obj)


# ---- files --------------------------------------------------------------------------------------------
def statistics_path(store: TableStore, name: str) -> str:
    """Where statistics file ``name`` lives: the table directory's ``statistics/`` (a branch's
    snapshots name files there too, as Paimon's do)."""
    return os.path.join(store.path, STATISTICS_DIR, name)


def write_statistics(store: TableStore, stats: TableStatistics) -> str:
    """Write ``stats`` to a new statistics file; return its name."""
    name = f"{_PREFIX}{uuid.uuid4()}-0"
    path = statistics_path(store, name)
    store.file_io.mkdirs(os.path.dirname(path))
    store.file_io.write_bytes(path, stats.to_json().encode("utf-8"))
    return name


def read_statistics(store: TableStore, name: str) -> TableStatistics:
    path = statistics_path(store, name)
    return TableStatistics.from_json(store.file_io.read_bytes(path), path)


def snapshot_statistics(store: TableStore, snapshot: Optional[Snapshot]) -> Optional[TableStatistics]:
    """The statistics ``snapshot`` references (None without any)."""
    if snapshot is None or not snapshot.statistics:
        return None
    return read_statistics(store, snapshot.statistics)


_SCHEMA_OF: dict[str, int] = {}  # statistics file path -> its schema id (the files never change)


def inherited_statistics(store: TableStore, latest: Optional[Snapshot]) -> Optional[str]:
    """The statistics file a commit after ``latest`` keeps: the one ``latest`` references, while
    it was computed on the table's current schema (Paimon drops it after a schema change). A file
    that cannot be read is dropped with a warning: statistics must not fail a commit of data."""
    if latest is None or not latest.statistics:
        return None
    path = statistics_path(store, latest.statistics)
    schema_id = _SCHEMA_OF.get(path)
    if schema_id is None:
        try:
            schema_id = read_statistics(store, latest.statistics).schema_id
        except (OSError, CorruptFileError) as e:
            log.warning("statistics of snapshot %s of %s dropped: %s", latest.id, store.location, e)
            return None
        if len(_SCHEMA_OF) > 4096:
            _SCHEMA_OF.clear()
        _SCHEMA_OF[path] = schema_id
    return latest.statistics if schema_id == store.schema.id else None


# ---- computing --------------------------------------------------------------------------------------
def analyzable(f: DataField) -> bool:
    return f.type.root in ATOMIC_ROOTS


def chosen_columns(store: TableStore, columns: Optional[Sequence[str]], all_columns: bool) -> list[DataField]:
    """The fields to compute column statistics of: ``columns`` by name, or every atomic one with
    ``all_columns``, or none (table statistics only)."""
    if all_columns:
        if columns:
            raise SchemaError("give the columns to analyze, or all columns, not both")
        return [f for f in store.schema.fields if analyzable(f)]
    out: list[DataField] = []
    for name in columns or ():
        try:
            f = store.schema.field(name)
        except (KeyError, SchemaError):
            raise SchemaError(
                f"cannot analyze column {name!r} of {store.location}: no such column; "
                f"columns: {', '.join(store.schema.field_names)}"
            ) from None
        if not analyzable(f):
            raise SchemaError(
                f"cannot analyze column {name!r} of {store.location}: its type {f.type.root} has no "
                "statistics (only atomic types do)"
            )
        if f not in out:
            out.append(f)
    return out


class _Column:
    """One column's statistics, accumulated over the batches of a read."""

    def __init__(self, f: DataField) -> None:
        self.field = f
        self.root = f.type.root
        self.nulls = 0
        self.uniques: list[pa.Array] = []
        self.unique_rows = 0
        self.low: Any = None
        self.high: Any = None
        self.length_sum = 0
        self.length_max: Optional[int] = None
        self.valid = 0
        self.unit = "us"  # the Arrow unit of TIME and TIMESTAMP values

    def add(self, arr: pa.Array) -> None:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        self.nulls += arr.null_count
        self.valid += len(arr) - arr.null_count
        u = pc.unique(arr)
        self.uniques.append(u)
        self.unique_rows += len(u)
        if self.unique_rows > _UNIQUE_FLUSH and len(self.uniques) > 1:
            self.uniques = [pc.unique(pa.concat_arrays(self.uniques))]
            self.unique_rows = len(self.uniques[0])
        if self.root in _LENGTHS:
            lengths = pc.utf8_length(arr) if self.root in ("CHAR", "VARCHAR") else pc.binary_length(arr)
            self.length_sum += pc.sum(lengths).as_py() or 0
            m = pc.max(lengths).as_py()
            if m is not None:
                self.length_max = m if self.length_max is None else max(self.length_max, m)
        elif self.root in _ORDERED:
            if self.root in ("TIMESTAMP", "TIMESTAMP_LTZ", "TIME"):
                self.unit = arr.type.unit
                arr = arr.cast(pa.int32() if pa.types.is_time32(arr.type) else pa.int64())
            elif self.root == "DATE":
                arr = arr.cast(pa.int32())
            mm = pc.min_max(arr)
            low, high = mm["min"].as_py(), mm["max"].as_py()
            if low is None or high is None or (isinstance(low, float) and low > high):
                return  # only nulls (or NaNs, which min and max skip)
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)

    def result(self) -> ColumnStatistics:
        uniques = pc.unique(pa.concat_arrays(self.uniques)) if self.uniques else pa.array([])
        distinct = len(uniques) - uniques.null_count
        low = high = None
        if self.low is not None:
            low, high = self._text(self.low), self._text(self.high)
        avg = max_len = None
        if self.root in _LENGTHS and self.valid:
            avg, max_len = self.length_sum // self.valid, self.length_max
        return ColumnStatistics(self.field.id, distinct, low, high, self.nulls, avg, max_len)

    def _text(self, v: Any) -> str:
        """Paimon's ``Serializer.serializeToString`` of one value of this column."""
        t = self.field.type
        if self.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            precision = t.precision if t.precision is not None else 6
            return java_timestamp_text(v * _NANOS_PER_UNIT[self.unit], precision)
        if self.root == "TIME":  # Paimon keeps milliseconds of the day
            return str(v * _NANOS_PER_UNIT[self.unit] // 1_000_000)
        if self.root == "FLOAT":
            return _java_float(float(v), single=True)
        if self.root == "DOUBLE":
            return _java_float(float(v), single=False)
        if isinstance(v, decimal.Decimal):
            return str(v)
        return str(int(v))


_LENGTHS = frozenset({"CHAR", "VARCHAR", "BINARY", "VARBINARY"})
_ORDERED = frozenset(
    {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "DATE", "TIME", "TIMESTAMP",
     "TIMESTAMP_LTZ"}
)  # fmt: skip
_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def java_timestamp_text(nanos: int, precision: int) -> str:
    """Paimon's ``DateTimeUtils.formatTimestamp`` of the timestamp ``nanos`` (nanoseconds since the
    epoch; UTC wall time for TIMESTAMP_LTZ): ``2024-01-01 08:30:00.5``, the fraction trimmed of
    zeros down to ``precision`` digits."""
    seconds, frac = divmod(nanos, 1_000_000_000)
    when = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    fraction = f"{frac:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = f"{when.year:04d}-{when.month:02d}-{when.day:02d} {when:%H:%M:%S}"
    return f"{text}.{fraction}" if fraction else text


def _java_float(v: float, *, single: bool) -> str:
    """A float as Java's ``Float``/``Double.valueOf`` reads it back exactly (shortest digits)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    return str(np.float32(v)) if single else repr(v)


def compute_statistics(
    table: Table, snapshot: Snapshot, fields: Sequence[DataField]
) -> TableStatistics:
    """The statistics of ``snapshot`` of ``table``: its merged rows counted, and ``fields``'
    column statistics, in one streaming read (memory holds a batch and the distinct values)."""
    store = table.store
    if fields:
        names = [f.name for f in fields]
    else:  # a count only: the cheapest column that every read must produce anyway
        names = list(store.schema.primary_keys or store.schema.field_names[:1])
    acc = [_Column(f) for f in fields]
    rows = 0
    for batch in table.to_reader(columns=names, snapshot_id=snapshot.id):
        rows += batch.num_rows
        for c in acc:
            c.add(batch.column(batch.schema.get_field_index(c.field.name)))
    size = sum(e.file.file_size for e in store.live_entries(snapshot))
    total = snapshot.total_record_count or 0
    merged_size = int(size * rows / total) if total else 0
    return TableStatistics(
        snapshot.id, snapshot.schema_id, rows, merged_size, {c.field.name: c.result() for c in acc}
    )


def analyze(
    table: Table, columns: Optional[Iterable[str]] = None, *, all_columns: bool = False
) -> Optional[int]:
    """Compute the statistics of ``table``'s latest snapshot and commit them (an ``ANALYZE``
    snapshot); return its id, None when the table has no snapshot (nothing to analyze, as in
    Paimon)."""
    from lakelog.connector.table.commit import TableCommit
    from lakelog.connector.table.maintenance import after_commit

    store = table.store
    fields = chosen_columns(store, list(columns) if columns is not None else None, all_columns)
    latest = store.snapshot_manager.latest()
    if latest is None:
        return None
    try:
        stats = compute_statistics(table, latest, fields)
    except SnapshotNotFoundError:
        raise SnapshotNotFoundError(
            f"snapshot {latest.id} of {store.location} expired while it was analyzed; analyze again"
        ) from None
    name = write_statistics(store, stats)
    try:
        sid = TableCommit(store).commit_statistics(name)
    except BaseException:
        store.file_io.delete(statistics_path(store, name))
        raise
    after_commit(store)
    return sid
