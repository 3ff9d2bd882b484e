"""Which conjuncts of a SQL ``WHERE`` a lakelog read may apply itself (no pyflink).

:func:`lakelog.operators.sql.rewrite.rewrite_table_refs` hands each table that is alone in its
query block the top-level conjuncts of the block's ``WHERE``; the view over the table's source
reads with those it can apply, so that partitions, files (min/max statistics, bloom filters,
bitmaps) and row groups that cannot match are never opened. Flink still applies the whole
``WHERE`` after the read, so a conjunct given to the read must never drop a row that Flink's
comparison keeps. A conjunct is taken only where lakelog's filter (:mod:`lakelog.connector.table.
expressions`) compares exactly as Flink does:

* integer and DECIMAL columns against numeric literals (a literal the column cannot hold exactly
  is refused by the filter, and the conjunct stays Flink's alone);
* VARCHAR/STRING and DATE columns against string literals, BOOLEAN columns against TRUE/FALSE;
* ``IS [NOT] NULL`` on any column of those types and of the others.

Not taken: FLOAT/DOUBLE columns (Flink widens a FLOAT to DOUBLE where lakelog rounds the literal to
the column's type), CHAR (Flink pads to the length), TIME and TIMESTAMP columns (a literal's
precision and time zone), functions, arithmetic, ``LIKE``, and any conjunct naming a column of
another table or a computed column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pyarrow as pa

from lakelog.connector.errors import LakelogError
from lakelog.connector.format.types import DataField, fields_to_arrow_schema
from lakelog.connector.table.expressions import filter_tokens, parse_filter

__all__ = ["pushed_filter"]

# the kinds of literal a column of a type may be compared with, as Flink compares them
_LITERALS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL"), frozenset({"num"})),
    "VARCHAR": frozenset({"str"}),
    "DATE": frozenset({"str"}),
    "BOOLEAN": frozenset({"bool"}),
}
_WORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN"}


def _pushable(conjunct: str, roots: Mapping[str, str], schema: pa.Schema) -> bool:
    """Whether ``conjunct`` compares only columns of ``roots`` (name -> type root) with literals as
    Flink does, and parses as a filter on ``schema``."""
    try:
        toks = filter_tokens(conjunct)
    except LakelogError:
        return False
    # every predicate of the filter's grammar is ``column op literal(s)``: a literal is compared with
    # the last column before it
    column: Optional[str] = None
    for kind, text in toks:
        literal = {"str": "str", "num": "num"}.get(kind)
        if kind == "id":
            name = text[1:-1] if text.startswith("`") else text
            if name in roots:
                column = name
                continue
            if text.upper() in ("TRUE", "FALSE"):
                literal = "bool"
            elif text.upper() not in _WORDS:
                return False
        if literal is not None and (column is None or literal not in _LITERALS.get(roots[column], ())):
            return False
    if column is None:
        return False
    try:
        parse_filter(conjunct, schema)
    except LakelogError:
        return False
    return True


def pushed_filter(conjuncts: Sequence[str], fields: Sequence[DataField]) -> Optional[str]:
    """The filter (a string for :func:`~lakelog.connector.table.expressions.parse_filter`) of the
    ``conjuncts`` a read of a table of ``fields`` may apply; None if there is none."""
    roots = {f.name: f.type.root for f in fields}
    schema = fields_to_arrow_schema(list(fields))
    kept = [c for c in conjuncts if _pushable(c, roots, schema)]
    return " AND ".join(f"({c})" for c in kept) if kept else None
