"""Data files: Parquet writing with Paimon's statistics, and reading with errors that name the file."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.connector.errors import CorruptFileError, LakelogError, MissingFileError
from lakelog.connector.format import parquet_footer, parquet_layout
from lakelog.connector.format.binary_row import serialize_row
from lakelog.connector.format.file_index import (
    FileIndexConfig,
    bloom_hashes,
    build_container,
    index_file_name,
)
from lakelog.connector.format.fileio import io_for, os_error_code, storage_errors
from lakelog.connector.format.key_value import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, RowKind, key_column
from lakelog.connector.format.manifest import DataFileMeta, SimpleStats, local_now_millis
from lakelog.connector.format.parquet_layout import PhysicalLayout, WriteLayout
from lakelog.connector.format.parquet_read import conform, readable
from lakelog.connector.format.pruning import row_groups_matching
from lakelog.connector.format.types import NESTED_ROOTS, DataType

__all__ = [
    "DataFileWriter",
    "RollingFileWriter",
    "read_data_file",
    "iter_data_file",
    "FileLayout",
    "new_data_file_name",
    "STRING_STATS_TRUNCATE",
    "StatsMode",
]

STRING_STATS_TRUNCATE = 16  # Paimon's default metadata.stats-mode is truncate(16)

_log = logging.getLogger(__name__)


def new_data_file_name(prefix: str = "data-", suffix: str = ".parquet") -> str:
    return f"{prefix}{uuid.uuid4()}-0{suffix}"


def _truncate_min(v: Any, length: Optional[int]) -> Any:
    if length is not None and isinstance(v, (str, bytes)) and len(v) > length:
        return v[:length]
    return v


def _truncate_max(v: Any, length: Optional[int]) -> Any:
    """An upper bound no longer than ``length``, or None when none can be made."""
    if length is None:
        return v
    if isinstance(v, str) and len(v) > length:
        head = v[:length]
        for i in range(len(head) - 1, -1, -1):
            c = ord(head[i])
            if c < 0x10FFFF and not (0xD7FF <= c < 0xE000):
                return head[:i] + chr(c + 1)
        return None
    if isinstance(v, bytes) and len(v) > length:
        raw = bytearray(v[:length])
        for j in range(len(raw) - 1, -1, -1):
            if raw[j] < 0xFF:
                raw[j] += 1
                return bytes(raw[: j + 1])
        return None
    return v


class _Timestamp(dt.datetime):
    """A datetime with the nanoseconds a ``datetime`` cannot hold (``serialize_row`` reads them from
    ``nanosecond``, as it does from ``pandas.Timestamp``)."""

    nanosecond: int = 0


_EPOCH = dt.datetime(1970, 1, 1)
_TZ_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _timestamp(value: int, t: pa.TimestampType) -> dt.datetime:
    """The datetime (naive, or UTC for a zoned type) of a timestamp's integer ``value``, its
    nanoseconds kept; pyarrow's ``as_py`` needs pandas for those."""
    ns = value * _NS_PER_UNIT[t.unit]
    base = (_EPOCH if t.tz is None else _TZ_EPOCH) + dt.timedelta(microseconds=ns // 1000)
    out = _Timestamp(base.year, base.month, base.day, base.hour, base.minute, base.second, base.microsecond,
                     base.tzinfo)
    out.nanosecond = ns % 1000
    return out


def _py(scalar: pa.Scalar) -> Any:
    """A scalar as the Python value ``serialize_row`` takes."""
    if isinstance(scalar, pa.TimestampScalar):
        return None if scalar.value is None else _timestamp(scalar.value, scalar.type)
    return scalar.as_py()


@dataclass(frozen=True)
class StatsMode:
    """One column's ``metadata.stats-mode``: ``none`` (no statistics), ``counts`` (null counts only),
    ``truncate(n)`` (min/max with strings and bytes cut to n) or ``full``."""

    kind: str
    length: Optional[int] = None

    @staticmethod
    def parse(text: str) -> StatsMode:
        t = text.strip().lower()
        if t.startswith("truncate(") and t.endswith(")"):
            return StatsMode("truncate", int(t[len("truncate(") : -1]))
        if t in ("none", "counts", "full"):
            return StatsMode(t)
        raise ValueError(f"unknown statistics mode {text!r}")

    @property
    def min_max(self) -> bool:
        return self.kind in ("truncate", "full")


DEFAULT_STATS_MODE = StatsMode("truncate", STRING_STATS_TRUNCATE)


class _ColumnStats:
    """Min, max and null count of columns, accumulated chunk by chunk, as each column's
    :class:`StatsMode` asks (min/max are not even computed for ``none`` and ``counts``; timestamps
    as their integers, so that nanoseconds count)."""

    def __init__(self, types: Sequence[DataType], modes: Optional[Sequence[StatsMode]] = None) -> None:
        self.types = list(types)
        n = len(self.types)
        self.modes = list(modes) if modes is not None else [DEFAULT_STATS_MODE] * n
        self.lo: list[Any] = [None] * n
        self.hi: list[Any] = [None] * n
        self.nulls = [0] * n
        self.unknown = [t.root in NESTED_ROOTS or not m.min_max for t, m in zip(self.types, self.modes)]
        self.kept = [m.kind != "none" for m in self.modes]
        self.timestamp_types: list[Optional[pa.TimestampType]] = [None] * n

    def update(self, columns: Sequence[pa.ChunkedArray | pa.Array]) -> None:
        for i, col in enumerate(columns):
            self.nulls[i] += col.null_count
            if self.unknown[i] or col.null_count == len(col):
                continue
            mm = pc.min_max(col)
            lo_s, hi_s = mm["min"], mm["max"]
            if isinstance(lo_s, pa.TimestampScalar):
                self.timestamp_types[i] = lo_s.type
                lo, hi = lo_s.value, hi_s.value
            else:
                lo, hi = lo_s.as_py(), hi_s.as_py()
            if (isinstance(lo, float) and lo != lo) or (isinstance(hi, float) and hi != hi):
                self.unknown[i] = True  # NaN: no usable bound
                self.lo[i] = self.hi[i] = None
                continue
            if self.lo[i] is None or lo < self.lo[i]:
                self.lo[i] = lo
            if self.hi[i] is None or hi > self.hi[i]:
                self.hi[i] = hi

    @property
    def all_kept(self) -> bool:
        return all(self.kept)

    def _bound(self, i: int, bounds: list[Any]) -> Any:
        """Column ``i``'s bound as ``serialize_row`` takes it (timestamps with their nanoseconds)."""
        v, t = bounds[i], self.timestamp_types[i]
        if self.unknown[i]:
            return None
        return _timestamp(v, t) if t is not None and v is not None else v

    def to_stats(self) -> SimpleStats:
        """Statistics of the kept columns (all but those of mode ``none``, which Paimon's dense
        statistics leave out; the file's ``_VALUE_STATS_COLS`` then names the kept ones)."""
        idx = [i for i, k in enumerate(self.kept) if k]
        mins = [_truncate_min(self._bound(i, self.lo), self.modes[i].length) for i in idx]
        maxs = [_truncate_max(self._bound(i, self.hi), self.modes[i].length) for i in idx]
        nulls: list[Optional[int]] = [self.nulls[i] for i in idx]
        types = [self.types[i] for i in idx]
        return SimpleStats(serialize_row(mins, types), serialize_row(maxs, types), nulls)


@dataclass
class DataFileWriter:
    """How to write the data files of one bucket: directory, schema, compression, target size.

    ``key_columns``/``key_types`` name the ``_KEY_*`` columns of a primary-key table (empty for an
    append table); ``value_types`` are the table's column types in ``value_columns`` order.
    """

    bucket_dir: str
    schema_id: int
    key_columns: Sequence[str]
    key_types: Sequence[DataType]
    value_columns: Sequence[str]
    value_types: Sequence[DataType]
    compression: str = "zstd"
    compression_level: Optional[int] = 1
    target_file_size: int = 128 * 1024 * 1024
    file_prefix: str = "data-"
    file_suffix: str = ".parquet"
    value_stats_modes: Optional[Sequence[StatsMode]] = None  # per value column; default truncate(16)
    key_stats_mode: StatsMode = DEFAULT_STATS_MODE
    file_schema: Optional[pa.Schema] = None  # every chunk is cast to it (nullability differences)
    layout: Optional[WriteLayout] = None  # None: parquet_layout.DEFAULT_LAYOUT
    # file-index.bloom-filter.columns and file-index.bitmap.columns; the index rides in the
    # manifest up to index_in_manifest bytes, else it is written beside the data file (file_index.py)
    file_index: Optional[FileIndexConfig] = None
    index_in_manifest: int = 500

    def rolling(self, *, level: int, file_source: int = 0) -> RollingFileWriter:
        return RollingFileWriter(self, level=level, file_source=file_source)

    def write(self, table: pa.Table, *, level: int, file_source: int = 0) -> list[DataFileMeta]:
        """Write a sorted table as one or more files of about ``target_file_size``."""
        w = self.rolling(level=level, file_source=file_source)
        try:
            w.write(table)
            return w.close()
        except BaseException:
            w.abort()
            raise


def _dictionary_columns(schema: pa.Schema, key_columns: Sequence[str]) -> list[str]:
    """Columns worth dictionary encoding: strings and binaries that are not keys (keys are unique
    within a file, so a dictionary would only cost time)."""
    keys = set(key_columns) | {k[len("_KEY_") :] for k in key_columns}
    return [
        f.name
        for f in schema
        if f.name not in keys
        and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_binary(f.type))
    ]


