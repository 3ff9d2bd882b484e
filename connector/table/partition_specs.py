"""Partition specs: ``{"dt": "2024-06-01"}`` names the partitions whose fields have those values.

A spec may name some of the partition fields (every partition matching them is meant) and its values
may be strings, as a command line or a SQL procedure argument gives them; they become values of the
partition columns' types as a write would store them
(:func:`~lakelog.connector.table.coercion.coerce_value`): exactly, or refused naming the field, the
value and the type (``{"p": 1.054}`` names no partition of a ``DECIMAL(5, 2)`` column ``p``; it is
refused, not rounded to the partition ``1.05``). Overwrites, rescales, compactions and ``DROP
PARTITION`` choose partitions this way. :func:`parse_partition_specs` reads Paimon's text form of
them (``dt=2024-06-01,hh=1`` for one, ``;`` between several), as ``--partition`` and ``CALL sys.*``
arguments give them.
:func:`partitions_where` chooses partitions by a predicate on the partition fields instead (Paimon's
``where`` argument of ``compact``: ``dt > '2024-06-01' AND hh IN (1, 2)``).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa

from lakelog.connector.errors import InvalidInputError, OptionError, SchemaError
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.arguments import mapping, spec_list, text
from lakelog.connector.table.coercion import coerce_value
from lakelog.connector.table.expressions import parse_filter

__all__ = [
    "PartitionSpec",
    "partition_spec",
    "partition_spec_list",
    "spec_matcher",
    "matching_partitions",
    "parse_partition_specs",
    "partitions_where",
]

PartitionSpec = Mapping[str, Any]


def parse_partition_specs(text: str) -> list[dict[str, str]]:
    """The specs of ``text``: ``k=v[,k2=v2]`` each, ``;`` between them, keys and values stripped of
    surrounding spaces (as Paimon's procedures and actions read them). Text without ``=`` in a field,
    a field without a key, or no spec at all raises :class:`InvalidInputError`."""
    specs: list[dict[str, str]] = []
    for one in text.split(";"):
        if not one.strip():
            continue
        spec: dict[str, str] = {}
        for field in one.split(","):
            key, sep, value = field.partition("=")
            if not sep or not key.strip():
                raise InvalidInputError(f"expected k=v[,k2=v2][;k=v...], got {field.strip()!r}")
            spec[key.strip()] = value.strip()
        specs.append(spec)
    if not specs:
        raise InvalidInputError("names no partition (expected k=v[,k2=v2][;k=v...])")
    return specs


def partition_spec(
    store: TableStore, spec: Optional[PartitionSpec], *, argument: str = "partition"
) -> dict[str, Any]:
    """``spec`` with its values as values of the partition columns' types (strings are accepted,
    as a command line gives them); unknown or non-partition keys, and values the column cannot
    hold exactly, raise :class:`InvalidInputError`; a spec that is no dict raises
    :class:`~lakelog.connector.errors.ArgumentTypeError` naming ``argument``."""
    if spec is None:
        return {}
    spec = mapping(argument, spec)
    if not spec:
        return {}
    keys = list(store.schema.partition_keys)
    arrow = store.schema.arrow_schema()
    out: dict[str, Any] = {}
    for k, v in spec.items():
        if k not in keys:
            raise InvalidInputError(
                f"{k!r} is not a partition field of {store.path} (partition fields: {keys})"
            )
        if v is None:
            out[k] = None
            continue
        target = arrow.field(k).type
        try:
            t = store.field_types([k])[0]
            shown = f"{k}={v}" if isinstance(v, decimal.Decimal) else f"{k}={v!r}"
            value = coerce_value(v, target, t, k, what="partition value", shown=shown)
        except SchemaError as e:
            raise InvalidInputError(str(e)) from None
        out[k] = value.as_py()
    return out


def partition_spec_list(
    store: TableStore, specs: Optional[Iterable[PartitionSpec]], *, argument: str = "partitions"
) -> Optional[list[dict[str, Any]]]:
    """:func:`partition_spec` of each spec of a list of them (None stays None); a string or a single
    dict where the list belongs raises :class:`~lakelog.connector.errors.ArgumentTypeError` naming
    ``argument``."""
    if specs is None:
        return None
    return [partition_spec(store, s, argument=f"{argument}[]") for s in spec_list(argument, specs)]


def spec_matcher(store: TableStore, spec: PartitionSpec) -> Callable[[bytes], bool]:
    """A test of binary partitions: do their values match ``spec`` (already cast by
    :func:`partition_spec`; an empty spec matches every partition)? Each partition is decoded once."""
    names: Sequence[str] = list(store.schema.partition_keys)
    where = [(names.index(k), v) for k, v in spec.items()]
    memo: dict[bytes, bool] = {}

    def match(partition: bytes) -> bool:
        hit = memo.get(partition)
        if hit is None:
            values = store.partition_values(partition)
            hit = memo[partition] = all(values[i] == v for i, v in where)
        return hit

    return match


def matching_partitions(store: TableStore, partitions: Iterable[bytes], spec: PartitionSpec) -> set[bytes]:
    """The binary partitions among ``partitions`` whose values match ``spec`` (already cast by
    :func:`partition_spec`)."""
    match = spec_matcher(store, spec)
    return {p for p in partitions if match(p)}


def partitions_where(store: TableStore, partitions: Iterable[bytes], where: str) -> set[bytes]:
    """The binary partitions among ``partitions`` whose values satisfy ``where``, a filter (see
    :mod:`lakelog.connector.table.expressions`) on partition fields only, as Paimon's ``where``
    argument is. A filter naming another column, or one on an unpartitioned table, raises
    :class:`InvalidInputError`."""
    text("where", where)
    keys = list(store.schema.partition_keys)
    if not keys:
        raise InvalidInputError(f"where {where!r}: table {store.path} is not partitioned")
    arrow = store.schema.arrow_schema()
    schema = pa.schema([arrow.field(k) for k in keys])
    try:
        expr = parse_filter(where, schema)
    except SchemaError as e:
        raise InvalidInputError(f"where {where!r} may name only the partition fields {keys}: {e}") from None
    except OptionError as e:
        raise InvalidInputError(str(e)) from None
    chosen = list(dict.fromkeys(partitions))
    if expr is None or not chosen:
        return set(chosen)
    values = [store.partition_values(p) for p in chosen]
    table = pa.table(
        {
            "__i": pa.array(range(len(chosen)), pa.int64()),
            **{k: pa.array([v[i] for v in values], schema.field(k).type) for i, k in enumerate(keys)},
        }
    )
    hits = table.filter(expr).column("__i").to_pylist()
    return {chosen[i] for i in hits}
