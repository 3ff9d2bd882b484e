"""Merge engines (lakelog.connector.lsm.merge.engine) against Paimon's documented examples and against a
row-at-a-time reference of Paimon's merge functions (tests/merge_reference.py)."""

from __future__ import annotations

import math
import zlib
from decimal import Decimal
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.types import DataField, parse_type_string, to_arrow_type
from lakelog.connector.lsm.merge.engine import merge_function, sort_for_merge
from tests import merge_reference as ref

INS, UB, UA, D = 0, 1, 2, 3
KEY = "_KEY_k"

Cols = list[tuple[str, str]]
Row = tuple[int, int, tuple[Any, ...]]  # key, kind, values (all columns incl. k)


def make_schema(cols: Cols, options: dict[str, str]) -> TableSchema:
    fields = [DataField(i, n, parse_type_string(t)) for i, (n, t) in enumerate(cols)]
    return TableSchema(fields=fields, primary_keys=["k"], options=options)


def build_input(cols: Cols, rows: list[Row]) -> pa.Table:
    arrays: dict[str, pa.Array] = {
        KEY: pa.array([r[0] for r in rows], pa.int64()),
        "_SEQUENCE_NUMBER": pa.array(range(len(rows)), pa.int64()),
        "_VALUE_KIND": pa.array([r[1] for r in rows], pa.int8()),
    }
    for i, (n, t) in enumerate(cols):
        arrays[n] = pa.array([r[2][i] for r in rows], to_arrow_type(parse_type_string(t)))
    return pa.table(arrays)


def run(cols: Cols, options: dict[str, str], rows: list[Row]) -> dict[int, tuple[int, dict[str, Any]]]:
    mf = merge_function(make_schema(cols, options), CoreOptions(options))
    table = sort_for_merge(build_input(cols, rows), [KEY], mf.order_by)
    out = mf.merge(table, [KEY])
    assert out.schema == table.schema
    keys = out.column(KEY).to_pylist()
    assert keys == sorted(set(keys)) and len(keys) == len(set(r[0] for r in rows))
    result = {}
    for rec in out.to_pylist():
        result[rec[KEY]] = (rec["_VALUE_KIND"], {n: rec[n] for n, _ in cols})
    return result


def live(result: dict[int, tuple[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    return {k: v for k, (kind, v) in result.items() if kind == INS}


# --------------------------------------------------------------------------------------------------
# deduplicate / first-row
# --------------------------------------------------------------------------------------------------

KV: Cols = [("k", "INT NOT NULL"), ("v", "STRING"), ("ts", "BIGINT")]


def test_deduplicate_keeps_last_and_deletes() -> None:
    rows = [(1, INS, (1, "a", 1)), (1, UA, (1, "b", 2)), (2, INS, (2, "x", 1)), (2, D, (2, "x", 1)),
            (3, INS, (3, "z", 1)), (3, UB, (3, "z", 1))]
    res = run(KV, {}, rows)
    assert res[1] == (INS, {"k": 1, "v": "b", "ts": 2})
    assert res[2][0] == D and res[3][0] == D


def test_deduplicate_ignore_delete() -> None:
    rows = [(1, INS, (1, "a", 1)), (1, D, (1, "a", 1)), (2, D, (2, "q", 1))]
    res = run(KV, {"ignore-delete": "true"}, rows)
    assert res[1] == (INS, {"k": 1, "v": "a", "ts": 1})
    assert res[2][0] == D  # nothing left for the key: removed


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_deduplicate_sequence_field(order: str) -> None:
    rows = [(1, INS, (1, "late", 5)), (1, INS, (1, "early", 3)), (1, INS, (1, "none", None)),
            (1, INS, (1, "tie", 5))]
    res = run(KV, {"sequence.field": "ts", "sequence.field.sort-order": order}, rows)
    # nulls sort first; equal sequence values keep arrival order
    assert res[1][1]["v"] == ("tie" if order == "ascending" else "early")


def test_deduplicate_several_sequence_fields() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("v", "STRING"), ("a", "INT"), ("b", "INT")]
    rows = [(1, INS, (1, "x", 2, 1)), (1, INS, (1, "y", 1, 9)), (1, INS, (1, "z", 2, 0))]
    assert run(cols, {"sequence.field": "a,b"}, rows)[1][1]["v"] == "x"


@pytest.mark.parametrize("order,expected", [
    ("ascending", [(1, "x", 4), (2, "y", 5), (3, None, 1), (4, "w", 7)]),
    ("descending", [(1, "x", 4), (2, None, 2), (3, "z2", 0), (4, "w", 7)]),
])
def test_sequence_field_nulls_are_oldest_as_pypaimon_reads(order: str, expected: list[Any]) -> None:
    """The rows of tests/test_interop_pypaimon.py::test_merge_engines_read_the_same; pypaimon reads
    these results (a null sequence value is the oldest in both sort orders)."""
    cols: Cols = [("k", "BIGINT NOT NULL"), ("a", "STRING"), ("b", "BIGINT")]
    data = [(1, "x", 4), (2, None, 2), (3, "z", None), (1, None, None), (2, "y", 5), (3, None, 1),
            (3, "z2", 0), (4, "w", 7)]
    opts = {"sequence.field": "b", "sequence.field.sort-order": order}
    res = run(cols, opts, [(r[0], INS, r) for r in data])
    assert [tuple(v.values()) for _, (_, v) in sorted(res.items())] == expected


def test_first_row() -> None:
    rows = [(1, INS, (1, "first", 1)), (1, INS, (1, "second", 2)), (2, UA, (2, "only", 1))]
    res = run(KV, {"merge-engine": "first-row"}, rows)
    assert res[1][1]["v"] == "first" and res[2][1]["v"] == "only"
    with pytest.raises(InvalidInputError, match="ignore-delete"):
        run(KV, {"merge-engine": "first-row"}, rows + [(1, D, (1, "first", 1))])
    res = run(KV, {"merge-engine": "first-row", "ignore-delete": "true"},
              [(1, D, (1, "gone", 0)), (1, INS, (1, "kept", 1)), (2, D, (2, "x", 0))])
    assert res[1] == (INS, {"k": 1, "v": "kept", "ts": 1}) and res[2][0] == D
    with pytest.raises(OptionError, match="sequence.field"):
        opts = {"merge-engine": "first-row", "sequence.field": "ts"}
        merge_function(make_schema(KV, {}), CoreOptions(opts))


def test_output_sequence_is_group_max_and_empty_input() -> None:
    mf = merge_function(make_schema(KV, {}), CoreOptions({}))
    t = build_input(KV, [(1, INS, (1, "a", 1)), (1, INS, (1, "b", 2))])
    out = mf.merge(sort_for_merge(t, [KEY], []), [KEY])
    assert out.column("_SEQUENCE_NUMBER").to_pylist() == [1]
    empty = t.slice(0, 0)
    assert mf.merge(empty, [KEY]).num_rows == 0


def test_string_and_composite_keys_and_chunked_input() -> None:
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    cols: Cols = [("k", "STRING NOT NULL"), ("j", "INT NOT NULL"), ("v", "BIGINT")]
    schema = TableSchema(fields=[DataField(i, n, parse_type_string(t)) for i, (n, t) in enumerate(cols)],
                         primary_keys=["k", "j"], options=opts)
    mf = merge_function(schema, CoreOptions(opts))

    def part(rows: list[tuple[str, int, int]], seq0: int) -> pa.Table:
        return pa.table({"_KEY_k": [r[0] for r in rows], "_KEY_j": pa.array([r[1] for r in rows], pa.int32()),
                         "_SEQUENCE_NUMBER": pa.array(range(seq0, seq0 + len(rows)), pa.int64()),
                         "_VALUE_KIND": pa.array([0] * len(rows), pa.int8()), "k": [r[0] for r in rows],
                         "j": pa.array([r[1] for r in rows], pa.int32()), "v": [r[2] for r in rows]})

    t = pa.concat_tables([part([("a", 1, 1), ("b", 1, 2), ("a", 2, 3)], 0),
                          part([("a", 1, 10), ("b", 1, 20)], 3)])
    t = sort_for_merge(t, ["_KEY_k", "_KEY_j"], mf.order_by)
    out = mf.merge(t, ["_KEY_k", "_KEY_j"])
    assert [(r["k"], r["j"], r["v"]) for r in out.to_pylist()] == [("a", 1, 11), ("a", 2, 3), ("b", 1, 22)]


# --------------------------------------------------------------------------------------------------
# partial-update (examples from Paimon's docs/content/primary-key-table/merge-engine/partial-update.md)
# --------------------------------------------------------------------------------------------------


def test_partial_update_basic() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("a", "DOUBLE"), ("b", "INT"), ("c", "STRING")]
    rows = [(1, INS, (1, 23.0, 10, None)), (1, INS, (1, None, None, "This is a book")),
            (1, INS, (1, 25.2, None, None))]
    res = run(cols, {"merge-engine": "partial-update"}, rows)
    assert res[1] == (INS, {"k": 1, "a": 25.2, "b": 10, "c": "This is a book"})


def test_partial_update_delete_handling() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "INT")]
    rows = [(1, INS, (1, 1, 1)), (1, D, (1, 1, 1)), (2, INS, (2, 1, 1)), (2, D, (2, None, None)),
            (2, INS, (2, None, 5))]
    with pytest.raises(InvalidInputError, match="remove-record-on-delete"):
        run(cols, {"merge-engine": "partial-update"}, rows)
    res = run(cols, {"merge-engine": "partial-update", "ignore-delete": "true"}, rows)
    assert live(res) == {1: {"k": 1, "a": 1, "b": 1}, 2: {"k": 2, "a": 1, "b": 5}}
    remove = {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}
    res = run(cols, remove, rows)
    assert res[1][0] == D
    assert res[2] == (INS, {"k": 2, "a": None, "b": 5})  # the delete wiped the earlier values
    res = run(cols, {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
              [(1, INS, (1, 1, 1)), (1, UB, (1, 1, 1))])
    assert res[1] == (INS, {"k": 1, "a": 1, "b": 1})  # -U is ignored without sequence groups
    res = run(cols, {"merge-engine": "partial-update", "ignore-delete": "true"}, [(3, D, (3, 1, 1))])
    assert res[3][0] == D  # no insert at all


SG: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "INT"), ("g_1", "INT"), ("c", "INT"), ("d", "INT"),
            ("g_2", "INT")]


