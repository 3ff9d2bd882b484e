"""Merge engines of primary-key tables, vectorised over Arrow.

A merge takes the rows of one or more sorted runs of a bucket, sorted by key, then by the engine's
``order_by`` columns (``sequence.field``), then by ``_SEQUENCE_NUMBER`` (see :func:`sort_for_merge`),
and returns one row per key. The engines follow Apache Paimon's merge functions:

* ``deduplicate``: the last row wins; a winning ``-U``/``-D`` removes the key. ``ignore-delete``
  drops ``-U``/``-D`` input rows first.
* ``partial-update``: the latest non-null value of each field; ``fields.<seq>.sequence-group``
  guards a group of fields by sequence field(s) (a true partial update: nulls overwrite, retractions
  clear the group's fields, aggregate functions inside groups); deletes need ``ignore-delete``,
  ``partial-update.remove-record-on-delete`` or sequence groups
  (``partial-update.remove-record-on-sequence-group``).
* ``aggregation``: ``fields.<f>.aggregate-function`` (default ``fields.default-aggregate-function``,
  else ``last_non_null_value``) with retraction where Paimon allows it,
  ``fields.<f>.ignore-retract`` and ``aggregation.remove-record-on-delete``.
* ``first-row``: the first row wins; ``-U``/``-D`` need ``ignore-delete``.

Everything is computed per column with numpy / pyarrow.compute over all keys at once. Paimon's
merge functions fold the rows of a key one at a time (``add``); here every fold is expressed through
per-row *events* (aggregate, aggregate an older row, retract, set the accumulator) and per-key
"find the deciding row" reductions, so the result equals Paimon's fold without a per-row loop.
A few rare combinations fold sequentially over row positions (vectorised across keys): ``product``
with retractions or on DECIMAL, ``count`` / ``first_non_null_value`` fed older sequence-group rows,
and ``listagg`` with ``distinct`` fed older sequence-group rows (a per-key loop over those keys).

Output: one row per key, sorted by key, same columns; ``_SEQUENCE_NUMBER`` is the key's largest;
``_VALUE_KIND`` is 0 (+I) for a live row and 3 (-D) when the key is removed (the values of a -D row
are not meaningful). Sequence values compare nulls first (the oldest) in both sort orders, as
Paimon's sequence comparator does; :func:`merge_sort_indices` sorts that way.

"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import OptionError
from lakelog.connector.format.key_value import SEQUENCE_NUMBER
from lakelog.connector.format.options import CoreOptions, MergeEngine
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import DataField
from lakelog.connector.lsm.kv import DEDUPLICATE, MergeFunction
from lakelog.connector.lsm.merge.aggregators import (
    SUPPORTED_AGGREGATE_FUNCTIONS,
    AggregateSpec,
    aggregate_spec,
)
from lakelog.connector.lsm.merge.functions import (
    AggregateMergeFunction,
    DeduplicateMergeFunction,
    FirstRowMergeFunction,
    PartialUpdateMergeFunction,
    SequenceGroup,
    sequence_order_by,
)

__all__ = [
    "merge_function_for",
    "MergeFunction",
    "merge_function",
    "sort_for_merge",
    "merge_sort_indices",
    "DeduplicateMergeFunction",
    "FirstRowMergeFunction",
    "PartialUpdateMergeFunction",
    "AggregateMergeFunction",
    "SUPPORTED_AGGREGATE_FUNCTIONS",
]



# --------------------------------------------------------------------------------------------------
# Factory and validation
# --------------------------------------------------------------------------------------------------


def _field_map(schema: TableSchema) -> dict[str, DataField]:
    return {f.name: f for f in schema.fields}


def _require_field(fields: dict[str, DataField], name: str, option: str) -> DataField:
    f = fields.get(name)
    if f is None:
        raise OptionError(f"field {name!r} named in option {option!r} does not exist in the table schema")
    return f


def _check_sequence_fields(schema: TableSchema, options: CoreOptions) -> list[str]:
    fields = _field_map(schema)
    seq = options.sequence_field
    for s in seq:
        _require_field(fields, s, CoreOptions.SEQUENCE_FIELD.key)
    return seq


def merge_function(schema: TableSchema, options: CoreOptions) -> MergeFunction:
    """The merge function of a primary-key table (validates the engine's options)."""
    engine = options.merge_engine
    seq_fields = _check_sequence_fields(schema, options)
    _check_no_agg_on_sequence_field(options, seq_fields)
    order_by = sequence_order_by(options)
    if engine == MergeEngine.DEDUPLICATE:
        return DeduplicateMergeFunction(options.ignore_delete, order_by)
    if engine == MergeEngine.FIRST_ROW:
        if seq_fields:
            raise OptionError("option 'sequence.field' cannot be used with 'merge-engine' = 'first-row'")
        return FirstRowMergeFunction(options.ignore_delete, [])
    if engine == MergeEngine.AGGREGATION:
        return _aggregation(schema, options, seq_fields, order_by)
    if engine == MergeEngine.PARTIAL_UPDATE:
        return _partial_update(schema, options, order_by)
    raise OptionError(f"merge engine {engine!r} is not supported")


def _nullable(schema: TableSchema) -> dict[str, bool]:
    pk = set(schema.primary_keys)
    return {f.name: f.type.nullable and f.name not in pk for f in schema.fields}


def _check_no_agg_on_sequence_field(options: CoreOptions, seq_fields: list[str]) -> None:
    for s in seq_fields:
        key = CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(s)
        if options.raw(key) is not None:
            raise OptionError(f"option {key!r}: should not define aggregation on sequence field {s!r}")


def _aggregation(schema: TableSchema, options: CoreOptions, seq_fields: list[str],
                 order_by: list[tuple[str, str]]) -> AggregateMergeFunction:
    pks = list(schema.primary_keys)
    aggs: dict[str, AggregateSpec] = {}
    for f in schema.fields:
        if f.name in pks:
            continue
        if f.name in seq_fields:
            aggs[f.name] = AggregateSpec("last_value", f.name)
            continue
        name = options.field_aggregate_function(f.name) or "last_non_null_value"
        aggs[f.name] = aggregate_spec(name, f, options)
    return AggregateMergeFunction(aggs, pks, _nullable(schema), options.aggregation_remove_record_on_delete,
                                  options.ignore_delete, order_by)


def _partial_update(schema: TableSchema, options: CoreOptions,
                    order_by: list[tuple[str, str]]) -> PartialUpdateMergeFunction:
    fields = _field_map(schema)
    pks = list(schema.primary_keys)
    groups: list[SequenceGroup] = []
    protected: dict[str, tuple[str, ...]] = {}
    seq_of: dict[str, tuple[str, ...]] = {}
    for seq, members in options.sequence_groups().items():
        key = CoreOptions.FIELD_SEQUENCE_GROUP.key_for(",".join(seq))
        if not seq:
            raise OptionError(f"option {key!r} names no sequence field")
        for s in seq:
            _require_field(fields, s, key)
            if s in seq_of and seq_of[s] != seq:
                raise OptionError(f"sequence field {s!r} is used by more than one sequence group ({key!r})")
            seq_of[s] = seq
        for m in members:
            _require_field(fields, m, key)
            if m in seq:
                continue
            if m in protected:
                raise OptionError(f"field {m!r} is defined repeatedly by multiple groups: {key!r}")
            protected[m] = seq
        groups.append(SequenceGroup(tuple(seq), [m for m in members if m not in seq]))
    for m in protected:
        if m in seq_of:
            raise OptionError(f"field {m!r} is both a sequence field and a member of a sequence group")
    ignore_delete = options.ignore_delete
    remove_on_delete = options.partial_update_remove_record_on_delete
    remove_groups = options.get(CoreOptions.PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP) or []
    if remove_on_delete and ignore_delete:
        raise OptionError("options 'ignore-delete' and 'partial-update.remove-record-on-delete' have "
                          "conflicting behavior so should not be enabled at the same time")
    if remove_groups and ignore_delete:
        raise OptionError("options 'ignore-delete' and 'partial-update.remove-record-on-sequence-group' "
                          "have conflicting behavior so should not be enabled at the same time")
    if remove_on_delete and groups:
        raise OptionError("sequence-group and 'partial-update.remove-record-on-delete' have conflicting "
                          "behavior so should not be enabled at the same time")
    for r in remove_groups:
        if r not in seq_of:
            raise OptionError(f"field {r!r} defined in option 'partial-update.remove-record-on-sequence-"
                              "group' must be part of sequence groups")
    for grp in groups:
        grp.partial_delete = any(s in remove_groups for s in grp.seq_fields)
    aggs: dict[str, AggregateSpec] = {}
    for f in schema.fields:
        if f.name in pks or f.name in seq_of:
            continue
        name = options.field_aggregate_function(f.name)
        if name is None:
            continue
        if name != "last_non_null_value" and f.name not in protected:
            raise OptionError(
                f"Must use sequence group for aggregation functions but not found for field {f.name!r} "
                f"(option {CoreOptions.FIELD_AGGREGATE_FUNCTION.key_for(f.name)!r})")
        aggs[f.name] = aggregate_spec(name, f, options)
    return PartialUpdateMergeFunction(pks, _nullable(schema), groups, aggs, ignore_delete, remove_on_delete,
                                      order_by)


# --------------------------------------------------------------------------------------------------
# Sorting and row kinds
# --------------------------------------------------------------------------------------------------


def merge_sort_indices(table: pa.Table, keys: Sequence[str], order_by: Sequence[tuple[str, str]]) -> pa.Array:
    """Stable order for a merge: keys, then ``order_by`` (nulls first, as Paimon's sequence comparator
    orders them), then ``_SEQUENCE_NUMBER``."""
    sort_keys = [(k, "ascending") for k in keys] + list(order_by) + [(SEQUENCE_NUMBER, "ascending")]
    return pc.sort_indices(table, sort_keys=sort_keys, null_placement="at_start")


def sort_for_merge(table: pa.Table, keys: Sequence[str], order_by: Sequence[tuple[str, str]]) -> pa.Table:
    return table.take(merge_sort_indices(table, keys, order_by))


def merge_function_for(store: TableStore) -> MergeFunction:
    """The table's merge engine (deduplicate unless the options say otherwise)."""
    opts = store.options
    if opts.merge_engine == MergeEngine.DEDUPLICATE and not opts.ignore_delete and not opts.sequence_field:
        return DEDUPLICATE
    from lakelog.connector.lsm.merge.engine import merge_function

    return merge_function(store.schema, store.options)
