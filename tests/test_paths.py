"""Warehouse and table paths: every file: spelling, and the <warehouse>/<db>.db/<table> layout."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.connector.format.fileio import local_path
from lakelog.connector.table.catalog import parse_table_path


@pytest.mark.parametrize("spelling", ["{p}", "file:{p}", "file://{p}", "file://localhost{p}", "{p}/"])
def test_every_file_uri_spelling_is_the_same_directory(tmp_path: Path, spelling: str) -> None:
    wh = str(tmp_path / "wh")
    assert local_path(spelling.format(p=wh)) == wh
    catalog = lakelog.Catalog(spelling.format(p=wh))
    assert catalog.warehouse == wh
    catalog.create_table("db.t", pa.schema([("a", pa.int64())]))
    assert (tmp_path / "wh" / "db.db" / "t" / "schema" / "schema-0").is_file()
    assert not (Path.cwd() / "file:").exists()  # never a relative './file:' directory


@pytest.mark.parametrize("uri", ["s3://bucket/wh", "hdfs://nn:8020/wh", "file://otherhost/wh"])
def test_remote_file_systems_are_refused_by_name(uri: str) -> None:
    with pytest.raises(OptionError, match="only local"):
        local_path(uri)


def test_table_paths_parse_into_warehouse_database_and_table(tmp_path: Path) -> None:
    wh = str(tmp_path)
    assert parse_table_path(f"{wh}/shop.db/orders") == (wh, "shop", "orders")
    assert parse_table_path(f"file:{wh}/shop.db/orders/") == (wh, "shop", "orders")
    with pytest.raises(OptionError, match="<warehouse>/<database>.db/<table>"):
        parse_table_path(f"{wh}/shop/orders")
    with pytest.raises(OptionError, match="invalid table name"):
        parse_table_path(f"{wh}/shop.db/or ders")
