"""The record format of the Kafka log: Debezium JSON values and JSON keys, as Flink writes them.

A change becomes one Kafka record. Its value is Debezium JSON, the default of Paimon's
``log.format``, so Flink's own ``'connector' = 'kafka'`` table with ``'format' = 'debezium-json'``
and any Kafka consumer read the log without lakelog:

* ``+I`` and ``+U``: ``{"before":null,"after":{row},"op":"c"}``;
* ``-U`` and ``-D``: ``{"before":{row},"after":null,"op":"d"}`` (what Flink's own Debezium
  serializer writes, so a foreign reader sees an update as a delete and an insert).

Primary-key tables give each record a key: the primary-key columns (partition fields included) as
a JSON object (Paimon's ``log.key.format`` = ``json``). Append tables write no key. Headers carry
what a lakelog reader needs beyond Debezium: the exact row kind (``lakelog.kind``), and the commit
user and commit identifier of the change (``lakelog.user``, ``lakelog.commit``), by which a hybrid
read recognises changes that its snapshot already holds (see :mod:`lakelog.connector.log.reader`).

Field values follow Flink's JSON format (``json.timestamp-format.standard`` = ``SQL``): numbers
as JSON numbers (``NaN`` and the infinities as the strings Jackson writes), decimals as plain
numbers, dates ``yyyy-MM-dd``, times ``HH:mm:ss[.fff]``, timestamps ``yyyy-MM-dd HH:mm:ss[.f...]``
(with a trailing ``Z`` for ``TIMESTAMP WITH LOCAL TIME ZONE``), bytes as base64 strings. Encoding
is vectorised over Arrow columns; only nested columns (arrays, maps, rows) and the rare strings that
need a ``\\u`` escape go through Python one value at a time.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.key_value import RowKind

__all__ = [
    "KIND_HEADER",
    "USER_HEADER",
    "COMMIT_HEADER",
    "SCHEMA_HEADER",
    "LogRecords",
    "encode_changes",
    "decode_values",
    "json_columns",
]

KIND_HEADER = "lakelog.kind"
SCHEMA_HEADER = "lakelog.schema"  # the table schema id the record's row is written in
USER_HEADER = "lakelog.user"
COMMIT_HEADER = "lakelog.commit"

_KIND_BYTES = [k.encode() for k in RowKind.SHORT]
# control characters JSON escapes with a short form; the others need \\u00XX
_SHORT_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
_OTHER_CONTROL = "[\x00-\x08\x0b\x0c\x0e-\x1f]"


@dataclass
class LogRecords:
    """Encoded changes of one bucket: one Kafka record per row (keys None for append tables)."""

    keys: list[Optional[bytes]]
    values: list[bytes]
    kinds: np.ndarray  # int8 row kinds, one per record

    def __len__(self) -> int:
        return len(self.values)


def _json_strings(arr: pa.Array) -> pa.Array:
    """JSON string literals (quoted, escaped) of a string array; nulls stay null."""
    out = arr
    for raw, esc in _SHORT_ESCAPES:
        out = pc.replace_substring(out, raw, esc)
    if pc.any(pc.match_substring_regex(out, _OTHER_CONTROL)).as_py():
        values = [None if v is None else json.dumps(v)[1:-1] for v in arr.to_pylist()]
        out = pa.array(values, pa.string())
    return pc.binary_join_element_wise(pa.scalar('"'), out, pa.scalar('"'), "")


def _floats(arr: pa.Array) -> pa.Array:
    text = arr.cast(pa.string())
    # JSON has no NaN or infinities: Jackson (Flink's JSON format) writes them as strings
    text = pc.replace_substring_regex(text, "^nan$", '"NaN"')
    text = pc.replace_substring_regex(text, "^inf$", '"Infinity"')
    return pc.replace_substring_regex(text, "^-inf$", '"-Infinity"')


def _python_json(value: Any) -> Any:
    """A nested value as Flink's JSON format writes it (fallback for nested columns)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): _python_json(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and isinstance(value[0], tuple) and len(value[0]) == 2:  # a map as key/value pairs
            return {str(k): _python_json(v) for k, v in value}
        return [_python_json(v) for v in value]
    if hasattr(value, "isoformat"):
        return (
            value.isoformat(sep=" ")
            if hasattr(value, "hour") and hasattr(value, "day")
            else value.isoformat()
        )
    if hasattr(value, "as_tuple"):  # Decimal
        return float(value) if not value.is_finite() else json.loads(str(value))
    return value


def json_columns(table: pa.Table) -> list[pa.Array]:
    """Each column of ``table`` as JSON value text ("null" for nulls), vectorised where Arrow can."""
    out = []
    for col in table.columns:
        arr = col.combine_chunks()
        t = arr.type
        if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
            text = arr.cast(pa.string())
        elif pa.types.is_floating(t):
            text = _floats(arr)
        elif (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_date(t)
            or pa.types.is_time(t)
            or pa.types.is_timestamp(t)
        ):
            text = _json_strings(arr.cast(pa.string()))
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            encoded = [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
            text = _json_strings(pa.array(encoded, pa.string()))
        else:  # nested: one value at a time
            text = pa.array(
                [
                    None if v is None else json.dumps(_python_json(v), separators=(",", ":"))
                    for v in arr.to_pylist()
                ],
                pa.string(),
            )
        out.append(pc.fill_null(text, "null"))
    return out


def _objects(names: Sequence[str], columns: Sequence[pa.Array], n: int) -> pa.Array:
    """``{"a":<a>,"b":<b>}`` per row from JSON value columns."""
    if not names:
        return pa.array(["{}"] * n, pa.string())
    parts: list[Any] = []
    for i, (name, col) in enumerate(zip(names, columns)):
        parts.append(pa.scalar(("{" if i == 0 else ",") + json.dumps(name) + ":"))
        parts.append(col)
    parts.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*parts, "")