def test_partial_update_sequence_group_doc_example() -> None:
    opts = {"merge-engine": "partial-update", "fields.g_1.sequence-group": "a,b",
            "fields.g_2.sequence-group": "c,d"}
    rows = [(1, INS, (1, 1, 1, 1, 1, 1, 1)), (1, INS, (1, 2, 2, 2, 2, 2, None))]
    assert live(run(SG, opts, rows))[1] == dict(zip([n for n, _ in SG], (1, 2, 2, 2, 1, 1, 1)))
    rows.append((1, INS, (1, 3, 3, 1, 3, 3, 3)))
    assert live(run(SG, opts, rows))[1] == dict(zip([n for n, _ in SG], (1, 2, 2, 2, 3, 3, 3)))


def test_partial_update_multi_field_sequence_group_doc_example() -> None:
    cols: Cols = SG + [("g_3", "INT")]
    opts = {"merge-engine": "partial-update", "fields.g_1.sequence-group": "a,b",
            "fields.g_2,g_3.sequence-group": "c,d"}
    rows = [(1, INS, (1, 1, 1, 1, 1, 1, 1, 1)), (1, INS, (1, 2, 2, 2, 2, 2, 1, None))]
    names = [n for n, _ in cols]
    assert live(run(cols, opts, rows))[1] == dict(zip(names, (1, 2, 2, 2, 1, 1, 1, 1)))
    rows.append((1, INS, (1, 3, 3, 1, 3, 3, 3, 1)))
    assert live(run(cols, opts, rows))[1] == dict(zip(names, (1, 2, 2, 2, 3, 3, 3, 1)))


def test_partial_update_aggregation_in_groups_doc_example() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "INT"), ("c", "INT"), ("d", "INT")]
    opts = {"merge-engine": "partial-update", "fields.a.sequence-group": "b",
            "fields.b.aggregate-function": "first_value", "fields.c.sequence-group": "d",
            "fields.d.aggregate-function": "sum"}
    rows = [(1, INS, (1, 1, 1, None, None)), (1, INS, (1, None, None, 1, 1)), (1, INS, (1, 2, 2, None, None)),
            (1, INS, (1, None, None, 2, 2))]
    assert live(run(cols, opts, rows))[1] == {"k": 1, "a": 2, "b": 1, "c": 2, "d": 3}
    opts2 = {"merge-engine": "partial-update", "fields.a.sequence-group": "b", "fields.c.sequence-group": "d",
             "fields.default-aggregate-function": "last_non_null_value", "fields.d.aggregate-function": "sum"}
    assert live(run(cols, opts2, rows))[1] == {"k": 1, "a": 2, "b": 2, "c": 2, "d": 3}


