"""The write path: validate rows, assign partition, bucket and sequence numbers, and write
sorted level-0 files. Produces plain, picklable commit messages for a committer.

Everything here is vectorised: one sort of the whole buffer groups rows by (partition, bucket,
key, arrival); deduplication is a comparison of neighbouring rows. The only Python loop is over
the (partition, bucket) groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lakelog.connector.arrow_input import conform, to_arrow_table
from lakelog.connector.binary_row import serialize_row
from lakelog.connector.bucket import compute_buckets
from lakelog.connector.data_file import DataFileWriter
from lakelog.connector.errors import InvalidInputError
from lakelog.connector.kv import (
    SEQUENCE_NUMBER,
    VALUE_KIND,
    RowKind,
    deduplicate_sorted,
    key_column,
    sort_indices,
)
from lakelog.connector.manifest import DataFileMeta
from lakelog.connector.store import TableStore

__all__ = ["CommitMessage", "TableWrite"]

_BUCKET = "__lakelog_bucket"
_ARRIVAL = "__lakelog_arrival"


@dataclass
class CommitMessage:
    """What one writer hands the committer for one (partition, bucket)."""

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.new_files or self.compact_before or self.compact_after or self.changelog_files)


class TableWrite:
    """Buffers rows and turns them into level-0 files on :meth:`prepare_commit`.

    When the buffer exceeds ``write-buffer-size`` it is flushed early into more level-0 files, so a
    long multi-batch write stays in bounded memory.
    """

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self.schema = store.schema
        opts = store.options
        self.num_buckets = opts.bucket
        self.pk = list(self.schema.primary_keys)
        self.keys = store.key_names
        self.partition_keys = list(self.schema.partition_keys)
        self.bucket_keys = list(self.schema.bucket_keys) if self.num_buckets > 0 else []
        self.arrow_schema = self.schema.arrow_schema()
        self._buffer: list[pa.Table] = []
        self._buffered_bytes = 0
        self._arrival = 0
        self._files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self._next_seq: dict[tuple[bytes, int], int] = {}
        self._restored: set[bytes] = set()
        self._write_buffer_size = opts.write_buffer_size

    # ---- input --------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        table = conform(to_arrow_table(data), self.arrow_schema, required=self.pk)
        self._append(table, RowKind.INSERT)

    def delete(self, data: Any) -> None:
        if not self.pk:
            raise InvalidInputError("delete() needs a primary-key table; this table has no primary key")
        table = to_arrow_table(data)
        missing = [k for k in self.pk if k not in table.column_names]
        if missing:
            raise InvalidInputError(f"delete() rows must hold every primary-key column; missing {missing}")
        table = conform(table, self.arrow_schema, required=self.pk, allow_missing=True)
        self._append(table, RowKind.DELETE)

    def _append(self, table: pa.Table, kind: int) -> None:
        if table.num_rows == 0:
            return
        for k in self.pk:
            if table.column(k).null_count:
                raise InvalidInputError(f"primary-key column {k!r} holds null(s); nothing was written")
        n = table.num_rows
        table = table.append_column(VALUE_KIND, pa.array(np.full(n, kind, dtype=np.int8)))
        table = table.append_column(
            _ARRIVAL, pa.array(np.arange(self._arrival, self._arrival + n, dtype=np.int64))
        )
        self._arrival += n
        self._buffer.append(table)
        self._buffered_bytes += table.nbytes
        if self._buffered_bytes >= self._write_buffer_size:
            self.flush()

    # ---- flush ----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write everything buffered as level-0 files (one sorted run per touched bucket)."""
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer, promote_options="default")
        self._buffer = []
        self._buffered_bytes = 0
        if self.num_buckets > 0:
            buckets = compute_buckets(
                table, self.bucket_keys, self.store.field_types(self.bucket_keys), self.num_buckets
            )
        else:
            buckets = np.zeros(table.num_rows, dtype=np.int32)
        table = table.append_column(_BUCKET, pa.array(buckets, pa.int32()))
        group_cols = self.partition_keys + [_BUCKET]
        if self.pk:
            order = sort_indices(table, group_cols + self.keys, then=[_ARRIVAL])
        else:
            order = sort_indices(table, group_cols, then=[_ARRIVAL])
        table = table.take(pa.array(order))
        groups = [
            (serialize_row(list(values), self.store.partition_types), bucket, group)
            for values, bucket, group in _split_groups(table, self.partition_keys)
        ]
        self._restore_sequences({p for p, _, _ in groups} - self._restored)
        for partition, bucket, group in groups:
            self._write_group(partition, bucket, group)

    def _write_group(self, partition: bytes, bucket: int, group: pa.Table) -> None:
        slot = (partition, bucket)
        seq0 = self._next_seq.get(slot, 0)
        arrival = group.column(_ARRIVAL).to_numpy()
        if self.pk:
            group = deduplicate_sorted(group, self.keys)
            arrival = group.column(_ARRIVAL).to_numpy()
            seq = seq0 + (arrival - arrival.min())
            self._next_seq[slot] = int(seq.max()) + 1
            cols = [group.column(k) for k in self.keys] + [
                pa.array(seq, pa.int64()),
                group.column(VALUE_KIND),
            ]
            fields = [
                pa.field(key_column(k), self.arrow_schema.field(k).type, nullable=False) for k in self.keys
            ]
            fields += [pa.field(SEQUENCE_NUMBER, pa.int64(), False), pa.field(VALUE_KIND, pa.int8(), False)]
            out = pa.Table.from_arrays(cols, schema=pa.schema(fields))
            for f in self.arrow_schema:
                out = out.append_column(group.schema.field(f.name), group.column(f.name))
        else:
            self._next_seq[slot] = seq0 + group.num_rows
            out = group.select(self.arrow_schema.names)
        writer = self._file_writer(partition, bucket)
        metas = writer.write(out, level=0)
        if not self.pk:
            start = seq0
            for m in metas:
                m.min_sequence_number = start
                m.max_sequence_number = start + m.row_count - 1
                start += m.row_count
        self._files.setdefault(slot, []).extend(metas)

    def _file_writer(self, partition: bytes, bucket: int) -> DataFileWriter:
        opts = self.store.options
        return DataFileWriter(
            bucket_dir=self.store.bucket_dir(partition, bucket),
            schema_id=self.schema.id,
            key_columns=[key_column(k) for k in self.keys],
            key_types=self.store.key_types,
            value_columns=self.arrow_schema.names,
            value_types=[f.type for f in self.schema.fields],
            compression=opts.file_compression,
            compression_level=opts.file_compression_zstd_level if opts.file_compression == "zstd" else None,
            target_file_size=opts.target_file_size,
        )

    def _restore_sequences(self, partitions: set[bytes]) -> None:
        """Continue each bucket's sequence after the highest one already committed."""
        if not partitions:
            return
        latest = self.store.snapshot_manager.latest()
        for e in self.store.live_entries(latest):
            if e.partition in partitions:
                slot = (e.partition, e.bucket)
                self._next_seq[slot] = max(self._next_seq.get(slot, 0), e.file.max_sequence_number + 1)
        self._restored |= partitions

    # ---- output ---------------------------------------------------------------------------------
    def prepare_commit(self) -> list[CommitMessage]:
        self.flush()
        total = self.num_buckets
        msgs = [
            CommitMessage(partition=p, bucket=b, total_buckets=total, new_files=files)
            for (p, b), files in self._files.items()
            if files
        ]
        self._files = {}
        return msgs

    def abort(self) -> None:
        """Drop buffered rows and delete files written but not committed."""
        import os

        self._buffer = []
        for (p, b), files in self._files.items():
            for f in files:
                path = os.path.join(self.store.bucket_dir(p, b), f.file_name)
                self.store.file_io.delete(path)
        self._files = {}


def _split_groups(
    table: pa.Table, partition_keys: Sequence[str]
) -> list[tuple[tuple[Any, ...], int, pa.Table]]:
    """Split a table sorted by (partition..., bucket) into its groups."""
    from lakelog.connector.kv import group_ends

    n = table.num_rows
    ends = np.flatnonzero(group_ends(table, list(partition_keys) + [_BUCKET]))
    out = []
    start = 0
    for end in ends:
        stop = int(end) + 1
        g = table.slice(start, stop - start)
        values = tuple(g.column(k)[0].as_py() for k in partition_keys)
        bucket = int(g.column(_BUCKET)[0].as_py())
        out.append((values, bucket, g))
        start = stop
    assert start == n
    return out
