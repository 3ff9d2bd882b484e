"""``CALL sys.merge_into(...)``: Paimon's MERGE INTO procedure on a lakelog primary-key table. It
builds the queries; :func:`lakelog.operators.sql.dml.write_kinds` runs them (this module itself
imports no pyflink).

Paimon's semantics (its ``MergeIntoAction``): each action is one Flink query over the target and
the source, and their rows are written in one batch job, so one commit publishes them all:

* matched upsert: ``SELECT <target columns, some set> FROM target JOIN source ON <merge condition>
  [WHERE <matched_upsert_condition>]``, written as ``+U`` (``*`` takes the source's columns);
* matched delete: the same join's target rows, written as ``-D``;
* not matched by source (upsert / delete): the target rows that no source row matches
  (``NOT EXISTS``), with their settings or deleted;
* not matched insert: the source rows that match no target row, with ``not_matched_insert_values``
  (``*``: the source's columns), written as ``+I``.

"Upsert", not update: a setting that changes the primary key writes a new row, as in Paimon. Each
query's columns are cast to the target's types. Paimon's rules are checked before any job: a
primary-key table whose merge engine is ``deduplicate`` or ``partial-update``, at least one action,
both conditions when an upsert and a delete of the same kind are given, settings that name target
columns, no ``*`` and no primary key in the not-matched-by-source settings. lakelog runs it in batch
mode only (Paimon starts a batch job of its own in any session), and refuses a delete action where
the table would refuse a ``DELETE`` (partial-update without ``partial-update.remove-record-on-delete``:
Paimon's writer would fail mid-job).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lakelog.connector.format.key_value import RowKind
from lakelog.connector.format.options import MergeEngine
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import type_to_string, with_nullable
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.lexer import significant, split_commas
from lakelog.operators.sql.results import SqlResult
from lakelog.operators.sql.table_ddl import quote_ident

if TYPE_CHECKING:
    from lakelog.operators.sql.runner import LakelogSql

__all__ = ["merge_into"]


def _text(a: dict[str, Any], key: str) -> Optional[str]:
    """An argument as text, None when absent or empty (Paimon reads '' as not given)."""
    v = a.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise SqlError(f"CALL sys.merge_into: argument {key!r} must be a string, got {v!r}")
    return v.strip() or None


def _settings(text: str, where: str, action: str) -> dict[str, str]:
    """``col = expr, col2 = expr`` split at top-level commas (an expression may hold commas)."""
    toks = significant(text)
    if toks and toks[-1].text == ",":
        raise SqlError(f"{where}: {action} ends with a comma")
    out: dict[str, str] = {}
    for item in split_commas(toks):
        if len(item) < 3 or not item[0].is_name or item[1].text != "=":
            said = text[item[0].start : item[-1].end] if item else ""
            raise SqlError(f"{where}: cannot read {action} setting {said!r} (expected col = expression)")
        out[item[0].name] = text[item[2].start : item[-1].end]
    return out


def merge_into(sql: LakelogSql, catalog: str, database: str, a: dict[str, Any]) -> SqlResult:
    """Run Paimon's ``merge_into`` with the bound arguments ``a`` (its argument names)."""
    target = _text(a, "target_table")
    where = f"CALL sys.merge_into({target!r})"
    if not target:
        raise SqlError(f"{where}: argument 'target_table' must name a table: 'database.table'")
    db, _, name = target.rpartition(".")
    db = db or database
    path = sql.lakelog_path(catalog, db, name)
    if path is None:
        raise SqlError(f"{where}: table {catalog}.{db}.{name} does not exist")
    store = TableStore(path)
    engine = store.options.merge_engine
    if not store.schema.primary_keys:
        raise UnsupportedStatementError(
            f"{where}: merge-into action doesn't support table with no primary keys defined."
        )
    if engine not in (MergeEngine.DEDUPLICATE, MergeEngine.PARTIAL_UPDATE):
        raise UnsupportedStatementError(f"{where}: Merge engine {engine.value} can not support merge-into.")
    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"{where}: runs in batch mode only in lakelog; SET 'execution.runtime-mode' = 'batch'"
        )
    source = _text(a, "source_table")
    cond = _text(a, "merge_condition")
    if source is None:
        raise SqlError(f"{where}: Must specify source table.")
    if cond is None:
        raise SqlError(f"{where}: Must specify merge condition.")
    mu_cond, mu_set = _text(a, "matched_upsert_condition"), _text(a, "matched_upsert_setting")
    ins_cond, ins_values = _text(a, "not_matched_insert_condition"), _text(a, "not_matched_insert_values")
    md_cond = _text(a, "matched_delete_condition")
    nu_cond = _text(a, "not_matched_by_source_upsert_condition")
    nu_set = _text(a, "not_matched_by_source_upsert_setting")
    nd_cond = _text(a, "not_matched_by_source_delete_condition")
    if mu_cond and not mu_set:
        raise SqlError(f"{where}: matched-upsert must set the 'matchedUpsertSetting' argument")
    if ins_cond and not ins_values:
        raise SqlError(f"{where}: not-matched-insert must set the 'notMatchedInsertValues' argument")
    if nu_cond and not nu_set:
        raise SqlError(f"{where}: not-matched-by-source-upsert must set its setting argument")
    if not any((mu_set, ins_values, md_cond, nu_set, nd_cond)):
        raise SqlError(f"{where}: Must specify at least one merge action.")
    if mu_set and md_cond and not mu_cond:
        raise SqlError(
            f"{where}: If both matched-upsert and matched-delete actions are present, their conditions "
            "must both be present too."
        )
    if nu_set and nd_cond and not nu_cond:
        raise SqlError(
            f"{where}: If both not-matched-by-source-upsert and not-matched-by-source-delete actions are "
            "present, their conditions must both be present too."
        )
    if (
        (md_cond or nd_cond)
        and engine == MergeEngine.PARTIAL_UPDATE
        and not (
            store.options.partial_update_remove_record_on_delete
            or store.options.get(store.options.PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP)
        )
    ):
        raise UnsupportedStatementError(
            f"{where}: a delete action on a partial-update table needs "
            "'partial-update.remove-record-on-delete' = 'true' (Paimon's writer would fail on the deletes "
            "mid-job)"
        )
    names = store.schema.field_names
    keys = set(store.schema.primary_keys)
    mu_changes: dict[str, str] = {}
    if mu_set and mu_set != "*":
        mu_changes = _settings(mu_set, where, "matched_upsert_setting")
        _check_columns(mu_changes, names, where, "matched-upsert")
    nu_changes: dict[str, str] = {}
    if nu_set:
        if nu_set == "*":
            raise SqlError(f"{where}: The '*' cannot be used in not_matched_by_source_upsert_set")
        nu_changes = _settings(nu_set, where, "not_matched_by_source_upsert_setting")
        _check_columns(nu_changes, names, where, "not-matched-by-source-upsert")
        if keys & set(nu_changes):
            raise SqlError(f"{where}: Not allowed to change primary key in not-matched-by-source-upsert-set.")

    # every argument checked: the source statements run now (they may be jobs of their own)
    for sqls in (_text(a, "source_sqls") or "").split(";"):
        if sqls.strip():
            sql.execute(sqls)

    alias = _text(a, "target_alias")
    tname = alias or name
    target_ref = ".".join(quote_ident(p) for p in (catalog, db, name))
    if alias:
        target_ref += f" AS {quote_ident(alias)}"
    source_ref = ".".join(quote_ident(p) for p in source.split("."))
    source_short = quote_ident(source.split(".")[-1])

    def columns(changes: dict[str, str], qualify: bool) -> str:
        return ", ".join(
            changes.get(n, f"{quote_ident(tname)}.{quote_ident(n)}" if qualify else quote_ident(n))
            for n in names
        )

    matched = f"FROM {target_ref} INNER JOIN {source_ref} ON {cond}"
    unmatched_target = f"FROM {target_ref} WHERE NOT EXISTS (SELECT * FROM {source_ref} WHERE {cond})"
    queries: list[tuple[str, str, int]] = []  # (action, query, row kind)
    if mu_set:
        project = f"{source_short}.*" if mu_set == "*" else columns(mu_changes, True)
        q = f"SELECT {project} {matched}"
        queries.append(
            ("matched-upsert", q + (f" WHERE {mu_cond}" if mu_cond else ""), RowKind.UPDATE_AFTER)
        )
    if nu_set:
        q = f"SELECT {columns(nu_changes, False)} {unmatched_target}"
        queries.append(("not-matched-by-source-upsert", q + (f" AND ({nu_cond})" if nu_cond else ""),
                        RowKind.UPDATE_AFTER))  # fmt: skip
    if md_cond:
        q = f"SELECT {columns({}, True)} {matched} WHERE {md_cond}"
        queries.append(("matched-delete", q, RowKind.DELETE))
    if nd_cond:
        q = f"SELECT {columns({}, False)} {unmatched_target} AND ({nd_cond})"
        queries.append(("not-matched-by-source-delete", q, RowKind.DELETE))
    if ins_values:
        values = f"{source_short}.*" if ins_values == "*" else ins_values
        q = f"SELECT {values} FROM {source_ref} WHERE NOT EXISTS (SELECT * FROM {target_ref} WHERE {cond})"
        queries.append(
            ("not-matched-insert", q + (f" AND ({ins_cond})" if ins_cond else ""), RowKind.INSERT)
        )

    from lakelog.operators.sql.dml import write_kinds

    tables = [(_typed(sql, store, sql.sql_query(q), where, action), kind) for action, q, kind in queries]
    return write_kinds(
        sql, path, tables, dict(sql.dynamic.for_table(catalog, db, name)), f"merge-into-{name}"
    )


def _check_columns(changes: dict[str, str], names: list[str], where: str, action: str) -> None:
    for col in changes:
        if col not in names:
            raise SqlError(
                f"{where}: Invalid column reference '{col}' of the target table at {action} action."
            )


def _typed(sql: LakelogSql, store: TableStore, table: Any, where: str, action: str) -> Any:
    """``table``'s columns cast to the target's types, by position; a wrong count is refused,
    naming the action, as Paimon checks each action's schema."""
    got = list(table.get_schema().get_field_names())
    fields = store.schema.fields
    if len(got) != len(fields):
        raise SqlError(
            f"{where}: the query of action '{action}' has {len(got)} columns ({got}), the target table "
            f"{len(fields)} ({[f.name for f in fields]})"
        )
    view = sql.temporary_view(table)
    exprs = [
        f"CAST({quote_ident(g)} AS {type_to_string(with_nullable(f.type, True))}) AS {quote_ident(f.name)}"
        for g, f in zip(got, fields)
    ]
    return sql.t_env.sql_query(f"SELECT {', '.join(exprs)} FROM {view}")