def test_partial_update_aggregation_multi_field_group_doc_example() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "INT"), ("g_1", "INT"), ("c", "STRING"),
                  ("g_2", "INT"), ("g_3", "INT")]
    opts = {"merge-engine": "partial-update", "fields.a.aggregate-function": "sum",
            "fields.g_1,g_3.sequence-group": "a", "fields.g_2.sequence-group": "c"}
    names = [n for n, _ in cols]
    rows = [(1, INS, (1, 1, 1, 1, "1", 1, 1)), (1, INS, (1, 2, 2, 2, "2", None, 2))]
    assert live(run(cols, opts, rows))[1] == dict(zip(names, (1, 3, 2, 2, "1", 1, 2)))
    rows.append((1, INS, (1, 3, 3, 2, "3", 3, 1)))
    assert live(run(cols, opts, rows))[1] == dict(zip(names, (1, 6, 3, 2, "3", 3, 2)))


def test_partial_update_sequence_group_retract_and_remove_on_group() -> None:
    opts = {"merge-engine": "partial-update", "fields.g_1.sequence-group": "a,b",
            "fields.g_2.sequence-group": "c,d"}
    rows = [(1, INS, (1, 1, 1, 1, 1, 1, 1)), (1, UB, (1, 9, 9, 2, 9, 9, None))]
    # g_1 group retracted (its fields cleared, the sequence field advanced); g_2 untouched
    assert live(run(SG, opts, rows))[1] == {"k": 1, "a": None, "b": None, "g_1": 2, "c": 1, "d": 1, "g_2": 1}
    # an older retraction does nothing
    rows2 = [(1, INS, (1, 1, 1, 5, 1, 1, 1)), (1, D, (1, 9, 9, 2, None, None, None))]
    assert live(run(SG, opts, rows2))[1] == {"k": 1, "a": 1, "b": 1, "g_1": 5, "c": 1, "d": 1, "g_2": 1}
    opts_rm = dict(opts, **{"partial-update.remove-record-on-sequence-group": "g_1"})
    rows3 = [(1, INS, (1, 1, 1, 1, 1, 1, 1)), (1, D, (1, None, None, 2, None, None, None))]
    assert run(SG, opts_rm, rows3)[1][0] == D
    rows4 = rows3 + [(1, INS, (1, None, None, None, 7, 7, 3))]
    assert run(SG, opts_rm, rows4)[1] == (INS, {"k": 1, "a": None, "b": None, "g_1": None, "c": 7, "d": 7,
                                             "g_2": 3})
    # a delete of the other group only retracts that group
    rows5 = [(1, INS, (1, 1, 1, 1, 1, 1, 1)), (1, D, (1, None, None, None, 5, 5, 2))]
    assert run(SG, opts_rm, rows5)[1] == (INS, {"k": 1, "a": 1, "b": 1, "g_1": 1, "c": None, "d": None,
                                             "g_2": 2})


def test_partial_update_validation() -> None:
    def make(opts: dict[str, str]) -> None:
        merge_function(make_schema(SG, opts), CoreOptions(dict(opts, **{"merge-engine": "partial-update"})))

    with pytest.raises(OptionError, match="nope"):
        make({"fields.nope.sequence-group": "a"})
    with pytest.raises(OptionError, match="zzz"):
        make({"fields.g_1.sequence-group": "a,zzz"})
    with pytest.raises(OptionError, match="repeatedly"):
        make({"fields.g_1.sequence-group": "a,b", "fields.g_2.sequence-group": "b"})
    with pytest.raises(OptionError, match="sequence group"):
        make({"fields.a.aggregate-function": "sum"})
    make({"fields.a.aggregate-function": "last_non_null_value"})
    with pytest.raises(OptionError, match="conflicting"):
        make({"ignore-delete": "true", "partial-update.remove-record-on-delete": "true"})
    with pytest.raises(OptionError, match="conflicting"):
        make({"fields.g_1.sequence-group": "a", "partial-update.remove-record-on-delete": "true"})
    with pytest.raises(OptionError, match="must be part of sequence groups"):
        make({"fields.g_1.sequence-group": "a", "partial-update.remove-record-on-sequence-group": "g_2"})
    with pytest.raises(OptionError, match="does not fit"):
        make({"fields.g_1.sequence-group": "a", "fields.a.aggregate-function": "bool_or"})


# --------------------------------------------------------------------------------------------------
# aggregation (docs/content/primary-key-table/merge-engine/aggregation.md)
# --------------------------------------------------------------------------------------------------


def agg_run(col_type: str, func: str, rows: list[tuple[int, Any]], **opts: str) -> tuple[int, Any]:
    cols: Cols = [("k", "INT NOT NULL"), ("v", col_type)]
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": func}
    options.update(opts)
    res = run(cols, options, [(1, kind, (1, v)) for kind, v in rows])
    kind, values = res[1]
    return kind, values["v"]


def test_aggregation_doc_example() -> None:
    cols: Cols = [("k", "BIGINT NOT NULL"), ("price", "DOUBLE"), ("sales", "BIGINT")]
    opts = {"merge-engine": "aggregation", "fields.price.aggregate-function": "max",
            "fields.sales.aggregate-function": "sum"}
    res = run(cols, opts, [(1, INS, (1, 23.0, 15)), (1, INS, (1, 30.2, 20))])
    assert res[1] == (INS, {"k": 1, "price": 30.2, "sales": 35})


