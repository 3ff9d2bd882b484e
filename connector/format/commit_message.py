"""Commit messages: what a writer hands a committer for one (partition, bucket).

Plain, picklable dataclasses of data-file metadata; the committer turns them into manifest
entries (new files ADD; compaction inputs DELETE, outputs ADD; changelog files into the changelog
manifest list).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    def is_empty(self) -> bool:
        return not (
            self.new_files
            or self.changelog_files
            or self.compact_before
            or self.compact_after
            or self.compact_changelog_files
        )
