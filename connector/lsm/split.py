"""A split: the files of one (partition, bucket) in one snapshot, the unit that is read (and
merged) as a whole. Picklable, so a split planned in one process is read in another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

from lakelog.connector.format.deletion_vectors import DeletionVectorMeta
from lakelog.connector.format.manifest import DataFileMeta

__all__ = ["Split", "DeletionFile"]


@dataclass(frozen=True)
class DeletionFile:
    """Where one data file's deletion vector is: a bin of an index file (Paimon's ``DeletionFile``)."""

    path: str  # the DELETION_VECTORS index file
    meta: DeletionVectorMeta


@dataclass
class Split:
    """The files of one (partition, bucket) in one snapshot. Picklable; read it anywhere.

    ``deletion_vectors`` is None for a bucket read by merging its sorted runs; for a table in
    deletion-vector mode it maps data file names to their deletion vectors (a :class:`DeletionFile`,
    or the positions themselves), and the bucket is read file by file, above level 0 only, each
    file without the rows its vector deletes.
    """

    snapshot_id: int
    partition: bytes
    bucket: int
    total_buckets: int
    files: list[DataFileMeta] = field(default_factory=list)
    deletion_vectors: Optional[dict[str, Union[DeletionFile, np.ndarray]]] = None
    # another branch of the table whose files these are (``scan.fallback-branch``); None: the reader's
    branch: Optional[str] = None

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)