@pytest.mark.parametrize(
    "col_type,func,rows,expected",
    [
        ("INT", "sum", [(INS, 1), (INS, None), (INS, 5), (UB, 2)], 4),
        ("INT", "sum", [(INS, None)], None),
        ("INT", "sum", [(UB, 3)], -3),
        ("TINYINT", "sum", [(INS, 100), (INS, 100)], -56),
        ("BIGINT", "product", [(INS, 3), (INS, None), (INS, 4)], 12),
        ("INT", "product", [(INS, 7), (INS, 2), (UB, 4)], 3),
        ("INT", "product", [(UB, 4), (INS, 5)], 5),
        ("DOUBLE", "product", [(INS, 1.5), (INS, 4.0), (D, 2.0)], 3.0),
        ("DECIMAL(10, 2)", "product", [(INS, Decimal("1.25")), (INS, Decimal("1.25"))], Decimal("1.56")),
        ("INT", "count", [(INS, 9), (INS, None), (INS, 3), (D, 1)], 1),
        ("BIGINT", "max", [(INS, 3), (INS, None), (INS, 9), (INS, 1)], 9),
        ("STRING", "min", [(INS, "b"), (INS, "a"), (INS, None)], "a"),
        ("DOUBLE", "max", [(INS, 1.0), (INS, float("nan")), (INS, 2.0)], float("nan")),
        ("DOUBLE", "min", [(INS, 0.0), (INS, -0.0)], -0.0),
        ("TIMESTAMP(6)", "max", [(INS, 1_000_000), (INS, 5)], 1_000_000),
        ("STRING", "last_value", [(INS, "a"), (INS, None)], None),
        ("STRING", "last_value", [(INS, "a"), (UB, "a")], None),
        ("STRING", "last_non_null_value", [(INS, "a"), (INS, None)], "a"),
        ("STRING", "last_non_null_value", [(INS, "a"), (UB, None)], "a"),
        ("STRING", "last_non_null_value", [(INS, "a"), (UB, "x")], None),
        ("STRING", "first_value", [(INS, None), (INS, "b")], None),
        ("STRING", "first_non_null_value", [(INS, None), (INS, "b"), (INS, "c")], "b"),
        ("STRING", "first_not_null_value", [(INS, None), (INS, "b"), (INS, "c")], "b"),
        ("STRING", "listagg", [(INS, "a"), (INS, None), (INS, " "), (INS, "b")], "a,b"),
        ("BOOLEAN", "bool_and", [(INS, True), (INS, None), (INS, False)], False),
        ("BOOLEAN", "bool_or", [(INS, False), (INS, None), (INS, True)], True),
        ("BOOLEAN", "bool_or", [(INS, None)], None),
        ("ARRAY<INT>", "collect", [(INS, [1, 2]), (INS, None), (INS, [2, 3])], [1, 2, 2, 3]),
        ("ARRAY<INT>", "collect", [(INS, [1, 2, 1]), (UB, [1, 5]), (INS, [1])], [2, 1, 1]),
        ("ARRAY<INT>", "collect", [(UB, [1]), (INS, [1, 2])], [1, 2]),
        ("ARRAY<INT>", "collect", [(INS, [1]), (UB, [1])], []),
    ],
)
def test_aggregate_functions(col_type: str, func: str, rows: list[tuple[int, Any]], expected: Any) -> None:
    kind, value = agg_run(col_type, func, rows)
    assert kind == INS
    if col_type.startswith("TIMESTAMP") and value is not None:
        value = int(value.timestamp() * 1_000_000) if hasattr(value, "timestamp") else value
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(value)
    elif isinstance(expected, float) and expected == 0:
        assert value == 0 and math.copysign(1, value) == math.copysign(1, expected)
    else:
        assert value == expected


def test_aggregate_options() -> None:
    delim = {"fields.v.list-agg-delimiter": "|"}
    distinct = {"fields.v.distinct": "true"}
    assert agg_run("STRING", "listagg", [(INS, "a"), (INS, "b")], **delim)[1] == "a|b"
    assert agg_run("STRING", "listagg", [(INS, "a,b"), (INS, "b,c,a,d")], **distinct)[1] == "a,b,c,d"
    assert agg_run("ARRAY<INT>", "collect", [(INS, [1, 2, 1]), (INS, [3, 2])], **distinct)[1] == [1, 2, 3]
    assert agg_run("INT", "max", [(INS, 1), (UB, 5), (INS, 3)], **{"fields.v.ignore-retract": "true"})[1] == 3
    with pytest.raises(InvalidInputError, match="ignore-retract"):
        agg_run("INT", "max", [(INS, 1), (UB, 5)])


def test_merge_map() -> None:
    rows = [(INS, [("a", 1), ("b", 2)]), (INS, [("b", 3), ("c", 4)]), (D, [("a", 0)]), (INS, None)]
    kind, value = agg_run("MAP<STRING, INT>", "merge_map", rows)
    assert kind == INS and dict(value) == {"b": 3, "c": 4}


KEYTIME = "MAP<STRING, ROW<v STRING, ts STRING>>"


def test_merge_map_with_keytime_as_paimons_page_shows_it() -> None:
    """The aggregation page's example, with timestamps that also compare right as strings: the newest
    entry of each key wins, whichever order the rows come in."""
    def entries(*items: tuple[str, str, str]) -> list:
        return [(k, {"v": v, "ts": ts}) for k, v, ts in items]

    rows = [(INS, entries(("product_name", "iPhone", "100"), ("color", "Black", "100"))),
            (INS, entries(("product_name", "iPad", "200"), ("price", "999", "200"))),
            (INS, entries(("color", "White", "050")))]
    kind, value = agg_run(KEYTIME, "merge_map_with_keytime", rows, **{"fields.v.ts-field": "ts"})
    assert kind == INS and dict(value) == {"product_name": {"v": "iPad", "ts": "200"},
                                           "color": {"v": "Black", "ts": "100"},
                                           "price": {"v": "999", "ts": "200"}}
    # as Paimon's code compares them, the page's own "50" is newer than "100" (strings)
    rows[2] = (INS, entries(("color", "White", "50")))
    assert dict(agg_run(KEYTIME, "merge_map_with_keytime", rows)[1])["color"] == {"v": "White", "ts": "50"}
    # a null value removes the key, a null timestamp is skipped, a tie keeps the held entry; the
    # first map is taken whole, its null timestamps too
    rows = [(INS, [("a", {"v": "1", "ts": None}), ("b", {"v": "1", "ts": "5"}), ("c", None)]),
            (INS, [("b", None), ("a", {"v": "2", "ts": None}), ("d", {"v": "2", "ts": "1"})]),
            (INS, [("d", {"v": "3", "ts": "1"}), ("b", {"v": "3", "ts": "0"})])]
    assert dict(agg_run(KEYTIME, "merge_map_with_keytime", rows)[1]) == {
        "a": {"v": "1", "ts": None}, "b": {"v": "3", "ts": "0"}, "c": None, "d": {"v": "2", "ts": "1"}}
    # Java orders strings by UTF-16 code units: U+FFFD comes after U+1F600 (a surrogate pair there)
    rows = [(INS, [("e", {"v": "1", "ts": "\U0001F600"})]), (INS, [("e", {"v": "2", "ts": "\uFFFD"})])]
    assert dict(agg_run(KEYTIME, "merge_map_with_keytime", rows)[1])["e"]["v"] == "2"
    with pytest.raises(InvalidInputError, match="retract"):
        agg_run(KEYTIME, "merge_map_with_keytime", [(INS, []), (UB, [])])


