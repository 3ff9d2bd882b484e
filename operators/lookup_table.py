"""The current rows of a dimension table, indexed for lookups and refreshed as the table changes.

:class:`LookupTable` (no Flink): the dimension's latest snapshot, projected to the needed columns,
in memory as Arrow, with a vectorised hash index over the lookup key (16 bytes a row, see
:mod:`lakelog.operators.lookup_index`). ``get``/``get_all`` serve single keys, ``lookup``/
``lookup_all``/``join`` whole Arrow batches. It follows the table: every ``refresh_interval`` it
looks for new snapshots and applies them incrementally (see *Refresh*), so it always serves exactly
one snapshot's state. The Flink operators built on it (``lookup_join``, the SQL lookup functions)
are in :mod:`lakelog.operators.lookup`; :class:`LookupSpec` is what they ship to the workers.

Refresh, from the served snapshot ``a`` to the latest ``b``:

* ``delta`` (primary-key tables with the plain deduplicate engine, and append tables): replay the
  level-0 files that the APPEND snapshots in ``(a, b]`` added; per key the row with the highest
  (snapshot, sequence number) wins; +I/+U rows replace the key, -U/-D rows remove it. Cost
  proportional to the change.
* ``buckets`` (any other merge engine, overwrites, compaction inside an APPEND commit): re-read the
  (partition, bucket)s those snapshots touched, as of ``b``, and replace their rows.
* ``full``: re-read snapshot ``b`` when a snapshot in ``(a, b]`` has expired, the schema changed,
  or a file vanished under the read. COMPACT snapshots change nothing and cost nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError, OptionError, SchemaError, SnapshotNotFoundError
from lakelog.connector.format.consumers import record_progress
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND
from lakelog.connector.format.manifest import ManifestEntry
from lakelog.connector.format.options import Duration
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.lsm.kv import DEDUPLICATE
from lakelog.connector.lsm.merge.engine import merge_function_for
from lakelog.connector.lsm.split import Split
from lakelog.connector.lsm.split_read import SplitRead, referenced_columns
from lakelog.connector.table.changes import delta_entries_between, snapshots_between
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.scan import plan_splits
from lakelog.operators.lookup_index import (
    EXACT_KINDS,
    HashIndex,
    RowStore,
    column_hash,
    combine_hashes,
    key_kind,
    py_combine,
    py_value_hash,
)
from lakelog.operators.lookup_partitions import PartitionChoice
from lakelog.operators.lookup_shard import KeyRouter, Shard
from lakelog.operators.lookup_spill import CachePolicy, SpillDir, on_disk
from lakelog.operators.source_plan import table_rows
from lakelog.operators.table_ref import TableLike, adopt_io, table_io, table_store

__all__ = ["LookupTable", "RefreshInfo", "LookupSpec"]

_READ_THREADS = 4
_MAX_CHUNKS = 64
_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True)
class RefreshInfo:
    """What the last refresh did. ``mode``: initial, delta, buckets, full, compact (nothing to apply)."""

    mode: str
    from_snapshot: Optional[int]
    to_snapshot: Optional[int]
    rows_read: int
    seconds: float
    reason: str = ""


@dataclass(eq=False)
class _State:
    """One snapshot's rows and indexes. Never modified once published (refresh builds a new one)."""

    snapshot_id: Optional[int]
    schema_id: int
    rows: RowStore  # internal columns; dead (replaced/deleted) rows stay until compaction
    alive: np.ndarray  # bool per row
    group: np.ndarray  # int32 (partition, bucket) id per row
    key_index: HashIndex
    pk_index: Optional[HashIndex]  # primary-key index when the lookup key is not the primary key
    n_alive: int
    partitions: Optional[frozenset[bytes]] = None  # the served partitions of max_pt() (None: all)
    cache: OrderedDict[Any, Any] = field(default_factory=OrderedDict)


def _parallel(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


def _parallel_iter(fn: Callable[[_T], _R], items: Sequence[_T]) -> Iterator[_R]:
    """``fn`` of each item, in order, computed by threads at most a few items ahead of the consumer
    (so a consumer that writes the results away holds only those few)."""
    if len(items) <= 1:
        yield from (fn(x) for x in items)
        return
    it = iter(items)
    with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(items))) as pool:
        ahead = deque(pool.submit(fn, x) for x in itertools.islice(it, 2 * _READ_THREADS))
        while ahead:
            done = ahead.popleft()
            for x in itertools.islice(it, 1):
                ahead.append(pool.submit(fn, x))
            yield done.result()


def _seconds(v: Union[float, int, str, None], default: float) -> float:
    if v is None:
        return default
    if isinstance(v, str):
        return Duration.parse(v).seconds
    return float(v)


