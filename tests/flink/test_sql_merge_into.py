"""``CALL sys.merge_into`` (issue 24): Paimon's procedure and action examples, as written, on a
lakelog catalog; each result checked against the rows a dict model computes, and each merge one
commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.flink.sqlkit import refused, rows, session

pytest.importorskip("pyflink")

T_ROWS = [(1, 5, "a"), (2, 50, "b"), (3, 150, "c"), (4, 8, "trivial"), (5, 70, "e")]
S_ROWS = [(2, 51, "s2"), (3, 151, "s3"), (4, 9, "s4"), (7, 700, "s7"), (8, 800, "s8")]


def _setup(tmp_path: Path) -> tuple[Any, Any, Any]:
    wh = str(tmp_path / "wh")
    sql = session("batch")
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("CREATE TABLE T (id INT, price INT, mark STRING, PRIMARY KEY (id) NOT ENFORCED) "
                "WITH ('bucket' = '2')")  # fmt: skip
    sql.execute("CREATE TABLE S (order_id INT, price INT, mark STRING)")
    cat = sql.mirror.catalog("lk")
    t, s = cat.get_table("default.T"), cat.get_table("default.S")  # written in Python: no job
    t.write(pa.table(list(zip(*T_ROWS)), schema=t.schema))
    s.write(pa.table(list(zip(*S_ROWS)), schema=s.schema))
    return sql, t, s


def _state(t: Any) -> dict[int, tuple[int, str]]:
    return {r["id"]: (r["price"], r["mark"]) for r in t.to_arrow().to_pylist()}


def test_the_procedure_pages_example_with_positional_arguments(tmp_path: Path) -> None:
    sql, t, _ = _setup(tmp_path)
    before = t.latest_snapshot().id
    sql.execute("""
        -- for matched order rows,
        -- increase the price,
        -- and if there is no match,
        -- insert the order from
        -- the source table
        -- for Flink 1.18
        CALL sys.merge_into('default.T','','','default.S','T.id=S.order_id','','price=T.price+20','','*','')""")
    model = {i: (p, m) for i, p, m in T_ROWS}
    source = {i: (p, m) for i, p, m in S_ROWS}
    for k in model:
        if k in source:
            model[k] = (model[k][0] + 20, model[k][1])
    for k, v in source.items():
        model.setdefault(k, v)
    assert _state(t) == model
    assert t.latest_snapshot().id == before + 1  # one commit
    # the page's "for Flink 1.19 and later" form (named arguments) runs in the tests below


def test_the_action_pages_examples(tmp_path: Path) -> None:
    sql, t, _ = _setup(tmp_path)
    model = {i: (p, m) for i, p, m in T_ROWS}
    matched = {i for i, _, _ in S_ROWS} & set(model)
    # Find all orders mentioned in the source table, then mark as important if the price is above
    # 100 or delete if the price is under 10 (the page's action, as procedure arguments)
    sql.execute("""
        CALL sys.merge_into(target_table => 'default.T', source_table => 'default.S',
            merge_condition => 'T.id = S.order_id',
            matched_upsert_condition => 'T.price > 100', matched_upsert_setting => 'mark = ''important''',
            matched_delete_condition => 'T.price < 10')""")
    for k in sorted(matched):
        if model[k][0] > 100:
            model[k] = (model[k][0], "important")
        elif model[k][0] < 10:
            del model[k]
    assert _state(t) == model
    # For not matched by source order rows, decrease the price or if the mark is 'trivial', delete
    # them; with a target alias and a source made by source_sqls (a temporary view)
    t.write(pa.table([[6, 9], [60, 90], ["trivial", "x"]], schema=t.schema))
    model.update({6: (60, "trivial"), 9: (90, "x")})
    sql.execute("""
        CALL sys.merge_into(target_table => 'default.T', target_alias => 'TT',
            source_sqls => 'CREATE TEMPORARY VIEW V AS SELECT order_id, price, mark FROM S WHERE order_id < 8',
            source_table => 'V', merge_condition => 'TT.id = V.order_id',
            not_matched_by_source_upsert_condition => 'TT.mark <> ''trivial''',
            not_matched_by_source_upsert_setting => 'price = TT.price - 20',
            not_matched_by_source_delete_condition => 'TT.mark = ''trivial''')""")
    in_view = {i for i, _, _ in S_ROWS if i < 8}
    for k in sorted(set(model) - in_view):
        if model[k][1] == "trivial":
            del model[k]
        else:
            model[k] = (model[k][0] - 20, model[k][1])
    assert _state(t) == model
    # an insert with its condition and values computed from the source's columns
    sql.execute("""
        CALL sys.merge_into(target_table => 'default.T', source_table => 'default.S',
            merge_condition => 'T.id = S.order_id', not_matched_insert_condition => 'S.price > 750',
            not_matched_insert_values => 'S.order_id, S.price * 2, UPPER(S.mark)')""")
    for i, p, m in S_ROWS:
        if i not in model and p > 750:
            model[i] = (p * 2, m.upper())
    assert _state(t) == model


def test_refusals_name_what_is_wrong_before_any_job(tmp_path: Path) -> None:
    sql, t, _ = _setup(tmp_path)
    snaps = len(t.snapshots())
    call = "CALL sys.merge_into(target_table => 'default.T', source_table => 'default.S', "
    refused(sql, call + "merge_condition => 'T.id = S.order_id')", "at least one merge action")
    refused(sql, call + "matched_upsert_setting => 'price = 1')", "Must specify merge condition")
    refused(sql, call + "merge_condition => 'T.id = S.order_id', matched_upsert_setting => 'nope = 1')",
            "Invalid column reference 'nope'")  # fmt: skip
    refused(sql, call + "merge_condition => 'T.id = S.order_id', matched_upsert_setting => 'price = 1', "
            "matched_delete_condition => 'TRUE')", "conditions must both be present")  # fmt: skip
    refused(sql, call + "merge_condition => 'T.id = S.order_id', "
            "not_matched_by_source_upsert_setting => 'id = 3')", "primary key")  # fmt: skip
    refused(sql, "CALL sys.merge_into(target_table => 'default.S', source_table => 'default.T', "
            "merge_condition => 'S.order_id = T.id', matched_delete_condition => 'TRUE')",
            "no primary keys")  # fmt: skip
    sql.execute("SET 'execution.runtime-mode' = 'streaming'")
    refused(sql, call + "merge_condition => 'T.id = S.order_id', matched_delete_condition => 'TRUE')",
            "batch mode")  # fmt: skip
    assert len(t.snapshots()) == snaps
    assert ("sys.merge_into",) in rows(sql.execute("SHOW PROCEDURES"))