class RollingFileWriter:
    """Streams sorted chunks into Parquet files, starting a new file past the target size.

    Memory holds one chunk; statistics accumulate per chunk with vectorised min/max.
    """

    _CHUNK_ROWS = 128 * 1024

    def __init__(self, spec: DataFileWriter, *, level: int, file_source: int) -> None:
        self.spec = spec
        self.level = level
        self.file_source = file_source
        self.files: list[DataFileMeta] = []
        self.paths: list[str] = []
        self._uploads: list[Future[None]] = []  # of finished files (object stores)
        self._bloom: dict[str, list[np.ndarray]] = {}  # the file being written: hashes per column
        self._bitmap: dict[str, list[pa.ChunkedArray]] = {}  # and values per bitmap-indexed column
        self._writer: Optional[pq.ParquetWriter] = None
        self._physical: Optional[PhysicalLayout] = None
        self._sink: Any = None
        self._name = ""
        self._io = io_for(spec.bucket_dir)
        self._reset_stats()

    def _reset_stats(self) -> None:
        self._rows = 0
        self._first_key: Optional[list[Any]] = None
        self._last_key: Optional[list[Any]] = None
        self._min_seq: Optional[int] = None
        self._max_seq: Optional[int] = None
        self._deletes = 0
        spec = self.spec
        self._key_stats = _ColumnStats(spec.key_types, [spec.key_stats_mode] * len(spec.key_types))
        self._value_stats = _ColumnStats(spec.value_types, spec.value_stats_modes)

    def write(self, table: pa.Table) -> None:
        for start in range(0, table.num_rows, self._CHUNK_ROWS):
            self._write_chunk(table.slice(start, self._CHUNK_ROWS))

    def _write_chunk(self, chunk: pa.Table) -> None:
        n = chunk.num_rows
        if n == 0:
            return
        spec = self.spec
        if spec.file_schema is not None and chunk.schema != spec.file_schema:
            chunk = chunk.select(spec.file_schema.names).cast(spec.file_schema)
        if self._physical is None:
            schema = spec.file_schema if spec.file_schema is not None else chunk.schema
            layout = spec.layout if spec.layout is not None else parquet_layout.DEFAULT_LAYOUT
            self._physical = PhysicalLayout(schema, spec.key_columns, layout)
        physical = self._physical
        if self._writer is None:
            self._name = new_data_file_name(spec.file_prefix, spec.file_suffix)
            path = os.path.join(spec.bucket_dir, self._name)
            local = self._local_path()
            with storage_errors("create the directory", os.path.dirname(local)):
                os.makedirs(os.path.dirname(local), exist_ok=True)
            self.paths.append(path)
            with storage_errors("write the data file", path):
                self._sink = pa.OSFile(local, "wb")
                self._writer = pq.ParquetWriter(
                    self._sink,
                    physical.schema,
                    compression=spec.compression,
                    compression_level=spec.compression_level,
                    use_dictionary=_dictionary_columns(chunk.schema, spec.key_columns),
                    **physical.options,
                )
        with storage_errors("write the data file", os.path.join(spec.bucket_dir, self._name)):
            self._writer.write_table(physical.to_physical(chunk), row_group_size=max(n, 1))
        self._rows += n
        if spec.key_columns:
            if self._first_key is None:
                self._first_key = [_py(chunk.column(k)[0]) for k in spec.key_columns]
            self._last_key = [_py(chunk.column(k)[n - 1]) for k in spec.key_columns]
            self._key_stats.update([chunk.column(k) for k in spec.key_columns])
            mm = pc.min_max(chunk.column("_SEQUENCE_NUMBER"))
            lo, hi = int(mm["min"].as_py()), int(mm["max"].as_py())
            self._min_seq = lo if self._min_seq is None else min(self._min_seq, lo)
            self._max_seq = hi if self._max_seq is None else max(self._max_seq, hi)
            kinds = chunk.column("_VALUE_KIND")
            self._deletes += int(pc.sum(pc.is_in(kinds, value_set=pa.array([1, 3], kinds.type))).as_py() or 0)
        self._value_stats.update([chunk.column(c) for c in spec.value_columns])
        if spec.file_index:
            for c in spec.file_index.bloom:
                self._bloom.setdefault(c, []).append(np.unique(bloom_hashes(chunk.column(c))))
            for c in spec.file_index.bitmap:
                self._bitmap.setdefault(c, []).append(chunk.column(c))
        if self._sink.tell() >= spec.target_file_size:
            self._finish_file()

    def _local_path(self) -> str:
        """Where the file being written lives until it is complete: in its bucket directory on a
        local file system; on an object store in a local staging directory, since its footer is
        completed in place (:meth:`PhysicalLayout.finish`) before the one upload."""
        if self._io.is_local:
            return os.path.join(self.spec.bucket_dir, self._name)
        return os.path.join(staging_dir(), self._name)

    def _finish_file(self) -> None:
        if self._writer is None:
            return
        spec = self.spec
        path = os.path.join(spec.bucket_dir, self._name)
        local = self._local_path()
        with storage_errors("write the data file", path):
            self._writer.close()
            self._sink.close()
            assert self._physical is not None
            self._physical.finish(local)
            size = os.path.getsize(local)
        if not self._io.is_local:  # uploads while the next file is written; close() waits for it
            self._uploads.append(self._io.upload_in_background(local, path))
        embedded, extra = self._file_index(path)
        if spec.key_columns:
            assert self._first_key is not None and self._last_key is not None
            min_key = serialize_row(self._first_key, spec.key_types)
            max_key = serialize_row(self._last_key, spec.key_types)
            key_stats = self._key_stats.to_stats()
            min_seq, max_seq = self._min_seq or 0, self._max_seq or 0
        else:
            min_key = max_key = serialize_row([], [])
            key_stats = SimpleStats(min_key, min_key, [])
            min_seq = max_seq = 0
        self.files.append(
            DataFileMeta(
                file_name=self._name,
                file_size=size,
                row_count=self._rows,
                min_key=min_key,
                max_key=max_key,
                key_stats=key_stats,
                value_stats=self._value_stats.to_stats(),
                min_sequence_number=min_seq,
                max_sequence_number=max_seq,
                schema_id=spec.schema_id,
                level=self.level,
                extra_files=extra,
                creation_time_millis=local_now_millis(),
                delete_row_count=self._deletes,
                embedded_file_index=embedded,
                file_source=self.file_source,
                value_stats_cols=None
                if self._value_stats.all_kept
                else [c for c, k in zip(spec.value_columns, self._value_stats.kept) if k],
                external_path=None,
                first_row_id=None,
                write_cols=None,
            )
        )
        self._writer = None
        self._sink = None
        self._reset_stats()

    def _file_index(self, path: str) -> tuple[Optional[bytes], list[str]]:
        """(the index to embed in the manifest record, extra files) of the file being finished: its
        bloom filters and bitmaps in Paimon's container, embedded when small, else written beside
        the file."""
        spec = self.spec
        if not spec.file_index:
            return None, []
        hashes = {c: np.unique(np.concatenate(parts)) for c, parts in self._bloom.items() if parts}
        values = {c: pa.chunked_array([x for p in parts for x in p.chunks], parts[0].type)
                  for c, parts in self._bitmap.items() if parts}
        self._bloom, self._bitmap = {}, {}
        data = build_container(spec.file_index, hashes, values)
        if len(data) <= spec.index_in_manifest:
            return data, []
        name = index_file_name(os.path.basename(path))
        target = os.path.join(spec.bucket_dir, name)
        self.paths.append(target)
        with storage_errors("write the file index", target):
            self._io.write_bytes(target, data)
        return None, [name]

    def close(self) -> list[DataFileMeta]:
        """Finish the last file and return every file written, once all of them are in place."""
        self._finish_file()
        self._wait_uploads()
        return self.files

    def _wait_uploads(self) -> None:
        """Wait for every upload started; the first failure is raised once all have ended (so that
        :meth:`abort` then deletes what did land)."""
        uploads, self._uploads = self._uploads, []
        errors = [e for e in (f.exception() for f in uploads) if e is not None]
        if errors:
            raise errors[0]

    def abort(self) -> None:
        """Remove the files written so far. Runs on the failure path, so it never raises: the error
        that brought us here is the one to report (on a read-only file system even removing a file
        that was never created fails, with EROFS). A file that cannot be removed is logged; it is in
        no snapshot, and orphan-file removal deletes it later."""
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            except Exception:  # noqa: S110 - best effort on the failure path
                pass
            self._writer = None
        with contextlib.suppress(Exception):  # uploads in flight end before their objects go
            self._wait_uploads()
        if not self._io.is_local and self._name:
            with contextlib.suppress(OSError):
                os.remove(self._local_path())
        for p in self.paths:
            try:
                self._io.delete(p)
            except OSError as e:
                _log.warning("cannot remove the unfinished data file %s: %s", p, e)
        self.files = []


