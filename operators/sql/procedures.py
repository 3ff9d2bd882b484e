"""``CALL [catalog.]sys.<procedure>(...)``: Paimon's procedures on a lakelog catalog. No pyflink.

Arguments bind as in Paimon's Flink procedures (Flink 1.19+ argument hints): by position in the
declared order, or by name (``table => 'db.t'``, names may be back-quoted); omitted optional
arguments are null. Values are SQL literals: strings, numbers, ``TRUE``/``FALSE``, ``NULL``.
Results have Paimon's shape: one ``result`` column (``Success``, counts), or the procedure's row
type (``rollback_to``: ``previous_snapshot_id``, ``current_snapshot_id``).

Procedures run in this process on the connector (``compact`` compacts in-process and returns
``Success`` when done, as Paimon's does with ``table.dml-sync`` on).
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from lakelog.connector.errors import (
    InvalidInputError,
    LakelogError,
    OptionError,
    SnapshotNotFoundError,
    TagError,
)
from lakelog.connector.format.options import Duration
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.table.catalog import Catalog
from lakelog.connector.table.partition_specs import parse_partition_specs
from lakelog.connector.table.table import Table
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.lexer import Token, matching_paren, read_name, significant, unquote
from lakelog.operators.sql.results import SqlResult

__all__ = [
    "PROCEDURES",
    "Procedure",
    "CallContext",
    "parse_call",
    "call_procedure",
    "extra_procedures",
    "procedure_names",
]


@dataclass(frozen=True)
class CallContext:
    catalog: Catalog
    catalog_name: str
    database: str  # the session's current database (for a table argument without one)
    session: Any = None  # the Flink SQL session (LakelogSql) for procedures that run queries

    def table(self, name: Any) -> Table:
        if not isinstance(name, str) or not name:
            raise SqlError("argument 'table' must name a table: 'database.table'")
        ident = name if "." in name else f"{self.database}.{name}"
        return self.catalog.get_table(ident)


Run = Callable[[CallContext, dict[str, Any]], SqlResult]


@dataclass(frozen=True)
class Procedure:
    name: str
    params: tuple[str, ...]  # Paimon's declared order (= positional order)
    required: tuple[str, ...]
    run: Run
    summary: str


# ---- argument parsing ------------------------------------------------------------------------------
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT")
_EXACT_TYPES = ("DECIMAL", "DEC", "NUMERIC")
_FLOAT_TYPES = ("FLOAT", "DOUBLE", "REAL")
_STRING_TYPES = ("STRING", "VARCHAR", "CHAR")


class _Constant:
    """A constant expression of a ``CALL`` argument, evaluated as Flink would: literals
    (strings, numbers, TRUE/FALSE, NULL), parentheses, unary minus, ``+ - * /`` on numbers, ``||``
    on strings, and ``CAST(x AS <type>)`` to integer, decimal, floating-point, string and boolean
    types (Paimon's docs write ``snapshot_id => cast(1 as bigint)``). Anything else is refused."""

    def __init__(self, toks: list[Token], text: str) -> None:
        self.toks, self.text, self.i = toks, text, 0

    def fail(self) -> SqlError:
        raw = " ".join(t.text for t in self.toks)
        return SqlError(
            f"{self.text}: argument {raw!r} is not a literal or a constant expression lakelog evaluates "
            "(literals, CAST, + - * /, ||)"
        )

    def peek(self) -> Optional[Token]:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: Optional[str] = None) -> Token:
        t = self.peek()
        if t is None or (want is not None and t.text.upper() != want):
            raise self.fail()
        self.i += 1
        return t

    def value(self) -> Any:
        if not self.toks:
            raise SqlError(f"{self.text}: an argument is empty")
        out = self.concat()
        if self.i != len(self.toks):
            raise self.fail()
        return out

    def concat(self) -> Any:
        left = self.sum()
        while self.at("|"):
            self.take("|")
            self.take("|")
            right = self.sum()
            if left is None or right is None:
                left = None
            elif isinstance(left, str) and isinstance(right, str):
                left = left + right
            else:
                raise self.fail()
        return left

    def at(self, *texts: str) -> bool:
        """Is the next token one of ``texts``?"""
        t = self.peek()
        return t is not None and t.text in texts

    def chain(self, ops: tuple[str, ...], operand: Any) -> Any:
        """``operand (op operand)*`` for the left-associative operators ``ops``."""
        left = operand()
        while self.at(*ops):
            op = self.take().text
            left = self.arith(left, op, operand())
        return left

    def sum(self) -> Any:
        return self.chain(("+", "-"), self.product)

    def product(self) -> Any:
        return self.chain(("*", "/"), self.unary)

    def arith(self, a: Any, op: str, b: Any) -> Any:
        if a is None or b is None:
            return None
        if not all(isinstance(x, (int, float, decimal.Decimal)) and not isinstance(x, bool) for x in (a, b)):
            raise self.fail()
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            raise SqlError(f"{self.text}: division by zero in an argument")
        if isinstance(a, int) and isinstance(b, int):
            return int(a / b)  # Flink's integer division truncates
        return a / b

    def unary(self) -> Any:
        if self.at("-", "+"):
            t = self.take()
            v = self.unary()
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
                raise self.fail()
            return -v if t.text == "-" else v
        return self.atom()

    def atom(self) -> Any:
        t = self.take()
        if t.text == "(":
            v = self.concat()
            self.take(")")
            return v
        if t.kind == "str":
            return t.text[1:-1].replace("''", "'")
        if t.kind == "num":
            return decimal.Decimal(t.text) if ("." in t.text or "e" in t.text.lower()) else int(t.text)
        if t.word in ("TRUE", "FALSE"):
            return t.word == "TRUE"
        if t.word == "NULL":
            return None
        if t.word == "CAST":
            self.take("(")
            v = self.concat()
            self.take("AS")
            target = self.take().word
            if self.at("("):
                depth = 0
                while True:  # a length, precision or scale: kept by the value itself
                    s = self.take().text
                    depth += {"(": 1, ")": -1}.get(s, 0)
                    if depth == 0:
                        break
            self.take(")")
            return self.cast(v, target)
        raise self.fail()

    def cast(self, v: Any, target: str) -> Any:
        if v is None:
            return None
        try:
            if target in _INTEGER_TYPES:
                if isinstance(v, bool):
                    return int(v)
                return int(decimal.Decimal(str(v).strip()).to_integral_value(rounding=decimal.ROUND_DOWN))
            if target in _EXACT_TYPES:
                return decimal.Decimal(str(v).strip())
            if target in _FLOAT_TYPES:
                return float(v)
            if target in _STRING_TYPES:
                return ("TRUE" if v else "FALSE") if isinstance(v, bool) else str(v)
            if target == "BOOLEAN":
                text = str(v).strip().upper()
                if text in ("TRUE", "FALSE"):
                    return text == "TRUE"
        except (ArithmeticError, ValueError):
            pass
        raise SqlError(f"{self.text}: cannot CAST {v!r} AS {target} in an argument")


