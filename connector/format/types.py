"""Paimon data types: parsing from and printing to Paimon's schema JSON, and mapping to Arrow.

The in-memory form is :class:`DataType`, a frozen dataclass named after Paimon's type roots.

JSON form (what ``schema/schema-N`` holds): atomic types are SQL strings such as ``"BIGINT NOT NULL"``,
``"DECIMAL(10, 2)"``, ``"STRING"`` or ``"TIMESTAMP(3) WITH LOCAL TIME ZONE"``; nested types are objects
``{"type": "ARRAY", "element": ...}``, ``{"type": "MAP", "key": ..., "value": ...}``,
``{"type": "MULTISET", "element": ...}`` and ``{"type": "ROW", "fields": [{"id", "name", "type"}]}``
(with ``" NOT NULL"`` appended to ``type`` when not nullable). pypaimon also writes a ``"nullable"``
member in nested objects; Java Paimon ignores it, and we write it too so our files match pypaimon's.

Arrow mapping follows Paimon's Parquet layout (what Java Paimon and pypaimon put in data files):
CHAR/VARCHAR -> string, BINARY/VARBINARY -> binary, TIME -> time32[ms], TIMESTAMP(p) -> timestamp with
the unit of p, TIMESTAMP_LTZ(p) -> timestamp with tz UTC, ARRAY -> list, MAP -> map, MULTISET -> map of
element to INT NOT NULL, ROW -> struct.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Union

import pyarrow as pa

from lakelog.connector.errors import SchemaError

__all__ = [
    "DataType",
    "DataField",
    "MAX_LENGTH",
    "ATOMIC_ROOTS",
    "NESTED_ROOTS",
    "FieldIdCounter",
    "parse_type",
    "parse_type_string",
    "type_to_json",
    "type_to_string",
    "field_from_json",
    "field_to_json",
    "with_nullable",
    "is_nested",
    "highest_field_id",
    "collect_field_ids",
    "reassign_field_ids",
    "from_arrow_type",
    "to_arrow_type",
    "arrow_field_to_paimon",
    "paimon_field_to_arrow",
    "fields_from_arrow_schema",
    "fields_to_arrow_schema",
]


@dataclass(frozen=True)
class DataField:
    """One field of a ROW type or of a table schema; ``id`` is Paimon's stable field id."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None  # Paimon 1.3+'s "defaultValue": a write fills nulls with it


@dataclass(frozen=True)
class DataType:
    """A Paimon logical type.

    ``root`` is one of: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, CHAR,
    VARCHAR, BINARY, VARBINARY, DATE, TIME, TIMESTAMP, TIMESTAMP_LTZ, ARRAY, MULTISET, MAP, ROW.
    STRING is VARCHAR with length 2147483647 and BYTES is VARBINARY with length 2147483647
    (Paimon prints them as STRING and BYTES).
    """

    root: str
    nullable: bool = True
    length: int | None = None  # CHAR, VARCHAR, BINARY, VARBINARY
    precision: int | None = None  # DECIMAL, TIME, TIMESTAMP, TIMESTAMP_LTZ
    scale: int | None = None  # DECIMAL
    element: DataType | None = None  # ARRAY, MULTISET
    key: DataType | None = None  # MAP
    value: DataType | None = None  # MAP
    fields: tuple[DataField, ...] | None = None  # ROW


MAX_LENGTH = 2147483647
"""Length of STRING (VARCHAR) and BYTES (VARBINARY)."""

ATOMIC_ROOTS = frozenset(
    {
        "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "CHAR", "VARCHAR",
        "BINARY", "VARBINARY", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ",
    }
)
NESTED_ROOTS = frozenset({"ARRAY", "MULTISET", "MAP", "ROW"})

_SIMPLE_ROOTS = ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE")
_MAX_DECIMAL_PRECISION = 38
_MAX_TIME_PRECISION = 9


