"""Compaction of one LSM bucket: universal (Paimon's picker), full, and the level-0 push of the
lookup changelog producer.

A compaction unit is merged section by section through the bounded-memory streaming merge and
written through a rolling writer, so memory holds about one chunk per input run plus one output
chunk, whatever the bucket size. Committing the result is the table layer's job.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.format.data_file import file_may_hold_retractions
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, key_column
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.options import ChangelogProducer
from lakelog.connector.format.store import TableStore
from lakelog.connector.lsm.changelog import state_change, write_changelog
from lakelog.connector.lsm.diff import semi_join
from lakelog.connector.lsm.kv import DEDUPLICATE, comparable_value, group_ends, sort_indices
from lakelog.connector.lsm.levels import (
    CompactUnit,
    EarlyFullCompaction,
    Levels,
    UniversalCompaction,
    full_unit,
)
from lakelog.connector.lsm.merge.engine import merge_function_for
from lakelog.connector.lsm.sort_merge import merge_streams
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead, key_decoder, sections

__all__ = ["num_levels", "max_level", "CompactResult", "BucketCompactor"]


def num_levels(store: TableStore) -> int:
    opts = store.options
    return opts.num_levels or (opts.num_sorted_run_compaction_trigger + 1)


def max_level(store: TableStore) -> int:
    return num_levels(store) - 1


@dataclass
class CompactResult:
    """Files a compaction removed (``before``) and wrote (``after``), plus changelog files."""

    before: list[DataFileMeta] = field(default_factory=list)
    after: list[DataFileMeta] = field(default_factory=list)
    changelog: list[DataFileMeta] = field(default_factory=list)
    # written by one compaction and consumed by a later one before any commit: never committed
    intermediate: list[DataFileMeta] = field(default_factory=list)
    # deletion-vector mode: positions of files the compaction left in place whose rows it
    # superseded (data file name -> sorted positions)
    dv_marks: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def removed(self) -> list[str]:
        """Names of the files ``before`` holds that ``after`` does not (a file moved up a level
        keeps its name)."""
        kept = {f.file_name for f in self.after}
        return [f.file_name for f in self.before if f.file_name not in kept]

    def extend(self, other: CompactResult) -> None:
        """Chain ``other`` (which ran after this) into one result for a single commit."""
        produced = {f.file_name for f in self.after}
        chained = {f.file_name for f in other.before if f.file_name in produced}
        committed = {f.file_name for f in self.before}  # an upgraded file keeps its committed name
        self.intermediate += [
            f for f in self.after if f.file_name in chained and f.file_name not in committed
        ]
        self.after = [f for f in self.after if f.file_name not in chained]
        self.before += [f for f in other.before if f.file_name not in chained]
        self.after += other.after
        self.changelog += other.changelog
        gone = set(other.removed)
        marks = {k: v for k, v in self.dv_marks.items() if k not in gone}
        for name, pos in other.dv_marks.items():
            marks[name] = np.union1d(marks[name], pos) if name in marks else pos
        self.dv_marks = marks

    def is_empty(self) -> bool:
        return not (self.before or self.after or self.changelog)


class BucketCompactor:
    """Compacts one bucket's LSM tree (``levels``), keeping ``levels`` up to date."""

    def __init__(self, store: TableStore, partition: bytes, bucket: int, levels: Levels) -> None:
        self.store = store
        self.partition = partition
        self.bucket = bucket
        self.levels = levels
        opts = store.options
        interval = opts.compaction_optimization_interval
        self.picker = UniversalCompaction(
            opts.compaction_max_size_amplification_percent,
            opts.compaction_size_ratio,
            opts.num_sorted_run_compaction_trigger,
            EarlyFullCompaction(
                interval.millis if interval is not None else None,
                opts.compaction_total_size_threshold,
                opts.compaction_incremental_size_threshold,
            ),
        )
        self.merge = merge_function_for(store)
        self.primary_key = store.is_primary_key_table
        # deletion vectors: the keys of files above level 0 (see _file_keys)
        self._key_cache: dict[str, pa.Table | np.ndarray] = {}

    # ---- picking --------------------------------------------------------------------------------
    def pick(self, *, full: bool = False) -> Optional[CompactUnit]:
        runs = self.levels.sorted_runs()
        if not runs:
            return None
        top = self.levels.max_level
        if full:
            if len(runs) == 1 and all(f.level == top and f.delete_row_count == 0 for f in runs[0].files):
                return None  # already one clean run at the top
            return full_unit(top, runs)
        return self.picker.pick(self.levels.num_levels, runs)

    def pick_level0(self) -> Optional[CompactUnit]:
        """Push every level-0 file up. Lookup changelog producer: all level-0 runs plus the first
        run above them, written into that run's level (the top level if none). Deletion-vector
        mode: what universal compaction picks, else the level-0 runs (and the runs after them not
        much bigger) into the level below the first run left out, whose rows they supersede get
        marked instead of rewritten."""
        runs = self.levels.sorted_runs()
        if not self.levels.level0:
            return None
        if self.store.options.deletion_vectors_enabled:
            return self.picker.pick_up_level0(self.levels.num_levels, runs)
        n0 = len(self.levels.level0)
        if n0 < len(runs):
            nxt = runs[n0]
            return CompactUnit(nxt.level, [f for r in runs[: n0 + 1] for f in r.files])
        return full_unit(self.levels.max_level, runs)

    # ---- running --------------------------------------------------------------------------------
    def drop_deletes(self, unit: CompactUnit) -> bool:
        """Whether retractions can go: nothing older than the unit's output level remains below it."""
        out_level = unit.output_level
        return out_level != 0 and out_level >= self.levels.non_empty_highest_level()

    def run(self, unit: CompactUnit) -> CompactResult:
        """Compact ``unit`` now and apply the result to the levels."""
        res = self.compute(unit, self.drop_deletes(unit))
        self.levels.update(res.before, res.after)
        return res

    def compute(
        self,
        unit: CompactUnit,
        drop_deletes: bool,
        vectors: Optional[Mapping[str, np.ndarray]] = None,
        outside: Sequence[DataFileMeta] = (),
        order: Optional[Callable[[pa.Table], np.ndarray]] = None,
    ) -> CompactResult:
        """The result of compacting ``unit``, without touching the levels: safe to run on a
        background thread while the writer adds level-0 files (the unit's files never change).

        Deletion-vector mode (``vectors``: the bucket's vectors when the unit was picked;
        ``outside``: the bucket's files above level 0 that are not in the unit): the unit's files
        are read without their deleted rows, retractions go (the rows they retract are marked
        instead), and the older live rows, in ``outside``, of every key the unit's level-0 files
        hold are marked deleted in ``dv_marks`` (merged into the output first, unless the engine
        is a plain deduplicate, where the newer row wins anyway)."""
        if (vectors is not None or order is not None) and not self.primary_key:
            # an append table's DELETEs: the rewritten files leave the deleted rows out; a sort
            # compaction (``order``) rewrites the rows in that order
            after = self._rewrite(list(unit.files), unit.output_level, False, vectors=vectors, order=order)
            return CompactResult(list(unit.files), after)
        if vectors is not None:
            return self._compute_merge_on_write(unit, vectors, outside)
        out_level = unit.output_level
        produce_full_changelog = (
            self.primary_key
            and unit.full
            and self.store.options.changelog_producer == ChangelogProducer.FULL_COMPACTION
        )
        changelog: list[DataFileMeta] = []
        if produce_full_changelog:
            changelog = self._full_compaction_changelog(unit)
        if len(unit.files) == 1 and not produce_full_changelog:
            f = unit.files[0]
            if f.level != out_level and (not drop_deletes or f.delete_row_count == 0):
                return CompactResult([f], [f.upgrade(out_level)], changelog)  # metadata only
        after = self._rewrite(unit.files, out_level, drop_deletes)
        return CompactResult(list(unit.files), after, changelog)

    # ---- deletion vectors (merge-on-write) ---------------------------------------------------
    def _compute_merge_on_write(
        self, unit: CompactUnit, vectors: Mapping[str, np.ndarray], outside: Sequence[DataFileMeta]
    ) -> CompactResult:
        level0 = [f for f in unit.files if f.level == 0]
        if not level0 and len(unit.files) == 1 and unit.files[0].level != unit.output_level:
            f = unit.files[0]  # a move up: metadata only, and its deletion vector keeps its name
            return CompactResult([f], [f.upgrade(unit.output_level)])
        marks: dict[str, np.ndarray] = {}
        older: Optional[pa.Table] = None
        wanted = level0 and (outside or len(unit.files) == 1)  # to mark older rows, or to move up
        keys = pa.concat_tables([self.keys_of(f) for f in level0]) if wanted else None
        if keys is not None and self._moves_up_as_is(unit, keys, vectors):
            # one level-0 file of distinct keys and no retraction, of a deduplicate table: its
            # rows all stay, so it moves up as it is (as Paimon's lookup compaction upgrades it)
            # and only the older rows of its keys are marked
            if outside:
                marks, _ = self._older_rows(keys, vectors, outside, rows=False)
            f = unit.files[0]
            return CompactResult([f], [f.upgrade(unit.output_level)], dv_marks=marks)
        if keys is not None and outside:
            keys = keys.group_by(self.store.key_names).aggregate([])
            marks, older = self._older_rows(keys, vectors, outside, rows=self.merge is not DEDUPLICATE)
        after = self._rewrite(unit.files, unit.output_level, True, vectors=vectors, older=older)
        live = {f.file_name for f in list(outside) + after}
        for name in [n for n in self._key_cache if n not in live]:  # compacted away: never looked up again
            del self._key_cache[name]
        return CompactResult(list(unit.files), after, dv_marks=marks)

    def _moves_up_as_is(self, unit: CompactUnit, keys: pa.Table, vectors: Mapping[str, np.ndarray]) -> bool:
        """Whether ``unit`` is a single level-0 file that a rewrite would copy row for row: a
        deduplicate table, no deletion vector on the file, no retraction in it (its record says
        none and its footer agrees: pypaimon records 0 whatever it wrote), each key once
        (``keys``: its keys in file order, which is key order)."""
        if len(unit.files) != 1 or unit.output_level == 0 or self.merge is not DEDUPLICATE:
            return False
        f = unit.files[0]
        if f.level != 0 or f.delete_row_count != 0 or len(vectors.get(f.file_name, ())):
            return False
        if keys.num_rows > 1 and not group_ends(keys, keys.column_names)[:-1].all():
            return False  # a key twice
        path = self.store.data_file_path(self.partition, self.bucket, f.file_name, f.external_path)
        return not file_may_hold_retractions(path, f)

    def _older_rows(
        self, keys: pa.Table, vectors: Mapping[str, np.ndarray], files: Sequence[DataFileMeta], *, rows: bool
    ) -> tuple[dict[str, np.ndarray], Optional[pa.Table]]:
        """(positions of the live rows of ``files`` holding one of ``keys``, by file; with ``rows``
        those rows too, in the key-value layout and sorted by key)."""
        store = self.store
        names = store.key_names
        kcols = [key_column(k) for k in names]
        lo, hi = _key_range(keys, names)
        decode = key_decoder(store.key_types)
        read = SplitRead(store)
        marks: dict[str, np.ndarray] = {}
        found: list[pa.Table] = []
        wanted = keys.rename_columns(kcols)
        probe = _int_key(wanted, kcols)
        for f in files:
            if decode(f.max_key) < lo or decode(f.min_key) > hi:
                continue
            held = self._file_keys(f)
            if probe is not None and isinstance(held, np.ndarray):
                # one integer key: a file above level 0 holds each key once, sorted; binary search
                at = np.minimum(np.searchsorted(held, probe), len(held) - 1)
                pos = np.unique(at[held[at] == probe]).astype(np.uint64)
            else:
                hit = semi_join(held, wanted, kcols)
                pos = hit.column(_POSITION).to_numpy().astype(np.uint64)
            if not len(pos):
                continue
            dead = vectors.get(f.file_name)
            if dead is not None and len(dead):
                pos = pos[~np.isin(pos, dead)]
            if not len(pos):
                continue
            marks[f.file_name] = np.sort(pos)
            if rows:
                whole = read.read_file(self._split([f]), f, system=True)
                found.append(whole.take(pa.array(marks[f.file_name].astype(np.int64))))
        if not rows or not found:
            return marks, None
        older = pa.concat_tables(found)
        return marks, older.take(pa.array(sort_indices(older, kcols)))

    def _file_keys(self, f: DataFileMeta) -> pa.Table | np.ndarray:
        """The keys of a data file, by row position: one integer key as a numpy array, else the key
        columns (``_KEY_*``) with a position column. Kept (files never change) for the compactor's
        life, and in the process's :data:`FILE_KEYS` for the writers of later commits."""
        got = self._key_cache.get(f.file_name)
        path = self.store.data_file_path(self.partition, self.bucket, f.file_name, f.external_path)
        if got is None:
            got = FILE_KEYS.get(path)
        if got is None:
            names = self.store.key_names
            t = SplitRead(self.store, columns=names).read_file(self._split([f]), f, system=True)
            keys = t.select([key_column(k) for k in names])
            one = _int_key(keys, keys.column_names)
            got = one if one is not None else keys.append_column(
                _POSITION, pa.array(np.arange(keys.num_rows, dtype=np.int64))
            )
            FILE_KEYS.put(path, got)
        self._key_cache[f.file_name] = got
        return got

    # ---- lookup changelog -------------------------------------------------------------------
    def keys_of(self, f: DataFileMeta) -> pa.Table:
        """Every key a data file holds (deleted ones too), as table columns."""
        names = self.store.key_names
        t = SplitRead(self.store, columns=names).read_file(self._split([f]), f, system=True)
        return t.select([key_column(k) for k in names]).rename_columns(names)

    def lookup_changelog(
        self,
        before_upper: list[DataFileMeta],
        after_upper: list[DataFileMeta],
        keys: list[pa.Table],
        before_dv: Optional[Mapping[str, np.ndarray]] = None,
        after_dv: Optional[Mapping[str, np.ndarray]] = None,
    ) -> list[DataFileMeta]:
        """Changelog files of the lookup producer: for ``keys`` (those of level-0 files that were
        compacted up), the change from the bucket's files above level 0 before to after. Produced
        whenever level-0 data moves up, it keeps the changelog equal to the state above level 0."""
        if not keys:
            return []
        names = self.store.key_names
        distinct = pa.concat_tables(keys).group_by(names).aggregate([])
        seq = max((f.max_sequence_number for f in after_upper), default=0)
        kv = state_change(
            self.store, self.partition, self.bucket, before_upper, after_upper, distinct, seq,
            before_dv=before_dv, after_dv=after_dv,
        )
        return write_changelog(self.store, self.partition, self.bucket, kv)

    def _split(self, files: list[DataFileMeta]) -> Split:
        return Split(0, self.partition, self.bucket, self.store.options.bucket, files)

    def _rewrite(
        self,
        files: list[DataFileMeta],
        level: int,
        drop_deletes: bool,
        *,
        vectors: Optional[Mapping[str, np.ndarray]] = None,
        older: Optional[pa.Table] = None,
        order: Optional[Callable[[pa.Table], np.ndarray]] = None,
    ) -> list[DataFileMeta]:
        """Merge ``files`` into sorted files at ``level``; with ``vectors`` without the rows they
        delete, and ``older`` (rows of other files, key-sorted) merged in as the oldest run. An
        append bucket's rows are copied in sequence order, or all read and sorted by ``order``."""
        store = self.store
        read = SplitRead(store)
        split = self._split(files)
        writer = store.file_writer(self.partition, self.bucket).rolling(level=level, file_source=1)
        dead = vectors or {}
        # deletion vectors with one integer key: the keys written, for the lookups of later commits
        written: Optional[list[np.ndarray]] = None
        try:
            if self.primary_key:
                keys = [key_column(k) for k in store.key_names]
                cols = keys + [SEQUENCE_NUMBER, VALUE_KIND] + read.read_columns
                key_types = store.key_types
                arrow = store.schema.arrow_schema()
                if vectors is not None and len(keys) == 1 and pa.types.is_integer(
                    arrow.field(store.key_names[0]).type
                ):
                    written = []
                # rows of other files join the merge: one section then (they may fall in any)
                groups = sections(files, key_decoder(key_types)) if older is None else [list(files)]
                for sec in groups:
                    streams = [
                        read.iter_file(split, f, system=True, deleted=dead.get(f.file_name)) for f in sec
                    ]
                    if older is not None:
                        streams.append(iter([older.select(cols)]))
                    for merged in merge_streams(streams, keys, merge=self.merge, drop_deletes=drop_deletes):
                        writer.write(merged.select(cols))
                        if written is not None:
                            written.append(merged.column(keys[0]).to_numpy())
            else:
                chunks = (
                    chunk
                    for f in sorted(files, key=lambda f: f.min_sequence_number)
                    for chunk in read.iter_file(split, f, system=False, deleted=dead.get(f.file_name))
                )
                if order is None:
                    for chunk in chunks:
                        writer.write(chunk)
                else:
                    parts = list(chunks)
                    if parts:
                        rows = pa.concat_tables(parts)
                        writer.write(rows.take(pa.array(order(rows))))
            out = writer.close()
        except BaseException:
            writer.abort()
            raise
        if not self.primary_key:
            start = min(f.min_sequence_number for f in files)
            for m in out:
                m.min_sequence_number, m.max_sequence_number = start, start + m.row_count - 1
                start += m.row_count
        if written is not None:  # the files hold the rows in the order written
            allkeys = np.concatenate(written) if written else np.empty(0, dtype=np.int64)
            bounds = np.cumsum([0] + [m.row_count for m in out])
            for m, a, b in zip(out, bounds[:-1], bounds[1:]):
                self._key_cache[m.file_name] = allkeys[a:b]
                FILE_KEYS.put(store.data_file_path(self.partition, self.bucket, m.file_name), allkeys[a:b])
        return out

    def _full_compaction_changelog(self, unit: CompactUnit) -> list[DataFileMeta]:
        """Diff of the old top level against the full compaction's result, for rewritten keys."""
        top = self.levels.max_level
        old_top = [f for f in unit.files if f.level == top]
        rewritten = [f for f in unit.files if f.level != top]
        if not rewritten:
            return []
        store = self.store
        read = SplitRead(store, columns=store.key_names)
        # every key the rewritten files hold counts, deleted ones too: read keys without merging
        key_parts = [
            read.read_file(self._split([f]), f, system=True)
            .select([key_column(k) for k in store.key_names])
            .rename_columns(store.key_names)
            for f in rewritten
        ]
        all_keys = pa.concat_tables(key_parts)
        seq = max(f.max_sequence_number for f in unit.files)
        kv = state_change(
            store,
            self.partition,
            self.bucket,
            old_top,
            unit.files,
            all_keys.group_by(store.key_names).aggregate([]),
            seq,
        )
        return write_changelog(store, self.partition, self.bucket, kv)


