"""A row-at-a-time reference of Paimon's merge functions, used as the oracle of test_merge_engine.

It follows Paimon's ``MergeFunction.add`` / ``getResult`` fold literally (one row at a time, Java's
integer wrap-around, float32 arithmetic, nulls-first sequence comparison) and shares no code with
``lakelog.connector.lsm.merge.engine``.
"""

from __future__ import annotations

import math
import struct
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any, Optional

import numpy as np

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def is_retract(kind: int) -> bool:
    return kind in (UPDATE_BEFORE, DELETE)


# ---- Java arithmetic -------------------------------------------------------------------------------

_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


def wrap(v: int, root: str) -> int:
    bits = _BITS[root]
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def f32(x: float) -> float:
    return float(np.float32(x))


def java_div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def double_key(x: float) -> int:
    if math.isnan(x):
        x = float("nan")
        return 0x7FF8000000000000
    bits = struct.unpack(">q", struct.pack(">d", x))[0]
    return bits ^ 0x7FFFFFFFFFFFFFFF if bits < 0 else bits


def java_compare(a: Any, b: Any, root: str) -> int:
    if root in ("FLOAT", "DOUBLE"):
        ka, kb = double_key(a), double_key(b)
        return (ka > kb) - (ka < kb)
    if isinstance(a, str):
        ea, eb = a.encode(), b.encode()
        return (ea > eb) - (ea < eb)
    return (a > b) - (a < b)


def is_blank(s: Optional[str]) -> bool:
    return s is None or s.strip() == ""


# ---- field aggregators -------------------------------------------------------------------------------


class Agg:
    retractable = False

    def __init__(self, root: str, opts: dict[str, Any]) -> None:
        self.root = root
        self.opts = opts

    def reset(self) -> None:
        pass

    def agg(self, acc: Any, x: Any) -> Any:
        raise NotImplementedError

    def agg_reversed(self, acc: Any, x: Any) -> Any:
        return self.agg(x, acc)

    def retract(self, acc: Any, x: Any) -> Any:
        raise RuntimeError(f"retract not supported by {type(self).__name__}")


class Sum(Agg):
    retractable = True

    def _op(self, a: Any, b: Any, sign: int) -> Any:
        if self.root == "FLOAT":
            return f32(a + sign * b)
        if self.root == "DOUBLE":
            return a + sign * b
        if self.root == "DECIMAL":
            p, s = self.opts["precision"], self.opts["scale"]
            r = a + sign * b
            return None if len(r.as_tuple().digits) > p and r != 0 else r.quantize(Decimal(1).scaleb(-s))
        return wrap(a + sign * b, self.root)

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        return self._op(acc, x, 1)

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            if acc is None:
                if x is None:
                    return None
                if self.root in _BITS:
                    return wrap(-x, self.root)
                return -x
            return acc
        return self._op(acc, x, -1)