def _literal(toks: list[Token], text: str) -> Any:
    return _Constant(toks, text).value()


def parse_call(text: str) -> tuple[list[str], list[Any], dict[str, Any]]:
    """(procedure name parts, positional arguments, named arguments) of a ``CALL`` statement."""
    toks = significant(text)
    if not toks or toks[0].word != "CALL":
        raise SqlError(f"not a CALL statement: {text!r}")
    parts, i = read_name(toks, 1)
    if not parts or i >= len(toks) or toks[i].text != "(":
        raise SqlError(f"{text}: expected CALL [catalog.]sys.<procedure>(...)")
    end = matching_paren(toks, i)
    rest = [t.text for t in toks[end + 1 :]]
    if end == len(toks) or rest not in ([], [";"]):
        raise SqlError(f"{text}: the argument list's parentheses do not match")
    args: list[list[Token]] = [[]]
    depth = 0
    for t in toks[i + 1 : end]:
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
        if t.text == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(t)
    positional: list[Any] = []
    named: dict[str, Any] = {}
    if args == [[]]:
        return parts, positional, named
    for a in args:
        if len(a) >= 3 and a[0].is_name and a[1].text == "=" and a[2].text == ">":
            named[unquote(a[0].text) if a[0].kind == "qid" else a[0].text.lower()] = _literal(a[3:], text)
        else:
            if named:
                raise SqlError(f"{text}: a positional argument follows a named one")
            positional.append(_literal(a, text))
    return parts, positional, named


