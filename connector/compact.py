"""Full compaction: rewrite each bucket into one sorted run at the top level.

Sections (groups of files with overlapping keys) are merged one at a time and their output is
gathered into files of about ``target-file-size``, so memory holds one section plus one output
file. The result commits as a COMPACT snapshot, conflict-checked against concurrent commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import pyarrow as pa

from lakelog.connector.binary_row import deserialize_row
from lakelog.connector.commit import TableCommit
from lakelog.connector.data_file import DataFileWriter
from lakelog.connector.kv import SEQUENCE_NUMBER, VALUE_KIND, key_column, merge_runs
from lakelog.connector.manifest import DataFileMeta
from lakelog.connector.read import SplitRead, sections
from lakelog.connector.scan import Split, plan_splits
from lakelog.connector.store import TableStore
from lakelog.connector.write import CommitMessage

__all__ = ["compact_table", "compact_split", "max_level"]

Progress = Callable[[int, int], None]


def max_level(store: TableStore) -> int:
    opts = store.options
    levels = opts.num_levels or (opts.num_sorted_run_compaction_trigger + 1)
    return levels - 1


def _needs_compaction(store: TableStore, split: Split, top: int) -> bool:
    if len(split.files) == 0:
        return False
    if store.is_primary_key_table:
        if len(split.files) == 1:
            f = split.files[0]
            return f.level != top or f.delete_row_count != 0 or f.schema_id != store.schema.id
        return True
    return len(split.files) > 1


def _writer(store: TableStore, split: Split) -> DataFileWriter:
    opts = store.options
    schema = store.schema
    return DataFileWriter(
        bucket_dir=store.bucket_dir(split.partition, split.bucket),
        schema_id=schema.id,
        key_columns=[key_column(k) for k in store.key_names],
        key_types=store.key_types,
        value_columns=[f.name for f in schema.fields],
        value_types=[f.type for f in schema.fields],
        compression=opts.file_compression,
        compression_level=opts.file_compression_zstd_level if opts.file_compression == "zstd" else None,
        target_file_size=opts.target_file_size,
    )


def compact_split(store: TableStore, split: Split) -> CommitMessage:
    """Rewrite one bucket into a single sorted run at the top level (PK) or into large files (append)."""
    top = max_level(store)
    read = SplitRead(store)
    writer = _writer(store, split)
    target = store.options.target_file_size
    out_files: list[DataFileMeta] = []
    pending: list[pa.Table] = []
    pending_bytes = 0
    level = top if store.is_primary_key_table else 0

    def flush() -> None:
        nonlocal pending, pending_bytes
        if pending:
            out_files.extend(writer.write(pa.concat_tables(pending), level=level, file_source=1))
        pending, pending_bytes = [], 0

    if store.is_primary_key_table:
        keys = [key_column(k) for k in store.key_names]
        key_types = store.key_types
        for sec in sections(split.files, lambda b: deserialize_row(b, key_types)):
            runs = [read.read_file(split, f, system=True) for f in sec]
            merged = merge_runs(runs, keys)  # top level: deletes are dropped for good
            merged = merged.select(keys + [SEQUENCE_NUMBER, VALUE_KIND] + read.read_columns)
            pending.append(merged)
            pending_bytes += merged.nbytes
            if pending_bytes / 3 >= target:
                flush()
    else:
        first_seq = min(f.min_sequence_number for f in split.files)
        for f in sorted(split.files, key=lambda f: f.min_sequence_number):
            t = read.read_file(split, f, system=False)
            pending.append(t)
            pending_bytes += t.nbytes
            if pending_bytes / 3 >= target:
                flush()
    flush()
    if not store.is_primary_key_table:
        start = first_seq
        for m in out_files:
            m.min_sequence_number, m.max_sequence_number = start, start + m.row_count - 1
            start += m.row_count
    return CommitMessage(
        partition=split.partition,
        bucket=split.bucket,
        total_buckets=split.total_buckets,
        compact_before=list(split.files),
        compact_after=out_files,
    )


def compact_table(
    store: TableStore,
    *,
    full: bool = True,
    progress: Optional[Progress] = None,
    commit_user: Optional[str] = None,
) -> Optional[int]:
    """Compact every bucket that needs it and commit once; return the snapshot id (None if nothing to do)."""
    del full  # only full compaction exists so far; universal compaction arrives with the LSM engine
    snap = store.snapshot_manager.latest()
    if snap is None:
        return None
    top = max_level(store)
    todo = [s for s in plan_splits(store, snap) if _needs_compaction(store, s, top)]
    messages: list[CommitMessage] = []
    for i, split in enumerate(todo):
        messages.append(compact_split(store, split))
        if progress is not None:
            progress(i + 1, len(todo))
    if not messages:
        return None
    commit = TableCommit(store, commit_user)
    try:
        return commit.commit(messages)
    except BaseException:
        for m in messages:
            for f in m.compact_after:
                store.file_io.delete(store.data_file_path(m.partition, m.bucket, f.file_name))
        raise
