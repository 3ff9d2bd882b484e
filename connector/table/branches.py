"""Creating, dropping and fast-forwarding branches (Paimon's ``create_branch``, ``delete_branch``
and ``fast_forward``), on the layout of :mod:`lakelog.connector.format.branches`.

Where Paimon's documented behaviour would lose data or leave a table inconsistent, lakelog refuses
or does more, and the README's table of differences says so:

- a branch made from a tag takes the tag's snapshot from the tag file, so it works after main
  expired that snapshot (Paimon copies main's snapshot file, which then no longer exists);
- fast-forward refuses while a main tag would be deleted that the branch does not hold as well
  (Paimon deletes them) and while a kept main snapshot would lose its schema; the main files only
  the replaced snapshots referenced are deleted at once (Paimon leaves them to orphan cleanup);
- a table with a Kafka log has no branches: the log is one stream of main's commits.

Every file deletion of any branch (expiration, rollback, orphan cleanup) keeps what the other
branches reference (see :mod:`lakelog.connector.table.maintenance`).
"""

from __future__ import annotations

import logging
import os

from lakelog.connector.errors import BranchError, MissingFileError, OptionError, TagError
from lakelog.connector.format.branches import MAIN, branch_location, check_branch_name, list_branches
from lakelog.connector.format.options import LogSystem
from lakelog.connector.format.snapshot import Snapshot, SnapshotManager
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.maintenance import referenced_files, referenced_with_others

__all__ = ["create_branch", "delete_branch", "fast_forward"]

log = logging.getLogger(__name__)


def _copy(store: TableStore, src: str, dst: str) -> None:
    store.file_io.overwrite_atomic(dst, store.file_io.read_bytes(src))


def create_branch(store: TableStore, name: str, *, tag: str | None = None) -> TableStore:
    """Create branch ``name`` of the table of ``store`` (from ``store``'s branch): empty with the
    latest schema, or from ``tag`` (that tag's snapshot becomes the branch's first, and the branch
    holds the tag too). Returns the branch's store."""
    check_branch_name(name)
    if store.options.log_system == LogSystem.KAFKA:
        raise OptionError(
            f"cannot create branch {name!r} of {store.location}: the table has a Kafka log, which is one "
            "stream of main's commits; a branch's commits would have none"
        )
    target = branch_location(store.path, name)
    fio = store.file_io
    with store.snapshot_manager.lock():  # the tag and its snapshot stay put while they are copied
        if name in list_branches(fio, store.path):
            raise BranchError(f"branch {name!r} of {store.path} already exists")
        base: Snapshot | None = None
        if tag is not None:
            base = store.tag_manager.get(tag)  # TagError naming it
        top = base.schema_id if base is not None else (store.schema_manager.latest() or store.schema).id
        if base is not None:
            branch_sm = SnapshotManager(fio, target)
            _copy(store, store.tag_manager.tag_path(tag or ""), f"{target}/tag/tag-{tag}")
            fio.overwrite_atomic(branch_sm.snapshot_path(base.id), base.to_json().encode("utf-8"))
            branch_sm.commit_hint_earliest(base.id)
            branch_sm.commit_hint_latest(base.id)
        # the schemas last: a branch exists once it has one (a creation that died before leaves none)
        for sid in store.schema_manager.list_ids():
            if sid <= top:
                _copy(store, store.schema_manager.schema_path(sid), f"{target}/schema/schema-{sid}")
    log.info("created branch %s of %s%s", name, store.path, f" from tag {tag}" if tag else "")
    return TableStore(target, fio)


def delete_branch(store: TableStore, name: str) -> None:
    """Delete branch ``name`` and its metadata. The data files only it wrote are left to orphan
    cleanup (``remove_orphan_files``), as in Paimon: a job may still be writing them."""
    if name == MAIN:
        raise BranchError(f"the main branch of {store.path} cannot be deleted")
    if name not in list_branches(store.file_io, store.path):
        raise BranchError(f"branch {name!r} of {store.path} does not exist")
    store.file_io.delete_dir(branch_location(store.path, name))
    log.info("deleted branch %s of %s", name, store.path)


