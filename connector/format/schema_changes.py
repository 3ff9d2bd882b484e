"""Schema changes (ALTER TABLE): the ``SchemaChange`` dataclasses (:class:`SetOption`,
:class:`AddColumn`, ...) and :func:`apply_changes`, which turns a schema plus changes into the next
schema (new columns take fresh field ids; renames keep them; type changes only widen).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

import pyarrow as pa

from lakelog.connector.errors import (
    OptionError,
    SchemaError,
)
from lakelog.connector.format.options import (
    CoreOptions,
    check_alter,
    check_supported,
)
from lakelog.connector.format.schema import CURRENT_VERSION, TableSchema
from lakelog.connector.format.schema_validation import (
    FIELD_OPTION_PATTERNS,
    check_column_name,
    check_key_list,
)
from lakelog.connector.format.types import (
    DataField,
    DataType,
    FieldIdCounter,
    from_arrow_type,
    highest_field_id,
    reassign_field_ids,
    type_to_string,
    with_nullable,
)

__all__ = [
    "SetOption",
    "RemoveOption",
    "AddColumn",
    "RenameColumn",
    "DropColumn",
    "UpdateColumnType",
    "UpdateComment",
    "UpdateColumnComment",
    "UpdateColumnDefaultValue",
    "MoveColumn",
    "SchemaChange",
    "can_widen",
    "apply_changes",
]


# --------------------------------------------------------------------------------------------------
# Schema changes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetOption:
    key: str
    value: str


@dataclass(frozen=True)
class RemoveOption:
    key: str


@dataclass(frozen=True)
class AddColumn:
    """Add a nullable column; ``after`` names the column to follow, ``first`` puts it first."""

    name: str
    type: Union[pa.DataType, DataType]
    comment: str | None = None
    after: str | None = None
    first: bool = False


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class UpdateColumnType:
    """Widen a column's type (see :func:`can_widen`); by default the column keeps its nullability."""

    name: str
    new_type: Union[pa.DataType, DataType]
    keep_nullability: bool = True


@dataclass(frozen=True)
class UpdateComment:
    """Set (or with None, clear) the table comment."""

    comment: str | None


@dataclass(frozen=True)
class UpdateColumnComment:
    name: str
    comment: str | None


@dataclass(frozen=True)
class UpdateColumnDefaultValue:
    """Set (or with None, remove) a column's default value, in Paimon's string form (Paimon's
    ``SchemaChange.updateColumnDefaultValue``): writes fill the column's nulls with it."""

    name: str
    default_value: str | None


@dataclass(frozen=True)
class MoveColumn:
    """Move a column first, or after another column (Paimon's ``SchemaChange.move``)."""

    name: str
    after: str | None = None
    first: bool = False


SchemaChange = Union[
    SetOption, RemoveOption, AddColumn, RenameColumn, DropColumn, UpdateColumnType, UpdateComment,
    UpdateColumnComment, UpdateColumnDefaultValue, MoveColumn,
]

_INT_RANK = {"TINYINT": 0, "SMALLINT": 1, "INT": 2, "BIGINT": 3}
_INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}


