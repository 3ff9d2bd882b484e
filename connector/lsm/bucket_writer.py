"""The writer of one bucket: its LSM tree, level-0 flushes, spills, compaction and changelog.

Compaction runs in the background: after a level-0 flush the writer picks a compaction unit and
hands it to the table writer's compaction threads, then goes on taking rows. At most one
compaction per bucket is in flight; its result is applied to the levels (and joins the next commit)
once it has finished. Writes wait for it only when the bucket holds more than
``num-sorted-run.stop-trigger`` sorted runs (a stall), and commits wait only when asked to
(``prepare_commit(wait_compaction=True)``, which one-shot writes use), for a full compaction
(``full-compaction.delta-commits``) and for the lookup changelog producer with ``lookup-wait``.

Lookup changelog: the changelog of the rows written since the last one is the difference, for
their keys, between the bucket's state above level 0 then and now. It is produced once level-0
files have been compacted up: at every commit with ``lookup-wait`` (which pushes level 0 up first),
otherwise when a background compaction has done so (the changelog then lags behind the data).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Optional, Protocol

import pyarrow as pa
import pyarrow.ipc as ipc

from lakelog.connector.errors import MissingFileError
from lakelog.connector.format.commit_message import CommitMessage
from lakelog.connector.format.fileio import storage_errors
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, key_column
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.options import ChangelogProducer
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.changelog import write_changelog
from lakelog.connector.lsm.compaction import BucketCompactor, CompactResult, num_levels
from lakelog.connector.lsm.deletion_vectors import BucketDeletionVectors
from lakelog.connector.lsm.kv import merge_sorted, sort_indices
from lakelog.connector.lsm.levels import CompactUnit, Levels
from lakelog.connector.lsm.sort_merge import merge_streams


class WriterContext(Protocol):
    """What a bucket writer uses of the table writer that owns it (the table layer's
    ``TableWrite``): the table, its merge settings, and the threads and spill directory it shares
    between its buckets."""

    store: TableStore
    keys: list[str]
    merge: Any
    arrow_schema: pa.Schema
    write_only: bool
    full_compacted: bool
    stale: bool  # set when a compaction found its inputs gone: reload the buckets after the commit

    @property
    def changelog_producer(self) -> ChangelogProducer: ...

    def spill_dir(self) -> str: ...

    def total_buckets(self, partition: bytes) -> int: ...

    def compaction_executor(self) -> ThreadPoolExecutor: ...

    def delta_commits_before(self) -> int: ...

    def committed_files(self, partition: bytes, bucket: int) -> list[DataFileMeta]: ...

    def committed_vectors(self, partition: bytes, bucket: int) -> BucketDeletionVectors: ...


__all__ = ["WriterContext", "KeyValueBucketWriter", "AppendBucketWriter"]

log = logging.getLogger(__name__)

_MERGE_ROWS = 256 * 1024  # rows held at once while merging spilled chunks
# Times a bucket reloads its committed files from the latest snapshot between two commits when
# compactions find their inputs gone; past it the bucket stops compacting until the next commit.
_MAX_RESTORES = 3


class KeyValueBucketWriter:
    """One bucket of a primary-key table."""

    def __init__(
        self,
        tw: WriterContext,
        partition: bytes,
        bucket: int,
        committed: list[DataFileMeta],
        vectors: Optional[BucketDeletionVectors] = None,
    ) -> None:
        self.tw = tw
        self.store = tw.store
        self.partition = partition
        self.bucket = bucket
        # deletion-vector mode: the vectors of the bucket's files (see lsm/deletion_vectors.py)
        self.dv: Optional[BucketDeletionVectors] = None
        if self.store.options.deletion_vectors_enabled:
            self.dv = vectors if vectors is not None else BucketDeletionVectors({}, None)
        self.levels = Levels.of(committed, num_levels(self.store))
        self.committed = list(committed)  # the bucket's files in the last snapshot this writer knows
        self.next_seq = max((f.max_sequence_number for f in committed), default=-1) + 1
        self.new_files: list[DataFileMeta] = []
        self.changelog: list[DataFileMeta] = []
        self.compacted = CompactResult()
        self.spills: list[str] = []
        self._spilled_bytes = 0
        self.commits = 0
        self.compactor = BucketCompactor(self.store, partition, bucket, self.levels)
        self._running: Optional[Future[CompactResult]] = None  # the compaction in flight
        self._deferred = False  # a flush asked for a compaction while one was in flight
        self._restores = 0  # reloads of the committed files since the last commit (_inputs_gone)
        self._frozen = False  # no compaction until the owner reloads the bucket after a commit
        # lookup changelog: keys written, by the last sequence number of their flush, not yet in
        # a changelog; the files above level 0 when the last changelog was produced; restored
        # level-0 files (written by an earlier writer: their keys are read back when compacted)
        self._lookup = tw.changelog_producer == ChangelogProducer.LOOKUP and not tw.write_only
        self._pending_keys: list[tuple[int, pa.Table]] = []
        # the last sequence number given out when each of this writer's level-0 files was written:
        # its rows may hold smaller ones (first-row keeps a key's first row, and its number)
        self._level0_upto: dict[str, int] = {}
        self._ready_keys: list[pa.Table] = []
        self._changelog_base = [f for f in committed if f.level > 0]
        self._changelog_base_dv = self.dv.view() if self.dv is not None else None
        self._foreign_level0 = {f.file_name: f for f in committed if f.level == 0} if self._lookup else {}

    # ---- input ------------------------------------------------------------------------------
    def add(self, group: pa.Table, *, spill: bool) -> None:
        from lakelog.connector.lsm.bucket_writer import merge_group, sorted_by_key

        tw = self.tw
        raw, merged = merge_group(group, tw.keys, self.next_seq, tw.merge, tw.arrow_schema)
        self.next_seq = int(raw.column(SEQUENCE_NUMBER).to_numpy().max()) + 1
        if tw.changelog_producer == ChangelogProducer.INPUT:  # the input rows, by key, as Paimon writes them
            raw = sorted_by_key(raw, tw.keys)
            self.changelog += write_changelog(self.store, self.partition, self.bucket, raw)
        if self._lookup:
            keys = merged.select([key_column(k) for k in tw.keys]).rename_columns(tw.keys)
            self._pending_keys.append((self.next_seq - 1, keys))
        if spill and self._spill_fits(merged):
            path = os.path.join(tw.spill_dir(), f"{self.bucket}-{id(self)}-{len(self.spills)}.arrow")
            with storage_errors("spill the write buffer to", path), ipc.new_file(path, merged.schema) as sink:
                sink.write_table(merged, max_chunksize=64 * 1024)
            self.spills.append(path)
            self._spilled_bytes += os.path.getsize(path)
        else:
            self._write_level0(merged)

    def _spill_fits(self, merged: pa.Table) -> bool:
        """Whether spilling ``merged`` keeps this bucket's spills within
        ``write-buffer-spill.max-disk-size``; past it the buffer is flushed to a level-0 file
        instead, as Paimon's spillable buffer does when its disk budget is used up."""
        limit = self.store.options.get(self.store.options.WRITE_BUFFER_SPILL_MAX_DISK_SIZE)
        return limit is None or self._spilled_bytes + merged.nbytes <= int(limit)

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
        if self._lookup:
            self._level0_upto.update((f.file_name, self.next_seq - 1) for f in files)
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
        self._spilled_bytes = 0

    # ---- compaction -------------------------------------------------------------------------
    def _pick(self, *, full: bool = False, level0: bool = False) -> Optional[CompactUnit]:
        if self._frozen:
            return None
        comp = self.compactor
        if level0:
            return comp.pick_level0()
        unit = comp.pick(full=full)
        if unit is None and self._lookup and self.levels.level0:
            # lookup: level 0 is pushed up in the background too, so that changelog follows
            unit = comp.pick_level0()
        return unit

    def _apply(self, res: CompactResult) -> None:
        self.levels.update(res.before, res.after)
        self.compacted.extend(res)
        if self.dv is not None:
            self.dv.update(res.removed, res.dv_marks)
        if self._lookup:
            self._note_level0_compacted(res.before)

    def _compute_args(self, unit: CompactUnit) -> tuple[Any, ...]:
        """What :meth:`BucketCompactor.compute` takes for ``unit``, as of now (deletion-vector
        mode: the vectors and the files above level 0 outside the unit)."""
        drop = self.compactor.drop_deletes(unit)
        if self.dv is None:
            return (unit, drop)
        inside = {f.file_name for f in unit.files}
        outside = [f for f in self.levels.all_files() if f.level > 0 and f.file_name not in inside]
        return (unit, drop, self.dv.view(), outside)

    def _run(self, full: bool = False, level0: bool = False) -> bool:
        """Compact now, on this thread (after the compaction in flight, if any)."""
        self._wait()
        unit = self._pick(full=full, level0=level0)
        if unit is None:
            return False
        try:
            res = self.compactor.compute(*self._compute_args(unit))
        except MissingFileError as e:
            self._inputs_gone(e)
            return False
        self._apply(res)
        return True

    def _inputs_gone(self, error: MissingFileError) -> None:
        """A compaction's input files are gone: another process compacted them away and an
        expiration (or a rollback) removed them, so this writer's view of the bucket is stale. The
        compaction is dropped, and the bucket reloads its committed files from the latest snapshot
        (its rows not yet committed stay on top, at level 0). The lookup changelog producer cannot
        follow such a change mid-commit, and a bucket that keeps losing its inputs gives up after
        :data:`_MAX_RESTORES` reloads: those stop compacting until the owner reloads them after
        the next commit (``stale``). Never a retry of the same inputs: they stay gone."""
        if self._lookup or self._restores >= _MAX_RESTORES:
            log.warning(
                "compaction of bucket %s of %s dropped: %s; the bucket compacts again after the next "
                "commit",
                self.bucket,
                self.store.path,
                error,
            )
            self._frozen = True
            self.tw.stale = True
            return
        log.warning(
            "compaction of bucket %s of %s dropped: %s; reloading the bucket from the latest snapshot",
            self.bucket,
            self.store.path,
            error,
        )
        self._restores += 1
        self._reload_committed()

    def _reload_committed(self) -> None:
        """Rebuild the levels from the bucket's files in the latest snapshot plus this writer's
        uncommitted level-0 files; compaction results not yet committed are dropped (they were
        computed from files that are gone), and the files they wrote deleted."""
        latest = self.tw.committed_files(self.partition, self.bucket)
        if self.dv is not None:
            self.dv = self.tw.committed_vectors(self.partition, self.bucket)
        keep = {f.file_name for f in latest + self.new_files + self.committed}
        done = self.compacted
        for f in done.after + done.intermediate + done.changelog:
            if f.file_name not in keep:
                self.store.delete_data_file(self.partition, self.bucket, f)
        self.compacted = CompactResult()
        self.committed = list(latest)
        self.levels = Levels.of(latest + self.new_files, num_levels(self.store))
        self.compactor = BucketCompactor(self.store, self.partition, self.bucket, self.levels)

    def _start(self) -> bool:
        """Start what the picker asks for in the background; False when it asks for nothing."""
        unit = self._pick()
        if unit is None:
            return False
        args = self._compute_args(unit)
        self._running = self.tw.compaction_executor().submit(self.compactor.compute, *args)
        return True

    def _poll(self) -> None:
        """Apply the compaction in flight if it has finished."""
        if self._running is not None and self._running.done():
            self._wait()

    def _wait(self) -> None:
        """Wait for the compaction in flight and apply it."""
        running, self._running = self._running, None
        if running is None:
            return
        try:
            res = running.result()
        except MissingFileError as e:
            self._inputs_gone(e)
            return
        self._apply(res)

    def _maybe_compact(self) -> None:
        """After a flush: start a compaction when the picker asks (in the background, or now when
        the writer is not asynchronous). While the sorted runs exceed
        ``num-sorted-run.stop-trigger`` the write waits for compactions: a stall."""
        if self.tw.write_only:
            return
        self._poll()
        if self._running is None:
            self._start()
        else:
            self._deferred = True
        stop = self.store.options.num_sorted_run_stop_trigger
        while self.levels.number_of_sorted_runs() > stop:
            if self._running is None and not self._start():
                break
            self._wait()

    def _catch_up(self) -> None:
        """Before a commit that waits for compaction: finish the one in flight, and run the one a
        flush asked for meanwhile."""
        self._wait()
        if self._deferred and not self.tw.write_only:
            self._run()
        self._deferred = False

    def compact(self, *, full: bool = False) -> None:
        self._merge_spills()
        self._wait()
        if full:
            self._run(full=True)
        else:
            while self._run():
                if (
                    self.levels.number_of_sorted_runs()
                    <= self.store.options.num_sorted_run_compaction_trigger
                ):
                    break

    # ---- lookup changelog -------------------------------------------------------------------
    def _note_level0_compacted(self, before: list[DataFileMeta]) -> None:
        """Level-0 files left level 0: their keys are ready for a changelog."""
        gone = [f for f in before if f.level == 0]
        if not gone:
            return
        upto = max(self._level0_upto.pop(f.file_name, f.max_sequence_number) for f in gone)
        keep: list[tuple[int, pa.Table]] = []
        for last_seq, keys in self._pending_keys:
            if last_seq <= upto:
                self._ready_keys.append(keys)
            else:
                keep.append((last_seq, keys))
        self._pending_keys = keep
        for f in gone:
            if self._foreign_level0.pop(f.file_name, None) is not None:
                self._ready_keys.append(self.compactor.keys_of(f))

    def _lookup_changelog(self) -> None:
        """The changelog of the keys whose level-0 files have been compacted up."""
        if not self._ready_keys:
            return
        upper = [f for f in self.levels.all_files() if f.level > 0]
        now = self.dv.view() if self.dv is not None else None
        self.compacted.changelog += self.compactor.lookup_changelog(
            self._changelog_base, upper, self._ready_keys, self._changelog_base_dv, now
        )
        self._changelog_base, self._changelog_base_dv = upper, now
        self._ready_keys = []

    # ---- commit -----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop: a compaction still in flight is discarded (its files deleted)."""
        running, self._running = self._running, None
        if running is None:
            return
        try:
            res = running.result()
        except Exception:  # noqa: BLE001 - nothing of it was applied; orphan cleanup takes the rest
            return
        live = {f.file_name for f in res.before}
        for f in res.after + res.changelog:
            if f.file_name not in live:
                self.store.delete_data_file(self.partition, self.bucket, f)

    def prepare_commit(self, *, wait_compaction: bool = True) -> CommitMessage:
        from lakelog.connector.format.commit_message import CommitMessage

        self._merge_spills()
        opts = self.store.options
        if wait_compaction:
            self._catch_up()
        else:
            self._poll()
        if not self.tw.write_only and self.new_files:
            self.commits += 1
            delta = opts.full_compaction_delta_commits
            if delta and (self.tw.delta_commits_before() + self.commits) % delta == 0:
                if self._run(full=True):
                    self.tw.full_compacted = True
            elif self.dv is not None or (self._lookup and opts.lookup_wait):
                # deletion vectors: level 0 is invisible to readers until compacted, so every
                # commit pushes it up (as Paimon does by default)
                self._run(level0=True)
        if self._lookup:
            self._lookup_changelog()
        for f in self.compacted.intermediate:
            self.store.delete_data_file(self.partition, self.bucket, f)
        msg = CommitMessage(
            partition=self.partition,
            bucket=self.bucket,
            total_buckets=self.tw.total_buckets(self.partition),
            new_files=self.new_files,
            changelog_files=self.changelog,
            compact_before=self.compacted.before,
            compact_after=self.compacted.after,
            compact_changelog_files=self.compacted.changelog,
        )
        if self.dv is not None and (self.dv.changed or msg.compact_before):
            msg.dv_view = [f.file_name for f in self.levels.all_files() if f.level > 0]
        if self.dv is not None and self.dv.changed:
            msg.dv_changed, msg.dv_base = True, self.dv.base
            msg.dv_file = self.dv.write(self.store, self.partition, self.bucket)
            self.dv.base = msg.dv_file.file_name if msg.dv_file is not None else None
            self.dv.changed = False
        self.committed = self.levels.all_files()
        self.new_files, self.changelog, self.compacted = [], [], CompactResult()
        self._restores = 0
        return msg

    def abort(self) -> None:
        self.close()  # a compaction in flight is discarded
        fio = self.store.file_io
        committed = {f.file_name for f in self.committed}
        for f in (
            self.new_files
            + self.changelog
            + self.compacted.after
            + self.compacted.changelog
            + self.compacted.intermediate
        ):
            if f.file_name not in committed:
                self.store.delete_data_file(self.partition, self.bucket, f)
        for p in self.spills:
            fio.delete(p)
        self.new_files, self.changelog, self.compacted, self.spills = [], [], CompactResult(), []
        self._spilled_bytes = 0