_STAGING: list[str] = []


def staging_dir() -> str:
    """This process's local directory for data files on their way to an object store (removed at
    exit; a file there is either being written or being uploaded)."""
    if not _STAGING:
        import atexit
        import shutil
        import tempfile

        d = tempfile.mkdtemp(prefix="lakelog-staging-")
        atexit.register(shutil.rmtree, d, True)
        _STAGING.append(d)
    return _STAGING[0]


# What pyarrow raises for a file it cannot decode. A damaged footer or page can also fail as a
# UnicodeDecodeError (a column name), an ArrowNotImplementedError (a type field turned into one
# pyarrow lacks) or an ArrowIndexError/ArrowKeyError; a failed page CRC is an OSError without errno.
_UNDECODABLE = (
    pa.ArrowInvalid,
    pa.ArrowNotImplementedError,
    pa.ArrowTypeError,
    pa.ArrowIndexError,
    pa.ArrowKeyError,
    pa.ArrowCapacityError,
    UnicodeDecodeError,
    OSError,
)


@contextlib.contextmanager
def _named_errors(path: str) -> Iterator[None]:
    """Turn a failed read into MissingFileError or CorruptFileError naming the file (or a
    StorageError, when the file system failed)."""
    try:
        yield
    except FileNotFoundError:
        raise MissingFileError(f"data file referenced by the snapshot is missing: {path}") from None
    except LakelogError:
        raise
    except _UNDECODABLE as e:
        if not io_for(path).file_exists(path):
            raise MissingFileError(f"data file referenced by the snapshot is missing: {path}") from None
        if isinstance(e, OSError) and os_error_code(e) is not None:  # the file system's, not the file's
            with storage_errors("read the data file", path):
                raise
        if "CRC checksum verification failed" in str(e):
            raise CorruptFileError(f"data file {path} fails a page checksum: it was damaged ({e})") from e
        raise CorruptFileError(f"cannot read data file {path}: {e}") from e


