"""The point constraints of a read filter: the values a column must take for a row to match.

``a = 5 AND s IN ('x', 'y')`` constrains ``a`` to {5} and ``s`` to {'x', 'y'}; a file whose index
says it holds none of a column's values can be skipped. pyarrow expressions expose no structure, so
the constraints are read from the expression's text, and every piece read is checked by rendering
the expression it stands for again and comparing the text: a filter whose pieces do not render back
exactly (an unfamiliar function, a literal printed in another way) constrains nothing, which is
always safe (no file is skipped for it).

Only conjunctions and disjunctions of ``column == literal`` and ``is_in(column, [...])`` constrain;
``OR`` keeps a column's constraint only when both sides constrain it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["point_values"]

Constraints = dict[str, list[Any]]  # column -> allowed values (as parsed: python values)
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def point_values(expr: Optional[pc.Expression], schema: pa.Schema) -> dict[str, pa.Array]:
    """Column -> the values (an array of the column's type) that ``expr`` allows, for the columns it
    pins to finitely many values; {} when it pins none (or cannot be read safely)."""
    if expr is None:
        return {}
    try:
        found, rest = _parse(str(expr))
    except (ValueError, IndexError, TypeError, OverflowError, pa.ArrowException):
        return {}  # a filter read wrongly must never skip a file: no constraint
    if found is None or rest.strip():
        return {}
    out: dict[str, pa.Array] = {}
    for column, values in found.items():
        idx = schema.get_field_index(column)
        if idx < 0 or not values:
            continue
        try:
            arr = pa.array(values).cast(schema.field(idx).type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            continue  # a literal the column cannot hold exactly: do not guess
        out[column] = arr
    return out


def _parse(text: str) -> tuple[Optional[Constraints], str]:
    """(constraints of the term at the start of ``text``, None when it constrains nothing known;
    the text after the term). pyarrow parenthesises every binary operation."""
    text = text.lstrip()
    if text.startswith("is_in("):
        return _is_in(text)
    if not text.startswith("("):
        return None, text[_term_end(text) :]
    inner = text[1:].lstrip()
    if inner.startswith(("(", "is_in(")) or not re.match(_NAME, inner) and not inner.startswith(('"', "-")) \
            and not inner[:1].isdigit():
        left, rest = _parse(inner)
        rest = rest.lstrip()
        for word in ("and", "or"):
            if rest.startswith(word + " "):
                right, rest = _parse(rest[len(word) + 1 :])
                rest = rest.lstrip()
                if not rest.startswith(")"):
                    raise ValueError("unbalanced")
                return _combine(word, left, right), rest[1:]
        if rest.startswith(")"):
            return left, rest[1:]
        raise ValueError("unexpected text")
    end = _term_end(text)  # a comparison, or another operation on a column: one term
    return _comparison(text[:end]), text[end:]


def _comparison(term: str) -> Optional[Constraints]:
    """``(a == literal)`` or ``(literal == a)``; None for any other term."""
    body = term[1:-1]
    m = re.fullmatch(rf"({_NAME}) == (.+)", body, re.S)
    if m:
        column, lit = m.group(1), m.group(2)
    else:
        m = re.fullmatch(rf"(.+) == ({_NAME})", body, re.S)
        if m is None:
            return None
        lit, column = m.group(1), m.group(2)
    value = _literal(lit)
    if value is _OPAQUE or not _renders(term, column, value):
        return None
    return {column: [value]}


def _term_end(text: str) -> int:
    """The end of the balanced term at the start of ``text`` (strings skipped)."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            if depth == 0:
                return i
            depth -= 1
            if depth == 0:
                return i + 1
        elif depth == 0 and ch == " ":
            return i
        i += 1
    return n


_OPAQUE = object()


def _literal(text: str) -> Any:
    """A whole printed literal: a JSON string or a number; anything else is opaque."""
    if text.startswith('"'):
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return _OPAQUE
        return value if end == len(text) and isinstance(value, str) else _OPAQUE
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+([eE][-+]?\d+)?|-?\d+[eE][-+]?\d+", text):
        return float(text)
    return _OPAQUE


def _renders(text: str, column: str, value: Any) -> bool:
    """Whether ``column == value`` (either side first) prints as ``text``."""
    try:
        scalar = pc.scalar(value)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return False  # e.g. an integer beyond 64 bits (a DECIMAL literal): no guess
    return text in (str(pc.field(column) == scalar), str(scalar == pc.field(column)))


def _is_in(text: str) -> tuple[Optional[Constraints], str]:
    m = re.match(rf"is_in\(({_NAME}), \{{value_set=(\w+):\[", text)
    if m is None:
        return None, text[_term_end(text) :]
    close = text.find("], null_matching_behavior=", m.end())
    end = text.find("})", close)
    if close < 0 or end < 0:
        raise ValueError("unterminated is_in")
    body = text[m.end() : close]
    values = [v for v in (json.loads(x) for x in _split_items(body))]
    whole = text[: end + 2]
    column = m.group(1)
    try:
        arr = pa.array(values, type=_arrow_type(m.group(2)))
        ok = str(pc.field(column).isin(arr)) == whole
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
        ok = False
    if not ok or any(v is None for v in values):
        return None, text[end + 2 :]
    return {column: values}, text[end + 2 :]


def _arrow_type(name: str) -> pa.DataType:
    types = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
             "double": pa.float64(), "float": pa.float32(), "string": pa.string()}
    if name not in types:
        raise ValueError(name)
    return types[name]


def _split_items(body: str) -> list[str]:
    """The printed items of a value set (one per line, comma-separated)."""
    items = []
    for line in body.split("\n"):
        line = line.strip().rstrip(",").strip()
        if line:
            items.append(line)
    return items


def _combine(op: str, left: Optional[Constraints], right: Optional[Constraints]) -> Optional[Constraints]:
    if op == "and":
        if left is None:
            return right
        if right is None:
            return left
        out = dict(left)
        for c, vals in right.items():
            out[c] = [v for v in out[c] if v in vals] if c in out else list(vals)
        return out
    if left is None or right is None:
        return None
    shared = {c: left[c] + [v for v in right[c] if v not in left[c]] for c in left if c in right}
    return shared or None
