"""Data files: Parquet writing with Paimon's statistics, and reading with errors that name the file."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.connector.binary_row import serialize_row
from lakelog.connector.errors import CorruptFileError, MissingFileError
from lakelog.connector.manifest import DataFileMeta, SimpleStats, local_now_millis
from lakelog.connector.types import DataType

__all__ = ["DataFileWriter", "read_data_file", "new_data_file_name", "STRING_STATS_TRUNCATE"]

STRING_STATS_TRUNCATE = 16  # Paimon's default metadata.stats-mode is truncate(16)
_NESTED_ROOTS = frozenset({"ARRAY", "MAP", "MULTISET", "ROW"})


def new_data_file_name(prefix: str = "data-") -> str:
    return f"{prefix}{uuid.uuid4()}-0.parquet"


def _truncate_min(v: Any) -> Any:
    if isinstance(v, (str, bytes)) and len(v) > STRING_STATS_TRUNCATE:
        return v[:STRING_STATS_TRUNCATE]
    return v


def _truncate_max(v: Any) -> Any:
    """An upper bound no longer than the truncation length, or None when none can be made."""
    if isinstance(v, str) and len(v) > STRING_STATS_TRUNCATE:
        head = v[:STRING_STATS_TRUNCATE]
        for i in range(len(head) - 1, -1, -1):
            c = ord(head[i])
            if c < 0x10FFFF and not (0xD7FF <= c < 0xE000):
                return head[:i] + chr(c + 1)
        return None
    if isinstance(v, bytes) and len(v) > STRING_STATS_TRUNCATE:
        raw = bytearray(v[:STRING_STATS_TRUNCATE])
        for j in range(len(raw) - 1, -1, -1):
            if raw[j] < 0xFF:
                raw[j] += 1
                return bytes(raw[: j + 1])
        return None
    return v


def column_stats(columns: Sequence[pa.ChunkedArray], types: Sequence[DataType]) -> SimpleStats:
    """Min, max (truncated for long strings) and null count of each column, as Paimon stores them."""
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[Optional[int]] = []
    for col, t in zip(columns, types):
        nulls.append(col.null_count)
        if t.root in _NESTED_ROOTS or col.null_count == len(col):
            mins.append(None)
            maxs.append(None)
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if isinstance(lo, float) and lo != lo or isinstance(hi, float) and hi != hi:  # NaN: no usable bound
            lo = hi = None
        mins.append(_truncate_min(lo))
        maxs.append(_truncate_max(hi))
    return SimpleStats(serialize_row(mins, types), serialize_row(maxs, types), nulls)


@dataclass
class DataFileWriter:
    """Writes sorted Arrow tables of one bucket into rolling Parquet files and describes them.

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

    def write(self, table: pa.Table, *, level: int, file_source: int = 0) -> list[DataFileMeta]:
        """Write ``table`` as one or more files; each file holds at most about target_file_size."""
        if table.num_rows == 0:
            return []
        os.makedirs(self.bucket_dir, exist_ok=True)
        metas: list[DataFileMeta] = []
        rows_per_file = self._rows_per_file(table)
        for start in range(0, table.num_rows, rows_per_file):
            part = table.slice(start, rows_per_file)
            metas.append(self._write_one(part, level=level, file_source=file_source))
        return metas

    def _rows_per_file(self, table: pa.Table) -> int:
        # Parquet with zstd compresses typical rows 3-5x; aim the in-memory size at 3x the target.
        mem = max(table.nbytes, 1)
        est_file = mem / 3
        if est_file <= self.target_file_size:
            return table.num_rows
        n_files = int(est_file // self.target_file_size) + 1
        return -(-table.num_rows // n_files)

    def _write_one(self, table: pa.Table, *, level: int, file_source: int) -> DataFileMeta:
        name = new_data_file_name(self.file_prefix)
        path = os.path.join(self.bucket_dir, name)
        pq.write_table(
            table,
            path,
            compression=self.compression,
            compression_level=self.compression_level,
            row_group_size=1 << 20,
            write_statistics=False,
        )
        size = os.path.getsize(path)
        n = table.num_rows
        if self.key_columns:
            first = [table.column(k)[0].as_py() for k in self.key_columns]
            last = [table.column(k)[n - 1].as_py() for k in self.key_columns]
            min_key = serialize_row(first, self.key_types)
            max_key = serialize_row(last, self.key_types)
            key_stats = column_stats([table.column(k) for k in self.key_columns], self.key_types)
            seq = table.column("_SEQUENCE_NUMBER")
            mm = pc.min_max(seq)
            min_seq, max_seq = int(mm["min"].as_py()), int(mm["max"].as_py())
            kinds = table.column("_VALUE_KIND")
            delete_rows = int(pc.sum(pc.is_in(kinds, value_set=pa.array([1, 3], kinds.type))).as_py() or 0)
        else:
            min_key = max_key = serialize_row([], [])
            key_stats = SimpleStats(serialize_row([], []), serialize_row([], []), [])
            min_seq = max_seq = 0
            delete_rows = 0
        value_stats = column_stats([table.column(c) for c in self.value_columns], self.value_types)
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=n,
            min_key=min_key,
            max_key=max_key,
            key_stats=key_stats,
            value_stats=value_stats,
            min_sequence_number=min_seq,
            max_sequence_number=max_seq,
            schema_id=self.schema_id,
            level=level,
            extra_files=[],
            creation_time_millis=local_now_millis(),
            delete_row_count=delete_rows,
            embedded_file_index=None,
            file_source=file_source,
            value_stats_cols=None,
            external_path=None,
            first_row_id=None,
            write_cols=None,
        )


def read_data_file(path: str, columns: Optional[Sequence[str]] = None) -> pa.Table:
    """Read a Parquet data file; a missing or undecodable file raises an error naming it."""
    try:
        return pq.read_table(path, columns=list(columns) if columns is not None else None, use_threads=False)
    except FileNotFoundError:
        raise MissingFileError(f"data file referenced by the snapshot is missing: {path}") from None
    except (pa.ArrowInvalid, OSError) as e:
        if not os.path.exists(path):
            raise MissingFileError(f"data file referenced by the snapshot is missing: {path}") from None
        raise CorruptFileError(f"cannot read data file {path}: {e}") from e
