"""Tags: ``<table>/tag/tag-<name>``, a named copy of a snapshot's JSON that keeps its files alive."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lakelog.connector.errors import (
    CorruptFileError,
    MissingFileError,
    TagError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.snapshot import Snapshot

__all__ = ["TagInfo", "TagManager"]


# ---------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------


def _local_datetime_to_json(dt: datetime) -> list[int]:
    """Jackson's LocalDateTime array: [y, mo, d, h, mi] plus second and nanos when non-zero."""
    out = [dt.year, dt.month, dt.day, dt.hour, dt.minute]
    nanos = dt.microsecond * 1000
    if dt.second or nanos:
        out.append(dt.second)
        if nanos:
            out.append(nanos)
    return out


def _local_datetime_from_json(v: Any) -> datetime:
    y, mo, d, h, mi, sec, nanos = (list(v) + [0] * 7)[:7]
    return datetime(y, mo, d, h, mi, sec, nanos // 1000)


@dataclass
class TagInfo:
    """A tag: its snapshot and, for tags created with a retention, when it was made and for how long
    it is kept."""

    name: str
    snapshot: Snapshot
    create_time: datetime | None = None
    time_retained: timedelta | None = None


def _check_tag_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise TagError(f"tag name {name!r} is blank")
    if "/" in name or "\\" in name or ".." in name:
        raise TagError(f"tag name {name!r} must not contain '/', '\\' or '..'")
    if name.isdigit():
        raise TagError(f"tag name {name!r} cannot be a pure number (it would read as a snapshot id)")


class TagManager:
    """Tag files of the table at ``table_path``: ``tag/tag-<name>`` holding a snapshot's JSON."""

    PREFIX = "tag-"

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.tag_dir = f"{self.table_path}/tag"

    def tag_path(self, name: str) -> str:
        _check_tag_name(name)
        return f"{self.tag_dir}/{self.PREFIX}{name}"

    def exists(self, name: str) -> bool:
        return self.file_io.file_exists(self.tag_path(name))

    @staticmethod
    def _tag_json(snapshot: Snapshot, time_retained: timedelta | None, create_time: datetime | None) -> bytes:
        obj = snapshot.to_dict()
        if time_retained is not None:
            obj["tagCreateTime"] = _local_datetime_to_json(create_time or datetime.now())
            obj["tagTimeRetained"] = time_retained.total_seconds()
        return json.dumps(obj, ensure_ascii=False).encode("utf-8")

    def create(
        self,
        name: str,
        snapshot: Snapshot,
        time_retained: timedelta | None = None,
        create_time: datetime | None = None,
    ) -> None:
        """Create tag ``name`` for ``snapshot``; :class:`TagError` if the name is taken or invalid.

        Without ``time_retained`` the file is the plain snapshot JSON (as Paimon writes it); with
        it, ``tagCreateTime`` (``create_time``, default now) and ``tagTimeRetained`` are added.
        """
        path = self.tag_path(name)
        if not self.file_io.try_publish(path, self._tag_json(snapshot, time_retained, create_time)):
            raise TagError(f"tag {name!r} already exists ({path})")

    def replace(self, name: str, snapshot: Snapshot, time_retained: timedelta | None = None) -> None:
        """Point existing tag ``name`` at ``snapshot`` (a new creation time when it has a retention)
        with one atomic overwrite: readers see the old tag or the new one, never none."""
        path = self.tag_path(name)
        if not self.file_io.file_exists(path):
            raise TagError(f"tag {name!r} does not exist ({path})")
        self.file_io.overwrite_atomic(path, self._tag_json(snapshot, time_retained, None))

    def get_info(self, name: str) -> TagInfo:
        path = self.tag_path(name)
        try:
            data = self.file_io.read_bytes(path)
        except MissingFileError:
            raise TagError(f"tag {name!r} does not exist ({path})") from None
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptFileError(f"tag file {path} is not valid JSON: {e}") from e
        snapshot = Snapshot.from_dict(obj, path)
        create_time = retained = None
        try:
            if obj.get("tagCreateTime") is not None:
                create_time = _local_datetime_from_json(obj["tagCreateTime"])
            if obj.get("tagTimeRetained") is not None:
                retained = timedelta(seconds=float(obj["tagTimeRetained"]))
        except (TypeError, ValueError) as e:
            raise CorruptFileError(f"tag file {path} has malformed retention fields: {e}") from e
        return TagInfo(name, snapshot, create_time, retained)

    def get(self, name: str) -> Snapshot:
        """The tagged snapshot; :class:`TagError` if there is no such tag."""
        return self.get_info(name).snapshot

    def delete(self, name: str) -> None:
        """Delete tag ``name``; :class:`TagError` if there is no such tag."""
        path = self.tag_path(name)
        if not self.file_io.delete(path):
            raise TagError(f"tag {name!r} does not exist ({path})")

    def names(self) -> list[str]:
        return [
            n[len(self.PREFIX) :] for n in self.file_io.list_dir(self.tag_dir) if n.startswith(self.PREFIX)
        ]

    def list(self) -> dict[str, Snapshot]:
        """All tags by name, ordered by snapshot id then name (tags deleted meanwhile are skipped)."""
        found: list[tuple[str, Snapshot]] = []
        for name in self.names():
            try:
                found.append((name, self.get(name)))
            except TagError:
                continue
        found.sort(key=lambda t: (t[1].id, t[0]))
        return dict(found)
