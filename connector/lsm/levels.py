"""The LSM tree of one bucket: levels, sorted runs, and Paimon's universal compaction picker.

Level 0 holds any number of files, each its own sorted run (newest first). Every higher level is
one sorted run. Universal compaction (as Paimon implements it, after RocksDB) looks at the runs
from newest to oldest and picks, in this order:

1. size amplification: when the runs above the oldest one together exceed
   ``compaction.max-size-amplification-percent`` of the oldest run, compact everything;
2. size ratio: gather runs from the newest while the next run is not bigger than the gathered
   size by more than ``compaction.size-ratio`` percent;
3. run count: when there are more than ``num-sorted-run.compaction-trigger`` runs, compact the
   newest runs down to the trigger.

Before these, optional early full compaction (off by default): when
``compaction.optimization-interval`` has passed since the last full compaction, when all runs
together are smaller than ``compaction.total-size-threshold``, or when the runs below the top
level exceed ``compaction.incremental-size-threshold``.

The output level is one below the first run left out (never level 0), or the top level when
every run takes part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from lakelog.connector.format.manifest import DataFileMeta

__all__ = ["SortedRun", "Levels", "CompactUnit", "UniversalCompaction", "EarlyFullCompaction"]


@dataclass
class SortedRun:
    level: int
    files: list[DataFileMeta]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass
class CompactUnit:
    output_level: int
    files: list[DataFileMeta]
    full: bool = False  # every run of the bucket takes part


@dataclass
class Levels:
    """Files of one bucket by level."""

    num_levels: int
    level0: list[DataFileMeta] = field(default_factory=list)
    levels: dict[int, list[DataFileMeta]] = field(default_factory=dict)

    @classmethod
    def of(cls, files: Iterable[DataFileMeta], num_levels: int) -> Levels:
        lv = cls(num_levels)
        lv.add(files)
        return lv

    @property
    def max_level(self) -> int:
        return self.num_levels - 1

    def add(self, files: Iterable[DataFileMeta]) -> None:
        for f in files:
            if f.level == 0:
                self.level0.append(f)
            else:
                if f.level > self.max_level:
                    raise ValueError(
                        f"file {f.file_name} is on level {f.level}, beyond num-levels {self.num_levels}"
                    )
                self.levels.setdefault(f.level, []).append(f)
        self.level0.sort(key=lambda f: (-f.max_sequence_number, f.file_name))

    def remove(self, files: Iterable[DataFileMeta]) -> None:
        gone = {(f.file_name, f.level) for f in files}
        self.level0 = [f for f in self.level0 if (f.file_name, 0) not in gone]
        for lvl in list(self.levels):
            self.levels[lvl] = [f for f in self.levels[lvl] if (f.file_name, lvl) not in gone]
            if not self.levels[lvl]:
                del self.levels[lvl]

    def update(self, before: Sequence[DataFileMeta], after: Sequence[DataFileMeta]) -> None:
        self.remove(before)
        self.add(after)

    def all_files(self) -> list[DataFileMeta]:
        return list(self.level0) + [f for lvl in sorted(self.levels) for f in self.levels[lvl]]

    def sorted_runs(self) -> list[SortedRun]:
        """Newest first: each level-0 file, then each non-empty level."""
        runs = [SortedRun(0, [f]) for f in self.level0]
        runs += [SortedRun(lvl, list(self.levels[lvl])) for lvl in sorted(self.levels)]
        return runs

    def number_of_sorted_runs(self) -> int:
        return len(self.level0) + len(self.levels)

    def non_empty_highest_level(self) -> int:
        if self.levels:
            return max(self.levels)
        return 0 if self.level0 else -1


_now = time.monotonic  # the clock of early full compaction (tests replace it)


class EarlyFullCompaction:
    """Full compactions on a timer or by size, before the universal rules (all off by default)."""

    def __init__(
        self,
        interval_ms: Optional[int] = None,
        total_size_threshold: Optional[int] = None,
        incremental_size_threshold: Optional[int] = None,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        self.interval_ms = interval_ms
        self.total_size_threshold = total_size_threshold
        self.incremental_size_threshold = incremental_size_threshold
        self.clock = clock or (lambda: _now())
        self.last_full = self.clock()  # the timer starts with the writer

    @property
    def enabled(self) -> bool:
        return bool(self.interval_ms or self.total_size_threshold or self.incremental_size_threshold)

    def pick(self, max_level: int, runs: Sequence[SortedRun]) -> Optional[CompactUnit]:
        if not runs or (len(runs) == 1 and runs[0].level == max_level):
            return None  # one run at the top already: nothing a full compaction would improve
        if self.interval_ms and (self.clock() - self.last_full) * 1000.0 >= self.interval_ms:
            return full_unit(max_level, runs)
        if self.total_size_threshold and sum(r.total_size for r in runs) < self.total_size_threshold:
            return full_unit(max_level, runs)
        if self.incremental_size_threshold:
            incremental = sum(r.total_size for r in runs if r.level != max_level)
            if incremental > self.incremental_size_threshold:
                return full_unit(max_level, runs)
        return None

    def full_compaction_picked(self) -> None:
        self.last_full = self.clock()


class UniversalCompaction:
    """Paimon's universal compaction picker (see the module docstring)."""

    def __init__(
        self,
        max_size_amp: int,
        size_ratio: int,
        num_run_trigger: int,
        early: Optional[EarlyFullCompaction] = None,
    ) -> None:
        self.max_size_amp = max_size_amp
        self.size_ratio = size_ratio
        self.num_run_trigger = num_run_trigger
        self.early = early

    def pick(self, num_levels: int, runs: Sequence[SortedRun]) -> Optional[CompactUnit]:
        unit = self._pick(num_levels - 1, runs)
        if unit is not None and unit.full and self.early is not None:
            self.early.full_compaction_picked()
        return unit

    def pick_up_level0(self, num_levels: int, runs: Sequence[SortedRun]) -> Optional[CompactUnit]:
        """What :meth:`pick` picks; else every level-0 run, with the runs after it that are not
        much bigger (size ratio), written one level below the first run left out: level 0 leaves
        without rewriting the big runs above it (Paimon's ``ForceUpLevel0Compaction``)."""
        unit = self.pick(num_levels, runs)
        if unit is not None:
            return unit
        n0 = 0
        while n0 < len(runs) and runs[n0].level == 0:
            n0 += 1
        return self._pick_for_size_ratio(num_levels - 1, runs, n0, force=True) if n0 else None

    def _pick(self, max_level: int, runs: Sequence[SortedRun]) -> Optional[CompactUnit]:
        if self.early is not None and self.early.enabled:
            unit = self.early.pick(max_level, runs)
            if unit is not None:
                return unit
        unit = self._pick_for_size_amp(max_level, runs)
        if unit is not None:
            return unit
        unit = self._pick_for_size_ratio(max_level, runs, 1)
        if unit is not None:
            return unit
        if len(runs) > self.num_run_trigger:
            return self._pick_for_size_ratio(
                max_level, runs, len(runs) - self.num_run_trigger + 1, force=True
            )
        return None

    def _pick_for_size_amp(self, max_level: int, runs: Sequence[SortedRun]) -> Optional[CompactUnit]:
        if len(runs) < self.num_run_trigger:
            return None
        candidate = sum(r.total_size for r in runs[:-1])
        earliest = runs[-1].total_size
        if candidate * 100 > self.max_size_amp * earliest:
            return full_unit(max_level, runs)
        return None

    def _pick_for_size_ratio(
        self, max_level: int, runs: Sequence[SortedRun], count: int, *, force: bool = False
    ) -> Optional[CompactUnit]:
        if not force and len(runs) < self.num_run_trigger:
            return None
        size = sum(r.total_size for r in runs[:count])
        i = count
        while i < len(runs):
            nxt = runs[i]
            if size * (100.0 + self.size_ratio) / 100.0 < nxt.total_size:
                break
            size += nxt.total_size
            count += 1
            i += 1
        if force or count > 1:
            return make_unit(runs, max_level, count)
        return None


def full_unit(max_level: int, runs: Sequence[SortedRun]) -> CompactUnit:
    return CompactUnit(max_level, [f for r in runs for f in r.files], full=True)


def make_unit(runs: Sequence[SortedRun], max_level: int, count: int) -> CompactUnit:
    """The newest ``count`` runs, written one level below the first run left out (never level 0)."""
    count = min(count, len(runs))
    if count == len(runs):
        return full_unit(max_level, runs)
    output = max(0, runs[count].level - 1)
    if output == 0:
        # level 0 is not an output level: take runs until one above level 0 and write into its level
        while count < len(runs):
            nxt = runs[count]
            count += 1
            if nxt.level != 0:
                output = nxt.level
                break
    if count == len(runs):
        return full_unit(max_level, runs)
    return CompactUnit(output, [f for r in runs[:count] for f in r.files])