class AppendBucketWriter:
    """One bucket of an append table: rows in arrival order, sequence numbers per row."""

    def __init__(
        self, tw: WriterContext, partition: bytes, bucket: int, committed: list[DataFileMeta]
    ) -> None:
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
        from lakelog.connector.format.commit_message import CommitMessage

        msg = CommitMessage(
            self.partition, self.bucket, self.tw.total_buckets(self.partition), new_files=self.new_files
        )
        self.new_files = []
        return msg

    def abort(self) -> None:
        for f in self.new_files:
            self.store.delete_data_file(self.partition, self.bucket, f)
        self.new_files = []


ARRIVAL = "__lakelog_arrival"


def merge_group(
    group: pa.Table, keys: Sequence[str], seq0: int, merge: Any, arrow_schema: pa.Schema
) -> tuple[pa.Table, pa.Table]:
    """(raw input rows, merged rows) of one bucket in the key-value layout, sequence numbers
    continuing at ``seq0`` in arrival order."""
    arrival = group.column(ARRIVAL).to_numpy()
    seq = seq0 + (arrival - arrival.min())
    fields = [pa.field(key_column(k), arrow_schema.field(k).type, nullable=False) for k in keys]
    fields += [pa.field(SEQUENCE_NUMBER, pa.int64(), False), pa.field(VALUE_KIND, pa.int8(), False)]
    cols = [group.column(k) for k in keys] + [pa.array(seq, pa.int64()), group.column(VALUE_KIND)]
    raw = pa.Table.from_arrays(cols, schema=pa.schema(fields))
    for f in arrow_schema:
        raw = raw.append_column(group.schema.field(f.name), group.column(f.name))
    merged = merge_sorted(raw, [key_column(k) for k in keys], merge)
    return raw, merged


def sorted_by_key(raw: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``raw`` (rows of one bucket in arrival order) sorted by key, arrival order kept per key."""
    order = sort_indices(raw, [key_column(k) for k in keys])
    return raw.take(pa.array(order))