def _bind(proc: Procedure, positional: Sequence[Any], named: dict[str, Any]) -> dict[str, Any]:
    head = f"CALL sys.{proc.name}"
    if len(positional) > len(proc.params):
        raise SqlError(f"{head} takes at most {len(proc.params)} arguments ({', '.join(proc.params)})")
    bound: dict[str, Any] = dict.fromkeys(proc.params)
    bound.update(zip(proc.params, positional))
    for k, v in named.items():
        if k not in bound:
            raise SqlError(f"{head} has no argument {k!r}; its arguments: {', '.join(proc.params)}")
        if k in proc.params[: len(positional)]:
            raise SqlError(f"{head}: argument {k!r} is given twice")
        bound[k] = v
    missing = [p for p in proc.required if bound.get(p) is None]
    if missing:
        raise SqlError(f"{head} needs argument(s) {missing}")
    return bound


def _refuse(proc: str, args: dict[str, Any], *names: str, why: str) -> None:
    given = [n for n in names if args.get(n) not in (None, "")]
    if given:
        raise UnsupportedStatementError(f"CALL sys.{proc}: argument(s) {given} are not supported: {why}")


def _success() -> SqlResult:
    return SqlResult.table(["result"], [("Success",)])


def _partition_specs(value: Any, arg: str) -> list[dict[str, str]]:
    """Paimon's partition argument: ``'dt=2024-06-01,hh=1;dt=2024-06-02'``, one spec per ``;``, one
    field per ``,``."""
    try:
        return parse_partition_specs(str(value))
    except InvalidInputError as e:
        raise SqlError(f"argument {arg!r} = {value!r}: {e}") from None


def _integer(value: Any, arg: str) -> int:
    """An integer argument: an integer literal, or a string of one ('3'); TRUE, 1.5 or 'abc' are
    refused naming the argument."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    raise SqlError(f"argument {arg!r} = {value!r} is not an integer")


def _duration(value: Any, arg: str) -> datetime.timedelta:
    try:
        return datetime.timedelta(milliseconds=Duration.parse(str(value)).millis)
    except LakelogError as e:
        raise SqlError(
            f"argument {arg!r} = {value!r} is not a duration (such as '1 d' or '2 h'): {e}"
        ) from None


def _local_millis(value: Any, arg: str) -> int:
    """A 'yyyy-MM-dd HH:mm:ss[.SSS]' timestamp in local time, or epoch milliseconds."""
    if isinstance(value, int):
        return value
    try:
        return round(datetime.datetime.fromisoformat(str(value).strip()).timestamp() * 1000)
    except ValueError:
        raise SqlError(f"argument {arg!r} = {value!r} is not a timestamp 'yyyy-MM-dd HH:mm:ss'") from None


# ---- the procedures ---------------------------------------------------------------------------------
def _dynamic_options(value: Any, arg: str) -> dict[str, str]:
    """Paimon's ``options`` argument: ``'k1=v1,k2=v2'`` table options for this call only."""
    out: dict[str, str] = {}
    for item in str(value).split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise SqlError(
                f"argument {arg!r} = {value!r}: expected 'key=value[,key2=value2]', got {item.strip()!r}"
            )
        out[key.strip()] = val.strip()
    return out


