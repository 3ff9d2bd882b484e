"""Table schemas, schema files and schema evolution."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import (
    CorruptFileError,
    MissingFileError,
    OptionError,
    SchemaError,
    TableAlreadyExistsError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.options import MergeEngine
from lakelog.connector.format.schema import SchemaExistsError, TableSchema
from lakelog.connector.format.schema_changes import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SetOption,
    UpdateColumnComment,
    UpdateColumnType,
    UpdateComment,
    apply_changes,
    can_widen,
)
from lakelog.connector.format.schema_evolution import evolve_table, physical_names
from lakelog.connector.format.schema_manager import SchemaManager
from lakelog.connector.format.types import DataType, parse_type

from .conftest import requires_pypaimon

ORDERS = pa.schema(
    [
        pa.field("dt", pa.string()),
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)


def pk_schema(**options: str) -> TableSchema:
    return TableSchema.create(
        ORDERS, partition_keys=["dt"], primary_keys=["dt", "id"], options={"bucket": "2", **options}
    )


# ---- create -----------------------------------------------------------------------------------------


def test_create_basics() -> None:
    s = pk_schema()
    assert s.version == 3 and s.id == 0
    assert s.field_names == ["dt", "id", "name", "qty", "price"]
    assert [f.id for f in s.fields] == [0, 1, 2, 3, 4]
    assert s.highest_field_id == 4
    assert s.field("dt").type == parse_type("STRING NOT NULL")  # primary-key columns become NOT NULL
    assert s.field("id").type == parse_type("BIGINT NOT NULL")
    assert s.field("name").type.nullable
    assert s.trimmed_primary_keys == ["id"]
    assert s.bucket_keys == ["id"]
    assert s.core_options.bucket == 2
    assert s.arrow_schema() == pa.schema(
        [
            pa.field("dt", pa.string(), nullable=False),
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("qty", pa.int32()),
            pa.field("price", pa.decimal128(10, 2)),
        ]
    )
    assert s.time_millis > 0
    assert pickle.loads(pickle.dumps(s)) == s


def test_create_keys_from_options() -> None:
    s = TableSchema.create(ORDERS, options={"primary-key": "dt,id", "partition": "dt", "bucket": "1"})
    assert s.primary_keys == ["dt", "id"] and s.partition_keys == ["dt"]
    assert "primary-key" not in s.options and "partition" not in s.options
    with pytest.raises(SchemaError, match="primary key"):
        TableSchema.create(ORDERS, primary_keys=["id"], options={"primary-key": "id"})


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        ({"primary_keys": ["id", "nope"]}, ["'nope'", "primary key"]),
        ({"partition_keys": ["day"]}, ["'day'", "partition"]),
        ({"primary_keys": ["dt"], "partition_keys": ["dt"]}, ["must not equal the partition keys"]),
        ({"primary_keys": ["id", "id"]}, ["more than once"]),
    ],
)
def test_create_key_errors(kwargs: dict, fragments: list[str]) -> None:
    with pytest.raises(SchemaError) as exc:
        TableSchema.create(ORDERS, options={"bucket": "1"}, **kwargs)
    for frag in fragments:
        assert frag in str(exc.value)


def test_create_type_errors_name_the_column() -> None:
    bad = ORDERS.append(pa.field("elapsed", pa.duration("ms")))
    with pytest.raises(SchemaError, match="'elapsed'"):
        TableSchema.create(bad)
    nested_pk = pa.schema([pa.field("k", pa.list_(pa.int32())), pa.field("v", pa.int32())])
    with pytest.raises(SchemaError, match="'k'"):
        TableSchema.create(nested_pk, primary_keys=["k"], options={"bucket": "1"})
    with pytest.raises(SchemaError, match="duplicate"):
        TableSchema.create(pa.schema([("a", pa.int32()), ("a", pa.int64())]))
    for reserved in ("_SEQUENCE_NUMBER", "_VALUE_KIND", "_KEY_id"):
        with pytest.raises(SchemaError, match=reserved):
            TableSchema.create(pa.schema([(reserved, pa.int32())]))


@pytest.mark.parametrize(
    "primary_keys,options,fragment",
    [
        ([], {"bucket": "4"}, "bucket-key"),
        (["id"], {"bucket-key": "id"}, "bucket -1"),
        (["id"], {"bucket": "2", "bucket-key": "name"}, "not part of the primary key"),
        ([], {"bucket": "2", "bucket-key": "nope"}, "'nope'"),
        ([], {"changelog-producer": "input"}, "primary key"),
        (["id"], {"bucket": "1", "sequence.field": "nope"}, "'nope'"),
        (["id"], {"bucket": "1", "rowkind.field": "nope"}, "'nope'"),
        (["id"], {"bucket": "1", "fields.nope.aggregate-function": "sum"}, "'nope'"),
        (["id"], {"bucket": "1", "merge-engine": "first-row", "changelog-producer": "input"}, "first-row"),
        (["id"], {"bucket": "1", "buckets": "2"}, "'bucket'"),
        (["id"], {"bucket": "1", "file.format": "orc"}, "'file.format'"),
        (["id"], {"bucket": "1", "sequence.field": "qty", "fields.qty.aggregate-function": "sum"}, "qty"),
        (["id"], {"bucket": "1", "fields.qty.sequence-group": "name", "fields.price.sequence-group": "name"},
         "more than one sequence group"),
    ],
)
def test_create_option_errors(primary_keys: list[str], options: dict[str, str], fragment: str) -> None:
    with pytest.raises((OptionError, SchemaError)) as exc:
        TableSchema.create(ORDERS, primary_keys=primary_keys, options=options)
    assert fragment in str(exc.value)


def test_create_valid_variants() -> None:
    append = TableSchema.create(ORDERS, partition_keys=["dt"], options={"bucket": "4", "bucket-key": "id"})
    assert append.bucket_keys == ["id"] and append.trimmed_primary_keys == []
    dyn = TableSchema.create(ORDERS)
    assert dyn.bucket_keys == [] and dyn.core_options.bucket == -1
    agg = TableSchema.create(
        ORDERS,
        primary_keys=["id"],
        options={"bucket": "1", "merge-engine": "aggregation", "fields.qty.aggregate-function": "sum"},
    )
    assert agg.core_options.merge_engine is MergeEngine.AGGREGATION
    pu = TableSchema.create(
        ORDERS,
        primary_keys=["id"],
        options={"bucket": "1", "merge-engine": "partial-update", "fields.qty.sequence-group": "name,price"},
    )
    assert pu.core_options.sequence_groups() == {("qty",): ["name", "price"]}


# ---- JSON -----------------------------------------------------------------------------------------------


def test_json_round_trip_and_layout() -> None:
    s = TableSchema.create(
        pa.schema([pa.field("id", pa.int64()), pa.field("r", pa.struct([("x", pa.int32())]))]),
        primary_keys=["id"],
        options={"bucket": "1"},
        comment="héllo",
    )
    text = s.to_json()
    doc = json.loads(text)
    assert list(doc) == [
        "version", "id", "fields", "highestFieldId", "partitionKeys", "primaryKeys", "options", "comment",
        "timeMillis",
    ]
    assert text.startswith('{\n  "version": 3,\n  "id": 0,\n  "fields": [\n    {\n      "id": 0,')
    assert "héllo" in text  # not ASCII-escaped, like pypaimon
    assert doc["fields"][1]["type"] == {
        "type": "ROW", "fields": [{"id": 2, "name": "x", "type": "INT"}], "nullable": True
    }
    again = TableSchema.from_json(text)
    assert again == s and again.to_json() == text
    no_comment = TableSchema.create(ORDERS)
    assert "comment" not in json.loads(no_comment.to_json())  # Java Paimon omits a null comment


def test_from_json_java_style() -> None:
    # the layout Java Paimon writes: Jackson's pretty printer, no "nullable" members, no null comment
    java = """{
  "version" : 3,
  "id" : 1,
  "fields" : [ {
    "id" : 0,
    "name" : "k",
    "type" : "INT NOT NULL"
  }, {
    "id" : 1,
    "name" : "m",
    "type" : {
      "type" : "MAP",
      "key" : "STRING NOT NULL",
      "value" : "TIMESTAMP(3) WITH LOCAL TIME ZONE"
    },
    "description" : "a map"
  } ],
  "highestFieldId" : 1,
  "partitionKeys" : [ ],
  "primaryKeys" : [ "k" ],
  "options" : {
    "bucket" : "1",
    "file.format" : "parquet"
  },
  "timeMillis" : 1700000000000
}"""
    s = TableSchema.from_json(java)
    assert s.id == 1 and s.primary_keys == ["k"] and s.comment is None
    assert s.field("m").type == parse_type("MAP<STRING NOT NULL, TIMESTAMP(3) WITH LOCAL TIME ZONE>")
    assert s.field("m").description == "a map"
    assert s.time_millis == 1700000000000


def test_from_json_old_versions_get_old_defaults() -> None:
    v1 = {"id": 0, "fields": [{"id": 0, "name": "a", "type": "INT"}], "highestFieldId": 0,
          "partitionKeys": [], "primaryKeys": [], "options": {}}
    s = TableSchema.from_json(json.dumps(v1))
    assert s.version == 1 and s.options == {"bucket": "1", "file.format": "orc"}
    v2 = dict(v1, version=2, options={"bucket": "3"})
    assert TableSchema.from_json(json.dumps(v2)).options == {"bucket": "3", "file.format": "orc"}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 3}',
        '{"version": 3, "id": 0, "fields": [{"id": 0, "name": "a", "type": "WHAT"}], "options": {}}',
        '{"version": 3, "id": 0, "fields": "x", "options": {}}',
        '{"version": 3, "id": 0, "fields": [], "primaryKeys": "id", "options": {}}',
    ],
)
def test_from_json_corrupt_names_the_file(text: str) -> None:
    with pytest.raises(CorruptFileError, match="/t/schema/schema-7"):
        TableSchema.from_json(text, "/t/schema/schema-7")


# ---- SchemaManager ----------------------------------------------------------------------------------


@pytest.fixture()
def manager(tmp_path: Path) -> SchemaManager:
    return SchemaManager(FileIO(), str(tmp_path / "t"))


def test_manager_create_and_read(manager: SchemaManager) -> None:
    assert manager.latest() is None and manager.list_all() == []
    s = manager.create_table(pk_schema())
    assert os.path.exists(manager.schema_path(0))
    with open(manager.schema_path(0), encoding="utf-8") as f:
        assert f.read() == s.to_json()
    fresh = SchemaManager(FileIO(), manager.table_path)
    assert fresh.latest() == s and fresh.schema(0) == s and fresh.list_all() == [s]
    with pytest.raises(SchemaExistsError) as exc:
        manager.create_table(pk_schema())
    assert isinstance(exc.value, TableAlreadyExistsError) and isinstance(exc.value, FileExistsError)


def test_manager_errors_name_the_file(manager: SchemaManager) -> None:
    manager.create_table(pk_schema())
    with pytest.raises(MissingFileError, match="schema-5"):
        manager.schema(5)
    Path(manager.schema_path(1)).write_text("{broken")
    fresh = SchemaManager(FileIO(), manager.table_path)
    with pytest.raises(CorruptFileError, match="schema-1"):
        fresh.latest()
    Path(manager.schema_path(1)).write_text(pk_schema().to_json())  # holds id 0
    with pytest.raises(CorruptFileError, match="schema-1"):
        SchemaManager(FileIO(), manager.table_path).schema(1)


def test_manager_ignores_temp_files(manager: SchemaManager) -> None:
    manager.create_table(pk_schema())
    Path(manager.schema_dir, ".schema-1.abc.tmp").write_text("junk")
    Path(manager.schema_dir, "schema-x").write_text("junk")
    assert manager.list_ids() == [0]


def test_commit_changes(manager: SchemaManager) -> None:
    manager.create_table(pk_schema())
    s1 = manager.commit_changes(AddColumn("note", pa.string()), SetOption("write-only", "true"))
    assert s1.id == 1 and s1.field("note").id == 5 and s1.options["write-only"] == "true"
    s2 = manager.commit_changes(RemoveOption("write-only"), UpdateComment("orders"))
    assert s2.id == 2 and "write-only" not in s2.options and s2.comment == "orders"
    assert [s.id for s in manager.list_all()] == [0, 1, 2]
    assert SchemaManager(FileIO(), manager.table_path).latest() == s2


def test_commit_changes_retries_after_a_race(manager: SchemaManager) -> None:
    manager.create_table(pk_schema())
    other = SchemaManager(FileIO(), manager.table_path)
    real_list_ids = manager.list_ids
    calls = {"n": 0}

    def stale_list_ids() -> list[int]:
        calls["n"] += 1
        if calls["n"] == 1:
            # another writer commits schema-1 after we listed
            other.commit_changes(AddColumn("a", pa.int32()))
            return [0]
        return real_list_ids()

    manager.list_ids = stale_list_ids  # type: ignore[method-assign]
    s = manager.commit_changes(AddColumn("b", pa.int32()))
    assert s.id == 2 and s.field_names[-2:] == ["a", "b"]
    assert s.field("a").id == 5 and s.field("b").id == 6


def test_commit_refuses_an_existing_id(manager: SchemaManager) -> None:
    s0 = manager.create_table(pk_schema())
    s1 = apply_changes(s0, [AddColumn("a", pa.int32())])
    assert manager.commit(s1)
    assert not manager.commit(apply_changes(s0, [AddColumn("b", pa.int32())]))


# ---- changes ---------------------------------------------------------------------------------------


def test_add_column_positions_and_ids() -> None:
    s0 = pk_schema()
    s1 = apply_changes(
        s0,
        [
            AddColumn("first", pa.int8(), first=True),
            AddColumn("mid", DataType("DOUBLE"), comment="in the middle", after="id"),
            AddColumn("r", pa.struct([("x", pa.int32()), ("y", pa.struct([("z", pa.string())]))])),
        ],
    )
    assert s1.field_names == ["first", "dt", "id", "mid", "name", "qty", "price", "r"]
    assert s1.field("first").id == 5 and s1.field("mid").id == 6 and s1.field("r").id == 7
    r = s1.field("r").type
    assert [(f.name, f.id) for f in r.fields or ()] == [("x", 8), ("y", 10)]
    assert s1.highest_field_id == 10
    assert s1.field("mid").description == "in the middle"


def test_add_column_errors() -> None:
    s0 = pk_schema()
    with pytest.raises(SchemaError, match="'name'.*already exists"):
        apply_changes(s0, [AddColumn("name", pa.string())])
    with pytest.raises(SchemaError, match="NOT NULL"):
        apply_changes(s0, [AddColumn("n", DataType("INT", nullable=False))])
    with pytest.raises(SchemaError, match="'nope'"):
        apply_changes(s0, [AddColumn("n", pa.int32(), after="nope")])
    with pytest.raises(SchemaError, match="'n'"):
        apply_changes(s0, [AddColumn("n", pa.duration("s"))])


def test_dropped_ids_are_not_reused() -> None:
    s1 = apply_changes(pk_schema(), [DropColumn("price")])
    assert s1.highest_field_id == 4
    s2 = apply_changes(s1, [AddColumn("price", pa.float64())])
    assert s2.field("price").id == 5


def test_rename_column() -> None:
    s0 = TableSchema.create(
        ORDERS, options={"bucket": "2", "bucket-key": "name", "fields.qty.stats-mode": "full"}
    )
    s1 = apply_changes(s0, [RenameColumn("name", "customer"), RenameColumn("qty", "quantity")])
    assert s1.field("customer").id == 2 and s1.field("quantity").id == 3
    assert s1.options["bucket-key"] == "customer"  # the immutable option follows the rename
    assert s1.options["fields.quantity.stats-mode"] == "full" and "fields.qty.stats-mode" not in s1.options
    with pytest.raises(SchemaError, match="'id'.*already exists"):
        apply_changes(s0, [RenameColumn("name", "id")])
    with pytest.raises(SchemaError, match="partition column 'dt'"):
        apply_changes(pk_schema(), [RenameColumn("dt", "day")])
    with pytest.raises(SchemaError, match="primary-key column 'id'"):
        apply_changes(pk_schema(), [RenameColumn("id", "key")])
    with pytest.raises(SchemaError, match="'missing'"):
        apply_changes(pk_schema(), [RenameColumn("missing", "x")])


def test_drop_column() -> None:
    s0 = pk_schema(**{"fields.qty.ignore-retract": "true", "merge-engine": "aggregation"})
    s1 = apply_changes(s0, [DropColumn("qty")])
    assert "qty" not in s1.field_names and "fields.qty.ignore-retract" not in s1.options
    with pytest.raises(SchemaError, match="primary-key column 'id'"):
        apply_changes(s0, [DropColumn("id")])
    with pytest.raises(SchemaError, match="partition column 'dt'"):
        apply_changes(s0, [DropColumn("dt")])
    seq = pk_schema(**{"sequence.field": "qty"})
    with pytest.raises(SchemaError, match="sequence.field"):
        apply_changes(seq, [DropColumn("qty")])
    single = TableSchema.create(pa.schema([("a", pa.int32())]))
    with pytest.raises(SchemaError, match="only column"):
        apply_changes(single, [DropColumn("a")])


def test_update_column_type_widening() -> None:
    s0 = pk_schema()
    s1 = apply_changes(
        s0,
        [
            UpdateColumnType("qty", pa.int64()),
            UpdateColumnType("price", DataType("DECIMAL", precision=12, scale=2)),
        ],
    )
    assert s1.field("qty").type == parse_type("BIGINT") and s1.field("qty").id == 3
    assert s1.field("price").type == parse_type("DECIMAL(12, 2)")
    with pytest.raises(SchemaError, match=r"'qty'.*INT.*SMALLINT"):
        apply_changes(s0, [UpdateColumnType("qty", pa.int16())])
    with pytest.raises(SchemaError, match="'name'"):
        apply_changes(s0, [UpdateColumnType("name", pa.int64())])
    with pytest.raises(SchemaError, match="primary-key column 'id'"):
        apply_changes(s0, [UpdateColumnType("id", pa.decimal128(30, 0))])
    with pytest.raises(SchemaError, match="NOT NULL"):
        apply_changes(
            s0, [UpdateColumnType("qty", DataType("BIGINT", nullable=False), keep_nullability=False)]
        )


def test_update_nested_type_keeps_field_ids() -> None:
    s0 = TableSchema.create(pa.schema([("r", pa.struct([("x", pa.int32()), ("y", pa.float32())]))]))
    s1 = apply_changes(s0, [UpdateColumnType("r", pa.struct([("x", pa.int64()), ("y", pa.float64())]))])
    assert [(f.name, f.id) for f in s1.field("r").type.fields or ()] == [("x", 1), ("y", 2)]
    with pytest.raises(SchemaError):
        apply_changes(s0, [UpdateColumnType("r", pa.struct([("x", pa.int64())]))])


@pytest.mark.parametrize(
    "src,dst,ok",
    [
        ("TINYINT", "SMALLINT", True),
        ("SMALLINT", "INT", True),
        ("INT", "BIGINT", True),
        ("BIGINT", "INT", False),
        ("INT", "DOUBLE", True),
        ("BIGINT", "DOUBLE", False),
        ("SMALLINT", "FLOAT", True),
        ("INT", "FLOAT", False),
        ("FLOAT", "DOUBLE", True),
        ("DOUBLE", "FLOAT", False),
        ("INT", "DECIMAL(10, 0)", True),
        ("INT", "DECIMAL(10, 2)", False),
        ("DECIMAL(10, 2)", "DECIMAL(12, 2)", True),
        ("DECIMAL(10, 2)", "DECIMAL(11, 3)", True),
        ("DECIMAL(10, 2)", "DECIMAL(10, 3)", False),
        ("DECIMAL(10, 2)", "DECIMAL(9, 2)", False),
        ("VARCHAR(10)", "VARCHAR(20)", True),
        ("VARCHAR(10)", "STRING", True),
        ("CHAR(3)", "STRING", True),
        ("STRING", "VARCHAR(10)", False),
        ("BINARY(4)", "BYTES", True),
        ("BYTES", "BINARY(4)", False),
        ("TIMESTAMP(3)", "TIMESTAMP(6)", True),
        ("TIMESTAMP(6)", "TIMESTAMP(3)", False),
        ("TIMESTAMP(3)", "TIMESTAMP(6) WITH LOCAL TIME ZONE", False),
        ("STRING", "INT", False),
        ("ARRAY<INT>", "ARRAY<BIGINT>", True),
        ("ARRAY<INT>", "ARRAY<INT NOT NULL>", False),
        ("MAP<STRING, INT>", "MAP<STRING, BIGINT>", True),
        ("MAP<INT, INT>", "MAP<BIGINT, INT>", False),
        ("INT NOT NULL", "BIGINT", True),
    ],
)
def test_can_widen(src: str, dst: str, ok: bool) -> None:
    assert can_widen(parse_type(src), parse_type(dst)) is ok


def test_immutable_and_unknown_options_are_refused() -> None:
    s0 = pk_schema()
    assert apply_changes(s0, [SetOption("bucket", "4")]).options["bucket"] == "4"  # a rescale
    with pytest.raises(OptionError, match="'bucket' cannot change from 2 to -1"):
        apply_changes(s0, [SetOption("bucket", "-1")])
    with pytest.raises(OptionError, match="'merge-engine'"):
        apply_changes(s0, [SetOption("merge-engine", "first-row")])
    with pytest.raises(OptionError, match="'sequence.field'"):
        apply_changes(s0, [SetOption("sequence.field", "qty")])
    with pytest.raises(OptionError, match="'write-onyl'.*'write-only'"):
        apply_changes(s0, [SetOption("write-onyl", "true")])
    with pytest.raises(OptionError, match="'target-file-size'"):
        apply_changes(s0, [SetOption("target-file-size", "big")])
    assert apply_changes(s0, [SetOption("bucket", "2")]).options["bucket"] == "2"  # unchanged is fine


def test_primary_key_option_gives_an_empty_table_a_key_and_changes_nothing_else() -> None:
    """Paimon's ``ALTER TABLE t SET ('primary-key' = ...)`` (its fallback-branch page sets it on an
    empty branch of an append table): only a table without a key and without snapshots takes it."""
    append = TableSchema.create(pa.schema([("dt", pa.string()), ("k", pa.int32()), ("v", pa.string())]),
                                    partition_keys=["dt"])  # fmt: skip
    s1 = apply_changes(append, [SetOption("primary-key", "dt, k"), SetOption("bucket", "2")], has_snapshots=False)
    assert s1.primary_keys == ["dt", "k"] and "primary-key" not in s1.options
    assert [f.type.nullable for f in s1.fields] == [False, False, True]  # key columns NOT NULL
    assert apply_changes(s1, [SetOption("primary-key", "dt,k")]).primary_keys == ["dt", "k"]  # the same key
    with pytest.raises(OptionError, match="cannot change the primary key"):
        apply_changes(s1, [SetOption("primary-key", "k")], has_snapshots=False)
    with pytest.raises(OptionError, match="no snapshot"):
        apply_changes(append, [SetOption("primary-key", "dt,k")], has_snapshots=True)
    with pytest.raises(SchemaError, match="'nope'"):
        apply_changes(append, [SetOption("primary-key", "dt,nope")], has_snapshots=False)
    # a key without the partition field: a cross-partition key, as CREATE TABLE would make it
    assert apply_changes(append, [SetOption("primary-key", "k")], has_snapshots=False).cross_partition_update


def test_alter_tolerates_foreign_options() -> None:
    foreign = pk_schema().copy(options={"bucket": "2", "some.spark.option": "x"})
    s1 = apply_changes(foreign, [SetOption("write-only", "true")])
    assert s1.options["some.spark.option"] == "x"


def test_column_comment() -> None:
    s1 = apply_changes(pk_schema(), [UpdateColumnComment("name", "who")])
    assert s1.field("name").description == "who"
    s2 = apply_changes(s1, [UpdateColumnComment("name", None)])
    assert s2.field("name").description is None


# ---- reading old files ---------------------------------------------------------------------------


def test_evolve_table_by_field_id() -> None:
    s0 = pk_schema()
    file_data = pa.table(
        {
            "dt": ["d1", "d1"],
            "id": [1, 2],
            "name": ["a", "b"],
            "qty": pa.array([3, None], pa.int32()),
            "price": pa.array([1, 2], pa.decimal128(10, 2)),
        }
    )
    s1 = apply_changes(
        s0,
        [
            RenameColumn("name", "customer"),
            DropColumn("price"),
            UpdateColumnType("qty", pa.int64()),
            AddColumn("price", pa.float64()),  # same name as the dropped column, new id
            AddColumn("note", pa.string(), after="id"),
        ],
    )
    out = evolve_table(file_data, s0, s1, None)
    assert out.schema == s1.arrow_schema()
    assert out.column_names == ["dt", "id", "note", "customer", "qty", "price"]
    assert out.column("customer").to_pylist() == ["a", "b"]
    assert out.column("qty").type == pa.int64() and out.column("qty").to_pylist() == [3, None]
    assert out.column("price").to_pylist() == [None, None]
    assert out.column("note").to_pylist() == [None, None]
    sub = evolve_table(file_data, s0, s1, ["qty", "customer"])
    assert sub.column_names == ["qty", "customer"]

    names = physical_names(s0, s1, None)
    assert names == {"dt": "dt", "id": "id", "note": None, "customer": "name", "qty": "qty", "price": None}
    assert physical_names(s0, s1, ["customer"]) == {"customer": "name"}
    with pytest.raises(SchemaError, match="'nope'"):
        physical_names(s0, s1, ["nope"])
    # a projected file read holds only the needed physical columns
    projected = file_data.select(["name"])
    assert evolve_table(projected, s0, s1, ["customer"]).column("customer").to_pylist() == ["a", "b"]


def test_evolve_table_nested_widening() -> None:
    s0 = TableSchema.create(pa.schema([("l", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32()))]))
    s1 = apply_changes(
        s0,
        [
            UpdateColumnType("l", pa.list_(pa.int64())),
            UpdateColumnType("m", pa.map_(pa.string(), pa.int64())),
        ],
    )
    data = pa.table(
        {"l": pa.array([[1, 2], None], pa.list_(pa.int32())),
         "m": pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int32()))}
    )
    out = evolve_table(data, s0, s1)
    assert out.schema == s1.arrow_schema()
    assert out.column("l").to_pylist() == [[1, 2], None]
    assert out.column("m").to_pylist() == [[("a", 1)], None]


def test_evolve_table_empty_input() -> None:
    s0 = pk_schema()
    s1 = apply_changes(s0, [AddColumn("x", pa.int32())])
    out = evolve_table(s0.arrow_schema().empty_table(), s0, s1)
    assert out.num_rows == 0 and out.schema == s1.arrow_schema()


# ---- pypaimon as an oracle -------------------------------------------------------------------------


ORACLE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("f32", pa.float32()),
        pa.field("dec", pa.decimal128(10, 2)),
        pa.field("s", pa.string()),
        pa.field("bin", pa.binary()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("tsz", pa.timestamp("ms", tz="UTC")),
        pa.field("arr", pa.list_(pa.int32())),
        pa.field("m", pa.map_(pa.string(), pa.int64())),
        pa.field("r", pa.struct([("x", pa.int32()), ("z", pa.struct([("q", pa.float64())]))])),
    ]
)


def _catalog(wh: Path) -> object:
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": str(wh)})


@requires_pypaimon
def test_pypaimon_schema_file_parses_and_reprints(tmp_path: Path) -> None:
    from pypaimon import Schema

    cat = _catalog(tmp_path / "wh")
    cat.create_database("db", True)  # type: ignore[attr-defined]
    schema = Schema.from_pyarrow_schema(
        ORACLE, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "2"}, comment="c"
    )
    cat.create_table("db.t", schema, False)  # type: ignore[attr-defined]
    path = tmp_path / "wh" / "db.db" / "t" / "schema" / "schema-0"
    raw = path.read_text(encoding="utf-8")
    ours = SchemaManager(FileIO(), str(path.parent.parent)).latest()
    assert ours is not None
    assert ours.primary_keys == ["id", "dt"] and ours.partition_keys == ["dt"] and ours.comment == "c"
    # byte-identical apart from the spelling of TIMESTAMP WITH LOCAL TIME ZONE (Java's vs pypaimon's)
    canonical = re.sub(r"TIMESTAMP_LTZ\((\d)\)", r"TIMESTAMP(\1) WITH LOCAL TIME ZONE", raw)
    assert ours.to_json() == canonical
    # and the same schema as lakelog builds from the same Arrow schema
    mine = TableSchema.create(
        ORACLE, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "2"}
    )
    assert mine.fields == ours.fields and mine.highest_field_id == ours.highest_field_id


@requires_pypaimon
def test_pypaimon_opens_a_table_lakelog_created(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table_path = wh / "db.db" / "t"
    ours = TableSchema.create(
        ORACLE, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "2"},
        comment="from lakelog",
    )
    SchemaManager(FileIO(), str(table_path)).create_table(ours)
    cat = _catalog(wh)
    table = cat.get_table("db.t")  # type: ignore[attr-defined]
    ts = table.table_schema
    assert ts.id == 0 and ts.primary_keys == ["id", "dt"] and ts.partition_keys == ["dt"]
    assert ts.highest_field_id == ours.highest_field_id and ts.comment == "from lakelog"
    assert [(f.id, f.name) for f in ts.fields] == [(f.id, f.name) for f in ours.fields]
    assert ts.options == ours.options
    # pypaimon's Arrow view of our schema matches ours
    from pypaimon.schema.data_types import PyarrowFieldParser

    assert PyarrowFieldParser.from_paimon_schema(ts.fields) == ours.arrow_schema()


@requires_pypaimon
def test_pypaimon_reads_an_evolved_schema(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    table_path = wh / "db.db" / "t"
    manager = SchemaManager(FileIO(), str(table_path))
    manager.create_table(TableSchema.create(ORACLE, primary_keys=["id"], options={"bucket": "1"}))
    s1 = manager.commit_changes(
        AddColumn("extra", pa.struct([("a", pa.int32())])), RenameColumn("s", "label"), DropColumn("bin")
    )
    table = _catalog(wh).get_table("db.t")  # type: ignore[attr-defined]
    ts = table.table_schema
    assert ts.id == 1
    assert [(f.id, f.name) for f in ts.fields] == [(f.id, f.name) for f in s1.fields]
    assert ts.highest_field_id == s1.highest_field_id


def test_a_nested_default_value_from_paimon_is_refused_by_writes_not_reads(tmp_path: Path) -> None:
    """Paimon keeps default values of nested fields too; lakelog fills top-level ones only, so a
    write to such a table is refused by name (a read works)."""
    import json

    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", pa.schema([("r", pa.struct([("x", pa.int32())]))]), options={"bucket": "-1"}
    )
    path = Path(t.path) / "schema" / "schema-0"
    doc = json.loads(path.read_text())
    doc["fields"][0]["type"]["fields"][0]["defaultValue"] = "1"
    path.write_text(json.dumps(doc))
    t = lakelog.Catalog(str(tmp_path)).get_table("db.t")
    assert t.to_arrow().num_rows == 0
    with pytest.raises(OptionError, match="nested field 'x' has a default value"):
        t.write(pa.table({"r": [{"x": None}]}, schema=t.schema))
