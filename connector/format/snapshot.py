"""Snapshots: ``<table>/snapshot/snapshot-N`` JSON files and the ``EARLIEST``/``LATEST`` hints.

:class:`Snapshot` is one version of the table, byte-compatible with the JSON Paimon writes;
:class:`SnapshotManager` lists, reads and atomically creates them (creation never overwrites, so
of several racing committers exactly one wins each id).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional, Union

from lakelog.connector.errors import (
    CommitConflictError,
    CorruptFileError,
    MissingFileError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.lock import LOCK_FILE, Hold, catalog_lock, holding_external

__all__ = ["SNAPSHOT_VERSION", "COMMIT_KINDS", "Snapshot", "SnapshotManager"]

SNAPSHOT_VERSION = 3
COMMIT_KINDS = ("APPEND", "COMPACT", "OVERWRITE", "ANALYZE")

_SNAPSHOT_NAME = re.compile(r"^snapshot-(\d+)$")
# How many snapshots past a LATEST hint are probed one by one before listing the directory.
_MAX_HINT_PROBES = 16
# How long the commit lock is waited for by default (Paimon's 'lock-acquire-timeout': 8 min).
DEFAULT_LOCK_TIMEOUT_S = 480.0


class _AnyParent:
    """:meth:`SnapshotManager.try_commit` without a parent: only the parent's id is checked."""


ANY_PARENT = _AnyParent()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _is_offsets(v: Any) -> bool:
    return isinstance(v, dict) and all(_is_int(x) for x in v.values())


# (attribute, JSON key, validator, required) in the order pypaimon writes them. ``logOffsets``
# (Java only; Flink's log system) sits where Java puts it.
_FIELDS: tuple[tuple[str, str, Callable[[Any], bool], bool], ...] = (
    ("version", "version", _is_int, True),
    ("id", "id", _is_int, True),
    ("schema_id", "schemaId", _is_int, True),
    ("base_manifest_list", "baseManifestList", _is_str, True),
    ("delta_manifest_list", "deltaManifestList", _is_str, True),
    ("total_record_count", "totalRecordCount", _is_int, False),
    ("delta_record_count", "deltaRecordCount", _is_int, False),
    ("commit_user", "commitUser", _is_str, True),
    ("commit_identifier", "commitIdentifier", _is_int, True),
    ("commit_kind", "commitKind", _is_str, True),
    ("time_millis", "timeMillis", _is_int, True),
    ("log_offsets", "logOffsets", _is_offsets, False),
    ("base_manifest_list_size", "baseManifestListSize", _is_int, False),
    ("delta_manifest_list_size", "deltaManifestListSize", _is_int, False),
    ("changelog_manifest_list", "changelogManifestList", _is_str, False),
    ("changelog_manifest_list_size", "changelogManifestListSize", _is_int, False),
    ("index_manifest", "indexManifest", _is_str, False),
    ("changelog_record_count", "changelogRecordCount", _is_int, False),
    ("watermark", "watermark", _is_int, False),
    ("statistics", "statistics", _is_str, False),
    ("next_row_id", "nextRowId", _is_int, False),
    ("properties", "properties", _is_str_map, False),
    ("uuid", "uuid", _is_str, False),
    ("writer_version", "writerVersion", _is_str, False),
)


@dataclass(kw_only=True)
class Snapshot:
    """One version of a table (``snapshot/snapshot-<id>``); field meanings as in Paimon's spec."""

    version: int = SNAPSHOT_VERSION
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    changelog_manifest_list: str | None = None
    index_manifest: str | None = None
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    log_offsets: dict[int, int] | None = None
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list_size: int | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = None
    uuid: str | None = None
    writer_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: Paimon key names in pypaimon's order, null fields left out."""
        out: dict[str, Any] = {}
        for attr, key, _check, _required in _FIELDS:
            value = getattr(self, attr)
            if value is None:
                continue
            if attr == "log_offsets":
                value = {str(k): v for k, v in value.items()}
            out[key] = value
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @staticmethod
    def from_dict(obj: Any, path: str = "<snapshot>") -> Snapshot:
        """Build from a parsed JSON object; unknown keys are ignored, bad ones raise
        :class:`CorruptFileError` naming ``path``."""
        if not isinstance(obj, dict):
            raise CorruptFileError(f"snapshot file {path} does not hold a JSON object")
        kwargs: dict[str, Any] = {}
        for attr, key, check, required in _FIELDS:
            value = obj.get(key)
            if value is None:
                if required:
                    raise CorruptFileError(f"snapshot file {path} lacks {key!r}")
                continue
            if not check(value):
                raise CorruptFileError(f"snapshot file {path} has a malformed {key!r}: {value!r:.80}")
            if attr == "log_offsets":
                try:
                    value = {int(k): v for k, v in value.items()}
                except ValueError:
                    raise CorruptFileError(f"snapshot file {path} has a malformed 'logOffsets'") from None
            kwargs[attr] = value
        return Snapshot(**kwargs)

    @staticmethod
    def from_json(text: str | bytes, path: str = "<snapshot>") -> Snapshot:
        try:
            obj = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptFileError(f"snapshot file {path} is not valid JSON: {e}") from e
        return Snapshot.from_dict(obj, path)


