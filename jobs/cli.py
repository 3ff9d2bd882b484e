"""The ``lakelog`` command line: tables, show, files, expire, compact, rollback, rescale; ``lakelog sql``
(Flink SQL scripts) and ``lakelog kafka`` (a local Kafka broker) dispatch to their own jobs."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Optional, TextIO

__all__ = ["main", "count_arg", "seconds_arg", "catalog_options"]


class UsageError(Exception):
    """A command line that cannot run (missing warehouse or table): exit status 2."""


def count_arg(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for integers of at least ``minimum`` (a count, an id, a parallelism):
    ``--buckets 0`` or ``--retain-min -1`` is refused by argparse, naming the flag (exit status 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def seconds_arg(text: str) -> float:
    """An argparse ``type`` for a duration in seconds: a finite number, not negative."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text!r}")
    return value


class ProgressBar:
    """A one-line text progress bar on a terminal stream (redrawn in place, throttled)."""

    def __init__(self, label: str, stream: Optional[TextIO] = None, width: int = 30) -> None:
        # resolved now, not at import: sys.stderr may have been replaced since (tests, notebooks)
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self._last = 0.0
        self._start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = done / total if total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} buckets {now - self._start:5.1f}s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def catalog_options(pairs: Sequence[str]) -> dict[str, str]:
    """``--option key=value`` flags as catalog options (Paimon's names: ``metastore=jdbc``,
    ``uri=jdbc:...``, ``jdbc.user=...``, ``catalog-key=...``, ``lock.enabled=true``). A value
    ``@<file>`` is read from the file (first line), so a password stays out of the process list."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {pair.split('=')[0]!r}: expected key=value")
        if value.startswith("@"):
            try:
                with open(value[1:], encoding="utf-8") as f:
                    value = f.readline().rstrip("\r\n")
            except OSError as e:
                raise UsageError(f"--option {key.strip()}: cannot read {value[1:]}: {e.strerror}") from None
        out[key.strip()] = value
    return out


def _catalog(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from lakelog.connector.format.fileio import is_object_store, location
    from lakelog.connector.table.catalog import Catalog

    if not args.warehouse:
        raise UsageError("give --warehouse or set LAKELOG_WAREHOUSE")
    remote = is_object_store(args.warehouse)
    if not remote and not os.path.isdir(location(args.warehouse)):  # a typo must not create a new warehouse
        raise UsageError(f"warehouse {args.warehouse} does not exist")
    pairs = [*(getattr(args, "option_top", None) or []), *(getattr(args, "option", None) or [])]
    catalog = Catalog(args.warehouse, options=catalog_options(pairs))
    if remote and not catalog.file_io.exists(catalog.warehouse):
        raise UsageError(f"warehouse {args.warehouse} does not exist (no objects under it)")
    return catalog


def _table_arg(args: argparse.Namespace) -> str:
    name = args.table_opt or args.table
    if not name:
        raise UsageError("name the table (db.table)")
    return str(name)


def _fmt_time(millis: Optional[int]) -> str:
    if millis is None:
        return "-"
    return datetime.datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S")


def cmd_tables(args: argparse.Namespace) -> int:
    cat = _catalog(args)
    dbs = [args.database] if args.database else cat.list_databases()
    for db in dbs:
        for t in cat.list_tables(db):
            print(f"{db}.{t}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    t = _catalog(args).get_table(_table_arg(args))
    print(f"table {t.identifier}  ({t.path})")
    print("schema:")
    for f in t.schema:
        marks = []
        if f.name in t.primary_keys:
            marks.append("primary key")
        if f.name in t.partition_keys:
            marks.append("partition")
        null = "" if f.nullable else " NOT NULL"
        print(f"  {f.name}: {f.type}{null}" + (f"  [{', '.join(marks)}]" if marks else ""))
    print("options:")
    for k, v in sorted(t.options.items()):
        print(f"  {k} = {v}")
    snaps = t.snapshots()
    print(f"snapshots ({len(snaps)}):")
    print(f"  {'id':>5}  {'kind':8} {'time':19}  {'records':>10}  {'delta':>8}  commit")
    for s in snaps:
        print(
            f"  {s.id:>5}  {s.commit_kind:8} {_fmt_time(s.time_millis)}  {s.total_record_count or 0:>10}"
            f"  {s.delta_record_count or 0:>8}  {s.commit_user[:8]}:{s.commit_identifier}"
        )
    tags = t.tags()
    if tags:
        print("tags:")
        for name, sid in sorted(tags.items()):
            print(f"  {name} -> snapshot {sid}")
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    t = _catalog(args).get_table(_table_arg(args))
    files = t.files(args.snapshot).to_pylist()
    if args.json:
        print(json.dumps(files, indent=2, default=str))
        return 0
    current = None
    for f in files:
        group = (f["partition"], f["bucket"])
        if group != current:
            current = group
            bucket_dir = os.path.dirname(f["file_path"])
            part = os.path.relpath(os.path.dirname(bucket_dir), t.path) if t.partition_keys else ""
            print(f"{part or '(unpartitioned)'}  bucket-{f['bucket']}")
        print(
            f"  L{f['level']}  {os.path.basename(f['file_path'])}  rows={f['record_count']}"
            f"  size={f['file_size_in_bytes']}  seq=[{f['min_sequence_number']}, {f['max_sequence_number']}]"
        )
    print(f"{len(files)} file(s)")
    return 0


def cmd_system(args: argparse.Namespace) -> int:
    """A system table (Paimon's columns), as JSON lines or an aligned text table."""
    from lakelog.connector.table.system_tables import METADATA_TABLES, SNAPSHOT_SCOPED, system_table

    name = args.name
    if name not in METADATA_TABLES:
        raise UsageError(
            f"system table {name!r} is not a metadata table; pick one of {', '.join(METADATA_TABLES)}"
        )
    if args.snapshot is not None and name not in SNAPSHOT_SCOPED:
        raise UsageError(f"--snapshot works with {', '.join(SNAPSHOT_SCOPED)}, not {name!r}")
    t = _catalog(args).get_table(_table_arg(args))
    snap = t.snapshot(args.snapshot) if args.snapshot is not None else None
    rows = system_table(t.store, name, snapshot=snap).to_pylist()
    if args.json:
        for r in rows:
            print(json.dumps(r, default=str))
        return 0
    print(format_table(list(rows[0]) if rows else [], [list(r.values()) for r in rows]))
    return 0


def format_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as an aligned text table with a header (``NULL`` for None)."""
    cells = [[("NULL" if v is None else str(v)) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |", line]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in cells]
    out += [line, f"{len(rows)} row(s)"]
    return "\n".join(out)


def cmd_expire(args: argparse.Namespace) -> int:
    t = _catalog(args).get_table(_table_arg(args))
    kwargs = {}
    if args.retain_min is not None:
        kwargs["retain_min"] = args.retain_min
    if args.retain_max is not None:
        kwargs["retain_max"] = args.retain_max
        if args.retain_min is None:  # "--retain-max 3" alone: the table's minimum must not exceed it
            kwargs["retain_min"] = min(args.retain_max, t.store.options.snapshot_num_retained_min)
    if args.older_than_seconds is not None:
        kwargs["older_than_millis"] = int((time.time() - args.older_than_seconds) * 1000)
    ids = t.expire_snapshots(**kwargs)
    print(f"expired {len(ids)} snapshot(s)" + (f": {ids[0]}..{ids[-1]}" if ids else ""))
    if args.orphans:
        removed = t.remove_orphan_files(older_than_seconds=args.orphan_age_seconds)
        print(f"removed {len(removed)} orphan file(s)")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    t = _catalog(args).get_table(_table_arg(args))
    before = t.latest_snapshot()
    sid = t.rollback_to(args.snapshot, tag=args.tag)
    print(f"rolled back to snapshot {sid} (latest was {before.id if before else None})")
    return 0


def partition_arg(text: str) -> dict[str, str]:
    """``k=v[,k2=v2]``: one partition spec of the command line (one per ``--partition``)."""
    from lakelog.connector.errors import InvalidInputError
    from lakelog.connector.table.partition_specs import parse_partition_specs

    try:
        specs = parse_partition_specs(text)
    except InvalidInputError as e:
        raise UsageError(f"--partition {text!r}: {e}") from None
    if len(specs) != 1:
        raise UsageError(f"--partition {text!r}: one partition per --partition (repeat the flag)")
    return specs[0]


def cmd_rescale(args: argparse.Namespace) -> int:
    t = _catalog(args).get_table(_table_arg(args))
    specs = [partition_arg(p) for p in args.partition] if args.partition else None
    before = t.bucket_counts()
    sid = t.rescale(specs, args.buckets)
    if sid is None:
        print("nothing to rescale: the partitions already have that bucket count")
        return 0
    after = t.bucket_counts(sid)
    changed = sorted((p, before.get(p), n) for p, n in after.items() if before.get(p) != n)
    for p, old, new in changed:
        name = ",".join(f"{k}={v}" for k, v in zip(t.partition_keys, p)) or "(table)"
        print(f"{name}: {old} -> {new} buckets")
    print(f"rescale committed snapshot {sid} (OVERWRITE)")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    if args.full and args.universal:
        raise UsageError("give --full or --universal, not both")
    for n in _STREAMING_FLAGS + _JOB_FLAGS:
        flag = "--" + n.replace("_", "-")
        if getattr(args, n) is None:
            continue
        if n in _STREAMING_FLAGS and not args.streaming:
            raise UsageError(f"{flag} needs --streaming")
        if not (args.streaming or args.job):
            raise UsageError(f"{flag} needs --job or --streaming")
    if args.where is not None and args.partition:
        raise UsageError("give --partition or --where, not both")
    t = _catalog(args).get_table(_table_arg(args))
    if args.streaming or args.job:  # a Flink job (needs the flink extra; pyflink loads only now)
        import importlib.util

        if importlib.util.find_spec("pyflink") is None:
            raise UsageError(
                "--job and --streaming run a Flink job: install the flink extra ('lakelog[flink]')"
            )
        from lakelog.jobs.compact import run_from_args

        # --job compacts fully by default, as the in-process command does; --streaming keeps to
        # universal picks unless --full is given
        full = args.full or not (args.universal or args.streaming)
        return run_from_args(t.path, args, full=full)
    bar = ProgressBar(f"compacting {t.identifier}") if sys.stderr.isatty() or args.progress else None
    specs = [partition_arg(p) for p in args.partition] if args.partition else None
    sid = t.compact(full=not args.universal, partitions=specs, where=args.where, progress=bar)
    print(f"compaction committed snapshot {sid}" if sid else "nothing to compact")
    return 0


_STREAMING_FLAGS = (
    "discovery_interval",
    "max_rounds",
    "idle_timeout",
    "channel_dir",
    "checkpoint_interval_ms",
)
_JOB_FLAGS = ("parallelism", "commit_user")


def compact_job_arguments(s: argparse.ArgumentParser) -> None:
    """The Flink compaction job's flags, for ``lakelog compact`` and ``python -m lakelog.jobs.compact``
    (declared here, where ``--help`` needs no pyflink)."""
    s.add_argument(
        "--partition",
        action="append",
        help="k=v[,k2=v2] of a partition to compact (repeatable; default: every partition)",
    )
    s.add_argument(
        "--where",
        help="a predicate on the partition fields instead, e.g. \"dt >= '2024-06-01' AND hh IN (1, 2)\"",
    )
    s.add_argument("--streaming", action="store_true", help="a streaming Flink job that keeps compacting")
    s.add_argument("--parallelism", type=count_arg(1), help="job: compactor parallelism")
    s.add_argument("--checkpoint-interval-ms", type=count_arg(1), help="streaming: checkpoint interval")
    s.add_argument("--discovery-interval", help="streaming: e.g. '2 s' (default: the table's option)")
    s.add_argument(
        "--max-rounds", type=count_arg(1), help="streaming: end after this many discovery rounds"
    )
    s.add_argument(
        "--idle-timeout",
        type=seconds_arg,
        help="streaming: stop once the table had no new snapshot this long (s)",
    )
    s.add_argument("--channel-dir", help="streaming: the commit channel folder")
    s.add_argument("--commit-user", help="job: commit user of the COMPACT snapshots")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lakelog",
        description="lakelog tables on a local warehouse ('lakelog sql -f script.sql' runs Flink SQL)",
    )
    p.add_argument(
        "--warehouse", default=os.environ.get("LAKELOG_WAREHOUSE"), help="warehouse path or file:// URI"
    )
    option_help = (
        "a catalog option key=value (repeatable; Paimon's names, e.g. metastore=jdbc "
        "uri=jdbc:sqlite:/path/catalog.db jdbc.user=u jdbc.password=@file catalog-key=k lock.enabled=true)"
    )
    p.add_argument("--option", dest="option_top", action="append", default=[], metavar="KEY=VALUE",
                   help=option_help)
    sub = p.add_subparsers(dest="command", required=True)

    def with_table(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("table", nargs="?", help="db.table")
        sp.add_argument("--table", dest="table_opt", help="db.table")
        sp.add_argument("--warehouse", default=argparse.SUPPRESS)
        sp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help=option_help)

    s = sub.add_parser("tables", help="list tables")
    s.add_argument("database", nargs="?")
    s.add_argument("--warehouse", default=argparse.SUPPRESS)
    s.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help=option_help)
    s.set_defaults(func=cmd_tables)
    s = sub.add_parser("show", help="schema, options and snapshots of a table")
    with_table(s)
    s.set_defaults(func=cmd_show)
    s = sub.add_parser("files", help="live data files per bucket and level")
    with_table(s)
    s.add_argument("--snapshot", type=count_arg(1))
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_files)
    s = sub.add_parser("sys", help="a system table of a table: snapshots, schemas, files, tags, ...")
    with_table(s)
    s.add_argument("name", help="snapshots, schemas, options, files, tags, partitions, buckets, ...")
    s.add_argument(
        "--snapshot", type=count_arg(1), help="files, partitions, buckets, manifests: of this snapshot"
    )
    s.add_argument("--json", action="store_true", help="one JSON object per row")
    s.set_defaults(func=cmd_system)
    s = sub.add_parser("expire", help="expire snapshots by the table's retention options")
    with_table(s)
    s.add_argument("--retain-min", type=count_arg(1))
    s.add_argument("--retain-max", type=count_arg(1), help="alone, it also caps the minimum kept")
    s.add_argument("--older-than-seconds", type=seconds_arg)
    s.add_argument("--orphans", action="store_true", help="also remove orphan files")
    s.add_argument(
        "--orphan-age-seconds", type=seconds_arg, help="default: the table's orphan-clean.older-than (1 day)"
    )
    s.set_defaults(func=cmd_expire)
    s = sub.add_parser("rollback", help="roll back to a snapshot or tag (safe beside writers)")
    with_table(s)
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=count_arg(1), help="the snapshot id to roll back to")
    target.add_argument("--tag", help="the tag whose snapshot to roll back to")
    s.set_defaults(func=cmd_rollback)
    s = sub.add_parser(
        "rescale",
        help="rewrite partitions with the table's bucket count (or --buckets) in one OVERWRITE snapshot",
    )
    with_table(s)
    s.add_argument(
        "--partition",
        action="append",
        help="k=v[,k2=v2] of a partition to rewrite (repeatable; default: those whose count differs)",
    )
    s.add_argument(
        "--buckets", type=count_arg(1), help="the bucket count (default: the table's 'bucket' option)"
    )
    s.set_defaults(func=cmd_rescale)
    s = sub.add_parser("compact", help="full compaction of every bucket (or universal compaction)")
    with_table(s)
    s.add_argument(
        "--universal",
        action="store_true",
        help="only what universal compaction picks (for tables written by write-only jobs)",
    )
    s.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    s.add_argument("--job", action="store_true", help="run as a batch Flink job (parallel compaction)")
    s.add_argument("--full", action="store_true", help="with --streaming: full compactions")
    compact_job_arguments(s)
    s.set_defaults(func=cmd_compact)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from lakelog.connector.errors import LakelogError

    rest = list(sys.argv[1:] if argv is None else argv)
    if rest[:1] == ["sql"]:  # Flink SQL scripts: lakelog sql -f script.sql (needs the flink extra)
        from lakelog.jobs.sql import main as sql_main

        return sql_main(rest[1:])
    if rest[:1] == ["kafka"]:  # a local Kafka broker: lakelog kafka fetch|start|stop|status
        from lakelog.jobs.kafka_broker import main as kafka_main

        return kafka_main(rest[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (LakelogError, UsageError, ValueError) as e:
        # KeyError-based errors would print their message quoted: use the message itself
        msg = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
        print(f"lakelog: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
