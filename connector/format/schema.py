"""Table schemas (``<table>/schema/schema-N``): one schema version, byte-compatible with the JSON
Paimon and pypaimon write.

Validation is in ``schema_validation``, ALTER changes in ``schema_changes``, read-side evolution in
``schema_evolution`` and the schema files in ``schema_manager``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakelog.connector.errors import (
    CorruptFileError,
    OptionError,
    SchemaError,
    TableAlreadyExistsError,
)
from lakelog.connector.format.options import (
    CoreOptions,
)
from lakelog.connector.format.schema_validation import (
    check_key_list,
    keys_from_options,
)
from lakelog.connector.format.types import (
    DataField,
    DataType,
    field_from_json,
    field_to_json,
    fields_from_arrow_schema,
    highest_field_id,
    to_arrow_type,
    with_nullable,
)

__all__ = ["CURRENT_VERSION", "SchemaExistsError", "TableSchema", "BucketMode"]

CURRENT_VERSION = 3
"""The schema file version Paimon 0.9+ writes (and lakelog writes)."""




class BucketMode:
    """How a table's rows find their bucket (Paimon's bucket modes)."""

    HASH_FIXED = "HASH_FIXED"  # bucket > 0: hash of the bucket key modulo the partition's bucket count
    HASH_DYNAMIC = "HASH_DYNAMIC"  # bucket -1, primary key holds the partition: per-partition hash index
    KEY_DYNAMIC = "KEY_DYNAMIC"  # bucket -1, cross-partition primary key: a key index kept by the writer
    BUCKET_UNAWARE = "BUCKET_UNAWARE"  # append tables with bucket -1: everything in bucket 0


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
    def bucket_mode(self) -> str:
        """The table's :class:`BucketMode`."""
        if self.core_options.bucket > 0:
            return BucketMode.HASH_FIXED
        if not self.primary_keys:
            return BucketMode.BUCKET_UNAWARE
        return BucketMode.KEY_DYNAMIC if self.cross_partition_update else BucketMode.HASH_DYNAMIC

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
        pks = keys_from_options(list(primary_keys), opts, "primary-key", "primary key")
        parts = keys_from_options(list(partition_keys), opts, "partition", "partition")
        if not isinstance(schema, pa.Schema):
            raise SchemaError(f"expected a pyarrow.Schema, got {type(schema).__name__}")
        names = list(schema.names)
        if not names:
            raise SchemaError("a table needs at least one column; the schema has none")
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise SchemaError(f"duplicate column name(s) {dups}")
        check_key_list(pks, names, "primary key")
        check_key_list(parts, names, "partition")
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
        """Paimon's table rules (see :func:`~lakelog.connector.format.schema_validation.validate_schema`)."""
        from lakelog.connector.format.schema_validation import validate_schema

        validate_schema(self, strict_keys)


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
