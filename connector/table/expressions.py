"""Filters as users write them: a SQL-like string (``a = 1 AND (b IN ('x','y') OR c IS NULL)``) or
a pyarrow expression, accepted wherever a table read takes a filter.

A literal of a string filter becomes a value of its column's type as a write would store it
(:func:`~lakelog.connector.table.coercion.coerce_value`): exactly, or the filter is refused naming
the column, the literal and the type. ``p = 1.054`` on a ``DECIMAL(5, 2)`` column is refused (it
would otherwise be rounded to 1.05 and choose those rows), ``p > 1`` compares with 1.00, ``b = 300``
on a TINYINT and a 30-digit integer on a BIGINT are refused, and so is a timestamp with digits below
the column's precision. Numeric literals are read exactly (``decimal.Decimal``) for DECIMAL and
integer columns; for floating-point columns a literal with a point or exponent means the nearest
float, as in SQL.

A pyarrow expression is used as given (Arrow compares its literals with the column, converting
the column, not the literal); one that cannot be applied to the table's columns (an unknown column,
an integer literal against a DECIMAL column, which Arrow cannot compare) is refused when the read
is made, naming the expression.
"""

from __future__ import annotations

import decimal
import re
from typing import Any, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import ArgumentTypeError, OptionError, SchemaError
from lakelog.connector.format.types import from_arrow_type
from lakelog.connector.table.coercion import coerce_value

__all__ = ["parse_filter", "filter_tokens"]


_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<id>`[^`]+`|[A-Za-z_]\w*)"
    r"|(?P<op><>|!=|<=|>=|=|<|>|\(|\)|,))"
)


def filter_tokens(text: str) -> list[tuple[str, str]]:
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
        self.toks = filter_tokens(text)
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

    def _column(self) -> tuple[str, pa.DataType]:
        kind, val = self._next()
        if kind != "id":
            raise OptionError(f"filter {self.text!r}: expected a column name, found {val!r}")
        name = val[1:-1] if val.startswith("`") else val
        idx = self.schema.get_field_index(name)
        if idx < 0:
            raise SchemaError(
                f"filter {self.text!r} names unknown column {name!r}; columns: {self.schema.names}"
            )
        return name, self.schema.field(idx).type

    def _literal(self, column: str, atype: pa.DataType) -> pc.Expression:
        kind, val = self._next()
        if kind == "str":
            value: Any = val[1:-1].replace("''", "'")
        elif kind == "num":
            value = _number(val, atype)
        elif val.upper() in ("TRUE", "FALSE"):
            value = val.upper() == "TRUE"
        else:
            raise OptionError(f"filter {self.text!r}: expected a literal, found {val!r}")
        try:
            # the Paimon type as the Arrow type tells it: lengths of CHAR/VARCHAR do not limit a
            # comparison, and a write checks no more of a timestamp than its Arrow unit
            t = from_arrow_type(atype, column=column)
            return pc.scalar(coerce_value(value, atype, t, column, what="literal", shown=val))
        except SchemaError as e:
            raise OptionError(f"filter {self.text!r}: {e}") from None

    def _predicate(self) -> pc.Expression:
        if self._peek() == "(":
            self.i += 1
            e = self._or()
            self._expect(")")
            return e
        name, atype = self._column()
        col = pc.field(name)
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
            values = [self._literal(name, atype)]
            while self._peek() == ",":
                self.i += 1
                values.append(self._literal(name, atype))
            self._expect(")")
            e = values[0] == col
            for v in values[1:]:
                e = e | (col == v)
            return ~e if negate else e
        if word == "BETWEEN":
            self.i += 1
            lo = self._literal(name, atype)
            self._expect("AND")
            hi = self._literal(name, atype)
            e = (col >= lo) & (col <= hi)
            return ~e if negate else e
        if negate:
            raise OptionError(f"filter {self.text!r}: NOT must precede IN, BETWEEN or a predicate")
        _, op = self._next()
        rhs = self._literal(name, atype)
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


_INT64 = (-(2**63), 2**63 - 1)


def _number(text: str, atype: pa.DataType) -> Any:
    """A numeric literal as the Python value whose conversion to ``atype`` is exact or refused:
    ``Decimal`` for DECIMAL columns and for literals with a point, exponent or more digits than an
    int64 holds (against integer columns too, so ``1.00000000000000000001`` is no 1); an ``int``
    for the others; a ``float`` for floating-point columns when the literal has a point or exponent."""
    integral = re.fullmatch(r"-?\d+", text) is not None
    if pa.types.is_floating(atype) and not integral:
        return float(text)
    if integral and not pa.types.is_decimal(atype):
        v = int(text)
        if _INT64[0] <= v <= _INT64[1]:
            return v
    return decimal.Decimal(text)


def parse_filter(flt: Union[str, pc.Expression, None], schema: pa.Schema) -> Optional[pc.Expression]:
    """A pyarrow expression from ``flt``: an expression (checked against ``schema``, returned as
    is), a SQL-like string, or None."""
    if flt is None:
        return None
    if isinstance(flt, pc.Expression):
        _check_expression(flt, schema)
        return flt
    if not isinstance(flt, str):
        raise ArgumentTypeError(
            f"argument 'filter' must be a string or a pyarrow expression, not {type(flt).__name__}"
        )
    if not flt.strip():
        return None
    return _FilterParser(flt, schema).parse()


def _check_expression(expr: pc.Expression, schema: pa.Schema) -> None:
    """Refuse an expression that cannot be applied to rows of ``schema`` (Arrow binds it to an
    empty table: no rows are read), naming it, instead of failing in the middle of a read."""
    try:
        schema.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        hint = ""
        if "Precision is not great enough" in str(e):
            hint = (
                "; Arrow does not compare a DECIMAL column with an integer literal: give a decimal, "
                "e.g. pc.scalar(decimal.Decimal('1')), or the filter as a string ('p > 1')"
            )
        raise OptionError(
            f"filter {expr} cannot be applied to the columns {schema.names}: {e}{hint}"
        ) from None