@dataclass(frozen=True)
class FileLayout:
    """The columns the table's schema says its data files begin with, checked against each file's
    Parquet footer when it is opened: a primary-key table's key-value layout (``keys``, its
    trimmed primary-key fields, stored as ``_KEY_<k>``, then ``_SEQUENCE_NUMBER`` and
    ``_VALUE_KIND``), or, without ``keys``, the table's columns alone. ``schema_file`` is the
    schema file that says so (named in errors), ``primary_keys`` its primary key.

    A schema file edited to drop the primary key would otherwise read key-value files as append
    files, every version of a key and its deletions included (deleted rows come back, and a
    compaction would make that permanent); one that gained a primary key would merge append
    files by a key they do not hold."""

    keys: tuple[str, ...]
    schema_file: str
    primary_keys: tuple[str, ...] = ()

    def check(self, f: pq.ParquetFile, path: str) -> None:
        """Raise :class:`CorruptFileError` naming the data file and the schema file when the
        footer's leading columns contradict this layout (a few names of the footer already read)."""
        schema = f.metadata.schema
        count = len(schema)
        if self.keys:
            expected = [key_column(k) for k in self.keys] + [SEQUENCE_NUMBER, VALUE_KIND]
            found = [schema.column(i).path for i in range(min(count, len(expected)))]
            if found != expected:
                keys = [c for c in found if c.startswith(KEY_PREFIX)]
                raise self._refused(path, f"the key columns {keys}" if keys else None)
        elif count and schema.column(0).path.startswith(KEY_PREFIX):
            raise self._refused(path, None)

    def fits_record(self, meta: DataFileMeta) -> bool:
        """The same check of a file's manifest record, which opens nothing: a key-value file's
        record holds its smallest key, an append file's the empty row (no fields). When it fails,
        raise :meth:`refused_record`."""
        return (int.from_bytes(meta.min_key[:4], "big", signed=True) > 0) == bool(self.keys)

    def refused_record(self, path: str) -> CorruptFileError:
        return self._refused(path, None, record=True)

    def _refused(self, path: str, holds: Optional[str], *, record: bool = False) -> CorruptFileError:
        said = f"the manifest records data file {path} as holding" if record else f"data file {path} holds"
        if not self.keys:
            return CorruptFileError(
                f"{said} the key-value columns of a primary-key table ({KEY_PREFIX}*, {SEQUENCE_NUMBER}, "
                f"{VALUE_KIND}), but schema file {self.schema_file} declares no primary key: the schema "
                "file was edited or replaced, and reading the file as one of a table without primary "
                "key would bring back every deleted and overwritten row (a compaction would make that "
                "permanent). Restore the schema file's primaryKeys"
            )
        expected = [key_column(k) for k in self.keys] + [SEQUENCE_NUMBER, VALUE_KIND]
        what = holds or (
            f"no key-value columns ({KEY_PREFIX}*, {SEQUENCE_NUMBER}, {VALUE_KIND}), as a file of a table "
            "without primary key does"
        )
        return CorruptFileError(
            f"{said} {what}, but schema file {self.schema_file} declares the primary key "
            f"{list(self.primary_keys)} (files beginning with {expected}): the schema file was edited or "
            "replaced, and the table's rows would be merged by a key its files do not hold. Restore the "
            "schema file"
        )