def fast_forward(store: TableStore, name: str) -> int:
    """Make main what branch ``name`` is (Paimon's ``fast_forward``): main's snapshots from the
    branch's earliest id on are replaced by the branch's, and its schemas from that snapshot's schema
    on by the branch's. Returns main's new latest snapshot id.

    Under main's commit lock, like a rollback: a main commit planned on a replaced snapshot plans
    again when it publishes. Consumers of main that had read past the new latest snapshot go on
    after it."""
    if store.branch != MAIN:
        raise BranchError(f"fast-forward goes into main; {store.location} is branch {store.branch!r}")
    if name == MAIN or name not in list_branches(store.file_io, store.path):
        raise BranchError(f"branch {name!r} of {store.path} does not exist")
    fio = store.file_io
    branch = TableStore(branch_location(store.path, name), fio)
    sm, bsm = store.snapshot_manager, branch.snapshot_manager
    with sm.lock(), bsm.lock():
        incoming = bsm.snapshots()
        if not incoming:
            raise BranchError(f"branch {name!r} of {store.path} has no snapshot to fast-forward main to")
        first = incoming[0]
        mains = sm.snapshots()
        removed = [s for s in mains if s.id >= first.id]
        kept = [s for s in mains if s.id < first.id]
        branch_tags = branch.tag_manager.list()
        lost = sorted(
            n for n, s in store.tag_manager.list().items()
            if s.id >= first.id and (n not in branch_tags or branch_tags[n].id != s.id)
        )  # fmt: skip
        if lost:
            raise TagError(
                f"cannot fast-forward {store.path} to branch {name!r}: main's tag(s) {lost} hold snapshots "
                f"the branch replaces (from {first.id} on); delete them first"
            )
        for s in kept:
            if s.schema_id >= first.schema_id and _schema_bytes(store, s.schema_id) != _schema_bytes(
                branch, s.schema_id
            ):
                raise BranchError(
                    f"cannot fast-forward {store.path} to branch {name!r}: main's snapshot {s.id} keeps "
                    f"schema {s.schema_id}, which the branch has changed; expire main's snapshots before "
                    f"{first.id} first"
                )
        cand_data, cand_meta = referenced_files(store, removed)
        # 1. schemas: main's from the branch's first one on are replaced by the branch's
        bschemas = set(branch.schema_manager.list_ids())
        for sid in branch.schema_manager.list_ids():
            if sid >= first.schema_id:
                _copy(store, branch.schema_manager.schema_path(sid), store.schema_manager.schema_path(sid))
        for sid in store.schema_manager.list_ids():
            if sid >= first.schema_id and sid not in bschemas:
                fio.delete(store.schema_manager.schema_path(sid))
        # 2. snapshots: the LATEST hint, main's replaced ones newest first, then the branch's
        if kept:
            sm.commit_hint_latest(kept[-1].id)
        for s in reversed(removed):
            sm.delete(s.id)
        for s in incoming:
            fio.overwrite_atomic(sm.snapshot_path(s.id), fio.read_bytes(bsm.snapshot_path(s.id)))
        sm.commit_hint_earliest(kept[0].id if kept else first.id)
        sm.commit_hint_latest(incoming[-1].id)
        # 3. the branch's tags
        for tag in branch_tags:
            _copy(store, branch.tag_manager.tag_path(tag), store.tag_manager.tag_path(tag))
        store.refresh_schema()
        # 4. consumers that had read past the new latest go on after it
        latest = incoming[-1].id
        for consumer, nxt in store.consumer_manager.list().items():
            if nxt > latest + 1:
                store.consumer_manager.reset(consumer, latest + 1)
        # 5. the files only the replaced snapshots referenced
        tags = list(store.tag_manager.list().values())
        live_data, live_meta = referenced_with_others(store, sm.snapshots() + tags)
        for path in sorted(cand_data - live_data):
            fio.delete(path)
        for meta in sorted(cand_meta - live_meta):
            fio.delete(os.path.join(store.manifest_dir, meta))
    log.info("fast-forwarded %s to branch %s: snapshots %s..%s", store.path, name, first.id, latest)
    return latest


def _schema_bytes(store: TableStore, schema_id: int) -> bytes | None:
    try:
        return store.file_io.read_bytes(store.schema_manager.schema_path(schema_id))
    except MissingFileError:
        return None
