"""One table directory: its paths, schema, metadata managers, manifests and the live files of a
snapshot.

:class:`TableStore` is the handle every other layer passes around. It pickles without its caches,
so it can travel to a Flink worker.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, TypeVar

import pyarrow as pa

from lakelog.connector.errors import (
    BranchError,
    CorruptTableError,
    MissingFileError,
    SnapshotNotFoundError,
    TableNotFoundError,
)
from lakelog.connector.format.binary_row import deserialize_row
from lakelog.connector.format.branches import MAIN, branch_location, split_branch_location
from lakelog.connector.format.consumers import ConsumerManager
from lakelog.connector.format.data_file import DataFileWriter, FileLayout, StatsMode
from lakelog.connector.format.file_index import FileIndexConfig
from lakelog.connector.format.fileio import FileIO, io_for, location, register_io
from lakelog.connector.format.index_file import IndexManifestEntry
from lakelog.connector.format.index_manifest import IndexManifestFile
from lakelog.connector.format.key_value import key_column
from lakelog.connector.format.manifest import DataFileMeta, ManifestEntry, ManifestFileMeta, merge_entries
from lakelog.connector.format.manifest_files import ManifestFile, ManifestList
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.parquet_layout import data_file_schema
from lakelog.connector.format.partition import partition_path
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_manager import SchemaManager
from lakelog.connector.format.snapshot import Snapshot, SnapshotManager
from lakelog.connector.format.tags import TagManager
from lakelog.connector.format.types import DataType

__all__ = ["TableStore", "file_schema"]

_MANIFEST_CACHE_ENTRIES = 256
T = TypeVar("T")


class _ManifestCache:
    """Manifest files never change once written, so their entries are cached by file name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: OrderedDict[str, list[ManifestEntry]] = OrderedDict()

    def get(self, name: str) -> Optional[list[ManifestEntry]]:
        with self._lock:
            v = self._data.get(name)
            if v is not None:
                self._data.move_to_end(name)
            return v

    def put(self, name: str, entries: list[ManifestEntry]) -> None:
        with self._lock:
            self._data[name] = entries
            while len(self._data) > _MANIFEST_CACHE_ENTRIES:
                self._data.popitem(last=False)


