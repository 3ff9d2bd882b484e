"""Changelog producers: the exact change stream of a primary-key table, in changelog files.

- ``input``: the writer copies its input rows (sorted, with their row kinds) into changelog files.
- ``lookup``: at each commit the writer looks the new keys up in the bucket's older files and
  emits +I / -U,+U / -D against what they held.
- ``full-compaction``: a full compaction compares the old top level with its output for every key
  that was rewritten.

Changelog files use the data-file layout (``_KEY_*``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, the
columns) and are listed in the snapshot's changelog manifest list, as Paimon does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.diff import diff_by_key, semi_join
from lakelog.connector.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind, key_column
from lakelog.connector.manifest import DataFileMeta
from lakelog.connector.scan import Split
from lakelog.connector.store import TableStore

__all__ = [
    "CHANGELOG_PREFIX",
    "to_kv_layout",
    "write_changelog",
    "keyed_state",
    "state_change",
    "read_changelog",
    "ROWKIND_COLUMN",
]

CHANGELOG_PREFIX = "changelog-"
ROWKIND_COLUMN = "rowkind"


def to_kv_layout(store: TableStore, rows: pa.Table, kinds: np.ndarray, seq: np.ndarray | int) -> pa.Table:
    """Rows of the table's columns plus their kinds, in the data-file (key-value) layout."""
    arrow = store.schema.arrow_schema()
    n = rows.num_rows
    seqs = (
        np.full(n, seq, dtype=np.int64) if isinstance(seq, (int, np.integer)) else np.asarray(seq, np.int64)
    )
    fields = [pa.field(key_column(k), arrow.field(k).type, nullable=False) for k in store.key_names]
    cols: list[pa.ChunkedArray | pa.Array] = [rows.column(k) for k in store.key_names]
    fields += [pa.field(SEQUENCE_NUMBER, pa.int64(), False), pa.field(VALUE_KIND, pa.int8(), False)]
    cols += [pa.array(seqs, pa.int64()), pa.array(np.asarray(kinds, np.int8), pa.int8())]
    for f in arrow:
        fields.append(rows.schema.field(f.name))
        cols.append(rows.column(f.name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def write_changelog(
    store: TableStore, partition: bytes, bucket: int, kv_rows: pa.Table
) -> list[DataFileMeta]:
    if kv_rows.num_rows == 0:
        return []
    return store.file_writer(partition, bucket, prefix=CHANGELOG_PREFIX).write(kv_rows, level=0)


def keyed_state(
    store: TableStore,
    partition: bytes,
    bucket: int,
    files: Sequence[DataFileMeta],
    keys: Optional[pa.Table] = None,
) -> pa.Table:
    """The merged live rows of ``files`` (one bucket), restricted to the keys in ``keys``."""
    from lakelog.connector.read import SplitRead

    split = Split(0, partition, bucket, store.options.bucket, list(files))
    rows = SplitRead(store).read_splits([split]) if files else store.schema.arrow_schema().empty_table()
    if keys is not None:
        rows = semi_join(rows, keys, store.key_names)
    return rows


def state_change(
    store: TableStore,
    partition: bytes,
    bucket: int,
    before_files: Sequence[DataFileMeta],
    after_files: Sequence[DataFileMeta],
    keys: pa.Table,
    seq: int,
) -> pa.Table:
    """Changelog (key-value layout) for ``keys`` between two sets of files of one bucket."""
    old = keyed_state(store, partition, bucket, before_files, keys)
    new = keyed_state(store, partition, bucket, after_files, keys)
    rows, kinds = diff_by_key(
        old, new, store.key_names, dedupe=store.options.changelog_producer_row_deduplicate
    )
    return to_kv_layout(store, rows, kinds, seq)


def read_changelog(store: TableStore, from_id: int, to_id: int) -> pa.Table:
    """The changelog files of snapshots ``from_id`` (exclusive) to ``to_id``, as an audit log."""
    from lakelog.connector.read import SplitRead

    sm = store.snapshot_manager
    read = SplitRead(store)
    parts: list[pa.Table] = []
    for sid in range(from_id + 1, to_id + 1):
        snap = sm.snapshot(sid)
        if not snap.changelog_manifest_list:
            continue
        metas = store.manifest_list.read(snap.changelog_manifest_list)
        for e in store.entries_of(metas):
            split = Split(sid, e.partition, e.bucket, e.total_buckets, [e.file])
            t = read.read_file(split, e.file, system=True)
            kinds = np.asarray(t.column(VALUE_KIND).to_numpy(), dtype=np.int64)
            names = np.array(RowKind.SHORT, dtype=object)[kinds]
            out = t.select(read.columns).cast(read.output_schema)
            parts.append(
                out.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array(names, pa.string()))
            )
    if not parts:
        empty = read.output_schema.empty_table()
        return empty.add_column(0, pa.field(ROWKIND_COLUMN, pa.string(), False), pa.array([], pa.string()))
    return pa.concat_tables(parts)
