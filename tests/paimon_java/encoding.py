"""Arrow values in the Paimon oracle's JSON encoding, and Arrow types as Paimon schema-JSON types.

The encoding (the same in both directions, see ``PaimonOracle.java``): decimals as strings with the
type's scale, timestamps as ISO strings with nine fraction digits (``Z`` for TIMESTAMP_LTZ), bytes as
base64, maps as ``[key, value]`` pairs, rows as objects. :func:`arrow_to_rows` reads timestamps from
their int64 values, so nanoseconds survive; :func:`canonical` makes rows comparable with ``==``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import pyarrow as pa

__all__ = ["arrow_to_rows", "canonical", "plain_rows", "paimon_type", "paimon_fields", "FieldSpec", "PaimonType"]


# ---- Arrow <-> the oracle's JSON encoding --------------------------------------------------------------
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_EPOCH = dt.date(1970, 1, 1)


def _format_timestamp(value: int, unit: str) -> str:
    nanos_total = value * _UNIT_NANOS[unit]
    days, nanos_of_day = divmod(nanos_total, 86_400 * 1_000_000_000)
    seconds, nanos = divmod(nanos_of_day, 1_000_000_000)
    hh, rest = divmod(seconds, 3600)
    mm, ss = divmod(rest, 60)
    day = _EPOCH + dt.timedelta(days=days)
    return f"{day.isoformat()}T{hh:02d}:{mm:02d}:{ss:02d}.{nanos:09d}"


def _format_time(value: int, unit: str) -> str:
    millis = value * _UNIT_NANOS[unit] // 1_000_000
    seconds, ms = divmod(millis, 1000)
    hh, rest = divmod(seconds, 3600)
    mm, ss = divmod(rest, 60)
    return f"{hh:02d}:{mm:02d}:{ss:02d}.{ms:03d}"


def _format_float(v: float) -> Union[float, str]:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def _nested(values: list[Any], offsets: list[int], valid: list[bool]) -> list[Any]:
    return [values[offsets[i] : offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]


def _encode_array(arr: pa.Array) -> list[Any]:
    """One Arrow array as a list of values in the oracle's encoding (exact for every unit)."""
    t = arr.type
    types = pa.types
    if types.is_dictionary(t):
        return _encode_array(arr.dictionary_decode())
    valid = arr.is_valid().to_pylist()
    if types.is_timestamp(t):
        suffix = "" if t.tz is None else "Z"
        ints = arr.cast(pa.int64()).to_pylist()
        return [None if v is None else _format_timestamp(v, t.unit) + suffix for v in ints]
    if types.is_time(t):
        ints = arr.cast(pa.int64() if types.is_time64(t) else pa.int32()).to_pylist()
        return [None if v is None else _format_time(v, t.unit) for v in ints]
    if types.is_date(t):
        return [None if v is None else v.isoformat() for v in arr.cast(pa.date32()).to_pylist()]
    if types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in arr.to_pylist()]
    if types.is_floating(t):
        return [None if v is None else _format_float(v) for v in arr.to_pylist()]
    if types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return [None if v is None else base64.b64encode(v).decode("ascii") for v in arr.to_pylist()]
    if types.is_map(t):
        keys, items = _encode_array(arr.keys), _encode_array(arr.items)
        pairs = [[k, v] for k, v in zip(keys, items)]
        return _nested(pairs, arr.offsets.to_pylist(), valid)
    if types.is_list(t) or types.is_large_list(t):
        return _nested(_encode_array(arr.values), arr.offsets.to_pylist(), valid)
    if types.is_fixed_size_list(t):
        n = t.list_size
        values = _encode_array(arr.flatten())
        out, j = [], 0
        for ok in valid:
            out.append(values[j : j + n] if ok else None)
            j += n if ok else 0
        return out
    if types.is_struct(t):
        children = [_encode_array(c) for c in arr.flatten()]
        names = [t.field(i).name for i in range(t.num_fields)]
        return [
            {n: c[i] for n, c in zip(names, children)} if ok else None for i, ok in enumerate(valid)
        ]
    return arr.to_pylist()


def arrow_to_rows(table: Union[pa.Table, pa.RecordBatch], columns: Optional[Sequence[str]] = None) -> list[dict]:
    """Rows of ``table`` as dicts in the oracle's JSON encoding (what ``PaimonOracle.read`` returns)."""
    names = list(columns) if columns is not None else list(table.column_names)
    encoded = []
    for n in names:
        col = table.column(n)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        encoded.append(_encode_array(col))
    return [dict(zip(names, values)) for values in zip(*encoded)] if names else []