_POSITION = "__lakelog_position"


class _FileKeys:
    """The keys of data files by path, least recently used first out past ``max_bytes``: the
    deletion-vector lookups of one writer's commits, and of the writers of later one-shot
    writes in this process (data files never change, so an entry never goes stale)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, pa.Table | np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: str) -> Optional[pa.Table | np.ndarray]:
        with self._lock:
            got = self._entries.get(path)
            if got is not None:
                self._entries.move_to_end(path)
            return got

    def put(self, path: str, keys: pa.Table | np.ndarray) -> None:
        size = int(keys.nbytes)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(path, None)
            if old is not None:
                self._bytes -= int(old.nbytes)
            self._entries[path] = keys
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, gone = self._entries.popitem(last=False)
                self._bytes -= int(gone.nbytes)


FILE_KEYS = _FileKeys(128 << 20)


def _key_range(keys: pa.Table, names: Sequence[str]) -> tuple[Any, Any]:
    """The smallest and largest of ``keys`` (columns ``names``), as :func:`key_decoder` gives a
    file's min and max key, for comparing with them."""
    order = sort_indices(keys, list(names))
    first, last = keys.slice(int(order[0]), 1).to_pylist()[0], keys.slice(int(order[-1]), 1).to_pylist()[0]
    return (
        tuple(comparable_value(first[n]) for n in names),
        tuple(comparable_value(last[n]) for n in names),
    )


def _int_key(keys: pa.Table, names: Sequence[str]) -> Optional[np.ndarray]:
    """The values of a one-column integer key as numpy (no nulls: keys never are); None for other
    keys."""
    if len(names) != 1 or not pa.types.is_integer(keys.schema.field(names[0]).type):
        return None
    return keys.column(names[0]).to_numpy()
