"""Flink-free pieces of the lakelog source: scan-mode resolution, filter parsing, row conversion.

Everything here works on plain lakelog objects, so it is testable without a Flink cluster; the
PyFlink operators in :mod:`lakelog.operators.source` call into it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError, SchemaError
from lakelog.connector.format.options import CoreOptions, StartupMode
from lakelog.connector.format.snapshot import Snapshot
from lakelog.connector.format.store import TableStore

__all__ = [
    "ScanStart",
    "parse_filter",
    "resolve_start",
    "scan_options",
    "compacted_snapshot",
    "table_rows",
    "KIND_CODES",
]

# audit-log row kind -> Flink RowKind ordinal (INSERT 0, UPDATE_BEFORE 1, UPDATE_AFTER 2, DELETE 3)
KIND_CODES: dict[str, int] = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


# ---- filters ----------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<id>`[^`]+`|[A-Za-z_]\w*)"
    r"|(?P<op><>|!=|<=|>=|=|<|>|\(|\)|,))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise OptionError(f"cannot parse filter {text!r} at position {pos}: {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _FilterParser:
    """``a = 1 AND (b IN ('x','y') OR c IS NULL) AND NOT d BETWEEN 1 AND 5`` -> a pyarrow expression."""

    def __init__(self, text: str, schema: pa.Schema) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.schema = schema

    def _peek(self) -> Optional[str]:
        return self.toks[self.i][1].upper() if self.i < len(self.toks) else None

    def _next(self) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise OptionError(f"filter {self.text!r} ends too early")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def _expect(self, word: str) -> None:
        kind, val = self._next()
        if val.upper() != word:
            raise OptionError(f"filter {self.text!r}: expected {word!r}, found {val!r}")

    def parse(self) -> pc.Expression:
        e = self._or()
        if self.i != len(self.toks):
            raise OptionError(f"filter {self.text!r}: unexpected {self.toks[self.i][1]!r}")
        return e

    def _or(self) -> pc.Expression:
        e = self._and()
        while self._peek() == "OR":
            self.i += 1
            e = e | self._and()
        return e

    def _and(self) -> pc.Expression:
        e = self._not()
        while self._peek() == "AND":
            self.i += 1
            e = e & self._not()
        return e

    def _not(self) -> pc.Expression:
        if self._peek() == "NOT":
            self.i += 1
            return ~self._not()
        return self._predicate()

    def _column(self) -> tuple[pc.Expression, pa.DataType]:
        kind, val = self._next()
        if kind != "id":
            raise OptionError(f"filter {self.text!r}: expected a column name, found {val!r}")
        name = val[1:-1] if val.startswith("`") else val
        idx = self.schema.get_field_index(name)
        if idx < 0:
            raise SchemaError(
                f"filter {self.text!r} names unknown column {name!r}; columns: {self.schema.names}"
            )
        return pc.field(name), self.schema.field(idx).type

    def _literal(self, atype: pa.DataType) -> pc.Expression:
        kind, val = self._next()
        if kind == "str":
            value: Any = val[1:-1].replace("''", "'")
        elif kind == "num":
            value = float(val) if re.search(r"[.eE]", val) else int(val)
        elif val.upper() in ("TRUE", "FALSE"):
            value = val.upper() == "TRUE"
        else:
            raise OptionError(f"filter {self.text!r}: expected a literal, found {val!r}")
        try:
            return pc.scalar(pa.scalar(value).cast(atype))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise OptionError(f"filter {self.text!r}: literal {val} does not fit type {atype}: {e}") from e

    def _predicate(self) -> pc.Expression:
        if self._peek() == "(":
            self.i += 1
            e = self._or()
            self._expect(")")
            return e
        col, atype = self._column()
        word = self._peek()
        negate = False
        if word == "NOT":
            self.i += 1
            negate = True
            word = self._peek()
        if word == "IS":
            self.i += 1
            if self._peek() == "NOT":
                self.i += 1
                self._expect("NULL")
                return ~col.is_null()
            self._expect("NULL")
            return col.is_null()
        if word == "IN":
            self.i += 1
            self._expect("(")
            values = [self._literal(atype)]
            while self._peek() == ",":
                self.i += 1
                values.append(self._literal(atype))
            self._expect(")")
            e = values[0] == col
            for v in values[1:]:
                e = e | (col == v)
            return ~e if negate else e
        if word == "BETWEEN":
            self.i += 1
            lo = self._literal(atype)
            self._expect("AND")
            hi = self._literal(atype)
            e = (col >= lo) & (col <= hi)
            return ~e if negate else e
        if negate:
            raise OptionError(f"filter {self.text!r}: NOT must precede IN, BETWEEN or a predicate")
        _, op = self._next()
        rhs = self._literal(atype)
        ops = {
            "=": col == rhs,
            "<>": col != rhs,
            "!=": col != rhs,
            "<": col < rhs,
            "<=": col <= rhs,
            ">": col > rhs,
            ">=": col >= rhs,
        }
        if op not in ops:
            raise OptionError(f"filter {self.text!r}: unknown operator {op!r}")
        return ops[op]


def parse_filter(flt: Union[str, pc.Expression, None], schema: pa.Schema) -> Optional[pc.Expression]:
    """A pyarrow expression from ``flt``: an expression (returned as is), a SQL-like string, or None."""
    if flt is None or isinstance(flt, pc.Expression):
        return flt
    if not isinstance(flt, str):
        raise TypeError(f"filter must be a string or a pyarrow expression, not {type(flt).__name__}")
    if not flt.strip():
        return None
    return _FilterParser(flt, schema).parse()


# ---- scan modes ------------------------------------------------------------------------------------
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
    """The table's options with dynamic ``overrides`` applied (validated)."""
    merged = dict(store.schema.options)
    merged.update({str(k): str(v) for k, v in overrides.items()})
    return CoreOptions(merged)


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
        if millis is None:
            raise OptionError("scan.mode 'from-timestamp' needs 'scan.timestamp-millis'")
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
        if spec is None:
            raise OptionError(
                "scan.mode 'incremental-between' needs option 'incremental-between' = 'start,end'"
            )
        return ScanStart(None, None, _resolve_between(store, spec))
    raise OptionError(f"scan.mode {mode.value!r} is not supported by the lakelog Flink source")