def _open_checked(
    path: str, expect: Optional[DataFileMeta], layout: Optional[FileLayout] = None
) -> pq.ParquetFile:
    """Open a data file, checking its size and row count against the manifest's record of it
    (both are free: a stat and the Parquet footer), its footer against the footer's checksum
    when it has one (files lakelog writes do), and its leading columns against ``layout`` (the
    footer's names). A file replaced by another one, truncated, extended or damaged, or one that
    contradicts the table's schema, raises :class:`CorruptFileError` naming it, instead of reading
    wrong rows. The file opens with its page checksums verified as pages are read (pages without
    one, as in files that Paimon or pypaimon wrote without them, are read unchecked)."""
    source = io_for(path).open_input(path)
    try:
        if expect is not None:
            size = source.size()
            if size != expect.file_size:
                raise CorruptFileError(
                    f"data file {path} has {size} bytes, but the manifest records {expect.file_size}: "
                    "it was replaced, truncated or extended after it was committed"
                )
        parquet_footer.verify_footer(path, source)
        f = pq.ParquetFile(source, page_checksum_verification=True)
        if expect is not None and f.metadata.num_rows != expect.row_count:
            raise CorruptFileError(
                f"data file {path} holds {f.metadata.num_rows} rows, but the manifest records "
                f"{expect.row_count}: it was replaced after it was committed"
            )
    except BaseException:
        source.close()
        raise
    if layout is not None:
        layout.check(f, path)
    return f


