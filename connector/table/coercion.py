"""Turning an input column into a column of the table's type: exactly, or refused by name.

Arrow's ``safe`` casts already refuse integer overflow, fractional floats into integers and lost
timestamp digits. What they let through, and lakelog refuses here (a
:class:`~lakelog.connector.errors.SchemaError` naming the column and saying how to convert):

* a float into ``DECIMAL(p, s)`` that is not a decimal of scale ``s`` (Arrow rounds: 123.456 ->
  123.46, 1e-9 -> 0.00). A float is accepted when the nearest ``DECIMAL(p, s)`` converts back to
  the same float, which is the case exactly when its shortest decimal spelling (``repr``) has at
  most ``s`` digits after the point: ``0.1`` fits ``DECIMAL(10, 2)``, ``0.125`` does not.
  Integers, Python ``Decimal`` values and Arrow decimals are accepted when they fit precision and
  scale without rounding;
* a time-zone-aware timestamp into ``TIMESTAMP`` (a wall-clock time) and a time-zone-naive one (or
  a date) into ``TIMESTAMP WITH LOCAL TIME ZONE`` (an instant): which wall clock or which zone is
  meant is the writer's to say;
* a timestamp into ``DATE`` when it has a time of day; a float64 beyond the range of ``FLOAT``;
* strings longer than ``CHAR(n)`` / ``VARCHAR(n)`` (in characters) and bytes longer than
  ``BINARY(n)`` / ``VARBINARY(n)``. Shorter values are stored as given (Paimon pads neither);
* sub-millisecond times into ``TIME(p)``: Paimon keeps TIME as milliseconds of the day for every
  precision (Parquet ``INT32 TIME_MILLIS``, as Paimon's writer and pypaimon do), so ``TIME(6)``
  holds milliseconds.

The checks are vectorised and run only for the conversions above; nested values (ROW, ARRAY, MAP)
are checked as well. :func:`coerce_value` applies the same rules to one value (a filter literal, a
partition spec's value), so a value that a write would refuse cannot choose rows or partitions.
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import SchemaError
from lakelog.connector.format.types import MAX_LENGTH, DataType, type_to_string

__all__ = ["coerce_column", "coerce_value"]

_T = pa.types


def coerce_column(
    col: pa.ChunkedArray, target: pa.DataType, t: Optional[DataType], name: str
) -> pa.ChunkedArray:
    """``col`` as Arrow type ``target`` of Paimon type ``t`` (None: Arrow's safe cast only)."""
    src = col.type
    if t is not None:
        _check_types(src, target, t, name)
    originals = col.chunks
    converted = src != target
    chunks = [_cast(c, target, t, name) for c in originals] if converted else originals
    if t is not None and (converted or _has_limits(t)):
        for orig, conv in zip(originals, chunks):
            _check_values(orig if converted else None, conv, t, name)
    return pa.chunked_array(chunks, type=target) if converted else col


def coerce_value(
    value: Any,
    target: pa.DataType,
    t: Optional[DataType],
    name: str,
    *,
    what: str = "value",
    shown: Optional[str] = None,
) -> pa.Scalar:
    """One value (a Python value, or an Arrow array of one) as a scalar of Arrow type ``target``
    by the rules of :func:`coerce_column` (the same checks): held exactly, or :class:`SchemaError`
    naming ``what`` (e.g. "literal"), the value (``shown``, default its ``repr``), the column and
    its type. A string for a timestamp column is read to the nanosecond first, so digits below the
    column's precision are refused as such instead of failing to parse."""
    label = shown if shown is not None else _show(value[0].as_py() if isinstance(value, pa.Array) else value)
    head = (
        f"{what} {label} cannot be held exactly by column {name!r} of type "
        f"{type_to_string(t) if t is not None else target}"
    )
    arrow_errors = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError)
    try:
        arr = value if isinstance(value, pa.Array) else pa.array([value])
    except arrow_errors as e:
        raise SchemaError(f"{head} ({e})") from None
    if isinstance(value, str) and _T.is_timestamp(target):
        # beyond nanoseconds' range, or no timestamp: the cast below decides
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
            arr = arr.cast(pa.timestamp("ns", tz=target.tz))
    converted = arr.type != target
    try:
        if t is not None:
            _check_types(arr.type, target, t, name)
        try:
            conv = _safe_cast(arr, target) if converted else arr
        except arrow_errors as e:
            lost = "would lose data" in str(e) and (_T.is_timestamp(target) or _T.is_time(target))
            why = "it has digits below the column's precision" if lost else "Arrow"
            raise SchemaError(f"{why}: {e}") from None
        if t is not None and (converted or _has_limits(t)):
            _check_values(arr if converted else None, conv, t, name)
    except SchemaError as e:
        raise SchemaError(f"{head} ({e})") from None
    return conv[0]


