"""Paimon's rules for a table schema: column names, key lists, bucket and merge-engine options.

:func:`validate_schema` raises :class:`~lakelog.connector.errors.SchemaError` or
:class:`~lakelog.connector.errors.OptionError` naming the column or option at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from lakelog.connector.errors import (
    OptionError,
    SchemaError,
)
from lakelog.connector.format.defaults import default_values
from lakelog.connector.format.key_value import KEY_PREFIX, SYSTEM_FIELD_NAMES
from lakelog.connector.format.options import (
    RETENTION_KEYS,
    ChangelogProducer,
    CoreOptions,
    MergeEngine,
    check_changelog_retention,
    validate_options,
)
from lakelog.connector.format.partition import check_partition_time_options
from lakelog.connector.format.types import NESTED_ROOTS, DataField, highest_field_id, type_to_string

if TYPE_CHECKING:
    from lakelog.connector.format.schema import TableSchema

__all__ = ["validate_schema", ]


FIELD_OPTION_PATTERNS = (
    CoreOptions.FIELD_AGGREGATE_FUNCTION,
    CoreOptions.FIELD_IGNORE_RETRACT,
    CoreOptions.FIELD_SEQUENCE_GROUP,
    CoreOptions.FIELD_DISTINCT,
    CoreOptions.FIELD_LIST_AGG_DELIMITER,
    CoreOptions.FIELD_NESTED_KEY,
    CoreOptions.FIELD_COUNT_LIMIT,
    CoreOptions.FIELD_TS_FIELD,
    CoreOptions.FIELD_STATS_MODE,
    CoreOptions.FIELD_DEFAULT_VALUE,
)


# the types Paimon's bitmap file index takes (its BitmapTypeVisitor; floats it takes too, but its
# documentation leaves them out and so does lakelog)
_BITMAP_ROOTS = frozenset({
    "TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ", "CHAR",
    "VARCHAR", "BOOLEAN",
})


def keys_from_options(given: list[str], options: dict[str, str], key: str, what: str) -> list[str]:
    """Keys given directly or through an option (Paimon allows either, not both); drops the option."""
    raw = options.pop(key, None)
    if raw is None:
        return [str(k) for k in given]
    if given:
        raise SchemaError(f"cannot define the {what} both directly and with the option {key!r}")
    return [k.strip() for k in raw.split(",") if k.strip()]


def check_key_list(keys: Sequence[str], names: Sequence[str], what: str) -> None:
    missing = [k for k in keys if k not in names]
    if missing:
        raise SchemaError(f"{what} column(s) {missing} are not in the schema (columns: {list(names)})")
    dups = sorted({k for k in keys if list(keys).count(k) > 1})
    if dups:
        raise SchemaError(f"{what} names column(s) {dups} more than once")


def check_column_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"invalid column name {name!r}")
    if name in SYSTEM_FIELD_NAMES:
        raise SchemaError(f"column name {name!r} is reserved for system columns {sorted(SYSTEM_FIELD_NAMES)}")
    if name.startswith(KEY_PREFIX):
        raise SchemaError(f"column name {name!r} must not start with {KEY_PREFIX!r}")


def validate_schema(schema: TableSchema, strict_keys: Iterable[str] | None = None) -> None:
    """Paimon's table rules.

    ``strict_keys``: option keys that must be known to lakelog (default: all of them); other keys
    are only checked when known. Raises :class:`SchemaError` or :class:`OptionError`.
    """
    names = schema.field_names
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise SchemaError(f"duplicate column name(s) {dups}")
    for n in names:
        check_column_name(n)
    highest_field_id(schema.fields)  # duplicate ids
    check_key_list(schema.primary_keys, names, "primary key")
    check_key_list(schema.partition_keys, names, "partition")
    by_name = {f.name: f for f in schema.fields}
    for kind, keys in (("primary key", schema.primary_keys), ("partition", schema.partition_keys)):
        for k in keys:
            if by_name[k].type.root in NESTED_ROOTS:
                raise SchemaError(
                    f"{kind} column {k!r} has type {type_to_string(by_name[k].type)}; "
                    f"{kind} columns must have atomic types"
                )
    if schema.primary_keys and not schema.trimmed_primary_keys:
        raise SchemaError(
            f"primary key {schema.primary_keys} must not equal the partition keys "
            f"{schema.partition_keys}: each partition would hold a single row"
        )

    if strict_keys is None:
        validate_options(schema.options, strict=True)
        check_changelog_retention(schema.options)
    else:
        touched = set(strict_keys)
        validate_options(schema.options, strict=False)
        validate_options({k: schema.options[k] for k in touched if k in schema.options}, strict=True)
        if touched & RETENTION_KEYS:
            check_changelog_retention(schema.options)
    core = CoreOptions(schema.options, strict=False)
    _validate_bucket(schema, core, names)
    _validate_merge_options(schema, core, names, by_name)

def _validate_bucket(schema: TableSchema, core: CoreOptions, names: list[str]) -> None:
    configured = core.bucket_key
    if core.bucket == -1:
        if configured:
            raise OptionError("cannot define 'bucket-key' with bucket -1; set a bucket number")
        if schema.primary_keys and core.log_system.value != "none":
            raise OptionError("dynamic bucket mode (bucket -1) cannot work with a log system ('log.system')")
        if not schema.primary_keys and core.full_compaction_delta_commits is not None:
            raise OptionError(
                "append tables in dynamic bucket mode do not support 'full-compaction.delta-commits'"
            )
    elif not schema.primary_keys and not configured:
        raise OptionError(
            f"bucketed append table (bucket = {core.bucket}) needs a 'bucket-key' option "
            "naming the column(s) to hash"
        )
    if configured:
        missing = [k for k in configured if k not in names]
        if missing:
            raise OptionError(f"'bucket-key' names unknown column(s) {missing} (columns: {names})")
        in_partition = [k for k in configured if k in schema.partition_keys]
        if in_partition:
            raise OptionError(f"'bucket-key' must not contain partition key(s) {in_partition}")
        if schema.primary_keys:
            outside = [k for k in configured if k not in schema.trimmed_primary_keys]
            if outside:
                raise OptionError(
                    f"'bucket-key' column(s) {outside} are not part of the primary key "
                    f"{schema.trimmed_primary_keys}"
                )
        for k in configured:
            t = schema.field(k).type
            if t.root in NESTED_ROOTS:
                raise OptionError(f"bucket-key column {k!r} has nested type {type_to_string(t)}")

def _validate_merge_options(
    schema: TableSchema, core: CoreOptions, names: list[str], by_name: dict[str, DataField]
) -> None:
    has_pk = bool(schema.primary_keys)
    producer = core.changelog_producer
    if not has_pk and producer != ChangelogProducer.NONE:
        raise OptionError(
            f"'changelog-producer' = '{producer.value}' needs a primary key; append tables have none"
        )
    engine = core.merge_engine
    if engine == MergeEngine.FIRST_ROW and producer not in (
        ChangelogProducer.NONE, ChangelogProducer.LOOKUP
    ):
        raise OptionError(
            "merge-engine 'first-row' supports changelog-producer 'none' or 'lookup', "
            f"not '{producer.value}'"
        )
    if core.deletion_vectors_enabled:
        _validate_deletion_vectors(has_pk, engine, producer)
    for c in core.bloom_filter_columns():
        if c not in by_name:
            raise OptionError(
                f"'file-index.bloom-filter.columns' names unknown column {c!r} (columns: {names})"
            )
        root = by_name[c].type.root
        if root in NESTED_ROOTS or root in ("BOOLEAN", "DECIMAL", "VARIANT"):
            shown = type_to_string(by_name[c].type)
            raise OptionError(
                f"'file-index.bloom-filter.columns': column {c!r} has type {shown}, which Paimon's bloom "
                "filter index does not hash (booleans, decimals, nested types)"
            )
    for c in core.bitmap_index_columns():
        if c not in by_name:
            raise OptionError(f"'file-index.bitmap.columns' names unknown column {c!r} (columns: {names})")
        root = by_name[c].type.root
        if root not in _BITMAP_ROOTS:
            shown = type_to_string(by_name[c].type)
            raise OptionError(
                f"'file-index.bitmap.columns': column {c!r} has type {shown}; Paimon's bitmap index takes "
                "integers, dates, times, timestamps, strings and booleans"
            )
    if schema.options.get("partition.expiration-time") is not None and not schema.partition_keys:
        raise OptionError("'partition.expiration-time' needs a partitioned table")
    check_partition_time_options(core, schema.partition_keys)
    ignored = core.get(CoreOptions.CHANGELOG_PRODUCER_ROW_DEDUPLICATE_IGNORE_FIELDS) or []
    unknown = [c for c in ignored if c not in names]
    if unknown:
        raise OptionError(
            f"'changelog-producer.row-deduplicate-ignore-fields' names unknown column(s) {unknown} "
            f"(columns: {names})"
        )
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
            if by_name[s].type.root in NESTED_ROOTS:
                nested = type_to_string(by_name[s].type)
                raise OptionError(f"sequence field {s!r} has nested type {nested}")
        if engine == MergeEngine.FIRST_ROW:
            raise OptionError("merge-engine 'first-row' does not support 'sequence.field'")
        if schema.cross_partition_update:
            raise OptionError(
                f"'sequence.field' cannot be used with a primary key {schema.primary_keys} that does not "
                f"hold every partition field {schema.partition_keys} (cross-partition update): a key "
                "moving between partitions is ordered by arrival"
            )

    # fields.<name>.<suffix>: the named fields must exist
    for p in FIELD_OPTION_PATTERNS:
        for key in schema.options:
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
    in_schema = [f.name for f in schema.fields if f.default_value is not None]
    for name in [*defaults, *in_schema]:
        if name in schema.primary_keys or name in schema.partition_keys:
            raise OptionError(f"key column {name!r} must not have a default value")
    if (defaults or in_schema) and engine == MergeEngine.PARTIAL_UPDATE:
        what = (
            f"option {CoreOptions.FIELD_DEFAULT_VALUE.key_for(next(iter(defaults)))!r}" if defaults
            else f"the default value of column {in_schema[0]!r}"
        )  # fmt: skip
        raise OptionError(
            f"{what} is not supported by lakelog with merge-engine 'partial-update': a write fills nulls "
            "with the default, and a null there means 'keep the current value'"
        )
    default_values(schema.fields, schema.options)  # each parses as a value of its column's type


def _validate_deletion_vectors(has_pk: bool, engine: MergeEngine, producer: ChangelogProducer) -> None:
    """Paimon's rules for ``deletion-vectors.enabled`` (on append tables it marks the rows a
    DELETE removes: no merge engine or changelog producer applies)."""
    if not has_pk:
        return
    if engine == MergeEngine.FIRST_ROW:
        raise OptionError(
            "'deletion-vectors.enabled' cannot be used with merge-engine 'first-row': that engine never "
            "replaces a row, so there is nothing to mark deleted (Paimon refuses it too)"
        )
    if producer not in (ChangelogProducer.NONE, ChangelogProducer.INPUT, ChangelogProducer.LOOKUP):
        raise OptionError(
            f"'deletion-vectors.enabled' works with changelog-producer 'none', 'input' or 'lookup', not "
            f"'{producer.value}' (as in Paimon)"
        )
