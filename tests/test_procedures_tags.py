"""Issue 24: Paimon's tag, rollback and consumer procedures, each run as Paimon's procedure page
writes its example (the statement text as written, parsed by lakelog's CALL parser) and checked on
disk: create_tag with a cast argument, create_tag_from_timestamp, replace_tag, rename_tag,
expire_tags, rollback_to_timestamp, clear_consumers."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.operators.sql.errors import SqlError
from lakelog.operators.sql.procedures import CallContext, call_procedure, parse_call

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])


def call(ctx: CallContext, stmt: str) -> list[tuple[Any, ...]]:
    parts, positional, named = parse_call(stmt)
    return list(call_procedure(ctx, parts[-1], positional, named).rows)


@pytest.fixture()
def table(tmp_path: Path) -> tuple[CallContext, lakelog.Table]:
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table("default.T", SCHEMA, primary_key=["k"], options={"bucket": "1"})
    for i in range(1, 11):
        t.write(pa.table({"k": [i], "v": [f"v{i}"]}, schema=SCHEMA))
        time.sleep(0.005)  # distinct commit times
    return CallContext(cat, "lk", "default"), t


def test_tag_procedures_as_paimons_page_writes_them(table: tuple[CallContext, lakelog.Table]) -> None:
    ctx, t = table
    call(ctx, """CALL sys.create_tag(
    `table` => 'default.T',
    tag => 'my_tag',
    snapshot_id => cast(10 as bigint),
    time_retained => '1 d'
)""")
    assert t.tags() == {"my_tag": 10}
    # create_tag_from_timestamp: the first snapshot committed at or after the time
    s3 = t.store.snapshot_manager.snapshot(3)
    first = min(s.id for s in t.snapshots() if s.time_millis >= s3.time_millis)  # 3, or an equal-time one
    got = call(ctx, f"""CALL sys.create_tag_from_timestamp(
    `table` => 'default.T',
    `tag` => 'from_ts',
    `timestamp` => {s3.time_millis - 1},
    time_retained => '1 d'
)""")
    first_before = min(s.id for s in t.snapshots() if s.time_millis >= s3.time_millis - 1)
    assert got == [("from_ts", first_before, t.store.snapshot_manager.snapshot(first_before).time_millis, -(2**63))]
    assert t.tags()["from_ts"] == first_before
    assert call(ctx, f"CALL sys.create_tag_from_timestamp('default.T', 'exact', {s3.time_millis}, '1 d')")[0][1] == first
    with pytest.raises(SqlError, match="Could not find snapshot"):
        call(ctx, f"CALL sys.create_tag_from_timestamp('default.T', 'late', {int(time.time() * 1000) + 60_000})")
    # replace_tag: another snapshot, another retention, in one overwrite
    call(ctx, "CALL sys.replace_tag(`table` => 'default.T', tag => 'my_tag', snapshot_id => 5, time_retained => '1 d')")
    assert t.tags()["my_tag"] == 5
    call(ctx, "CALL sys.replace_tag('default.T', 'my_tag', 6, '2 d')")
    info = t.store.tag_manager.get_info("my_tag")
    assert info.snapshot.id == 6 and info.time_retained == datetime.timedelta(days=2)
    with pytest.raises(SqlError, match="Tag 'nope' doesn't exist"):
        call(ctx, "CALL sys.replace_tag('default.T', 'nope', 6)")
    # rename_tag keeps the snapshot and the retention
    call(ctx, "CALL sys.rename_tag(`table` => 'default.T', tagName => 'from_ts', targetTagName => 'tag2')")
    assert "from_ts" not in t.tags() and t.tags()["tag2"] == first_before
    assert t.store.tag_manager.get_info("tag2").time_retained == datetime.timedelta(days=1)
    # expire_tags: created before older_than (tags without a creation time are kept)
    t.create_tag("plain", 2)
    assert call(ctx, "CALL sys.expire_tags(table => 'default.T', older_than => '2024-09-06 11:00:00')") == [
        ("No expired tags.",)
    ]
    later = (datetime.datetime.now() + datetime.timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    got = call(ctx, f"CALL sys.expire_tags('default.T', '{later}')")
    assert sorted(r[0] for r in got) == ["exact", "my_tag", "tag2"]
    assert t.tags() == {"plain": 2}
    # a table's read at a tag still works after its neighbours expired
    assert t.to_arrow(tag="plain").num_rows == 2


def test_expire_tags_without_older_than_takes_retention(table: tuple[CallContext, lakelog.Table]) -> None:
    ctx, t = table
    tm = t.store.tag_manager
    old = datetime.datetime.now() - datetime.timedelta(hours=3)
    tm.create("short", t.store.snapshot_manager.snapshot(1), datetime.timedelta(hours=1), create_time=old)
    tm.create("long", t.store.snapshot_manager.snapshot(2), datetime.timedelta(days=1), create_time=old)
    assert call(ctx, "CALL sys.expire_tags('default.T')") == [("short",)]
    assert t.tags() == {"long": 2}


def test_rollback_to_timestamp_and_clear_consumers(table: tuple[CallContext, lakelog.Table]) -> None:
    ctx, t = table
    s4 = t.store.snapshot_manager.snapshot(4)
    latest = t.latest_snapshot().id
    target = max(s.id for s in t.snapshots() if s.time_millis <= s4.time_millis)  # 4, or an equal-time one
    want = sorted(r["k"] for r in t.to_arrow(snapshot_id=target).to_pylist())
    got = call(ctx, f"CALL sys.rollback_to_timestamp(`table` => 'default.T', `timestamp` => {s4.time_millis})")
    assert got == [(latest, target)]
    assert t.latest_snapshot().id == target and sorted(r["k"] for r in t.to_arrow().to_pylist()) == want
    with pytest.raises(SqlError, match="not find snapshot"):
        call(ctx, "CALL sys.rollback_to_timestamp('default.T', 0)")
    cm = t.store.consumer_manager
    for cid in ("job-a", "job-b", "keep", "other"):
        cm.reset(cid, 2)
    call(ctx, "CALL sys.clear_consumers(`table` => 'default.T', including_consumers => 'job.*', "
              "excluding_consumers => 'job-b')")  # fmt: skip
    assert sorted(cm.ids()) == ["job-b", "keep", "other"]
    call(ctx, "CALL sys.clear_consumers('default.T')")
    assert cm.ids() == []


def test_mark_partition_done_writes_success_files_that_orphan_cleanup_keeps(tmp_path: Path) -> None:
    import json

    schema = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("hh", pa.int32(), nullable=False),
                        pa.field("k", pa.int64(), nullable=False)])  # fmt: skip
    cat = lakelog.Catalog(str(tmp_path / "wh"))
    t = cat.create_table("default.T", schema, primary_key=["dt", "hh", "k"], partition_by=["dt", "hh"],
                         options={"bucket": "1"})  # fmt: skip
    t.write(pa.table({"dt": ["20240101"], "hh": [1], "k": [1]}, schema=schema))
    ctx = CallContext(cat, "lk", "default")
    # Paimon's example, as written
    call(ctx, "CALL sys.mark_partition_done(`table` => 'default.T', partitions => 'dt=20240101,hh=01')")
    marker = tmp_path / "wh" / "default.db" / "T" / "dt=20240101" / "hh=1" / "_SUCCESS"
    first = json.loads(marker.read_text())
    assert first["creationTime"] == first["modificationTime"] > 0
    time.sleep(0.01)
    call(ctx, "CALL sys.mark_partition_done('default.T', 'dt=20240101,hh=1;dt=20240102,hh=2')")
    again = json.loads(marker.read_text())
    assert again["creationTime"] == first["creationTime"] < again["modificationTime"]
    assert (marker.parent.parent.parent / "dt=20240102" / "hh=2" / "_SUCCESS").exists()
    with pytest.raises(SqlError, match="must give every partition field"):
        call(ctx, "CALL sys.mark_partition_done('default.T', 'dt=20240101')")
    # the marks are not orphans
    assert not any(p.endswith("_SUCCESS") for p in t.remove_orphan_files(older_than_seconds=0, dry_run=True))
    # the other actions need a metastore or a service
    from lakelog.connector.errors import OptionError

    with pytest.raises(OptionError, match="partition.mark-done-action.*not supported by lakelog"):
        cat.create_table("default.U", schema, partition_by=["dt", "hh"],
                         options={"partition.mark-done-action": "done-partition"})  # fmt: skip


def test_compact_takes_table_options_for_that_call(tmp_path: Path) -> None:
    import numpy as np

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    ctx = CallContext(cat, "lk", "default")
    files = {}
    for name, options in (("plain", ""), ("small", ", options => 'target-file-size=8kb,file.compression=zstd'")):
        t = cat.create_table(f"default.{name}", SCHEMA, primary_key=["k"],
                             options={"bucket": "1", "write-only": "true"})  # fmt: skip
        for i in range(4):
            ids = np.arange(i * 5000, (i + 1) * 5000)
            t.write(pa.table({"k": ids, "v": [f"value-{x}" for x in ids]}, schema=SCHEMA))
        call(ctx, f"CALL sys.compact(`table` => 'default.{name}'{options})")
        files[name] = len(t.files())
        assert t.to_arrow().num_rows == 20_000
        assert t.store.schema.options.get("target-file-size") is None  # for that call only
    assert files["plain"] == 1 and files["small"] > 3, files
    with pytest.raises(SqlError, match="expected 'key=value"):
        call(ctx, "CALL sys.compact(`table` => 'default.plain', options => 'target-file-size')")
    from lakelog.connector.errors import OptionError

    with pytest.raises(OptionError, match="bucket"):
        call(ctx, "CALL sys.compact(`table` => 'default.plain', options => 'bucket=4')")


def test_the_sys_database_tables(tmp_path: Path) -> None:
    """Issue 24: Paimon's global system tables, as its system-tables page shows them."""
    from lakelog.connector.table.global_system_tables import global_table

    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    cat.create_database("my_db")
    part = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("v", pa.string()),
                      pa.field("dt", pa.string(), nullable=False)])  # fmt: skip
    orders = cat.create_table("my_db.Orders2", part, primary_key=["k", "dt"], partition_by=["dt"],
                              options={"snapshot.num-retained.min": "7"})  # fmt: skip
    orders.write(pa.table({"k": [1, 2, 3], "v": ["x", "y", "z"], "dt": ["2024-01-01", "2024-01-01", "2024-01-02"]},
                          schema=part))  # fmt: skip
    cat.create_table("default.T", pa.schema([("a", pa.int32()), ("b", pa.int32())]),
                     options={"snapshot.num-retained.max": "19"})  # fmt: skip
    ctx = CallContext(cat, "lk", "default")
    call(ctx, "CALL sys.mark_partition_done('my_db.Orders2', 'dt=2024-01-01')")
    options = {"warehouse": wh, "table-default.file.format": "parquet", "jdbc.password": "secret"}
    got = global_table("all_table_options", cat, options).to_pylist()
    assert {"database_name": "default", "table_name": "T", "key": "snapshot.num-retained.max", "value": "19"} in got
    assert {"database_name": "my_db", "table_name": "Orders2", "key": "snapshot.num-retained.min", "value": "7"} in got
    assert global_table("catalog_options", cat, options).to_pylist() == [
        {"key": "table-default.file.format", "value": "parquet"}, {"key": "warehouse", "value": wh}]  # fmt: skip
    tables = {r["table_name"]: r for r in global_table("tables", cat, options).to_pylist()}
    o = tables["Orders2"]
    assert (o["database_name"], o["table_type"], o["partitioned"], o["primary_key"]) == ("my_db", "table", True, True)
    assert (o["record_count"], o["file_count"], o["owner"]) == (3, 2, None) and o["file_size_in_bytes"] > 0
    assert o["last_file_creation_time"] is not None
    assert (tables["T"]["partitioned"], tables["T"]["primary_key"], tables["T"]["record_count"]) == (False, False, 0)
    parts = global_table("partitions", cat, options).to_pylist()
    assert [(p["partition_name"], p["record_count"], p["file_count"], p["done"]) for p in parts] == [
        ("dt=2024-01-01", 2, 1, True), ("dt=2024-01-02", 1, 1, False)]  # fmt: skip
    assert global_table("tables", cat, options).schema.names == [
        "database_name", "table_name", "table_type", "partitioned", "primary_key", "owner", "created_at",
        "created_by", "updated_at", "updated_by", "record_count", "file_size_in_bytes", "file_count",
        "last_file_creation_time"]  # fmt: skip