def encode_changes(
    rows: pa.Table, kinds: np.ndarray, primary_keys: Sequence[str], *, upsert: bool
) -> LogRecords:
    """Kafka records for ``rows`` (the table's columns) with row kinds ``kinds``. With ``upsert``
    (``log.changelog-mode`` = upsert), ``-U`` rows are left out: the ``+U`` after them says it all."""
    kinds = np.asarray(kinds, dtype=np.int8)
    if upsert and (kinds == RowKind.UPDATE_BEFORE).any():
        keep = kinds != RowKind.UPDATE_BEFORE
        rows, kinds = rows.filter(pa.array(keep)), kinds[keep]
    n = rows.num_rows
    if n == 0:
        return LogRecords([], [], kinds)
    columns = json_columns(rows)
    row_json = _objects(rows.column_names, columns, n)
    retract = pa.array((kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE))
    value = pc.if_else(
        retract,
        pc.binary_join_element_wise(
            pa.scalar('{"before":'), row_json, pa.scalar(',"after":null,"op":"d"}'), ""
        ),
        pc.binary_join_element_wise(
            pa.scalar('{"before":null,"after":'), row_json, pa.scalar(',"op":"c"}'), ""
        ),
    )
    values = value.cast(pa.binary()).to_pylist()  # UTF-8 bytes straight from Arrow
    keys: list[Optional[bytes]]
    if primary_keys:
        idx = [rows.column_names.index(k) for k in primary_keys]
        key_json = _objects(list(primary_keys), [columns[i] for i in idx], n)
        keys = key_json.cast(pa.binary()).to_pylist()
    else:
        keys = [None] * n
    return LogRecords(keys, values, kinds)


def kind_header(kind: int) -> bytes:
    return _KIND_BYTES[kind]


# ---- decoding ---------------------------------------------------------------------------------------
def _from_json(value: Any, t: pa.DataType) -> Any:
    """One JSON field value as a Python value of Arrow type ``t`` (before the column cast)."""
    if value is None:
        return None
    if pa.types.is_floating(t) and isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64decode(value)
    if pa.types.is_decimal(t):
        from decimal import Decimal

        return Decimal(str(value))
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date(t):
        return value  # parsed column-wise below
    return value


def _column(values: list[Any], t: pa.DataType, name: str) -> pa.Array:
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date(t):
        text = pa.array(values, pa.string())
        if pa.types.is_timestamp(t):
            naive = pa.timestamp("ns") if t.tz is None else pa.timestamp("ns", tz="UTC")
            stripped = pc.replace_substring_regex(text, "Z$", "") if t.tz is not None else text
            parsed = stripped.cast(pa.timestamp("ns"))
            return (parsed if t.tz is None else parsed.cast(naive)).cast(t)
        if pa.types.is_date(t):
            return text.cast(pa.date32()).cast(t)
        # times: HH:mm:ss[.f]
        secs = [None if v is None else _time_value(v, t) for v in values]
        return pa.array(secs, t)
    try:
        return pa.array([_from_json(v, t) for v in values], t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
        raise CorruptFileError(f"log record field {name!r} does not hold a {t}: {e}") from e


def _time_value(text: str, t: pa.DataType) -> int:
    hh, mm, rest = text.split(":")
    sec, _, frac = rest.partition(".")
    nanos = ((int(hh) * 60 + int(mm)) * 60 + int(sec)) * 10**9 + int((frac + "000000000")[:9])
    unit = t.unit
    return nanos // {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]


def decode_values(
    values: Sequence[Optional[bytes]],
    keys: Sequence[Optional[bytes]],
    kinds: Sequence[Optional[bytes]],
    schema: pa.Schema,
) -> tuple[pa.Table, np.ndarray]:
    """Rows and row kinds of Debezium JSON log records. A record's exact kind comes from its
    ``lakelog.kind`` header when present (records lakelog wrote), else from ``op``; a value of
    None (a tombstone, as other writers may send) is a ``-D`` of the key's columns."""
    rows: list[dict[str, Any]] = []
    out_kinds = np.empty(len(values), dtype=np.int8)
    for i, (value, key, kind) in enumerate(zip(values, keys, kinds)):
        if value is None:
            rows.append(json.loads(key) if key else {})
            out_kinds[i] = RowKind.DELETE
            continue
        try:
            doc = json.loads(value)
            op = doc.get("op")
            row = doc.get("after") if op in ("c", "r", "u") else doc.get("before")
        except (ValueError, AttributeError) as e:
            raise CorruptFileError(f"log record is not Debezium JSON: {value[:80]!r}: {e}") from e
        if not isinstance(row, dict):
            raise CorruptFileError(f"log record has no row for op {op!r}: {value[:80]!r}")
        rows.append(row)
        if kind is not None:
            out_kinds[i] = RowKind.SHORT.index(kind.decode())
        else:
            out_kinds[i] = RowKind.INSERT if op in ("c", "r", "u") else RowKind.DELETE
    columns = [_column([r.get(f.name) for r in rows], f.type, f.name) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema.with_metadata(None)), out_kinds
