"""A split: the files of one (partition, bucket) in one snapshot, the unit that is read (and
merged) as a whole. Picklable, so a split planned in one process is read in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakelog.connector.format.manifest import DataFileMeta

__all__ = ["Split"]


@dataclass
class Split:
    """The files of one (partition, bucket) in one snapshot. Picklable; read it anywhere."""

    snapshot_id: int
    partition: bytes
    bucket: int
    total_buckets: int
    files: list[DataFileMeta] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)
