"""Results of the statements lakelog runs itself (DDL, ``CALL``, ``SHOW PARTITIONS``, ``SET``),
printed as Flink prints its own: ``OK``, or a table. No pyflink."""

from __future__ import annotations

import datetime
import decimal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TextIO

__all__ = ["SqlResult", "format_table", "cell_text"]


def cell_text(v: Any) -> str:
    """A value as Flink's tableau output shows it (``<NULL>`` for null)."""
    if v is None:
        return "<NULL>"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, datetime.datetime):
        text = v.isoformat(sep=" ")
        return text
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray)):
        return "x'" + bytes(v).hex() + "'"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(cell_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{cell_text(k)}={cell_text(x)}" for k, x in v.items()) + "}"
    return str(v)


def format_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, kinds: Optional[Sequence[str]] = None
) -> str:
    """Rows as Flink's tableau table (``+----+``), with an ``op`` column when ``kinds`` is given."""
    cols = list(columns)
    cells = [[cell_text(v) for v in r] for r in rows]
    if kinds is not None:
        cols = ["op", *cols]
        cells = [[k, *r] for k, r in zip(kinds, cells)]
    if not cols:
        return "Empty set"
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(c.rjust(w) for c, w in zip(cols, widths)) + " |", line]
    out += ["| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |" for r in cells]
    out.append(line)
    out.append(f"{len(rows)} row{'' if len(rows) == 1 else 's'} in set" if rows else "Empty set")
    return "\n".join(out)


@dataclass
class SqlResult:
    """A statement's result: a message (``OK``) or columns and rows."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    message: Optional[str] = None

    @staticmethod
    def ok(message: str = "OK") -> SqlResult:
        return SqlResult(message=message)

    @staticmethod
    def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> SqlResult:
        return SqlResult(list(columns), [tuple(r) for r in rows])

    def text(self) -> str:
        if self.message is not None:
            return self.message
        return format_table(self.columns, self.rows)

    def print(self, out: Optional[TextIO] = None) -> None:
        print(self.text(), file=out or sys.stdout, flush=True)

    def collect(self) -> list[tuple[Any, ...]]:
        return list(self.rows)
