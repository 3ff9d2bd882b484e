"""A lakelog table as Flink sees it, and back: Flink's computed columns and watermark stored as
Paimon stores them, and the ``CREATE TABLE`` text that shows a stored table to Flink. No pyflink.

Paimon's Flink catalog keeps only physical columns as fields; the others and the watermark become
table options in the schema (``FlinkCatalog``/``FlinkDescriptorProperties``), with ``N`` the
column's position among *all* Flink columns:

- computed column: ``schema.N.name``, ``schema.N.data-type``, ``schema.N.expr`` (the expression's
  serializable SQL, e.g. ```price` * 2``), optional ``schema.N.comment``;
- watermark: ``schema.watermark.0.rowtime``, ``schema.watermark.0.strategy.expr``,
  ``schema.watermark.0.strategy.data-type``.

Flink sees the table without these keys, with the columns and watermark they describe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.types import type_to_string

__all__ = [
    "ComputedColumn",
    "Watermark",
    "quote_ident",
    "quote_str",
    "schema_options",
    "read_schema_options",
    "is_schema_option",
    "create_table_ddl",
]

_PREFIX = "schema."
_COLUMN_KEY = re.compile(r"^schema\.(\d+)\.(name|data-type|expr|comment|metadata|virtual)$")
_WM = "schema.watermark.0."


@dataclass(frozen=True)
class ComputedColumn:
    """A computed column at ``position`` among all of the table's columns."""

    position: int
    name: str
    data_type: str
    expr: str
    comment: Optional[str] = None


@dataclass(frozen=True)
class Watermark:
    rowtime: str
    expr: str
    data_type: str


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_schema_option(key: str) -> bool:
    """Whether ``key`` is one of the options that hold Flink's non-physical columns or watermark."""
    return key.startswith(_PREFIX)


def schema_options(columns: Sequence[ComputedColumn], watermark: Optional[Watermark]) -> dict[str, str]:
    """The table options storing ``columns`` and ``watermark``."""
    out: dict[str, str] = {}
    for c in columns:
        out[f"schema.{c.position}.name"] = c.name
        out[f"schema.{c.position}.data-type"] = c.data_type
        out[f"schema.{c.position}.expr"] = c.expr
        if c.comment:
            out[f"schema.{c.position}.comment"] = c.comment
    if watermark is not None:
        out[_WM + "rowtime"] = watermark.rowtime
        out[_WM + "strategy.expr"] = watermark.expr
        out[_WM + "strategy.data-type"] = watermark.data_type
    return out


def read_schema_options(
    options: Mapping[str, str], physical: Sequence[str]
) -> tuple[list[ComputedColumn], Optional[Watermark]]:
    """The computed columns (by position) and watermark stored in ``options``; entries that name a
    physical column (older Paimon versions stored those too) are skipped."""
    by_pos: dict[int, dict[str, str]] = {}
    for k, v in options.items():
        m = _COLUMN_KEY.match(k)
        if m:
            by_pos.setdefault(int(m.group(1)), {})[m.group(2)] = v
    columns = []
    names = set(physical)
    for pos in sorted(by_pos):
        d = by_pos[pos]
        if "name" not in d or d["name"] in names or "expr" not in d:
            continue
        columns.append(ComputedColumn(pos, d["name"], d.get("data-type", ""), d["expr"], d.get("comment")))
    wm = None
    if _WM + "rowtime" in options and _WM + "strategy.expr" in options:
        wm = Watermark(
            options[_WM + "rowtime"],
            options[_WM + "strategy.expr"],
            options.get(_WM + "strategy.data-type", ""),
        )
    return columns, wm


def create_table_ddl(
    qualified: str, schema: TableSchema, *, extra_options: Optional[Mapping[str, str]] = None
) -> str:
    """``CREATE TABLE qualified (...)`` showing ``schema`` to Flink: the physical columns with their
    types and comments, the computed columns at their positions, the watermark, the primary key,
    the partition keys, the comment and the options (without the ``schema.*`` keys)."""
    computed, watermark = read_schema_options(schema.options, schema.field_names)
    physical = [
        f"{quote_ident(f.name)} {type_to_string(f.type)}"
        + (f" COMMENT {quote_str(f.description)}" if f.description else "")
        for f in schema.fields
    ]
    columns: list[str] = []
    at = {c.position: c for c in computed}
    rest = iter(physical)
    total = len(physical) + len(computed)
    for pos in range(total):
        c = at.get(pos)
        if c is not None:
            columns.append(
                f"{quote_ident(c.name)} AS {c.expr}"
                + (f" COMMENT {quote_str(c.comment)}" if c.comment else "")
            )
        else:
            columns.append(next(rest, ""))
    columns = [c for c in columns if c] + list(rest)
    if watermark is not None:
        columns.append(f"WATERMARK FOR {quote_ident(watermark.rowtime)} AS {watermark.expr}")
    if schema.primary_keys:
        columns.append("PRIMARY KEY (" + ", ".join(map(quote_ident, schema.primary_keys)) + ") NOT ENFORCED")
    ddl = f"CREATE TABLE {qualified} (\n  " + ",\n  ".join(columns) + "\n)"
    if schema.comment:
        ddl += f" COMMENT {quote_str(schema.comment)}"
    if schema.partition_keys:
        ddl += " PARTITIONED BY (" + ", ".join(map(quote_ident, schema.partition_keys)) + ")"
    options = {k: v for k, v in schema.options.items() if not is_schema_option(k)}
    options.update(extra_options or {})
    if options:
        ddl += (
            " WITH (\n  "
            + ",\n  ".join(f"{quote_str(k)} = {quote_str(v)}" for k, v in options.items())
            + "\n)"
        )
    return ddl
