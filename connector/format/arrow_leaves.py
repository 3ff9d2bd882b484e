"""Changing the leaves of nested Arrow arrays (lists, maps, structs) without touching the rest."""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

__all__ = ["map_leaves"]

Leaf = Callable[[pa.Array, pa.DataType], pa.Array]


def _entries(t: pa.MapType) -> pa.StructType:
    return pa.struct([t.key_field, t.item_field])


def map_leaves(arr: pa.Array, target: pa.DataType, leaf: Leaf) -> pa.Array:
    """``arr`` as type ``target``: lists, maps and structs are rebuilt around their converted children
    (their validity and offsets reused), and ``leaf(child, child_target)`` converts each other child
    whose type differs from its target's. Differences in field metadata alone cost nothing."""
    t = arr.type
    if t.equals(target):
        return arr if t.equals(target, check_metadata=True) else arr.view(target)
    if (pa.types.is_list(t) and pa.types.is_list(target)) or (pa.types.is_map(t) and pa.types.is_map(target)):
        child_type = target.value_type if pa.types.is_list(target) else _entries(target)
        child = map_leaves(arr.values, child_type, leaf)
        own = arr.buffers()[:2]  # validity and offsets; the child's buffers follow
        return pa.Array.from_buffers(target, len(arr), own, arr.null_count, arr.offset, children=[child])
    if pa.types.is_struct(t) and pa.types.is_struct(target) and t.num_fields == target.num_fields:
        children = [map_leaves(arr.field(i), target.field(i).type, leaf) for i in range(t.num_fields)]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    return leaf(arr, target)
