"""Consumers: ``<table>/consumer/consumer-<id>``, the next snapshot a named reader will read.

Expiration keeps every snapshot a consumer still needs.
"""

from __future__ import annotations

import json

from lakelog.connector.errors import (
    CorruptFileError,
    MissingFileError,
    OptionError,
    SnapshotExpiredError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.snapshot import SnapshotManager, _is_int

__all__ = ["ConsumerManager", "record_progress"]


# ---------------------------------------------------------------------------------------------
# Consumers
# ---------------------------------------------------------------------------------------------


def _check_consumer_id(consumer_id: str) -> None:
    if (
        not isinstance(consumer_id, str)
        or not consumer_id.strip()
        or "/" in consumer_id
        or "\\" in consumer_id
        or consumer_id in (".", "..")
    ):
        raise OptionError(f"invalid consumer id {consumer_id!r} (option 'consumer-id'): blank or a path")


class ConsumerManager:
    """Consumer progress files of the table at ``table_path``: ``consumer/consumer-<id>``."""

    PREFIX = "consumer-"

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.consumer_dir = f"{self.table_path}/consumer"

    def consumer_path(self, consumer_id: str) -> str:
        _check_consumer_id(consumer_id)
        return f"{self.consumer_dir}/{self.PREFIX}{consumer_id}"

    def get(self, consumer_id: str) -> int | None:
        """The next snapshot consumer ``consumer_id`` will read, or None if it is unknown."""
        path = self.consumer_path(consumer_id)
        try:
            data = self.file_io.read_bytes(path)
        except MissingFileError:
            return None
        try:
            value = json.loads(data)["nextSnapshot"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError) as e:
            raise CorruptFileError(f"consumer file {path} is malformed: {e}") from e
        if not _is_int(value):
            raise CorruptFileError(f"consumer file {path} has a malformed 'nextSnapshot': {value!r}")
        return int(value)

    def reset(self, consumer_id: str, next_snapshot: int) -> None:
        """Record that ``consumer_id`` reads ``next_snapshot`` next (atomic replace)."""
        path = self.consumer_path(consumer_id)
        self.file_io.overwrite_atomic(path, json.dumps({"nextSnapshot": int(next_snapshot)}).encode())

    def delete(self, consumer_id: str) -> bool:
        return self.file_io.delete(self.consumer_path(consumer_id))

    def ids(self) -> list[str]:
        """Ids of all consumer files (names that are not valid ids are skipped)."""
        out = []
        for name in self.file_io.list_dir(self.consumer_dir):
            if name.startswith(self.PREFIX):
                cid = name[len(self.PREFIX) :]
                try:
                    _check_consumer_id(cid)
                except OptionError:
                    continue
                out.append(cid)
        return out

    def expire(self, older_than_millis: int) -> list[str]:
        """Delete consumers last updated before ``older_than_millis`` (epoch millis); return their ids."""
        expired = []
        for cid in self.ids():
            path = self.consumer_path(cid)
            try:
                mtime_millis = self.file_io.mtime(path) * 1000
            except OSError:
                continue
            if mtime_millis < older_than_millis and self.file_io.delete(path):
                expired.append(cid)
        return expired

    def list(self) -> dict[str, int]:
        """Every consumer's next snapshot, by consumer id."""
        out: dict[str, int] = {}
        for cid in self.ids():
            n = self.get(cid)
            if n is not None:
                out[cid] = n
        return out

    def min_next_snapshot(self) -> int | None:
        """The smallest next snapshot of any consumer (snapshots from there on must be kept)."""
        values = self.list().values()
        return min(values) if values else None


def record_progress(
    consumers: ConsumerManager, snapshots: SnapshotManager, consumer_id: str, next_snapshot: int
) -> None:
    """Record that ``consumer_id`` reads ``next_snapshot`` next, so that expiration keeps it.

    A consumer moving forward already protects what it moves to. A new consumer (or one moved
    back) is recorded under the commit lock after checking that ``next_snapshot`` has not expired:
    an expiration that had read the consumers just before would otherwise delete the snapshot the
    new record was meant to protect. An expired one raises :class:`SnapshotExpiredError`.
    """
    current = consumers.get(consumer_id)
    if current is not None and current <= next_snapshot:
        consumers.reset(consumer_id, next_snapshot)
        return
    with snapshots.lock():
        earliest = snapshots.earliest_id()
        if earliest is not None and next_snapshot < earliest:
            raise SnapshotExpiredError(
                f"consumer {consumer_id!r} of {snapshots.table_path} would read snapshot {next_snapshot} "
                f"next, but it has expired (the earliest kept is {earliest})"
            )
        consumers.reset(consumer_id, next_snapshot)
