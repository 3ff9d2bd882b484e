"""Where a read starts: Paimon's ``scan.mode`` (latest-full, latest, from-snapshot(-full),
from-timestamp, compacted-full, incremental-between) resolved against a table's snapshots."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import CoreOptions, StartupMode, validate_options
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore

__all__ = ["MODES", "ScanStart", "scan_options", "compacted_snapshot", "resolve_start"]


MODES = (
    "latest-full",
    "latest",
    "from-snapshot",
    "from-snapshot-full",
    "from-timestamp",
    "compacted-full",
    "incremental-between",
    "default",
    "full",
)


def scan_options(store: TableStore, overrides: Mapping[str, str]) -> CoreOptions:
    """The table's options with dynamic ``overrides`` applied. The overrides are validated strictly
    (an unknown or unsupported key is refused by name); the table's own options as when it opens
    (another engine may have set keys lakelog does not know)."""
    given = {str(k): str(v) for k, v in overrides.items()}
    validate_options(given, strict=True)
    merged = dict(store.schema.options)
    merged.update(given)
    return CoreOptions(merged, strict=False)


@dataclass(frozen=True)
class ScanStart:
    """Where a read starts.

    ``full_snapshot``: a snapshot read in full first (as +I rows), or None.
    ``next_snapshot``: the first snapshot whose changes follow (streaming), or None for batch-only reads.
    ``incremental``: a (from exclusive, to inclusive) range read as a changelog (incremental-between).
    """

    full_snapshot: Optional[int]
    next_snapshot: Optional[int]
    incremental: Optional[tuple[int, int]] = None


def compacted_snapshot(store: TableStore) -> Optional[Snapshot]:
    """The latest COMPACT snapshot (or the latest snapshot when none was compacted)."""
    sm = store.snapshot_manager
    latest, earliest = sm.latest_id(), sm.earliest_id()
    if latest is None or earliest is None:
        return None
    for sid in range(latest, earliest - 1, -1):
        s = sm.snapshot(sid)
        if s.commit_kind == "COMPACT":
            return s
    return sm.latest()


def _resolve_between(store: TableStore, spec: str) -> tuple[int, int]:
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) != 2:
        raise OptionError(f"option 'incremental-between' = {spec!r} must be 'start,end'")
    tags = store.tag_manager
    out = []
    for p in parts:
        if re.fullmatch(r"\d+", p):
            out.append(int(p))
        else:
            out.append(tags.get(p).id)
    return out[0], out[1]


def _local_millis(text: str, key: str) -> int:
    """``yyyy-MM-dd[ HH:mm[:ss[.SSS]]]`` in the local time zone (as Paimon reads ``scan.timestamp``)."""
    import datetime

    try:
        return round(datetime.datetime.fromisoformat(text.strip()).timestamp() * 1000)
    except ValueError:
        raise OptionError(
            f"invalid value {text!r} for option {key!r}: expected 'yyyy-MM-dd HH:mm:ss' (local time)"
        ) from None


def _resolve_between_timestamps(store: TableStore, spec: str) -> tuple[int, int]:
    """``incremental-between-timestamp`` = 't1,t2' (epoch milliseconds, or local times
    ``yyyy-MM-dd HH:mm:ss`` as Paimon's docs also write them): the snapshots committed after t1 up to
    t2, as (from exclusive, to inclusive) ids."""
    key = "incremental-between-timestamp"
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) != 2 or not all(parts):
        raise OptionError(
            f"option {key!r} = {spec!r} must be 'start,end' in epoch milliseconds or local times "
            "'yyyy-MM-dd HH:mm:ss'"
        )
    bounds = []
    for p in parts:
        if re.fullmatch(r"\d+", p):
            bounds.append(int(p))
            continue
        try:
            bounds.append(_local_millis(p, key))
        except OptionError:
            raise OptionError(
                f"option {key!r} = {spec!r}: {p!r} is neither epoch milliseconds nor a local time "
                "'yyyy-MM-dd HH:mm:ss'"
            ) from None
    sm = store.snapshot_manager
    ids = []
    for millis in bounds:
        s = sm.earlier_or_equal_time_millis(millis)
        ids.append(s.id if s is not None else (sm.earliest_id() or 1) - 1)
    return ids[0], max(ids)


def resolve_start(
    store: TableStore, opts: CoreOptions, *, streaming: bool, consumer_next: Optional[int] = None
) -> ScanStart:
    """The start of a read for the options' ``scan.mode`` (see the module docs for each mode)."""
    sm = store.snapshot_manager
    latest = sm.latest_id()
    if consumer_next is not None and streaming:
        return ScanStart(None, consumer_next)
    mode = opts.startup_mode
    follow_after = (lambda sid: sid + 1) if streaming else (lambda sid: None)  # noqa: E731
    if mode in (StartupMode.LATEST_FULL, StartupMode.FULL, StartupMode.DEFAULT):
        if latest is None:
            return ScanStart(None, 1 if streaming else None)
        return ScanStart(latest, follow_after(latest))
    if mode == StartupMode.LATEST:
        if not streaming:
            return ScanStart(latest, None)
        return ScanStart(None, (latest or 0) + 1)
    if mode == StartupMode.COMPACTED_FULL:
        snap = compacted_snapshot(store)
        if snap is None:
            return ScanStart(None, 1 if streaming else None)
        return ScanStart(snap.id, follow_after(snap.id))
    if mode in (StartupMode.FROM_SNAPSHOT, StartupMode.FROM_SNAPSHOT_FULL):
        sid = opts.scan_snapshot_id
        if sid is None and opts.scan_tag_name is not None:
            sid = store.tag_manager.get(opts.scan_tag_name).id
        if sid is None:
            raise OptionError("scan.mode 'from-snapshot' needs 'scan.snapshot-id' or 'scan.tag-name'")
        if not streaming or mode == StartupMode.FROM_SNAPSHOT_FULL:
            return ScanStart(sid, follow_after(sid))
        return ScanStart(None, sid)
    if mode == StartupMode.FROM_TIMESTAMP:
        millis = opts.scan_timestamp_millis
        if millis is None and opts.get(CoreOptions.SCAN_TIMESTAMP) is not None:
            millis = _local_millis(opts.get(CoreOptions.SCAN_TIMESTAMP), "scan.timestamp")
        if millis is None:
            raise OptionError("scan.mode 'from-timestamp' needs 'scan.timestamp-millis' or 'scan.timestamp'")
        before = sm.earlier_or_equal_time_millis(millis)
        if not streaming:
            if before is None:
                raise OptionError(f"no snapshot at or before scan.timestamp-millis {millis}")
            return ScanStart(before.id, None)
        return ScanStart(None, (before.id if before is not None else 0) + 1)
    if mode == StartupMode.INCREMENTAL:
        if streaming:
            raise OptionError("scan.mode 'incremental-between' is a batch read; use runtime mode BATCH")
        spec = opts.get(CoreOptions.INCREMENTAL_BETWEEN)
        between_times = opts.get(CoreOptions.INCREMENTAL_BETWEEN_TIMESTAMP)
        if spec is None and between_times is not None:
            return ScanStart(None, None, _resolve_between_timestamps(store, between_times))
        if spec is None:
            raise OptionError(
                "scan.mode 'incremental-between' needs option 'incremental-between' = 'start,end'"
            )
        return ScanStart(None, None, _resolve_between(store, spec))
    raise OptionError(f"scan.mode {mode.value!r} is not supported by the lakelog Flink source")
