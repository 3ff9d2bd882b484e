"""``DELETE`` on append tables with ``'deletion-vectors.enabled' = 'true'``, as Paimon deletes
from them (Spark's ``DELETE FROM``): the rows a filter matches are marked in their files' deletion
vectors; no data file is rewritten.

Each bucket whose rows match gets a new ``DELETION_VECTORS`` index file holding every vector of
the bucket (the old ones and the new marks), and all of them go into one APPEND snapshot with no
data file, as Paimon's writers commit a delete. Where Paimon's unaware-bucket writers left a
partition several index files, the new one replaces them all. Readers, lakelog's and Paimon's,
leave the marked rows out; compaction rewrites the files without them and drops their vectors.
Streaming readers of an append table see no change (Paimon's do not either).

A delete conflicts with a commit that changed the vectors of a bucket it marks (another delete, a
compaction of files with vectors) and with a compaction that rewrote a file it marks (the rows
would be copied unmarked); it is then planned again on the new latest snapshot.
"""

from __future__ import annotations

from typing import Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.deletion_vectors import BucketDeletionVectors, slot_vector_entries, vectors_base
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead, referenced_columns
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.replan import commit_planned
from lakelog.connector.table.scan import plan_splits

__all__ = ["delete_where"]

_POSITION = "__lakelog_position"


def delete_where(
    store: TableStore,
    filter: Union[str, pc.Expression],
    *,
    commit_user: Optional[str] = None,
    attempts: int = 5,
) -> Optional[int]:
    """Mark the rows of the append table ``store`` that ``filter`` matches (a SQL-like string or
    a pyarrow expression; a row whose filter is null stays) deleted; return the APPEND snapshot's
    id, or None when no live row matched."""
    if store.is_primary_key_table:
        raise InvalidInputError(
            f"delete_where on {store.path}: a primary-key table deletes by key (Table.delete), or "
            "through SQL's DELETE FROM"
        )
    if not store.options.deletion_vectors_enabled:
        raise InvalidInputError(
            f"a DELETE on append table {store.path} needs 'deletion-vectors.enabled' = 'true' (set when "
            "the table is created): lakelog, as Paimon, marks deleted rows of an append table in "
            "deletion vectors; without them, overwrite the partitions instead"
        )
    schema = store.schema.arrow_schema()
    expr = parse_filter(filter, schema)
    if expr is None or not referenced_columns(expr, schema.names):
        raise InvalidInputError(
            f"delete_where on {store.path} needs a filter on its columns; to delete every row, overwrite "
            "the table (TRUNCATE TABLE)"
        )

    def plan(snap: Snapshot, messages: list[CommitMessage]) -> None:
        _mark(store, plan_splits(store, snap, filter=expr), expr, schema, messages)

    return commit_planned(
        store,
        plan,
        what=f"delete from {store.path}",
        advice="nothing was deleted: run it again",
        commit_user=commit_user,
        attempts=attempts,
        backoff=True,  # out of step with a busy compactor
    )


def _mark(
    store: TableStore,
    splits: list[Split],
    expr: pc.Expression,
    schema: pa.Schema,
    messages: list[CommitMessage],
) -> None:
    """Append to ``messages`` a commit message per bucket whose live rows ``expr`` matches: its new
    vectors, written (each message is appended before its file is written, so the caller deletes
    what a failure leaves)."""
    columns = referenced_columns(expr, schema.names)
    read = SplitRead(store, columns=columns)
    index = store.index_entries(store.snapshot_manager.snapshot(splits[0].snapshot_id)) if splits else []
    for split in splits:
        entries = slot_vector_entries(index, split.partition, split.bucket)
        vectors = BucketDeletionVectors.of_split(split.deletion_vectors or {}, vectors_base(entries))
        marks: dict[str, np.ndarray] = {}
        for f in split.files:
            rows = read.read_file(split, f, system=False)  # every row: positions are the file's
            rows = rows.append_column(_POSITION, pa.array(np.arange(rows.num_rows, dtype=np.uint64)))
            hit = rows.filter(expr).column(_POSITION).to_numpy()
            old = vectors.vectors.get(f.file_name)
            new = hit if old is None else np.setdiff1d(hit, old, assume_unique=True)
            if len(new):
                marks[f.file_name] = new
        if not marks:
            continue
        vectors.update((), marks)
        msg = CommitMessage(split.partition, split.bucket, split.total_buckets, dv_delete=True)
        msg.dv_changed, msg.dv_base = True, vectors.base
        messages.append(msg)
        msg.dv_file = vectors.write(store, split.partition, split.bucket)
