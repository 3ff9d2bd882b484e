"""Writes into lakelog tables from SQL: ``INSERT INTO/OVERWRITE``, batch ``DELETE`` and ``UPDATE``,
``TRUNCATE TABLE``. This module imports pyflink.

* ``INSERT INTO t [/*+ OPTIONS(...) */] [PARTITION (k = v, ...)] [(c1, c2, ...)] <query>``: the
  query's columns are cast to the table's types in the table's order; a column list leaves the
  other columns null (a NOT NULL one must be listed), a static partition fills its columns. The
  rows go through :func:`lakelog.operators.sink.sink_table_to_lakelog` with the session's and the
  hint's dynamic options (``sink.parallelism`` sets the writers' parallelism).
* ``INSERT OVERWRITE``: Paimon's semantics (``dynamic-partition-overwrite``), batch only; the rows
  go through the sink, which commits them as one OVERWRITE snapshot at end of input (see
  :mod:`lakelog.operators.sql.overwrite`).
* ``DELETE FROM t [WHERE ...]`` / ``UPDATE t SET ... [WHERE ...]`` (batch, primary-key tables,
  Paimon's rules per merge engine): the matching rows are read and written back as ``-D`` /
  ``+U`` rows; a ``DELETE`` without ``WHERE``, or one on partition columns only, drops the data
  with an OVERWRITE snapshot, as Paimon does.
* ``TRUNCATE TABLE``: an OVERWRITE snapshot that removes every file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from pyflink.common import Row, RowKind
from pyflink.datastream import MapFunction

from lakelog.connector.format.options import MergeEngine
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import type_to_string, with_nullable
from lakelog.operators.flink_types import row_type_of
from lakelog.operators.sink import sink_table_to_lakelog, sink_to_lakelog
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.lexer import (
    Token,
    hint_options,
    matching_paren,
    read_name,
    significant,
    split_commas,
)
from lakelog.operators.sql.results import SqlResult
from lakelog.operators.sql.statements import QUERY_WORDS
from lakelog.operators.sql.table_ddl import quote_ident

if TYPE_CHECKING:
    from lakelog.operators.sql.runner import LakelogSql

__all__ = [
    "InsertSpec", "parse_insert", "insert", "delete", "update", "SetRowKind", "typed_values", "write_kinds",
]  # fmt: skip


@dataclass
class InsertSpec:
    """An ``INSERT`` statement taken apart."""

    target: list[str]
    overwrite: bool
    hint: dict[str, str]
    partition: dict[str, str]  # static partition: column -> SQL literal text
    columns: Optional[list[str]]
    query: str


def _literal(toks: list[Token]) -> str:
    return " ".join(t.text for t in toks)


def parse_insert(text: str) -> InsertSpec:
    """Take ``INSERT INTO|OVERWRITE t [hint] [PARTITION (...)] [(cols)] query`` apart."""
    toks = significant(text)
    overwrite = len(toks) > 1 and toks[1].word == "OVERWRITE"
    if len(toks) < 3 or toks[1].word not in ("INTO", "OVERWRITE"):
        raise SqlError(f"cannot read INSERT statement {text[:80]!r}")
    parts, i = read_name(toks, 2)
    hint: dict[str, str] = {}
    if i < len(toks) and toks[i].kind == "hint":
        hint = hint_options(toks[i].text)
        i += 1
    partition: dict[str, str] = {}
    if i < len(toks) and toks[i].word == "PARTITION":
        end = matching_paren(toks, i + 1)
        for item in split_commas(toks[i + 2 : end]):
            if len(item) < 3 or not item[0].is_name or item[1].text != "=":
                raise SqlError(f"INSERT INTO {'.'.join(parts)}: cannot read the PARTITION clause")
            partition[item[0].name] = _literal(item[2:])
        i = end + 1
    columns: Optional[list[str]] = None
    if i < len(toks) and toks[i].text == "(" and i + 1 < len(toks) and toks[i + 1].word not in QUERY_WORDS:
        end = matching_paren(toks, i)
        columns = [t.name for t in toks[i + 1 : end] if t.is_name]
        i = end + 1
    if i >= len(toks):
        raise SqlError(f"INSERT INTO {'.'.join(parts)}: the statement has no query")
    return InsertSpec(parts, overwrite, hint, partition, columns, text[toks[i].start :])


def _write_options(sql: LakelogSql, cat: str, db: str, name: str, hint: dict[str, str]) -> dict[str, str]:
    return {**sql.dynamic.for_table(cat, db, name), **hint}


def _select_for_table(
    sql: LakelogSql, store: TableStore, query_table: Any, spec: InsertSpec, where: str
) -> Any:
    """The query's rows as the table's columns, cast to their types (a Flink Table)."""
    fields = store.schema.fields
    names = [f.name for f in fields]
    q_names = list(query_table.get_schema().get_field_names())
    unknown = [c for c in list(spec.partition) + (spec.columns or []) if c not in names]
    if unknown:
        raise SqlError(f"{where}: unknown column(s) {unknown}; the table has {names}")
    bad = [c for c in spec.partition if c not in store.schema.partition_keys]
    if bad:
        raise SqlError(
            f"{where}: {bad} are not partition columns (partition columns: {store.schema.partition_keys})"
        )
    targets = spec.columns if spec.columns is not None else [n for n in names if n not in spec.partition]
    if len(q_names) != len(targets):
        raise SqlError(
            f"{where}: the query has {len(q_names)} columns, the statement writes {len(targets)} ({targets})"
        )
    source = dict(zip(targets, q_names))
    exprs = []
    for f in fields:
        t = type_to_string(with_nullable(f.type, True))
        if f.name in spec.partition:
            e = f"CAST({spec.partition[f.name]} AS {t})"
        elif f.name in source:
            e = f"CAST({quote_ident(source[f.name])} AS {t})"
        elif not f.type.nullable or f.name in store.schema.primary_keys:
            raise SqlError(f"{where}: column {f.name!r} is NOT NULL and the statement gives it no value")
        else:
            e = f"CAST(NULL AS {t})"
        exprs.append(f"{e} AS {quote_ident(f.name)}")
    view = sql.temporary_view(query_table)
    return sql.t_env.sql_query(f"SELECT {', '.join(exprs)} FROM {view}")


def typed_values(query: str, types: list[str]) -> str:
    """A ``VALUES`` query with every value cast to its target column's type, as Flink types the
    values of an INSERT by its sink (an untyped ``NULL`` or ``ARRAY[]`` needs that context)."""
    toks = significant(query)
    if not toks or toks[0].word != "VALUES":
        return query
    out: list[str] = []
    pos = toks[0].end
    i = 1
    while i < len(toks):
        t = toks[i]
        if t.text == "(":
            end = matching_paren(toks, i)
            items = list(split_commas(toks[i + 1 : end]))
            if len(items) != len(types):
                return query  # Flink names the mismatch
            cast = ", ".join(
                f"CAST({query[item[0].start : item[-1].end]} AS {ty})" for item, ty in zip(items, types)
            )
            out.append(query[pos : t.start] + f"({cast})")
            pos = toks[end].end
            i = end + 1
        else:
            i += 1
    out.append(query[pos:])
    return query[: toks[0].end] + "".join(out)


def _target_types(store: TableStore, spec: InsertSpec) -> list[str]:
    by_name = {f.name: f for f in store.schema.fields}
    names = spec.columns if spec.columns is not None else [n for n in by_name if n not in spec.partition]
    return [type_to_string(with_nullable(by_name[n].type, True)) for n in names if n in by_name]


def insert(sql: LakelogSql, spec: InsertSpec, path: str, cat: str, db: str, name: str) -> Any:
    """Run (or, in a statement set, add) an INSERT into the lakelog table at ``path``."""
    where = f"INSERT {'OVERWRITE' if spec.overwrite else 'INTO'} {cat}.{db}.{name}"
    store = TableStore(path)
    options = _write_options(sql, cat, db, name, spec.hint)
    query_table = sql.sql_query(typed_values(spec.query, _target_types(store, spec)))
    table = _select_for_table(sql, store, query_table, spec, where)
    from lakelog.operators.sql.overwrite import static_partition

    static_partition(store, spec.partition, where)  # the CASTs above would round what does not fit
    if spec.overwrite:
        return overwrite(sql, spec, path, table, options, where, name)
    parallelism = options.pop("sink.parallelism", None)
    sink_table_to_lakelog(
        sql.t_env,
        table,
        path,
        batch=sql.mode == "batch",
        options=options,
        parallelism=int(parallelism) if parallelism else None,
    )
    return sql.run_pipeline(f"insert-into-{name}")


def overwrite(
    sql: LakelogSql, spec: InsertSpec, path: str, table: Any, options: dict[str, str], where: str, name: str
) -> Any:
    """INSERT OVERWRITE: batch only; one OVERWRITE snapshot (see :mod:`.overwrite`)."""
    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"{where}: INSERT OVERWRITE runs in batch mode only (as in Paimon); "
            "SET 'execution.runtime-mode' = 'batch'"
        )
    from lakelog.operators.sql.overwrite import overwrite_rows

    return overwrite_rows(sql, path, table, spec.partition, options, where, f"insert-overwrite-{name}")


class SetRowKind(MapFunction):  # type: ignore[misc]
    """Rows of a query as rows of one RowKind (``-D`` for DELETE, ``+U`` for UPDATE)."""

    def __init__(self, kind: int) -> None:
        self.kind = kind

    def map(self, value: Any) -> Any:
        out = Row(*value)
        out.set_row_kind(RowKind(self.kind))
        return out


def _row_level_checks(sql: LakelogSql, store: TableStore, where: str, verb: str) -> None:
    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"{where}: {verb} runs in batch mode only (as in Paimon); SET 'execution.runtime-mode' = 'batch'"
        )
    if not store.schema.primary_keys:
        dv = " (an append table deletes with 'deletion-vectors.enabled' = 'true')" if verb == "DELETE" else ""
        raise UnsupportedStatementError(
            f"{where}: table can not support {verb.lower()}, because there is no primary key{dv}."
        )


def _write_kind(sql: LakelogSql, path: str, table: Any, kind: int, options: dict[str, str], job: str) -> Any:
    return write_kinds(sql, path, [(table, kind)], options, job)


def write_kinds(
    sql: LakelogSql, path: str, tables: list[tuple[Any, int]], options: dict[str, str], job: str
) -> Any:
    """Write the rows of each Flink table (the target's columns and types) with its RowKind, all in
    one batch job through the sink: one commit publishes them together."""
    store = TableStore(path)
    out_type = row_type_of(store.schema.arrow_schema())
    streams = [sql.t_env.to_data_stream(t).map(SetRowKind(kind), output_type=out_type) for t, kind in tables]
    ds = streams[0].union(*streams[1:]) if len(streams) > 1 else streams[0]
    parallelism = options.pop("sink.parallelism", None)
    sink_to_lakelog(
        ds,
        path,
        changelog=True,
        batch=True,
        drop_update_before=False,
        options=options,
        parallelism=int(parallelism) if parallelism else None,
    )
    return sql.run_pipeline(job)


def _where_clause(text: str) -> str:
    """The condition after the statement's top-level WHERE ("" without one)."""
    toks = significant(text)
    depth = 0
    for i, t in enumerate(toks):
        depth += t.text == "("
        depth -= t.text == ")"
        if t.word == "WHERE" and depth == 0:
            return text[toks[i + 1].start :] if i + 1 < len(toks) else ""
    return ""


def _partition_equalities(store: TableStore, cond: str) -> Optional[dict[str, str]]:
    """``{column: literal}`` when ``cond`` is only ``partition_column = literal`` conjuncts."""
    toks = significant(cond)
    out: dict[str, str] = {}
    item: list[Token] = []
    for t in [*toks, Token("id", "AND", 0, 0)]:
        if t.word == "AND":
            if (
                len(item) != 3
                or not item[0].is_name
                or item[1].text != "="
                or item[2].kind not in ("str", "num")
            ):
                return None
            if item[0].name not in store.schema.partition_keys:
                return None
            out[item[0].name] = item[2].text
            item = []
        else:
            item.append(t)
    return out or None


def _append_delete(sql: LakelogSql, text: str, path: str, store: TableStore, where: str) -> Any:
    """``DELETE FROM`` an append table with deletion vectors: the matching rows are marked in
    their files' vectors, in the client (no job), as Paimon deletes from append tables. The
    condition is evaluated by lakelog's filters (comparisons of columns with literals, ``IN``,
    ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``)."""
    from lakelog.connector.errors import LakelogError
    from lakelog.connector.table.append_delete import delete_where
    from lakelog.connector.table.expressions import parse_filter
    from lakelog.operators.sql.overwrite import truncate

    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"{where}: DELETE runs in batch mode only (as in Paimon); SET 'execution.runtime-mode' = 'batch'"
        )
    cond = _where_clause(text)
    if not cond:
        return truncate(sql, path, None, where)
    try:
        parse_filter(cond, store.schema.arrow_schema())
    except LakelogError as e:
        raise UnsupportedStatementError(
            f"{where}: the WHERE of a DELETE on an append table must be a filter lakelog evaluates "
            f"(columns compared with literals, IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT): {e}"
        ) from None
    delete_where(store, cond)
    return SqlResult.ok()


