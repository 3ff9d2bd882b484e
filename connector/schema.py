"""Table schemas (``<table>/schema/schema-N``) and their evolution.

* :class:`TableSchema` is one schema version, byte-compatible with the JSON Paimon and pypaimon write.
* :class:`SchemaManager` lists, reads and publishes schema files (atomic create, optimistic retries).
* The ``SchemaChange`` dataclasses (:class:`SetOption`, :class:`AddColumn`, ...) describe an ALTER;
  :func:`apply_changes` turns a schema plus changes into the next schema.
* :func:`evolve_table` adapts data read from a file written under an older schema to the current one,
  matching columns by field id (so renames, drops, adds and widenings are all handled);
  :func:`physical_names` tells a reader which columns to project from such a file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import pyarrow as pa

from lakelog.connector.errors import (
    CommitConflictError,
    CorruptFileError,
    OptionError,
    SchemaError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from lakelog.connector.fileio import FileIO
from lakelog.connector.options import (
    ChangelogProducer,
    CoreOptions,
    MergeEngine,
    check_alter,
    validate_options,
)
from lakelog.connector.types import (
    DataField,
    DataType,
    FieldIdCounter,
    field_from_json,
    field_to_json,
    fields_from_arrow_schema,
    from_arrow_type,
    highest_field_id,
    reassign_field_ids,
    to_arrow_type,
    type_to_string,
    with_nullable,
)

__all__ = [
    "CURRENT_VERSION",
    "SYSTEM_FIELD_NAMES",
    "KEY_FIELD_PREFIX",
    "TableSchema",
    "SchemaManager",
    "SchemaExistsError",
    "SetOption",
    "RemoveOption",
    "AddColumn",
    "RenameColumn",
    "DropColumn",
    "UpdateColumnType",
    "UpdateComment",
    "UpdateColumnComment",
    "SchemaChange",
    "apply_changes",
    "can_widen",
    "evolve_table",
    "physical_names",
]

CURRENT_VERSION = 3
"""The schema file version Paimon 0.9+ writes (and lakelog writes)."""

SYSTEM_FIELD_NAMES = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_VALUE_COUNT", "_LEVEL", "_ROW_ID"})
KEY_FIELD_PREFIX = "_KEY_"

_NESTED = ("ARRAY", "MAP", "MULTISET", "ROW")


class SchemaExistsError(TableAlreadyExistsError, FileExistsError):
    """``create_table`` found a schema already there."""


def _now_millis() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------------
# TableSchema
# --------------------------------------------------------------------------------------------------


@dataclass
class TableSchema:
    """One version of a table's schema. Treat instances as immutable."""

    version: int = CURRENT_VERSION
    id: int = 0
    fields: list[DataField] = field(default_factory=list)
    highest_field_id: int = -1
    partition_keys: list[str] = field(default_factory=list)
    primary_keys: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = field(default_factory=_now_millis)
    _core: CoreOptions | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_core"] = None
        return state

    # ---- JSON ---------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The schema file's text: Paimon's member order, 2-space indent (as pypaimon writes it)."""
        doc: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [field_to_json(f) for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            doc["comment"] = self.comment
        doc["timeMillis"] = self.time_millis
        return json.dumps(doc, indent=2, ensure_ascii=False)

    @staticmethod
    def from_json(text: str | bytes, path_for_errors: str | None = None) -> TableSchema:
        """Parse a schema file; anything malformed raises :class:`CorruptFileError` naming the file."""
        where = path_for_errors or "<schema json>"
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptFileError(f"schema file {where} is not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise CorruptFileError(f"schema file {where} does not hold a JSON object")
        try:
            version = doc.get("version", 1)
            sid = doc["id"]
            raw_fields = doc["fields"]
            if not isinstance(version, int) or not isinstance(sid, int) or not isinstance(raw_fields, list):
                raise CorruptFileError(f"schema file {where}: bad 'version', 'id' or 'fields'")
            fields = [field_from_json(f) for f in raw_fields]
            raw_options = doc.get("options") or {}
            if not isinstance(raw_options, dict):
                raise CorruptFileError(f"schema file {where}: 'options' is not an object")
            options = {str(k): _option_text(v) for k, v in raw_options.items()}
            # Older schema versions had other defaults (as Paimon reads them).
            if version <= 1 and "bucket" not in options:
                options["bucket"] = "1"
            if version <= 2 and "file.format" not in options:
                options["file.format"] = "orc"
            partition_keys = _str_list(doc.get("partitionKeys", []), "partitionKeys", where)
            primary_keys = _str_list(doc.get("primaryKeys", []), "primaryKeys", where)
            hid = doc.get("highestFieldId")
            highest = highest_field_id(fields) if hid is None else int(hid)
            comment = doc.get("comment")
            tm = doc.get("timeMillis")
            return TableSchema(
                version=version,
                id=sid,
                fields=fields,
                highest_field_id=highest,
                partition_keys=partition_keys,
                primary_keys=primary_keys,
                options=options,
                comment=None if comment is None else str(comment),
                time_millis=0 if tm is None else int(tm),
            )
        except KeyError as e:
            raise CorruptFileError(f"schema file {where} lacks the member {e}") from None
        except SchemaError as e:
            raise CorruptFileError(f"schema file {where}: {e}") from None
        except (TypeError, ValueError) as e:
            raise CorruptFileError(f"schema file {where}: {e}") from None

    # ---- derived facts ------------------------------------------------------------------------

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"column {name!r} does not exist (columns: {self.field_names})")

    def field_by_id(self, field_id: int) -> DataField | None:
        for f in self.fields:
            if f.id == field_id:
                return f
        return None

    def logical_types(self, names: Sequence[str]) -> list[DataType]:
        return [self.field(n).type for n in names]

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """The primary key without the partition keys (the key stored in data files)."""
        return [k for k in self.primary_keys if k not in self.partition_keys]

    @property
    def bucket_keys(self) -> list[str]:
        """Option ``bucket-key``, else the trimmed primary key (empty for append tables without one)."""
        configured = self.core_options.bucket_key
        return list(configured) if configured else self.trimmed_primary_keys

    @property
    def cross_partition_update(self) -> bool:
        return bool(self.primary_keys) and not all(k in self.primary_keys for k in self.partition_keys)

    @property
    def core_options(self) -> CoreOptions:
        """Typed options. Unknown keys (from other engines) are tolerated; known keys must be valid."""
        if self._core is None or self._core.to_map() != self.options:
            try:
                self._core = CoreOptions(self.options, strict=False)
            except OptionError as e:
                raise OptionError(f"table schema {self.id}: {e}") from None
        return self._core

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the table's rows; primary-key columns are NOT NULL."""
        pk = set(self.primary_keys)
        out = []
        for f in self.fields:
            nullable = f.type.nullable and f.name not in pk
            out.append(pa.field(f.name, to_arrow_type(f.type), nullable=nullable))
        return pa.schema(out)

    def copy(self, **changes: Any) -> TableSchema:
        return dataclasses.replace(self, **changes)

    # ---- creation and validation ------------------------------------------------------------

    @staticmethod
    def create(
        schema: pa.Schema,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
        *,
        schema_id: int = 0,
    ) -> TableSchema:
        """A new table's first schema from an Arrow schema.

        Validates that key columns exist, forces primary-key columns NOT NULL, requires the partition
        keys to be part of the primary key (when there is one), maps types (unsupported ones name the
        column) and validates the options. ``primary-key``/``partition`` may also come as options.
        """
        opts = {str(k): str(v) for k, v in (options or {}).items()}
        pks = _keys_from(list(primary_keys), opts, "primary-key", "primary key")
        parts = _keys_from(list(partition_keys), opts, "partition", "partition")
        if not isinstance(schema, pa.Schema):
            raise SchemaError(f"expected a pyarrow.Schema, got {type(schema).__name__}")
        names = list(schema.names)
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise SchemaError(f"duplicate column name(s) {dups}")
        _check_key_list(pks, names, "primary key")
        _check_key_list(parts, names, "partition")
        fields = fields_from_arrow_schema(schema)
        if pks:
            fields = [
                dataclasses.replace(f, type=with_nullable(f.type, False)) if f.name in pks else f
                for f in fields
            ]
        ts = TableSchema(
            version=CURRENT_VERSION,
            id=schema_id,
            fields=fields,
            highest_field_id=highest_field_id(fields),
            partition_keys=parts,
            primary_keys=pks,
            options=opts,
            comment=comment,
        )
        ts.validate()
        return ts

    def validate(self, strict_keys: Iterable[str] | None = None) -> None:
        """Paimon's table rules (plus lakelog's: partition keys must be part of the primary key).

        ``strict_keys``: option keys that must be known to lakelog (default: all of them); other keys
        are only checked when known. Raises :class:`SchemaError` or :class:`OptionError`.
        """
        names = self.field_names
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise SchemaError(f"duplicate column name(s) {dups}")
        for n in names:
            _check_column_name(n)
        highest_field_id(self.fields)  # duplicate ids
        _check_key_list(self.primary_keys, names, "primary key")
        _check_key_list(self.partition_keys, names, "partition")
        by_name = {f.name: f for f in self.fields}
        for kind, keys in (("primary key", self.primary_keys), ("partition", self.partition_keys)):
            for k in keys:
                if by_name[k].type.root in _NESTED:
                    raise SchemaError(
                        f"{kind} column {k!r} has type {type_to_string(by_name[k].type)}; "
                        f"{kind} columns must have atomic types"
                    )
        if self.primary_keys:
            outside = [k for k in self.partition_keys if k not in self.primary_keys]
            if outside:
                raise SchemaError(
                    f"partition key(s) {outside} must be part of the primary key {self.primary_keys} "
                    "(lakelog does not support cross-partition updates)"
                )
            if not self.trimmed_primary_keys:
                raise SchemaError(
                    f"primary key {self.primary_keys} must not equal the partition keys "
                    f"{self.partition_keys}: each partition would hold a single row"
                )

        if strict_keys is None:
            validate_options(self.options, strict=True)
        else:
            validate_options(self.options, strict=False)
            validate_options({k: self.options[k] for k in strict_keys if k in self.options}, strict=True)
        core = CoreOptions(self.options, strict=False)
        self._validate_bucket(core, names)
        self._validate_merge_options(core, names, by_name)

    def _validate_bucket(self, core: CoreOptions, names: list[str]) -> None:
        configured = core.bucket_key
        if core.bucket == -1:
            if configured:
                raise OptionError("cannot define 'bucket-key' with bucket -1; set a bucket number")
            if not self.primary_keys and core.full_compaction_delta_commits is not None:
                raise OptionError(
                    "append tables in dynamic bucket mode do not support 'full-compaction.delta-commits'"
                )
        elif not self.primary_keys and not configured:
            raise OptionError(
                f"bucketed append table (bucket = {core.bucket}) needs a 'bucket-key' option "
                "naming the column(s) to hash"
            )
        if configured:
            missing = [k for k in configured if k not in names]
            if missing:
                raise OptionError(f"'bucket-key' names unknown column(s) {missing} (columns: {names})")
            in_partition = [k for k in configured if k in self.partition_keys]
            if in_partition:
                raise OptionError(f"'bucket-key' must not contain partition key(s) {in_partition}")
            if self.primary_keys:
                outside = [k for k in configured if k not in self.trimmed_primary_keys]
                if outside:
                    raise OptionError(
                        f"'bucket-key' column(s) {outside} are not part of the primary key "
                        f"{self.trimmed_primary_keys}"
                    )
            for k in configured:
                t = self.field(k).type
                if t.root in _NESTED:
                    raise OptionError(f"bucket-key column {k!r} has nested type {type_to_string(t)}")

    def _validate_merge_options(
        self, core: CoreOptions, names: list[str], by_name: dict[str, DataField]
    ) -> None:
        has_pk = bool(self.primary_keys)
        producer = core.changelog_producer
        if not has_pk and producer != ChangelogProducer.NONE:
            raise OptionError(
                f"'changelog-producer' = '{producer.value}' needs a primary key; append tables have none"
            )
        if core.get(CoreOptions.STREAMING_READ_OVERWRITE):
            if not has_pk:
                raise OptionError("'streaming-read-overwrite' needs a primary key")
            if producer in (ChangelogProducer.FULL_COMPACTION, ChangelogProducer.LOOKUP):
                raise OptionError(
                    f"'streaming-read-overwrite' cannot be true with changelog-producer '{producer.value}' "
                    "(it would read duplicated changes)"
                )
        engine = core.merge_engine
        if engine == MergeEngine.FIRST_ROW and producer not in (
            ChangelogProducer.NONE, ChangelogProducer.LOOKUP
        ):
            raise OptionError(
                "merge-engine 'first-row' supports changelog-producer 'none' or 'lookup', "
                f"not '{producer.value}'"
            )
        if self.options.get("partition.expiration-time") is not None and not self.partition_keys:
            raise OptionError("'partition.expiration-time' needs a partitioned table")
        rowkind = core.rowkind_field
        if rowkind is not None and rowkind not in names:
            raise OptionError(f"'rowkind.field' names unknown column {rowkind!r} (columns: {names})")

        seq = core.sequence_field
        if seq:
            for s in seq:
                if s not in names:
                    raise OptionError(f"'sequence.field' names unknown column {s!r} (columns: {names})")
                if seq.count(s) > 1:
                    raise OptionError(f"'sequence.field' names column {s!r} more than once")
                if core.raw(CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(s)) is not None:
                    raise OptionError(f"sequence field {s!r} must not have an aggregate function")
                if by_name[s].type.root in _NESTED:
                    nested = type_to_string(by_name[s].type)
                    raise OptionError(f"sequence field {s!r} has nested type {nested}")
            if engine == MergeEngine.FIRST_ROW:
                raise OptionError("merge-engine 'first-row' does not support 'sequence.field'")

        # fields.<name>.<suffix>: the named fields must exist
        for p in _PATTERNS:
            for key in self.options:
                part = p.match(key)
                if part is None:
                    continue
                for name in (n.strip() for n in part.split(",")):
                    if name not in names:
                        raise OptionError(f"option {key!r} names unknown column {name!r} (columns: {names})")

        grouped: dict[str, str] = {}
        for seq_fields, members in core.sequence_groups().items():
            for m in members:
                if m not in names:
                    raise OptionError(f"sequence group of {list(seq_fields)} names unknown column {m!r}")
                owner = grouped.setdefault(m, ",".join(seq_fields))
                if owner != ",".join(seq_fields):
                    raise OptionError(f"column {m!r} belongs to more than one sequence group")
            for s in seq_fields:
                if core.raw(CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(s)) is not None:
                    raise OptionError(f"sequence group field {s!r} must not have an aggregate function")

        defaults = core.field_default_values()
        for name in defaults:
            if name in self.primary_keys or name in self.partition_keys:
                raise OptionError(f"key column {name!r} must not have a default value")


_PATTERNS = (
    CoreOptions.FIELD_AGGREGATE_FUNCTION,
    CoreOptions.FIELD_IGNORE_RETRACT,
    CoreOptions.FIELD_SEQUENCE_GROUP,
    CoreOptions.FIELD_DISTINCT,
    CoreOptions.FIELD_LIST_AGG_DELIMITER,
    CoreOptions.FIELD_NESTED_KEY,
    CoreOptions.FIELD_COUNT_LIMIT,
    CoreOptions.FIELD_STATS_MODE,
    CoreOptions.FIELD_DEFAULT_VALUE,
)


def _option_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def _str_list(v: Any, what: str, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise CorruptFileError(f"schema file {where}: {what!r} is not a list of names")
    return list(v)


def _keys_from(given: list[str], options: dict[str, str], key: str, what: str) -> list[str]:
    """Keys given directly or through an option (Paimon allows either, not both); drops the option."""
    raw = options.pop(key, None)
    if raw is None:
        return [str(k) for k in given]
    if given:
        raise SchemaError(f"cannot define the {what} both directly and with the option {key!r}")
    return [k.strip() for k in raw.split(",") if k.strip()]


def _check_key_list(keys: Sequence[str], names: Sequence[str], what: str) -> None:
    missing = [k for k in keys if k not in names]
    if missing:
        raise SchemaError(f"{what} column(s) {missing} are not in the schema (columns: {list(names)})")
    dups = sorted({k for k in keys if list(keys).count(k) > 1})
    if dups:
        raise SchemaError(f"{what} names column(s) {dups} more than once")


def _check_column_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"invalid column name {name!r}")
    if name in SYSTEM_FIELD_NAMES:
        raise SchemaError(f"column name {name!r} is reserved for system columns {sorted(SYSTEM_FIELD_NAMES)}")
    if name.startswith(KEY_FIELD_PREFIX):
        raise SchemaError(f"column name {name!r} must not start with {KEY_FIELD_PREFIX!r}")


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


SchemaChange = Union[
    SetOption, RemoveOption, AddColumn, RenameColumn, DropColumn, UpdateColumnType, UpdateComment,
    UpdateColumnComment,
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
            DataField(o.id, n.name, _keep_row_ids(o.type, n.type), n.description or o.description)
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
        for p in _PATTERNS:
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
        for p in _PATTERNS:
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


def apply_changes(schema: TableSchema, changes: Sequence[SchemaChange]) -> TableSchema:
    """The schema that follows ``schema`` after ``changes`` (id + 1), validated.

    Partition and primary-key columns cannot be dropped, renamed or retyped; immutable options cannot
    change (:func:`lakelog.connector.options.check_alter`); new columns take ids from
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

    for ch in changes:
        if isinstance(ch, SetOption):
            if not isinstance(ch.key, str) or not isinstance(ch.value, str):
                raise OptionError(f"option {ch.key!r} = {ch.value!r}: keys and values must be strings")
            options[ch.key] = ch.value
            touched_options.add(ch.key)
        elif isinstance(ch, RemoveOption):
            options.pop(ch.key, None)
        elif isinstance(ch, UpdateComment):
            comment = ch.comment
        elif isinstance(ch, AddColumn):
            _check_column_name(ch.name)
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
            _check_column_name(ch.new)
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
        else:
            raise SchemaError(f"unsupported schema change {ch!r}")

    check_alter(baseline, options)
    new = TableSchema(
        version=CURRENT_VERSION,
        id=schema.id + 1,
        fields=fields,
        highest_field_id=max(ids.last, schema.highest_field_id),
        partition_keys=list(schema.partition_keys),
        primary_keys=list(schema.primary_keys),
        options=options,
        comment=comment,
    )
    new.validate(strict_keys=touched_options)
    return new


# --------------------------------------------------------------------------------------------------
# Reading old files
# --------------------------------------------------------------------------------------------------


def _targets(read_schema: TableSchema, columns: Sequence[str] | None) -> list[DataField]:
    if columns is None:
        return list(read_schema.fields)
    return [read_schema.field(c) for c in columns]


def physical_names(
    file_schema: TableSchema, read_schema: TableSchema, columns: Sequence[str] | None = None
) -> dict[str, str | None]:
    """For each wanted column of ``read_schema``: its name in a file written under ``file_schema``
    (matched by field id), or None if the column did not exist then."""
    by_id = {f.id: f.name for f in file_schema.fields}
    return {f.name: by_id.get(f.id) for f in _targets(read_schema, columns)}


def evolve_table(
    data: pa.Table,
    file_schema: TableSchema,
    read_schema: TableSchema,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Adapt ``data`` (read from a file written under ``file_schema``) to ``read_schema``.

    Columns are matched by field id: renamed columns take their new names, dropped ones vanish, added
    ones (and any the data lacks) are null-filled, widened ones are cast. The result has
    ``read_schema``'s columns in its order, or ``columns`` in the order given, with the types of
    :meth:`TableSchema.arrow_schema`.
    """
    by_id = {f.id: f for f in file_schema.fields}
    target_arrow = read_schema.arrow_schema()
    present = set(data.column_names)
    arrays: list[Union[pa.Array, pa.ChunkedArray]] = []
    out_fields: list[pa.Field] = []
    for tf in _targets(read_schema, columns):
        af = target_arrow.field(tf.name)
        src = by_id.get(tf.id)
        if src is None or src.name not in present:
            arrays.append(pa.nulls(data.num_rows, af.type))
            out_fields.append(af.with_nullable(True) if src is None else af)
            continue
        col = data.column(src.name)
        if col.type != af.type:
            try:
                col = col.cast(af.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise SchemaError(
                    f"column {tf.name!r}: cannot convert file data of type {col.type} "
                    f"(schema {file_schema.id}) to {af.type} (schema {read_schema.id}): {e}"
                ) from None
        arrays.append(col)
        out_fields.append(af)
    return pa.Table.from_arrays(arrays, schema=pa.schema(out_fields))


# --------------------------------------------------------------------------------------------------
# SchemaManager
# --------------------------------------------------------------------------------------------------

_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")


class SchemaManager:
    """Reads and publishes ``<table>/schema/schema-N`` (or a branch's ``branch/branch-<b>/schema``)."""

    MAX_COMMIT_ATTEMPTS = 100

    def __init__(self, file_io: FileIO, table_path: str, branch: str = "main") -> None:
        self.file_io = file_io
        self.table_path = table_path
        self.branch = branch
        base = table_path if branch == "main" else f"{table_path}/branch/branch-{branch}"
        self.schema_dir = f"{base}/schema"
        self._cache: dict[int, TableSchema] = {}

    def schema_path(self, schema_id: int) -> str:
        return f"{self.schema_dir}/schema-{schema_id}"

    def list_ids(self) -> list[int]:
        ids = []
        for name in self.file_io.list_dir(self.schema_dir):
            m = _SCHEMA_FILE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def schema(self, schema_id: int) -> TableSchema:
        """Schema ``schema_id``; a missing file raises :class:`MissingFileError`, a broken one
        :class:`CorruptFileError` (both name the file)."""
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = self.schema_path(schema_id)
        data = self.file_io.read_bytes(path)
        s = TableSchema.from_json(data, path)
        if s.id != schema_id:
            raise CorruptFileError(f"schema file {path} holds schema id {s.id}")
        self._cache[schema_id] = s
        return s

    def latest(self) -> TableSchema | None:
        ids = self.list_ids()
        return self.schema(ids[-1]) if ids else None

    def list_all(self) -> list[TableSchema]:
        return [self.schema(i) for i in self.list_ids()]

    def commit(self, schema: TableSchema) -> bool:
        """Publish ``schema`` as ``schema-<id>``; False if that file already exists."""
        ok = self.file_io.try_publish(self.schema_path(schema.id), schema.to_json().encode("utf-8"))
        if ok:
            self._cache[schema.id] = schema
        return ok

    def create_table(self, schema: TableSchema) -> TableSchema:
        """Write ``schema`` as ``schema-0``; raises :class:`SchemaExistsError` if the table exists."""
        if self.list_ids():
            raise SchemaExistsError(f"a table already exists at {self.table_path} ({self.schema_dir})")
        first = schema if schema.id == 0 else schema.copy(id=0)
        if not self.commit(first):
            raise SchemaExistsError(f"a table already exists at {self.table_path} ({self.schema_path(0)})")
        return first

    def commit_changes(self, *changes: SchemaChange) -> TableSchema:
        """Apply ``changes`` to the latest schema and publish the result as the next version,
        retrying on top of a concurrent schema change."""
        for _ in range(self.MAX_COMMIT_ATTEMPTS):
            latest = self.latest()
            if latest is None:
                raise TableNotFoundError(
                    f"no table at {self.table_path} (no schema files in {self.schema_dir})"
                )
            new = apply_changes(latest, list(changes))
            if self.commit(new):
                return new
        raise CommitConflictError(
            f"schema change of {self.table_path} lost {self.MAX_COMMIT_ATTEMPTS} races "
            "with concurrent changes"
        )