def _read_hint(file_io: FileIO, path: str) -> int | None:
    try:
        text = file_io.read_bytes(path).decode("utf-8", "replace").strip()
    except (MissingFileError, OSError):
        return None
    return int(text) if text.isdigit() else None


class SnapshotManager:
    """Snapshot files of the table at ``table_path``."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.snapshot_dir = f"{self.table_path}/snapshot"
        self.latest_hint_path = f"{self.snapshot_dir}/LATEST"
        self.earliest_hint_path = f"{self.snapshot_dir}/EARLIEST"
        self.lock_timeout_s = DEFAULT_LOCK_TIMEOUT_S  # the table's 'lock-acquire-timeout'
        # a catalog's lock (a metastore's lock table) instead of the file IO's: called with this
        # manager's snapshot directory and the timeout; must pickle (the manager travels to workers)
        self.lock_provider: Optional[Callable[[str, float], contextlib.AbstractContextManager[Hold]]] = None

    def catalog_lock(self) -> Optional[Callable[[str, float], contextlib.AbstractContextManager[Hold]]]:
        """The catalog's lock this manager commits under: its own :attr:`lock_provider`, else the one
        a catalog registered for the table's location (None: the file IO's lock)."""
        return self.lock_provider or catalog_lock(self.table_path)

    def lock(self) -> contextlib.AbstractContextManager[Hold]:
        """The table's commit lock (see :mod:`lakelog.connector.format.lock`): held to publish a
        snapshot and to delete snapshots, reentrant for the thread that holds it. The file IO's
        (flock on ``snapshot/.lock``, or leases on an object store) unless a catalog provides one."""
        provider = self.catalog_lock()
        if provider is not None:
            return holding_external(provider(self.snapshot_dir, self.lock_timeout_s))
        return self.file_io.lock(f"{self.snapshot_dir}/{LOCK_FILE}", self.lock_timeout_s)

    def snapshot_path(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/snapshot-{snapshot_id}"

    def snapshot_exists(self, snapshot_id: int) -> bool:
        return self.file_io.file_exists(self.snapshot_path(snapshot_id))

    def holds(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot-<id>`` still holds ``snapshot``: False once it has expired, or was
        rolled back (and perhaps its id taken by another commit since)."""
        try:
            return self.snapshot(snapshot.id) == snapshot
        except SnapshotNotFoundError:
            return False

    def snapshot_ids(self) -> list[int]:
        """Ids of all snapshot files, ascending (a directory listing)."""
        ids = []
        for name in self.file_io.list_dir(self.snapshot_dir):
            m = _SNAPSHOT_NAME.match(name)
            if m:
                ids.append(int(m.group(1)))
        ids.sort()
        return ids

    def latest_id(self) -> int | None:
        """Id of the newest snapshot: the LATEST hint, checked and probed forward (the hint can lag
        behind after a crash); a directory listing when there is no usable hint."""
        hint = _read_hint(self.file_io, self.latest_hint_path)
        if hint is not None and self.snapshot_exists(hint):
            for _ in range(_MAX_HINT_PROBES):
                if not self.snapshot_exists(hint + 1):
                    return hint
                hint += 1
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def _latest_by_hint(self) -> Snapshot | None:
        """The newest snapshot read at the LATEST hint when no snapshot follows it (on an object
        store: the read replaces the existence check of :meth:`latest_id`); None: look it up."""
        hint = _read_hint(self.file_io, self.latest_hint_path)
        if hint is None:
            return None
        try:
            snap = self.snapshot(hint)
        except (SnapshotNotFoundError, CorruptFileError):
            return None
        return None if self.snapshot_exists(hint + 1) else snap

    def earliest_id(self) -> int | None:
        """Id of the oldest snapshot: the EARLIEST hint when it exists and nothing precedes it,
        else a directory listing."""
        hint = _read_hint(self.file_io, self.earliest_hint_path)
        if hint is not None and self.snapshot_exists(hint) and not self.snapshot_exists(hint - 1):
            return hint
        ids = self.snapshot_ids()
        return ids[0] if ids else None

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """The snapshot with this id; :class:`SnapshotNotFoundError` if it does not exist."""
        path = self.snapshot_path(snapshot_id)
        try:
            data = self.file_io.read_bytes(path)
        except MissingFileError:
            earliest = self.earliest_id()
            if earliest is not None and 0 < snapshot_id < earliest:
                raise SnapshotExpiredError(
                    f"snapshot {snapshot_id} of {self.table_path} has expired (the earliest kept is "
                    f"{earliest}); keep snapshots longer with 'snapshot.num-retained.min' / "
                    "'snapshot.time-retained', a tag, or a consumer"
                ) from None
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist ({path})") from None
        snap = Snapshot.from_json(data, path)
        if snap.id != snapshot_id:
            raise CorruptFileError(
                f"snapshot file {path} holds snapshot {snap.id}, not {snapshot_id}: it was copied or "
                "replaced by hand; restore the right file or roll the table back (rollback_to)"
            )
        return snap

    def latest(self) -> Snapshot | None:
        hinted = self._latest_by_hint()
        if hinted is not None:
            return hinted
        for _ in range(3):  # the newest can be expired between finding and reading it: look again
            sid = self.latest_id()
            if sid is None:
                return None
            try:
                return self.snapshot(sid)
            except SnapshotNotFoundError:
                continue
        sid = self.latest_id()
        return None if sid is None else self.snapshot(sid)

    def earliest(self) -> Snapshot | None:
        for _ in range(3):
            sid = self.earliest_id()
            if sid is None:
                return None
            try:
                return self.snapshot(sid)
            except SnapshotNotFoundError:
                continue
        sid = self.earliest_id()
        return None if sid is None else self.snapshot(sid)

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot, ascending by id (ones expired while listing are skipped)."""
        out = []
        for sid in self.snapshot_ids():
            try:
                out.append(self.snapshot(sid))
            except SnapshotNotFoundError:
                continue
        return out

    def try_commit(self, snapshot: Snapshot, parent: Union[Snapshot, None, _AnyParent] = ANY_PARENT) -> bool:
        """Publish ``snapshot`` as ``snapshot-<id>`` if it still follows ``parent``, the snapshot it
        was built on (None: the table had none); False when another commit came first.

        Under the commit lock, the latest snapshot must be ``parent`` (its id, and the same content:
        a rollback can give a later snapshot the same id) and ``snapshot-<id>`` must not exist; then
        it is created (atomically, never overwriting). So a published id is always the one after
        the latest, above every id published before it, expired ones included. Without ``parent``
        only its id is checked. On success the LATEST hint (and, for a table's first snapshot,
        EARLIEST) is updated on a best-effort basis.
        """
        with self.lock() as hold:
            if not self._follows(snapshot.id, parent):
                return False
            path = self.snapshot_path(snapshot.id)
            if not self.file_io.try_publish(path, snapshot.to_json().encode("utf-8")):
                return False
            if hold.lost() and not self._still_on_chain(snapshot, parent):
                return False
            try:
                self.commit_hint_latest(snapshot.id)
                first = not self.snapshot_exists(snapshot.id - 1)
                if first and not self.file_io.file_exists(self.earliest_hint_path):
                    self.commit_hint_earliest(snapshot.id)
            except OSError:
                pass  # hints are only hints: readers verify them
            return True

    def _still_on_chain(self, snapshot: Snapshot, parent: Union[Snapshot, None, _AnyParent]) -> bool:
        """After a publish during which this process's lease of the commit lock lapsed (it was
        paused past the lease, and another process may have expired or rolled back snapshots
        meanwhile): whether ``snapshot`` is on the chain. When it is not, it is taken back, and the
        commit plans again (False); when that cannot be told, the commit fails, saying so."""
        if isinstance(parent, _AnyParent) or parent is None or self.holds(parent):
            if self.holds(snapshot):
                return True  # the parent outlived the publish, so the publish followed it
        elif self.holds(snapshot):
            earliest = self.earliest_id()
            if earliest is not None and earliest > parent.id:
                return True  # the parent expired after it: expiration keeps the latest, ours
            # the parent was rolled back: ours sits above a gap, where new commits would build on it
            if self.snapshot(snapshot.id) == snapshot:
                self.delete(snapshot.id)
                return False
        raise CommitConflictError(
            f"the commit lock's lease of {self.table_path} lapsed while snapshot {snapshot.id} was "
            "published (the process was paused for longer than the lease), and another process has "
            "changed the snapshots since: whether the commit stands cannot be told. Read the table "
            "before writing the rows again"
        )

    def _follows(self, snapshot_id: int, parent: Union[Snapshot, None, _AnyParent]) -> bool:
        """Whether the latest snapshot is ``parent`` and ``snapshot_id`` comes right after it."""
        latest = self.latest_id()
        if (latest or 0) != snapshot_id - 1:
            return False
        if isinstance(parent, _AnyParent):
            return True
        if parent is None or latest is None:
            return parent is None and latest is None
        try:
            return self.snapshot(latest) == parent
        except SnapshotNotFoundError:
            return False

    def commit_hint_latest(self, snapshot_id: int) -> None:
        self.file_io.overwrite_atomic(self.latest_hint_path, str(snapshot_id).encode())

    def commit_hint_earliest(self, snapshot_id: int) -> None:
        self.file_io.overwrite_atomic(self.earliest_hint_path, str(snapshot_id).encode())

    def delete(self, snapshot_id: int) -> bool:
        """Delete one snapshot file; False if it was not there."""
        return self.file_io.delete(self.snapshot_path(snapshot_id))

    def earlier_or_equal_time_millis(self, timestamp_millis: int) -> Snapshot | None:
        """The newest snapshot committed at or before ``timestamp_millis`` (commit times grow
        with ids, so this is a binary search)."""
        latest, earliest = self.latest_id(), self.earliest_id()
        if latest is None or earliest is None:
            return None
        try:
            return self._search_time(list(range(earliest, latest + 1)), timestamp_millis)
        except SnapshotNotFoundError:
            pass  # a gap (expiry running concurrently): search what exists now
        return self._search_time(self.snapshot_ids(), timestamp_millis, skip_missing=True)

    def _search_time(self, ids: list[int], ts: int, skip_missing: bool = False) -> Snapshot | None:
        lo, hi = 0, len(ids) - 1
        best: Snapshot | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            try:
                s = self.snapshot(ids[mid])
            except SnapshotNotFoundError:
                if not skip_missing:
                    raise
                lo = mid + 1  # expired: everything older is gone too
                continue
            if s.time_millis <= ts:
                best = s
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def newest_first(self) -> Iterator[Snapshot]:
        """Snapshots from the latest back to the earliest, stopping at the first expired one."""
        sid = self.latest_id()
        while sid is not None and sid > 0:
            try:
                yield self.snapshot(sid)
            except SnapshotNotFoundError:
                return  # reached expired snapshots
            sid -= 1

    def latest_of_user(self, commit_user: str) -> Snapshot | None:
        """The newest snapshot committed by ``commit_user`` (scanning back from the latest)."""
        return next((s for s in self.newest_first() if s.commit_user == commit_user), None)

    def find_commit(self, commit_user: str, commit_identifier: int) -> int | None:
        """The id of ``commit_user``'s snapshot with ``commit_identifier``, or None.

        Scans back from the latest snapshot; one user's identifiers only grow, so the scan stops
        at that user's first snapshot with a smaller identifier, or at expired snapshots.
        """
        for s in self.newest_first():
            if s.commit_user == commit_user:
                if s.commit_identifier == commit_identifier:
                    return s.id
                if s.commit_identifier < commit_identifier:
                    return None
        return None

    def find_by_commit(self, commit_user: str, commit_identifier: int) -> bool:
        """Whether a snapshot of ``commit_user`` with ``commit_identifier`` exists."""
        return self.find_commit(commit_user, commit_identifier) is not None