def test_merge_map_with_keytime_refusals() -> None:
    def make(col_type: str, **opts: str) -> None:
        cols: Cols = [("k", "INT NOT NULL"), ("m", col_type)]
        options = {"merge-engine": "aggregation", "fields.m.aggregate-function": "merge_map_with_keytime", **opts}
        merge_function(make_schema(cols, options), CoreOptions(options))

    make(KEYTIME)
    make("MAP<INT, ROW<ts STRING, v INT>>", **{"fields.m.ts-field": "ts"})
    with pytest.raises(OptionError, match="'m'.*must be ROW, not INT"):
        make("MAP<STRING, INT>")
    with pytest.raises(OptionError, match="at least 2 fields"):
        make("MAP<STRING, ROW<ts STRING>>")
    with pytest.raises(OptionError, match="'fields.m.ts-field' names 'time', not a field"):
        make(KEYTIME, **{"fields.m.ts-field": "time"})
    with pytest.raises(OptionError, match="'ts' of 'm'.* is BIGINT.*as strings"):
        make("MAP<STRING, ROW<v STRING, ts BIGINT>>")
    with pytest.raises(OptionError, match="needs MAP"):
        make("ARRAY<ROW<v STRING, ts STRING>>")


def test_aggregation_remove_record_on_delete() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("s", "INT"), ("n", "INT NOT NULL")]
    opts = {"merge-engine": "aggregation", "fields.s.aggregate-function": "sum",
            "fields.n.aggregate-function": "sum", "aggregation.remove-record-on-delete": "true"}
    assert run(cols, opts, [(1, INS, (1, 1, 1)), (1, D, (1, 1, 1))])[1][0] == D
    # after a removal the row restarts: nullable fields from null, NOT NULL fields from the delete row
    res = run(cols, opts, [(1, INS, (1, 1, 1)), (1, D, (1, 7, 5)), (1, INS, (1, 2, 2))])
    assert res[1] == (INS, {"k": 1, "s": 2, "n": 7})
    # -U still retracts
    assert run(cols, opts, [(1, INS, (1, 5, 5)), (1, UB, (1, 2, 2))])[1] == (INS, {"k": 1, "s": 3, "n": 3})


def test_aggregation_validation() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("s", "STRING"), ("i", "INT"), ("ts", "BIGINT")]

    def make(opts: dict[str, str]) -> None:
        merge_function(make_schema(cols, opts), CoreOptions(dict(opts, **{"merge-engine": "aggregation"})))

    with pytest.raises(OptionError, match="'s'"):
        make({"fields.s.aggregate-function": "sum"})
    with pytest.raises(OptionError, match="'i'"):
        make({"fields.i.aggregate-function": "bool_and"})
    with pytest.raises(OptionError, match="'s' of type VARCHAR .* it needs VARBINARY"):
        make({"fields.s.aggregate-function": "hll_sketch"})
    with pytest.raises(OptionError, match="not supported by lakelog"):
        make({"fields.s.aggregate-function": "avg"})
    with pytest.raises(OptionError):
        make({"fields.s.aggregate-function": "no_such_function"})
    with pytest.raises(OptionError, match="sequence field"):
        make({"sequence.field": "ts", "fields.ts.aggregate-function": "sum"})
    with pytest.raises(OptionError, match="missing_col"):
        make({"sequence.field": "missing_col"})
    with pytest.raises(OptionError, match="'s'"):
        make({"fields.default-aggregate-function": "sum"})


def test_aggregation_sequence_field_ordering() -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("v", "STRING"), ("ts", "INT")]
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": "listagg", "sequence.field": "ts"}
    rows = [(1, INS, (1, "c", 3)), (1, INS, (1, "a", 1)), (1, INS, (1, "b", 2))]
    assert run(cols, opts, rows)[1] == (INS, {"k": 1, "v": "a,b,c", "ts": 3})
    opts["sequence.field.sort-order"] = "descending"
    assert run(cols, opts, rows)[1] == (INS, {"k": 1, "v": "c,b,a", "ts": 1})


# --------------------------------------------------------------------------------------------------
# rowkind.field
# --------------------------------------------------------------------------------------------------


def test_rowkind_field_sets_each_rows_kind(tmp_path: Any) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", schema, primary_key=["k"], options={"bucket": "1", "rowkind.field": "op"}
    )
    t.write(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"], "op": ["+I", "+I", "+I"]}))
    t.write(pa.table({"k": [1, 2, 3], "v": ["a", "b2", "c"], "op": ["-D", "+U", "-U"]}))
    assert t.to_arrow().sort_by("k").to_pylist() == [{"k": 2, "v": "b2", "op": "+U"}]
    with pytest.raises(InvalidInputError, match=r"'op'.*\['X'\]"):
        t.write(pa.table({"k": [4, 5], "v": ["x", "y"], "op": ["+I", "X"]}))
    with pytest.raises(InvalidInputError, match=r"'op'.*\[None\]"):
        t.write(pa.table({"k": [4], "v": ["x"], "op": pa.array([None], pa.string())}))
    with pytest.raises(InvalidInputError, match="'op' must be a string column"):
        t.write(pa.table({"k": [4], "v": ["x"], "op": [1]}))
    assert t.to_arrow().num_rows == 1  # nothing of the refused batches was written


# --------------------------------------------------------------------------------------------------
# Randomized comparison with the row-at-a-time reference
# --------------------------------------------------------------------------------------------------


def random_value(rng: np.random.Generator, t: str, null_p: float = 0.25) -> Any:
    if rng.random() < null_p:
        return None
    base = t.split("(")[0].split(" ")[0]
    if base in ("INT", "BIGINT"):
        return int(rng.integers(-5, 6))
    if base == "TINYINT":
        return int(rng.integers(-128, 128))
    if base == "DOUBLE":
        return float(rng.normal() * 10.0 ** rng.integers(-3, 8))
    if base == "FLOAT":
        return float(np.float32(rng.normal() * 10.0 ** rng.integers(-3, 8)))
    if base == "DECIMAL":
        return Decimal(int(rng.integers(-999, 1000))).scaleb(-2)
    if base == "STRING":
        return str(rng.choice(["a", "b", "c", "a,b", "b,c,a", "", " ", "c,,d"]))
    if base == "BOOLEAN":
        return bool(rng.random() < 0.5)
    if base == "ARRAY<INT>":
        return [int(x) for x in rng.integers(0, 4, size=int(rng.integers(0, 4)))]
    if base == "ARRAY<ROW<i":  # ARRAY<ROW<i INT, s STRING>>: nested rows with repeated keys and nulls
        return [None if rng.random() < 0.15 else {
            "i": None if rng.random() < 0.05 else int(rng.integers(0, 4)),
            "s": None if rng.random() < 0.3 else str(rng.choice(["x", "y"]))}
            for _ in range(int(rng.integers(0, 4)))]
    if t.startswith(KEYTIME):  # removals, null and tied timestamps, "10" < "9" as strings
        chosen = rng.choice(list("wxyz"), size=int(rng.integers(0, 3)), replace=False)
        return [(str(k), None if rng.random() < 0.15 else {
            "v": str(rng.choice(["p", "q"])), "ts": None if rng.random() < 0.1 else str(rng.choice(["1", "10", "9"]))})
            for k in chosen]
    if base == "MAP<STRING,":
        chosen = rng.choice(list("wxyz"), size=int(rng.integers(0, 3)), replace=False)
        return [(str(k), int(rng.integers(0, 9))) for k in chosen]
    raise AssertionError(t)


def reference_sort(rows: list[Row], seq_idx: list[int], descending: bool) -> list[tuple[int, Row]]:
    def key(item: tuple[int, Row]) -> tuple[Any, ...]:
        seqno, row = item
        parts: list[Any] = [row[0]]
        for i in seq_idx:
            v = row[2][i]
            # nulls first in both orders (Paimon's sequence comparator)
            parts.append((0, 0) if v is None else (1, -v if descending else v))
        parts.append(seqno)
        return tuple(parts)

    return sorted(enumerate(rows), key=key)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list) and isinstance(b, list) and a and isinstance(a[0], tuple):
        return dict(a) == dict(b)
    return bool(a == b)