def _check_columns(
    f: pq.ParquetFile, path: str, columns: Optional[list[str]], expect: Optional[DataFileMeta]
) -> None:
    """pyarrow skips the columns to read that a file lacks; a file missing one of its schema's
    columns is damaged (a file that records the columns it holds, Paimon's ``_WRITE_COLS``, is not
    checked)."""
    if columns is None or (expect is not None and expect.write_cols is not None):
        return
    names = set(f.schema_arrow.names)
    missing = [c for c in columns if c not in names]
    if missing:
        raise CorruptFileError(f"data file {path} lacks the column(s) {missing} of its schema")


def may_hold_retractions(f: pq.ParquetFile) -> bool:
    """Whether a key-value data file may hold retractions (``-U``, ``-D``), judged by the
    statistics of its ``_VALUE_KIND`` column in the footer (already read): False only when every
    row group's range shows inserts alone or updates alone. A file's manifest record counts its
    retractions too (``deleteRowCount``), but pypaimon records 0 whatever it wrote (a
    ``rowkind.field`` delete), so reads ask the file itself."""
    md = f.metadata
    schema = md.schema
    index = next((i for i in range(len(schema)) if schema.column(i).path == VALUE_KIND), None)
    if index is None:
        return False  # not a key-value file
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(index).statistics
        if st is None or not st.has_min_max:
            return True
        inserts = st.min >= 0 and st.max <= RowKind.INSERT
        updates = st.min == st.max == RowKind.UPDATE_AFTER
        if not (inserts or updates):
            return True
    return False