# ---- rows -------------------------------------------------------------------------------------------
def _struct_to_tuple(v: Any, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return tuple(_struct_to_tuple(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_struct_to_tuple(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return {k: _struct_to_tuple(x, t.item_type) for k, x in v}
    return v


def _needs_fixup(t: pa.DataType) -> bool:
    return (
        pa.types.is_struct(t)
        or pa.types.is_map(t)
        or ((pa.types.is_list(t) or pa.types.is_large_list(t)) and _needs_fixup(t.value_type))
    )


def table_rows(t: pa.Table) -> Iterator[tuple[Any, ...]]:
    """Rows of ``t`` as tuples of Python values (the Flink boundary needs Python objects).

    Timestamps with a time zone become naive UTC; structs become tuples, maps dicts.
    """
    cols: list[list[Any]] = []
    for f, col in zip(t.schema, t.columns):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            col = col.cast(pa.timestamp(f.type.unit))
        values = col.to_pylist()
        if _needs_fixup(f.type):
            values = [_struct_to_tuple(v, f.type) for v in values]
        cols.append(values)
    if not cols:
        return iter(())
    return zip(*cols)


def check_columns(schema: pa.Schema, columns: Optional[Sequence[str]]) -> list[str]:
    if columns is None:
        return list(schema.names)
    unknown = [c for c in columns if schema.get_field_index(c) < 0]
    if unknown:
        raise SchemaError(f"unknown column(s) {unknown}; the table has {schema.names}")
    return list(columns)
