"""Column default values (a field's ``defaultValue`` in the schema, as Paimon 1.3+ writes it with
``CALL sys.alter_column_default_value``, else the option ``fields.<name>.default-value``): Paimon's
string form, parsed into the column's Arrow type.

As in Paimon, a write fills a column's nulls (and a column the input leaves out) with its default;
the text is what a SQL ``CAST('<text>' AS <type>)`` accepts: ``true``, ``42``, ``1.50``,
``2024-06-01``, ``2024-06-01 08:30:00``, ``08:30:00.250``; a ``TIMESTAMP WITH LOCAL TIME ZONE``
default carries its offset (``2024-06-01 08:30:00+02:00``). Nested types have no default.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import pyarrow as pa

from lakelog.connector.errors import OptionError
from lakelog.connector.format.types import (
    MAX_LENGTH,
    NESTED_ROOTS,
    DataField,
    DataType,
    to_arrow_type,
    type_to_string,
)

__all__ = ["parse_default_value", "default_values"]

_KEY = "fields.{}.default-value"


def parse_default_value(text: str, field: DataField, what: str | None = None) -> pa.Scalar:
    """The default ``text`` of ``field`` as an Arrow scalar of the column's type; a default that is
    not exactly a value of the type raises :class:`OptionError` naming ``what`` (default: the option
    ``fields.<name>.default-value``)."""
    key = what or f"option {_KEY.format(field.name)!r}"
    t = field.type
    shown = type_to_string(t)
    if t.root in NESTED_ROOTS:
        raise OptionError(
            f"{key}: column {field.name!r} has type {shown}, which takes no default value"
        )
    target = to_arrow_type(t)
    try:
        if t.root == "TIME":
            value = datetime.time.fromisoformat(text.strip())
            if value.microsecond % 1000:
                raise ValueError("TIME holds milliseconds")
            arr = pa.array([value], pa.time64("us")).cast(target)
        elif t.root == "TIMESTAMP_LTZ" and not _has_offset(text):
            raise ValueError("a TIMESTAMP WITH LOCAL TIME ZONE default needs an offset, e.g. '+00:00'")
        else:
            raw = text if t.root in ("CHAR", "VARCHAR") else text.strip()
            arr = pa.array([raw]).cast(target, safe=True)
    except (ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise OptionError(
            f"invalid value {text!r} for {key}: not a value of type {shown} ({e})"
        ) from None
    bounded = t.length is not None and t.length < MAX_LENGTH
    if t.root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY") and bounded:
        assert t.length is not None
        size = len(text) if t.root in ("CHAR", "VARCHAR") else len(text.encode("utf-8"))
        if size > t.length:
            raise OptionError(f"invalid value {text!r} for {key}: longer than the column's {shown}")
    return arr[0]


def _has_offset(text: str) -> bool:
    tail = text.strip()[10:]  # after the date
    return tail.endswith("Z") or "+" in tail or "-" in tail


def default_values(fields: list[DataField], options: Mapping[str, str]) -> dict[str, pa.Scalar]:
    """``{column: default}`` for every column with a default: its schema field's ``defaultValue``,
    else its ``fields.<name>.default-value`` option."""
    out: dict[str, pa.Scalar] = {}
    for f in fields:
        nested = _nested_default(f.type)
        if nested is not None:
            raise OptionError(
                f"column {f.name!r}: its nested field {nested!r} has a default value (written by Paimon), "
                "which lakelog does not fill: lakelog does not write this table"
            )
        if f.default_value is not None:
            out[f.name] = parse_default_value(f.default_value, f, f"the default value of column {f.name!r}")
            continue
        text = options.get(_KEY.format(f.name))
        if text is not None:
            out[f.name] = parse_default_value(text, f)
    return out


def _nested_default(t: DataType) -> str | None:
    """The name of a nested ROW field with a default value inside ``t``, if any."""
    for sub in (t.element, t.key, t.value):
        found = _nested_default(sub) if sub is not None else None
        if found is not None:
            return found
    for f in t.fields or ():
        if f.default_value is not None:
            return f.name
        found = _nested_default(f.type)
        if found is not None:
            return f"{f.name}.{found}"
    return None
