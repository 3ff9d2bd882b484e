"""DDL on lakelog tables and catalogs, made durable: Flink parses the statement against the mirror
(:mod:`.mirror`), this module turns Flink's operation into the connector's changes and applies
them to the warehouse; the mirror follows. This module reads Flink's Java operation objects as
they come through py4j; it imports no pyflink.

* ``CREATE TABLE`` (also ``LIKE``): physical columns become Paimon fields with their exact types;
  computed columns and the watermark are stored as Paimon stores them (:mod:`.table_ddl`); the
  catalog's ``table-default.*`` options fill what the DDL leaves unset.
* ``ALTER TABLE``: ``SET``/``RESET`` (``comment`` is the table comment), ``ADD``/``MODIFY``/``DROP``
  columns with ``FIRST``/``AFTER``, ``RENAME col TO``, computed columns and watermarks, ``RENAME TO``;
  everything one statement changes goes into one schema version.
* ``DROP TABLE``, ``CREATE``/``DROP DATABASE [CASCADE]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from lakelog.connector.errors import SchemaError
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_changes import (
    AddColumn,
    DropColumn,
    MoveColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnComment,
    UpdateColumnType,
    UpdateComment,
)
from lakelog.connector.format.types import DataField, DataType, parse_type_string
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.table_ddl import ComputedColumn, Watermark, is_schema_option, schema_options

__all__ = ["TableSpec", "table_spec", "alter_changes", "paimon_type"]

_CONNECTOR_KEYS = ("connector", "path")


def paimon_type(j_data_type: Any, where: str) -> DataType:
    """The Paimon type of a Flink ``DataType`` (a Java object)."""
    text = j_data_type.getLogicalType().asSerializableString()
    try:
        return parse_type_string(text)
    except SchemaError as e:
        raise SchemaError(f"{where} has type {text}, which lakelog cannot store: {e}") from None


@dataclass
class TableSpec:
    """A lakelog table as a Flink ``CREATE TABLE`` describes it."""

    fields: list[DataField]
    primary_key: list[str]
    partition_keys: list[str]
    options: dict[str, str]
    comment: Optional[str]
    flink_options: dict[str, str] = field(default_factory=dict)  # 'connector', 'path'


def _non_physical(j_schema: Any, where: str) -> tuple[list[ComputedColumn], Optional[Watermark]]:
    """The computed columns (by position among all columns) and watermark of a resolved schema."""
    computed = []
    for pos, c in enumerate(j_schema.getColumns()):
        kind = c.getClass().getSimpleName()
        if kind == "PhysicalColumn":
            continue
        if kind != "ComputedColumn":
            raise UnsupportedStatementError(
                f"{where}: column {c.getName()!r} is a metadata column; lakelog tables have no metadata "
                "columns (computed columns and watermarks are stored)"
            )
        comment = c.getComment().orElse(None)
        computed.append(
            ComputedColumn(
                pos,
                c.getName(),
                c.getDataType().getLogicalType().asSerializableString(),
                c.getExpression().asSerializableString(),
                comment,
            )
        )
    specs = list(j_schema.getWatermarkSpecs())
    if len(specs) > 1:
        raise UnsupportedStatementError(f"{where}: a table takes one watermark")
    wm = None
    if specs:
        e = specs[0].getWatermarkExpression()
        wm = Watermark(
            specs[0].getRowtimeAttribute(),
            e.asSerializableString(),
            e.getOutputDataType().getLogicalType().asSerializableString(),
        )
    return computed, wm


def table_spec(j_table: Any, where: str) -> TableSpec:
    """The lakelog table a resolved Flink ``CatalogTable`` describes."""
    schema = j_table.getResolvedSchema()
    fields = []
    for c in schema.getColumns():
        if c.isPhysical():
            comment = c.getComment().orElse(None)
            fields.append(
                DataField(0, c.getName(), paimon_type(c.getDataType(), f"column {c.getName()!r}"), comment)
            )
    computed, wm = _non_physical(schema, where)
    pk_opt = schema.getPrimaryKey()
    pk = list(pk_opt.get().getColumns()) if pk_opt.isPresent() else []
    given = {str(k): str(v) for k, v in dict(j_table.getOptions()).items()}
    stored = [k for k in given if is_schema_option(k)]
    if stored:
        raise SqlError(f"{where}: option(s) {stored} are reserved for computed columns and watermarks")
    flink = {k: given.pop(k) for k in _CONNECTOR_KEYS if k in given}
    options = {**given, **schema_options(computed, wm)}
    distribution = j_table.getDistribution() if hasattr(j_table, "getDistribution") else None
    if distribution is not None and distribution.isPresent():
        raise UnsupportedStatementError(
            f"{where}: DISTRIBUTED BY is not supported; set the option 'bucket' (and 'bucket-key')"
        )
    comment = j_table.getComment() or None
    return TableSpec(fields, pk, list(j_table.getPartitionKeys()), options, comment, flink)


@dataclass
class _Alter:
    """The connector changes of one ALTER TABLE, gathered in Flink's order."""

    where: str
    schema: TableSchema
    changes: list[SchemaChange] = field(default_factory=list)
    non_physical: bool = False  # computed columns or the watermark changed

    def physical(self, name: str) -> bool:
        return name in self.schema.field_names


