"""Paimon data types: JSON form, SQL strings and the Arrow mapping."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakelog.connector.errors import SchemaError
from lakelog.connector.format.types import (
    MAX_LENGTH,
    DataField,
    DataType,
    FieldIdCounter,
    field_from_json,
    field_to_json,
    fields_from_arrow_schema,
    fields_to_arrow_schema,
    from_arrow_type,
    highest_field_id,
    parse_type,
    reassign_field_ids,
    to_arrow_type,
    type_to_json,
    type_to_string,
)

from .conftest import requires_pypaimon

ATOMIC_STRINGS = [
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT NOT NULL",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(10, 2)",
    "DECIMAL(38, 0) NOT NULL",
    "CHAR(3)",
    "VARCHAR(10)",
    "STRING",
    "STRING NOT NULL",
    "BINARY(4)",
    "VARBINARY(7)",
    "BYTES",
    "DATE",
    "TIME(0)",
    "TIME(3)",
    "TIMESTAMP(0)",
    "TIMESTAMP(3)",
    "TIMESTAMP(6) NOT NULL",
    "TIMESTAMP(9)",
    "TIMESTAMP(3) WITH LOCAL TIME ZONE",
    "TIMESTAMP(6) WITH LOCAL TIME ZONE NOT NULL",
]


@pytest.mark.parametrize("text", ATOMIC_STRINGS)
def test_atomic_round_trip(text: str) -> None:
    t = parse_type(text)
    assert type_to_json(t) == text
    assert parse_type(type_to_json(t)) == t


def test_atomic_parse_details() -> None:
    assert parse_type("STRING") == DataType("VARCHAR", length=MAX_LENGTH)
    assert parse_type("BYTES") == DataType("VARBINARY", length=MAX_LENGTH)
    assert parse_type("BIGINT NOT NULL") == DataType("BIGINT", nullable=False)
    assert parse_type("DECIMAL(10, 2)") == DataType("DECIMAL", precision=10, scale=2)
    assert parse_type("TIMESTAMP(3) WITH LOCAL TIME ZONE") == DataType("TIMESTAMP_LTZ", precision=3)
    # other spellings Paimon and pypaimon accept
    assert parse_type("TIMESTAMP_LTZ(6)") == DataType("TIMESTAMP_LTZ", precision=6)
    assert parse_type("INTEGER") == DataType("INT")
    assert parse_type("int not null") == DataType("INT", nullable=False)
    assert parse_type("DECIMAL") == DataType("DECIMAL", precision=10, scale=0)
    assert parse_type("NUMERIC(5)") == DataType("DECIMAL", precision=5, scale=0)
    assert parse_type("TIMESTAMP") == DataType("TIMESTAMP", precision=6)
    assert parse_type("TIMESTAMP(3) WITHOUT TIME ZONE") == DataType("TIMESTAMP", precision=3)
    assert parse_type("TIME") == DataType("TIME", precision=0)
    assert parse_type("VARCHAR") == DataType("VARCHAR", length=1)
    assert parse_type("DOUBLE PRECISION") == DataType("DOUBLE")
    assert parse_type("STRING NULL") == DataType("VARCHAR", length=MAX_LENGTH)
    # the canonical output spelling
    assert type_to_json(parse_type("TIMESTAMP_LTZ(6)")) == "TIMESTAMP(6) WITH LOCAL TIME ZONE"
    assert type_to_json(parse_type("VARCHAR(2147483647)")) == "STRING"


def test_nested_sql_strings() -> None:
    t = parse_type("ARRAY<MAP<STRING NOT NULL, ARRAY<INT>>> NOT NULL")
    assert t.root == "ARRAY" and not t.nullable
    assert t.element is not None and t.element.root == "MAP"
    assert type_to_string(t) == "ARRAY<MAP<STRING NOT NULL, ARRAY<INT>>> NOT NULL"
    row = parse_type("ROW<`a` INT, b STRING 'the b', `c``d` ARRAY<BIGINT>>")
    assert [f.name for f in row.fields or ()] == ["a", "b", "c`d"]
    assert (row.fields or ())[1].description == "the b"
    assert parse_type(type_to_string(row)) == row
    assert parse_type("MULTISET<STRING>").root == "MULTISET"
    # pypaimon's str() form of a row
    assert parse_type("ROW<x: INT, y: STRING>").fields is not None


@pytest.mark.parametrize(
    "bad",
    ["", "FOO", "DECIMAL(39, 0)", "DECIMAL(5, 6)", "TIMESTAMP(10)", "VARCHAR(x)", "ARRAY<INT", "INT INT",
     "TIMESTAMP WITH TIME ZONE", "BLOB", "VARIANT"],
)
def test_bad_type_strings(bad: str) -> None:
    with pytest.raises(SchemaError):
        parse_type(bad)


def test_nested_json_shapes_match_paimon() -> None:
    arr = {"type": "ARRAY NOT NULL", "element": "INT", "nullable": False}
    assert type_to_json(parse_type(arr)) == arr
    mp = {"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT", "nullable": True}
    assert type_to_json(parse_type(mp)) == mp
    ms = {"type": "MULTISET", "element": "STRING", "nullable": True}
    assert type_to_json(parse_type(ms)) == ms
    row = {
        "type": "ROW",
        "fields": [
            {"id": 3, "name": "x", "type": "INT"},
            {"id": 4, "name": "y", "type": "STRING NOT NULL", "description": "why"},
        ],
        "nullable": True,
    }
    assert type_to_json(parse_type(row)) == row
    # Java Paimon writes no "nullable" member; nullability comes from the type string
    assert parse_type({"type": "ARRAY NOT NULL", "element": "INT"}) == DataType(
        "ARRAY", nullable=False, element=DataType("INT")
    )
    assert parse_type({"type": "MAP", "key": "INT", "value": "INT"}).nullable
    # a nested type given as one SQL string
    assert parse_type({"type": "ARRAY<INT>"}) == DataType("ARRAY", element=DataType("INT"))


def test_field_json() -> None:
    f = field_from_json({"id": 7, "name": "amount", "type": "DECIMAL(10, 2)", "description": "money"})
    assert f == DataField(7, "amount", DataType("DECIMAL", precision=10, scale=2), "money")
    assert field_to_json(f) == {"id": 7, "name": "amount", "type": "DECIMAL(10, 2)", "description": "money"}
    assert "description" not in field_to_json(DataField(1, "a", DataType("INT")))
    with pytest.raises(SchemaError, match="amount"):
        field_from_json({"id": 1, "name": "amount", "type": "NOPE"})
    with pytest.raises(SchemaError):
        field_from_json({"name": "x", "type": "INT"})


# ---- Arrow ------------------------------------------------------------------------------------------

ARROW_PAIRS = [
    (pa.bool_(), "BOOLEAN"),
    (pa.int8(), "TINYINT"),
    (pa.int16(), "SMALLINT"),
    (pa.int32(), "INT"),
    (pa.int64(), "BIGINT"),
    (pa.float32(), "FLOAT"),
    (pa.float64(), "DOUBLE"),
    (pa.decimal128(10, 2), "DECIMAL(10, 2)"),
    (pa.string(), "STRING"),
    (pa.binary(), "BYTES"),
    (pa.date32(), "DATE"),
    (pa.timestamp("s"), "TIMESTAMP(0)"),
    (pa.timestamp("ms"), "TIMESTAMP(3)"),
    (pa.timestamp("us"), "TIMESTAMP(6)"),
    (pa.timestamp("ns"), "TIMESTAMP(9)"),
    (pa.timestamp("ms", tz="UTC"), "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
    (pa.timestamp("us", tz="UTC"), "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
]


@pytest.mark.parametrize("arrow,text", ARROW_PAIRS)
def test_arrow_both_ways(arrow: pa.DataType, text: str) -> None:
    t = from_arrow_type(arrow)
    assert type_to_json(t) == text
    assert to_arrow_type(t) == arrow


@pytest.mark.parametrize(
    "arrow,text",
    [
        (pa.large_string(), "STRING"),
        (pa.large_binary(), "BYTES"),
        (pa.binary(4), "BINARY(4)"),
        (pa.time32("s"), "TIME(0)"),
        (pa.time32("ms"), "TIME(3)"),
        (pa.time64("us"), "TIME(6)"),
        (pa.time64("ns"), "TIME(9)"),
        (pa.timestamp("us", tz="Europe/Paris"), "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        (pa.uint8(), "SMALLINT"),
        (pa.uint16(), "INT"),
        (pa.uint32(), "BIGINT"),
        (pa.date64(), "DATE"),
        (pa.dictionary(pa.int32(), pa.string()), "STRING"),
        (pa.large_list(pa.int32()), None),
    ],
)
def test_arrow_inbound_only(arrow: pa.DataType, text: str | None) -> None:
    t = from_arrow_type(arrow)
    if text is not None:
        assert type_to_json(t) == text
    # the stored Arrow type holds every value of the input type
    assert to_arrow_type(t) is not None


def test_storage_types_follow_paimon_parquet_layout() -> None:
    assert to_arrow_type(parse_type("BINARY(4)")) == pa.binary()
    assert to_arrow_type(parse_type("CHAR(3)")) == pa.string()
    assert to_arrow_type(parse_type("TIME(6)")) == pa.time32("ms")
    assert to_arrow_type(parse_type("MULTISET<STRING>")) == pa.map_(
        pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int32(), nullable=False)
    )


def test_nested_arrow_round_trip() -> None:
    arrow = pa.struct(
        [
            pa.field("x", pa.int32()),
            pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
            pa.field("attrs", pa.map_(pa.string(), pa.float64()), nullable=False),
            pa.field("inner", pa.struct([pa.field("q", pa.decimal128(5, 1))])),
        ]
    )
    t = from_arrow_type(arrow, nullable=False)
    assert not t.nullable and t.root == "ROW"
    assert to_arrow_type(t) == arrow
    tags = (t.fields or ())[1].type
    assert tags.element is not None and not tags.element.nullable
    attrs = (t.fields or ())[2]
    assert not attrs.type.nullable and attrs.type.key is not None and not attrs.type.key.nullable


def test_nested_field_ids_like_paimon() -> None:
    # top-level columns take the next id first; nested fields follow, children before parent
    schema = pa.schema(
        [
            pa.field("a", pa.int64()),
            pa.field("r", pa.struct([("x", pa.int32()), ("z", pa.struct([("q", pa.float64())]))])),
            pa.field("b", pa.int32()),
        ]
    )
    fields = fields_from_arrow_schema(schema)
    assert [f.id for f in fields] == [0, 1, 5]
    r = fields[1].type
    assert [(f.name, f.id) for f in r.fields or ()] == [("x", 2), ("z", 4)]
    z = (r.fields or ())[1].type
    assert [(f.name, f.id) for f in z.fields or ()] == [("q", 3)]
    assert highest_field_id(fields) == 5
    assert fields_to_arrow_schema(fields) == schema
    # reassigning from a counter keeps the same order
    again = reassign_field_ids(r, FieldIdCounter(10))
    assert [f.id for f in again.fields or ()] == [11, 13]


def test_highest_field_id_rejects_duplicates() -> None:
    row = DataType("ROW", fields=(DataField(0, "x", DataType("INT")),))
    with pytest.raises(SchemaError, match="field id 0"):
        highest_field_id([DataField(0, "a", row)])
    assert highest_field_id([]) == -1


@pytest.mark.parametrize(
    "arrow",
    [
        pa.uint64(),
        pa.duration("s"),
        pa.month_day_nano_interval(),
        pa.null(),
        pa.float16(),
        pa.dense_union([pa.field("a", pa.int32())]),
        pa.decimal256(50, 2),
        pa.dictionary(pa.int8(), pa.list_(pa.int32())),
    ],
)
def test_unsupported_arrow_types_name_the_column(arrow: pa.DataType) -> None:
    with pytest.raises(SchemaError, match="'col'"):
        from_arrow_type(arrow, column="col")


def test_unsupported_nested_type_names_the_path() -> None:
    with pytest.raises(SchemaError, match="'payload.inner.d'"):
        fields_from_arrow_schema(
            pa.schema([pa.field("payload", pa.struct([("inner", pa.struct([("d", pa.duration("ms"))]))]))])
        )


def test_description_metadata() -> None:
    schema = pa.schema([pa.field("a", pa.int32(), metadata={"description": "the a"})])
    assert fields_from_arrow_schema(schema)[0].description == "the a"


def test_arrow_values_survive_the_mapping() -> None:
    # a decimal and a nested value cast to the stored Arrow type keep their values
    arr = pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2))
    assert arr.cast(to_arrow_type(from_arrow_type(arr.type))).to_pylist() == arr.to_pylist()
    lst = pa.array([[1, 2], None, []], pa.large_list(pa.int16()))
    assert lst.cast(to_arrow_type(from_arrow_type(lst.type))).to_pylist() == lst.to_pylist()


# ---- pypaimon as an oracle -------------------------------------------------------------------------


ORACLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("b", pa.bool_()),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(10, 2)),
        pa.field("dec38", pa.decimal128(38, 6)),
        pa.field("s", pa.string()),
        pa.field("ls", pa.large_string()),
        pa.field("bin", pa.binary()),
        pa.field("fb", pa.binary(4)),
        pa.field("d", pa.date32()),
        pa.field("ts0", pa.timestamp("s")),
        pa.field("ts3", pa.timestamp("ms")),
        pa.field("ts6", pa.timestamp("us")),
        pa.field("ts9", pa.timestamp("ns")),
        pa.field("tsz", pa.timestamp("us", tz="UTC")),
        pa.field("arr", pa.list_(pa.int32())),
        pa.field("arrnn", pa.list_(pa.field("item", pa.string(), nullable=False))),
        pa.field("m", pa.map_(pa.string(), pa.int64())),
        pa.field(
            "r",
            pa.struct([("x", pa.int32()), pa.field("y", pa.string(), nullable=False),
                       ("z", pa.struct([("q", pa.float64())]))]),
        ),
        pa.field("rnn", pa.struct([("x", pa.int32())]), nullable=False),
        pa.field("arr_of_rows", pa.list_(pa.struct([("k", pa.string()), ("v", pa.int64())]))),
        pa.field("last", pa.int32()),
    ]
)


def _pypaimon_schema_file(tmp_path: Path) -> str:
    from pypaimon import CatalogFactory, Schema

    wh = str(tmp_path / "wh")
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", True)
    schema = Schema.from_pyarrow_schema(ORACLE_SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    cat.create_table("db.t", schema, False)
    return str(Path(wh) / "db.db" / "t" / "schema" / "schema-0")


def _canonical(type_json: object) -> object:
    """pypaimon spells TIMESTAMP WITH LOCAL TIME ZONE as TIMESTAMP_LTZ(p); Java Paimon (and lakelog)
    as TIMESTAMP(p) WITH LOCAL TIME ZONE. Both parse everywhere."""
    text = json.dumps(type_json)
    import re

    return json.loads(re.sub(r"TIMESTAMP_LTZ\((\d)\)", r"TIMESTAMP(\1) WITH LOCAL TIME ZONE", text))


@requires_pypaimon
def test_pypaimon_field_types_round_trip(tmp_path: Path) -> None:
    doc = json.loads(Path(_pypaimon_schema_file(tmp_path)).read_text())
    for raw in doc["fields"]:
        f = field_from_json(raw)
        assert field_to_json(f) == _canonical(raw), raw["name"]


@requires_pypaimon
def test_arrow_mapping_matches_pypaimon(tmp_path: Path) -> None:
    doc = json.loads(Path(_pypaimon_schema_file(tmp_path)).read_text())
    theirs = [field_from_json(f) for f in doc["fields"]]
    ours = fields_from_arrow_schema(ORACLE_SCHEMA)
    # identical ids and types; pypaimon forces the primary key NOT NULL, as lakelog's create does
    assert [(f.id, f.name) for f in ours] == [(f.id, f.name) for f in theirs]
    for a, b in zip(ours, theirs):
        assert a.type == b.type, a.name
    assert highest_field_id(ours) == doc["highestFieldId"]
