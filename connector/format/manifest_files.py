"""Manifest files and manifest lists in ``<table>/manifest/``: writing (rolling at the target size)
and reading, with errors that name the file.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.avro import (
    ContainerWriter,
    avro_codec,
    decode_file,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.manifest import (
    DEFAULT_TARGET_FILE_SIZE,
    KIND_ADD,
    ManifestEntry,
    ManifestFileMeta,
    PartitionStatsFn,
    compute_partition_stats,
)
from lakelog.connector.format.manifest_codec import (
    ENTRY_SCHEMA_JSON,
    ENTRY_SHAPE,
    META_SCHEMA_JSON,
    decode_entries,
    encode_entry,
    encode_meta,
    entry_from_record,
    meta_from_record,
)
from lakelog.connector.format.types import DataType

__all__ = ["ManifestFile", "ManifestList"]
# Paimon checks the rolling size every this many records.
_ROLL_CHECK_RECORDS = 1000


def _read_avro(
    file_io: FileIO,
    path: str,
    kind: str,
    key_field: str,
    shape: Any,
    fast: Callable[[bytes, int], list[Any]] | None,
    from_record: Callable[[Mapping[str, Any]], Any],
) -> list[Any]:
    data = file_io.read_bytes(path)  # MissingFileError names the path
    with _gc_paused():
        try:
            values, done = decode_file(data, shape, key_field, fast)
        except Exception as e:  # noqa: BLE001 - whatever fails to decode, the file is corrupt
            raise CorruptFileError(f"cannot decode {kind} {path}: {type(e).__name__}: {e}") from e
        if done:
            return values
        try:
            return [from_record(r) for r in values]
        except (KeyError, TypeError) as e:
            raise CorruptFileError(f"{kind} {path} lacks a required field: {e}") from e


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many small acyclic objects (it would rescan them
    over and over, nearly doubling decode time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


class _Namer:
    """``<prefix>-<uuid>-<n>`` names: one UUID per instance and a counter, like Paimon. A copy made
    by pickling (another process) takes a UUID of its own, so the two never name alike."""

    def __init__(self, prefix: str) -> None:
        self._base = prefix
        self._prefix = f"{prefix}-{uuid.uuid4()}-"
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, str]:
        return {"base": self._base}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.__init__(state["base"])  # type: ignore[misc]

    def next(self) -> str:
        with self._lock:
            n = next(self._counter)
        return f"{self._prefix}{n}"


class ManifestFile:
    """Reads and writes manifest files in ``manifest_dir`` (the table's ``manifest`` directory)."""

    def __init__(
        self,
        file_io: FileIO,
        manifest_dir: str,
        *,
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
        compression: str = "zstd",
        partition_stats_fn: PartitionStatsFn | None = None,
    ) -> None:
        self.file_io = file_io
        self.manifest_dir = manifest_dir.rstrip("/")
        self.target_file_size = max(1, int(target_file_size))
        self.codec = avro_codec(compression)
        self._partition_stats = partition_stats_fn or compute_partition_stats
        self._namer = _Namer("manifest")

    def path(self, file_name: str) -> str:
        return f"{self.manifest_dir}/{file_name}"

    def new_file_name(self) -> str:
        return self._namer.next()

    def write(
        self, entries: Iterable[ManifestEntry], partition_types: Sequence[DataType]
    ) -> list[ManifestFileMeta]:
        """Write ``entries`` to one or more new manifests, rolling at the target file size.

        Returns one :class:`ManifestFileMeta` per file written (none for no entries). On failure
        the files already written are deleted.
        """
        items = entries if isinstance(entries, list) else list(entries)
        metas: list[ManifestFileMeta] = []
        written: list[str] = []
        try:
            start = 0
            while start < len(items):
                writer = ContainerWriter(ENTRY_SCHEMA_JSON, self.codec)
                end = start
                while end < len(items):
                    stop = min(end + _ROLL_CHECK_RECORDS, len(items))
                    for e in items[end:stop]:
                        writer.add(encode_entry(e))
                    end = stop
                    if writer.size + writer.pending_size >= self.target_file_size:
                        break
                data = writer.finish()
                name = self.new_file_name()
                written.append(name)
                self.file_io.write_bytes(self.path(name), data)
                metas.append(self._meta(name, len(data), items[start:end], partition_types))
                start = end
        except BaseException:
            for name in written:  # best effort: the error that got us here is the one to report
                with contextlib.suppress(OSError):
                    self.file_io.delete(self.path(name))
            raise
        return metas

    def _meta(
        self, name: str, size: int, chunk: Sequence[ManifestEntry], partition_types: Sequence[DataType]
    ) -> ManifestFileMeta:
        added = sum(1 for e in chunk if e.kind == KIND_ADD)
        buckets = [e.bucket for e in chunk]
        levels = [e.file.level for e in chunk]
        totals = {e.total_buckets for e in chunk}
        total_buckets = next(iter(totals)) if len(totals) == 1 else None
        if total_buckets is not None and total_buckets <= 0:
            total_buckets = None
        min_row_id: int | None = None
        max_row_id: int | None = None
        row_ranges = [(e.file.first_row_id, e.file.row_count) for e in chunk]
        if all(first is not None for first, _ in row_ranges):
            min_row_id = min(first for first, _ in row_ranges if first is not None)
            max_row_id = max(first + n - 1 for first, n in row_ranges if first is not None)
        stats = self._partition_stats(Counter(e.partition for e in chunk), partition_types)
        return ManifestFileMeta(
            file_name=name,
            file_size=size,
            num_added_files=added,
            num_deleted_files=len(chunk) - added,
            partition_stats=stats,
            schema_id=max(e.file.schema_id for e in chunk),
            min_bucket=min(buckets),
            max_bucket=max(buckets),
            min_level=min(levels),
            max_level=max(levels),
            min_row_id=min_row_id,
            max_row_id=max_row_id,
            total_buckets=total_buckets,
        )

    def read(self, file_name: str) -> list[ManifestEntry]:
        """All entries of one manifest, in file order.

        Raises :class:`~lakelog.connector.errors.MissingFileError` or
        :class:`~lakelog.connector.errors.CorruptFileError` naming the file.
        """
        return _read_avro(
            self.file_io,
            self.path(file_name),
            "manifest file",
            "_FILE",
            ENTRY_SHAPE,
            decode_entries,
            entry_from_record,
        )

    def delete(self, file_name: str) -> bool:
        return self.file_io.delete(self.path(file_name))


_LIST_CACHE_ENTRIES = 64
_LIST_CACHE_LOCK = threading.Lock()


class ManifestList:
    """Reads and writes manifest lists in ``manifest_dir``."""

    def __init__(self, file_io: FileIO, manifest_dir: str, *, compression: str = "zstd") -> None:
        self.file_io = file_io
        self.manifest_dir = manifest_dir.rstrip("/")
        self.codec = avro_codec(compression)
        self._namer = _Namer("manifest-list")
        # on an object store, where each read is a request: the lists read lately, by name (a
        # manifest list is never rewritten; its name is unique)
        self._cache: Optional[collections.OrderedDict[str, list[ManifestFileMeta]]] = (
            None if file_io.is_local else collections.OrderedDict()
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if state["_cache"] is not None:
            state["_cache"] = collections.OrderedDict()
        return state

    def path(self, file_name: str) -> str:
        return f"{self.manifest_dir}/{file_name}"

    def write(self, metas: Iterable[ManifestFileMeta]) -> tuple[str, int]:
        """Write a new manifest list; return its file name and size in bytes."""
        writer = ContainerWriter(META_SCHEMA_JSON, self.codec)
        for m in metas:
            writer.add(encode_meta(m))
        data = writer.finish()
        name = self._namer.next()
        self.file_io.write_bytes(self.path(name), data)
        return name, len(data)

    def read(self, file_name: str) -> list[ManifestFileMeta]:
        """All manifest metas of one manifest list (missing/corrupt errors name the file)."""
        cache = self._cache
        if cache is not None:
            with _LIST_CACHE_LOCK:
                hit = cache.get(file_name)
                if hit is not None:
                    cache.move_to_end(file_name)
                    return list(hit)
        metas = _read_avro(
            self.file_io,
            self.path(file_name),
            "manifest list",
            "_PARTITION_STATS",
            None,
            None,
            meta_from_record,
        )
        if cache is not None:
            with _LIST_CACHE_LOCK:
                cache[file_name] = list(metas)
                while len(cache) > _LIST_CACHE_ENTRIES:
                    cache.popitem(last=False)
        return metas

    def delete(self, file_name: str) -> bool:
        return self.file_io.delete(self.path(file_name))
