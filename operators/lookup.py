"""Lookup joins in PyFlink: enrich a stream with the current rows of a lakelog dimension table.

Flink's lookup join (``JOIN dim FOR SYSTEM_TIME AS OF o.proc_time``) needs a Java
``LookupTableSource``, which Python cannot provide. The equivalents here, each opening a
:class:`~lakelog.operators.lookup_table.LookupTable` per parallel instance in ``open()``:

* :func:`lookup_join`: a DataStream of named Rows joined with the table, inner or left
  (:class:`LookupJoinFunction`);
* :func:`register_lookup_function`: a table function for SQL (:class:`LookupTableFunction`):
  ``... FROM orders AS o, LATERAL TABLE(dim(o.customer_id)) AS d`` (inner) or
  ``... LEFT JOIN LATERAL TABLE(dim(o.customer_id)) AS d ON TRUE`` (left); or, for unique keys, a
  vectorised (pandas) scalar function returning the row (:class:`LookupRowFunction`), which looks
  up whole Arrow batches.

The SQL wrapper rewrites ``JOIN t FOR SYSTEM_TIME AS OF ...`` into the ``LATERAL TABLE`` form
(:func:`lakelog.operators.sql.rewrite.rewrite_lookup_joins`). Design, guarantees and limits:
``operators/README.md`` ("Lookup joins"). This module imports pyflink.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import numpy as np
import pyarrow as pa
from pyflink.common import Row, Types
from pyflink.common.typeinfo import RowTypeInfo
from pyflink.datastream import DataStream, FlatMapFunction, MapFunction, RuntimeContext
from pyflink.java_gateway import get_gateway
from pyflink.table.expressions import col
from pyflink.table.udf import FunctionContext, ScalarFunction, TableFunction, udf, udtf

from lakelog.connector.errors import LakelogError, OptionError, SchemaError
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import to_arrow_type, type_to_string, with_nullable
from lakelog.operators.flink_types import type_info_of
from lakelog.operators.lookup_shard import KeyRouter, routing_buckets, worth_sharding
from lakelog.operators.lookup_table import LookupSpec, LookupTable, conform_probe
from lakelog.operators.table_ref import TableLike, table_store

__all__ = [
    "lookup_join",
    "register_lookup_function",
    "register_route_function",
    "routed_by_column",
    "LookupJoinConfig",
    "LookupJoinFunction",
    "LookupTableFunction",
    "LookupRowFunction",
]


# ---- operators -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LookupJoinConfig:
    """``probe``: the input fields holding the key, in key order; ``pick``: the looked-up columns
    appended to each row (indexes into the lookup table's columns); ``inner``: drop rows without a
    match (else nulls). Sharded by bucket when ``spec.shards`` is set."""

    spec: LookupSpec
    probe: tuple[int, ...]
    pick: tuple[int, ...]
    inner: bool


class LookupJoinFunction(FlatMapFunction):  # type: ignore[misc]
    """Joins each Row with the lookup table's current rows for its key.

    Sharded (``spec.shards``, see :func:`lookup_join`): each input is ``Row(subtask, row)`` as
    :class:`_RouteProbe` routed it, and this subtask holds only its buckets' rows."""

    def __init__(self, config: LookupJoinConfig) -> None:
        self.config = config
        self.table: Optional[LookupTable] = None
        self.index = 0

    def open(self, runtime_context: RuntimeContext) -> None:
        self.index = runtime_context.get_index_of_this_subtask()
        count = runtime_context.get_number_of_parallel_subtasks()
        self.table = self.config.spec.open_subtask(self.index, count)

    def flat_map(self, value: Any) -> Iterable[Any]:
        assert self.table is not None
        cfg = self.config
        if cfg.spec.shards:
            if value[0] != self.index:
                raise LakelogError(
                    f"lookup join on {cfg.spec.table_path}: a probe for subtask {value[0]} reached subtask "
                    f"{self.index}"
                )
            value = value[1]
        base = [value[i] for i in range(len(value))]
        matches = self.table.get_values(tuple(value[i] for i in cfg.probe))
        if matches:
            for m in matches:
                yield Row(*base, *[m[j] for j in cfg.pick])
        elif not cfg.inner:
            yield Row(*base, *([None] * len(cfg.pick)))

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


class _RouteProbe(MapFunction):  # type: ignore[misc]
    """``Row(subtask, row)``: the lookup subtask that holds the probe's bucket (routing bucket ``b``
    of ``shards`` subtasks: ``b % shards``; a key that matches no row: 0)."""

    def __init__(self, router: KeyRouter, probe: tuple[int, ...], shards: int) -> None:
        self.router = router
        self.probe = probe
        self.shards = shards

    def map(self, value: Any) -> Any:
        bucket = self.router.bucket_of([value[i] for i in self.probe])
        return Row(max(bucket, 0) % self.shards, value)


class _LookupFunction:
    """Opens the spec's :class:`LookupTable` in ``open()`` and closes it in ``close()``."""

    def __init__(self, spec: LookupSpec) -> None:
        self.spec = spec
        self.table: Optional[LookupTable] = None

    def open(self, function_context: FunctionContext) -> None:
        self.table = self.spec.open_subtask(
            function_context.get_index_of_this_subtask(), function_context.get_number_of_parallel_subtasks()
        )

    def is_deterministic(self) -> bool:
        return False  # the rows change as the table does

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


class LookupTableFunction(_LookupFunction, TableFunction):  # type: ignore[misc]
    """``LATERAL TABLE(f(key...))``: the lookup table's current rows for the key."""

    def eval(self, *key: Any) -> Iterable[Any]:
        assert self.table is not None
        found = self.table.get_values(key)
        for _ in range(self.spec.retry_attempts):  # a LOOKUP hint's retry on a miss
            if found:
                break
            time.sleep(self.spec.retry_delay)
            self.table.refresh()
            found = self.table.get_values(key)
        if not found and not self.table.holds(key):  # sharded: a hit proves the routing, a miss is checked
            raise _misrouted(self.spec, key, self.table)
        for m in found:
            yield Row(*m)


class LookupRowFunction(_LookupFunction, ScalarFunction):  # type: ignore[misc]
    """A pandas (vectorised) scalar function: each key's current row as a ROW, nulls on a miss.

    A batch's misses are tried again as the spec's retry says (the misses only, after a refresh);
    sharded, the misses must be keys of this shard (else the job fails: the probes were misrouted)."""

    def eval(self, *keys: Any) -> Any:
        table = self.table
        assert table is not None
        cols = [pa.Array.from_pandas(s) for s in keys]
        rows, found = table.lookup_found(cols)
        for _ in range(self.spec.retry_attempts):  # a LOOKUP hint's retry on a miss
            missing = np.flatnonzero(~found)
            if not len(missing):
                break
            time.sleep(self.spec.retry_delay)
            table.refresh()
            take = pa.array(missing)
            again, hit = table.lookup_found([c.take(take) for c in cols])
            if hit.any():
                order = np.arange(len(found))
                order[missing[hit]] = len(found) + np.flatnonzero(hit)
                rows = pa.concat_tables([rows, again]).take(pa.array(order))
                found[missing[hit]] = True
        if table.shard is not None and not found.all():
            missing = np.flatnonzero(~found)
            wrong = ~table.holds_all([c.take(pa.array(missing)) for c in cols])
            if wrong.any():
                first = int(missing[np.flatnonzero(wrong)[0]])
                raise _misrouted(self.spec, tuple(c[first].as_py() for c in cols), table)
        return rows.to_pandas(integer_object_nulls=True, date_as_object=True)


def _misrouted(spec: LookupSpec, key: tuple[Any, ...], table: LookupTable) -> LakelogError:
    return LakelogError(
        f"lookup join on {spec.table_path}: key {key!r} reached shard {table.shard}, which does not "
        "hold its bucket (the probes were not routed by bucket)"
    )


class ProbeRouteFunction(ScalarFunction):  # type: ignore[misc]
    """A pandas (vectorised) scalar function: the lookup subtask that holds each probe key's bucket
    (``routing bucket % shards``), the key's values compared as the dimension's column types."""

    def __init__(self, router: KeyRouter, arrow_types: Sequence[pa.DataType], shards: int) -> None:
        self.router = router
        self.arrow_types = list(arrow_types)
        self.shards = shards

    def eval(self, *keys: Any) -> Any:
        import pandas as pd

        r = self.router
        cols = [
            conform_probe(pa.Array.from_pandas(keys[i]), self.arrow_types[i], name)
            for i, name in zip(r.positions, r.names)
        ]
        table = pa.table(dict(zip(r.names, cols)))
        return pd.Series(r.buckets_of(table) % self.shards, dtype="int32")


def routed_by_column(t_env: Any, table: Any, column: str, parallelism: int) -> Any:
    """``table`` sent to the subtask of ``parallelism`` that its int ``column`` (the first one)
    names, without that column: Flink's IdPartitioner, on the JVM. The operators that the planner
    chains after it run at ``parallelism`` (they take the parallelism of their input, which
    would otherwise be the probe source's)."""
    routed = _id_partitioned(t_env.to_data_stream(table)._j_data_stream)
    routed.getTransformation().setParallelism(parallelism)
    return t_env.from_data_stream(DataStream(routed)).drop_columns(col(column))


def _id_partitioned(j_stream: Any) -> Any:
    """A Java DataStream of Rows sent to the subtask that each one's first field names."""
    jvm = get_gateway().jvm
    partitioner = jvm.org.apache.flink.python.legacy.IdPartitioner()
    return j_stream.partitionCustom(partitioner, jvm.PartitionCustomKeySelector())


# ---- public entry points --------------------------------------------------------------------------------
def lookup_join(
    ds: DataStream,
    table: TableLike,
    on: Union[str, Sequence[str], Mapping[str, str]],
    *,
    join_type: str = "inner",
    suffix: str = "_dim",
    name: Optional[str] = None,
    shuffle: Optional[bool] = None,
    parallelism: Optional[int] = None,
    **options: Any,
) -> DataStream:
    """``ds`` (a DataStream of named Rows, e.g. ``output_type=Types.ROW_NAMED(...)``) joined with the
    current rows of ``table`` (a lakelog ``Table`` or a table path).

    ``on`` names ``ds``'s fields that match ``key_columns`` (default the primary key) in order, or
    maps ``{field: key column}``. ``join_type``: ``inner`` drops rows without a match, ``left``
    keeps them with nulls. The output Rows hold ``ds``'s fields, then the table's ``columns``
    (default all) except key columns joined to a same-named field; other clashing names get
    ``suffix``. ``options`` are the lookup table's (:meth:`LookupSpec.of
    <lakelog.operators.lookup_table.LookupSpec.of>`): ``key_columns``, ``columns``, ``filter`` (a
    SQL-like string), ``refresh_interval``, ``async_refresh``, ``consumer_id``, ``cache_rows``. Every
    parallel instance loads the table in ``open()`` and refreshes it every ``refresh_interval``.

    ``shuffle`` (Paimon's shuffle lookup join): each probe is sent to the subtask that owns its
    key's bucket, and each subtask loads and refreshes only its buckets, about the table over the
    parallelism (:mod:`lakelog.operators.lookup_shard`). Default: on where the key holds the bucket
    key of a fixed-bucket table whose data files hold at least ``SHARD_BYTES`` (64 MiB); ``True``
    where it cannot be done is refused with the reason, ``False`` loads the whole table in every
    subtask. A sharded join runs at ``parallelism`` (default the environment's), fixed when it is
    built: the routing depends on it.
    """
    if join_type not in ("inner", "left"):
        raise OptionError(f"join_type must be 'inner' or 'left', not {join_type!r}")
    in_type = ds.get_type()
    if not isinstance(in_type, RowTypeInfo):
        raise OptionError(
            "lookup_join needs a DataStream of named Rows (give the producing operator "
            f"output_type=Types.ROW_NAMED(...)); it has {in_type}"
        )
    in_names = [str(n) for n in in_type.get_field_names()]
    in_types = list(in_type.get_field_types())
    spec = LookupSpec.of(table, **options)
    lt = spec.open(lazy=True)  # validates names and types without loading rows
    probe = lt.probe_names(on)
    missing = [p for p in probe if p not in in_names]
    if missing:
        raise SchemaError(f"lookup_join: fields {missing} are not in the stream's fields {in_names}")
    out = lt.output_names(in_names, probe, suffix)
    out_type = Types.ROW_NAMED(
        in_names + [n for _, n in out],
        in_types + [type_info_of(lt.schema.field(c).type, c) for c, _ in out],
    )
    probe_idx = tuple(in_names.index(p) for p in probe)
    short = os.path.basename(spec.table_path.rstrip("/"))
    store = lt.store
    buckets, why = routing_buckets(store, lt.key_columns)
    if shuffle and buckets is None:
        raise OptionError(f"lookup_join(shuffle=True) on {short}: lookups cannot be sharded by bucket: {why}")
    pick = tuple(lt.columns.index(c) for c, _ in out)
    shards = parallelism or ds.get_execution_environment().get_parallelism()
    if shuffle is None:
        shuffle = buckets is not None and worth_sharding(store)
    if buckets is None or not shuffle or shards < 1:
        config = LookupJoinConfig(spec, probe_idx, pick, join_type == "inner")
        joined = ds.flat_map(LookupJoinFunction(config), output_type=out_type)
        if parallelism:
            joined.set_parallelism(parallelism)
        return joined.name(name or f"lakelog-lookup[{short}]")
    # PyFlink's partition_custom needs a job parameter that execute_and_collect() never sets, so
    # the probes are routed here as it routes them: Row(subtask, row), then Flink's IdPartitioner
    router = KeyRouter.of(store, lt.key_columns)
    spec = replace(spec, shard_buckets=router.buckets, shards=shards)
    config = LookupJoinConfig(spec, probe_idx, pick, join_type == "inner")
    tagged = ds.map(_RouteProbe(router, probe_idx, shards), output_type=Types.ROW([Types.INT(), in_type]))
    tagged.name(f"lakelog-lookup-route[{short}]")
    routed = DataStream(_id_partitioned(tagged._j_data_stream))
    joined = routed.flat_map(LookupJoinFunction(config), output_type=out_type).set_parallelism(shards)
    return joined.name(name or f"lakelog-lookup[{short}]")


def register_lookup_function(
    t_env: Any,
    name: str,
    table: TableLike,
    *,
    vectorized: bool = False,
    shards: int = 0,
    **options: Any,
) -> list[str]:
    """Register ``name`` as a temporary system function over ``table`` (a lakelog ``Table`` or a
    table path) and return its columns (``columns``, default all). ``options`` are the lookup
    table's, as for :func:`lookup_join`.

    By default a table function: ``name(k1, k2, ...)`` (the values of ``key_columns``, default the
    primary key) yields the current rows with that key::

        SELECT o.*, d.name FROM orders AS o, LATERAL TABLE(dim(o.customer_id)) AS d          -- inner
        SELECT o.*, d.name FROM orders AS o LEFT JOIN LATERAL TABLE(dim(o.customer_id)) AS d ON TRUE

    ``vectorized=True`` (unique keys only): a pandas scalar function returning the row as a ROW
    (all fields null on a miss) that looks up a whole Arrow batch of keys at once::

        SELECT x.oid, x.d.name FROM (SELECT o.oid, dim(o.customer_id) AS d FROM orders AS o) AS x

    ``shards``: each of that many subtasks holds only its buckets, and the
    probes must reach it routed by :func:`register_route_function` and :func:`routed_by_column`
    (the SQL wrapper does this for ``FOR SYSTEM_TIME AS OF`` joins); a misrouted probe fails the job.
    """
    spec = LookupSpec.of(table, **options)
    lt = spec.open(lazy=True)
    if shards:
        router = KeyRouter.of(lt.store, lt.key_columns)
        spec = replace(spec, shard_buckets=router.buckets, shards=shards)
    types = {f.name: f.type for f in TableStore(spec.table_path).schema.fields}
    fields = ", ".join(
        "`" + c.replace("`", "``") + "` " + type_to_string(with_nullable(types[c], True)) for c in lt.columns
    )
    if vectorized:
        if not lt.unique:
            raise OptionError(
                f"a vectorized lookup function needs a unique key; {lt.key_columns} is not "
                "(use the table function)"
            )
        fn = udf(LookupRowFunction(spec), result_type=f"ROW<{fields}>", func_type="pandas")
    else:
        fn = udtf(LookupTableFunction(spec), result_types=f"ROW<{fields}>")
    t_env.create_temporary_system_function(name, fn)
    return lt.columns


def register_route_function(
    t_env: Any, name: str, table: TableLike, key_columns: Sequence[str], shards: int
) -> int:
    """Register ``name(k1, k2, ...)`` (the probe's values of ``key_columns``), a pandas function
    giving the subtask of ``shards`` whose shard of ``table`` holds each probe key's bucket; return
    the routing bucket count. OptionError when lookups on ``key_columns`` cannot be sharded."""
    store = table_store(table)
    router = KeyRouter.of(store, key_columns)
    arrow_types = [to_arrow_type(t) for t in store.field_types(list(key_columns))]
    fn = udf(ProbeRouteFunction(router, arrow_types, shards), result_type="INT", func_type="pandas")
    t_env.create_temporary_system_function(name, fn)
    return router.buckets