class Product(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        if self.root == "FLOAT":
            return f32(acc * x)
        if self.root == "DOUBLE":
            return acc * x
        if self.root == "DECIMAL":
            with localcontext() as c:
                c.prec = 120
                r = (acc * x).quantize(Decimal(1).scaleb(-self.opts["scale"]), rounding=ROUND_HALF_UP)
            return None if r != 0 and len(r.as_tuple().digits) > self.opts["precision"] else r
        return wrap(acc * x, self.root)

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return acc
        if self.root == "DECIMAL":
            with localcontext() as c:
                c.prec = 120
                r = (acc / x).quantize(Decimal(1).scaleb(-self.opts["scale"]), rounding=ROUND_HALF_UP)
            return None if r != 0 and len(r.as_tuple().digits) > self.opts["precision"] else r
        with np.errstate(all="ignore"):
            if self.root == "FLOAT":
                return float(np.float32(acc) / np.float32(x))
            if self.root == "DOUBLE":
                return float(np.float64(acc) / np.float64(x))
        return wrap(java_div(acc, x), self.root)


class Count(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return 1 if acc is None else acc
        return wrap(acc + 1, self.root)

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return 1 if acc is None else acc
        return wrap(acc - 1, self.root)


class Max(Agg):
    sign = 1

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        return x if self.sign * java_compare(acc, x, self.root) < 0 else acc


class Min(Max):
    sign = -1


class LastValue(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        return x

    def retract(self, acc: Any, x: Any) -> Any:
        return None


class PrimaryKey(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        return x

    def retract(self, acc: Any, x: Any) -> Any:
        return x


class LastNonNull(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        return acc if x is None else x

    def retract(self, acc: Any, x: Any) -> Any:
        return acc if x is None else None


class FirstValue(Agg):
    def reset(self) -> None:
        self.init = False

    def agg(self, acc: Any, x: Any) -> Any:
        if not self.init:
            self.init = True
            return x
        return acc


class FirstNonNull(Agg):
    def reset(self) -> None:
        self.init = False

    def agg(self, acc: Any, x: Any) -> Any:
        if not self.init and x is not None:
            self.init = True
            return x
        return acc


class BoolAnd(Agg):
    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        return acc and x


class BoolOr(Agg):
    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        return acc or x


class ListAgg(Agg):
    def _split(self, s: str) -> list[str]:
        d = self.opts.get("delimiter", ",")
        return s.split() if d == "" else s.split(d)

    def agg(self, acc: Any, x: Any) -> Any:
        if is_blank(x):
            return acc
        if is_blank(acc):
            return x
        d = self.opts.get("delimiter", ",")
        if not self.opts.get("distinct"):
            return acc + d + x
        seen = set(self._split(acc))
        out = [acc]
        for tok in self._split(x):
            if is_blank(tok) or tok in seen:
                continue
            seen.add(tok)
            out.append(tok)
        return d.join(out)


class Collect(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None and x is None:
            return None
        distinct = self.opts.get("distinct")
        if (acc is None or x is None) and not distinct:
            return x if acc is None else acc
        if distinct:
            out: list[Any] = []
            for part in (acc, x):
                for e in part or []:
                    if e not in out:
                        out.append(e)
            return out
        return list(acc) + list(x)

    def agg_reversed(self, acc: Any, x: Any) -> Any:
        return self.agg(acc, x)

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None:
            return None
        if x is None or len(x) == 0:
            return acc
        pending = list(x)
        out = []
        for e in acc:
            if e in pending:
                pending.remove(e)
            else:
                out.append(e)
        return out


class MergeMap(Agg):
    retractable = True

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        out = dict(acc)
        out.update(dict(x))
        return list(out.items())

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None or len(x) == 0:
            return acc
        drop = {k for k, _ in x}
        return [(k, v) for k, v in dict(acc).items() if k not in drop]


class MergeMapWithKeyTime(Agg):
    """Paimon's FieldMergeMapWithKeyTimeAgg, row by row: a key's first map is taken whole; in later
    maps a null value removes the key, a null timestamp is skipped, a timestamp replaces the held
    entry if that has none or a smaller one (Java's String.compareTo: UTF-16 code units)."""

    def __init__(self, root: str, opts: dict[str, Any]) -> None:
        super().__init__(root, opts)
        self.ts = opts.get("ts_field", "ts")

    def agg(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return x if acc is None else acc
        out = dict(acc)
        for k, row in x:
            if row is None:
                out.pop(k, None)
            elif row[self.ts] is not None:
                held = out.get(k)
                if held is None or held[self.ts] is None or (
                        row[self.ts].encode("utf-16-be") > held[self.ts].encode("utf-16-be")):
                    out[k] = row
        return list(out.items())


class NestedUpdate(Agg):
    """Paimon's FieldNestedUpdateAgg (1.4+: existing keys are updated at the count limit), rows in
    the order their keys first arrived (Paimon's HashMap has no order)."""

    retractable = True

    def __init__(self, root: str, opts: dict[str, Any]) -> None:
        super().__init__(root, opts)
        self.keys = list(opts.get("nested_key") or [])
        self.limit = opts.get("count_limit") or 2**31 - 1

    def _key(self, row: dict) -> tuple:
        return tuple(row[k] for k in self.keys)

    def agg(self, acc: Any, x: Any) -> Any:
        if x is None:
            return acc
        if not self.keys:
            if acc is None:
                return [r for r in x if r is not None][: self.limit]
            if len(acc) >= self.limit:
                return acc
            return [r for r in acc if r is not None] + [r for r in x if r is not None][: self.limit - len(acc)]
        rows: dict[tuple, dict] = {}
        for r in acc or []:
            if r is not None:
                rows[self._key(r)] = r
        for r in x:
            if r is not None and (self._key(r) in rows or len(rows) < self.limit):
                rows[self._key(r)] = r
        return list(rows.values())

    def retract(self, acc: Any, x: Any) -> Any:
        if acc is None or x is None:
            return acc
        gone = [r for r in x if r is not None]
        if not self.keys:
            return [r for r in acc if r is not None and r not in gone]
        keys = {self._key(r) for r in gone}
        return [r for r in acc if r is not None and self._key(r) not in keys]


class NestedPartialUpdate(Agg):
    """Paimon's FieldNestedPartialUpdateAgg: one row per nested key, each field the last non-null
    value; rows in the order their keys first arrived (Paimon's HashMap has no order)."""

    def __init__(self, root: str, opts: dict[str, Any]) -> None:
        super().__init__(root, opts)
        self.keys = list(opts.get("nested_key") or [])

    def agg(self, acc: Any, x: Any) -> Any:
        if x is None:
            return acc
        out: dict[tuple, dict] = {}
        for r in [r for r in (acc or []) if r is not None] + [r for r in x if r is not None]:
            row = out.setdefault(tuple(r[k] for k in self.keys), {k: None for k in r})
            for k, v in r.items():
                if v is not None:
                    row[k] = v
        return list(out.values())


class IgnoreRetract(Agg):
    def __init__(self, inner: Agg) -> None:
        self.inner = inner
        self.retractable = True

    def reset(self) -> None:
        self.inner.reset()

    def agg(self, acc: Any, x: Any) -> Any:
        return self.inner.agg(acc, x)

    def retract(self, acc: Any, x: Any) -> Any:
        return acc


AGGS: dict[str, type[Agg]] = {
    "sum": Sum, "product": Product, "count": Count, "max": Max, "min": Min, "last_value": LastValue,
    "last_non_null_value": LastNonNull, "first_value": FirstValue, "first_non_null_value": FirstNonNull,
    "bool_and": BoolAnd, "bool_or": BoolOr, "listagg": ListAgg, "collect": Collect, "merge_map": MergeMap,
    "merge_map_with_keytime": MergeMapWithKeyTime,
    "primary-key": PrimaryKey, "nested_update": NestedUpdate, "nested_partial_update": NestedPartialUpdate,
}


def make_agg(name: str, root: str, opts: dict[str, Any]) -> Agg:
    a = AGGS[name](root, opts)
    return IgnoreRetract(a) if opts.get("ignore_retract") else a


class RetractNotSupported(Exception):
    pass


def _retract(agg: Agg, acc: Any, x: Any) -> Any:
    if not agg.retractable:
        raise RetractNotSupported
    return agg.retract(acc, x)


# ---- merge functions ------------------------------------------------------------------------------------
# A field spec: (name, root, nullable). Rows: (kind, values tuple). Results: (kind, values) or None.


class Aggregation:
    def __init__(self, fields: list[tuple[str, str, bool]], aggs: list[Agg], remove_on_delete: bool) -> None:
        self.fields = fields
        self.aggs = aggs
        self.remove_on_delete = remove_on_delete

    def merge(self, rows: list[tuple[int, tuple[Any, ...]]]) -> tuple[int, list[Any]]:
        n = len(self.fields)
        row: list[Any] = [None] * n
        for a in self.aggs:
            a.reset()
        delete = False
        for kind, value in rows:
            delete = self.remove_on_delete and kind == DELETE
            if delete:
                row = [value[i] if not self.fields[i][2] else None for i in range(n)]
                continue
            for i, a in enumerate(self.aggs):
                row[i] = _retract(a, row[i], value[i]) if is_retract(kind) else a.agg(row[i], value[i])
        return (DELETE if delete else INSERT), row


class PartialUpdate:
    def __init__(self, fields: list[tuple[str, str, bool]], groups: dict[int, tuple[int, ...]],
                 aggs: dict[int, Agg], ignore_delete: bool, remove_on_delete: bool,
                 partial_delete: set[int]) -> None:
        self.fields = fields
        self.groups = groups  # field index -> its group's sequence field indexes
        self.aggs = aggs
        self.ignore_delete = ignore_delete
        self.remove_on_delete = remove_on_delete
        self.partial_delete = partial_delete

    def _init_row(self, value: tuple[Any, ...]) -> None:
        for i, (_, _, nullable) in enumerate(self.fields):
            if not nullable:
                self.row[i] = value[i]

    def _compare(self, seq: tuple[int, ...], value: tuple[Any, ...]) -> int:
        for i in seq:
            a, b = value[i], self.row[i]
            if a is None and b is None:
                continue
            if a is None:
                return -1
            if b is None:
                return 1
            c = java_compare(a, b, self.fields[i][1])
            if c:
                return c
        return 0

    def _empty(self, seq: tuple[int, ...], value: tuple[Any, ...], processed: list[bool]) -> bool:
        if any(value[i] is not None for i in seq):
            return False
        for i in seq:
            processed[i] = True
        return True

    def merge(self, rows: list[tuple[int, tuple[Any, ...]]]) -> tuple[int, list[Any]]:
        n = len(self.fields)
        self.row: list[Any] = [None] * n
        for a in self.aggs.values():
            a.reset()
        meet_insert = False
        filled = False
        delete = False
        for kind, value in rows:
            delete = False
            if is_retract(kind):
                if not filled:
                    self._init_row(value)
                    filled = True
                if self.ignore_delete:
                    continue
                if self.groups:
                    delete = self._retract(kind, value)
                    continue
                if self.remove_on_delete:
                    if kind == DELETE:
                        delete = True
                        self.row = [None] * n
                        self._init_row(value)
                    continue
                raise RetractNotSupported
            if not self.groups:
                for i in range(n):
                    if value[i] is not None:
                        self.row[i] = value[i]
            else:
                self._update(value)
            meet_insert = True
            filled = True
        return (DELETE if delete or not meet_insert else INSERT), self.row

    def _update(self, value: tuple[Any, ...]) -> None:
        processed = [False] * len(self.fields)
        for i in range(len(self.fields)):
            seq = self.groups.get(i)
            agg = self.aggs.get(i)
            acc = self.row[i]
            if seq is not None:
                if processed[i] or self._empty(seq, value, processed):
                    continue
                if self._compare(seq, value) >= 0:
                    if i in seq:
                        for j in seq:
                            self.row[j] = value[j]
                            processed[j] = True
                        continue
                    self.row[i] = value[i] if agg is None else agg.agg(acc, value[i])
                elif agg is not None:
                    self.row[i] = agg.agg_reversed(acc, value[i])
            else:
                if agg is not None:
                    self.row[i] = agg.agg(acc, value[i])
                elif value[i] is not None:
                    self.row[i] = value[i]

    def _retract(self, kind: int, value: tuple[Any, ...]) -> bool:
        updated: set[int] = set()
        processed = [False] * len(self.fields)
        for i in range(len(self.fields)):
            seq = self.groups.get(i)
            agg = self.aggs.get(i)
            if seq is None:
                continue
            if processed[i] or self._empty(seq, value, processed):
                continue
            if self._compare(seq, value) >= 0:
                if i in seq:
                    for j in seq:
                        if j not in updated:
                            if kind == DELETE and j in self.partial_delete:
                                self.row = [None] * len(self.fields)
                                self._init_row(value)
                                return True
                            self.row[j] = value[j]
                            updated.add(j)
                        processed[j] = True
                elif agg is None:
                    self.row[i] = None
                else:
                    self.row[i] = _retract(agg, self.row[i], value[i])
            elif agg is not None:
                self.row[i] = _retract(agg, self.row[i], value[i])
        return False


def deduplicate(rows: list[tuple[int, tuple[Any, ...]]], ignore_delete: bool) -> Optional[tuple[int, Any]]:
    kept = [r for r in rows if not (ignore_delete and is_retract(r[0]))]
    if not kept:
        return None
    kind, value = kept[-1]
    return (DELETE if is_retract(kind) else INSERT), list(value)


def first_row(rows: list[tuple[int, tuple[Any, ...]]], ignore_delete: bool) -> Optional[tuple[int, Any]]:
    for kind, value in rows:
        if is_retract(kind):
            if not ignore_delete:
                raise RetractNotSupported
            continue
        return INSERT, list(value)
    return None