def _compact(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    _refuse("compact", a, "partition_idle_time",
            why="lakelog chooses partitions by 'partitions' or 'where' only")  # fmt: skip
    strategy = (a.get("compact_strategy") or "full").lower()
    if strategy not in ("full", "minor"):
        raise SqlError(f"CALL sys.compact: compact_strategy must be 'full' or 'minor', not {strategy!r}")
    specs = _partition_specs(a["partitions"], "partitions") if a.get("partitions") else None
    where = a.get("where") or None
    if specs is not None and where is not None:
        raise SqlError("CALL sys.compact: give 'partitions' or 'where', not both")
    table = ctx.table(a["table"])
    if a.get("options"):  # table options for this compaction only (target-file-size, compaction.*...)
        from lakelog.operators.table_ref import store_with_options

        store = store_with_options(table.path, _dynamic_options(a["options"], "options"))
        table = Table(store, table.identifier)
    try:
        table.compact(full=strategy == "full", partitions=specs, where=where,
                      order_strategy=a.get("order_strategy") or None, order_by=a.get("order_by") or None)
    except OptionError as e:
        raise SqlError(f"CALL sys.compact: {e}") from None
    return _success()


def _create_tag(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    sm = t.store.snapshot_manager
    sid = a.get("snapshot_id")
    if sid is None:
        snap = sm.latest()
        if snap is None:
            raise SqlError("Cannot create tag because latest snapshot doesn't exist.")
    else:
        try:
            snap = sm.snapshot(_integer(sid, "snapshot_id"))
        except SnapshotNotFoundError:
            raise SqlError(f"Cannot create tag because given snapshot #{sid} doesn't exist.") from None
    retained = _duration(a["time_retained"], "time_retained") if a.get("time_retained") else None
    tm = t.store.tag_manager
    if tm.exists(a["tag"]):
        raise SqlError(f"Tag '{a['tag']}' already exists.")
    tm.create(a["tag"], snap, time_retained=retained)
    return _success()


def _delete_tag(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    for name in (n.strip() for n in str(a["tag"]).split(",")):
        if name:
            with contextlib.suppress(TagError):  # as Paimon: a missing tag is no error
                t.delete_tag(name)
    return _success()


def _rollback_to(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    latest = t.latest_snapshot()
    if latest is None:
        raise SqlError("Latest snapshot is null, can not rollback.")
    tag = a.get("tag")
    if tag:
        target = t.rollback_to(tag=str(tag))
    elif a.get("snapshot_id") is not None:
        target = t.rollback_to(_integer(a["snapshot_id"], "snapshot_id"))
    else:
        raise SqlError("CALL sys.rollback_to needs argument 'tag' or 'snapshot_id'")
    return SqlResult.table(["previous_snapshot_id", "current_snapshot_id"], [(latest.id, target)])


def _rollback_to_as_latest(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    from lakelog.connector.table.rollback_latest import rollback_to_as_latest

    t = ctx.table(a["table"])
    tag, sid = a.get("tag") or None, a.get("snapshot_id")
    if (tag is None) == (sid is None):
        raise SqlError("CALL sys.rollback_to_as_latest: Must specify exactly one of tag and snapshot_id.")
    row = rollback_to_as_latest(
        t.store,
        snapshot_id=None if sid is None else _integer(sid, "snapshot_id"),
        tag=None if tag is None else str(tag),
    )
    return SqlResult.table(["previous_snapshot_id", "rolled_back_snapshot_id", "current_snapshot_id"], [row])


def _expire_snapshots(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    _refuse("expire_snapshots", a, "options", why="give the retention as arguments")
    t = ctx.table(a["table"])
    kw: dict[str, Any] = {}
    if a.get("retain_max") is not None:
        kw["retain_max"] = _integer(a["retain_max"], "retain_max")
    if a.get("retain_min") is not None:
        kw["retain_min"] = _integer(a["retain_min"], "retain_min")
    if "retain_max" in kw and "retain_min" not in kw:
        kw["retain_min"] = min(kw["retain_max"], t.store.options.snapshot_num_retained_min)
    if a.get("older_than") is not None:
        kw["older_than_millis"] = _local_millis(a["older_than"], "older_than")
    if a.get("max_deletes") is not None:
        kw["max_deletes"] = _integer(a["max_deletes"], "max_deletes")
    try:
        expired = t.expire_snapshots(**kw)
    except ValueError as e:
        raise SqlError(f"CALL sys.expire_snapshots: {e}") from None
    return SqlResult.table(["result"], [(str(len(expired)),)])


def _orphans(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    _refuse("remove_orphan_files", a, "parallelism", why="lakelog removes orphan files in-process")
    mode = (a.get("mode") or "DISTRIBUTED").upper()
    if mode not in ("DISTRIBUTED", "LOCAL"):
        raise SqlError(f"CALL sys.remove_orphan_files: mode must be 'DISTRIBUTED' or 'LOCAL', not {mode!r}")
    now = time.time()
    older = _local_millis(a["older_than"], "older_than") / 1000 if a.get("older_than") else now - 86400
    if older >= now:
        raise SqlError("CALL sys.remove_orphan_files: 'older_than' must be earlier than now")
    dry = bool(a.get("dry_run"))
    name = str(a["table"])
    db, _, table = name.rpartition(".")
    db = db or ctx.database
    tables = ctx.catalog.list_tables(db) if table == "*" else [table]
    count = size = 0
    for tname in tables:
        t = ctx.table(f"{db}.{tname}")
        found = t.remove_orphan_files(older_than_seconds=now - older, dry_run=True)
        fio = t.store.file_io
        sizes = {p: fio.file_size(p) for p in found if fio.file_exists(p)}
        if not dry:
            removed = t.remove_orphan_files(older_than_seconds=now - older)
            sizes = {p: n for p, n in sizes.items() if p in set(removed)}
        count += len(sizes)
        size += sum(sizes.values())
    return SqlResult.table(["result"], [(str(count),), (str(size),)])


def _reset_consumer(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    cm = t.store.consumer_manager
    nxt = a.get("next_snapshot_id")
    if nxt is None:
        cm.delete(str(a["consumer_id"]))
        return _success()
    nxt = _integer(nxt, "next_snapshot_id")
    if not t.store.snapshot_manager.snapshot_exists(nxt):
        raise SqlError(f"CALL sys.reset_consumer: snapshot {nxt} of {t.identifier} does not exist")
    cm.reset(str(a["consumer_id"]), nxt)
    return _success()


def _expire_partitions(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    _refuse("expire_partitions", a, "max_expires", "options", why="lakelog expires every due partition")
    strategy = (a.get("expire_strategy") or "values-time").lower()
    if strategy != "values-time":
        raise UnsupportedStatementError(
            f"CALL sys.expire_partitions: expire_strategy {strategy!r} is not supported (only 'values-time')"
        )
    if not a.get("expiration_time"):
        raise SqlError("Both the partition expiration time and partition field can not be null.")
    t = ctx.table(a["table"])
    if not t.partition_keys:
        raise SqlError("Both the partition expiration time and partition field can not be null.")
    overrides = {"partition.expiration-time": str(a["expiration_time"])}
    if a.get("timestamp_formatter"):
        overrides["partition.timestamp-formatter"] = str(a["timestamp_formatter"])
    if a.get("timestamp_pattern"):
        overrides["partition.timestamp-pattern"] = str(a["timestamp_pattern"])
    from lakelog.connector.table.partition_expire import expire_partitions
    from lakelog.operators.table_ref import store_with_options

    expired = expire_partitions(store_with_options(t.path, overrides))
    if not expired:
        return SqlResult.table(["expired_partitions"], [("No expired partitions.",)])
    rows = [(", ".join(f"{k}={v}" for k, v in p.items()),) for p in expired]
    return SqlResult.table(["expired_partitions"], rows)


def _rescale(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    table = ctx.table(a["table"])
    _refuse("rescale", a, "scan_parallelism", "sink_parallelism", why="lakelog rescales in the client")
    specs = _partition_specs(a["partition"], "partition") if a.get("partition") else None
    buckets = _integer(a["bucket_num"], "bucket_num") if a.get("bucket_num") is not None else None
    table.rescale(specs, buckets)
    return _success()


def _rewrite_file_index(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    specs = _partition_specs(a["partitions"], "partitions") if a.get("partitions") else None
    ctx.table(a["table"]).rewrite_file_index(partitions=specs)
    return _success()


def _later_or_equal(t: Any, millis: int) -> Optional[Snapshot]:
    """The first snapshot committed at or after ``millis`` (None: none)."""
    sm = t.store.snapshot_manager
    before = sm.earlier_or_equal_time_millis(millis - 1)
    first = before.id + 1 if before is not None else sm.earliest_id()
    latest = sm.latest_id()
    if first is None or latest is None or first > latest:
        return None
    for sid in range(first, latest + 1):  # normally the first; a gap means expiry is running
        with contextlib.suppress(SnapshotNotFoundError):
            snap = sm.snapshot(sid)
            if snap.time_millis >= millis:
                return snap
    return None


def _create_tag_from_timestamp(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    millis = _local_millis(a["timestamp"], "timestamp")
    snap = _later_or_equal(t, millis)
    if snap is None:
        raise SqlError(f"Could not find snapshot whose commit-time later than '{millis}'.")
    retained = _duration(a["time_retained"], "time_retained") if a.get("time_retained") else None
    tm = t.store.tag_manager
    if tm.exists(a["tag"]):
        raise SqlError(f"Tag '{a['tag']}' already exists.")
    tm.create(a["tag"], snap, time_retained=retained)
    watermark = snap.watermark if snap.watermark is not None else -(2**63)
    return SqlResult.table(["tagName", "snapshot", "commit_time", "watermark"],
                           [(a["tag"], snap.id, snap.time_millis, watermark)])  # fmt: skip


def _replace_tag(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    """Point an existing tag at another snapshot (default the latest) and/or give it another
    retention (default: none). The tag file is rewritten in place (one atomic overwrite), so a
    reader never finds the tag missing."""
    t = ctx.table(a["table"])
    tm = t.store.tag_manager
    name = str(a["tag"])
    if not tm.exists(name):
        raise SqlError(f"Tag '{name}' doesn't exist.")
    sm = t.store.snapshot_manager
    if a.get("snapshot_id") is not None:
        try:
            snap = sm.snapshot(_integer(a["snapshot_id"], "snapshot_id"))
        except SnapshotNotFoundError:
            raise SqlError(f"Snapshot '{a['snapshot_id']}' doesn't exist.") from None
    else:
        latest = sm.latest()
        if latest is None:
            raise SqlError("Cannot replace tag because latest snapshot doesn't exist.")
        snap = latest
    retained = _duration(a["time_retained"], "time_retained") if a.get("time_retained") else None
    tm.replace(name, snap, time_retained=retained)
    return _success()


def _rename_tag(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    tm = t.store.tag_manager
    old, new = str(a["tagname"]), str(a["targettagname"])
    if not tm.exists(old):
        raise SqlError(f"Tag '{old}' doesn't exist.")
    if tm.exists(new):
        raise SqlError(f"Tag '{new}' already exists.")
    info = tm.get_info(old)
    tm.create(new, info.snapshot, time_retained=info.time_retained, create_time=info.create_time)
    tm.delete(old)  # the new name exists first: the snapshot is never unprotected
    return _success()


def _create_branch(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    ctx.table(a["table"]).create_branch(str(a["branch"]), tag=str(a["tag"]) if a.get("tag") else None)
    return _success()


def _delete_branch(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    for name in (b.strip() for b in str(a["branch"]).split(",")):
        if name:
            t.delete_branch(name)
    return _success()


def _fast_forward(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    ctx.table(a["table"]).fast_forward(str(a["branch"]))
    return _success()


def _merge_into(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    if ctx.session is None:
        raise UnsupportedStatementError(
            "CALL sys.merge_into: runs Flink queries, so it needs a Flink SQL session "
            "(lakelog sql, LakelogSql)"
        )
    from lakelog.operators.sql.merge_into import merge_into

    return merge_into(ctx.session, ctx.catalog_name, ctx.database, a)


def _alter_column_default_value(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    from lakelog.connector.format.schema_changes import UpdateColumnDefaultValue

    t = ctx.table(a["table"])
    column = str(a["column"])
    if column not in t.schema.names:
        if "." in column:
            raise UnsupportedStatementError(
                f"CALL sys.alter_column_default_value: nested column {column!r}: lakelog keeps default "
                "values of top-level columns only"
            )
        raise SqlError(f"CALL sys.alter_column_default_value: {t.identifier} has no column {column!r}")
    t.alter(UpdateColumnDefaultValue(column, str(a["default_value"])))
    return _success()


def _expire_tags(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    """Paimon's expire_tags: tags created before ``older_than``, or (without it) tags whose
    ``time_retained`` has passed. Tags written without a creation time (no retention) are kept:
    their age is unknown."""
    t = ctx.table(a["table"])
    tm = t.store.tag_manager
    now = datetime.datetime.now()
    cutoff = None
    if a.get("older_than"):
        cutoff = datetime.datetime.fromtimestamp(_local_millis(a["older_than"], "older_than") / 1000)
    expired = []
    for name in sorted(tm.names()):
        with contextlib.suppress(TagError):
            info = tm.get_info(name)
            if info.create_time is None:
                continue
            if cutoff is not None:
                due = info.create_time < cutoff
            else:
                due = info.time_retained is not None and info.create_time + info.time_retained < now
            if due:
                t.delete_tag(name)
                expired.append(name)
    if not expired:
        return SqlResult.table(["expired_tags"], [("No expired tags.",)])
    return SqlResult.table(["expired_tags"], [(n,) for n in expired])


def _rollback_to_timestamp(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    latest = t.latest_snapshot()
    if latest is None:
        raise SqlError("Latest snapshot is null, can not rollback.")
    millis = _local_millis(a["timestamp"], "timestamp")
    snap = t.store.snapshot_manager.earlier_or_equal_time_millis(millis)
    if snap is None:
        raise SqlError(f"count not find snapshot earlier than {millis}")
    target = t.rollback_to(snap.id)
    return SqlResult.table(["previous_snapshot_id", "current_snapshot_id"], [(latest.id, target)])


def _clear_consumers(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    t = ctx.table(a["table"])
    cm = t.store.consumer_manager
    try:
        include = re.compile(str(a["including_consumers"])) if a.get("including_consumers") else None
        exclude = re.compile(str(a["excluding_consumers"])) if a.get("excluding_consumers") else None
    except re.error as e:
        raise SqlError(f"CALL sys.clear_consumers: not a regular expression: {e}") from None
    for cid in cm.ids():
        if include is not None and not include.fullmatch(cid):
            continue
        if exclude is not None and exclude.fullmatch(cid):
            continue
        cm.delete(cid)
    return _success()


def _mark_partition_done(ctx: CallContext, a: dict[str, Any]) -> SqlResult:
    """Paimon's mark_partition_done with its default action, ``success-file``: a ``_SUCCESS``
    file (JSON ``creationTime``/``modificationTime``, epoch milliseconds) in each partition's
    directory, its modification time moved on when it exists. Each spec names every partition
    field, as Paimon's does."""
    t = ctx.table(a["table"])
    store = t.store
    keys = list(store.schema.partition_keys)
    if not keys:
        raise SqlError(f"CALL sys.mark_partition_done: table {t.identifier} is not partitioned")
    action = store.options.partition_mark_done_action  # the registry refuses the other actions
    assert action == "success-file"
    fio = store.file_io
    from lakelog.connector.table.partition_specs import partition_spec

    for spec in _partition_specs(a["partitions"], "partitions"):
        typed = partition_spec(store, spec)
        if set(typed) != set(keys):
            raise SqlError(
                f"CALL sys.mark_partition_done: partition {spec} must give every partition field {keys}"
            )
        directory = f"{store.path.rstrip('/')}/{store.partition_dir([typed[k] for k in keys])}"
        path = f"{directory}/_SUCCESS"
        now = int(time.time() * 1000)
        created = now
        if fio.file_exists(path):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                created = int(json.loads(fio.read_bytes(path))["creationTime"])
        body = json.dumps({"creationTime": created, "modificationTime": now}).encode()
        fio.overwrite_atomic(path, body)
    return _success()


_MERGE_INTO_PARAMS = (
    "target_table", "target_alias", "source_sqls", "source_table", "merge_condition",
    "matched_upsert_condition", "matched_upsert_setting", "not_matched_insert_condition",
    "not_matched_insert_values", "matched_delete_condition", "not_matched_by_source_upsert_condition",
    "not_matched_by_source_upsert_setting", "not_matched_by_source_delete_condition",
)  # fmt: skip

PROCEDURES: dict[str, Procedure] = {
    p.name: p
    for p in (
        Procedure(
            "compact",
            ("table", "partitions", "order_strategy", "order_by", "options", "where", "partition_idle_time",
             "compact_strategy"),
            ("table",), _compact,
            "compact the table or its 'partitions' (compact_strategy 'full' by default, or 'minor')",
        ),
        Procedure("create_tag", ("table", "tag", "snapshot_id", "time_retained"), ("table", "tag"),
                  _create_tag, "tag a snapshot (default: the latest)"),
        Procedure("delete_tag", ("table", "tag"), ("table", "tag"), _delete_tag,
                  "delete tags (comma-separated)"),
        Procedure("create_tag_from_timestamp", ("table", "tag", "timestamp", "time_retained"),
                  ("table", "tag", "timestamp"), _create_tag_from_timestamp,
                  "tag the first snapshot committed at or after a time"),
        Procedure("replace_tag", ("table", "tag", "snapshot_id", "time_retained"), ("table", "tag"),
                  _replace_tag, "point a tag at another snapshot or give it another retention"),
        Procedure("rename_tag", ("table", "tagname", "targettagname"), ("table", "tagname", "targettagname"),
                  _rename_tag, "rename a tag"),
        Procedure("expire_tags", ("table", "older_than"), ("table",), _expire_tags,
                  "delete tags created before older_than, or past their time_retained"),
        Procedure("alter_column_default_value", ("table", "column", "default_value"),
                  ("table", "column", "default_value"), _alter_column_default_value,
                  "set a column's default value (writes fill its nulls with it)"),
        Procedure("merge_into", _MERGE_INTO_PARAMS, ("target_table",), _merge_into,
                  "Paimon's MERGE INTO: upsert, delete and insert by a join with a source, in one commit"),
        Procedure("create_branch", ("table", "branch", "tag"), ("table", "branch"), _create_branch,
                  "create a branch: empty with the latest schema, or from a tag"),
        Procedure("delete_branch", ("table", "branch"), ("table", "branch"), _delete_branch,
                  "delete branches (comma-separated)"),
        Procedure("fast_forward", ("table", "branch"), ("table", "branch"), _fast_forward,
                  "make main what a branch is"),
        Procedure("rollback_to_timestamp", ("table", "timestamp"), ("table", "timestamp"),
                  _rollback_to_timestamp, "roll back to the last snapshot committed at or before a time"),
        Procedure("mark_partition_done", ("table", "partitions"), ("table", "partitions"),
                  _mark_partition_done, "write each partition's _SUCCESS file (action success-file)"),
        Procedure("clear_consumers", ("table", "including_consumers", "excluding_consumers"), ("table",),
                  _clear_consumers, "delete consumers (those a regular expression names, but not others)"),
        Procedure("rollback_to", ("table", "tag", "snapshot_id"), ("table",), _rollback_to,
                  "roll back to a tag or snapshot"),
        Procedure("rollback_to_as_latest", ("table", "tag", "snapshot_id"), ("table",),
                  _rollback_to_as_latest,
                  "publish an earlier snapshot's files as the latest, keeping the snapshots between"),
        Procedure("expire_snapshots",
                  ("table", "retain_max", "retain_min", "older_than", "max_deletes", "options"), ("table",),
                  _expire_snapshots, "expire snapshots; returns how many"),
        Procedure("remove_orphan_files", ("table", "older_than", "dry_run", "parallelism", "mode"),
                  ("table",), _orphans, "remove files no snapshot or tag references; count and bytes"),
        Procedure("reset_consumer", ("table", "consumer_id", "next_snapshot_id"), ("table", "consumer_id"),
                  _reset_consumer, "move a consumer, or delete it without next_snapshot_id"),
        Procedure("rescale", ("table", "bucket_num", "partition", "scan_parallelism", "sink_parallelism"),
                  ("table",), _rescale, "rewrite partitions with another bucket count"),
        Procedure("rewrite_file_index", ("table", "partitions"), ("table",), _rewrite_file_index,
                  "give existing data files the file indexes the table's options ask for"),
        Procedure("expire_partitions",
                  ("table", "expiration_time", "timestamp_formatter", "timestamp_pattern", "expire_strategy",
                   "max_expires", "options"),
                  ("table",), _expire_partitions, "drop the partitions older than expiration_time"),
    )
}  # fmt: skip


def extra_procedures(procs: Sequence[Procedure]) -> None:
    """Register further procedures (those built on connector functions another module provides)."""
    for p in procs:
        PROCEDURES[p.name] = p


def call_procedure(
    ctx: CallContext, name: str, positional: Sequence[Any], named: dict[str, Any]
) -> SqlResult:
    proc = PROCEDURES.get(name)
    if proc is None:
        raise UnsupportedStatementError(
            f"CALL sys.{name}: lakelog has no procedure {name!r}; it has {', '.join(sorted(PROCEDURES))}"
        )
    args = _bind(proc, positional, named)
    try:
        return proc.run(ctx, args)
    except (SqlError, OptionError):
        raise
    except LakelogError as e:
        raise SqlError(f"CALL sys.{name}: {e.args[0] if e.args else e}") from e


def procedure_names() -> list[str]:
    return sorted(PROCEDURES)