def delete(sql: LakelogSql, text: str, path: str, cat: str, db: str, name: str) -> Any:
    where = f"DELETE FROM {cat}.{db}.{name}"
    store = TableStore(path)
    if not store.schema.primary_keys and store.options.deletion_vectors_enabled:
        return _append_delete(sql, text, path, store, where)
    _row_level_checks(sql, store, where, "DELETE")
    opts = store.options
    engine = opts.merge_engine
    if engine == MergeEngine.FIRST_ROW:
        raise UnsupportedStatementError(f"{where}: Merge engine first-row can not support batch delete.")
    if engine == MergeEngine.PARTIAL_UPDATE and not (
        opts.partial_update_remove_record_on_delete
        or opts.get(opts.PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP)
    ):
        raise UnsupportedStatementError(
            f"{where}: Merge engine partial-update doesn't support batch delete by default. To support batch "
            "delete, please set partial-update.remove-record-on-delete to true when there is no "
            "fields.<f>.sequence-group or set partial-update.remove-record-on-sequence-group."
        )
    if engine == MergeEngine.AGGREGATION and not opts.aggregation_remove_record_on_delete:
        raise UnsupportedStatementError(
            f"{where}: Merge engine aggregation doesn't support batch delete by default. To support batch "
            "delete, please set aggregation.remove-record-on-delete to true."
        )
    if opts.ignore_delete:
        raise UnsupportedStatementError(
            f"{where}: the table has 'ignore-delete' = true, so the delete would be ignored"
        )
    cond = _where_clause(text)
    if not cond:
        from lakelog.operators.sql.overwrite import truncate

        return truncate(sql, path, None, where)
    parts = _partition_equalities(store, cond)
    if parts is not None:
        from lakelog.operators.sql.overwrite import truncate

        return truncate(sql, path, parts, where)
    cols = ", ".join(quote_ident(n) for n in store.schema.field_names)
    table = sql.sql_query(f"SELECT {cols} FROM {'.'.join(map(quote_ident, (cat, db, name)))} WHERE {cond}")
    return _write_kind(
        sql, path, table, RowKind.DELETE.value, _write_options(sql, cat, db, name, {}), f"delete-from-{name}"
    )


