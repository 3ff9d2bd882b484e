"""The merge functions of the four engines: deduplicate, first-row, aggregation, partial-update
(see :mod:`lakelog.connector.lsm.merge.engine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakelog.connector.format.options import CoreOptions, SortOrder
from lakelog.connector.lsm.merge.aggregators import AggregateSpec, fold_aggregate
from lakelog.connector.lsm.merge.events import (
    AGG,
    AGG_REV,
    RETRACT,
    SET,
    SKIP,
    MergeContext,
    take_or_null,
    valid_mask,
)

__all__ = [
    "DeduplicateMergeFunction",
    "FirstRowMergeFunction",
    "AggregateMergeFunction",
    "PartialUpdateMergeFunction",
]


# --------------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------------


def sequence_order_by(options: CoreOptions) -> list[tuple[str, str]]:
    order = "descending" if options.sequence_field_sort_order == SortOrder.DESCENDING else "ascending"
    return [(f, order) for f in options.sequence_field]


def _kinds(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column(VALUE_KIND).to_numpy(), dtype=np.int8)


def _is_insert(kinds: np.ndarray) -> np.ndarray:
    return (kinds == RowKind.INSERT) | (kinds == RowKind.UPDATE_AFTER)


def _output(table: pa.Table, ctx: MergeContext, kind: np.ndarray, rows: np.ndarray,
            values: dict[str, pa.Array], *, own_sequence: bool = False) -> pa.Table:
    """One row per key: key columns from the key's last row, max sequence (``own_sequence``: the
    chosen row's, as Paimon's first-row engine keeps its first row whole), ``kind``, merged values."""
    seq = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
    if own_sequence:
        max_seq = seq[rows]
    else:
        max_seq = np.maximum.reduceat(seq, ctx.starts) if ctx.n else seq
    rows_arr = pa.array(rows)
    cols: list[pa.Array] = []
    for f in table.schema:
        if f.name == SEQUENCE_NUMBER:
            cols.append(pa.array(max_seq, type=f.type))
        elif f.name == VALUE_KIND:
            cols.append(pa.array(kind, type=pa.int8()).cast(f.type))
        elif f.name in values:
            cols.append(values[f.name].cast(f.type) if values[f.name].type != f.type else values[f.name])
        else:
            cols.append(table.column(f.name).take(rows_arr).combine_chunks())
    return pa.Table.from_arrays(cols, schema=table.schema)


def _value_columns(table: pa.Table, keys: Sequence[str]) -> list[str]:
    skip = set(keys) | {SEQUENCE_NUMBER, VALUE_KIND}
    return [n for n in table.column_names if n not in skip]


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _empty(table: pa.Table) -> bool:
    return table.num_rows == 0


@dataclass
class DeduplicateMergeFunction:
    """``deduplicate``: the last row of each key (``ignore-delete`` drops -U/-D rows first)."""

    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = MergeContext.build(table, keys)
        kinds = _kinds(table)
        ins = _is_insert(kinds)
        active = ins if self.ignore_delete else np.ones(ctx.n, dtype=bool)
        last = ctx.last(active)
        kind = np.where((last >= 0) & ins[np.maximum(last, 0)], RowKind.INSERT, RowKind.DELETE)
        rows = np.where(last >= 0, last, ctx.ends - 1)
        return _output(table, ctx, kind.astype(np.int8), rows, {})


@dataclass
class FirstRowMergeFunction:
    """``first-row``: the first row of each key; -U/-D rows need ``ignore-delete``."""

    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = MergeContext.build(table, keys)
        ins = _is_insert(_kinds(table))
        if not self.ignore_delete and not ins.all():
            raise InvalidInputError(
                "By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records. "
                "You can config 'ignore-delete' to ignore the DELETE/UPDATE_BEFORE records.")
        first = ctx.first(ins)
        kind = np.where(first >= 0, RowKind.INSERT, RowKind.DELETE).astype(np.int8)
        rows = np.where(first >= 0, first, ctx.ends - 1)
        return _output(table, ctx, kind, rows, {}, own_sequence=True)


@dataclass
class AggregateMergeFunction:
    """``aggregation``: per-field aggregate functions (see the module docstring)."""

    aggregators: dict[str, AggregateSpec]
    primary_keys: list[str]
    nullable: dict[str, bool]
    remove_record_on_delete: bool = False
    ignore_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = MergeContext.build(table, keys)
        kinds = _kinds(table)
        ins = _is_insert(kinds)
        active = ins if self.ignore_delete else np.ones(ctx.n, dtype=bool)
        reset = active & (kinds == RowKind.DELETE) if self.remove_record_on_delete else np.zeros(ctx.n, bool)
        ctx.set_resets(reset)
        base_op = np.where(ins, AGG, np.where(active & ~reset, RETRACT, SKIP)).astype(np.int8)
        last = ctx.last(active)
        kind = np.where((last >= 0) & ~reset[np.maximum(last, 0)], RowKind.INSERT, RowKind.DELETE)
        kind = kind.astype(np.int8)
        values: dict[str, pa.Array] = {}
        for name in _value_columns(table, keys):
            arr = _column(table, name)
            if name in self.primary_keys or name not in self.aggregators:
                values[name] = take_or_null(arr, np.where(last >= 0, last, ctx.ends - 1))
                continue
            op = base_op
            if not self.nullable.get(name, True):
                op = np.where(reset, SET, base_op).astype(np.int8)
            values[name] = fold_aggregate(self.aggregators[name], arr, op, ctx)
        return _output(table, ctx, kind, ctx.ends - 1, values)


@dataclass
class SequenceGroup:
    seq_fields: tuple[str, ...]
    fields: list[str]
    partial_delete: bool = False


@dataclass
class PartialUpdateMergeFunction:
    """``partial-update``: latest non-null values, sequence groups, aggregate functions in groups."""

    primary_keys: list[str]
    nullable: dict[str, bool]
    groups: list[SequenceGroup]
    aggregators: dict[str, AggregateSpec]
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    order_by: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, table: pa.Table, keys: list[str]) -> pa.Table:
        if _empty(table):
            return table
        ctx = MergeContext.build(table, keys)
        kinds = _kinds(table)
        # Paimon's initRow when a key's first row is a retraction: the non-nullable fields take that
        # row's values before the row itself is merged. Modelled as a virtual copy of the row in front.
        first = ctx.starts[~_is_insert(kinds[ctx.starts])]
        virtual = np.zeros(ctx.n, dtype=bool)
        if len(first):
            table = table.take(pa.array(np.insert(np.arange(ctx.n), first, first)))
            virtual = np.insert(virtual, first, True)
            ctx = MergeContext.build(table, keys)
            kinds = _kinds(table)
        ins = _is_insert(kinds)
        ret = ~ins & ~virtual
        active = ins | (ret & (not self.ignore_delete))
        events: dict[str, tuple[np.ndarray, AggregateSpec]] = {}
        if self.groups:
            reset, events = self._groups_events(table, ctx, kinds, ins, active, virtual)
        else:
            if (ret & active).any() and not self.remove_record_on_delete:
                raise InvalidInputError(
                    "By default, Partial update can not accept delete records, you can choose one of "
                    "the following solutions: 1. Configure 'ignore-delete' to ignore delete records. "
                    "2. Configure 'partial-update.remove-record-on-delete' to remove the whole row when "
                    "receiving delete records. 3. Configure 'sequence-group's to retract partial "
                    "columns. Also configure 'partial-update.remove-record-on-sequence-group' to remove "
                    "the whole row when receiving deleted records of specified sequence group.")
            reset = active & (kinds == RowKind.DELETE) & self.remove_record_on_delete
        ctx.set_resets(reset)
        has_reset = ctx.any(reset)
        base_row = reset | (virtual & ~has_reset[ctx.gid])
        last_row_reset = reset[ctx.ends - 1]
        kind = np.where(last_row_reset | ~ctx.any(ins), RowKind.DELETE, RowKind.INSERT).astype(np.int8)
        values: dict[str, pa.Array] = {}
        for name in _value_columns(table, keys):
            arr = _column(table, name)
            if name in self.primary_keys:
                values[name] = take_or_null(arr, ctx.ends - 1)
                continue
            set_rows = base_row & (not self.nullable.get(name, True))
            if name in events:
                op, spec = events[name]
            else:
                op = np.where(ins, AGG, SKIP).astype(np.int8)
                spec = AggregateSpec("last_non_null_value", name)
            op = np.where(set_rows & (op == SKIP), SET, op).astype(np.int8)
            values[name] = fold_aggregate(spec, arr, op, ctx)
        return _output(table, ctx, kind, ctx.ends - 1, values)

    def _groups_events(self, table: pa.Table, ctx: MergeContext, kinds: np.ndarray, ins: np.ndarray,
                       active: np.ndarray, virtual: np.ndarray
                       ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, AggregateSpec]]]:
        n = ctx.n
        info = []
        for grp in self.groups:
            missing = [f for f in grp.seq_fields if f not in table.column_names]
            if missing:
                raise InvalidInputError(f"sequence group field(s) {missing} are missing from the merge input")
            cols = [_column(table, f) for f in grp.seq_fields]
            nonempty = np.zeros(n, dtype=bool)
            for c in cols:
                nonempty |= valid_mask(c)
            base_cols = [c if not self.nullable.get(f, True) else pa.nulls(n, c.type)
                         for f, c in zip(grp.seq_fields, cols)]
            rank, base_rank = _tuple_ranks(cols, base_cols)
            info.append((nonempty, rank, base_rank))
        first_row = np.zeros(n, dtype=bool)
        first_row[ctx.starts] = True
        is_delete = kinds == RowKind.DELETE
        reset = np.zeros(n, dtype=bool)
        is_new: list[np.ndarray] = []
        for _ in range(n + 1):
            is_new = []
            for nonempty, rank, base_rank in info:
                contrib = np.where(active & nonempty, rank, -1)
                contrib = np.where(reset | virtual, base_rank, contrib)
                seg_start = first_row | reset
                seg = np.cumsum(seg_start)
                width = np.int64(max(int(rank.max(initial=0)), int(base_rank.max(initial=0))) + 2)
                shifted = contrib + 1 + seg * width
                running = np.maximum.accumulate(shifted) - seg * width - 1
                before = np.where(first_row, -1, np.concatenate(([-1], running[:-1])))
                is_new.append(active & nonempty & (rank >= before))
            new_reset = np.zeros(n, dtype=bool)
            for grp, new in zip(self.groups, is_new):
                if grp.partial_delete:
                    new_reset |= is_delete & new
            if np.array_equal(new_reset, reset):
                break
            reset = new_reset
        ctx.set_resets(reset)
        events: dict[str, tuple[np.ndarray, AggregateSpec]] = {}
        retract = active & ~ins & ~reset
        for grp, new, (nonempty, _, _) in zip(self.groups, is_new, info):
            for f in grp.seq_fields:
                keep = np.where(new & ~reset, AGG, SKIP).astype(np.int8)
                events[f] = (keep, AggregateSpec("last_value", f))
            for f in grp.fields:
                spec = self.aggregators.get(f)
                if spec is None:
                    op = np.where(new & ins, AGG, np.where(new & retract, RETRACT, SKIP))
                    events[f] = (op.astype(np.int8), AggregateSpec("last_value", f))
                else:
                    op = np.where(nonempty & ins, np.where(new, AGG, AGG_REV),
                                  np.where(nonempty & retract, RETRACT, SKIP))
                    events[f] = (op.astype(np.int8), spec)
        return reset, events


def _tuple_ranks(cols: list[pa.Array], base_cols: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Dense ranks of the rows' sequence tuples and of their base tuples (nulls first, lexicographic)."""
    n = len(cols[0]) if cols else 0
    both = pa.table({f"c{i}": pa.concat_arrays([c, b]) for i, (c, b) in enumerate(zip(cols, base_cols))})
    order = pc.sort_indices(both, sort_keys=[(f"c{i}", "ascending") for i in range(len(cols))],
                            null_placement="at_start").to_numpy()
    sorted_t = both.take(pa.array(order))
    change = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        diff = np.zeros(len(order) - 1, dtype=bool)
        for name in sorted_t.column_names:
            c = sorted_t.column(name).combine_chunks()
            a, b = c.slice(0, len(c) - 1), c.slice(1)
            neq = pc.fill_null(pc.not_equal(a, b), False)
            differ = pc.or_(neq, pc.xor(pc.is_null(a), pc.is_null(b)))
            diff |= np.asarray(differ.to_numpy(zero_copy_only=False), dtype=bool)
        change[1:] = diff
    dense = np.cumsum(change)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = dense
    return ranks[:n], ranks[n:]

