"""The writer of one bucket: its LSM tree, level-0 flushes, spills, compaction and changelog."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.ipc as ipc

from lakelog.connector.changelog import state_change, write_changelog
from lakelog.connector.compact import BucketCompactor, CompactResult, num_levels
from lakelog.connector.kv import SEQUENCE_NUMBER, key_column
from lakelog.connector.lsm import Levels
from lakelog.connector.manifest import DataFileMeta
from lakelog.connector.options import ChangelogProducer
from lakelog.connector.sort_merge import merge_streams

if TYPE_CHECKING:
    from lakelog.connector.write import CommitMessage, TableWrite

__all__ = ["KeyValueBucketWriter", "AppendBucketWriter"]

_MERGE_ROWS = 256 * 1024  # rows held at once while merging spilled chunks


class KeyValueBucketWriter:
    """One bucket of a primary-key table."""

    def __init__(self, tw: TableWrite, partition: bytes, bucket: int, committed: list[DataFileMeta]) -> None:
        self.tw = tw
        self.store = tw.store
        self.partition = partition
        self.bucket = bucket
        self.levels = Levels.of(committed, num_levels(self.store))
        self.committed = list(committed)  # the bucket's files in the last snapshot this writer knows
        self.next_seq = max((f.max_sequence_number for f in committed), default=-1) + 1
        self.new_files: list[DataFileMeta] = []
        self.changelog: list[DataFileMeta] = []
        self.compacted = CompactResult()
        self.spills: list[str] = []
        self.new_keys: list[pa.Table] = []  # keys written since the last commit (lookup producer)
        self.commits = 0
        self.compactor = BucketCompactor(self.store, partition, bucket, self.levels)

    # ---- input ------------------------------------------------------------------------------
    def add(self, group: pa.Table, *, spill: bool) -> None:
        from lakelog.connector.write import merge_group

        tw = self.tw
        raw, merged = merge_group(group, tw.keys, self.next_seq, tw.merge, tw.arrow_schema)
        self.next_seq = int(raw.column(SEQUENCE_NUMBER).to_numpy().max()) + 1
        if tw.changelog_producer == ChangelogProducer.INPUT:
            self.changelog += write_changelog(self.store, self.partition, self.bucket, raw)
        if tw.changelog_producer == ChangelogProducer.LOOKUP:
            self.new_keys.append(merged.select([key_column(k) for k in tw.keys]).rename_columns(tw.keys))
        if spill:
            path = os.path.join(tw.spill_dir(), f"{self.bucket}-{id(self)}-{len(self.spills)}.arrow")
            with ipc.new_file(path, merged.schema) as sink:
                sink.write_table(merged, max_chunksize=64 * 1024)
            self.spills.append(path)
        else:
            self._write_level0(merged)

    def _write_level0(self, sorted_run: pa.Table | Iterator[pa.Table]) -> None:
        writer = self.store.file_writer(self.partition, self.bucket).rolling(level=0)
        try:
            if isinstance(sorted_run, pa.Table):
                writer.write(sorted_run)
            else:
                for chunk in sorted_run:
                    writer.write(chunk)
            files = writer.close()
        except BaseException:
            writer.abort()
            raise
        self.new_files += files
        self.levels.add(files)
        self._maybe_compact()

    def _merge_spills(self) -> None:
        """Merge the spilled sorted chunks (and nothing else) into one level-0 run."""
        if not self.spills:
            return
        keys = [key_column(k) for k in self.tw.keys]

        # memory-mapped, in slices: memory holds about _MERGE_ROWS rows whatever the spill count
        step = max(1024, _MERGE_ROWS // len(self.spills))

        def read(path: str) -> Iterator[pa.Table]:
            with pa.memory_map(path) as source, ipc.open_file(source) as r:
                for i in range(r.num_record_batches):
                    batch = r.get_batch(i)
                    for start in range(0, batch.num_rows, step):
                        yield pa.Table.from_batches([batch.slice(start, step)])

        streams = [read(p) for p in self.spills]
        self._write_level0(merge_streams(streams, keys, merge=self.tw.merge, drop_deletes=False))
        for p in self.spills:
            os.remove(p)
        self.spills = []

    # ---- compaction -------------------------------------------------------------------------
    def _run(self, full: bool = False, level0: bool = False) -> bool:
        comp = self.compactor
        unit = comp.pick_level0() if level0 else comp.pick(full=full)
        if unit is None:
            return False
        self.compacted.extend(comp.run(unit))
        return True

    def _maybe_compact(self) -> None:
        """One compaction per flush when the picker asks; more while the sorted runs exceed
        ``num-sorted-run.stop-trigger`` (the write waits for them: a stall)."""
        if self.tw.write_only:
            return
        self._run()
        stop = self.store.options.num_sorted_run_stop_trigger
        while self.levels.number_of_sorted_runs() > stop and self._run():
            pass

    def compact(self, *, full: bool = False) -> None:
        self._merge_spills()
        if full:
            self._run(full=True)
        else:
            while self._run():
                if (
                    self.levels.number_of_sorted_runs()
                    <= self.store.options.num_sorted_run_compaction_trigger
                ):
                    break

    # ---- commit -----------------------------------------------------------------------------
    def prepare_commit(self) -> CommitMessage:
        from lakelog.connector.write import CommitMessage

        self._merge_spills()
        opts = self.store.options
        producer = self.tw.changelog_producer
        if not self.tw.write_only and (self.new_files or self.new_keys):
            self.commits += 1
            delta = opts.full_compaction_delta_commits
            if delta and (self.tw.delta_commits_before() + self.commits) % delta == 0:
                if self._run(full=True):
                    self.tw.full_compacted = True
            elif producer == ChangelogProducer.LOOKUP and opts.lookup_wait:
                self._run(level0=True)
        if producer == ChangelogProducer.LOOKUP and self.new_keys and not self.tw.write_only:
            keys = pa.concat_tables(self.new_keys).group_by(self.tw.keys).aggregate([])
            seq = self.next_seq - 1
            kv = state_change(
                self.store, self.partition, self.bucket, self.committed, self.levels.all_files(), keys, seq
            )
            self.compacted.changelog += write_changelog(self.store, self.partition, self.bucket, kv)
        self.new_keys = []
        for f in self.compacted.intermediate:
            self.store.file_io.delete(self.store.data_file_path(self.partition, self.bucket, f.file_name))
        msg = CommitMessage(
            partition=self.partition,
            bucket=self.bucket,
            total_buckets=self.tw.num_buckets,
            new_files=self.new_files,
            changelog_files=self.changelog,
            compact_before=self.compacted.before,
            compact_after=self.compacted.after,
            compact_changelog_files=self.compacted.changelog,
        )
        self.committed = self.levels.all_files()
        self.new_files, self.changelog, self.compacted = [], [], CompactResult()
        return msg

    def abort(self) -> None:
        fio = self.store.file_io
        committed = {f.file_name for f in self.committed}
        for f in self.new_files + self.changelog + self.compacted.after + self.compacted.changelog:
            if f.file_name not in committed:
                fio.delete(self.store.data_file_path(self.partition, self.bucket, f.file_name))
        for p in self.spills:
            fio.delete(p)
        self.new_files, self.changelog, self.compacted, self.spills = [], [], CompactResult(), []


class AppendBucketWriter:
    """One bucket of an append table: rows in arrival order, sequence numbers per row."""

    def __init__(self, tw: TableWrite, partition: bytes, bucket: int, committed: list[DataFileMeta]) -> None:
        self.tw = tw
        self.store = tw.store
        self.partition = partition
        self.bucket = bucket
        self.next_seq = max((f.max_sequence_number for f in committed), default=-1) + 1
        self.new_files: list[DataFileMeta] = []

    def add(self, group: pa.Table, *, spill: bool) -> None:
        del spill  # append rows need no merge: the buffer is written out directly
        out = group.select(self.tw.arrow_schema.names)
        files = self.store.file_writer(self.partition, self.bucket).write(out, level=0)
        for m in files:
            m.min_sequence_number = self.next_seq
            m.max_sequence_number = self.next_seq + m.row_count - 1
            self.next_seq += m.row_count
        self.new_files += files

    def compact(self, *, full: bool = False) -> None:
        del full

    def prepare_commit(self) -> CommitMessage:
        from lakelog.connector.write import CommitMessage

        msg = CommitMessage(self.partition, self.bucket, self.tw.num_buckets, new_files=self.new_files)
        self.new_files = []
        return msg

    def abort(self) -> None:
        for f in self.new_files:
            self.store.file_io.delete(self.store.data_file_path(self.partition, self.bucket, f.file_name))
        self.new_files = []
