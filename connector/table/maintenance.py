"""Table maintenance: snapshot expiration, orphan-file cleanup, and rollback to an earlier snapshot.

Every commit of a writer, a Flink sink or a compaction ends with :func:`after_commit`, as Paimon's
committers do: it expires the snapshots the retention options let go (``snapshot.time-retained``,
1 h; ``snapshot.num-retained.min``, 10; ``.max``; at most ``snapshot.expire.limit`` at a time) and
the partitions past ``partition.expiration-time``. ``write-only`` writers leave both to a dedicated
compaction (``t.compact``, ``lakelog compact``, the compaction job), which does them whatever the
option says. Tags, consumers and branches keep what they reference.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import Optional

from lakelog.connector.errors import MissingFileError, OptionError, SnapshotNotFoundError, TagError
from lakelog.connector.format.branches import MAIN
from lakelog.connector.format.fileio import location
from lakelog.connector.format.manifest import ManifestEntry
from lakelog.connector.format.options import LogSystem
from lakelog.connector.format.snapshot import Snapshot, SnapshotManager
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.tags import TagManager
from lakelog.connector.table.partition_expire import maybe_expire_partitions
from lakelog.connector.table.statistics import statistics_path

__all__ = [
    "after_commit",
    "expire_snapshots",
    "maybe_expire_snapshots",
    "remove_orphan_files",
    "rollback_to",
    "rollback_target",
    "referenced_by_others",
    "referenced_files",
    "referenced_with_others",
]

log = logging.getLogger(__name__)


def _manifest_lists(s: Snapshot) -> list[str]:
    return [n for n in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list) if n]


def _snapshot_references(store: TableStore, s: Snapshot) -> tuple[set[str], set[str]]:
    """(data file paths, manifest-dir file names) that a snapshot needs or mentions."""
    data: set[str] = set()
    meta: set[str] = set(_manifest_lists(s))
    entries: list[ManifestEntry] = []
    for lst in _manifest_lists(s):
        for m in store.manifest_list.read(lst):
            meta.add(m.file_name)
            entries.extend(store.read_manifest(m.file_name))
    for e in entries:
        data |= _entry_paths(store, e)
    if s.index_manifest:
        meta.add(s.index_manifest)
        data |= _index_files(store, s)
    return data | _statistics_file(store, s), meta


def _statistics_file(store: TableStore, s: Snapshot) -> set[str]:
    """The statistics file a snapshot references (ANALYZE's; later snapshots carry it on)."""
    return {statistics_path(store, s.statistics)} if s.statistics else set()


def _entry_paths(store: TableStore, e: ManifestEntry) -> set[str]:
    """A data file's path and its extra files' (a file index written beside it)."""
    out = {store.data_file_path(e.partition, e.bucket, e.file.file_name, e.file.external_path)}
    out.update(store.data_file_path(e.partition, e.bucket, extra) for extra in e.file.extra_files)
    return out


def _index_files(store: TableStore, s: Snapshot) -> set[str]:
    """Paths of the index files (hash indexes, deletion vectors) a snapshot's index manifest lists."""
    return {store.index_file_path(e) for e in store.index_entries(s)}


def referenced_files(store: TableStore, snapshots: Iterable[Snapshot]) -> tuple[set[str], set[str]]:
    data: set[str] = set()
    meta: set[str] = set()
    for s in snapshots:
        d, m = _snapshot_references(store, s)
        data |= d
        meta |= m
    return data, meta


def _other_references(store: TableStore) -> list[Snapshot]:
    """Snapshots and tags of every other branch (main's too, for a branch's store), and Paimon's
    long-lived changelog metadata: they share the table's manifests and data files, so what they
    mention must not be deleted."""
    fio = store.file_io
    out: list[Snapshot] = []
    others = [store.path] if store.branch != MAIN else []
    branch_root = os.path.join(store.path, "branch")
    others += [os.path.join(branch_root, n) for n in fio.list_dir(branch_root) if n.startswith("branch-")]
    for path in others:
        if path.rstrip("/") != store.location:
            out.extend(_listed_snapshots(SnapshotManager(fio, path)))
            out.extend(TagManager(fio, path).list().values())
    changelog_dir = os.path.join(store.path, "changelog")
    for name in fio.list_dir(changelog_dir):
        if name.startswith("changelog-") and name[len("changelog-") :].isdigit():
            path = os.path.join(changelog_dir, name)
            out.append(Snapshot.from_json(fio.read_bytes(path), path))
    return out


def referenced_by_others(store: TableStore) -> tuple[set[str], set[str]]:
    """:func:`referenced_files` of :func:`_other_references`. Another branch expires its snapshots
    under its own lock, so one listed here may be gone, with its manifests, before it is read: the
    references are listed and read again then. A file missing from snapshots that stayed the same
    is damage, and raises."""
    seen: frozenset[tuple[str, ...]] | None = None
    while True:
        others = _other_references(store)
        listed = frozenset(tuple(_manifest_lists(s)) for s in others)
        try:
            return referenced_files(store, others)
        except MissingFileError:
            if listed == seen:
                raise
            seen = listed


def referenced_with_others(store: TableStore, snapshots: Iterable[Snapshot]) -> tuple[set[str], set[str]]:
    """:func:`referenced_files` of ``snapshots`` and of every other branch (:func:`referenced_by_others`)."""
    data, meta = referenced_files(store, snapshots)
    other_data, other_meta = referenced_by_others(store)
    return data | other_data, meta | other_meta


def _listed_snapshots(sm: SnapshotManager) -> list[Snapshot]:
    """Every snapshot of another branch, listed again when all it listed expired while being read
    (that branch committed and expired meanwhile: its newest snapshot was not listed yet)."""
    for _ in range(5):
        snaps = sm.snapshots()
        if snaps or not sm.snapshot_ids():
            return snaps
    return sm.snapshots()


def _live_data_files(store: TableStore, s: Snapshot) -> set[str]:
    live: set[str] = set()
    for e in store.live_entries(s):
        live |= _entry_paths(store, e)
    return live | _index_files(store, s) | _statistics_file(store, s)


def expire_snapshots(
    store: TableStore,
    *,
    retain_min: Optional[int] = None,
    retain_max: Optional[int] = None,
    older_than_millis: Optional[int] = None,
    max_deletes: Optional[int] = None,
) -> list[int]:
    """Expire old snapshots by ``snapshot.num-retained.min``/``.max`` and ``snapshot.time-retained``.

    A snapshot is kept when it is among the ``retain_min`` newest, or newer than the time limit
    (unless more than ``retain_max`` would remain), or still needed by a consumer; consumers not
    updated for ``consumer.expiration-time`` are deleted first, so they no longer pin snapshots.
    Files are deleted only when no remaining snapshot and no tag references them. Snapshot files go
    first, so a crash leaves orphan files (cleaned by :func:`remove_orphan_files`), never a snapshot
    without its files. With ``snapshot.clean-empty-directories`` the bucket and partition
    directories left empty are removed too.
    """
    opts = store.options
    sm = store.snapshot_manager
    rmin = opts.snapshot_num_retained_min if retain_min is None else retain_min
    rmax = opts.snapshot_num_retained_max if retain_max is None else retain_max
    if rmin < 1 or rmax < rmin:
        raise ValueError(f"need 1 <= retain_min ({rmin}) <= retain_max ({rmax})")
    threshold = (
        older_than_millis
        if older_than_millis is not None
        else int(time.time() * 1000) - opts.snapshot_time_retained.millis
    )
    limit = max_deletes if max_deletes is not None else opts.snapshot_expire_limit
    with sm.lock():  # no commit publishes, and no other expiration deletes, while the range is chosen
        latest, earliest = sm.latest_id(), sm.earliest_id()
        if latest is None or earliest is None:
            return []
        upper = latest - rmin + 1  # ids below this may expire
        forced = latest - rmax + 1  # ids below this must expire
        consumer_ttl = opts.consumer_expiration_time
        if consumer_ttl is not None:
            gone = store.consumer_manager.expire(int(time.time() * 1000) - consumer_ttl.millis)
            if gone:
                log.info("expired consumers %s of %s (not updated for %s)", gone, store.path, consumer_ttl)
        consumer_min = store.consumer_manager.min_next_snapshot()
        end = earliest
        while end < upper and end - earliest < limit:
            if end >= forced:
                try:
                    if sm.snapshot(end).time_millis >= threshold:
                        break
                except SnapshotNotFoundError:
                    pass
            if consumer_min is not None and end >= consumer_min:
                break
            end += 1
        if end <= earliest:
            return []
        expired: list[Snapshot] = []
        for sid in range(earliest, end):
            try:
                expired.append(sm.snapshot(sid))
            except SnapshotNotFoundError:
                continue
        kept = [sm.snapshot(sid) for sid in range(end, latest + 1) if sm.snapshot_exists(sid)]
        tags = list(store.tag_manager.list().values())
        # 1. snapshots (oldest first) and the EARLIEST hint
        for s in expired:
            sm.delete(s.id)
        sm.commit_hint_earliest(end)
    ids = [s.id for s in expired]
    log.info("expired snapshots %s of %s", ids, store.path)
    # 2. files nobody references any more. Outside the lock: a commit after it builds on a kept
    # snapshot, and a tag made after it on a kept one. A file that another expiration or a rollback
    # deleted meanwhile ends the cleanup: what is left over is orphan cleanup's
    try:
        _delete_unreferenced(store, expired, kept, tags + _other_references(store))
    except MissingFileError as e:
        log.info("cleanup after expiring snapshots %s of %s stopped (%s); orphan cleanup takes the rest",
                 ids, store.path, e)
    return ids


def _delete_unreferenced(
    store: TableStore, expired: list[Snapshot], kept: list[Snapshot], others: list[Snapshot]
) -> None:
    """Delete the files of ``expired`` snapshots that no ``kept`` snapshot and no tag (``others``)
    references: data files by the live set of each, manifests by every reference."""
    live_data: set[str] = set()
    for s in kept + others:
        live_data |= _live_data_files(store, s)
    _, live_meta = referenced_files(store, kept + others)
    cand_data: set[str] = set()
    cand_meta: set[str] = set()
    for s in expired:
        d, m = _snapshot_references(store, s)
        cand_data |= d
        cand_meta |= m
    # the first kept snapshot's delta may delete files that only expired snapshots still held
    if kept:
        for e in store.delta_entries(kept[0]):
            cand_data |= _entry_paths(store, e)
    dead_data = sorted(cand_data - live_data)
    for path in dead_data:
        store.file_io.delete(path)
    if store.options.get(store.options.SNAPSHOT_CLEAN_EMPTY_DIRECTORIES):
        remove_empty_directories(store, {os.path.dirname(p) for p in dead_data})
    for name in sorted(cand_meta - live_meta):
        store.file_io.delete(os.path.join(store.manifest_dir, name))


def maybe_expire_snapshots(store: TableStore, *, compactor: bool = False) -> list[int]:
    """:func:`expire_snapshots` by the table's options, unless the table is ``write-only`` (and this
    is not a dedicated compaction, ``compactor``) or holds no more than ``snapshot.num-retained.min``
    snapshots (a look at two hint files, so that most commits pay nothing more). A failure (such as
    another process expiring the same snapshots) is logged, not raised: the commit is done, and the
    next one tries again."""
    opts = store.options
    if opts.write_only and not compactor:
        return []
    sm = store.snapshot_manager
    try:
        latest, earliest = sm.latest_id(), sm.earliest_id()
        if latest is None or earliest is None or latest - earliest < opts.snapshot_num_retained_min:
            return []
        return expire_snapshots(store)
    except Exception as e:  # noqa: BLE001 - the commit stands; expiration is retried at the next one
        log.warning("snapshot expiration of %s after a commit failed: %s", store.path, e)
        return []


def after_commit(store: TableStore, *, compactor: bool = False) -> bool:
    """Paimon's commit-time upkeep (see the module docstring): partition expiration, then snapshot
    expiration. True when partitions were dropped: a writer's trees may hold their files."""
    dropped = maybe_expire_partitions(store, compactor=compactor)
    maybe_expire_snapshots(store, compactor=compactor)
    return bool(dropped)


def remove_empty_directories(store: TableStore, directories: Iterable[str]) -> list[str]:
    """Remove each of ``directories`` (bucket directories) that is empty, then its partition
    directories up to the table directory while they are empty; return what was removed."""
    if not store.file_io.is_local:
        return []  # an object store has no empty directories
    root = os.path.normpath(store.path)
    removed: list[str] = []
    # deepest first, so a partition directory is tried after its buckets
    for d in sorted({os.path.normpath(d) for d in directories}, key=lambda p: -p.count(os.sep)):
        while d != root and d.startswith(root + os.sep) and store.file_io.delete_empty_dir(d):
            removed.append(d)
            d = os.path.dirname(d)
    return removed


def remove_orphan_files(
    store: TableStore, *, older_than_seconds: Optional[float] = None, dry_run: bool = False
) -> list[str]:
    """Delete files in the table directory that no snapshot or tag references and that are older
    than ``older_than_seconds`` (default: the table's ``orphan-clean.older-than``, 1 day), the guard
    that protects the files of commits still in flight."""
    if older_than_seconds is None:
        older_than_seconds = store.options.orphan_clean_older_than.seconds
    sm = store.snapshot_manager
    data, meta = referenced_with_others(store, sm.snapshots() + list(store.tag_manager.list().values()))
    canon = os.path.realpath if store.file_io.is_local else location
    keep = {canon(p) for p in data} | {canon(os.path.join(store.manifest_dir, m)) for m in meta}
    cutoff = time.time() - older_than_seconds
    # metadata, and files lakelog does not track (long-lived changelogs); index and statistics
    # files are tracked through the snapshots that reference them
    kept_dirs = ("schema", "tag", "consumer", "branch", "changelog")
    protected_dirs = {os.path.join(store.path, d) for d in kept_dirs}
    removed = []
    for path in store.file_io.walk_files(store.path):
        d = os.path.dirname(path)
        name = os.path.basename(path)
        is_temp = name.startswith(".") and name.endswith(".tmp")
        if not is_temp and any(d == p or d.startswith(p + os.sep) for p in protected_dirs):
            continue
        if d == os.path.join(store.path, "snapshot") and not name.endswith(".tmp"):
            continue
        if name == "_SUCCESS":  # a partition's done mark (CALL sys.mark_partition_done)
            continue
        if canon(path) in keep:
            continue
        try:
            if store.file_io.mtime(path) > cutoff:
                continue
        except FileNotFoundError:
            continue
        removed.append(path)
        if not dry_run:
            store.file_io.delete(path)
    return sorted(removed)


def rollback_target(
    store: TableStore, latest: int, *, snapshot_id: Optional[int] = None, tag: Optional[str] = None
) -> Snapshot:
    """The snapshot a rollback goes to: the one ``tag`` holds, or snapshot ``snapshot_id`` (from a
    tag of it once it has expired); never one after ``latest``."""
    if tag is not None:
        target = store.tag_manager.get(tag)  # TagError naming it
    else:
        assert snapshot_id is not None
        try:
            target = store.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            tagged = [s for s in store.tag_manager.list().values() if s.id == snapshot_id]  # expired, tagged
            if not tagged:
                raise
            target = tagged[0]
    if target.id > latest:
        raise SnapshotNotFoundError(
            f"snapshot {target.id} is after the latest ({latest}) of {store.location}"
        )
    return target


def rollback_to(store: TableStore, *, snapshot_id: Optional[int] = None, tag: Optional[str] = None) -> int:
    """Roll the table back to a snapshot (by id, or the one a tag holds); return its id.

    Paimon's semantics: the snapshots after the target are removed (the next commit takes the
    id after the target again), and so are the files only they referenced (data, changelog and
    manifest files). Rolling back to a tag whose snapshot has expired brings the snapshot back from
    the tag. Tags on later snapshots would point at ids that new commits reuse, so the rollback is
    refused while they exist, naming them. Consumers that had read past the target continue after
    it.

    Safe beside writers: the whole rollback holds the table's commit lock, so no commit publishes
    while it runs, and a commit that had planned on a removed snapshot finds, when it publishes,
    that its parent is gone and plans again on the target (or fails, naming the conflict). A commit
    published before the rollback is one of the later snapshots it removes.
    """
    if (snapshot_id is None) == (tag is None):
        raise ValueError("give exactly one of snapshot_id and tag")
    if store.options.log_system == LogSystem.KAFKA:
        raise OptionError(
            f"cannot roll {store.path} back: it has a Kafka log, and the changes of the snapshots a "
            "rollback removes stay in the topic. Readers of the log would keep them, and new commits "
            "taking those snapshot ids again would be taken for published ones. Undo changes by "
            "writing corrections (deletes, upserts), which reach the log's readers"
        )
    sm, tm = store.snapshot_manager, store.tag_manager
    with sm.lock():
        latest = sm.latest_id()
        if latest is None:
            raise SnapshotNotFoundError(f"{store.path} has no snapshot to roll back to")
        target = rollback_target(store, latest, snapshot_id=snapshot_id, tag=tag)
        later_tags = sorted(name for name, s in tm.list().items() if s.id > target.id)
        if later_tags:
            raise TagError(
                f"cannot roll {store.path} back to snapshot {target.id}: tag(s) {later_tags} hold later "
                "snapshots, whose ids new commits would reuse; delete those tags first"
            )
        removed = [sm.snapshot(i) for i in range(target.id + 1, latest + 1) if sm.snapshot_exists(i)]
        kept = [s for s in sm.snapshots() if s.id <= target.id]
        if all(s.id != target.id for s in kept):
            kept.append(target)  # brought back from its tag below
        # what to delete is known before anything changes: a damaged table fails here, untouched
        cand_data, cand_meta = referenced_files(store, removed)
        live_data, live_meta = referenced_with_others(store, kept + list(tm.list().values()))
        # 1. the LATEST hint first, then the removed snapshots newest first: a crash in between
        #    leaves a table whose latest snapshot is still one of the removed ones, never a gap
        if not sm.snapshot_exists(target.id):
            store.file_io.try_publish(sm.snapshot_path(target.id), target.to_json().encode("utf-8"))
            sm.commit_hint_earliest(target.id)
        sm.commit_hint_latest(target.id)
        for s in reversed(removed):
            sm.delete(s.id)
        # 2. consumers that had read past the target go on after it
        for consumer, nxt in store.consumer_manager.list().items():
            if nxt > target.id + 1:
                store.consumer_manager.reset(consumer, target.id + 1)
        # 3. the files only the removed snapshots referenced (still under the lock: a commit that
        #    publishes after it re-planned on the target, so it references none of them)
        for path in sorted(cand_data - live_data):
            store.file_io.delete(path)
        for name in sorted(cand_meta - live_meta):
            store.file_io.delete(os.path.join(store.manifest_dir, name))
    log.info("rolled %s back to snapshot %s (removed %s)", store.path, target.id, [s.id for s in removed])
    return target.id