def compare(cols: Cols, options: dict[str, str], rows: list[Row],
            reference: Any, seq_idx: Optional[list[int]] = None) -> None:
    seq_idx = seq_idx or []
    descending = options.get("sequence.field.sort-order") == "descending"
    ordered = [r for _, r in reference_sort(rows, seq_idx, descending)]
    expected: dict[int, Any] = {}
    failed = False
    for key in sorted({r[0] for r in rows}):
        group = [(r[1], r[2]) for r in ordered if r[0] == key]
        try:
            expected[key] = reference(group)
        except ref.RetractNotSupported:
            failed = True
    if failed:
        with pytest.raises(InvalidInputError):
            run(cols, options, rows)
        return
    got = run(cols, options, rows)
    names = [n for n, _ in cols]
    for key, exp in expected.items():
        kind, values = got[key]
        if exp is None or exp[0] == D:
            assert kind == D, (key, values, exp)
            continue
        assert kind == INS, (key, values, exp)
        for n, v in zip(names, exp[1]):
            assert same(values[n], v), (key, n, values[n], v, [r for r in ordered if r[0] == key])


def random_rows(rng: np.random.Generator, cols: Cols, n: int, kinds: list[int], nkeys: int = 12,
                null_p: float = 0.25) -> list[Row]:
    rows = []
    for _ in range(n):
        k = int(rng.integers(0, nkeys))
        kind = int(rng.choice(kinds))
        rows.append((k, kind, (k,) + tuple(random_value(rng, t, null_p) for _, t in cols[1:])))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_random_deduplicate_and_first_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cols: Cols = [("k", "INT NOT NULL"), ("v", "STRING"), ("s", "INT")]
    rows = random_rows(rng, cols, 80, [INS, UA, UB, D])
    for ignore in (False, True):
        opts = {"ignore-delete": str(ignore).lower()}
        def dedup(g: Any, ignore: bool = ignore) -> Any:
            return ref.deduplicate(g, ignore)

        def first(g: Any, ignore: bool = ignore) -> Any:
            return ref.first_row(g, ignore)

        compare(cols, opts, rows, dedup)
        compare(cols, dict(opts, **{"sequence.field": "s"}), rows, dedup, [2])
        compare(cols, dict(opts, **{"merge-engine": "first-row"}), rows, first)


AGG_CASES = [
    ("INT", "sum"), ("TINYINT", "sum"), ("DOUBLE", "sum"), ("FLOAT", "sum"), ("DECIMAL(10, 2)", "sum"),
    ("INT", "product"), ("TINYINT", "product"), ("DOUBLE", "product"), ("FLOAT", "product"),
    ("DECIMAL(10, 2)", "product"), ("INT", "count"), ("INT", "max"), ("DOUBLE", "min"), ("STRING", "max"),
    ("STRING", "min"), ("DECIMAL(10, 2)", "max"), ("STRING", "last_value"), ("STRING", "last_non_null_value"),
    ("INT", "first_value"), ("INT", "first_non_null_value"), ("STRING", "listagg"), ("BOOLEAN", "bool_and"),
    ("BOOLEAN", "bool_or"), ("ARRAY<INT>", "collect"), ("MAP<STRING, INT>", "merge_map"),
    ("ARRAY<ROW<i INT, s STRING>>", "nested_update"), ("ARRAY<ROW<i INT, s STRING>>", "nested_partial_update"),
    (KEYTIME, "merge_map_with_keytime"),
]


def _agg_opts(func: str, extra: dict[str, str]) -> dict[str, Any]:
    return {"distinct": extra.get("fields.v.distinct") == "true",
            "ignore_retract": extra.get("fields.v.ignore-retract") == "true",
            "delimiter": extra.get("fields.v.list-agg-delimiter", ","), "precision": 10, "scale": 2,
            "nested_key": [k for k in extra.get("fields.v.nested-key", "").split(",") if k],
            "count_limit": int(extra["fields.v.count-limit"]) if "fields.v.count-limit" in extra else None}


@pytest.mark.parametrize("col_type,func", AGG_CASES)
@pytest.mark.parametrize("variant",
                         ["insert-only", "retract", "remove-on-delete", "ignore-retract", "not-null"])