def can_widen(src: DataType, dst: DataType) -> bool:
    """Whether every value of ``src`` converts to ``dst`` without loss (ignoring top-level nullability).

    Allowed: TINYINT -> SMALLINT -> INT -> BIGINT; TINYINT/SMALLINT -> FLOAT; TINYINT/SMALLINT/INT ->
    DOUBLE; integers and decimals -> a DECIMAL with enough integer digits and scale; FLOAT -> DOUBLE;
    CHAR/VARCHAR(n) -> VARCHAR(m >= n); BINARY/VARBINARY(n) -> VARBINARY(m >= n); TIME, TIMESTAMP and
    TIMESTAMP_LTZ to a higher precision; ARRAY/MULTISET/MAP/ROW element-wise (ROW fields by position,
    same names). Nested NOT NULL cannot be added.
    """
    a, b = src.root, dst.root
    if with_nullable(src, True) == with_nullable(dst, True):
        return True
    if a in _INT_RANK:
        if b in _INT_RANK:
            return _INT_RANK[b] >= _INT_RANK[a]
        if b == "FLOAT":
            return a in ("TINYINT", "SMALLINT")
        if b == "DOUBLE":
            return a in ("TINYINT", "SMALLINT", "INT")
        if b == "DECIMAL":
            assert dst.precision is not None and dst.scale is not None
            return dst.precision - dst.scale >= _INT_DIGITS[a]
        return False
    if a == "FLOAT":
        return b == "DOUBLE"
    if a == "DECIMAL" and b == "DECIMAL":
        assert src.precision is not None and src.scale is not None
        assert dst.precision is not None and dst.scale is not None
        return dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale
    if a in ("CHAR", "VARCHAR") and b == "VARCHAR":
        return (dst.length or 0) >= (src.length or 0)
    if a in ("BINARY", "VARBINARY") and b == "VARBINARY":
        return (dst.length or 0) >= (src.length or 0)
    if a == b and a in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
        return (dst.precision or 0) >= (src.precision or 0)

    def inner(s: DataType, d: DataType) -> bool:
        return (d.nullable or not s.nullable) and can_widen(s, d)

    if a == b and a in ("ARRAY", "MULTISET"):
        assert src.element is not None and dst.element is not None
        return inner(src.element, dst.element)
    if a == b == "MAP":
        assert src.key is not None and dst.key is not None and src.value is not None and dst.value is not None
        return with_nullable(src.key, True) == with_nullable(dst.key, True) and inner(src.value, dst.value)
    if a == b == "ROW":
        sf, df = src.fields or (), dst.fields or ()
        return len(sf) == len(df) and all(
            x.name == y.name and inner(x.type, y.type) for x, y in zip(sf, df)
        )
    return False


def _keep_row_ids(old: DataType, new: DataType) -> DataType:
    """``new`` with the nested field ids of ``old`` (same shape, as checked by :func:`can_widen`)."""
    if new.root == "ROW" and old.root == "ROW":
        fields = tuple(
            DataField(o.id, n.name, _keep_row_ids(o.type, n.type), n.description or o.description,
                      n.default_value or o.default_value)
            for o, n in zip(old.fields or (), new.fields or ())
        )
        return dataclasses.replace(new, fields=fields)
    if new.root in ("ARRAY", "MULTISET") and old.element is not None and new.element is not None:
        return dataclasses.replace(new, element=_keep_row_ids(old.element, new.element))
    if new.root == "MAP" and old.value is not None and new.value is not None and new.key is not None:
        assert old.key is not None
        key = _keep_row_ids(old.key, new.key)
        return dataclasses.replace(new, key=key, value=_keep_row_ids(old.value, new.value))
    return new


_NAME_LIST_OPTIONS = (
    "bucket-key", "sequence.field", "changelog-producer.row-deduplicate-ignore-fields",
    "partial-update.remove-record-on-sequence-group",
)


def _rename_in_options(options: dict[str, str], old: str, new: str) -> dict[str, str]:
    """Options with every reference to column ``old`` renamed to ``new``."""
    out: dict[str, str] = {}
    for k, v in options.items():
        if k in _NAME_LIST_OPTIONS:
            v = ",".join(new if p.strip() == old else p.strip() for p in v.split(","))
        elif k == "rowkind.field" and v.strip() == old:
            v = new
        for p in FIELD_OPTION_PATTERNS:
            part = p.match(k)
            if part is not None:
                names = [n.strip() for n in part.split(",")]
                if old in names:
                    k = p.key_for(",".join(new if n == old else n for n in names))
                if p is CoreOptions.FIELD_SEQUENCE_GROUP or p is CoreOptions.FIELD_NESTED_KEY:
                    v = ",".join(new if n.strip() == old else n.strip() for n in v.split(","))
                break
        out[k] = v
    return out


def _drop_from_options(options: dict[str, str], name: str) -> dict[str, str]:
    """Options without the per-field options of a dropped column (and without it in sequence groups)."""
    out: dict[str, str] = {}
    for k, v in options.items():
        skip = False
        for p in FIELD_OPTION_PATTERNS:
            part = p.match(k)
            if part is None:
                continue
            if name in [n.strip() for n in part.split(",")]:
                skip = True
            elif p is CoreOptions.FIELD_SEQUENCE_GROUP:
                members = [n.strip() for n in v.split(",") if n.strip() and n.strip() != name]
                if not members:
                    skip = True
                v = ",".join(members)
            break
        if not skip:
            out[k] = v
    return out