class TableStore:
    """Paths and metadata access for the table at ``path`` (``<warehouse>/<db>.db/<table>``).

    It pickles without its caches, so it can travel to a Flink worker.
    """

    def __init__(
        self, path: str, file_io: Optional[FileIO] = None, schema: Optional[TableSchema] = None
    ) -> None:
        # a branch's directory (<table>/branch/branch-<name>) opens that branch of the table
        root, branch = split_branch_location(path)
        self.path = root  # the table's directory: data files, manifests and index files
        self.branch = branch
        self.location = branch_location(root, branch)  # this branch's snapshots, schemas, tags, consumers
        self.file_io = file_io or io_for(root)
        if not self.file_io.is_local:
            register_io(root, self.file_io)  # the data files of this bucket are read and written so
        self.schema_manager = SchemaManager(self.file_io, self.location)
        self.snapshot_manager = SnapshotManager(self.file_io, self.location)
        self.tag_manager = TagManager(self.file_io, self.location)
        self.consumer_manager = ConsumerManager(self.file_io, self.location)
        self.manifest_dir = os.path.join(root, "manifest")
        self.index_dir = os.path.join(root, "index")
        self._cache = _ManifestCache()
        self._index_cache: dict[str, list[IndexManifestEntry]] = {}
        self._live_cache: Optional[tuple[tuple[int, str, str], list[ManifestEntry]]] = None
        loaded = schema if schema is not None else self.schema_manager.latest()
        if loaded is None:
            if self.snapshot_manager.snapshot_ids():
                raise CorruptTableError(
                    f"table at {path} has snapshots but no schema file (schema/schema-0 is missing): "
                    "its data cannot be read; restore the schema files"
                )
            if branch != MAIN:
                raise BranchError(f"table {root} has no branch {branch!r} ({self.location} holds no schema)")
            raise TableNotFoundError(f"no table at {path} (no schema/schema-0)")
        self.schema: TableSchema = loaded
        self._open_manifests()

    def _open_manifests(self) -> None:
        opts = self.schema.core_options
        self.snapshot_manager.lock_timeout_s = opts.lock_acquire_timeout.seconds
        compression = opts.get(CoreOptions.MANIFEST_COMPRESSION)
        self.manifest_file = ManifestFile(
            self.file_io,
            self.manifest_dir,
            target_file_size=int(opts.manifest_target_file_size),
            compression=compression,
        )
        self.manifest_list = ManifestList(self.file_io, self.manifest_dir, compression=compression)
        self.index_manifest_file = IndexManifestFile(self.file_io, self.manifest_dir, compression=compression)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cache"] = None
        state["_index_cache"] = None
        state["_live_cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if not self.file_io.is_local:  # on a Flink worker: this table's file IO serves its bucket
            register_io(self.path, self.file_io)
        self._cache = _ManifestCache()
        self._index_cache = {}

    # ---- schema-derived facts -------------------------------------------------------------
    @property
    def options(self) -> CoreOptions:
        return self.schema.core_options

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.schema.primary_keys)

    def file_layout(self) -> FileLayout:
        """The columns this table's data files begin with by its schema, which readers check each
        file's footer against (see :class:`~lakelog.connector.format.data_file.FileLayout`)."""
        s = self.schema
        keys = tuple(s.trimmed_primary_keys) if s.primary_keys else ()
        return FileLayout(keys, self.schema_manager.schema_path(s.id), tuple(s.primary_keys))

    def check_file_records(self, entries: Iterable[ManifestEntry]) -> None:
        """Refuse (:class:`~lakelog.connector.errors.CorruptFileError`) files whose manifest records
        contradict the schema's layout (see :meth:`file_layout`): a writer checks the files it
        builds on, which it does not open, before writing next to them."""
        layout = self.file_layout()
        for e in entries:
            if not layout.fits_record(e.file):
                f = e.file
                path = self.data_file_path(e.partition, e.bucket, f.file_name, f.external_path)
                raise layout.refused_record(path)

    def field_types(self, names: Sequence[str]) -> list[DataType]:
        by_name = {f.name: f.type for f in self.schema.fields}
        return [by_name[n] for n in names]

    @property
    def partition_types(self) -> list[DataType]:
        return self.field_types(self.schema.partition_keys)

    @property
    def key_names(self) -> list[str]:
        return list(self.schema.trimmed_primary_keys)

    @property
    def key_types(self) -> list[DataType]:
        return [dataclasses.replace(t, nullable=False) for t in self.field_types(self.key_names)]

    def with_schema(self, schema: TableSchema) -> TableStore:
        other = TableStore.__new__(TableStore)
        other.__dict__.update(self.__dict__)
        other.schema = schema
        other._open_manifests()
        return other

    def refresh_schema(self) -> None:
        latest = self.schema_manager.latest()
        if latest is not None:
            self.schema = latest
            self._open_manifests()

    # ---- paths ------------------------------------------------------------------------------
    def partition_values(self, partition: bytes) -> tuple[Any, ...]:
        return deserialize_row(partition, self.partition_types)

    def partition_dir(self, values: Sequence[Any]) -> str:
        """The partition's relative directory, spelled as Paimon spells it."""
        opts = self.options
        return partition_path(
            self.schema.partition_keys,
            values,
            opts.partition_default_name,
            types=self.partition_types,
            legacy_name=opts.get(CoreOptions.PARTITION_LEGACY_NAME),
        )

    def bucket_dir(self, partition: bytes, bucket: int) -> str:
        parts = self.partition_values(partition)
        rel = self.partition_dir(parts)
        return (
            os.path.join(self.path, rel, f"bucket-{bucket}")
            if rel
            else os.path.join(self.path, f"bucket-{bucket}")
        )

    def file_index_config(self) -> FileIndexConfig:
        """The file indexes the table's options ask every data file for."""
        opts = self.options
        return FileIndexConfig(bloom=opts.bloom_filter_columns(), bitmap=opts.bitmap_index_columns())

    def file_writer(self, partition: bytes, bucket: int, *, changelog: bool = False) -> DataFileWriter:
        """How this table writes data (or, with ``changelog``, changelog) files of a bucket; file
        names follow ``data-file.prefix`` / ``changelog-file.prefix`` and
        ``file.suffix.include.compression`` (``data-<uuid>-0.zstd.parquet``)."""
        opts = self.options
        schema = self.schema
        prefix = opts.get(opts.CHANGELOG_FILE_PREFIX if changelog else opts.DATA_FILE_PREFIX)
        with_codec = opts.get(opts.FILE_SUFFIX_INCLUDE_COMPRESSION)
        suffix = f".{opts.file_compression}.parquet" if with_codec else ".parquet"
        return DataFileWriter(
            bucket_dir=self.bucket_dir(partition, bucket),
            schema_id=schema.id,
            key_columns=[key_column(k) for k in self.key_names],
            key_types=self.key_types,
            value_columns=[f.name for f in schema.fields],
            value_types=[f.type for f in schema.fields],
            compression=opts.file_compression,
            compression_level=opts.file_compression_zstd_level if opts.file_compression == "zstd" else None,
            target_file_size=opts.target_file_size_for(bool(schema.primary_keys)),
            file_prefix=prefix,
            file_suffix=suffix,
            value_stats_modes=[StatsMode.parse(opts.stats_mode(f.name)) for f in schema.fields],
            key_stats_mode=_key_stats_mode(StatsMode.parse(opts.stats_mode(None))),
            file_schema=file_schema(self),
            file_index=None if changelog else self.file_index_config() or None,
            index_in_manifest=int(opts.get(opts.FILE_INDEX_IN_MANIFEST_THRESHOLD)),
        )

    def data_file_path(
        self, partition: bytes, bucket: int, file_name: str, external_path: Optional[str] = None
    ) -> str:
        if external_path:
            return location(external_path)
        return os.path.join(self.bucket_dir(partition, bucket), file_name)

    def delete_data_file(self, partition: bytes, bucket: int, f: DataFileMeta) -> bool:
        """Delete a data (or changelog) file and its extra files (a file index beside it); True
        when the data file was there."""
        for extra in f.extra_files:
            self.file_io.delete(self.data_file_path(partition, bucket, extra))
        return self.file_io.delete(self.data_file_path(partition, bucket, f.file_name, f.external_path))

    def index_file_path(self, entry: IndexManifestEntry) -> str:
        """Where an index file lives: ``<table>/index/``, or its bucket directory for tables made with
        Paimon's ``index-file-in-data-file-dir``, or its external path."""
        f = entry.index_file
        if f.external_path:
            return location(f.external_path)
        if self.schema.options.get("index-file-in-data-file-dir", "false").lower() == "true":
            return os.path.join(self.bucket_dir(entry.partition, entry.bucket), f.file_name)
        return os.path.join(self.index_dir, f.file_name)

    # ---- manifests ----------------------------------------------------------------------------
    def read_manifest(self, name: str) -> list[ManifestEntry]:
        cached = self._cache.get(name)
        if cached is None:
            cached = self.manifest_file.read(name)
            self._cache.put(name, cached)
        return cached

    def manifest_metas(self, snapshot: Snapshot, *, delta_only: bool = False) -> list[ManifestFileMeta]:
        metas: list[ManifestFileMeta] = []
        if not delta_only:
            metas.extend(self.manifest_list.read(snapshot.base_manifest_list))
        metas.extend(self.manifest_list.read(snapshot.delta_manifest_list))
        return metas

    def entries_of(self, metas: Iterable[ManifestFileMeta]) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for m in metas:
            out.extend(self.read_manifest(m.file_name))
        return out

    def live_entries(self, snapshot: Optional[Snapshot]) -> list[ManifestEntry]:
        """The ADD entries of every data file live in ``snapshot`` (the last snapshot's are kept:
        a commit asks several times for those of the snapshot it follows)."""
        if snapshot is None:
            return []
        key = (snapshot.id, snapshot.base_manifest_list, snapshot.delta_manifest_list)
        last = self._live_cache
        if last is not None and last[0] == key:
            return list(last[1])
        merged = merge_entries(self.entries_of(self.manifest_metas(snapshot)))
        live = [e for e in merged if e.kind == 0]
        self._live_cache = (key, live)
        return list(live)

    def on_latest(
        self, read: Callable[[Optional[Snapshot]], T], *, attempts: int = 5
    ) -> tuple[Optional[Snapshot], T]:
        """``(latest, read(latest))`` for the latest snapshot, read again on the new latest when a
        concurrent expiration removed the files of the one ``read`` was reading (which is then no
        longer the latest). A file missing from a snapshot that still exists is an error."""
        for attempt in range(attempts):
            latest = self.snapshot_manager.latest()
            try:
                return latest, read(latest)
            except (MissingFileError, SnapshotNotFoundError):
                expired = latest is not None and not self.snapshot_manager.holds(latest)
                if not expired or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def index_entries(self, snapshot: Optional[Snapshot]) -> list[IndexManifestEntry]:
        """The live index files of ``snapshot`` (its full-state index manifest; none without one)."""
        if snapshot is None or not snapshot.index_manifest:
            return []
        name = snapshot.index_manifest
        cached = self._index_cache.get(name)
        if cached is None:
            cached = self.index_manifest_file.read(name)
            if len(self._index_cache) >= _MANIFEST_CACHE_ENTRIES:
                self._index_cache.pop(next(iter(self._index_cache)))
            self._index_cache[name] = cached
        return cached

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        return self.entries_of(self.manifest_metas(snapshot, delta_only=True))


def _key_stats_mode(table_mode: StatsMode) -> StatsMode:
    """Key statistics are always kept (primary-key tables are pruned by them, and pypaimon keeps
    them too); the table's mode decides only how long strings are: ``full`` keeps them whole."""
    return table_mode if table_mode.min_max else StatsMode("truncate", 16)


def file_schema(
    store: TableStore, schema: Optional[TableSchema] = None, *, field_ids: bool = True
) -> pa.Schema:
    """The Arrow schema of the table's data files written under ``schema`` (default: the store's),
    key-value layout for primary-key tables, with Paimon's Parquet field ids unless ``field_ids`` is
    false."""
    s = schema if schema is not None else store.schema
    return data_file_schema(s.fields, s.trimmed_primary_keys, s.primary_keys, field_ids=field_ids)
