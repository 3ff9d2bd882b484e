"""The one mapping from Arrow types (a lakelog table's columns) to Flink types.

A column crosses into Flink either as a DataStream field, typed by a ``TypeInformation``
(:func:`type_info_of`, :func:`row_type_of`: the sink's input, the sources' and the lookup join's
output), or as a Table API column, typed by a ``DataType`` (:func:`data_type_of`: system tables,
decimal casts of a source's Table). Both come from one table of Arrow type families, so the two
can never disagree on which types exist. Unsigned integers, durations and other types Flink has no
counterpart for raise :class:`FlinkTypeError`.

This module imports pyflink.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pyarrow as pa
from pyflink.common import Types
from pyflink.table import DataTypes

from lakelog.connector.errors import SchemaError
from lakelog.connector.format.types import MAX_LENGTH
from lakelog.connector.format.types import DataType as PaimonType

__all__ = [
    "FlinkTypeError",
    "type_info_of",
    "row_type_of",
    "data_type_of",
    "row_data_type",
    "column_data_type",
]


class FlinkTypeError(SchemaError):
    """An Arrow type that has no Flink type."""


class _Family(NamedTuple):
    matches: Callable[[pa.DataType], bool]
    type_info: Callable[[pa.DataType], Any]  # -> TypeInformation
    data_type: Callable[[pa.DataType], Any]  # -> DataType


_TIME_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _timestamp(t: pa.DataType) -> Any:
    precision = _TIME_PRECISION[t.unit]
    return DataTypes.TIMESTAMP_LTZ(precision) if t.tz else DataTypes.TIMESTAMP(precision)


def _fields(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


_FAMILIES = (
    _Family(pa.types.is_boolean, lambda t: Types.BOOLEAN(), lambda t: DataTypes.BOOLEAN()),
    _Family(pa.types.is_int8, lambda t: Types.BYTE(), lambda t: DataTypes.TINYINT()),
    _Family(pa.types.is_int16, lambda t: Types.SHORT(), lambda t: DataTypes.SMALLINT()),
    _Family(pa.types.is_int32, lambda t: Types.INT(), lambda t: DataTypes.INT()),
    _Family(pa.types.is_int64, lambda t: Types.LONG(), lambda t: DataTypes.BIGINT()),
    _Family(pa.types.is_float32, lambda t: Types.FLOAT(), lambda t: DataTypes.FLOAT()),
    _Family(pa.types.is_float64, lambda t: Types.DOUBLE(), lambda t: DataTypes.DOUBLE()),
    _Family(
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        lambda t: Types.STRING(),
        lambda t: DataTypes.STRING(),
    ),
    _Family(_is_binary, lambda t: Types.PRIMITIVE_ARRAY(Types.BYTE()), lambda t: DataTypes.BYTES()),
    _Family(
        pa.types.is_decimal, lambda t: Types.BIG_DEC(), lambda t: DataTypes.DECIMAL(t.precision, t.scale)
    ),
    _Family(pa.types.is_date, lambda t: Types.SQL_DATE(), lambda t: DataTypes.DATE()),
    _Family(pa.types.is_time, lambda t: Types.SQL_TIME(), lambda t: DataTypes.TIME(_TIME_PRECISION[t.unit])),
    _Family(pa.types.is_timestamp, lambda t: Types.SQL_TIMESTAMP(), _timestamp),
    _Family(
        _is_list,
        lambda t: Types.OBJECT_ARRAY(type_info_of(t.value_type)),
        lambda t: DataTypes.ARRAY(data_type_of(t.value_type)),
    ),
    _Family(
        pa.types.is_map,
        lambda t: Types.MAP(type_info_of(t.key_type), type_info_of(t.item_type)),
        lambda t: DataTypes.MAP(data_type_of(t.key_type), data_type_of(t.item_type)),
    ),
    _Family(
        pa.types.is_struct,
        lambda t: Types.ROW_NAMED([f.name for f in _fields(t)], [type_info_of(f.type) for f in _fields(t)]),
        lambda t: DataTypes.ROW([DataTypes.FIELD(f.name, data_type_of(f.type)) for f in _fields(t)]),
    ),
)


def _family(t: pa.DataType, column: str) -> _Family:
    for family in _FAMILIES:
        if family.matches(t):
            return family
    raise FlinkTypeError(f"column {column!r}: Arrow type {t} has no Flink type")


def type_info_of(t: pa.DataType, column: str = "?") -> Any:
    """The ``TypeInformation`` carrying values of Arrow type ``t`` in a DataStream."""
    return _family(t, column).type_info(t)


def row_type_of(schema: pa.Schema) -> Any:
    """``Types.ROW_NAMED`` of a table's Arrow schema (e.g. the ``output_type=`` of the map that
    feeds the sink)."""
    return Types.ROW_NAMED(list(schema.names), [type_info_of(f.type, f.name) for f in schema])


def data_type_of(t: pa.DataType, column: str = "?") -> Any:
    """The Table API ``DataType`` of Arrow type ``t`` (nullable)."""
    return _family(t, column).data_type(t)


def row_data_type(schema: pa.Schema) -> Any:
    """``DataTypes.ROW`` of an Arrow schema (NOT NULL where the schema says so)."""
    fields = []
    for f in schema:
        t = data_type_of(f.type, f.name)
        fields.append(DataTypes.FIELD(f.name, t if f.nullable else t.not_null()))
    return DataTypes.ROW(fields)


# java.sql classes the sources' DataStream values arrive as (Types.SQL_DATE/SQL_TIME/SQL_TIMESTAMP)
_BRIDGES = {"DATE": "java.sql.Date", "TIME": "java.sql.Time", "TIMESTAMP": "java.sql.Timestamp",
            "TIMESTAMP_LTZ": "java.sql.Timestamp"}  # fmt: skip


def _atomic(t: PaimonType) -> Any:
    r = t.root
    simple = {"BOOLEAN": DataTypes.BOOLEAN, "TINYINT": DataTypes.TINYINT, "SMALLINT": DataTypes.SMALLINT,
              "INT": DataTypes.INT, "BIGINT": DataTypes.BIGINT, "FLOAT": DataTypes.FLOAT,
              "DOUBLE": DataTypes.DOUBLE, "DATE": DataTypes.DATE}  # fmt: skip
    if r in simple:
        return simple[r]()
    if r == "VARCHAR":
        return DataTypes.STRING() if t.length == MAX_LENGTH else DataTypes.VARCHAR(t.length)
    if r == "CHAR":
        return DataTypes.CHAR(t.length)
    if r == "VARBINARY":
        return DataTypes.BYTES() if t.length == MAX_LENGTH else DataTypes.VARBINARY(t.length)
    if r == "BINARY":
        return DataTypes.BINARY(t.length)
    if r == "DECIMAL":
        return DataTypes.DECIMAL(t.precision, t.scale)
    if r == "TIME":
        return DataTypes.TIME(t.precision)
    if r == "TIMESTAMP":
        return DataTypes.TIMESTAMP(t.precision)
    if r == "TIMESTAMP_LTZ":
        return DataTypes.TIMESTAMP_LTZ(t.precision)
    raise FlinkTypeError(f"type {r} has no Flink type")


def column_data_type(t: PaimonType, *, bridged: bool = True) -> Any:
    """The Flink ``DataType`` of a table column's Paimon type, with its exact length, precision and
    nullability (``TIMESTAMP(3)`` stays ``TIMESTAMP(3)``). ``bridged``: dates, times and timestamps
    take the java.sql classes the sources' rows carry, as a view over a source's DataStream
    declares them."""
    r = t.root
    if r in ("ARRAY", "MULTISET"):
        assert t.element is not None
        inner = column_data_type(t.element, bridged=bridged)
        out = DataTypes.ARRAY(inner) if r == "ARRAY" else DataTypes.MULTISET(inner)
    elif r == "MAP":
        assert t.key is not None and t.value is not None
        key = column_data_type(t.key, bridged=bridged)
        out = DataTypes.MAP(key, column_data_type(t.value, bridged=bridged))
    elif r == "ROW":
        out = DataTypes.ROW(
            [DataTypes.FIELD(f.name, column_data_type(f.type, bridged=bridged)) for f in t.fields or ()]
        )
    else:
        out = _atomic(t)
        if bridged and r in _BRIDGES:
            out = out.bridged_to(_BRIDGES[r])
    return out if t.nullable else out.not_null()