def _resolve_type(t: Union[pa.DataType, DataType], column: str, ids: FieldIdCounter) -> DataType:
    if isinstance(t, DataType):
        return reassign_field_ids(t, ids)
    if isinstance(t, pa.DataType):
        return from_arrow_type(t, True, ids, column)
    raise SchemaError(f"column {column!r}: expected a pyarrow.DataType or DataType, got {type(t).__name__}")


def _primary_key_option(
    schema: TableSchema, current: list[str], value: str, has_snapshots: bool
) -> list[str]:
    """``SET ('primary-key' = 'a,b')``, as Paimon takes it: the same key is no change; a table
    without a primary key and without snapshots (an empty branch, say) gets one; any other change
    is refused."""
    keys = [k.strip() for k in value.split(",") if k.strip()]
    if keys == current:
        return current
    if current:
        raise OptionError(
            f"option 'primary-key' cannot change the primary key {current} of a table (to {keys}); "
            "create a new table and copy the rows"
        )
    if has_snapshots:
        raise OptionError(
            "option 'primary-key' can only be set while the table has no snapshot (it would turn existing "
            "append files into key-value files); create a new table and copy the rows"
        )
    if not keys:
        raise OptionError("option 'primary-key' names no column")
    return keys


def apply_changes(
    schema: TableSchema, changes: Sequence[SchemaChange], *, has_snapshots: bool = True
) -> TableSchema:
    """The schema that follows ``schema`` after ``changes`` (id + 1), validated.

    Partition and primary-key columns cannot be dropped, renamed or retyped; immutable options cannot
    change (:func:`lakelog.connector.format.options.check_alter`); new columns take ids from
    ``highest_field_id + 1``.
    """
    fields = list(schema.fields)
    options = dict(schema.options)
    baseline = dict(schema.options)  # old options with renames applied, for check_alter
    comment = schema.comment
    ids = FieldIdCounter(max(schema.highest_field_id, highest_field_id(fields)))
    touched_options: set[str] = set()

    def index_of(name: str) -> int:
        for i, f in enumerate(fields):
            if f.name == name:
                return i
        raise SchemaError(f"column {name!r} does not exist (columns: {[f.name for f in fields]})")

    def refuse_key(name: str, verb: str) -> None:
        if name in schema.partition_keys:
            raise SchemaError(f"cannot {verb} partition column {name!r}")
        if name in schema.primary_keys:
            raise SchemaError(f"cannot {verb} primary-key column {name!r}")

    primary_keys = list(schema.primary_keys)
    for ch in changes:
        if isinstance(ch, SetOption) and ch.key == "primary-key" and isinstance(ch.value, str):
            primary_keys = _primary_key_option(schema, primary_keys, ch.value, has_snapshots)
        elif isinstance(ch, SetOption):
            if not isinstance(ch.key, str) or not isinstance(ch.value, str):
                raise OptionError(f"option {ch.key!r} = {ch.value!r}: keys and values must be strings")
            check_supported(ch.key, ch.value)
            options[ch.key] = ch.value
            touched_options.add(ch.key)
        elif isinstance(ch, RemoveOption):
            options.pop(ch.key, None)
        elif isinstance(ch, UpdateComment):
            comment = ch.comment
        elif isinstance(ch, AddColumn):
            check_column_name(ch.name)
            if any(f.name == ch.name for f in fields):
                raise SchemaError(f"cannot add column {ch.name!r}: it already exists")
            fid = ids.next()
            t = _resolve_type(ch.type, ch.name, ids)
            if not t.nullable:
                raise SchemaError(
                    f"cannot add column {ch.name!r} as NOT NULL: existing rows have no value for it"
                )
            new_field = DataField(fid, ch.name, t, ch.comment)
            if ch.first:
                fields.insert(0, new_field)
            elif ch.after is not None:
                fields.insert(index_of(ch.after) + 1, new_field)
            else:
                fields.append(new_field)
        elif isinstance(ch, RenameColumn):
            i = index_of(ch.old)
            refuse_key(ch.old, "rename")
            check_column_name(ch.new)
            if ch.new != ch.old and any(f.name == ch.new for f in fields):
                raise SchemaError(f"cannot rename column {ch.old!r} to {ch.new!r}: {ch.new!r} already exists")
            fields[i] = dataclasses.replace(fields[i], name=ch.new)
            options = _rename_in_options(options, ch.old, ch.new)
            baseline = _rename_in_options(baseline, ch.old, ch.new)
        elif isinstance(ch, DropColumn):
            i = index_of(ch.name)
            refuse_key(ch.name, "drop")
            core = CoreOptions(options, strict=False)
            references = {
                "bucket-key": core.bucket_key or [],
                "sequence.field": core.sequence_field,
                "rowkind.field": [core.rowkind_field],
            }
            used = [k for k, cols in references.items() if ch.name in cols]
            if used:
                raise SchemaError(f"cannot drop column {ch.name!r}: option(s) {used} refer to it")
            if len(fields) == 1:
                raise SchemaError(f"cannot drop column {ch.name!r}: it is the table's only column")
            del fields[i]
            options = _drop_from_options(options, ch.name)
            baseline = _drop_from_options(baseline, ch.name)
        elif isinstance(ch, UpdateColumnType):
            i = index_of(ch.name)
            refuse_key(ch.name, "change the type of")
            old = fields[i]
            core = CoreOptions(options, strict=False)
            if ch.name in (core.bucket_key or []):
                raise SchemaError(f"cannot change the type of bucket-key column {ch.name!r}")
            if isinstance(ch.new_type, pa.DataType):
                new_t = from_arrow_type(ch.new_type, True, FieldIdCounter(), ch.name)
            elif isinstance(ch.new_type, DataType):
                new_t = ch.new_type
            else:
                raise SchemaError(f"column {ch.name!r}: expected a pyarrow.DataType or DataType")
            if ch.keep_nullability or isinstance(ch.new_type, pa.DataType):
                new_t = with_nullable(new_t, old.type.nullable)
            elif old.type.nullable and not new_t.nullable:
                raise SchemaError(f"cannot make column {ch.name!r} NOT NULL: it may hold nulls")
            if not can_widen(old.type, new_t):
                raise SchemaError(
                    f"cannot change column {ch.name!r} from {type_to_string(old.type)} to "
                    f"{type_to_string(new_t)}: only widening changes are allowed"
                )
            fields[i] = dataclasses.replace(old, type=_keep_row_ids(old.type, new_t))
        elif isinstance(ch, UpdateColumnComment):
            i = index_of(ch.name)
            fields[i] = dataclasses.replace(fields[i], description=ch.comment)
        elif isinstance(ch, UpdateColumnDefaultValue):
            i = index_of(ch.name)
            fields[i] = dataclasses.replace(fields[i], default_value=ch.default_value)
        elif isinstance(ch, MoveColumn):
            moved = fields.pop(index_of(ch.name))
            if ch.first:
                fields.insert(0, moved)
            elif ch.after is not None:
                if ch.after == ch.name:
                    raise SchemaError(f"cannot move column {ch.name!r} after itself")
                fields.insert(index_of(ch.after) + 1, moved)
            else:
                fields.append(moved)
        else:
            raise SchemaError(f"unsupported schema change {ch!r}")

    check_alter(baseline, options, has_snapshots=has_snapshots)
    if primary_keys != list(schema.primary_keys):
        check_key_list(primary_keys, [f.name for f in fields], "primary key")
        fields = [
            dataclasses.replace(f, type=with_nullable(f.type, False)) if f.name in primary_keys else f
            for f in fields
        ]
    new = TableSchema(
        version=CURRENT_VERSION,
        id=schema.id + 1,
        fields=fields,
        highest_field_id=max(ids.last, schema.highest_field_id),
        partition_keys=list(schema.partition_keys),
        primary_keys=primary_keys,
        options=options,
        comment=comment,
    )
    new.validate(strict_keys=touched_options)
    return new