def _position(pos: Any, alter: _Alter, all_names: Sequence[str]) -> tuple[Optional[str], bool]:
    """(after, first) of Flink's column position, relative to physical columns: ``AFTER c`` where
    ``c`` is computed means after the nearest physical column before it."""
    if pos is None:
        return None, False
    kind = pos.getClass().getSimpleName()
    if kind == "First":
        return None, True
    after = pos.column()
    if alter.physical(after):
        return after, False
    names = list(all_names)
    for n in reversed(names[: names.index(after)] if after in names else []):
        if alter.physical(n):
            return n, False
    return None, True


def alter_changes(op: Any, schema: TableSchema, new_schema: Any, where: str) -> list[SchemaChange]:
    """The connector changes of Flink's ``AlterTableChangeOperation`` ``op`` on a table whose
    current schema is ``schema``; ``new_schema`` is Flink's resolved schema after the change (it
    gives the computed columns' and watermark's new state)."""
    a = _Alter(where, schema)
    old_names = [c for c in schema.field_names]
    for ch in op.getTableChanges():
        kind = ch.getClass().getSimpleName()
        if kind == "SetOption":
            _set_option(a, ch.getKey(), ch.getValue())
        elif kind == "ResetOption":
            _reset_option(a, ch.getKey())
        elif kind == "AddColumn":
            c = ch.getColumn()
            if not c.isPhysical():
                _computed_only(a, c)
                continue
            after, first = _position(ch.getPosition(), a, old_names)
            t = paimon_type(c.getDataType(), f"column {c.getName()!r}")
            a.changes.append(AddColumn(c.getName(), t, c.getComment().orElse(None), after=after, first=first))
            old_names.append(c.getName())
        elif kind == "DropColumn":
            name = ch.getColumnName()
            if a.physical(name):
                a.changes.append(DropColumn(name))
            else:
                a.non_physical = True
        elif kind == "ModifyColumnName":
            old, new = ch.getOldColumnName(), ch.getNewColumnName()
            if a.physical(old):
                a.changes.append(RenameColumn(old, new))
            else:
                a.non_physical = True
        elif kind == "ModifyPhysicalColumnType":
            name = ch.getOldColumn().getName()
            t = paimon_type(ch.getNewType(), f"column {name!r}")
            a.changes.append(UpdateColumnType(name, t, keep_nullability=False))
        elif kind == "ModifyColumnComment":
            name = ch.getOldColumn().getName()
            if a.physical(name):
                a.changes.append(UpdateColumnComment(name, ch.getNewComment()))
            else:
                a.non_physical = True
        elif kind == "ModifyColumnPosition":
            name = ch.getOldColumn().getName()
            if a.physical(name):
                after, first = _position(ch.getNewPosition(), a, old_names)
                a.changes.append(MoveColumn(name, after=after, first=first or after is None))
            else:
                a.non_physical = True
        elif kind in ("ModifyColumn",):
            c = ch.getNewColumn()
            if c.isPhysical() and ch.getOldColumn().isPhysical():
                continue  # its type, comment or position come as their own changes
            _computed_only(a, c)
        elif kind in ("AddWatermark", "ModifyWatermark", "DropWatermark"):
            a.non_physical = True
        elif kind in ("AddUniqueConstraint", "ModifyUniqueConstraint", "DropConstraint"):
            raise UnsupportedStatementError(
                f"{where}: the primary key of a lakelog table cannot change (as in Paimon); create a new "
                "table and copy the rows"
            )
        elif "Distribution" in kind:
            raise UnsupportedStatementError(f"{where}: DISTRIBUTED BY is not supported; use 'bucket'")
        else:
            raise UnsupportedStatementError(f"{where}: the change {ch.toString()} is not supported")
    if a.non_physical or any(
        isinstance(c, (RenameColumn, DropColumn, AddColumn, MoveColumn)) for c in a.changes
    ):
        computed, wm = _non_physical(new_schema, where)
        new_opts = schema_options(computed, wm)
        old_opts = {k: v for k, v in schema.options.items() if is_schema_option(k)}
        for k in old_opts:
            if k not in new_opts:
                a.changes.append(RemoveOption(k))
        for k, v in new_opts.items():
            if old_opts.get(k) != v:
                a.changes.append(SetOption(k, v))
    return a.changes


def _computed_only(a: _Alter, c: Any) -> None:
    if c.getClass().getSimpleName() == "MetadataColumn":
        raise UnsupportedStatementError(
            f"{a.where}: column {c.getName()!r} is a metadata column; lakelog tables have no metadata columns"
        )
    a.non_physical = True


def _set_option(a: _Alter, key: str, value: str) -> None:
    if key == "comment":
        a.changes.append(UpdateComment(value))
    elif key in _CONNECTOR_KEYS:
        raise UnsupportedStatementError(
            f"{a.where}: option {key!r} cannot change (Change {key} is not supported)"
        )
    elif is_schema_option(key):
        raise SqlError(f"{a.where}: option {key!r} is reserved for computed columns and watermarks")
    else:
        a.changes.append(SetOption(key, value))


def _reset_option(a: _Alter, key: str) -> None:
    if key == "comment":
        a.changes.append(UpdateComment(None))
    elif is_schema_option(key) or key in _CONNECTOR_KEYS:
        raise SqlError(f"{a.where}: option {key!r} cannot be reset")
    else:
        a.changes.append(RemoveOption(key))