class FieldIdCounter:
    """A running field-id counter: ``next()`` returns the previous value plus one.

    Paimon numbers nested ROW fields from the same counter as top-level columns: a column takes the
    next id first, then the ROW fields inside its type take ids depth-first, a nested field's own
    children before the field itself.
    """

    def __init__(self, last: int = -1) -> None:
        self.last = last

    def next(self) -> int:
        self.last += 1
        return self.last


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def with_nullable(t: DataType, nullable: bool) -> DataType:
    """The same type with a different nullability."""
    if t.nullable == nullable:
        return t
    return dataclasses.replace(t, nullable=nullable)


def is_nested(t: DataType) -> bool:
    return t.root in NESTED_ROOTS


def collect_field_ids(t: DataType, out: list[int]) -> None:
    """Append the ids of every ROW field reachable inside ``t`` to ``out``."""
    if t.root == "ROW":
        for f in t.fields or ():
            out.append(f.id)
            collect_field_ids(f.type, out)
    elif t.root in ("ARRAY", "MULTISET"):
        assert t.element is not None
        collect_field_ids(t.element, out)
    elif t.root == "MAP":
        assert t.key is not None and t.value is not None
        collect_field_ids(t.key, out)
        collect_field_ids(t.value, out)


def highest_field_id(fields: Union[list[DataField], tuple[DataField, ...]]) -> int:
    """The highest field id among ``fields`` and every nested ROW field; -1 when there are none.

    Raises :class:`SchemaError` on a duplicate id (a broken schema).
    """
    ids: list[int] = []
    for f in fields:
        ids.append(f.id)
        collect_field_ids(f.type, ids)
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            raise SchemaError(f"broken schema: field id {i} is used more than once")
        seen.add(i)
    return max(ids) if ids else -1


def reassign_field_ids(t: DataType, ids: FieldIdCounter) -> DataType:
    """Copy of ``t`` whose nested ROW fields take fresh ids from ``ids`` (children before parent)."""
    if t.root == "ROW":
        new_fields = []
        for f in t.fields or ():
            inner = reassign_field_ids(f.type, ids)
            new_fields.append(DataField(ids.next(), f.name, inner, f.description, f.default_value))
        return dataclasses.replace(t, fields=tuple(new_fields))
    if t.root in ("ARRAY", "MULTISET"):
        assert t.element is not None
        return dataclasses.replace(t, element=reassign_field_ids(t.element, ids))
    if t.root == "MAP":
        assert t.key is not None and t.value is not None
        key = reassign_field_ids(t.key, ids)
        return dataclasses.replace(t, key=key, value=reassign_field_ids(t.value, ids))
    return t


def _checked(t: DataType, text: str) -> DataType:
    """Validate the parameters of an atomic type; ``text`` is quoted in errors."""
    r = t.root
    if r in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if t.length is None or not 0 <= t.length <= MAX_LENGTH:
            raise SchemaError(f"invalid length in type {text!r}: must be between 0 and {MAX_LENGTH}")
    elif r == "DECIMAL":
        p, s = t.precision, t.scale
        if p is None or not 1 <= p <= _MAX_DECIMAL_PRECISION:
            raise SchemaError(
                f"invalid precision in type {text!r}: must be between 1 and {_MAX_DECIMAL_PRECISION}"
            )
        if s is None or not 0 <= s <= p:
            raise SchemaError(f"invalid scale in type {text!r}: must be between 0 and the precision {p}")
    elif r in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ") and (
        t.precision is None or not 0 <= t.precision <= _MAX_TIME_PRECISION
    ):
        raise SchemaError(f"invalid precision in type {text!r}: must be between 0 and {_MAX_TIME_PRECISION}")
    return t


# --------------------------------------------------------------------------------------------------
# SQL type strings
# --------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<int>\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)|(?P<ident>`(?:[^`]|``)*`)"
    r"|(?P<str>'(?:[^']|'')*')|(?P<punct>[<>(),:]))"
)


