"""Replacing whole partitions in one OVERWRITE snapshot: what ``INSERT OVERWRITE``, ``TRUNCATE
TABLE`` and ``ALTER TABLE ... DROP PARTITION`` need, as Paimon commits them.

The snapshot's delta manifest holds a DELETE entry for every live file of the replaced partitions
(all levels and buckets) and an ADD entry for every new file; ``commitKind`` is ``OVERWRITE``,
``deltaRecordCount`` the rows added minus the rows removed, and no changelog. The new rows are
written as a fresh start of their buckets (no restore of the old files, sequence numbers from 0,
no changelog, no compaction). Which partitions are replaced:

* ``dynamic`` (Paimon's ``dynamic-partition-overwrite``, partitioned tables): those the new rows
  fall into; no rows, no snapshot;
* otherwise every partition matching one of the static ``specs`` (all of them without a spec),
  also when there are no new rows (the partitions are emptied); rows outside the specs are
  refused.

A commit that lands in the replaced partitions meanwhile makes the replace start again from the
new latest snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa

from lakelog.connector.errors import CommitConflictError, InvalidInputError
from lakelog.connector.format.manifest import KIND_ADD, KIND_DELETE, ManifestEntry
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.write import TableWrite

__all__ = ["replace_partitions", "OVERWRITE"]

OVERWRITE = "OVERWRITE"
_ATTEMPTS = 5


class _FreshWrite(TableWrite):
    """A write that starts its buckets empty: the files it replaces are not restored."""

    def _restore(self, partitions: set[bytes]) -> None:
        self._restored |= partitions


def _spec_values(store: TableStore, spec: Mapping[str, Any]) -> dict[str, Any]:
    keys = list(store.schema.partition_keys)
    arrow = store.schema.arrow_schema()
    out = {}
    for k, v in spec.items():
        if k not in keys:
            raise InvalidInputError(
                f"{k!r} is not a partition field of {store.path} (partition fields: {keys})"
            )
        try:
            out[k] = None if v is None else pa.array([v]).cast(arrow.field(k).type).to_pylist()[0]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise InvalidInputError(
                f"partition value {k}={v!r} is not a {arrow.field(k).type} ({e})"
            ) from None
    return out


def _matcher(store: TableStore, specs: Sequence[Mapping[str, Any]]) -> Any:
    keys = list(store.schema.partition_keys)
    wanted = [_spec_values(store, s) for s in specs]

    def match(partition: bytes) -> bool:
        if not wanted:
            return True
        values = dict(zip(keys, store.partition_values(partition)))
        return any(all(values[k] == v for k, v in w.items()) for w in wanted)

    return match


def replace_partitions(
    store: TableStore,
    data: Optional[pa.Table],
    *,
    specs: Sequence[Mapping[str, Any]] = (),
    dynamic: bool = False,
    commit_user: Optional[str] = None,
) -> Optional[int]:
    """Replace partitions with ``data`` (see the module docs); return the OVERWRITE snapshot's id,
    or None when a dynamic overwrite had no rows."""
    fresh = store.with_schema(
        store.schema.copy(options={**store.schema.options, "changelog-producer": "none"})
    )
    dynamic = dynamic and bool(store.schema.partition_keys)
    match = _matcher(store, specs)
    writer = _FreshWrite(fresh, write_only=True)
    committer = TableCommit(fresh, commit_user)
    msgs = []
    try:
        if data is not None and data.num_rows:
            writer.write(data)
        msgs = writer.prepare_commit()
        written = {m.partition for m in msgs if m.new_files}
        if dynamic and not written:
            writer.close()
            return None  # Paimon: a dynamic overwrite without rows changes nothing
        if not dynamic:
            outside = [p for p in written if not match(p)]
            if outside:
                raise InvalidInputError(
                    f"trying to overwrite partitions {list(specs)} of {store.path}, but rows fall into "
                    f"{store.partition_dir(store.partition_values(outside[0]))}"
                )
        in_scope = (lambda p: p in written) if dynamic else match
        adds = [
            ManifestEntry(KIND_ADD, m.partition, m.bucket, m.total_buckets, f)
            for m in msgs
            for f in m.new_files
        ]
        for _ in range(_ATTEMPTS):
            base = store.snapshot_manager.latest()
            deletes = [
                ManifestEntry(KIND_DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                for e in (store.live_entries(base) if base is not None else [])
                if e.bucket >= 0 and in_scope(e.partition)
            ]
            try:
                sid = committer.commit_entries(
                    deletes + adds, OVERWRITE, guard=_untouched(store, base, in_scope)
                )
            except CommitConflictError:
                continue
            writer.close()
            return sid
        raise CommitConflictError(f"overwrite of {store.path} lost {_ATTEMPTS} races with concurrent commits")
    except BaseException:
        committer.discard_unpublished(msgs)
        writer.abort()
        raise


def _untouched(store: TableStore, base: Optional[Snapshot], in_scope: Any) -> Any:
    """A commit guard: no commit after ``base`` touched the replaced partitions."""

    def guard(latest: Optional[Snapshot]) -> None:
        first = base.id + 1 if base is not None else 1
        if latest is None or latest.id < first:
            return
        for sid in range(first, latest.id + 1):
            if any(in_scope(e.partition) for e in store.delta_entries(store.snapshot_manager.snapshot(sid))):
                raise CommitConflictError(
                    f"snapshot {sid} of {store.path} wrote a partition being overwritten"
                )

    return guard
