"""Bad input is refused with a lakelog error that names what is wrong: option values, database and
table names, partition values, empty schemas."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import (
    InvalidInputError,
    LakelogError,
    OptionError,
    PathEscapeError,
    SchemaError,
)

from .conftest import ORDERS, MakeTable


# ---- option values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["abc", "1.5", "", " ", "0x10"])
@pytest.mark.parametrize("primary_key", [["id"], None])
def test_a_malformed_bucket_names_the_option_and_value(
    catalog: lakelog.Catalog, value: str, primary_key: list[str] | None
) -> None:
    opts = {"bucket": value} if primary_key else {"bucket": value, "bucket-key": "id"}
    with pytest.raises(OptionError) as e:
        catalog.create_table("db.t", ORDERS, primary_key=primary_key, options=opts)
    assert "'bucket'" in str(e.value) and repr(value) in str(e.value)
    assert not catalog.table_exists("db.t")


@pytest.mark.parametrize(
    "key,value",
    [
        ("write-buffer-size", "lots"),
        ("snapshot.num-retained.min", "1.5"),
        ("snapshot.time-retained", ""),
        ("num-sorted-run.compaction-trigger", "five"),
        ("write-only", "1"),
        ("target-file-size", "-1 mb"),
        ("scan.snapshot-id", "x"),
    ],
)
def test_every_typed_option_names_itself_when_malformed(catalog: lakelog.Catalog, key: str, value: str) -> None:
    with pytest.raises(OptionError) as e:
        catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], options={key: value})
    assert repr(key) in str(e.value) and repr(value) in str(e.value)
    t = catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"])
    with pytest.raises(OptionError) as e:
        t.alter(lakelog.SetOption(key, value))
    assert repr(key) in str(e.value) and repr(value) in str(e.value)


# ---- names -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["t\n", "t\r", "t\x00", "\tt", "t\x7f", "a b", "t/x", "..", "t.x.y", "", "\u00e9t\u00e9"]
)
def test_table_names_with_control_characters_or_separators_are_refused(
    catalog: lakelog.Catalog, name: str
) -> None:
    with pytest.raises(PathEscapeError) as e:
        catalog.create_table(f"db.{name}" if "." not in name else name, ORDERS)
    assert repr(name) in str(e.value)
    with pytest.raises(PathEscapeError):
        catalog.create_database(name)
    assert catalog.list_databases() == []


def test_long_names_are_refused_by_name_before_the_file_system_sees_them(catalog: lakelog.Catalog) -> None:
    ok_table, long_table = "t" * 255, "t" * 256
    catalog.create_table(f"db.{ok_table}", ORDERS)
    with pytest.raises(PathEscapeError, match=r"table name 'tttt.*256 characters.*at most 255"):
        catalog.create_table(f"db.{long_table}", ORDERS)
    catalog.create_database("d" * 252)  # plus '.db': 255 bytes
    with pytest.raises(PathEscapeError, match=r"database name 'dddd.*253 characters.*at most 252"):
        catalog.create_database("d" * 253)


def test_a_partition_value_too_long_for_a_directory_is_named(make_table: MakeTable) -> None:
    t = make_table()
    fits = "x" * (255 - len("dt="))
    t.write(pa.table({"dt": [fits], "id": [1], "name": ["a"], "amount": [1.0]}, schema=ORDERS))
    too_long = "y" * (256 - len("dt="))
    with pytest.raises(InvalidInputError, match=r"partition value 'yyyy.*of column 'dt' is too long"):
        t.write(pa.table({"dt": [too_long], "id": [2], "name": ["b"], "amount": [2.0]}, schema=ORDERS))
    # escaping counts: 100 slashes become 300 bytes
    with pytest.raises(InvalidInputError, match="'dt'"):
        t.write(pa.table({"dt": ["/" * 100], "id": [3], "name": ["c"], "amount": [3.0]}, schema=ORDERS))
    assert t.to_arrow().column("dt").to_pylist() == [fits]
    assert len(t.snapshots()) == 1


# ---- schemas -----------------------------------------------------------------------------------------
def test_an_empty_schema_is_refused(catalog: lakelog.Catalog) -> None:
    with pytest.raises(SchemaError, match="at least one column"):
        catalog.create_table("db.t", pa.schema([]))
    assert not catalog.table_exists("db.t")


def test_errors_share_the_root() -> None:
    for cls in (OptionError, PathEscapeError, SchemaError, InvalidInputError):
        assert issubclass(cls, LakelogError)


@pytest.mark.parametrize(
    "key,value", [("lookup.cache-rows", "many"), ("lookup.cache-rows", "0"), ("lookup.refresh.async", "yes")]
)
def test_sql_lookup_hints_name_a_malformed_value(key: str, value: str) -> None:
    from lakelog.operators.sql.runner import _hint_option

    kind = int if key == "lookup.cache-rows" else bool
    with pytest.raises(OptionError, match=f"{value!r}.*{key!r}"):
        _hint_option({key: value}, key, "1", kind)
    assert _hint_option({key: "7" if kind is int else "TRUE"}, key, "1", kind) in (7, True)