class LookupTable:
    """The current rows of a lakelog table, indexed by a lookup key, refreshed as the table changes.

    ``table``: a table path, :class:`lakelog.Table` or ``TableStore``. ``key_columns``: the lookup
    key (default: the primary key; any other columns make a secondary key, with any number of
    matches). ``columns``: the columns lookups return (default all); only these, the key and the
    primary key are held in memory. ``filter``: rows to keep (pyarrow expression or SQL-like string),
    pushed into the reads. ``refresh_interval``: seconds (or ``"10 s"``) between checks for new
    snapshots, made by lookups themselves (default the table's ``continuous.discovery-interval``; 0:
    before every lookup; ``math.inf``: only on :meth:`refresh`). ``async_refresh``: refresh in a
    background thread instead, lookups never wait. ``consumer_id``: record progress in a consumer
    file so snapshot expiration keeps what the next refresh needs. ``lazy``: load at the first
    lookup, not now.
    ``cache``: where the state lives, Paimon's ``lookup.cache``: ``memory`` (the heap), ``full``
    (memory-mapped local files in ``cache_dir``), ``auto`` (the heap up to ``cache_max_memory``,
    then disk); ``cache_max_disk`` bounds the files; ``cache_rows``: LRU size of the single-key
    result cache (per snapshot). Each defaults to the table's ``lookup.cache*`` option
    (:mod:`lakelog.operators.lookup_spill`).
    ``partitions``: serve only these partitions (Paimon's ``scan.partitions``): ``max_pt()`` (the
    latest partition, followed as new ones appear), ``max_two_pt()``, or ``k=v[,k2=v2][;...]``
    (:mod:`lakelog.operators.lookup_partitions`).
    ``shard``: hold only this :class:`~lakelog.operators.lookup_shard.Shard`'s rows (the key must
    hold the bucket key of a fixed-bucket table); the Flink operators check with :meth:`holds`
    that a probe that misses is this shard's, so a misrouted probe is never answered as a miss.
    """

    def __init__(
        self,
        table: TableLike,
        key_columns: Optional[Sequence[str]] = None,
        columns: Optional[Sequence[str]] = None,
        *,
        filter: Union[str, pc.Expression, None] = None,
        refresh_interval: Union[float, str, None] = None,
        async_refresh: bool = False,
        consumer_id: Optional[str] = None,
        cache_rows: Optional[int] = None,
        lazy: bool = False,
        partitions: Optional[str] = None,
        shard: Optional[Shard] = None,
        cache: Optional[str] = None,
        cache_max_memory: Union[int, str, None] = None,
        cache_max_disk: Union[int, str, None] = None,
        cache_dir: Optional[str] = None,
    ) -> None:
        self._store = table_store(table)
        self.cache = CachePolicy.of(
            self._store.options, mode=cache, max_memory=cache_max_memory, max_disk=cache_max_disk,
            rows=cache_rows, directory=cache_dir,
        )  # fmt: skip
        # the state's files (None: the state is on the heap); auto sets it once the state outgrows it
        self._spill: Optional[SpillDir] = SpillDir(cache_dir) if self.cache.mode == "full" else None
        self.shard = shard
        self.partitions = PartitionChoice.parse(self._store, partitions)
        self._parts: Optional[frozenset[bytes]] = None  # the served partitions of the state being built
        self.router: Optional[KeyRouter] = None
        self._filter_spec = filter
        self._consumer_id = consumer_id
        self._cache_rows = self.cache.rows
        self._lock = threading.RLock()
        self._groups: dict[tuple[bytes, int], int] = {}
        self._setup_columns(key_columns, columns)
        self.refresh_interval = _seconds(
            refresh_interval, float(self._store.options.continuous_discovery_interval.seconds)
        )
        self.last_refresh: Optional[RefreshInfo] = None
        self.refresh_error: Optional[BaseException] = None
        self.refresh_count = 0
        self._last_check = time.monotonic()
        self._state = self._empty_state()
        self._loaded = False
        self._async = async_refresh and math.isfinite(self.refresh_interval)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if not lazy:
            self._load()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            self.refresh()
            if self._async:
                self._thread = threading.Thread(target=self._loop, name="lakelog-lookup-refresh", daemon=True)
                self._thread.start()

    # ---- set-up ---------------------------------------------------------------------------------------
    def _setup_columns(self, key_columns: Optional[Sequence[str]], columns: Optional[Sequence[str]]) -> None:
        store = self._store
        schema = store.schema.arrow_schema()
        names = list(schema.names)
        pk = list(store.schema.primary_keys)
        if key_columns is None:
            if not pk:
                raise OptionError(f"table {store.path} has no primary key: give key_columns for the lookup")
            key_columns = pk
        key = [str(c) for c in ([key_columns] if isinstance(key_columns, str) else key_columns)]
        out = names if columns is None else [str(c) for c in columns]
        unknown = [c for c in [*key, *out] if c not in names]
        if unknown:
            raise SchemaError(f"unknown column(s) {unknown} of table {store.path}; it has {names}")
        if not key or len(set(key)) != len(key):
            raise OptionError(f"key_columns {key} must name distinct columns")
        self._key = key
        if self.shard is not None:
            self.router = KeyRouter.of(store, key, self.shard.buckets)
        self._columns = list(dict.fromkeys(out))
        self._pk = pk
        self._kinds = [key_kind(schema.field(c).type, c) for c in key]
        self._key_types = [schema.field(c).type for c in key]
        self._exact = len(key) == 1 and self._kinds[0] in EXACT_KINDS
        self.unique = bool(pk) and set(pk) <= set(key)
        self._separate_pk = bool(pk) and key != pk
        self._pk_kinds = [key_kind(schema.field(c).type, c) for c in pk]
        self._pk_exact = len(pk) == 1 and self._pk_kinds[0] in EXACT_KINDS
        need = set(key) | set(self._columns) | set(pk)
        self._internal = [c for c in names if c in need]
        self._internal_schema = pa.schema([schema.field(c) for c in self._internal])
        self._filter = parse_filter(self._filter_spec, schema)
        fcols = referenced_columns(self._filter, names)
        self._read_cols = [c for c in names if c in need or c in fcols]
        self._out_schema = pa.schema([schema.field(c) for c in self._columns])
        self._nullable_out = pa.schema([f.with_nullable(True) for f in self._out_schema])
        self._out_idx = [self._internal.index(c) for c in self._columns]
        self._key_idx = [self._internal.index(c) for c in key]
        # columns whose as_py() value is what Flink expects (no tz timestamps, structs, maps)
        self._plain = not any(_needs_conversion(f.type) for f in self._out_schema)

    def _empty_state(self) -> _State:
        return _State(
            snapshot_id=None,
            schema_id=self._store.schema.id,
            rows=RowStore(self._internal_schema, spill=self._spill),
            alive=np.zeros(0, dtype=bool),
            group=np.zeros(0, dtype=np.int32),
            key_index=HashIndex.empty(),
            pk_index=HashIndex.empty() if self._separate_pk else None,
            n_alive=0,
        )

    # ---- description -----------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._store.location

    @property
    def store(self) -> Any:
        """The table's ``TableStore``."""
        return self._store

    @property
    def key_columns(self) -> list[str]:
        return list(self._key)

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows lookups return."""
        return self._out_schema

    @property
    def snapshot_id(self) -> Optional[int]:
        """The snapshot every lookup currently sees (None: the table had no snapshot yet)."""
        return self._state.snapshot_id

    @property
    def num_rows(self) -> int:
        return self._state.n_alive

    def memory_bytes(self) -> int:
        """Heap bytes of the state: Arrow rows (including replaced rows not yet compacted away) and
        indexes, except those in memory-mapped files (:meth:`disk_bytes`)."""
        return _footprint(self._state)[0]

    def disk_bytes(self) -> int:
        """Bytes of the state in memory-mapped local files (``lookup.cache`` full, or auto past
        ``lookup.cache-max-memory-size``); the kernel pages in what probes touch."""
        return _footprint(self._state)[1]

    @property
    def on_disk(self) -> bool:
        """Is the state in local files (True) or on the heap?"""
        return self._spill is not None

    def to_arrow(self) -> pa.Table:
        """Every current row (the lookup columns), in no particular order."""
        st = self._state
        return st.rows.filtered(st.alive, self._columns)

    # ---- refresh ------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Apply the snapshots committed since the served one; True when the served snapshot moved."""
        if not self._loaded:
            self._load()
            return self._state.snapshot_id is not None
        with self._lock:
            self._last_check = time.monotonic()
            st = self._state
            latest = self._store.snapshot_manager.latest_id()
            if latest is None or latest == st.snapshot_id:
                return False
            t0 = time.perf_counter()
            new, mode, rows_read, reason = self._advance(st, latest)
            if self._consumer_id and new.snapshot_id is not None:
                # recorded before the new snapshot is served: once `snapshot_id` moves, so has the consumer
                store = self._store
                record_progress(
                    store.consumer_manager, store.snapshot_manager, self._consumer_id, new.snapshot_id + 1
                )
            self._state = new
            self.refresh_count += 1
            self.last_refresh = RefreshInfo(
                mode, st.snapshot_id, new.snapshot_id, rows_read, time.perf_counter() - t0, reason
            )
            return True

    def _maybe_refresh(self) -> None:
        if not self._loaded:
            self._load()
            return
        if self._thread is not None or not math.isfinite(self.refresh_interval):
            return
        if time.monotonic() - self._last_check >= self.refresh_interval:
            self.refresh()

    def _loop(self) -> None:
        while not self._stop.wait(self.refresh_interval):
            try:
                self.refresh()
                self.refresh_error = None
            except Exception as e:  # keep serving the last good snapshot; retry next interval
                self.refresh_error = e

    def close(self) -> None:
        """Stop the background refresh thread (if any)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def __enter__(self) -> LookupTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _advance(self, st: _State, latest: int) -> tuple[_State, str, int, str]:
        self._parts = st.partitions
        if st.snapshot_id is None or latest < st.snapshot_id:
            if st.snapshot_id is None:
                return self._full(latest, "initial", "")
            return self._full(latest, "full", "the table was rolled back")
        try:
            snaps = snapshots_between(self._store, st.snapshot_id, latest)
        except SnapshotNotFoundError:
            return self._full(latest, "full", "snapshots expired")
        if any(s.schema_id != st.schema_id for s in snaps):
            return self._full(latest, "full", "schema changed")
        if all(s.commit_kind == "COMPACT" for s in snaps):
            return _replace(st, snapshot_id=latest), "compact", 0, ""
        try:
            deltas = delta_entries_between(self._store, st.snapshot_id, latest)
            if self.partitions.dynamic and st.partitions is not None:
                added = {e.partition for es in deltas.values() for e in es if e.kind == 0}
                if any(s.commit_kind == "OVERWRITE" for s in snaps) or self.partitions.outranked(
                    self._store, st.partitions, added
                ):
                    return self._full(latest, "full", f"the partitions of {self.partitions.text} changed")
            why = self._replay_blocker(snaps, deltas)
            if why is None:
                return self._replay(st, snaps[-1], deltas)
            return self._reload_buckets(st, snaps[-1], deltas, why)
        except (FileNotFoundError, SnapshotNotFoundError):  # expired under us (MissingFileError too)
            return self._full(latest, "full", "files expired during the refresh")

    def _replay_blocker(
        self, snaps: Sequence[Snapshot], deltas: Mapping[int, list[ManifestEntry]]
    ) -> Optional[str]:
        """Why the delta files cannot simply be replayed (None: they can)."""
        store = self._store
        if store.is_primary_key_table:
            if merge_function_for(store) is not DEDUPLICATE:
                return "merge engine is not plain deduplicate"
            if not set(store.schema.partition_keys) <= set(self._pk):
                return "cross-partition primary key"
        for s in snaps:
            if s.commit_kind == "COMPACT":
                continue
            if s.commit_kind != "APPEND":
                return f"{s.commit_kind} snapshot {s.id}"
            for e in deltas[s.id]:
                if e.kind != 0 or (store.is_primary_key_table and e.file.level != 0):
                    return f"snapshot {s.id} rewrites files"
        return None

    # -- reading --
    def _group(self, partition: bytes, bucket: int) -> int:
        key = (partition, bucket)
        gid = self._groups.get(key)
        if gid is None:
            gid = self._groups[key] = len(self._groups)
        return gid

    def _takes(self, partition: bytes, bucket: int, total_buckets: int) -> Optional[bool]:
        """Does this table hold the rows of a (partition, bucket): all (True), none (False: not a
        served partition, or another shard's bucket), or those its shard owns (None)?"""
        if self._parts is not None and partition not in self._parts:
            return False
        if self.partitions.matches is not None and not self.partitions.matches(partition):
            return False
        return True if self.shard is None else self.shard.take(bucket, total_buckets)

    def _owned(self, t: pa.Table) -> pa.Table:
        """The rows of ``t`` that this table's shard holds."""
        assert self.router is not None and self.shard is not None
        return t.filter(pa.array(self.router.owned(t, self.shard))) if t.num_rows else t

    def _read_splits(self, splits: Sequence[Split]) -> tuple[pa.Table, np.ndarray, bool]:
        """The rows of ``splits`` this table holds, their group ids, and whether the rows are
        already in the state's files (a state on disk: each split is written away as it is read)."""
        read = SplitRead(self._store, columns=self._internal, filter=self._filter)
        splits = [s for s in splits if self._takes(s.partition, s.bucket, s.total_buckets) is not False]
        self._to_disk_if_large(sum(f.file_size for s in splits for f in s.files))

        def one(s: Split) -> list[pa.Table]:
            tables = read.read_split(s)
            if self._takes(s.partition, s.bucket, s.total_buckets) is None:
                tables = [self._owned(t) for t in tables]
            return [self._conform(t) for t in tables if t.num_rows]

        groups: list[np.ndarray] = []

        def tables() -> Iterator[pa.Table]:
            for s, ts in zip(splits, _parallel_iter(one, splits)):
                gid = self._group(s.partition, s.bucket)  # assigned here, not in the reader threads
                for t in ts:
                    groups.append(np.full(t.num_rows, gid, dtype=np.int32))
                    yield t

        if self._spill is None:
            return self._concat(list(tables())), _cat_int32(groups), False
        batches = self._spill.batches((b for t in tables() for b in t.to_batches()), self._internal_schema)
        return pa.Table.from_batches(batches, schema=self._internal_schema), _cat_int32(groups), True

    def _conform(self, t: pa.Table) -> pa.Table:
        return t if t.schema == self._internal_schema else t.cast(self._internal_schema)

    def _concat(self, tables: Sequence[pa.Table]) -> pa.Table:
        if not tables:
            return self._internal_schema.empty_table()
        return pa.concat_tables([self._conform(t) for t in tables])

    # -- where the state lives (lakelog.operators.lookup_spill) --
    def _to_disk_if_large(self, data_bytes: int) -> None:
        """``auto``: go to disk before a read whose data files alone outgrow the memory budget."""
        if self._spill is None and self.cache.mode == "auto" and data_bytes > self.cache.max_memory:
            self._spill = SpillDir(self.cache.directory)

    def _alloc(self, n: int, dtype: Any) -> np.ndarray:
        return self._spill.empty(n, dtype) if self._spill is not None else np.empty(n, dtype=dtype)

    def _settled(self, st: _State) -> _State:
        """``st`` where the cache policy wants it: moved to disk when ``auto`` finds it outgrew
        the memory budget; on disk, every part written there; checked against the disk budget."""
        if self._spill is None:
            if self.cache.mode != "auto" or _footprint(st)[0] <= self.cache.max_memory:
                return st
            self._spill = SpillDir(self.cache.directory)  # for the rest of this table's life
        sp = self._spill
        moved = _State(
            st.snapshot_id,
            st.schema_id,
            st.rows if st.rows.spill is not None else st.rows.to_disk(sp),
            sp.array(st.alive),
            sp.array(st.group),
            HashIndex(sp.array(st.key_index.h), sp.array(st.key_index.pos)),
            None if st.pk_index is None else HashIndex(sp.array(st.pk_index.h), sp.array(st.pk_index.pos)),
            st.n_alive,
            st.partitions,
        )
        disk = _footprint(moved)[1]
        if self.cache.max_disk is not None and disk > self.cache.max_disk:
            raise OptionError(
                f"lookup on {self.path}: its state takes {disk} bytes of local disk, more than "
                f"lookup.cache-max-disk-size = {self.cache.max_disk}; raise it, or shard the join"
            )
        return moved

    def _full(self, snapshot_id: int, mode: str, reason: str) -> tuple[_State, str, int, str]:
        store = self._store
        for attempt in range(3):
            snap = store.snapshot_manager.snapshot(snapshot_id)
            if snap.schema_id > store.schema.id:  # read with the newest schema (files evolve to it)
                store.refresh_schema()
                self._setup_columns(self._key, self._columns)
            try:
                entries = None
                if self.partitions.dynamic:
                    live = store.live_entries(snap)
                    self._parts = self.partitions.largest(store, (e.partition for e in live))
                    entries = [e for e in live if e.partition in self._parts]
                splits = plan_splits(store, snap, filter=self._filter, entries=entries)
                rows, groups, written = self._read_splits(splits)
                break
            except FileNotFoundError:  # expired while we read: try the newest snapshot again
                latest = store.snapshot_manager.latest_id()
                if attempt == 2 or latest is None:
                    raise
                snapshot_id = latest
        empty = self._empty_state()
        empty.schema_id = snap.schema_id
        empty.partitions = self._parts
        new = self._apply(empty, np.zeros(0, dtype=np.int64), rows, groups, snapshot_id, written)
        return new, mode, rows.num_rows, reason

    def _reload_buckets(
        self, st: _State, snap: Snapshot, deltas: Mapping[int, list[ManifestEntry]], reason: str
    ) -> tuple[_State, str, int, str]:
        store = self._store
        touched = {
            (e.partition, e.bucket)
            for es in deltas.values()
            for e in es
            if self._takes(e.partition, e.bucket, e.total_buckets) is not False
        }
        entries = [e for e in store.live_entries(snap) if (e.partition, e.bucket) in touched]
        splits = plan_splits(store, snap, filter=self._filter, entries=entries)
        rows, groups, written = self._read_splits(splits)
        gids = np.array(sorted(self._group(p, b) for p, b in touched), dtype=np.int32)
        dead = np.flatnonzero(st.alive & np.isin(st.group, gids))
        return self._apply(st, dead, rows, groups, snap.id, written), "buckets", rows.num_rows, reason

    def _replay(
        self, st: _State, snap: Snapshot, deltas: Mapping[int, list[ManifestEntry]]
    ) -> tuple[_State, str, int, str]:
        store = self._store
        pk_table = store.is_primary_key_table
        read = SplitRead(store, columns=self._read_cols)
        # group ids are assigned here, not in the reader threads
        jobs = [
            (sid, e, self._group(e.partition, e.bucket))
            for sid in sorted(deltas)
            for e in deltas[sid]
            if self._takes(e.partition, e.bucket, e.total_buckets) is not False
        ]

        def one(job: tuple[int, ManifestEntry, int]) -> pa.Table:
            sid, e, gid = job
            split = Split(sid, e.partition, e.bucket, e.total_buckets, [e.file])
            t = read.read_file(split, e.file, system=pk_table)
            t = t.select([*self._read_cols, *([SEQUENCE_NUMBER, VALUE_KIND] if pk_table else [])])
            if self._takes(e.partition, e.bucket, e.total_buckets) is None:
                t = self._owned(t)  # a rescaled partition: a key's rows stay in one shard
            t = t.append_column("__snap", pa.array(np.full(t.num_rows, sid, dtype=np.int64)))
            return t.append_column("__group", pa.array(np.full(t.num_rows, gid, dtype=np.int32)))

        parts = [t for t in _parallel(one, jobs) if t.num_rows]
        if not parts:
            return _replace(st, snapshot_id=snap.id), "delta", 0, ""
        data = pa.concat_tables(parts, promote_options="permissive")
        n_read = data.num_rows
        dead = np.zeros(0, dtype=np.int64)
        if pk_table:
            data = data.sort_by([("__snap", "ascending"), (SEQUENCE_NUMBER, "ascending")])
            data = data.append_column("__ord", pa.array(np.arange(data.num_rows, dtype=np.int64)))
            last = data.group_by(self._pk, use_threads=False).aggregate([("__ord", "max")])
            order = np.sort(np.asarray(last.column("__ord_max").to_numpy(), dtype=np.int64))
            data = data.take(pa.array(order))
            index = st.pk_index if self._separate_pk else st.key_index
            pk_cols = [data.column(c) for c in self._pk]
            dead = self._match(st, index, self._pk, self._pk_kinds, pk_cols, self._pk_exact)[1]
            kinds = np.asarray(data.column(VALUE_KIND).to_numpy(), dtype=np.int64)
            keep = (kinds == 0) | (kinds == 2)
        else:
            keep = np.ones(data.num_rows, dtype=bool)
        if self._filter is not None:
            keep &= _filter_mask(data, self._filter)
        data = data.filter(pa.array(keep))
        groups = np.asarray(data.column("__group").to_numpy(), dtype=np.int32)
        rows = self._concat([data.select(self._internal)])
        return self._apply(st, dead, rows, groups, snap.id), "delta", n_read, ""

    def _apply(
        self,
        st: _State,
        dead: np.ndarray,
        rows: pa.Table,
        groups: np.ndarray,
        snapshot_id: int,
        written: bool = False,
    ) -> _State:
        """A new state: ``st`` without the rows at ``dead``, plus ``rows`` (``written``: already in
        the state's files)."""
        alive = st.alive
        key_index, pk_index = st.key_index, st.pk_index
        alloc = self._alloc
        if len(dead):
            alive = np.array(alive)
            alive[dead] = False
            key_index = key_index.keep(alive, alloc)
            pk_index = pk_index.keep(alive, alloc) if pk_index is not None else None
        n_old = st.rows.num_rows
        if rows.num_rows:
            all_rows = st.rows.appended(rows, _MAX_CHUNKS, on_disk=written)
            alive = np.concatenate([alive, np.ones(rows.num_rows, dtype=bool)])
            group = np.concatenate([st.group, groups])
            key_index = _index_more(key_index, rows, self._key, self._kinds, n_old, alloc)
            if pk_index is not None:
                pk_index = _index_more(pk_index, rows, self._pk, self._pk_kinds, n_old, alloc)
        else:
            all_rows, group = st.rows, st.group
        n_alive = int(alive.sum())
        n_dead = len(alive) - n_alive
        if n_dead > 1024 and n_dead > n_alive:  # compact: drop replaced rows
            keep = np.flatnonzero(alive)
            new_pos = np.full(len(alive), -1, dtype=np.int64)
            new_pos[keep] = np.arange(len(keep), dtype=np.int64)
            all_rows = all_rows.compacted(keep)
            alive = np.ones(len(keep), dtype=bool)
            group = group[keep]
            key_index = key_index.remapped(new_pos, alloc)
            pk_index = pk_index.remapped(new_pos, alloc) if pk_index is not None else None
        new = _State(
            snapshot_id, st.schema_id, all_rows, alive, group, key_index, pk_index, n_alive, st.partitions
        )
        return self._settled(new)

    # ---- matching -------------------------------------------------------------------------------------
    def _match(
        self,
        st: _State,
        index: Optional[HashIndex],
        names: Sequence[str],
        kinds: Sequence[str],
        cols: Sequence[Union[pa.Array, pa.ChunkedArray]],
        exact: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, row position) of every current row whose ``names`` equal a probe row."""
        assert index is not None
        n = len(cols[0]) if cols else 0
        if n == 0 or not len(index):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        hashes = []
        valid = np.ones(n, dtype=bool)
        for c, k in zip(cols, kinds):
            h, v = column_hash(c, k)
            hashes.append(h)
            valid &= v
        pi, pos = index.candidates(combine_hashes(hashes), valid)
        if not exact and len(pi):
            ok = np.ones(len(pi), dtype=bool)
            ipi = pa.array(pi)
            for name, c in zip(names, cols):
                eq = pc.equal(c.take(ipi), st.rows.take(pos, [name]).column(0))
                ok &= np.asarray(pc.fill_null(eq, False).to_numpy(zero_copy_only=False), dtype=bool)
            pi, pos = pi[ok], pos[ok]
        return pi, pos

    def _probe_columns(self, keys: Any) -> list[pa.ChunkedArray]:
        """The key columns of a probe batch, cast to the table's key types."""
        k = len(self._key)
        if isinstance(keys, pa.RecordBatch):
            keys = pa.Table.from_batches([keys])
        cols: list[Any]
        if isinstance(keys, pa.Table):
            if all(c in keys.column_names for c in self._key):
                cols = [keys.column(c) for c in self._key]
            elif keys.num_columns == k:
                cols = list(keys.columns)
            else:
                raise InvalidInputError(
                    f"probe batch has columns {keys.column_names}; the key is {self._key}"
                )
        elif isinstance(keys, Mapping):
            missing = [c for c in self._key if c not in keys]
            if missing:
                raise InvalidInputError(f"probe keys lack key column(s) {missing}")
            cols = [keys[c] for c in self._key]
        elif isinstance(keys, (pa.Array, pa.ChunkedArray)) or (k == 1 and not _is_seq_of_arrays(keys)):
            cols = [keys]
        else:
            cols = list(keys)
        if len(cols) != k:
            raise InvalidInputError(f"expected {k} key column(s) {self._key}, got {len(cols)}")
        out = []
        for name, t, c in zip(self._key, self._key_types, cols):
            arr = c if isinstance(c, (pa.Array, pa.ChunkedArray)) else pa.array(c, type=t)
            out.append(conform_probe(arr, t, name))
        lens = {len(c) for c in out}
        if len(lens) > 1:
            raise InvalidInputError(f"key columns have different lengths {sorted(lens)}")
        return out

    def _positions_of(self, st: _State, key: tuple[Any, ...]) -> list[int]:
        """Row positions matching one key given as Python values (the per-record path)."""
        if any(v is None for v in key):
            return []
        hashes: list[int] = []
        probe: Optional[list[Any]] = None  # values as stored (None: the key values themselves)
        for i, (v, kind, t) in enumerate(zip(key, self._kinds, self._key_types)):
            h = py_value_hash(v, kind, t)
            if h is None:
                try:
                    arr = pa.array([v], type=t)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                    if kind in ("int", "uint64") and isinstance(v, int):
                        return []  # out of the column's range: matches nothing
                    raise InvalidInputError(
                        f"lookup key {self._key[i]}={v!r} does not fit type {t}: {e}"
                    ) from e
                hv, valid = column_hash(arr, kind)
                if not valid[0]:
                    return []
                h = int(hv[0])
                if probe is None:
                    probe = list(key)
                probe[i] = arr[0].as_py()
            elif h < 0:
                return []
            hashes.append(h)
        pos = st.key_index.positions(py_combine(hashes))
        if not len(pos):
            return []
        pos = np.sort(pos)
        if self._exact:
            return [int(p) for p in pos]
        want = tuple(key) if probe is None else tuple(probe)
        return [int(p) for p in pos if tuple(st.rows.values_at(int(p), self._key_idx)) == want]

    def _cached(self, key: tuple[Any, ...], flavour: str, make: Callable[[_State, list[int]], _T]) -> _T:
        self._maybe_refresh()
        st = self._state
        ck: Optional[tuple[str, tuple[Any, ...]]] = (flavour, key) if self._cache_rows else None
        if ck is not None:
            try:
                hit = st.cache.get(ck)
            except TypeError:  # an unhashable key value: no caching
                hit, ck = None, None
            if hit is not None:
                with contextlib.suppress(KeyError):  # another thread may have evicted it
                    st.cache.move_to_end(ck)
                return hit  # type: ignore[no-any-return]
        value = make(st, self._positions_of(st, key))
        if ck is not None:
            st.cache[ck] = value
            if len(st.cache) > self._cache_rows:
                with contextlib.suppress(KeyError):
                    st.cache.popitem(last=False)
        return value

    def holds(self, key: Any) -> bool:
        """Could this table hold ``key``'s rows? Always without a shard; with one, only for the keys
        whose routing bucket it owns (a key that can match no row belongs to every shard)."""
        if self.router is None or self.shard is None:
            return True
        bucket = self.router.bucket_of(self._key_tuple(key))
        return bucket < 0 or self.shard.owns(bucket)

    def _key_tuple(self, key: Any) -> tuple[Any, ...]:
        k = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        if len(k) != len(self._key):
            raise InvalidInputError(f"key {key!r} has {len(k)} value(s); the lookup key is {self._key}")
        return k

    # ---- lookups ---------------------------------------------------------------------------------------
    def get_all(self, key: Any) -> list[dict[str, Any]]:
        """Every current row whose key equals ``key`` (a tuple, or a scalar for a one-column key)."""

        def make(st: _State, positions: list[int]) -> tuple[dict[str, Any], ...]:
            idx = self._out_idx
            return tuple(dict(zip(self._columns, st.rows.values_at(p, idx))) for p in positions)

        return [dict(r) for r in self._cached(self._key_tuple(key), "dict", make)]

    def get(self, key: Any) -> Optional[dict[str, Any]]:
        """The current row with this key, or None. For a non-unique key: the first match."""
        rows = self.get_all(key)
        return rows[0] if rows else None

    def get_values(self, key: Any) -> tuple[tuple[Any, ...], ...]:
        """Matching rows as tuples of the lookup columns, converted as the Flink source converts
        (naive UTC timestamps, structs as tuples): the per-record path of the Flink operators."""

        def make(st: _State, positions: list[int]) -> tuple[tuple[Any, ...], ...]:
            if not positions:
                return ()
            if self._plain:
                return tuple(tuple(st.rows.values_at(p, self._out_idx)) for p in positions)
            return tuple(table_rows(st.rows.take(np.array(positions, dtype=np.int64), self._columns)))

        return self._cached(self._key_tuple(key), "values", make)

    def lookup_all(self, keys: Any) -> tuple[np.ndarray, pa.Table]:
        """All matches of a batch of keys: (probe row index of each match, the matched rows).

        ``keys``: an Arrow table/batch (the key columns by name, or exactly the key columns), a dict
        of arrays, a list of arrays, or one array for a one-column key. Null keys match nothing."""
        self._maybe_refresh()
        st = self._state
        cols = self._probe_columns(keys)
        pi, pos = self._match(st, st.key_index, self._key, self._kinds, cols, self._exact)
        return pi, st.rows.take(pos, self._columns)

    def lookup(self, keys: Any) -> pa.Table:
        """One row per probe key: its current row, or nulls when it has none (unique keys only)."""
        return self.lookup_found(keys)[0]

    def lookup_found(self, keys: Any) -> tuple[pa.Table, np.ndarray]:
        """:meth:`lookup`, and a boolean per probe key: was it found?"""
        self._maybe_refresh()
        st = self._state
        cols = self._probe_columns(keys)
        n = len(cols[0])
        pi, pos = self._match(st, st.key_index, self._key, self._kinds, cols, self._exact)
        if len(pi) > 1 and not self.unique and bool((np.diff(pi) == 0).any()):
            raise InvalidInputError(
                f"lookup key {self._key} is not unique in {self.path}: use lookup_all() or join()"
            )
        out = np.full(n, -1, dtype=np.int64)
        out[pi] = pos
        return self._rows_at(st, out), out >= 0

    def holds_all(self, keys: Any) -> np.ndarray:
        """:meth:`holds` for a batch of probe keys (as :meth:`lookup` takes them)."""
        cols = self._probe_columns(keys)
        if self.router is None or self.shard is None:
            return np.ones(len(cols[0]), dtype=bool)
        names = [self._key[i] for i in self.router.positions]
        table = pa.table({name: cols[i] for name, i in zip(names, self.router.positions)})
        return self.router.owned(table, self.shard)

    def contains(self, keys: Any) -> np.ndarray:
        """A boolean per probe key: does it have a current row?"""
        self._maybe_refresh()
        st = self._state
        cols = self._probe_columns(keys)
        found = np.zeros(len(cols[0]), dtype=bool)
        found[self._match(st, st.key_index, self._key, self._kinds, cols, self._exact)[0]] = True
        return found

    def join(
        self,
        left: Union[pa.Table, pa.RecordBatch],
        on: Union[str, Sequence[str], Mapping[str, str]],
        how: str = "inner",
        *,
        suffix: str = "_dim",
    ) -> pa.Table:
        """``left`` joined with the current rows: ``on`` names ``left``'s columns matching the key
        columns in order (or maps them: ``{left column: key column}`` covering the key). ``how``:
        inner or left. Output: ``left``'s columns, then the lookup columns except those joined to a
        ``left`` column of the same name; other name clashes get ``suffix``."""
        if how not in ("inner", "left"):
            raise OptionError(f"how must be 'inner' or 'left', not {how!r}")
        if isinstance(left, pa.RecordBatch):
            left = pa.Table.from_batches([left])
        left_cols = self.probe_names(on)
        missing = [c for c in left_cols if c not in left.column_names]
        if missing:
            raise SchemaError(f"join columns {missing} are not in the probe table {left.column_names}")
        self._maybe_refresh()
        st = self._state
        cols = self._probe_columns([left.column(c) for c in left_cols])
        pi, pos = self._match(st, st.key_index, self._key, self._kinds, cols, self._exact)
        if how == "left":
            matched = np.zeros(left.num_rows, dtype=bool)
            matched[pi] = True
            miss = np.flatnonzero(~matched)
            if len(miss):
                pi = np.concatenate([pi, miss])
                pos = np.concatenate([pos, np.full(len(miss), -1, dtype=np.int64)])
                order = np.argsort(pi, kind="stable")
                pi, pos = pi[order], pos[order]
        out = left.take(pa.array(pi, pa.int64()))
        dim = self._rows_at(st, pos)
        for name, out_name in self.output_names(left.column_names, left_cols, suffix):
            out = out.append_column(pa.field(out_name, dim.schema.field(name).type), dim.column(name))
        return out

    def _rows_at(self, st: _State, pos: np.ndarray) -> pa.Table:
        """The lookup columns of rows ``pos`` (-1: a row of nulls)."""
        return st.rows.take_nullable(pos, self._nullable_out)

    def probe_names(self, on: Union[str, Sequence[str], Mapping[str, str]]) -> list[str]:
        """The probe-side column names that ``on`` matches to the key columns, in key order."""
        if isinstance(on, Mapping):
            by_key = {str(v): str(k) for k, v in on.items()}
            if set(by_key) != set(self._key) or len(on) != len(self._key):
                raise OptionError(f"on={dict(on)} must map one probe column to each key column {self._key}")
            return [by_key[c] for c in self._key]
        names = [on] if isinstance(on, str) else [str(c) for c in on]
        if len(names) != len(self._key):
            raise OptionError(f"on={names} must name one probe column per key column {self._key}")
        return names

    def output_names(
        self, left_names: Sequence[str], probe: Sequence[str], suffix: str = "_dim"
    ) -> list[tuple[str, str]]:
        """(lookup column, output name) of the lookup columns a join appends to ``left_names``."""
        joined_same = {k for k, p in zip(self._key, probe) if k == p}
        taken = set(left_names)
        out = []
        for c in self._columns:
            if c in joined_same and c in taken:
                continue
            name = c
            while name in taken:
                name += suffix
            taken.add(name)
            out.append((c, name))
        return out


# ---- helpers -------------------------------------------------------------------------------------------
def _replace(st: _State, *, snapshot_id: int) -> _State:
    return _State(
        snapshot_id, st.schema_id, st.rows, st.alive, st.group, st.key_index, st.pk_index, st.n_alive,
        st.partitions,
    )


def _cat_int32(parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int32, copy=False) if parts else np.zeros(0, dtype=np.int32)


def _index_more(
    index: HashIndex, rows: pa.Table, names: Sequence[str], kinds: Sequence[str], base: int, alloc: Any
) -> HashIndex:
    hashes = []
    valid = np.ones(rows.num_rows, dtype=bool)
    for c, k in zip(names, kinds):
        h, v = column_hash(rows.column(c), k)
        hashes.append(h)
        valid &= v
    h = combine_hashes(hashes)
    pos = np.flatnonzero(valid).astype(np.int64)
    return index.merged(h[pos], pos + base, alloc)


def _footprint(st: _State) -> tuple[int, int]:
    """(heap bytes, mapped-file bytes) of a state."""
    arrays = [st.alive, st.group, st.key_index.h, st.key_index.pos]
    if st.pk_index is not None:
        arrays += [st.pk_index.h, st.pk_index.pos]
    heap = disk = 0
    for a in arrays:
        if on_disk(a):
            disk += a.nbytes
        else:
            heap += a.nbytes
    if st.rows.spill is not None:
        disk += st.rows.nbytes
    else:
        heap += st.rows.nbytes
    return int(heap), int(disk)


def _needs_conversion(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return t.tz is not None
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _needs_conversion(t.value_type)
    return False


def _filter_mask(t: pa.Table, expr: pc.Expression) -> np.ndarray:
    tagged = t.append_column("__row", pa.array(np.arange(t.num_rows, dtype=np.int64)))
    kept = np.asarray(tagged.filter(expr).column("__row").to_numpy(), dtype=np.int64)
    mask = np.zeros(t.num_rows, dtype=bool)
    mask[kept] = True
    return mask


def _is_seq_of_arrays(x: Any) -> bool:
    return (
        isinstance(x, (list, tuple))
        and bool(x)
        and all(isinstance(c, (pa.Array, pa.ChunkedArray, list, tuple, np.ndarray)) for c in x)
    )


def conform_probe(arr: Union[pa.Array, pa.ChunkedArray], t: pa.DataType, name: str) -> pa.ChunkedArray:
    """``arr`` as type ``t``; integers out of ``t``'s range become null (they match nothing)."""
    if isinstance(arr, pa.Array):
        arr = pa.chunked_array([arr], type=arr.type)
    if arr.type == t:
        return arr
    try:
        return arr.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        if pa.types.is_integer(arr.type) and pa.types.is_integer(t):
            lo, hi = _int_range(t)
            try:
                wide = arr.cast(pa.int64())
                ok = pc.and_(pc.greater_equal(wide, lo), pc.less_equal(wide, hi))
                return pc.if_else(ok, wide, pa.scalar(None, pa.int64())).cast(t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        raise SchemaError(
            f"lookup key {name!r}: cannot compare {arr.type} with the column's type {t}: {e}"
        ) from e


def _int_range(t: pa.DataType) -> tuple[int, int]:
    if pa.types.is_uint64(t):
        return 0, (1 << 63) - 1  # compared as int64: larger probes cannot be cast anyway
    info = np.iinfo(t.to_pandas_dtype())
    return int(info.min), int(info.max)


# ---- what Flink workers open -------------------------------------------------------------------------
@dataclass(frozen=True)
class LookupSpec:
    """What a Flink worker needs to open a :class:`LookupTable` (paths and plain values: picklable)."""

    table_path: str
    key_columns: Optional[tuple[str, ...]] = None
    columns: Optional[tuple[str, ...]] = None
    filter: Any = None
    refresh_interval: Union[float, str, None] = None
    async_refresh: bool = False
    consumer_id: Optional[str] = None
    cache_rows: Optional[int] = None  # None: the table's option (as the three below)
    cache: Optional[str] = None
    cache_max_memory: Union[int, str, None] = None
    cache_max_disk: Union[int, str, None] = None
    io: Optional[FileIO] = None  # the table's object-store file IO (None: local)
    # a probe that misses is tried again this many times, after a refresh, ``retry_delay`` seconds
    # apart (Flink's LOOKUP hint: 'retry-predicate' = 'lookup_miss', 'retry-strategy' = 'fixed_delay')
    retry_attempts: int = 0
    retry_delay: float = 0.0
    # sharded by bucket (lakelog.operators.lookup_shard): the routing bucket count and the number of
    # subtasks the probes are routed to (None, 0: unsharded)
    shard_buckets: Optional[int] = None
    shards: int = 0
    partitions: Optional[str] = None  # Paimon's scan.partitions: max_pt(), max_two_pt(), k=v specs

    @classmethod
    def of(
        cls,
        table: TableLike,
        *,
        key_columns: Union[str, Sequence[str], None] = None,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        refresh_interval: Union[float, str, None] = None,
        async_refresh: bool = False,
        consumer_id: Optional[str] = None,
        cache_rows: Optional[int] = None,
        retry_attempts: int = 0,
        retry_delay: float = 0.0,
        partitions: Optional[str] = None,
        cache: Optional[str] = None,
        cache_max_memory: Union[int, str, None] = None,
        cache_max_disk: Union[int, str, None] = None,
    ) -> LookupSpec:
        """The spec of a lookup on ``table`` (the options are :class:`LookupTable`'s; a Flink job's
        ``filter`` must be a SQL-like string)."""
        if isinstance(filter, pc.Expression):
            raise OptionError("give the lookup filter of a Flink job as a SQL-like string")
        keys = [key_columns] if isinstance(key_columns, str) else key_columns
        return cls(
            table_path=table_store(table).path,
            key_columns=None if keys is None else tuple(keys),
            columns=None if columns is None else tuple(columns),
            filter=filter,
            refresh_interval=refresh_interval,
            async_refresh=async_refresh,
            consumer_id=consumer_id,
            cache_rows=cache_rows,
            cache=cache,
            cache_max_memory=cache_max_memory,
            cache_max_disk=cache_max_disk,
            io=table_io(table),
            retry_attempts=retry_attempts,
            retry_delay=retry_delay,
            partitions=partitions,
        )

    def open_subtask(self, index: int, count: int) -> LookupTable:
        """The lookup table of parallel subtask ``index`` of ``count``: its shard when the spec is
        sharded (OptionError when it runs at another parallelism than its probes are routed to)."""
        if not self.shards:
            return self.open()
        if count != self.shards:
            raise OptionError(
                f"lookup join on {self.table_path}: its probes are routed to {self.shards} subtasks but it "
                f"runs at parallelism {count}; do not change a sharded lookup's parallelism"
            )
        assert self.shard_buckets is not None
        return self.open(shard=Shard(index, count, self.shard_buckets))

    def open(self, *, lazy: bool = False, shard: Optional[Shard] = None) -> LookupTable:
        """The lookup table (``shard``: only that shard's rows)."""
        adopt_io(self.table_path, self.io)
        return LookupTable(
            self.table_path,
            self.key_columns,
            self.columns,
            filter=self.filter,
            refresh_interval=self.refresh_interval,
            async_refresh=self.async_refresh,
            consumer_id=self.consumer_id,
            cache_rows=self.cache_rows,
            lazy=lazy,
            partitions=self.partitions,
            shard=shard,
            cache=self.cache,
            cache_max_memory=self.cache_max_memory,
            cache_max_disk=self.cache_max_disk,
        )