def test_random_aggregation(col_type: str, func: str, variant: str) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{col_type}/{func}/{variant}".encode()))
    not_null = variant == "not-null"
    cols: Cols = [("k", "INT NOT NULL"), ("v", col_type + (" NOT NULL" if not_null else "")), ("w", "INT"),
                  ("s", "INT")]
    extra: dict[str, str] = {}
    if func in ("listagg", "collect") and rng.random() < 0.5:
        extra["fields.v.distinct"] = "true"
    if variant == "ignore-retract":
        extra["fields.v.ignore-retract"] = "true"
    kinds = {"insert-only": [INS, UA], "remove-on-delete": [INS, UA, UA, D]}.get(variant,
                                                                              [INS, UA, UA, UB, D])
    for round_ in range(4):
        if func == "nested_update":  # each round another shape: appended, keyed, keyed and limited, limited
            extra.pop("fields.v.nested-key", None)
            extra.pop("fields.v.count-limit", None)
            if round_ in (1, 2):
                extra["fields.v.nested-key"] = "i"
            if round_ in (2, 3):
                extra["fields.v.count-limit"] = str(int(rng.integers(1, 4)))
        if func == "nested_partial_update":
            extra["fields.v.nested-key"] = "i"
        rows = random_rows(rng, cols, 60, kinds, null_p=0.0 if not_null else 0.25)
        if func == "product" and col_type in ("INT", "TINYINT"):
            rows = [(k, kind, (v[0], v[1] if v[1] != 0 else 1) + v[2:]) for k, kind, v in rows]
        options = {"merge-engine": "aggregation", "fields.v.aggregate-function": func,
                   "fields.w.aggregate-function": "sum", **extra}
        if variant in ("remove-on-delete", "not-null"):
            options["aggregation.remove-record-on-delete"] = "true"
        seq_idx: list[int] = []
        if round_ % 2:
            options["sequence.field"] = "s"
            seq_idx = [3]
        root = col_type.split("(")[0].split("<")[0]
        fields = [(n, t.split("(")[0].split("<")[0].split(" ")[0], "NOT NULL" not in t and n != "k")
                  for n, t in cols]

        remove = "aggregation.remove-record-on-delete" in options
        last = "last_value" if seq_idx else "last_non_null_value"

        def reference(group: list[tuple[int, tuple[Any, ...]]], root: str = root, last: str = last,
                      fields: Any = fields, remove: bool = remove) -> Any:
            aggs = [ref.make_agg("primary-key", "INT", {}), ref.make_agg(func, root, _agg_opts(func, extra)),
                    ref.make_agg("sum", "INT", {}), ref.make_agg(last, "INT", {})]
            return ref.Aggregation(fields, aggs, remove).merge(group)

        compare(cols, options, rows, reference, seq_idx)


PU_COLS: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "STRING"), ("g1", "INT"), ("c", "INT"),
                 ("d", "ARRAY<INT>"), ("g2", "INT"), ("g3", "INT"), ("e", "STRING")]

PU_GROUP_AGGS = [None, "sum", "first_value", "first_non_null_value", "last_non_null_value", "last_value",
                 "max", "collect", "listagg", "count", "product", "merge_map"]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["plain", "ignore-delete", "remove-on-delete"])
def test_random_partial_update_without_groups(seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    cols: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("b", "STRING"), ("n", "INT NOT NULL"), ("s", "INT")]
    kinds = [INS, UA] if mode == "plain" else [INS, UA, UB, D]
    options = {"merge-engine": "partial-update"}
    if mode == "ignore-delete":
        options["ignore-delete"] = "true"
    if mode == "remove-on-delete":
        options["partial-update.remove-record-on-delete"] = "true"
    fields = [(n, t.split(" ")[0], "NOT NULL" not in t) for n, t in cols]
    for round_ in range(3):
        rows = random_rows(rng, cols, 60, kinds)
        rows = [(k, kind, v[:3] + (v[3] if v[3] is not None else 0,) + v[4:]) for k, kind, v in rows]
        opts = dict(options)
        seq_idx: list[int] = []
        if round_ == 1:
            opts["sequence.field"] = "s"
            seq_idx = [4]

        def reference(group: list[tuple[int, tuple[Any, ...]]]) -> Any:
            return ref.PartialUpdate(fields, {}, {}, mode == "ignore-delete", mode == "remove-on-delete",
                                     set()).merge(group)

        compare(cols, opts, rows, reference, seq_idx)