# ---- types -------------------------------------------------------------------------------------------
def _check_types(src: pa.DataType, target: pa.DataType, t: DataType, path: str) -> None:
    """Refuse conversions that are ambiguous by type (time zones), nested ones included."""
    if _T.is_dictionary(src):
        src = src.value_type
    if t.root == "TIMESTAMP" and _T.is_timestamp(src) and src.tz is not None:
        raise SchemaError(
            f"column {path!r} is {type_to_string(t)}, a wall-clock date and time without time zone, "
            f"but the input is {src}: instants in time zone {src.tz!r}. Say which wall clock is "
            f"meant: pc.local_timestamp(col) gives the time in {src.tz!r}, "
            f"col.cast(pa.timestamp('{src.unit}')) the time in UTC; or make the column "
            "TIMESTAMP WITH LOCAL TIME ZONE (a tz-aware Arrow type)"
        )
    if t.root == "TIMESTAMP_LTZ" and (
        (_T.is_timestamp(src) and src.tz is None) or _T.is_date(src)
    ):
        unit = src.unit if _T.is_timestamp(src) else "us"
        raise SchemaError(
            f"column {path!r} is {type_to_string(t)}, an instant (stored as UTC), but the input is "
            f"{src} without a time zone, so which instant it means is ambiguous. Say which zone its "
            "wall-clock values are in: pc.assume_timezone(col, 'Europe/Berlin') (any IANA zone), or "
            f"col.cast(pa.timestamp('{unit}', tz='UTC')) when they are UTC"
        )
    if t.root == "ROW" and _T.is_struct(src) and _T.is_struct(target):
        for i, f in enumerate(t.fields or ()):
            j = src.get_field_index(f.name)
            k = j if j >= 0 else i
            if k < src.num_fields:
                _check_types(src.field(k).type, target.field(i).type, f.type, f"{path}.{f.name}")
    elif t.root == "ARRAY" and (_T.is_list(src) or _T.is_large_list(src) or _T.is_fixed_size_list(src)):
        assert t.element is not None
        _check_types(src.value_type, target.value_type, t.element, f"{path}[]")
    elif t.root == "MAP" and _T.is_map(src) and _T.is_map(target):
        assert t.key is not None and t.value is not None
        _check_types(src.key_type, target.key_type, t.key, f"{path}.key")
        _check_types(src.item_type, target.item_type, t.value, f"{path}.value")


