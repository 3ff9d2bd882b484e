"""Rolling back without losing history: Paimon's ``rollback_to_as_latest``.

:func:`rollback_to_as_latest` publishes one new OVERWRITE snapshot whose files are exactly those of
an earlier snapshot (or a tag's): its delta deletes the files live now that the target did not
hold and adds back the target's files that were replaced since, and it takes the target's index
manifest (hash indexes, deletion vectors), which matches those files. Its base manifests hold the
latest state merged, so no DELETE entry of its history names a file it adds back (Paimon's readers
drop a file that any DELETE entry of the snapshot names). The snapshots in between and
their tags stay: time travel to them works as before, and rolling forward again is another call.

It holds the commit lock, so it builds on the latest snapshot; a writer that planned on an older
one re-plans as after any commit. The files it adds back must still exist: they do while the target
snapshot or a tag holding it exists (expiration deletes only files that no snapshot or tag
references). Streaming readers skip it as any OVERWRITE (unless ``streaming-read-overwrite``),
as in Paimon. A table with a Kafka log is refused: the topic would keep the later changes.
"""

from __future__ import annotations

import time
import uuid
from typing import Optional

from lakelog.connector.errors import MissingFileError, OptionError, SnapshotNotFoundError
from lakelog.connector.format.manifest import KIND_ADD, ManifestEntry
from lakelog.connector.format.options import LogSystem
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import BATCH_COMMIT_IDENTIFIER, WRITER_VERSION, CommitKind
from lakelog.connector.table.maintenance import rollback_target

__all__ = ["rollback_to_as_latest"]


def _key(e: ManifestEntry) -> tuple[bytes, int, int, str]:
    return (e.partition, e.bucket, e.file.level, e.file.file_name)


def rollback_to_as_latest(
    store: TableStore, *, snapshot_id: Optional[int] = None, tag: Optional[str] = None
) -> tuple[int, int, int]:
    """Publish the files of snapshot ``snapshot_id`` (or of ``tag``) as a new latest snapshot;
    returns (the previous latest id, the target's id, the new snapshot's id)."""
    if (snapshot_id is None) == (tag is None):
        raise ValueError("give exactly one of snapshot_id and tag")
    if store.options.log_system == LogSystem.KAFKA:
        raise OptionError(
            f"cannot roll {store.location} back: it has a Kafka log, whose readers keep the changes after "
            "the target; write corrections (deletes, upserts) instead, which reach them"
        )
    sm, fio = store.snapshot_manager, store.file_io
    with sm.lock():
        latest = sm.latest()
        if latest is None:
            raise SnapshotNotFoundError(f"{store.location} has no snapshot: nothing to roll back")
        target = rollback_target(store, latest.id, snapshot_id=snapshot_id, tag=tag)
        now = store.live_entries(latest)
        then = store.live_entries(target)
        now_keys, then_keys = {_key(e) for e in now}, {_key(e) for e in then}
        deletes = [ManifestEntry(1, e.partition, e.bucket, e.total_buckets, e.file) for e in now
                   if _key(e) not in then_keys]  # fmt: skip
        adds = [ManifestEntry(KIND_ADD, e.partition, e.bucket, e.total_buckets, e.file) for e in then
                if _key(e) not in now_keys]  # fmt: skip
        for e in adds:  # what comes back must still be there: fail before anything is written
            path = store.data_file_path(e.partition, e.bucket, e.file.file_name, e.file.external_path)
            if not fio.file_exists(path):
                raise MissingFileError(
                    f"cannot roll {store.location} back to snapshot {target.id}: its file {path} is gone"
                )
        written: list[str] = []
        try:
            changed = deletes + adds
            metas = store.manifest_file.write(changed, store.partition_types) if changed else []
            written += [m.file_name for m in metas]
            # the base is the latest state merged (ADD entries only): Paimon's readers drop every
            # file that any DELETE entry of a snapshot names, so the history that deleted a file
            # this snapshot adds back must not be in its manifests
            base = store.manifest_file.write(now, store.partition_types) if now else []
            written += [m.file_name for m in base]
            base_name, base_size = store.manifest_list.write(base)
            written.append(base_name)
            delta_name, delta_size = store.manifest_list.write(metas)
            written.append(delta_name)
            added = sum(e.file.row_count for e in adds)
            removed = sum(e.file.row_count for e in deletes)
            snapshot = Snapshot(
                id=latest.id + 1,
                schema_id=store.schema.id,
                base_manifest_list=base_name,
                delta_manifest_list=delta_name,
                index_manifest=target.index_manifest,
                commit_user=f"rollback-to-as-latest-{uuid.uuid4()}",
                commit_identifier=BATCH_COMMIT_IDENTIFIER,
                commit_kind=CommitKind.OVERWRITE,
                time_millis=int(time.time() * 1000),
                log_offsets=latest.log_offsets,
                total_record_count=(latest.total_record_count or 0) + added - removed,
                delta_record_count=added - removed,
                watermark=latest.watermark,
                statistics=target.statistics,  # as Paimon's rollback: the target's statistics
                base_manifest_list_size=base_size,
                delta_manifest_list_size=delta_size,
                writer_version=WRITER_VERSION,
            )
            if not sm.try_commit(snapshot, latest):  # under the lock: only a broken lock gets here
                raise SnapshotNotFoundError(f"snapshot {snapshot.id} of {store.location} was taken meanwhile")
            written.clear()
        finally:
            for name in written:
                fio.delete(f"{store.manifest_dir}/{name}")
    return latest.id, target.id, snapshot.id