def test_alter_column_default_value_as_paimons_page_writes_it(tmp_path: Path) -> None:
    """Issue 24: Paimon 1.3+'s column default values (a field's ``defaultValue`` in the schema file):
    the doc's examples as written, the schema on disk, and writes filling nulls and missing columns."""
    import json

    cat = lakelog.Catalog(str(tmp_path))
    schema = pa.schema([pa.field("a", pa.int64(), False), ("b", pa.string()), ("c", pa.int32()),
                        ("status", pa.string()), ("tags", pa.list_(pa.string()))])  # fmt: skip
    t = cat.create_table("default.my_table", schema, primary_key=["a"], options={"bucket": "1"})
    ctx = CallContext(cat, "lk", "default")
    call(ctx, """
        -- Set simple type default values
        CALL sys.alter_column_default_value('default.my_table', 'b', 'my_value')""")
    call(ctx, "CALL sys.alter_column_default_value('default.my_table', 'c', '5')")
    call(ctx, "CALL sys.alter_column_default_value(`table` => 'default.my_table', `column` => 'status', "
              "default_value => 'active')")  # fmt: skip
    fields = json.loads((Path(t.path) / "schema" / "schema-3").read_text())["fields"]
    assert [f.get("defaultValue") for f in fields] == [None, "my_value", "5", "active", None]
    t = cat.get_table("default.my_table")
    t.write(pa.table({"a": [1, 2], "b": [None, "given"]}))  # c and status missing, b null once
    assert t.to_arrow().to_pylist() == [
        {"a": 1, "b": "my_value", "c": 5, "status": "active", "tags": None},
        {"a": 2, "b": "given", "c": 5, "status": "active", "tags": None},
    ]
    with pytest.raises(lakelog.errors.OptionError, match="default value of column 'c'.*INT"):
        call(ctx, "CALL sys.alter_column_default_value('default.my_table', 'c', 'five')")
    with pytest.raises(lakelog.errors.OptionError, match="key column 'a'"):
        call(ctx, "CALL sys.alter_column_default_value('default.my_table', 'a', '1')")
    with pytest.raises(lakelog.errors.OptionError, match="'tags' has type ARRAY"):
        call(ctx, "CALL sys.alter_column_default_value('default.my_table', 'tags', '[tag1, tag2, tag3]')")
    with pytest.raises(SqlError, match="no column 'nope'"):
        call(ctx, "CALL sys.alter_column_default_value('default.my_table', 'nope', '1')")
    assert len(t.store.schema_manager.list_ids()) == 4  # a refused change writes no schema
