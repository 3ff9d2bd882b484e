"""End-to-end behaviour of the embedded table API."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError, SchemaError, SnapshotNotFoundError

from .conftest import ORDERS, MakeTable, rows


def orders(dt: str, ids: list[int], name: str = "x", amount: float = 1.0) -> pa.Table:
    n = len(ids)
    return pa.table(
        {"dt": [dt] * n, "id": ids, "name": [f"{name}{i}" for i in ids], "amount": [amount] * n},
        schema=ORDERS,
    )


@pytest.fixture()
def pk_table(make_table: MakeTable) -> lakelog.Table:
    return make_table("shop.orders", options={"bucket": "3"})


def test_upsert_delete_and_latest_wins(pk_table: lakelog.Table) -> None:
    s1 = pk_table.write(orders("d1", [1, 2, 3]))
    s2 = pk_table.write(orders("d1", [2, 4], name="y", amount=2.0))
    s3 = pk_table.delete(pa.table({"dt": ["d1"], "id": [1]}))
    assert (s1, s2, s3) == (1, 2, 3)
    got = rows(pk_table.to_arrow(), "id")
    assert [(r["id"], r["name"]) for r in got] == [(2, "y2"), (3, "x3"), (4, "y4")]
    # duplicates inside one batch: the last one wins
    pk_table.write(pa.concat_tables([orders("d1", [7], name="a"), orders("d1", [7], name="b")]))
    assert pk_table.to_arrow(filter=pc.field("id") == 7).column("name").to_pylist() == ["b7"]


def test_time_travel_by_id_time_and_tag(pk_table: lakelog.Table) -> None:
    s1 = pk_table.write(orders("d1", [1, 2]))
    pk_table.create_tag("first")
    t1 = pk_table.snapshot(s1).time_millis
    pk_table.write(orders("d2", [3]))
    assert pk_table.to_arrow(snapshot_id=s1).num_rows == 2
    assert pk_table.to_arrow(tag="first").num_rows == 2
    assert pk_table.to_arrow(timestamp=t1).num_rows == 2
    assert pk_table.to_arrow().num_rows == 3
    assert pk_table.tags() == {"first": s1}
    pk_table.delete_tag("first")
    assert pk_table.tags() == {}
    with pytest.raises(SnapshotNotFoundError):
        pk_table.to_arrow(snapshot_id=99)


def test_projection_and_filters(pk_table: lakelog.Table) -> None:
    pk_table.write(pa.concat_tables([orders("d1", list(range(100))), orders("d2", list(range(50)))]))
    t = pk_table.to_arrow(columns=["id"], filter=(pc.field("dt") == "d2") & (pc.field("id") >= 45))
    assert t.schema.names == ["id"]
    assert sorted(t.column("id").to_pylist()) == [45, 46, 47, 48, 49]
    # a value filter must see the merged row, not an older version
    pk_table.write(orders("d1", [5], name="new"))
    got = pk_table.to_arrow(filter=(pc.field("name") == "x5") & (pc.field("dt") == "d1"))
    assert got.num_rows == 0


def test_changes_audit_log(pk_table: lakelog.Table) -> None:
    s1 = pk_table.write(orders("d1", [1, 2, 3]))
    pk_table.write(orders("d1", [2], name="changed"))
    pk_table.write(orders("d1", [3]))  # identical rewrite: no change
    pk_table.delete(pa.table({"dt": ["d1"], "id": [1]}))
    pk_table.write(orders("d2", [9]))
    ch = pk_table.changes(s1)
    assert ch.column_names[0] == "rowkind"
    got = [(r["rowkind"], r["dt"], r["id"], r["name"]) for r in ch.to_pylist()]
    assert got == [
        ("-D", "d1", 1, "x1"),
        ("-U", "d1", 2, "x2"),
        ("+U", "d1", 2, "changed2"),
        ("+I", "d2", 9, "x9"),
    ]
    full = pk_table.changes(0)
    assert set(full.column("rowkind").to_pylist()) == {"+I"}
    assert full.num_rows == pk_table.to_arrow().num_rows


def test_compaction_keeps_content(pk_table: lakelog.Table) -> None:
    for i in range(4):
        pk_table.write(orders("d1", list(range(i, 20, 2)), name=f"v{i}"))
    pk_table.delete(pa.table({"dt": ["d1"] * 3, "id": [0, 1, 2]}))
    before = rows(pk_table.to_arrow(), "id")
    sid = pk_table.compact(full=True)
    assert pk_table.snapshot(sid).commit_kind == "COMPACT"
    assert rows(pk_table.to_arrow(), "id") == before
    files = pk_table.files().to_pylist()
    assert {f["level"] for f in files} == {5}
    assert all(f["deleteRowCount"] == 0 for f in files)
    assert pk_table.compact(full=True) is None  # nothing left to do


def test_batch_writer_commits_once_and_aborts_on_error(pk_table: lakelog.Table) -> None:
    with pk_table.writer() as w:
        w.write(orders("d1", [1]))
        w.write(orders("d1", [2]))
        w.delete(pa.table({"dt": ["d1"], "id": [1]}))
    assert len(pk_table.snapshots()) == 1
    assert pk_table.to_arrow().column("id").to_pylist() == [2]
    with pytest.raises(RuntimeError), pk_table.writer() as w:
        w.write(orders("d1", [3]))
        raise RuntimeError("boom")
    assert len(pk_table.snapshots()) == 1


def test_append_table_unaware_and_fixed_bucket(catalog: lakelog.Catalog) -> None:
    a = catalog.create_table("db.log", ORDERS, partition_by=["dt"])
    a.write(orders("d1", [1, 1, 2]))
    a.write(orders("d1", [1]))
    assert a.to_arrow().num_rows == 4
    with pytest.raises(InvalidInputError):
        a.delete(pa.table({"dt": ["d1"], "id": [1]}))
    b = catalog.create_table("db.log2", ORDERS, options={"bucket": "2", "bucket-key": "id"})
    b.write(orders("d1", list(range(10))))
    assert sorted(b.to_arrow().column("id").to_pylist()) == list(range(10))
    assert {f["bucket"] for f in b.files().to_pylist()} == {0, 1}
    b.write(orders("d1", list(range(10))))
    b.compact()
    assert b.to_arrow().num_rows == 20


def test_bad_input_is_named_and_nothing_is_written(pk_table: lakelog.Table) -> None:
    bad = pa.table({"dt": ["d1", None], "id": [1, 2]})
    with pytest.raises((InvalidInputError, SchemaError), match="dt"):
        pk_table.write(bad)
    with pytest.raises(SchemaError, match="nope"):
        pk_table.write(pa.table({"dt": ["d1"], "id": [1], "nope": [1]}))
    with pytest.raises(SchemaError, match="amount"):
        pk_table.write(pa.table({"dt": ["d1"], "id": [1], "amount": ["not a number"]}))
    assert pk_table.snapshots() == []


def test_pandas_duckdb_and_reader(pk_table: lakelog.Table) -> None:
    import pandas as pd

    pk_table.write(pd.DataFrame({"dt": ["d1", "d1"], "id": [1, 2], "name": ["a", "b"], "amount": [1.5, 2.5]}))
    df = pk_table.to_pandas()
    assert sorted(df["id"].tolist()) == [1, 2]
    rel = pk_table.to_duckdb()
    assert rel.aggregate("sum(amount)").fetchall()[0][0] == 4.0
    assert rel.count("*").fetchall()[0][0] == 2  # the relation can run again
    reader = pk_table.to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.read_all().num_rows == 2


def test_scan_is_planned_once_and_reads_one_snapshot(pk_table: lakelog.Table) -> None:
    pk_table.write(pa.concat_tables([orders("d1", [1, 2, 3]), orders("d2", [4])]))
    scan = pk_table.scan(columns=["id", "name"], filter="dt = 'd1' AND id >= 2")
    pk_table.write(orders("d1", [5], name="late"))  # after the scan was made: not in it
    assert scan.snapshot is not None and scan.snapshot.id == 1
    assert sorted(scan.to_arrow().column("id").to_pylist()) == [2, 3]
    splits = scan.plan()
    assert {s.snapshot_id for s in splits} == {1}
    assert all(pk_table.partition_keys and s.partition for s in splits)
    by_split = pa.concat_tables([scan.read_split(s) for s in splits])
    assert sorted(by_split.column("id").to_pylist()) == [2, 3]
    assert sorted(r["id"] for b in scan.to_reader() for r in b.to_pylist()) == [2, 3]
    assert sorted(scan.to_pandas()["id"]) == [2, 3]
    assert scan.to_duckdb().aggregate("count(*)").fetchall() == [(2,)]
    # the shortcut reads the latest snapshot, with the same string filters
    assert sorted(pk_table.to_arrow(filter="dt = 'd1'").column("id").to_pylist()) == [1, 2, 3, 5]


def test_string_filters_name_what_they_cannot_parse(pk_table: lakelog.Table) -> None:
    pk_table.write(orders("d1", [1]))
    with pytest.raises(lakelog.errors.SchemaError, match="unknown column .nope."):
        pk_table.scan(filter="nope = 1")
    with pytest.raises(lakelog.errors.OptionError, match="expected a literal, found .=."):
        pk_table.to_arrow(filter="id = = 1")
    with pytest.raises(TypeError):
        pk_table.to_arrow(["id"])  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize("retries,attempts", [("0", 1), ("2", 3), (None, 11)])
def test_commit_max_retries_bounds_the_attempts_of_a_commit_that_keeps_losing(
    make_table: MakeTable, monkeypatch: pytest.MonkeyPatch, retries: str | None, attempts: int
) -> None:
    from lakelog.connector.errors import CommitConflictError
    from lakelog.connector.format.snapshot import SnapshotManager
    from lakelog.connector.table import commit

    t = make_table(options={"commit.max-retries": retries} if retries is not None else None)
    tries: list[int] = []
    monkeypatch.setattr(SnapshotManager, "try_commit", lambda self, s, parent=None: tries.append(s.id) or False)
    monkeypatch.setattr(commit.time, "sleep", lambda s: None)
    with pytest.raises(CommitConflictError, match=rf"after {attempts} attempts \(option 'commit.max-retries'\)"):
        t.write(pa.table({"dt": ["a"], "id": [1], "name": ["x"], "amount": [1.0]}, schema=ORDERS))
    assert len(tries) == attempts  # Paimon's default is 10 retries after the first attempt


def test_default_values_fill_nulls_and_missing_columns_on_write(catalog: lakelog.Catalog) -> None:
    schema = ORDERS.append(pa.field("qty", pa.int32(), nullable=False)).append(pa.field("day", pa.date32()))
    t = catalog.create_table(
        "db.t", schema, primary_key=["dt", "id"],
        options={"bucket": "1", "fields.name.default-value": "unknown", "fields.amount.default-value": "0.5",
                 "fields.qty.default-value": "1", "fields.day.default-value": "2024-06-01"},
    )
    t.write(pa.table({"dt": ["a", "a"], "id": [1, 2], "name": [None, "bob"], "amount": [None, 2.0]}))
    got = rows(t.to_arrow(), "id")
    assert [(r["name"], r["amount"], r["qty"]) for r in got] == [("unknown", 0.5, 1), ("bob", 2.0, 1)]
    assert {r["day"].isoformat() for r in got} == {"2024-06-01"}
    # a default set later applies to later writes; rows already written keep their nulls
    t2 = catalog.create_table("db.t2", ORDERS, primary_key=["dt", "id"], options={"bucket": "1"})
    t2.write(pa.table({"dt": ["a"], "id": [1], "name": [None], "amount": [1.0]}, schema=ORDERS))
    t2.alter(lakelog.SetOption("fields.name.default-value", "n/a"))
    t2.write(pa.table({"dt": ["a"], "id": [2], "name": [None], "amount": [1.0]}, schema=ORDERS))
    assert [r["name"] for r in rows(t2.to_arrow(), "id")] == [None, "n/a"]


@pytest.mark.parametrize(
    "key,value,fragment",
    [
        ("fields.amount.default-value", "lots", "not a value of type DOUBLE"),
        ("fields.name.default-value", "x", "partial-update"),
        ("fields.id.default-value", "1", "key column 'id'"),
    ],
)
def test_bad_default_values_are_refused_by_name(
    catalog: lakelog.Catalog, key: str, value: str, fragment: str
) -> None:
    opts = {"bucket": "1", key: value}
    if "partial-update" in fragment:
        opts["merge-engine"] = "partial-update"
    with pytest.raises(lakelog.connector.errors.OptionError, match=fragment) as e:
        catalog.create_table("db.t", ORDERS, primary_key=["dt", "id"], options=opts)
    assert repr(key) in str(e.value) or "'id'" in str(e.value)
    t = catalog.create_table("db.ok", ORDERS, primary_key=["dt", "id"], options={"bucket": "1"})
    if "partial-update" not in fragment:
        with pytest.raises(lakelog.connector.errors.OptionError, match=fragment):
            t.alter(lakelog.SetOption(key, value))


def test_file_name_options_name_data_and_changelog_files(catalog: lakelog.Catalog) -> None:
    import os

    t = catalog.create_table(
        "db.t", ORDERS, primary_key=["dt", "id"],
        options={"bucket": "1", "data-file.prefix": "part-", "changelog-file.prefix": "cl-",
                 "file.suffix.include.compression": "true", "file.compression": "snappy",
                 "changelog-producer": "input"},
    )
    t.write(pa.table({"dt": ["a"], "id": [1], "name": ["x"], "amount": [1.0]}, schema=ORDERS))
    names = sorted(f for _, _, fs in os.walk(t.path) for f in fs if "parquet" in f)
    assert len(names) == 2
    assert names[0].startswith("cl-") and names[0].endswith("-0.snappy.parquet")
    assert names[1].startswith("part-") and names[1].endswith("-0.snappy.parquet")
    entries = t.store.live_entries(t.latest_snapshot())
    assert [e.file.file_name for e in entries] == [names[1]]
    assert t.changes(0).column("id").to_pylist() == [1]
    with pytest.raises(lakelog.connector.errors.OptionError, match="'data-file.prefix'"):
        t.alter(lakelog.SetOption("data-file.prefix", "../x-"))
    pytest.importorskip("pypaimon")
    from .interop_util import pp_read

    assert pp_read(catalog.warehouse, "db.t").column("id").to_pylist() == [1]  # Paimon reads names from manifests


def test_the_system_database_name_is_reserved(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``sys`` holds Paimon's global system tables (sys.tables...): no database or table may take it."""
    from lakelog.connector.errors import CatalogError

    cat = lakelog.Catalog(str(tmp_path / "wh"))
    cat.create_database("shop")
    for make in (lambda: cat.create_database("sys"), lambda: cat.rename_database("shop", "sys"),
                 lambda: cat.create_table("sys.t", ORDERS)):  # fmt: skip
        with pytest.raises(CatalogError, match="'sys' is the system database"):
            make()
    assert sorted(cat.list_databases()) == ["shop"]
