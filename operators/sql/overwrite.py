"""Statements that replace a lakelog table's data with one OVERWRITE snapshot, as Paimon commits
them (``Table.overwrite`` and ``TableCommit.overwrite``): ``INSERT OVERWRITE``, ``TRUNCATE TABLE``,
``ALTER TABLE ... DROP PARTITION``, and ``DELETE`` without a condition or on partition columns
only. No pyflink here (it works on the Flink Table it is given).

``INSERT OVERWRITE`` writes the query's rows through the lakelog sink, whose one commit at end of
input is the OVERWRITE snapshot (:class:`~lakelog.operators.committer.OverwriteRequest`); only
for cross-partition tables are the rows collected in the client and written by ``Table.overwrite``
(so there they must fit in its memory). A table's Kafka log gets nothing from an overwrite, on
either path; on a log table an overwrite may not change a partition's bucket count (see
:meth:`~lakelog.connector.table.commit.TableCommit.overwrite`).
``dynamic-partition-overwrite`` (default true; a hint, ``SET`` or the table's option) picks between
replacing the partitions the rows fall into and replacing what the static ``PARTITION (...)`` spec
names (the whole table without one).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.commit import OverwriteScope, TableCommit, overwrites_dynamically
from lakelog.connector.table.partition_specs import matching_partitions, partition_spec
from lakelog.connector.table.table import Table
from lakelog.operators.committer import OverwriteRequest
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.lexer import significant
from lakelog.operators.sql.results import SqlResult
from lakelog.operators.table_ref import store_with_options

if TYPE_CHECKING:
    from lakelog.operators.sql.runner import LakelogSql

__all__ = [
    "overwrite_rows",
    "truncate",
    "drop_partitions",
    "literal_value",
    "static_partition",
    "DYNAMIC_OVERWRITE",
]

DYNAMIC_OVERWRITE = "dynamic-partition-overwrite"


def literal_value(text: str) -> Any:
    """A SQL literal of a partition spec (``'2024-01-01'``, ``3``, ``-1.5``, ``NULL``) as a Python
    value (numbers exactly: ``int`` or ``decimal.Decimal``)."""
    toks = significant(text)
    if len(toks) == 1 and toks[0].kind == "str":
        return toks[0].text[1:-1].replace("''", "'")
    if len(toks) in (1, 2) and toks[-1].kind == "num" and (len(toks) == 1 or toks[0].text == "-"):
        digits = toks[-1].text
        number = decimal.Decimal(digits) if "." in digits else int(digits)
        return -number if len(toks) == 2 else number
    if len(toks) == 1 and toks[0].word == "NULL":
        return None
    if len(toks) == 2 and toks[0].word in ("DATE", "TIMESTAMP") and toks[1].kind == "str":
        return toks[1].text[1:-1]
    raise SqlError(f"partition value {text!r} is not a literal")


def static_partition(store: TableStore, partition: Mapping[str, str], where: str) -> dict[str, Any]:
    """The static ``PARTITION (k = literal, ...)`` of an INSERT as values of the partition columns'
    types, held exactly (:func:`~lakelog.connector.table.partition_specs.partition_spec`, the rule
    of writes): a literal the column cannot hold, such as ``1.054`` for a ``DECIMAL(5, 2)`` (which
    Flink's CAST would round into partition ``1.05``) or ``300`` for a TINYINT, raises
    :class:`SqlError` naming the column, the literal and the type. A value that is no literal is
    left to Flink."""
    spec: dict[str, Any] = {}
    for k, v in partition.items():
        try:
            spec[k] = literal_value(v)
        except SqlError:
            continue
    try:
        return partition_spec(store, spec)
    except InvalidInputError as e:
        raise SqlError(f"{where}: {e}") from None


def _plain(v: Any, t: pa.DataType) -> Any:
    """A collected Flink value as pyarrow takes it (Rows as dicts, maps as pairs)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _plain(v[i], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_plain(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        return [(_plain(k, t.key_type), _plain(x, t.item_type)) for k, x in v.items()]
    if (
        pa.types.is_timestamp(t)
        and t.tz is not None
        and isinstance(v, datetime.datetime)
        and v.tzinfo is None
    ):
        return v.replace(tzinfo=datetime.timezone.utc)
    return v


def _collect(table: Any, schema: pa.Schema) -> pa.Table:
    """The rows of a Flink Table (already cast to the table's columns) as Arrow."""
    with table.execute().collect() as it:
        rows = [tuple(r) for r in it]
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    arrays = [pa.array([_plain(v, f.type) for v in col], f.type) for f, col in zip(schema, columns)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _dynamic(sql: LakelogSql, store: TableStore, options: Mapping[str, str]) -> bool:
    raw = (
        options.get(DYNAMIC_OVERWRITE)
        or sql.setting(DYNAMIC_OVERWRITE)
        or store.schema.options.get(DYNAMIC_OVERWRITE)
    )
    if raw is None:
        return True
    if raw.strip().lower() not in ("true", "false"):
        raise SqlError(f"option {DYNAMIC_OVERWRITE!r} = {raw!r}: expected true or false")
    return raw.strip().lower() == "true"


def _table(path: str, dynamic: bool) -> Table:
    """The table with ``dynamic-partition-overwrite`` set for this statement."""
    store = store_with_options(path, {DYNAMIC_OVERWRITE: "true" if dynamic else "false"})
    return Table(store, path)


def overwrite_rows(
    sql: LakelogSql,
    path: str,
    table: Any,
    partition: Mapping[str, str],
    options: dict[str, str],
    where: str,
    job_name: str,
) -> Any:
    """``INSERT OVERWRITE``: Paimon's dynamic or static partition overwrite, one OVERWRITE snapshot
    (see the module docstring)."""
    store = TableStore(path)
    dynamic = _dynamic(sql, store, options)
    spec = {k: literal_value(v) for k, v in partition.items()}
    if store.schema.cross_partition_update:
        if sql.in_statement_set:
            raise UnsupportedStatementError(
                f"{where}: a cross-partition table is overwritten by the client, not by a job: not "
                "inside a statement set"
            )
        data = _collect(table, store.schema.arrow_schema())
        sid = _table(path, dynamic).overwrite(data, spec or None)
        return SqlResult.ok("OK" if sid is None else f"OK (snapshot {sid})")
    from lakelog.operators.sink import sink_table_to_lakelog

    request = OverwriteRequest(
        dynamic=overwrites_dynamically(store, dynamic),
        spec=tuple(partition_spec(store, spec).items()),
    )
    parallelism = options.pop("sink.parallelism", None)
    sink_table_to_lakelog(
        sql.t_env,
        table,
        path,
        batch=True,
        options=options,
        parallelism=int(parallelism) if parallelism else None,
        overwrite=request,
    )
    return sql.run_pipeline(job_name)


def truncate(sql: LakelogSql, path: str, partition: Optional[Mapping[str, str]], where: str) -> Any:
    """``TRUNCATE TABLE`` (every partition) or a ``DELETE`` on partition columns only (those
    partitions): an OVERWRITE snapshot that removes their files, even when there are none."""
    spec = {k: literal_value(v) for k, v in (partition or {}).items()}
    t = _table(path, dynamic=False)
    sid = t.overwrite(t.schema.empty_table(), spec or None)
    return SqlResult.ok(f"OK (snapshot {sid})")


def drop_partitions(
    sql: LakelogSql, path: str, specs: Sequence[Mapping[str, str]], where: str, *, if_exists: bool = False
) -> Any:
    """``ALTER TABLE ... DROP [IF EXISTS] PARTITION (...)[, PARTITION (...)]``: one OVERWRITE
    snapshot emptying every partition a spec matches (a spec may name some of the partition fields)."""
    store = TableStore(path)
    if not store.schema.partition_keys:
        raise SqlError(f"{where}: the table is not partitioned")
    latest = store.snapshot_manager.latest()
    present = {e.partition for e in store.live_entries(latest)} if latest is not None else set()
    chosen: set[bytes] = set()
    for spec in specs:
        hit = matching_partitions(store, present, partition_spec(store, spec))
        if not hit and not if_exists:
            raise SqlError(f"{where}: partition {dict(spec)} does not exist")
        chosen |= hit
    if not chosen:
        return SqlResult.ok()
    sid = TableCommit(store).overwrite([], OverwriteScope(partitions=frozenset(chosen)))
    return SqlResult.ok(f"OK (snapshot {sid})")