@pytest.mark.parametrize("seed", range(2 * len(PU_GROUP_AGGS)))
def test_random_partial_update_sequence_groups(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    agg_c = PU_GROUP_AGGS[seed % len(PU_GROUP_AGGS)]
    cols = list(PU_COLS)
    if agg_c == "merge_map":
        cols[4] = ("c", "MAP<STRING, INT>")
    elif agg_c == "listagg":
        cols[4] = ("c", "STRING")
    elif agg_c == "collect":
        cols[4] = ("c", "ARRAY<INT>")
    names = [n for n, _ in cols]
    options = {"merge-engine": "partial-update", "fields.g1.sequence-group": "a,b",
               "fields.g2,g3.sequence-group": "c,d"}
    fields = [(n, t.split("(")[0].split("<")[0].split(" ")[0], "NOT NULL" not in t) for n, t in cols]
    if agg_c is not None:
        options["fields.c.aggregate-function"] = agg_c
    if seed % 3 == 0:
        options["fields.d.aggregate-function"] = "collect"
    if seed % 2 == 0:
        options["partial-update.remove-record-on-sequence-group"] = "g1"
    ignore = seed % 5 == 4 and "partial-update.remove-record-on-sequence-group" not in options
    if ignore:
        options["ignore-delete"] = "true"
    ignore_retract = seed >= len(PU_GROUP_AGGS)
    if ignore_retract:
        options["fields.c.ignore-retract"] = "true"
    for round_ in range(6):
        kinds = [INS, UA] if round_ % 2 else [INS, UA, UA, UB, D]
        rows = random_rows(rng, cols, 70, kinds, nkeys=8, null_p=0.3)
        # small sequence values: many ties and out-of-order rows
        rows = [(k, kind, tuple((int(rng.integers(0, 4)) if rng.random() > 0.2 else None)
                                if names[i] in ("g1", "g2", "g3") else x for i, x in enumerate(v)))
                for k, kind, v in rows]
        if agg_c in ("product",):
            rows = [(k, kind, tuple((1 if x == 0 else x) if names[i] == "c" else x for i, x in enumerate(v)))
                    for k, kind, v in rows]

        def reference(group: list[tuple[int, tuple[Any, ...]]]) -> Any:
            idx = {n: i for i, n in enumerate(names)}
            g1 = (idx["g1"],)
            g2 = (idx["g2"], idx["g3"])
            groups = {idx["a"]: g1, idx["b"]: g1, idx["g1"]: g1, idx["c"]: g2, idx["d"]: g2, idx["g2"]: g2,
                      idx["g3"]: g2}
            aggs = {0: ref.make_agg("primary-key", "INT", {})}
            if agg_c is not None:
                aggs[idx["c"]] = ref.make_agg(agg_c, fields[idx["c"]][1],
                                              {"delimiter": ",", "ignore_retract": ignore_retract})
            if "fields.d.aggregate-function" in options:
                aggs[idx["d"]] = ref.make_agg("collect", "ARRAY", {})
            partial = {idx["g1"]} if "partial-update.remove-record-on-sequence-group" in options else set()
            return ref.PartialUpdate(fields, groups, aggs, ignore, False, partial).merge(group)

        compare(cols, options, rows, reference)


@pytest.mark.parametrize("func", ["first_value", "first_non_null_value", "listagg", "last_non_null_value",
                                  "count", "collect", "merge_map", "merge_map_with_keytime"])
def test_partial_update_older_rows_first(func: str) -> None:
    """A retraction advances the group's sequence, so the first aggregated row is an older one
    (aggReversed on an uninitialized aggregator); blank strings exercise listagg's edge cases."""
    ctype = {"listagg": "STRING", "count": "INT", "collect": "ARRAY<INT>", "merge_map": "MAP<STRING, INT>",
             "merge_map_with_keytime": KEYTIME}
    cols: Cols = [("k", "INT NOT NULL"), ("c", ctype.get(func, "STRING")), ("g", "INT")]
    options = {"merge-engine": "partial-update", "fields.g.sequence-group": "c",
               "fields.c.aggregate-function": func, "fields.c.ignore-retract": "true"}
    fields = [("k", "INT", False), ("c", cols[1][1].split("<")[0], True), ("g", "INT", True)]
    rng = np.random.default_rng(11)
    for _ in range(40):
        rows = []
        for k in rng.integers(0, 5, size=30).tolist():
            value = (random_value(rng, cols[1][1]) if func != "listagg"
                     else rng.choice([None, "", " ", "x", "y"]))
            rows.append((k, int(rng.choice([INS, INS, UA, UB, D])), (k, value, int(rng.integers(0, 4)))))
        compare(cols, options, rows, lambda g: ref.PartialUpdate(
            fields, {1: (2,), 2: (2,)},
            {0: ref.make_agg("primary-key", "INT", {}),
             1: ref.make_agg(func, fields[1][1], {"ignore_retract": True})},
            False, False, set()).merge(g))


@pytest.mark.parametrize("mode", ["remove-on-group", "ignore-delete", "retract"])
def test_partial_update_not_null_fields_and_first_retract(mode: str) -> None:
    cols: Cols = [("k", "INT NOT NULL"), ("a", "INT"), ("g", "INT NOT NULL"), ("n", "INT NOT NULL"),
                  ("s", "INT NOT NULL"), ("h", "INT")]
    options = {"merge-engine": "partial-update", "fields.g.sequence-group": "a,s",
               "fields.h.sequence-group": "n", "fields.s.aggregate-function": "sum"}
    if mode == "remove-on-group":
        options["partial-update.remove-record-on-sequence-group"] = "g"
    if mode == "ignore-delete":
        options["ignore-delete"] = "true"
    fields = [("k", "INT", False), ("a", "INT", True), ("g", "INT", False), ("n", "INT", False),
              ("s", "INT", False), ("h", "INT", True)]
    groups = {1: (2,), 2: (2,), 4: (2,), 3: (5,), 5: (5,)}
    rng = np.random.default_rng(7)
    for _ in range(10):
        rows = [(k, int(rng.choice([INS, UA, UB, D])), (k, random_value(rng, "INT"), int(rng.integers(0, 4)),
                                                      int(rng.integers(0, 3)), int(rng.integers(0, 5)),
                                                      random_value(rng, "INT")))
                for k in rng.integers(0, 6, size=50).tolist()]
        compare(cols, options, rows, lambda g: ref.PartialUpdate(
            fields, groups, {0: ref.make_agg("primary-key", "INT", {}), 4: ref.make_agg("sum", "INT", {})},
            mode == "ignore-delete", False, {2} if mode == "remove-on-group" else set()).merge(g))


# --------------------------------------------------------------------------------------------------
# Performance
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("func", ["sum", "last_non_null_value"])
def test_many_rows_merge_to_one_row_per_key(func: str) -> None:
    # the CPU time of 1M rows is a benchmark (benchmarks/bench_hot_paths.py --only merge)
    rng = np.random.default_rng(0)
    n = 200_000
    keys = np.sort(rng.integers(0, 60_000, size=n))
    vals = rng.integers(0, 1000, size=n).astype(np.int64)
    mask = rng.random(n) < 0.1
    table = pa.table({
        KEY: pa.array(keys), "_SEQUENCE_NUMBER": pa.array(np.arange(n, dtype=np.int64)),
        "_VALUE_KIND": pa.array(np.zeros(n, dtype=np.int8)), "k": pa.array(keys),
        "v": pa.array(vals, mask=mask), "d": pa.array(vals.astype(np.float64), mask=mask)})
    cols: Cols = [("k", "BIGINT NOT NULL"), ("v", "BIGINT"), ("d", "DOUBLE")]
    opts = {"merge-engine": "aggregation", "fields.default-aggregate-function": func}
    out = merge_function(make_schema(cols, opts), CoreOptions(opts)).merge(table, [KEY])
    uniq, first = np.unique(keys, return_index=True)
    assert out.column("k").to_numpy().tolist() == uniq.tolist()
    valid = ~mask
    if func == "sum":
        idx = np.searchsorted(uniq, keys)
        sums = np.bincount(idx[valid], weights=vals[valid], minlength=len(uniq)).astype(np.int64)
        has = np.bincount(idx[valid], minlength=len(uniq)) > 0
        expected = [int(s) if h else None for s, h in zip(sums, has)]
    else:
        last: dict[int, int] = {}
        for k, v, ok in zip(keys.tolist(), vals.tolist(), valid.tolist()):
            if ok:
                last[k] = v
        expected = [last.get(k) for k in uniq.tolist()]
    assert out.column("v").to_pylist() == expected


def test_nested_update_options_are_checked_at_create() -> None:
    def make(col_type: str, **opts: str) -> None:
        cols: Cols = [("k", "INT NOT NULL"), ("v", col_type)]
        options = {"merge-engine": "aggregation", "fields.v.aggregate-function": "nested_update", **opts}
        merge_function(make_schema(cols, options), CoreOptions(options))

    make("ARRAY<ROW<i INT, s STRING>>", **{"fields.v.nested-key": "i,s", "fields.v.count-limit": "3"})
    with pytest.raises(OptionError, match="'v' of type ARRAY<INT> .* it needs ARRAY<ROW<...>>"):
        make("ARRAY<INT>")
    with pytest.raises(OptionError, match="'v' of type MAP"):
        make("MAP<STRING, INT>")
    with pytest.raises(OptionError, match=r"'fields.v.nested-key' names \['x'\], not fields of the nested rows"):
        make("ARRAY<ROW<i INT, s STRING>>", **{"fields.v.nested-key": "i,x"})
    with pytest.raises(OptionError, match="count-limit"):
        make("ARRAY<ROW<i INT, s STRING>>", **{"fields.v.count-limit": "0"})
    cols: Cols = [("k", "INT NOT NULL"), ("v", "ARRAY<ROW<i INT, s STRING>>")]
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": "nested_partial_update"}
    with pytest.raises(OptionError, match="'nested_partial_update' of field 'v' needs option 'fields.v.nested-key'"):
        merge_function(make_schema(cols, options), CoreOptions(options))
