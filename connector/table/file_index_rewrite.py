"""``rewrite_file_index``: give the data files already written the file indexes the table's options
now ask for (Paimon's procedure of that name), without rewriting any data file.

Each live data file (of the chosen partitions) is read for its indexed columns; its new index rides
in the manifest record or is written beside it (``<data file>.index``, or the next in Paimon's series
``-1.index``, ``-2.index``... when it had one: older snapshots keep theirs). The files' records are
replaced in one COMPACT snapshot, conflict-checked like a compaction: a file compacted away
meanwhile makes the rewrite start again on the new snapshot.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Optional

import numpy as np

from lakelog.connector.errors import CommitConflictError, InvalidInputError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.file_index import (
    FileIndexConfig,
    bloom_hashes,
    build_container,
    index_file_name,
)
from lakelog.connector.format.manifest import DataFileMeta, ManifestEntry
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.partition_specs import PartitionSpec, matching_partitions, partition_spec_list

__all__ = ["rewrite_file_index"]

log = logging.getLogger(__name__)


def rewrite_file_index(
    store: TableStore, *, partitions: Optional[Sequence[PartitionSpec]] = None, attempts: int = 5
) -> Optional[int]:
    """Index every live data file (of ``partitions``) as the table's file-index options say; return
    the COMPACT snapshot's id, None when no file's index changed."""
    config = store.file_index_config()
    specs = partition_spec_list(store, partitions)
    for attempt in range(attempts):
        snap = store.snapshot_manager.latest()
        if snap is None:
            return None
        entries = store.live_entries(snap)
        if specs is not None:
            present = {e.partition for e in entries}
            chosen = set().union(*(matching_partitions(store, present, spec) for spec in specs))
            entries = [e for e in entries if e.partition in chosen]
        messages = [m for m in (_reindexed(store, e, config) for e in entries) if m is not None]
        if not messages:
            return None
        try:
            return TableCommit(store).commit(messages)
        except BaseException as e:
            for m in messages:  # the index files this attempt wrote (the data files stay)
                old = set(m.compact_before[0].extra_files)
                for name in m.compact_after[0].extra_files:
                    if name not in old:
                        store.file_io.delete(store.data_file_path(m.partition, m.bucket, name))
            if not isinstance(e, CommitConflictError) or attempt == attempts - 1:
                raise
            log.warning("rewrite_file_index of %s lost a race (%s); starting again", store.path, e)
    raise AssertionError("unreachable")


def _reindexed(store: TableStore, e: ManifestEntry, config: FileIndexConfig) -> Optional[CommitMessage]:
    """The message replacing ``e``'s record with one holding the configured index; None when it
    has that index already."""
    f = e.file
    old_index = [x for x in f.extra_files if x.endswith(".index")]
    others = [x for x in f.extra_files if not x.endswith(".index")]
    if not config:
        if f.embedded_file_index is None and not old_index:
            return None
        new = dataclasses.replace(f, embedded_file_index=None, extra_files=others)
        return _message(e, new)
    if f.schema_id != store.schema.id:
        written = store.schema_manager.schema(f.schema_id)
        missing = [c for c in config.columns if c not in written.field_names]
        if missing:
            raise InvalidInputError(
                f"rewrite_file_index of {store.path}: data file {f.file_name} was written before the "
                f"column(s) {missing} existed; compact it first"
            )
    read = SplitRead(store, columns=config.columns)
    split = Split(0, e.partition, e.bucket, e.total_buckets, [f])
    rows = read.read_file(split, f, system=False)  # every row, in file order (bitmaps name rows)
    hashes = {c: np.unique(bloom_hashes(rows.column(c))) for c in config.bloom}
    data = build_container(config, hashes, {c: rows.column(c) for c in config.bitmap})
    threshold = int(store.options.get(store.options.FILE_INDEX_IN_MANIFEST_THRESHOLD))
    if len(data) <= threshold:
        new = dataclasses.replace(f, embedded_file_index=data, extra_files=others)
    elif old_index and f.embedded_file_index is None and len(old_index) == 1 and store.file_io.read_bytes(
        store.data_file_path(e.partition, e.bucket, old_index[0])
    ) == data:
        return None  # the index beside it is the one asked for already
    else:
        name = index_file_name(f.file_name, old_index[0] if old_index else None)
        store.file_io.write_bytes(store.data_file_path(e.partition, e.bucket, name), data)
        new = dataclasses.replace(f, embedded_file_index=None, extra_files=[*others, name])
    if new == f:
        return None
    return _message(e, new)


def _message(e: ManifestEntry, new: DataFileMeta) -> CommitMessage:
    return CommitMessage(e.partition, e.bucket, e.total_buckets, compact_before=[e.file], compact_after=[new])

