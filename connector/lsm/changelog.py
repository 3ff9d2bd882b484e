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

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, key_column
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.options import MergeEngine
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.diff import diff_by_key, semi_join
from lakelog.connector.lsm.split import Split

__all__ = ["to_kv_layout", "write_changelog", "keyed_state", "state_change"]


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
    return store.file_writer(partition, bucket, changelog=True).write(kv_rows, level=0)


def keyed_state(
    store: TableStore,
    partition: bytes,
    bucket: int,
    files: Sequence[DataFileMeta],
    keys: Optional[pa.Table] = None,
    vectors: Optional[Mapping[str, np.ndarray]] = None,
) -> pa.Table:
    """The merged live rows of ``files`` (one bucket), restricted to the keys in ``keys``; with
    ``vectors`` (deletion-vector mode) the rows of its files above level 0 that they do not delete."""
    from lakelog.connector.lsm.split_read import SplitRead

    split = Split(0, partition, bucket, store.options.bucket, list(files))
    if vectors is not None:
        split.deletion_vectors = dict(vectors)
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
    *,
    before_dv: Optional[Mapping[str, np.ndarray]] = None,
    after_dv: Optional[Mapping[str, np.ndarray]] = None,
) -> pa.Table:
    """Changelog (key-value layout) for ``keys`` between two sets of files of one bucket (with
    their deletion vectors, in deletion-vector mode)."""
    old = keyed_state(store, partition, bucket, before_files, keys, before_dv)
    new = keyed_state(store, partition, bucket, after_files, keys, after_dv)
    opts = store.options
    rows, kinds = diff_by_key(
        old,
        new,
        store.key_names,
        # first-row: a key's row never changes, so its changelog is inserts only (as Paimon's page
        # says); a key written again is no -U/+U pair of the same row
        dedupe=opts.changelog_producer_row_deduplicate or opts.merge_engine == MergeEngine.FIRST_ROW,
        ignore=opts.get(opts.CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS) or (),
    )
    return to_kv_layout(store, rows, kinds, seq)
