"""``t.subscribe()``: a table's changes as they happen, in plain Python (no Flink).

A subscription yields change batches: Arrow tables whose first column ``rowkind`` holds ``+I``,
``-U``, ``+U`` or ``-D``. It starts as ``scan.mode`` says (Paimon's names):

* ``latest-full`` (default): every row of the latest snapshot as ``+I``, then its changes;
* ``latest``: only changes from now on;
* ``from-snapshot`` (``snapshot_id``): the changes of that snapshot and after;
* ``from-snapshot-full`` (``snapshot_id``): that snapshot's rows, then the changes after it;
* ``from-timestamp`` (``timestamp``): the changes committed (written, for an eventual log) at or
  after that time;
* with ``consumer_id``, a subscription that existed before resumes after the last snapshot it
  consumed whole, and its progress protects the snapshots it still needs from expiration.

Tables with a Kafka log (``log.system`` = ``kafka``) read the changes from the log: within about a
second of the commit for a transactional log, as soon as they are written for an eventual one.
The hand-over from the snapshot's files to the log is exact (see :mod:`lakelog.connector.log`):
the log is read from the snapshot's ``logOffsets``. When the log no longer holds those offsets
(its retention is shorter than the snapshots'), the changes up to the first snapshot whose offsets
it still holds are read from the files; when the files do not cover them either, the subscription
fails naming the table, the missing offsets and both retention settings. Other tables follow new
snapshots and read their changes from the files (what the Flink source emits).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LogSystemError, OptionError, SnapshotNotFoundError
from lakelog.connector.format.consumers import record_progress
from lakelog.connector.format.key_value import RowKind
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.log.reader import ROWKIND, CommitId, LogTail
from lakelog.connector.lsm.split_read import SplitRead
from lakelog.connector.table import arguments as arg
from lakelog.connector.table.changes import published_entries, snapshot_log_changes
from lakelog.connector.table.expressions import parse_filter
from lakelog.connector.table.log import log_config
from lakelog.connector.table.scan import plan_splits

if TYPE_CHECKING:  # pragma: no cover
    from lakelog.connector.table.table import Table

__all__ = ["Subscription", "SCAN_MODES"]

log = logging.getLogger(__name__)

SCAN_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp")


class Subscription:
    """The changes of one table (see the module docstring). Iterate it, or :meth:`poll`; close it
    (or use it as a context manager) to release the Kafka consumer."""

    def __init__(
        self,
        table: Table,
        *,
        scan_mode: str = "latest-full",
        snapshot_id: Optional[int] = None,
        timestamp: Any = None,
        consumer_id: Optional[str] = None,
        columns: Optional[Sequence[str]] = None,
        filter: Any = None,
        poll_interval: float = 0.2,
        restore: Optional[dict[str, Any]] = None,
    ) -> None:
        scan_mode = arg.text("scan_mode", scan_mode)
        snapshot_id = arg.optional_integer("snapshot_id", snapshot_id)
        if timestamp is not None:
            timestamp = arg.point_in_time("timestamp", timestamp)
        consumer_id = arg.optional_text("consumer_id", consumer_id)
        poll_interval = arg.seconds("poll_interval", poll_interval)
        if scan_mode not in SCAN_MODES:
            raise OptionError(f"scan.mode {scan_mode!r} of a subscription: use one of {list(SCAN_MODES)}")
        if scan_mode in ("from-snapshot", "from-snapshot-full") and snapshot_id is None:
            raise OptionError(f"scan.mode {scan_mode!r} needs snapshot_id")
        if scan_mode == "from-timestamp" and timestamp is None:
            raise OptionError("scan.mode 'from-timestamp' needs timestamp")
        self.table = table
        self._store = table.store
        self.schema = self._store.schema.arrow_schema()
        self.columns = arg.names("columns", columns) if columns is not None else list(self.schema.names)
        self.filter = parse_filter(filter, self.schema)
        self.poll_interval = poll_interval
        self.consumer_id = consumer_id
        # streaming-read-mode = file: follow the files even when the table has a log
        self._config = log_config(self._store) if self._store.options.streaming_read_mode != "file" else None
        self._read_schema = self._store.schema
        self._schema_of = self._store.schema_manager.schema
        self._pending: list[pa.Table] = []  # change batches ready before the live part starts
        self._tail: Optional[LogTail] = None
        self._next_snapshot: Optional[int] = None  # the file follower's next snapshot
        self._consumed: Optional[int] = None  # the last snapshot consumed whole (consumer progress)
        self._closed = False
        if restore is not None:
            self._restore(restore)
            return
        resume = table.store.consumer_manager.get(consumer_id) if consumer_id is not None else None
        if resume is not None:
            self._start_after(resume - 1)
        else:
            self._start(scan_mode, snapshot_id, timestamp)
        if not self._pending:
            self._save_progress()  # nothing queued at the start: the consumer is where it starts

    # ---- state --------------------------------------------------------------------------------------
    def position(self) -> dict[str, Any]:
        """Where this subscription is, as JSON-able values (for a Flink operator's state). Valid
        once the changes queued at its start have been polled; ``restore=`` continues from it."""
        if self._pending:
            raise RuntimeError("poll the subscription's first changes before taking its position")
        if self._tail is not None:
            skip = self._tail.skip
            return {
                "log": {str(p): o for p, o in self._tail.positions.items()},
                "skip": None if skip is None else [skip.user, skip.identifier, skip.kind],
                "consumed": self._consumed,
            }
        return {"next_snapshot": self._next_snapshot, "consumed": self._consumed}

    def _restore(self, state: dict[str, Any]) -> None:
        self._consumed = state.get("consumed")
        if "log" in state:
            if self._config is None:
                raise OptionError(
                    f"cannot restore a log position of {self.table.identifier}: it has no log now"
                )
            skip = state.get("skip")
            start = {int(p): int(o) for p, o in state["log"].items()}
            commit = CommitId(str(skip[0]), int(skip[1]), str(skip[2])) if skip else None
            self._tail = LogTail(
                self._config, self._read_schema, start, skip=commit, schema_of=self._schema_of
            )
        else:
            self._next_snapshot = int(state["next_snapshot"])

    # ---- starting ---------------------------------------------------------------------------------
    def _start(self, mode: str, snapshot_id: Optional[int], timestamp: Any) -> None:
        sm = self._store.snapshot_manager
        if mode == "latest-full":
            # the latest snapshot can expire while it is read: read the new latest then
            snap, self._pending = self._store.on_latest(lambda s: self._full(s) if s is not None else [])
            self._start_after(snap.id if snap is not None else 0)
        elif mode == "from-snapshot-full":
            assert snapshot_id is not None
            snap = sm.snapshot(snapshot_id)
            self._pending = self._full(snap)
            self._start_after(snap.id)
        elif mode == "from-snapshot":
            assert snapshot_id is not None
            self._start_after(snapshot_id - 1)
        elif mode == "latest":
            latest = sm.latest_id() or 0
            if self._config is None:
                self._next_snapshot = latest + 1
            else:
                self._consumed = latest
                self._tail = LogTail(
                    self._config,
                    self._read_schema,
                    self._config.list_offsets("latest"),
                    schema_of=self._schema_of,
                )
        else:  # from-timestamp
            millis = arg.point_in_time("timestamp", timestamp)
            before = sm.earlier_or_equal_time_millis(millis)
            if self._config is None:
                self._next_snapshot = (before.id if before is not None else 0) + 1
            else:
                self._consumed = before.id if before is not None else 0
                self._tail = LogTail(
                    self._config,
                    self._read_schema,
                    self._config.offsets_for_time(millis),
                    schema_of=self._schema_of,
                )

    def _full(self, snap: Snapshot) -> list[pa.Table]:
        """Every row of ``snap`` that its change stream has published (tables whose changelog
        comes from compaction: see :func:`~lakelog.connector.table.changes.published_entries`) as
        ``+I`` change batches."""
        store = self._store
        splits = plan_splits(store, snap, filter=self.filter, entries=published_entries(store, snap))
        out = []
        for batch in SplitRead(store, filter=self.filter).to_reader(splits):
            t = pa.Table.from_batches([batch])
            if t.num_rows:
                out.append(_with_kinds(t, np.zeros(t.num_rows, dtype=np.int8)))
        return out

    def _start_after(self, snapshot_id: int) -> None:
        """Deliver every change after snapshot ``snapshot_id`` (0: from the table's beginning)."""
        self._consumed = snapshot_id
        if self._config is None:
            self._next_snapshot = snapshot_id + 1
            return
        start, skip, after = self._log_start(snapshot_id)
        self._consumed = after
        self._tail = LogTail(self._config, self._read_schema, start, skip=skip, schema_of=self._schema_of)

    def _log_start(self, snapshot_id: int) -> tuple[dict[int, int], Optional[CommitId], int]:
        """Where the log read starts after ``snapshot_id``: its ``logOffsets`` and its own commit to
        skip; when the log lost records after them, the changes up to the first snapshot whose
        offsets it still holds are queued from the files first (and that snapshot is returned)."""
        assert self._config is not None
        sm = self._store.snapshot_manager
        earliest = self._config.list_offsets("earliest")
        try:
            snap = sm.snapshot(snapshot_id) if snapshot_id > 0 else None
            offsets = dict(snap.log_offsets or {}) if snap is not None else {}
            lost = {p: (offsets.get(p, 0), e) for p, e in earliest.items() if offsets.get(p, 0) < e}
        except SnapshotNotFoundError:
            # expired (a consumer protects the snapshots it reads next, not the one before them):
            # where its changes end in the log is unknown, so the next ones come from the files
            lost = {p: (0, e) for p, e in earliest.items()}
        else:
            if not lost:
                return offsets, _commit_id(snap), snapshot_id
        # the log's retention is shorter than the snapshots': bridge the gap with the files
        latest = sm.latest_id() or 0
        target = snapshot_id
        for sid in range(snapshot_id + 1, latest + 1):
            target = sid
            try:
                held = sm.snapshot(sid).log_offsets or {}
            except SnapshotNotFoundError:
                self._fail_gap(snapshot_id, lost)
            if all(held.get(p, 0) >= e for p, e in earliest.items()):
                break
        for sid in range(snapshot_id + 1, target + 1):
            try:
                changes = snapshot_log_changes(self._store, sm.snapshot(sid))
            except SnapshotNotFoundError:
                changes = None
            if changes is None:
                self._fail_gap(snapshot_id, lost)
            for ch in changes:
                self._pending.append(_with_kinds(ch.rows, ch.kinds))
        end = sm.snapshot(target) if target > 0 else None
        start = dict(end.log_offsets or {}) if end is not None else {}
        start = {p: max(start.get(p, 0), e) for p, e in earliest.items()}
        log.info(
            "log of %s lost offsets %s; read snapshots %s-%s from files",
            self.table,
            lost,
            snapshot_id + 1,
            target,
        )
        return start, _commit_id(end), target

    def _fail_gap(self, snapshot_id: int, lost: dict[int, tuple[int, int]]) -> NoReturn:
        opts = self._store.options
        held = sorted((p, a, b) for p, (a, b) in lost.items() if b > a)
        ranges = ", ".join(f"partition {p}: offsets {a}..{b - 1}" for p, a, b in held)
        ranges = ranges or "the records of the snapshots after it"
        retention = opts.log_retention
        raise LogSystemError(
            f"cannot read the changes of {self.table.identifier} after snapshot {snapshot_id}: the log "
            f"({self._config.describe() if self._config else '-'}) no longer holds {ranges}, and the "
            f"snapshots that hold them have expired. 'log.retention' is "
            f"{retention if retention is not None else 'the topic default'}, 'snapshot.time-retained' is "
            f"{opts.snapshot_time_retained}, 'snapshot.num-retained.min' is "
            f"{opts.snapshot_num_retained_min}: "
            "keep snapshots at least as long as the log, or read with a consumer-id"
        )

    # ---- reading ----------------------------------------------------------------------------------
    def poll(self, timeout: Optional[float] = None) -> Optional[pa.Table]:
        """The next change batch, or None when none arrived within ``timeout`` seconds (default:
        the poll interval)."""
        if self._closed:
            raise RuntimeError("this subscription is closed")
        if self._pending:
            batch = self._pending.pop(0)
            if not self._pending:
                self._save_progress()  # the snapshot read at the start is delivered whole
            return self._finish(batch)
        wait = self.poll_interval if timeout is None else timeout
        if self._tail is not None:
            batch = self._tail.poll(wait)
            if batch is None:
                return None
            self._progress()
            return self._finish(batch.rows) if batch.num_rows else None
        return self._follow_files(wait)

    def _follow_files(self, wait: float) -> Optional[pa.Table]:
        assert self._next_snapshot is not None
        sm = self._store.snapshot_manager
        latest = sm.latest_id() or 0
        if latest < self._next_snapshot:
            time.sleep(wait)
            return None
        sid = self._next_snapshot
        changes = snapshot_log_changes(self._store, sm.snapshot(sid))
        if changes is None:
            raise SnapshotNotFoundError(
                f"snapshot {sid} of {self.table.identifier} expired before it was read"
            )
        self._next_snapshot = sid + 1
        self._consumed = sid
        self._save_progress()
        parts = [_with_kinds(ch.rows, ch.kinds) for ch in changes]
        if not parts:
            return None
        return self._finish(pa.concat_tables(parts))

    def _finish(self, t: pa.Table) -> Optional[pa.Table]:
        if self.filter is not None and t.num_rows:
            t = t.filter(self.filter)
        t = t.select([ROWKIND, *self.columns])
        return t if t.num_rows else None

    def _progress(self) -> None:
        """Advance the consumer past every snapshot whose records this reader has read whole."""
        if self.consumer_id is None or self._tail is None or self._consumed is None:
            return
        sm = self._store.snapshot_manager
        latest = sm.latest_id() or 0
        positions = self._tail.positions
        sid = self._consumed
        while sid < latest:
            try:
                nxt = sm.snapshot(sid + 1)
            except SnapshotNotFoundError:
                break
            if any(positions.get(p, 0) < o for p, o in (nxt.log_offsets or {}).items()):
                break
            sid += 1
        if sid != self._consumed:
            self._consumed = sid
            self._save_progress()

    def _save_progress(self) -> None:
        if self.consumer_id is not None and self._consumed is not None:
            store = self._store
            sm, consumers = store.snapshot_manager, store.consumer_manager
            record_progress(consumers, sm, self.consumer_id, self._consumed + 1)

    def __iter__(self) -> Iterator[pa.Table]:
        while not self._closed:
            batch = self.poll()
            if batch is not None:
                yield batch

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._tail is not None:
                self._tail.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _commit_id(snap: Optional[Snapshot]) -> Optional[CommitId]:
    if snap is None:
        return None
    return CommitId(snap.commit_user, int(snap.commit_identifier), snap.commit_kind)


def _with_kinds(rows: pa.Table, kinds: np.ndarray) -> pa.Table:
    names = np.array(RowKind.SHORT, dtype=object)[np.asarray(kinds, dtype=np.int64)]
    return rows.add_column(0, pa.field(ROWKIND, pa.string(), False), pa.array(names, pa.string()))