def update(sql: LakelogSql, text: str, path: str, cat: str, db: str, name: str) -> Any:
    where = f"UPDATE {cat}.{db}.{name}"
    store = TableStore(path)
    _row_level_checks(sql, store, where, "UPDATE")
    engine = store.options.merge_engine
    if engine not in (MergeEngine.DEDUPLICATE, MergeEngine.PARTIAL_UPDATE):
        raise UnsupportedStatementError(f"{where}: Merge engine {engine.value} can not support batch update.")
    toks = significant(text)
    parts, i = read_name(toks, 1)
    if i < len(toks) and toks[i].is_name and toks[i].word != "SET":
        raise UnsupportedStatementError(f"{where}: an alias of the updated table is not supported")
    if i >= len(toks) or toks[i].word != "SET":
        raise SqlError(f"{where}: expected SET after the table name")
    body = toks[i + 1 :]
    cond = ""
    for j, t in enumerate(body):
        if t.word == "WHERE":
            cond = text[body[j + 1].start :] if j + 1 < len(body) else ""
            body = body[:j]
            break
    assignments: dict[str, str] = {}
    for item in split_commas(body):
        if len(item) < 3 or not item[0].is_name or item[1].text != "=":
            raise SqlError(f"{where}: cannot read the SET clause")
        assignments[item[0].name] = text[item[2].start : item[-1].end]
    names = store.schema.field_names
    unknown = [c for c in assignments if c not in names]
    if unknown:
        raise SqlError(f"{where}: unknown column(s) {unknown}")
    keys = [c for c in assignments if c in store.schema.primary_keys]
    if keys:
        raise UnsupportedStatementError(
            f"{where}: Updates to primary keys are not supported, primaryKeys ({store.schema.primary_keys}), "
            f"updatedColumns ({list(assignments)})"
        )
    cols = []
    for f in store.schema.fields:
        if f.name in assignments:
            t = type_to_string(with_nullable(f.type, True))
            cols.append(f"CAST(({assignments[f.name]}) AS {t}) AS {quote_ident(f.name)}")
        else:
            cols.append(quote_ident(f.name))
    query = f"SELECT {', '.join(cols)} FROM {'.'.join(map(quote_ident, (cat, db, name)))}"
    if cond:
        query += f" WHERE {cond}"
    table = sql.sql_query(query)
    return _write_kind(
        sql, path, table, RowKind.UPDATE_AFTER.value, _write_options(sql, cat, db, name, {}), f"update-{name}"
    )