# ---- the cast ----------------------------------------------------------------------------------------
def _cast(arr: pa.Array, target: pa.DataType, t: Optional[DataType], name: str) -> pa.Array:
    try:
        return _safe_cast(arr, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaError(_cast_message(name, arr.type, target, t, str(e))) from None


def _safe_cast(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Arrow's safe cast, which refuses overflow and lost digits (Arrow's errors pass through)."""
    if _T.is_integer(arr.type) and _T.is_decimal(target):
        # Arrow refuses int64 -> DECIMAL(10, 2) by type (an int64 may need 19 digits); the
        # values decide: widen exactly first, then narrow with a per-value check
        wide = pa.decimal128(min(38, 19 + target.scale), target.scale)
        return arr.cast(wide, safe=True).cast(target, safe=True)
    return arr.cast(target, safe=True)


def _cast_message(name: str, src: pa.DataType, target: pa.DataType, t: Optional[DataType], why: str) -> str:
    shown = type_to_string(t) if t is not None else str(target)
    head = f"column {name!r} has type {src}, which cannot be stored as {shown}"
    if "would lose data" in why and t is not None and t.root == "TIME":
        return (
            f"{head}: it holds times with digits below a millisecond, and Paimon stores TIME as "
            "milliseconds of the day at every precision; truncate them explicitly, e.g. "
            "pc.floor_temporal(col, unit='millisecond') ({why})"
        )
    if "would lose data" in why and t is not None and t.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return (
            f"{head}: it holds digits below the column's precision; truncate them explicitly, e.g. "
            f"pc.floor_temporal(col, unit=...) ({why})"
        )
    return f"{head}: {why}"


# ---- the values --------------------------------------------------------------------------------------
def _has_limits(t: DataType) -> bool:
    """Whether values of type ``t`` need checking even when the Arrow type already matches."""
    if t.root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return t.length is not None and t.length < MAX_LENGTH
    if t.root == "ROW":
        return any(_has_limits(f.type) for f in t.fields or ())
    if t.root in ("ARRAY", "MULTISET"):
        return t.element is not None and _has_limits(t.element)
    if t.root == "MAP":
        return (t.key is not None and _has_limits(t.key)) or (t.value is not None and _has_limits(t.value))
    return False


def _check_values(orig: Optional[pa.Array], conv: pa.Array, t: DataType, path: str) -> None:
    """Refuse values of ``conv`` (converted from ``orig``, None when no conversion happened) that
    do not hold the input exactly or break a length limit of ``t``."""
    if len(conv) == 0 or conv.null_count == len(conv):
        return
    root = t.root
    if orig is not None and _T.is_dictionary(orig.type):
        orig = orig.dictionary_decode()
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        _check_length(conv, t, path)
    elif orig is None:
        pass
    elif root == "DECIMAL" and _T.is_floating(orig.type):
        _check_float_to_decimal(orig, conv, t, path)
    elif root == "DATE" and _T.is_timestamp(orig.type):
        back = conv.cast(orig.type)
        bad = pc.and_kleene(pc.not_equal(back, orig), pc.is_valid(orig))
        _refuse_where(bad, orig, path, f"is {type_to_string(t)} but the input has a time of day; "
                      "take the date explicitly (col.cast(pa.date32(), safe=False))")
    elif root == "FLOAT" and _T.is_floating(orig.type) and orig.type.bit_width > 32:
        bad = pc.and_(pc.is_inf(conv), pc.invert(pc.is_inf(orig)))
        _refuse_where(bad, orig, path, "is FLOAT, and these values lie beyond its range (about 3.4e38)")
    if root == "ROW" and _T.is_struct(conv.type):
        for i, f in enumerate(t.fields or ()):
            o = _struct_child(orig, f.name, i)
            _check_values(o, _struct_child(conv, f.name, i), f.type, f"{path}.{f.name}")
    elif root == "ARRAY" and _T.is_list(conv.type):
        assert t.element is not None
        o = pc.list_flatten(orig) if orig is not None else None
        _check_values(o, pc.list_flatten(conv), t.element, f"{path}[]")
    elif root == "MAP" and _T.is_map(conv.type):
        assert t.key is not None and t.value is not None
        c = pa.concat_arrays([conv])
        o = pa.concat_arrays([orig]) if orig is not None and _T.is_map(orig.type) else None
        _check_values(o.keys if o is not None else None, c.keys, t.key, f"{path}.key")
        _check_values(o.items if o is not None else None, c.items, t.value, f"{path}.value")


def _struct_child(arr: Optional[pa.Array], name: str, index: int) -> Optional[pa.Array]:
    if arr is None or not _T.is_struct(arr.type):
        return None
    j = arr.type.get_field_index(name)
    return arr.field(j if j >= 0 else index)


def _check_length(conv: pa.Array, t: DataType, path: str) -> None:
    assert t.length is not None
    if t.length >= MAX_LENGTH:
        return
    text = t.root in ("CHAR", "VARCHAR")
    lengths = pc.utf8_length(conv) if text else pc.binary_length(conv)
    bad = pc.greater(lengths, t.length)
    unit = "characters" if text else "bytes"
    what = f"is {type_to_string(t)}, and these values are longer than {t.length} {unit}"
    _refuse_where(bad, conv, path, what)


def _check_float_to_decimal(orig: pa.Array, conv: pa.Array, t: DataType, path: str) -> None:
    """A float fits when the decimal converts back to the same float. Arrow's float -> decimal
    cast is exact but its decimal -> float cast is not always correctly rounded, so the way back
    goes through the decimal's text (correctly rounded parsing)."""
    back = conv.cast(pa.string()).cast(orig.type)
    bad = pc.and_kleene(pc.not_equal(back, orig), pc.is_valid(orig))
    _refuse_where(
        bad,
        orig,
        path,
        f"is {type_to_string(t)}, and these floats are not decimals with at most {t.scale} digit(s) after "
        "the point, so they would be rounded; round them explicitly (pc.round(col, "
        f"{t.scale})) or write Python Decimal values",
    )


def _refuse_where(bad: pa.Array, values: pa.Array, path: str, what: str) -> None:
    if not pc.any(bad).as_py():
        return
    mask = pc.fill_null(bad, False)
    offending = values.filter(mask)
    shown = ", ".join(_show(v) for v in offending.slice(0, 3).to_pylist())
    more = f" and {len(offending) - 3} more" if len(offending) > 3 else ""
    raise SchemaError(f"column {path!r} {what}: {shown}{more}")


def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
