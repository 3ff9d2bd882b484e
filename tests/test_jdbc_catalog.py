"""The JDBC catalog (``metastore = jdbc``) on SQLite (unit tests) and on a real PostgreSQL server
(the ``postgres`` mark): names in Paimon's tables, every change one transaction that agrees with
the warehouse, what an interrupted change leaves, and one clear error for each bad input."""

from __future__ import annotations

import os
import pickle
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.catalog.jdbc import JdbcMetastore
from lakelog.connector.catalog.jdbc_lock import JdbcLock
from lakelog.connector.errors import (
    CorruptTableError,
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    MetastoreError,
    OptionError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.schema_manager import SchemaManager
from tests.jdbc_fixtures import sqlite_options

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
ROWS = pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA)


def _rows(cat: lakelog.Catalog, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of a query on the catalog's own database (what Paimon's JdbcCatalog would read)."""
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    return ms.db.run(lambda tx: tx.query(sql, args), write=False)


def _names(cat: lakelog.Catalog) -> list[tuple[str, str]]:
    key = cat.metastore.key  # type: ignore[attr-defined]
    rows = _rows(cat, "SELECT database_name, table_name FROM paimon_tables WHERE catalog_key = ?", key)
    return sorted((str(d), str(t)) for d, t in rows)


@pytest.fixture()
def cat(jdbc_options: dict[str, str], tmp_path: Path) -> lakelog.Catalog:
    return lakelog.Catalog(str(tmp_path / "wh"), options=jdbc_options)


def test_tables_are_registered_in_paimons_tables_and_files_stay_in_the_warehouse(cat: lakelog.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(ROWS)
    assert _names(cat) == [("db", "t")]
    assert cat.list_databases() == ["db"] and cat.list_tables("db") == ["t"]
    assert cat.table_exists("db.t") and not cat.table_exists("db.u")
    key = cat.metastore.key  # type: ignore[attr-defined]
    props = dict(_rows(cat, "SELECT property_key, property_value FROM paimon_database_properties "
                            "WHERE catalog_key = ? AND database_name = 'db'", key))
    assert props == {"exists": "true", "location": cat.database_path("db")}
    tprops = dict(_rows(cat, "SELECT property_key, property_value FROM paimon_table_properties "
                             "WHERE catalog_key = ? AND table_name = 't'", key))
    assert tprops == {"bucket": "2", "primary-key": "id", "bucket-key": "id"}
    assert SchemaManager(FileIO(), cat.table_path("db.t")).list_ids() == [0]
    assert cat.get_table("db.t").to_arrow().sort_by("id").equals(ROWS)


def test_paimons_table_layout_is_created_on_first_use(cat: lakelog.Catalog) -> None:
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    expected = {
        "paimon_tables": ["catalog_key", "database_name", "table_name"],
        "paimon_database_properties": ["catalog_key", "database_name", "property_key", "property_value"],
        "paimon_table_properties": ["catalog_key", "database_name", "table_name", "property_key",
                                    "property_value"],
    }
    for table, columns in expected.items():
        if ms.db.dialect == "sqlite":
            got = [r[1] for r in _rows(cat, f"PRAGMA table_info({table})")]
        else:
            got = [r[0] for r in _rows(cat, "SELECT column_name FROM information_schema.columns WHERE "
                                            "table_name = ? ORDER BY ordinal_position", table)]
        assert got == columns, table
    # a second catalog on the same database finds them and creates nothing twice
    lakelog.Catalog(cat.warehouse, options=cat.options).create_database("other")


def test_create_twice_and_exist_ok(cat: lakelog.Catalog) -> None:
    cat.create_table("db.t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match="db.t"):
        cat.create_table("db.t", SCHEMA)
    assert cat.create_table("db.t", SCHEMA, exist_ok=True).identifier == "db.t"
    assert _names(cat) == [("db", "t")]


def test_databases(cat: lakelog.Catalog) -> None:
    cat.create_database("a")
    with pytest.raises(DatabaseAlreadyExistsError):
        cat.create_database("a")
    cat.create_database("a", exist_ok=True)
    assert cat.database_exists("a") and not cat.database_exists("b")
    cat.create_table("a.t", SCHEMA).write(ROWS)
    with pytest.raises(DatabaseNotEmptyError, match="cascade"):
        cat.drop_database("a")
    cat.rename_database("a", "b")
    assert cat.list_databases() == ["b"] and cat.list_tables("b") == ["t"]
    assert cat.get_table("b.t").to_arrow().num_rows == 2
    assert not os.path.exists(cat.database_path("a"))
    with pytest.raises(DatabaseNotFoundError):
        cat.list_tables("a")
    cat.drop_database("b", cascade=True)
    assert cat.list_databases() == [] and _names(cat) == []
    assert not os.path.exists(cat.table_path("b.t"))
    with pytest.raises(DatabaseNotFoundError):
        cat.drop_database("b")
    cat.drop_database("b", missing_ok=True)


def test_drop_and_rename_agree_with_the_warehouse(cat: lakelog.Catalog) -> None:
    cat.create_table("db.t", SCHEMA, options={"file.format": "parquet"}).write(ROWS)
    cat.create_database("db2")
    cat.rename_table("db.t", "db2.u")
    assert _names(cat) == [("db2", "u")]
    assert not os.path.exists(cat.table_path("db.t")) and os.path.isdir(cat.table_path("db2.u"))
    assert cat.get_table("db2.u").to_arrow().num_rows == 2
    key = cat.metastore.key  # type: ignore[attr-defined]
    assert _rows(cat, "SELECT DISTINCT database_name, table_name FROM paimon_table_properties WHERE "
                      "catalog_key = ?", key) == [("db2", "u")]
    with pytest.raises(TableNotFoundError):
        cat.rename_table("db.t", "db.x")
    cat.create_table("db.t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        cat.rename_table("db.t", "db2.u")
    with pytest.raises(DatabaseNotFoundError):
        cat.rename_table("db.t", "nodb.t")
    cat.drop_table("db2.u")
    assert _names(cat) == [("db", "t")] and not os.path.exists(cat.table_path("db2.u"))
    with pytest.raises(TableNotFoundError):
        cat.get_table("db2.u")
    with pytest.raises(TableNotFoundError):
        cat.drop_table("db2.u")
    cat.drop_table("db2.u", missing_ok=True)


def test_a_drop_by_one_catalog_is_seen_by_every_other(cat: lakelog.Catalog) -> None:
    other = lakelog.Catalog(cat.warehouse, options=cat.options)
    cat.create_table("db.t", SCHEMA).write(ROWS)
    assert other.get_table("db.t").to_arrow().num_rows == 2
    other.drop_table("db.t")
    assert cat.list_tables("db") == []
    with pytest.raises(TableNotFoundError):
        cat.get_table("db.t")
    cat.create_table("db.t", SCHEMA)  # the name is free again, with no trace of the old table
    assert cat.get_table("db.t").to_arrow().num_rows == 0


def test_catalog_keys_share_one_database(cat: lakelog.Catalog, tmp_path: Path) -> None:
    other = lakelog.Catalog(str(tmp_path / "wh2"), options={**cat.options, "catalog-key": "second"})
    cat.create_table("db.t", SCHEMA)
    other.create_table("db.u", SCHEMA)
    assert cat.list_tables("db") == ["t"] and other.list_tables("db") == ["u"]
    other.drop_database("db", cascade=True)
    assert cat.list_tables("db") == ["t"]


def test_an_alter_updates_the_copied_options(cat: lakelog.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA)
    t.alter(lakelog.SetOption("snapshot.num-retained.min", "3"))
    key = cat.metastore.key  # type: ignore[attr-defined]
    props = dict(_rows(cat, "SELECT property_key, property_value FROM paimon_table_properties "
                            "WHERE catalog_key = ? AND table_name = 't'", key))
    assert props["snapshot.num-retained.min"] == "3"
    off = lakelog.Catalog(cat.warehouse, options={**cat.options, "sync-all-properties": "false"})
    off.create_table("db.u", SCHEMA)
    assert not _rows(cat, "SELECT 1 FROM paimon_table_properties WHERE catalog_key = ? AND table_name = 'u'",
                     key)


# ---- what a failed or interrupted change leaves ---------------------------------------------------------
def test_a_create_whose_schema_write_fails_registers_nothing(cat: lakelog.Catalog,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: SchemaManager, schema: Any) -> Any:
        os.makedirs(os.path.join(self.table_path, "schema"), exist_ok=True)
        raise StorageError("cannot write schema-0: disk full")

    monkeypatch.setattr(SchemaManager, "create_table", broken)
    with pytest.raises(StorageError, match="disk full"):
        cat.create_table("db.t", SCHEMA)
    monkeypatch.undo()
    assert _names(cat) == []
    cat.create_table("db.t", SCHEMA)  # what the failed create left is replaced
    assert _names(cat) == [("db", "t")]


def test_a_create_failing_after_its_files_removes_them(cat: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    import lakelog.connector.catalog.jdbc as jdbc_module

    def broken(*args: Any) -> None:
        raise MetastoreError("the connection broke")

    monkeypatch.setattr(jdbc_module, "write_table_properties", broken)
    monkeypatch.setattr(JdbcMetastore, "_committed_anyway", lambda *a: False)
    with pytest.raises(MetastoreError):
        cat.create_table("db.t", SCHEMA)
    assert _names(cat) == [] and not os.path.exists(cat.table_path("db.t"))


def test_a_commit_whose_answer_was_lost_keeps_the_table(cat: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    real_run = ms.db.run

    def run(fn: Any, **kw: Any) -> Any:
        out = real_run(fn, **kw)
        if kw.get("what", "").startswith("create table"):
            raise MetastoreError("server closed the connection unexpectedly")  # after the commit
        return out

    monkeypatch.setattr(ms.db, "run", run)
    t = cat.create_table("db.t", SCHEMA)
    monkeypatch.undo()
    assert t.identifier == "db.t" and _names(cat) == [("db", "t")]
    assert SchemaManager(FileIO(), cat.table_path("db.t")).list_ids() == [0]


def test_an_unregistered_directory_with_data_is_refused_by_name(cat: lakelog.Catalog) -> None:
    cat.create_table("db.t", SCHEMA).write(ROWS)
    ms = cat.metastore
    assert isinstance(ms, JdbcMetastore)
    # an interrupted drop of Paimon's order (row deleted, files not yet)
    ms.db.run(lambda tx: tx.execute("DELETE FROM paimon_tables WHERE catalog_key = ?", (ms.key,)))
    assert cat.list_tables("db") == []
    with pytest.raises(TableNotFoundError):
        cat.get_table("db.t")
    with pytest.raises(CorruptTableError, match=cat.table_path("db.t")):
        cat.create_table("db.t", SCHEMA)
    assert _names(cat) == []  # the refused create rolled back


def test_a_drop_that_fails_half_way_leaves_the_table_registered(cat: lakelog.Catalog,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cat.create_table("db.t", SCHEMA).write(ROWS)
    path = cat.table_path("db.t")

    def half(self: FileIO, p: str) -> None:
        os.remove(os.path.join(p, "schema", "schema-0"))
        raise StorageError(f"cannot delete {p}: I/O error")

    monkeypatch.setattr(FileIO, "delete_dir", half)
    with pytest.raises(StorageError):
        cat.drop_table("db.t")
    monkeypatch.undo()
    assert _names(cat) == [("db", "t")]
    with pytest.raises(CorruptTableError):
        cat.get_table("db.t")  # visible, as damaged
    cat.drop_table("db.t")  # and dropping it again finishes
    assert _names(cat) == [] and not os.path.exists(path)


def test_a_rename_interrupted_after_moving_the_files_finishes_on_the_next_rename(cat: lakelog.Catalog) -> None:
    cat.create_table("db.t", SCHEMA).write(ROWS)
    os.rename(cat.table_path("db.t"), cat.table_path("db.u"))  # moved; the commit never happened
    with pytest.raises(CorruptTableError):
        cat.get_table("db.t")
    cat.rename_table("db.t", "db.u")
    assert _names(cat) == [("db", "u")] and cat.get_table("db.u").to_arrow().num_rows == 2


def test_a_rename_whose_move_fails_renames_nothing(cat: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    cat.create_table("db.t", SCHEMA)

    def fail(self: FileIO, src: str, dst: str) -> None:
        raise StorageError(f"cannot rename {src}: read-only file system")

    monkeypatch.setattr(FileIO, "rename_dir", fail)
    with pytest.raises(StorageError):
        cat.rename_table("db.t", "db.u")
    monkeypatch.undo()
    assert _names(cat) == [("db", "t")] and cat.get_table("db.t").identifier == "db.t"


# ---- the lock and pickling ---------------------------------------------------------------------------------
def test_a_table_of_a_locking_catalog_commits_under_the_jdbc_lock(jdbc_options: dict[str, str],
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"), options={**jdbc_options, "lock.enabled": "true"})
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    provider = t.store.snapshot_manager.lock_provider
    assert isinstance(provider, JdbcLock)
    seen: list[list[tuple[Any, ...]]] = []
    real = JdbcLock.__call__

    def spy(self: JdbcLock, snapshot_dir: str, timeout_s: float) -> Any:
        cm = real(self, snapshot_dir, timeout_s)

        class Watch:
            def __enter__(self_inner) -> Any:
                hold = cm.__enter__()
                seen.append(_rows(cat, "SELECT lock_id FROM paimon_distributed_locks"))
                return hold

            def __exit__(self_inner, *exc: Any) -> Any:
                return cm.__exit__(*exc)

        return Watch()

    monkeypatch.setattr(JdbcLock, "__call__", spy)
    t.write(ROWS)
    key = cat.metastore.key  # type: ignore[attr-defined]
    assert seen and all((f"{key}.db.t",) in rows for rows in seen)
    # released (the PostgreSQL tests' catalogs share one lock table: other keys may hold rows)
    assert [r for r in _rows(cat, "SELECT lock_id FROM paimon_distributed_locks") if str(r[0]).startswith(f"{key}.")] == []
    # without lock.enabled a table keeps the file IO's lock
    plain = lakelog.Catalog(str(tmp_path / "wh"), options=jdbc_options).get_table("db.t")
    assert plain.store.snapshot_manager.lock_provider is None


def test_the_store_with_its_lock_pickles_and_connects_again(jdbc_options: dict[str, str], tmp_path: Path) -> None:
    cat = lakelog.Catalog(str(tmp_path / "wh"), options={**jdbc_options, "lock.enabled": "true"})
    t = cat.create_table("db.t", SCHEMA)
    with t.store.snapshot_manager.lock():
        pass  # a connection is open now
    store = pickle.loads(pickle.dumps(t.store))
    assert isinstance(store.snapshot_manager.lock_provider, JdbcLock)
    with store.snapshot_manager.lock() as hold:
        assert not hold.lost()


# ---- bad input: one clear error each, no secret in it -------------------------------------------------------
def test_bad_uris_and_options(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    cases: list[tuple[dict[str, str], type, str]] = [
        ({"metastore": "jdbc"}, OptionError, "needs option 'uri'"),
        ({"metastore": "jdbc", "uri": "jdbc:mysql://h/db"}, OptionError, "driver 'mysql' is not supported"),
        ({"metastore": "jdbc", "uri": "http://h/db"}, OptionError, "not a JDBC URI"),
        ({"metastore": "jdbc", "uri": "jdbc:sqlite::memory:"}, OptionError, "in-memory"),
        ({"metastore": "hive"}, OptionError, "'metastore' = 'hive' is not supported"),
        ({**sqlite_options(tmp_path / "c.db"), "lock.enable": "true"}, OptionError, "did you mean 'lock.enabled'"),
        ({**sqlite_options(tmp_path / "c.db"), "lock.enabled": "yes"}, OptionError, "'lock.enabled'"),
        ({**sqlite_options(tmp_path / "c.db"), "lock-lease-timeout": "1 s"}, OptionError, "at least 3 s"),
        ({**sqlite_options(tmp_path / "c.db"), "jdbc.journal": "wal"}, OptionError, "jdbc.journal"),
        (sqlite_options(tmp_path / "missing" / "c.db"), MetastoreError, "directory .* does not exist"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            lakelog.Catalog(wh, options=options)
    notdb = tmp_path / "not.db"
    notdb.write_bytes(b"this is not a database file, it is plain text" * 20)
    with pytest.raises(MetastoreError, match="not a database"):
        lakelog.Catalog(wh, options=sqlite_options(notdb))


@pytest.mark.postgres
def test_postgres_connection_errors_name_the_reason_and_no_secret(postgres: Any, tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    good = postgres.options()
    with pytest.raises(MetastoreError, match="refused the user name or password of user 'lakelog'") as e:
        lakelog.Catalog(wh, options={**good, "jdbc.password": "not-the-password-123"})
    assert "not-the-password-123" not in str(e.value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(MetastoreError, match="connection refused"):
        lakelog.Catalog(wh, options={**good, "uri": f"jdbc:postgresql://127.0.0.1:{closed_port}/catalog"})
    with socket.socket() as silent:  # accepts the TCP connection and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(MetastoreError, match="no answer within 2 s"):
            lakelog.Catalog(wh, options={**good, "uri": f"jdbc:postgresql://127.0.0.1:{port}/catalog",
                                         "jdbc.connectTimeout": "2"})
    with pytest.raises(MetastoreError, match="does not exist"):
        lakelog.Catalog(wh, options={**good, "uri": postgres.uri("no_such_db")})
    with pytest.raises(OptionError, match="give the user and password as 'jdbc.user'") as e2:
        lakelog.Catalog(wh, options={**good, "uri": f"jdbc:postgresql://u:pw123@127.0.0.1:{postgres.port}/x"})
    assert "pw123" not in str(e2.value)
    # a password in the URI is masked wherever the catalog is shown
    cat = lakelog.Catalog(wh, options={"metastore": "jdbc", "uri": postgres.uri() + f"?user=lakelog&password={postgres.password}"})
    for text in (repr(cat), str(cat.metastore.describe()), repr(cat.metastore.options), repr(cat.metastore.target)):
        assert postgres.password not in text, text


def test_secrets_stay_out_of_sqlite_messages_and_reprs(tmp_path: Path) -> None:
    options = {**sqlite_options(tmp_path / "c.db"), "jdbc.password": "hunter2-secret"}
    cat = lakelog.Catalog(str(tmp_path / "wh"), options=options)
    t = cat.create_table("db.t", SCHEMA)
    for text in (repr(cat), repr(cat.metastore.options), repr(t), repr(cat.metastore.target)):
        assert "hunter2-secret" not in text


def test_a_locked_sqlite_database_is_named_when_it_stays_locked(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    cat = lakelog.Catalog(str(tmp_path / "wh"), options={**sqlite_options(db), "jdbc.busy_timeout": "300"})
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(MetastoreError, match="could not .*db.t.*locked.*0.3 s"):
            cat.create_table("db.t", SCHEMA)
    finally:
        other.execute("ROLLBACK")
    cat.create_table("db.t", SCHEMA)


# ---- the command line ---------------------------------------------------------------------------------------
def test_the_cli_opens_a_jdbc_catalog_with_option_flags(jdbc_options: dict[str, str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from lakelog.jobs.cli import main

    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh, options=jdbc_options)
    cat.create_table("db.t", SCHEMA, primary_key=["id"]).write(ROWS)
    # an unregistered table directory: the file-system view lists it, the JDBC one does not
    lakelog.Catalog(wh).create_table("db.stray", SCHEMA)
    flags = [f"--option={k}={v}" for k, v in jdbc_options.items() if k != "jdbc.password"]
    if "jdbc.password" in jdbc_options:
        secret = tmp_path / "pw"
        secret.write_text(jdbc_options["jdbc.password"] + "\n")
        flags.append(f"--option=jdbc.password=@{secret}")
    assert main(["--warehouse", wh, flags[0], "tables", *flags[1:]]) == 0
    assert capsys.readouterr().out.split() == ["db.t"]
    assert main(["--warehouse", wh, "tables"]) == 0
    assert capsys.readouterr().out.split() == ["db.stray", "db.t"]
    assert main(["--warehouse", wh, "show", "db.t", *flags]) == 0
    assert "snapshots (1)" in capsys.readouterr().out
    assert main(["--warehouse", wh, "tables", "--option", "metastore=jdbc", "--option", "uri=jdbc:nope:x"]) == 2
    assert "driver 'nope' is not supported" in capsys.readouterr().err
    assert main(["--warehouse", wh, "tables", "--option", "metastore"]) == 2
    assert "expected key=value" in capsys.readouterr().err


def test_jdbc_uris_are_read_as_paimons_drivers_read_them() -> None:
    from lakelog.connector.catalog.jdbc_connect import parse_jdbc_uri

    t = parse_jdbc_uri("jdbc:postgresql://db.example:6543/cat?user=u&password=pw1&ssl=true&currentSchema=s",
                       {"ApplicationName": "app", "password": "pw2"})
    p = dict(t.pg_params)
    assert (p["host"], p["port"], p["dbname"], p["user"], p["password"]) == ("db.example", "6543", "cat", "u", "pw2")
    assert p["sslmode"] == "require" and p["application_name"] == "app" and p["connect_timeout"] == "10"
    assert "-c search_path=s" in p["options"] and "-c TimeZone=UTC" in p["options"]
    assert "pw1" not in t.uri and "pw1" not in repr(t) and t.scrub("x pw1 pw2 y") == "x *** *** y"
    two = parse_jdbc_uri("jdbc:postgresql://[::1]:5433,h2/db", {})
    assert (two.pg_params["host"], two.pg_params["port"]) == ("::1,h2", "5433,5432")
    bare = parse_jdbc_uri("jdbc:postgresql:mydb", {})
    assert (bare.pg_params["host"], bare.pg_params["port"], bare.pg_params["dbname"]) == ("localhost", "5432", "mydb")
    rel = parse_jdbc_uri("jdbc:sqlite:relative.db", {"busy_timeout": "2500"})
    assert rel.sqlite_path == os.path.abspath("relative.db") and rel.busy_timeout_s == 2.5
    with pytest.raises(OptionError, match="names no database"):
        parse_jdbc_uri("jdbc:postgresql://h:1/", {})
    with pytest.raises(OptionError, match="'sslfactory' .* not supported"):
        parse_jdbc_uri("jdbc:postgresql://h/db", {"sslfactory": "x"})
