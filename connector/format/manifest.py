"""Manifest records: :class:`DataFileMeta`, :class:`ManifestEntry` and :class:`ManifestFileMeta`.

A *manifest* holds manifest entries (one ADD or DELETE of a data file each); a *manifest list*
holds manifest file metas (one per manifest, with partition stats for pruning). Binary rows
(partitions, keys, stats) stay as the serialized bytes Paimon stores (4-byte big-endian arity, then
the BinaryRow); :mod:`lakelog.connector.format.binary_row` decodes them. :func:`merge_entries`
applies ADDs and DELETEs as Paimon does. The Avro encoding is in ``manifest_codec``, the files in
``manifest_files``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.types import DataType

__all__ = [
    "KIND_ADD",
    "KIND_DELETE",
    "FILE_SOURCE_APPEND",
    "FILE_SOURCE_COMPACT",
    "EMPTY_ROW",
    "DEFAULT_TARGET_FILE_SIZE",
    "local_now_millis",
    "SimpleStats",
    "DataFileMeta",
    "ManifestEntry",
    "ManifestFileMeta",
    "PartitionStatsFn",
    "compute_partition_stats",
    "merge_entries",
]

KIND_ADD = 0
KIND_DELETE = 1
FILE_SOURCE_APPEND = 0
FILE_SOURCE_COMPACT = 1

#: A serialized BinaryRow of arity 0: the arity prefix and one 8-byte header word.
EMPTY_ROW = b"\x00" * 12

#: Paimon's default ``manifest.target-file-size`` (8 MiB).
DEFAULT_TARGET_FILE_SIZE = 8 * 1024 * 1024


def local_now_millis() -> int:
    """Now as Paimon stores ``_CREATION_TIME``: local wall-clock time taken as if it were UTC."""
    now = time.time()
    return int((now + time.localtime(now).tm_gmtoff) * 1000)


# ---------------------------------------------------------------------------------------------
# Data classes
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SimpleStats:
    """Min/max values (serialized BinaryRows) and per-field null counts."""

    min_values: bytes
    max_values: bytes
    null_counts: list[int | None] | None

    @staticmethod
    def empty() -> SimpleStats:
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])


@dataclass(slots=True)
class DataFileMeta:
    """Metadata of one data file, as stored in a manifest entry's ``_FILE``.

    ``creation_time_millis`` is the raw ``_CREATION_TIME`` long: Paimon stores the local
    wall-clock time as if it were UTC (see :func:`local_now_millis`).
    """

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: list[str] = field(default_factory=list)
    creation_time_millis: int | None = None
    delete_row_count: int | None = None
    embedded_file_index: bytes | None = None
    file_source: int | None = None
    value_stats_cols: list[str] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: list[str] | None = None
    write_cols_sequences: list[int] | None = None

    def upgrade(self, level: int) -> DataFileMeta:
        """A copy of this file's metadata placed at another LSM level."""
        return dataclasses.replace(self, level=level)

    @property
    def add_row_count(self) -> int:
        """Rows that are not deletions (``rowCount = addRowCount + deleteRowCount``)."""
        return self.row_count - (self.delete_row_count or 0)


@dataclass(slots=True)
class ManifestEntry:
    """One ADD (``kind`` 0) or DELETE (``kind`` 1) of a data file in a partition and bucket."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    def identifier(self) -> tuple[Any, ...]:
        """What Paimon uses to match an ADD with its DELETE."""
        f = self.file
        return (
            self.partition,
            self.bucket,
            f.level,
            f.file_name,
            tuple(f.extra_files),
            f.embedded_file_index,
            f.external_path,
        )


@dataclass(slots=True)
class ManifestFileMeta:
    """One manifest file as listed in a manifest list."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    total_buckets: int | None = None
    extra_files: list[str] | None = None


# ---------------------------------------------------------------------------------------------
# Partition stats
# ---------------------------------------------------------------------------------------------

#: Computes a manifest's partition stats from {serialized partition: number of entries}.
PartitionStatsFn = Callable[[Mapping[bytes, int], Sequence[DataType]], SimpleStats]


def compute_partition_stats(counts: Mapping[bytes, int], partition_types: Sequence[DataType]) -> SimpleStats:
    """Min, max and null count of each partition field over the entries of one manifest.

    ``counts`` maps each distinct serialized partition to how many entries carry it; the null
    counts count entries, like Paimon's.
    """
    if not partition_types:
        return SimpleStats.empty()
    from lakelog.connector.format.binary_row import deserialize_row, serialize_row

    arity = len(partition_types)
    mins: list[Any] = [None] * arity
    maxs: list[Any] = [None] * arity
    nulls: list[int | None] = [0] * arity
    for data, n in counts.items():
        values = deserialize_row(data, partition_types)
        for i, v in enumerate(values):
            if v is None:
                nulls[i] = (nulls[i] or 0) + n
                continue
            if mins[i] is None or v < mins[i]:
                mins[i] = v
            if maxs[i] is None or v > maxs[i]:
                maxs[i] = v
    return SimpleStats(serialize_row(mins, partition_types), serialize_row(maxs, partition_types), nulls)


def merge_entries(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Apply ADDs and DELETEs in order, as Paimon does.

    A DELETE cancels the earlier ADD of the same file (see :meth:`ManifestEntry.identifier`);
    a DELETE whose ADD was not seen is kept (its ADD lives in older manifests), so merging a
    delta and then merging the result onto a base gives the same live files. Result order is
    first-appearance order. Adding a file that is already live raises :class:`CorruptFileError`.
    """
    live: dict[tuple[Any, ...], ManifestEntry] = {}
    for e in entries:
        key = e.identifier()
        if e.kind == KIND_ADD:
            if key in live:
                raise CorruptFileError(
                    f"manifest entries add data file {e.file.file_name} (bucket {e.bucket}, "
                    f"level {e.file.level}) twice"
                )
            live[key] = e
        elif e.kind == KIND_DELETE:
            if key in live:
                del live[key]
            else:
                live[key] = e
        else:
            raise CorruptFileError(f"manifest entry for {e.file.file_name} has unknown kind {e.kind}")
    return list(live.values())