class _SqlTypeParser:
    """Recursive-descent parser for Paimon/Flink SQL type strings (``ARRAY<MAP<STRING, INT>> NOT NULL``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        stripped = text.rstrip()
        while pos < len(stripped):
            m = _TOKEN_RE.match(stripped, pos)
            if m is None or m.end() == pos:
                raise SchemaError(f"cannot parse type {text!r}: unexpected character at position {pos}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    # token helpers
    def _peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def _peek_word(self, offset: int = 0) -> str | None:
        tok = self._peek(offset)
        return tok[1].upper() if tok is not None and tok[0] == "word" else None

    def _next(self) -> tuple[str, str]:
        tok = self._peek()
        if tok is None:
            raise SchemaError(f"cannot parse type {self.text!r}: unexpected end")
        self.i += 1
        return tok

    def _expect(self, punct: str) -> None:
        kind, val = self._next()
        if kind != "punct" or val != punct:
            raise SchemaError(f"cannot parse type {self.text!r}: expected {punct!r} but found {val!r}")

    def _accept(self, punct: str) -> bool:
        tok = self._peek()
        if tok is not None and tok[0] == "punct" and tok[1] == punct:
            self.i += 1
            return True
        return False

    def _accept_words(self, *words: str) -> bool:
        if all(self._peek_word(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def _int(self) -> int:
        kind, val = self._next()
        if kind != "int":
            raise SchemaError(f"cannot parse type {self.text!r}: expected a number but found {val!r}")
        return int(val)

    def _opt_params(self) -> list[int]:
        if not self._accept("("):
            return []
        params = [self._int()]
        while self._accept(","):
            params.append(self._int())
        self._expect(")")
        return params

    # grammar
    def parse(self) -> DataType:
        t = self._type()
        if self._peek() is not None:
            extra = self.tokens[self.i][1]
            raise SchemaError(f"cannot parse type {self.text!r}: unexpected token {extra!r}")
        return t

    def _type(self) -> DataType:
        t = self._base()
        if self._accept_words("NOT", "NULL"):
            return with_nullable(t, False)
        self._accept_words("NULL")
        return t

    def _base(self) -> DataType:
        kind, raw = self._next()
        if kind != "word":
            raise SchemaError(f"cannot parse type {self.text!r}: expected a type name but found {raw!r}")
        word = raw.upper()
        if word in ("INTEGER", "INT"):
            return DataType("INT")
        if word == "DOUBLE":
            self._accept_words("PRECISION")
            return DataType("DOUBLE")
        if word in _SIMPLE_ROOTS:
            return DataType(word)
        if word == "STRING":
            return DataType("VARCHAR", length=MAX_LENGTH)
        if word == "BYTES":
            return DataType("VARBINARY", length=MAX_LENGTH)
        if word in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            params = self._opt_params()
            if len(params) > 1:
                raise SchemaError(f"cannot parse type {self.text!r}: {word} takes one length")
            return _checked(DataType(word, length=params[0] if params else 1), self.text)
        if word in ("DECIMAL", "NUMERIC", "DEC"):
            params = self._opt_params()
            if len(params) > 2:
                raise SchemaError(f"cannot parse type {self.text!r}: DECIMAL takes precision and scale")
            p = params[0] if params else 10
            s = params[1] if len(params) > 1 else 0
            return _checked(DataType("DECIMAL", precision=p, scale=s), self.text)
        if word == "TIME":
            params = self._opt_params()
            self._accept_words("WITHOUT", "TIME", "ZONE")
            return _checked(DataType("TIME", precision=params[0] if params else 0), self.text)
        if word in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            params = self._opt_params()
            p = params[0] if params else 6
            root = word
            if word == "TIMESTAMP":
                if self._accept_words("WITH", "LOCAL", "TIME", "ZONE"):
                    root = "TIMESTAMP_LTZ"
                elif self._accept_words("WITH", "TIME", "ZONE"):
                    raise SchemaError(f"unsupported type {self.text!r}: TIMESTAMP WITH TIME ZONE")
                else:
                    self._accept_words("WITHOUT", "TIME", "ZONE")
            return _checked(DataType(root, precision=p), self.text)
        if word in ("ARRAY", "MULTISET"):
            self._expect("<")
            element = self._type()
            self._expect(">")
            return DataType(word, element=element)
        if word == "MAP":
            self._expect("<")
            key = self._type()
            self._expect(",")
            value = self._type()
            self._expect(">")
            return DataType("MAP", key=key, value=value)
        if word == "ROW":
            return self._row()
        raise SchemaError(f"unsupported type {self.text!r}: lakelog does not know the type {raw!r}")

    def _row(self) -> DataType:
        close = ">" if self._accept("<") else None
        if close is None:
            self._expect("(")
            close = ")"
        fields: list[DataField] = []
        if not self._accept(close):
            while True:
                kind, raw = self._next()
                if kind == "ident":
                    name = raw[1:-1].replace("``", "`")
                elif kind == "word":
                    name = raw
                else:
                    raise SchemaError(
                        f"cannot parse type {self.text!r}: expected a field name but found {raw!r}"
                    )
                self._accept(":")
                ftype = self._type()
                desc = None
                tok = self._peek()
                if tok is not None and tok[0] == "str":
                    self.i += 1
                    desc = tok[1][1:-1].replace("''", "'")
                fields.append(DataField(len(fields), name, ftype, desc))
                if self._accept(close):
                    break
                self._expect(",")
        return DataType("ROW", fields=tuple(fields))


def parse_type_string(text: str) -> DataType:
    """Parse a SQL type string such as ``"DECIMAL(10, 2) NOT NULL"`` or ``"ARRAY<INT>"``.

    ROW fields inside a SQL string carry no ids; they are numbered 0, 1, ... in order.
    """
    if not isinstance(text, str) or not text.strip():
        raise SchemaError(f"cannot parse type {text!r}: empty type")
    return _SqlTypeParser(text).parse()


def _atomic_to_string(t: DataType) -> str:
    r = t.root
    if r in _SIMPLE_ROOTS:
        s = r
    elif r == "VARCHAR":
        s = "STRING" if t.length == MAX_LENGTH else f"VARCHAR({t.length})"
    elif r == "VARBINARY":
        s = "BYTES" if t.length == MAX_LENGTH else f"VARBINARY({t.length})"
    elif r in ("CHAR", "BINARY"):
        s = f"{r}({t.length})"
    elif r == "DECIMAL":
        s = f"DECIMAL({t.precision}, {t.scale})"
    elif r in ("TIME", "TIMESTAMP"):
        s = f"{r}({t.precision})"
    elif r == "TIMESTAMP_LTZ":
        s = f"TIMESTAMP({t.precision}) WITH LOCAL TIME ZONE"
    else:
        raise SchemaError(f"not an atomic type: {r}")
    return s if t.nullable else s + " NOT NULL"


def type_to_string(t: DataType) -> str:
    """The SQL form of a type, e.g. ``ARRAY<INT NOT NULL>`` or ``ROW<`a` INT, `b` STRING>``."""
    suffix = "" if t.nullable else " NOT NULL"
    if t.root in ("ARRAY", "MULTISET"):
        assert t.element is not None
        return f"{t.root}<{type_to_string(t.element)}>{suffix}"
    if t.root == "MAP":
        assert t.key is not None and t.value is not None
        return f"MAP<{type_to_string(t.key)}, {type_to_string(t.value)}>{suffix}"
    if t.root == "ROW":
        parts = []
        for f in t.fields or ():
            name = "`" + f.name.replace("`", "``") + "`"
            desc = "" if f.description is None else " '" + f.description.replace("'", "''") + "'"
            parts.append(f"{name} {type_to_string(f.type)}{desc}")
        return f"ROW<{', '.join(parts)}>{suffix}"
    return _atomic_to_string(t)


# --------------------------------------------------------------------------------------------------
# JSON form
# --------------------------------------------------------------------------------------------------


def _nested_nullable(type_string: str) -> bool:
    return "NOT NULL" not in type_string.upper()


def parse_type(j: Union[str, dict[str, Any]]) -> DataType:
    """Parse the JSON form of a type as it appears in a Paimon schema file."""
    if isinstance(j, str):
        return parse_type_string(j)
    if not isinstance(j, dict):
        raise SchemaError(f"cannot parse type from JSON value {j!r}")
    ts = j.get("type")
    if not isinstance(ts, str):
        raise SchemaError(f"cannot parse type from JSON {j!r}: missing 'type'")
    head = ts.strip().upper()
    try:
        if head.startswith(("ARRAY", "MULTISET")) and "element" in j:
            root = "ARRAY" if head.startswith("ARRAY") else "MULTISET"
            return DataType(root, nullable=_nested_nullable(ts), element=parse_type(j["element"]))
        if head.startswith("MAP") and "key" in j:
            return DataType(
                "MAP", nullable=_nested_nullable(ts), key=parse_type(j["key"]), value=parse_type(j["value"])
            )
        if head.startswith("ROW") and "fields" in j:
            raw_fields = j["fields"]
            if not isinstance(raw_fields, list):
                raise SchemaError(f"cannot parse ROW type from JSON {j!r}: 'fields' is not a list")
            fields = tuple(field_from_json(f) for f in raw_fields)
            return DataType("ROW", nullable=_nested_nullable(ts), fields=fields)
    except KeyError as e:
        raise SchemaError(f"cannot parse type from JSON {j!r}: missing {e}") from None
    # A nested type given as a complete SQL string ({"type": "ARRAY<INT>"}) or an atomic type.
    return parse_type_string(ts)


def field_from_json(j: Any) -> DataField:
    """Parse ``{"id": .., "name": .., "type": .., "description": .., "defaultValue": ..}``."""
    if not isinstance(j, dict):
        raise SchemaError(f"cannot parse field from JSON value {j!r}")
    try:
        fid, name, ftype = j["id"], j["name"], j["type"]
    except KeyError as e:
        raise SchemaError(f"cannot parse field from JSON {j!r}: missing {e}") from None
    if not isinstance(fid, int) or isinstance(fid, bool) or not isinstance(name, str):
        raise SchemaError(f"cannot parse field from JSON {j!r}: bad id or name")
    desc = j.get("description")
    if desc is not None and not isinstance(desc, str):
        desc = str(desc)
    default = j.get("defaultValue")
    if default is not None and not isinstance(default, str):
        raise SchemaError(f"field {name!r}: defaultValue {default!r} is not a string")
    try:
        t = parse_type(ftype)
    except SchemaError as e:
        raise SchemaError(f"field {name!r}: {e}") from None
    return DataField(fid, name, t, desc, default)


def type_to_json(t: DataType) -> Union[str, dict[str, Any]]:
    """The JSON form of a type, with the member order Paimon uses."""
    suffix = "" if t.nullable else " NOT NULL"
    if t.root in ("ARRAY", "MULTISET"):
        assert t.element is not None
        return {"type": t.root + suffix, "element": type_to_json(t.element), "nullable": t.nullable}
    if t.root == "MAP":
        assert t.key is not None and t.value is not None
        return {"type": "MAP" + suffix, "key": type_to_json(t.key), "value": type_to_json(t.value),
                "nullable": t.nullable}
    if t.root == "ROW":
        return {"type": "ROW" + suffix, "fields": [field_to_json(f) for f in t.fields or ()],
                "nullable": t.nullable}
    return _atomic_to_string(t)


def field_to_json(f: DataField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.id, "name": f.name, "type": type_to_json(f.type)}
    if f.description is not None:
        out["description"] = f.description
    if f.default_value is not None:
        out["defaultValue"] = f.default_value
    return out


# --------------------------------------------------------------------------------------------------
# Arrow
# --------------------------------------------------------------------------------------------------

_UNIT_TO_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _unit_for_precision(p: int) -> str:
    if p == 0:
        return "s"
    if p <= 3:
        return "ms"
    if p <= 6:
        return "us"
    return "ns"


def _unsupported(column: str, t: pa.DataType, why: str = "") -> SchemaError:
    where = f"column {column!r}" if column else "a column"
    extra = f" ({why})" if why else ""
    return SchemaError(f"{where} has Arrow type {t}, which lakelog cannot store in a Paimon table{extra}")


def from_arrow_type(
    t: pa.DataType,
    nullable: bool = True,
    field_ids: FieldIdCounter | None = None,
    column: str = "",
) -> DataType:
    """Map an Arrow type to a Paimon type.

    ``field_ids`` numbers the fields of nested structs (children before parent, as Paimon does); pass
    the schema-wide counter so nested ids do not collide with column ids. Without it nested fields are
    numbered from 0. ``column`` names the column in errors (nested paths as ``a.b``).
    Unsupported types (unsigned 64-bit, durations, unions, ...) raise :class:`SchemaError`.
    """
    ids = field_ids if field_ids is not None else FieldIdCounter()
    types = pa.types
    if types.is_boolean(t):
        return DataType("BOOLEAN", nullable)
    if types.is_int8(t):
        return DataType("TINYINT", nullable)
    if types.is_int16(t) or types.is_uint8(t):
        return DataType("SMALLINT", nullable)
    if types.is_int32(t) or types.is_uint16(t):
        return DataType("INT", nullable)
    if types.is_int64(t) or types.is_uint32(t):
        return DataType("BIGINT", nullable)
    if types.is_uint64(t):
        raise _unsupported(column, t, "no Paimon integer type holds every uint64 value")
    if types.is_float32(t):
        return DataType("FLOAT", nullable)
    if types.is_float64(t):
        return DataType("DOUBLE", nullable)
    if types.is_decimal(t):
        if t.precision > _MAX_DECIMAL_PRECISION:
            raise _unsupported(column, t, f"Paimon decimals hold at most {_MAX_DECIMAL_PRECISION} digits")
        return DataType("DECIMAL", nullable, precision=t.precision, scale=t.scale)
    if types.is_string(t) or types.is_large_string(t):
        return DataType("VARCHAR", nullable, length=MAX_LENGTH)
    if types.is_fixed_size_binary(t):
        return DataType("BINARY", nullable, length=t.byte_width)
    if types.is_binary(t) or types.is_large_binary(t):
        return DataType("VARBINARY", nullable, length=MAX_LENGTH)
    if types.is_date32(t) or types.is_date64(t):
        return DataType("DATE", nullable)
    if types.is_time(t):
        return DataType("TIME", nullable, precision=_UNIT_TO_PRECISION[t.unit])
    if types.is_timestamp(t):
        root = "TIMESTAMP" if t.tz is None else "TIMESTAMP_LTZ"
        return DataType(root, nullable, precision=_UNIT_TO_PRECISION[t.unit])
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        vf = t.value_field
        element = from_arrow_type(vf.type, vf.nullable, ids, f"{column}.element" if column else "element")
        return DataType("ARRAY", nullable, element=element)
    if types.is_map(t):
        key = from_arrow_type(t.key_field.type, False, ids, f"{column}.key" if column else "key")
        item = t.item_field
        value = from_arrow_type(item.type, item.nullable, ids, f"{column}.value" if column else "value")
        return DataType("MAP", nullable, key=key, value=value)
    if types.is_struct(t):
        fields = []
        for i in range(t.num_fields):
            child = t.field(i)
            path = f"{column}.{child.name}" if column else child.name
            inner = from_arrow_type(child.type, child.nullable, ids, path)
            fields.append(DataField(ids.next(), child.name, inner, _arrow_description(child)))
        return DataType("ROW", nullable, fields=tuple(fields))
    if types.is_dictionary(t):
        vt = t.value_type
        if (
            types.is_string(vt) or types.is_large_string(vt) or types.is_binary(vt)
            or types.is_large_binary(vt) or types.is_integer(vt) or types.is_floating(vt)
        ):
            return from_arrow_type(vt, nullable, ids, column)
        raise _unsupported(column, t, "only dictionaries of strings, binaries or numbers are supported")
    raise _unsupported(column, t)


def to_arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type lakelog uses for a Paimon type (Paimon's Parquet layout, see the module doc)."""
    r = t.root
    if r == "BOOLEAN":
        return pa.bool_()
    if r == "TINYINT":
        return pa.int8()
    if r == "SMALLINT":
        return pa.int16()
    if r == "INT":
        return pa.int32()
    if r == "BIGINT":
        return pa.int64()
    if r == "FLOAT":
        return pa.float32()
    if r == "DOUBLE":
        return pa.float64()
    if r == "DECIMAL":
        assert t.precision is not None and t.scale is not None
        return pa.decimal128(t.precision, t.scale)
    if r in ("CHAR", "VARCHAR"):
        return pa.string()
    if r in ("BINARY", "VARBINARY"):
        return pa.binary()
    if r == "DATE":
        return pa.date32()
    if r == "TIME":
        return pa.time32("ms")
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        assert t.precision is not None
        return pa.timestamp(_unit_for_precision(t.precision), tz="UTC" if r == "TIMESTAMP_LTZ" else None)
    if r == "ARRAY":
        assert t.element is not None
        return pa.list_(pa.field("item", to_arrow_type(t.element), nullable=t.element.nullable))
    if r == "MULTISET":
        assert t.element is not None
        return pa.map_(pa.field("key", to_arrow_type(t.element), nullable=False),
                       pa.field("value", pa.int32(), nullable=False))
    if r == "MAP":
        assert t.key is not None and t.value is not None
        return pa.map_(pa.field("key", to_arrow_type(t.key), nullable=False),
                       pa.field("value", to_arrow_type(t.value), nullable=t.value.nullable))
    if r == "ROW":
        return pa.struct([paimon_field_to_arrow(f) for f in t.fields or ()])
    raise SchemaError(f"unknown Paimon type root {r!r}")


