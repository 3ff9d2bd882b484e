"""Commit messages: what a writer hands a committer for one (partition, bucket).

Plain, picklable dataclasses of data-file metadata; the committer turns them into manifest
entries (new files ADD; compaction inputs DELETE, outputs ADD; changelog files into the changelog
manifest list; index files into the snapshot's index manifest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from lakelog.connector.format.index_file import IndexFileMeta
from lakelog.connector.format.manifest import DataFileMeta

__all__ = ["CommitMessage"]


@dataclass
class CommitMessage:
    """What one writer hands the committer for one (partition, bucket)."""

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)  # produced with the new files (input)
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)
    compact_changelog_files: list[DataFileMeta] = field(default_factory=list)  # lookup / full-compaction
    # Dynamic bucket mode: the bucket's new HASH index file (it replaces the bucket's live one), and
    # the HASH file the writer's view of the bucket started from (None: the bucket had none). The
    # committer checks that the bucket's live file is still that one, or merges another writer's
    # additions into the new file when no key went to two buckets (see TableCommit).
    index_files: list[IndexFileMeta] = field(default_factory=list)
    index_base: Optional[str] = None
    # Deletion-vector mode: a compaction changed the bucket's vectors (``dv_changed``); its new
    # DELETION_VECTORS index file (None: no vector is left), committed with the compaction, and the
    # file the writer's vectors started from (``dv_base``; None: the bucket had none). The committer
    # drops the compaction when the bucket's live file is another one by then.
    dv_changed: bool = False
    dv_file: Optional[IndexFileMeta] = None
    dv_base: Optional[str] = None
    # Deletion-vector mode, a compaction's view: the bucket's files above level 0 after it, as the
    # writer saw them. Its lookups (which rows it marked) assume exactly these; the committer drops
    # the compaction when another commit changed them meanwhile.
    dv_view: Optional[list[str]] = None
    # Deletion vectors of an append table. ``dv_delete``: a DELETE's new vectors (``dv_file``, from
    # ``dv_base``), committed in an APPEND snapshot as Paimon commits them; every data file they name
    # must still be live. ``dv_guard``: a compaction that changed no vector but rewrote files, so
    # the bucket's vectors must still be ``dv_base`` (a DELETE may have marked rows of those files).
    dv_delete: bool = False
    dv_guard: bool = False

    def is_empty(self) -> bool:
        return not (
            self.new_files
            or self.dv_changed
            or self.index_files
            or self.changelog_files
            or self.compact_before
            or self.compact_after
            or self.compact_changelog_files
        )
