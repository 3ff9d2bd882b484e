"""What Flink DDL needs from the connector: exact types, column moves, Flink's schema options,
validation at CREATE/ALTER time, lookups over nested columns. No Flink here."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError, SchemaError
from lakelog.connector.format.schema_changes import MoveColumn, SetOption
from lakelog.connector.format.types import DataField, parse_type_string
from lakelog.connector.lsm.diff import semi_join


def _fields(*specs: tuple[str, str]) -> list[DataField]:
    return [DataField(0, n, parse_type_string(t)) for n, t in specs]


def test_tables_keep_exact_types_comments_and_paimons_field_ids(tmp_path: Path) -> None:
    cat = lakelog.Catalog(str(tmp_path))
    t = cat.create_table(
        "db.t",
        [
            *_fields(("v", "VARCHAR(10)"), ("r", "ROW<x INT, y CHAR(2)>")),
            DataField(0, "k", parse_type_string("INT"), "key"),
        ],
        primary_key=["k"],
    )
    doc = json.loads(Path(t.path, "schema", "schema-0").read_text())
    assert [f["type"] for f in doc["fields"]][0] == "VARCHAR(10)"
    assert [f["id"] for f in doc["fields"]] == [0, 1, 4] and doc["highestFieldId"] == 4
    assert [f["id"] for f in doc["fields"][1]["type"]["fields"]] == [2, 3]
    assert doc["fields"][2] == {"id": 4, "name": "k", "type": "INT NOT NULL", "description": "key"}


def test_a_primary_key_given_as_option_gets_a_fixed_bucket(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t",
        pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())]),
        options={"primary-key": "id"},
    )
    assert t.primary_keys == ["id"] and t.options["bucket"] == "1"


def test_columns_move_first_or_after_another(tmp_path: Path) -> None:
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", pa.schema([("a", pa.int32()), ("b", pa.int32()), ("c", pa.int32())])
    )
    t.alter(MoveColumn("c", first=True))
    assert t.schema.names == ["c", "a", "b"]
    t.alter(MoveColumn("c", after="b"))
    assert t.schema.names == ["a", "b", "c"]
    with pytest.raises(SchemaError, match="after itself"):
        t.alter(MoveColumn("c", after="c"))


def test_flinks_schema_options_are_stored(tmp_path: Path) -> None:
    opts = {"schema.1.name": "twice", "schema.1.expr": "`a` * 2", "schema.watermark.0.rowtime": "ts"}
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", pa.schema([("a", pa.int32())]), options=opts)
    assert {k: t.options[k] for k in opts} == opts


def test_an_aggregate_function_that_does_not_fit_fails_at_create_and_alter(tmp_path: Path) -> None:
    """Issue 13: 'sum' on a STRING column passed CREATE TABLE and failed inside the INSERT job."""
    cat = lakelog.Catalog(str(tmp_path))
    schema = pa.schema([pa.field("k", pa.int32(), False), ("s", pa.string()), ("n", pa.int64())])
    agg = {"merge-engine": "aggregation"}
    with pytest.raises(OptionError, match="'sum' does not fit field 's'"):
        cat.create_table(
            "db.bad", schema, primary_key=["k"], options={**agg, "fields.s.aggregate-function": "sum"}
        )
    assert not cat.table_exists("db.bad")
    t = cat.create_table("db.t", schema, primary_key=["k"], options=agg)
    with pytest.raises(OptionError, match="'sum' does not fit field 's'"):
        t.alter(SetOption("fields.s.aggregate-function", "sum"))
    assert "fields.s.aggregate-function" not in t.refresh().options


def test_semi_join_keeps_nested_columns_and_order() -> None:
    rows = pa.table({"k": [3, 1, 2], "tags": [["a"], None, ["b", "c"]]})
    got = semi_join(rows, pa.table({"k": [2, 3]}), ["k"])
    assert got.to_pylist() == [{"k": 3, "tags": ["a"]}, {"k": 2, "tags": ["b", "c"]}]