def _canonical_value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _canonical_value(x) for k, x in v.items()}
    if isinstance(v, list):
        items = [_canonical_value(x) for x in v]
        # maps are lists of [key, value] pairs; their order carries no meaning
        if items and all(isinstance(x, list) and len(x) == 2 for x in items):
            return sorted(items, key=lambda p: json.dumps(p, sort_keys=True))
        return items
    return v


def canonical(rows: Iterable[Mapping[str, Any]], columns: Optional[Sequence[str]] = None) -> list[str]:
    """An order-insensitive fingerprint of rows: each row as sorted-key JSON, the list sorted.

    Map entries are sorted too. Lists of two-element lists are treated as maps (a real ARRAY<ARRAY>
    whose inner arrays all hold two items compares as a multiset of pairs, which is good enough here).
    """
    out = []
    for r in rows:
        row = {k: r[k] for k in columns} if columns is not None else dict(r)
        out.append(json.dumps(_canonical_value(row), sort_keys=True))
    return sorted(out)


def plain_rows(rows: Union[pa.Table, pa.RecordBatch, Iterable[Mapping[str, Any]]]) -> list[dict]:
    """Rows as dicts: Arrow tables encoded, anything else copied."""
    if isinstance(rows, (pa.Table, pa.RecordBatch)):
        return arrow_to_rows(rows)
    return [dict(r) for r in rows]


# ---- Arrow schema -> Paimon types ---------------------------------------------------------------------
_TIME_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}
PaimonType = Union[str, dict]
FieldSpec = Union[pa.Field, tuple[str, Union[pa.DataType, PaimonType]], tuple[str, Union[pa.DataType, PaimonType], bool]]


def paimon_type(t: pa.DataType, nullable: bool = True) -> PaimonType:
    """The JSON form of the Paimon type for an Arrow type (what a Paimon schema file holds)."""
    nn = "" if nullable else " NOT NULL"
    types = pa.types
    simple = [
        (types.is_boolean, "BOOLEAN"), (types.is_int8, "TINYINT"), (types.is_int16, "SMALLINT"),
        (types.is_int32, "INT"), (types.is_int64, "BIGINT"), (types.is_float32, "FLOAT"),
        (types.is_float64, "DOUBLE"), (types.is_string, "STRING"), (types.is_large_string, "STRING"),
        (types.is_binary, "BYTES"), (types.is_large_binary, "BYTES"), (types.is_date32, "DATE"),
    ]
    for test, name in simple:
        if test(t):
            return name + nn
    if types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale}){nn}"
    if types.is_fixed_size_binary(t):
        return f"BINARY({t.byte_width}){nn}"
    if types.is_time(t):
        return f"TIME({_TIME_PRECISION[t.unit]}){nn}"
    if types.is_timestamp(t):
        p = _TIME_PRECISION[t.unit]
        return f"TIMESTAMP({p}){' WITH LOCAL TIME ZONE' if t.tz is not None else ''}{nn}"
    if types.is_list(t) or types.is_large_list(t):
        vf = t.value_field
        return {"type": "ARRAY" + nn, "element": paimon_type(vf.type, vf.nullable)}
    if types.is_map(t):
        return {"type": "MAP" + nn, "key": paimon_type(t.key_type, False),
                "value": paimon_type(t.item_field.type, t.item_field.nullable)}
    if types.is_struct(t):
        fields = [{"id": i, "name": t.field(i).name, "type": paimon_type(t.field(i).type, t.field(i).nullable)}
                  for i in range(t.num_fields)]
        return {"type": "ROW" + nn, "fields": fields}
    raise ValueError(f"no Paimon type for Arrow type {t}")


def paimon_fields(fields: Union[pa.Schema, Sequence[FieldSpec]]) -> list[dict]:
    """``[{"name", "type"}]`` for Arrow fields, or ``(name, type[, nullable])`` with an Arrow type or a
    Paimon type in its JSON form (``"TIMESTAMP(7)"``, ``{"type": "ARRAY", "element": "INT"}``)."""
    out = []
    for f in fields:
        if isinstance(f, pa.Field):
            out.append({"name": f.name, "type": paimon_type(f.type, f.nullable)})
            continue
        name, t, *rest = f
        nullable = bool(rest[0]) if rest else True
        out.append({"name": name, "type": paimon_type(t, nullable) if isinstance(t, pa.DataType) else t})
    return out
