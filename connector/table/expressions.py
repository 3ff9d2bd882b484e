"""Filters as users write them: a SQL-like string (``a = 1 AND (b IN ('x','y') OR c IS NULL)``) or
a pyarrow expression, accepted wherever a table read takes a filter."""

from __future__ import annotations

import re
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError, SchemaError

__all__ = ["parse_filter"]


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