def file_may_hold_retractions(path: str, expect: Optional[DataFileMeta] = None) -> bool:
    """:func:`may_hold_retractions` of the data file at ``path`` (its footer only)."""
    with _named_errors(path):
        f = _open_checked(path, expect)
        try:
            return may_hold_retractions(f)
        finally:
            f.close(force=True)


def _with_kinds(f: pq.ParquetFile, columns: Optional[list[str]], kinds: bool) -> Optional[list[str]]:
    """``columns`` and ``_VALUE_KIND`` when ``kinds`` asks for it and the file may hold retractions."""
    if not kinds or columns is None or VALUE_KIND in columns or not may_hold_retractions(f):
        return columns
    return columns + [VALUE_KIND]


def read_data_file(
    path: str,
    columns: Optional[Sequence[str]] = None,
    *,
    expect: Optional[DataFileMeta] = None,
    schema: Optional[pa.Schema] = None,
    layout: Optional[FileLayout] = None,
    kinds: bool = False,
) -> pa.Table:
    """Read a Parquet data file; a missing or undecodable file, or one that does not match its
    manifest record ``expect``, raises an error naming it.

    ``schema`` is the file's Arrow schema (:func:`~lakelog.connector.format.store.file_schema`): each
    column comes back with its type whichever physical layout stored it (see
    :mod:`~lakelog.connector.format.parquet_read`); without it INT96 columns come back as
    ``timestamp[ns]``, and plain INT64 timestamps as integers. ``layout``: the columns the table's
    schema says the file begins with (see :class:`FileLayout`). ``kinds``: also read
    ``_VALUE_KIND`` (appended last) unless the file's statistics show that it holds no
    retraction (see :func:`may_hold_retractions`).
    """
    cols = list(columns) if columns is not None else None
    with _named_errors(path):
        f = _open_checked(path, expect, layout)
        _check_columns(f, path, cols, expect)
        cols = _with_kinds(f, cols, kinds)
        with readable(f, path, cols) as source:
            table = source.read(columns=cols, use_threads=True)
        return conform(table, schema, path)