def _arrow_description(f: pa.Field) -> str | None:
    md = f.metadata
    if md and b"description" in md:
        return md[b"description"].decode("utf-8")
    return None


def arrow_field_to_paimon(f: pa.Field, field_id: int, field_ids: FieldIdCounter | None = None) -> DataField:
    """Map one Arrow column to a Paimon field with id ``field_id``.

    Nested struct fields take ids from ``field_ids`` (defaults to a counter starting after ``field_id``).
    The Arrow field metadata key ``description`` becomes the field's description (as in pypaimon).
    """
    ids = field_ids if field_ids is not None else FieldIdCounter(field_id)
    t = from_arrow_type(f.type, f.nullable, ids, f.name)
    return DataField(field_id, f.name, t, _arrow_description(f))


def paimon_field_to_arrow(f: DataField) -> pa.Field:
    return pa.field(f.name, to_arrow_type(f.type), nullable=f.type.nullable)


def fields_from_arrow_schema(schema: pa.Schema, first_id: int = 0) -> list[DataField]:
    """Paimon fields for an Arrow schema, numbered as Paimon and pypaimon do.

    Columns and nested fields share one counter starting at ``first_id``: each column takes the next id,
    then the fields of its nested structs take the following ids.
    """
    ids = FieldIdCounter(first_id - 1)
    out = []
    for f in schema:
        fid = ids.next()
        out.append(arrow_field_to_paimon(f, fid, ids))
    return out


def fields_to_arrow_schema(fields: Union[list[DataField], tuple[DataField, ...]]) -> pa.Schema:
    return pa.schema([paimon_field_to_arrow(f) for f in fields])