def iter_row_groups_where(
    path: str,
    columns: Optional[Sequence[str]],
    where: pc.Expression,
    stats_schema: pa.Schema,
    stats_columns: Sequence[str],
    *,
    expect: Optional[DataFileMeta] = None,
    schema: Optional[pa.Schema] = None,
    layout: Optional[FileLayout] = None,
    kinds: bool = False,
) -> Iterator[tuple[int, pa.Table]]:
    """(position of its first row, its rows) of each row group of a data file that ``where`` may
    match, judged by the row groups' statistics of ``stats_columns`` (typed by ``stats_schema``);
    the others are not read. ``schema``, ``layout`` and ``kinds`` as for :func:`read_data_file`."""
    cols = list(columns) if columns is not None else None
    with _named_errors(path):
        f = _open_checked(path, expect, layout)
        _check_columns(f, path, cols, expect)
        cols = _with_kinds(f, cols, kinds)
        md = f.metadata
        chosen = row_groups_matching(md, where, stats_schema, stats_columns)
        starts = [0]
        for g in range(md.num_row_groups):
            starts.append(starts[-1] + md.row_group(g).num_rows)
        with readable(f, path, cols) as source:
            for g in range(md.num_row_groups) if chosen is None else chosen:
                rows = source.read_row_group(g, columns=cols, use_threads=True)
                yield starts[g], conform(rows, schema, path)


def iter_data_file(
    path: str,
    columns: Optional[Sequence[str]] = None,
    batch_rows: int = 65536,
    *,
    expect: Optional[DataFileMeta] = None,
    schema: Optional[pa.Schema] = None,
    layout: Optional[FileLayout] = None,
    kinds: bool = False,
) -> Iterator[pa.Table]:
    """Read a Parquet data file in chunks of about ``batch_rows`` rows (bounded memory); ``schema``,
    ``layout`` and ``kinds`` as for :func:`read_data_file`."""
    cols = list(columns) if columns is not None else None
    with _named_errors(path):
        f = _open_checked(path, expect, layout)
        _check_columns(f, path, cols, expect)
        cols = _with_kinds(f, cols, kinds)
        with readable(f, path, cols) as source:
            for batch in source.iter_batches(batch_size=batch_rows, columns=cols):
                yield conform(pa.Table.from_batches([batch]), schema, path)
