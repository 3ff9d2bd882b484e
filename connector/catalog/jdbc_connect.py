"""Reaching the database of a JDBC catalog: Paimon's ``uri`` and ``jdbc.*`` options, turned into a
connection of Python's drivers (``sqlite3`` for ``jdbc:sqlite:``, ``psycopg`` 3 for
``jdbc:postgresql:``), opened lazily once per process and dropped when pickled.

Secrets (a password, in ``jdbc.password`` or in the URI) never appear in a message or a repr:
:attr:`JdbcTarget.uri` is the URI with them masked, and every driver message is scrubbed of them
before it becomes a :class:`~lakelog.connector.errors.MetastoreError`.

Transactions (:meth:`SqlDatabase.transaction`): SQLite's take the database's write lock up front
(``BEGIN IMMEDIATE``), so two writers queue instead of failing half-way; PostgreSQL's run in READ
COMMITTED, where an insert of a key another open transaction inserted waits for that one to end.
Statements are written with ``?`` placeholders and carry no ``%``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar

from lakelog.connector.errors import MetastoreError, OptionError

__all__ = ["JdbcTarget", "SqlDatabase", "Tx", "UniqueViolation", "parse_jdbc_uri", "DIALECTS"]

T = TypeVar("T")
DIALECTS = ("sqlite", "postgresql")
_MASK = "***"
_DEFAULT_CONNECT_TIMEOUT_S = 10  # PostgreSQL's JDBC driver's connectTimeout default
_DEFAULT_BUSY_TIMEOUT_S = 60.0  # how long a SQLite statement waits for another writer

# JDBC properties of PostgreSQL's driver that lakelog honours, and their libpq names
_PG_PROPERTIES = {
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "ApplicationName": "application_name",
    "connectTimeout": "connect_timeout",
}
_PG_EXTRA = ("ssl", "currentSchema", "options", "tcpKeepAlive")
_SQLITE_PROPERTIES = ("busy_timeout", "user", "password")  # sqlite-jdbc ignores a user and password


class UniqueViolation(Exception):
    """A statement broke a primary key (another transaction holds the name)."""


@dataclass(frozen=True)
class JdbcTarget:
    """Where a JDBC catalog's database is: the dialect and what the Python driver connects with."""

    dialect: str
    uri: str  # masked: for messages
    sqlite_path: Optional[str] = None
    sqlite_uri: bool = False  # sqlite_path is a file: URI
    busy_timeout_s: float = _DEFAULT_BUSY_TIMEOUT_S
    pg_params: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        return f"JdbcTarget({self.uri!r})"

    def scrub(self, text: str) -> str:
        """``text`` with every secret masked."""
        for s in self.secrets:
            if s:
                text = text.replace(s, _MASK)
        return text

    @property
    def identity(self) -> str:
        """The database, as a key of in-process lock queues (no secret)."""
        if self.dialect == "sqlite":
            return f"sqlite:{os.path.realpath(self.sqlite_path or '')}"
        p = self.pg_params
        return f"postgresql://{p.get('host')}:{p.get('port')}/{p.get('dbname')}"


def _mask_uri(uri: str, secrets: Sequence[str]) -> str:
    out = re.sub(r"(?i)(password=)[^&;]*", r"\1" + _MASK, uri)
    out = re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1" + _MASK + "@", out)
    for s in secrets:
        if s:
            out = out.replace(s, _MASK)
    return out


def parse_jdbc_uri(uri: str, properties: Mapping[str, str]) -> JdbcTarget:
    """The target of Paimon's ``uri`` option; ``properties`` are the ``jdbc.*`` options without
    their prefix (they win over the URI's own parameters). :class:`OptionError` names what is
    wrong: an unknown scheme, a malformed URI, a property lakelog does not know."""
    if not isinstance(uri, str) or not uri.strip():
        raise OptionError(
            "a JDBC catalog needs option 'uri' (jdbc:sqlite:<file> or jdbc:postgresql://host:port/database)"
        )
    text = uri.strip()
    secrets = tuple(v for k, v in properties.items() if k.lower() == "password" and v)
    if text.startswith("jdbc:sqlite:"):
        return _sqlite(text, properties, secrets)
    if text.startswith("jdbc:postgresql:"):
        return _postgresql(text, properties, secrets)
    m = re.match(r"^jdbc:([A-Za-z0-9_-]+):", text)
    masked = _mask_uri(text, secrets)
    if m:
        raise OptionError(
            f"catalog option 'uri' = {masked!r}: the JDBC driver {m.group(1)!r} is not supported by "
            "lakelog's JDBC catalog; use jdbc:sqlite:<file> or jdbc:postgresql://host:port/database"
        )
    raise OptionError(
        f"catalog option 'uri' = {masked!r} is not a JDBC URI: use jdbc:sqlite:<file> or "
        "jdbc:postgresql://host:port/database"
    )


def _sqlite(text: str, properties: Mapping[str, str], secrets: tuple[str, ...]) -> JdbcTarget:
    path = text[len("jdbc:sqlite:") :]
    unknown = sorted(k for k in properties if k not in _SQLITE_PROPERTIES)
    if unknown:
        raise OptionError(
            f"catalog option(s) {', '.join('jdbc.' + k for k in unknown)} are not supported for SQLite "
            f"(lakelog takes {', '.join('jdbc.' + k for k in _SQLITE_PROPERTIES)})"
        )
    if not path or path == ":memory:" or "mode=memory" in path:
        raise OptionError(
            f"catalog option 'uri' = {text!r}: an in-memory SQLite database is private to one connection; "
            "a JDBC catalog needs a file (jdbc:sqlite:/path/catalog.db)"
        )
    busy = _DEFAULT_BUSY_TIMEOUT_S
    if "busy_timeout" in properties:
        raw = properties["busy_timeout"]
        if not str(raw).strip().isdigit():
            raise OptionError(
                f"catalog option 'jdbc.busy_timeout' = {raw!r}: expected milliseconds (a whole number)"
            )
        busy = int(raw) / 1000
    is_uri = path.startswith("file:")
    if not is_uri:
        path = os.path.abspath(path)
    return JdbcTarget("sqlite", text, sqlite_path=path, sqlite_uri=is_uri, busy_timeout_s=busy,
                      secrets=secrets)


def _postgresql(text: str, properties: Mapping[str, str], secrets: tuple[str, ...]) -> JdbcTarget:
    rest = text[len("jdbc:postgresql:") :]
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
    params: dict[str, str] = {}
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        params[k] = v
    secrets = secrets + tuple(v for k, v in params.items() if k.lower() == "password" and v)
    masked = _mask_uri(text, secrets)
    if rest.startswith("//"):
        hosts, _, dbname = rest[2:].partition("/")
        if "@" in hosts:
            raise OptionError(
                f"catalog option 'uri' = {masked!r}: give the user and password as 'jdbc.user' and "
                "'jdbc.password' (PostgreSQL's JDBC driver takes none in the host part)"
            )
        host_list, port_list = [], []
        for hp in (hosts or "localhost").split(","):
            m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d+))?|([^:\[\]]*)(?::(\d+))?", hp)
            if m is None:
                raise OptionError(f"catalog option 'uri' = {masked!r}: cannot read host {hp!r}")
            host_list.append(m.group(1) or m.group(3) or "localhost")
            port_list.append(m.group(2) or m.group(4) or "5432")
    else:
        host_list, port_list, dbname = ["localhost"], ["5432"], rest
    dbname = urllib.parse.unquote(dbname.strip("/"))
    if not dbname:
        raise OptionError(
            f"catalog option 'uri' = {masked!r} names no database (jdbc:postgresql://host:port/database)"
        )
    merged = {**params, **{str(k): str(v) for k, v in properties.items()}}
    unknown = sorted(k for k in merged if k not in _PG_PROPERTIES and k not in _PG_EXTRA)
    if unknown:
        raise OptionError(
            f"JDBC propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(repr(k) for k in unknown)} of "
            f"{masked!r} {'is' if len(unknown) == 1 else 'are'} not supported by lakelog's PostgreSQL "
            f"connection; it takes {', '.join(sorted([*_PG_PROPERTIES, *_PG_EXTRA]))} (as 'jdbc.<name>' "
            "options or URI parameters)"
        )
    pg: dict[str, str] = {"host": ",".join(host_list), "port": ",".join(port_list), "dbname": dbname}
    for k, v in merged.items():
        if k in _PG_PROPERTIES:
            pg[_PG_PROPERTIES[k]] = v
    if merged.get("ssl", "").lower() == "true" and "sslmode" not in pg:
        pg["sslmode"] = "require"
    if merged.get("tcpKeepAlive", "").lower() == "true":
        pg["keepalives"] = "1"
    timeout = pg.get("connect_timeout", str(_DEFAULT_CONNECT_TIMEOUT_S))
    if not timeout.strip().isdigit():
        raise OptionError(
            f"JDBC property 'connectTimeout' = {timeout!r} of {masked!r}: expected whole seconds"
        )
    pg["connect_timeout"] = timeout.strip()
    # the lock table's timestamps are the server's clock in UTC, whatever the server's zone
    opts = ["-c TimeZone=UTC"]
    if merged.get("currentSchema"):
        opts.append(f"-c search_path={merged['currentSchema']}")
    if merged.get("options"):
        opts.append(merged["options"])
    pg["options"] = " ".join(opts)
    return JdbcTarget("postgresql", masked, pg_params=pg, secrets=secrets)


# ---- connections -------------------------------------------------------------------------------------
class Tx:
    """A statement runner inside one transaction (or one autocommit statement)."""

    def __init__(self, db: SqlDatabase, conn: Any) -> None:
        self._db, self._conn = db, conn

    def _sql(self, sql: str) -> str:
        return sql if self._db.dialect == "sqlite" else sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed. :class:`UniqueViolation` when it
        broke a primary key."""
        try:
            cur = self._conn.execute(self._sql(sql), tuple(params))
        except Exception as e:
            if self._db.is_unique_violation(e):
                raise UniqueViolation(str(e)) from e
            raise
        return int(cur.rowcount if cur.rowcount is not None else -1)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._conn.execute(self._sql(sql), tuple(params)).fetchall()]


class SqlDatabase:
    """One database of a JDBC catalog, reached lazily: one connection per process and instance,
    shared by its threads one statement or transaction at a time; it pickles without it."""

    def __init__(self, target: JdbcTarget) -> None:
        self.target = target
        self._conn: Any = None
        self._pid = 0
        self._guard = threading.RLock()

    @property
    def dialect(self) -> str:
        return self.target.dialect

    def __repr__(self) -> str:
        return f"SqlDatabase({self.target.uri!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"target": self.target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["target"])  # type: ignore[misc]

    # -- connecting
    def _connection(self) -> Any:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None  # a connection inherited through fork() belongs to the parent
        self._conn = self._connect()
        self._pid = os.getpid()
        return self._conn

    def _connect(self) -> Any:
        t = self.target
        if t.dialect == "sqlite":
            assert t.sqlite_path is not None
            if not t.sqlite_uri:
                parent = os.path.dirname(t.sqlite_path)
                if not os.path.isdir(parent):
                    raise MetastoreError(
                        f"cannot open the JDBC catalog's SQLite database {t.uri}: its directory {parent} "
                        "does not exist"
                    )
            try:
                conn = sqlite3.connect(
                    t.sqlite_path, timeout=t.busy_timeout_s, isolation_level=None,
                    check_same_thread=False, uri=t.sqlite_uri,
                )
                # a file that is no database fails here, not in the middle of a catalog operation
                conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            except sqlite3.Error as e:
                raise MetastoreError(f"cannot open the JDBC catalog's SQLite database {t.uri}: {e}") from None
            return conn
        try:
            import psycopg
        except ImportError:
            raise MetastoreError(
                f"the JDBC catalog at {t.uri} needs PostgreSQL's Python driver: pip install 'psycopg[binary]'"
            ) from None
        try:
            params: dict[str, Any] = dict(t.pg_params)
            return psycopg.connect(autocommit=True, **params)
        except psycopg.Error as e:
            raise MetastoreError(
                f"cannot connect to the JDBC catalog at {t.uri}: {self._reason(e)}"
            ) from None

    def _reason(self, e: BaseException) -> str:
        text = self.target.scrub(" ".join(str(e).split()))
        if "password authentication failed" in text:
            user = self.target.pg_params.get("user", "")
            who = f" of user {user!r}" if user else ""
            return f"the server refused the user name or password{who} ({text})"
        if "timeout expired" in text:
            timeout = self.target.pg_params.get("connect_timeout")
            return f"no answer within {timeout} s (jdbc.connectTimeout): is the server up? ({text})"
        if "Connection refused" in text:
            return f"connection refused: no server listens there ({text})"
        return text

    def close(self) -> None:
        with self._guard:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                with contextlib.suppress(Exception):  # closing a broken connection
                    conn.close()

    def is_unique_violation(self, e: BaseException) -> bool:
        if self.dialect == "sqlite":
            return isinstance(e, sqlite3.IntegrityError)
        return getattr(e, "sqlstate", None) == "23505"

    def _is_connection_error(self, e: BaseException) -> bool:
        if self.dialect == "sqlite":
            return False
        import psycopg

        return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError))

    # -- running
    def run(self, fn: Callable[[Tx], T], *, write: bool = True, what: str = "use") -> T:
        """``fn`` in one transaction (committed when it returns, rolled back when it raises).
        Driver errors become :class:`MetastoreError` naming ``what`` was being done; a read whose
        connection broke is tried once more on a new one."""
        for attempt in (0, 1):
            with self._guard:
                conn = self._connection()
                try:
                    with self._transaction(conn, write) as tx:
                        return fn(tx)
                except (UniqueViolation, MetastoreError):
                    raise
                except Exception as e:
                    if self._is_driver_error(e):
                        broken = self._is_connection_error(e)
                        if broken:
                            self.close()
                        if broken and not write and attempt == 0:
                            continue
                        raise MetastoreError(self._failed(what, e)) from None
                    raise
        raise AssertionError("unreachable")

    def _is_driver_error(self, e: BaseException) -> bool:
        if isinstance(e, sqlite3.Error):
            return True
        mod = type(e).__module__
        return mod.startswith("psycopg")

    def _failed(self, what: str, e: BaseException) -> str:
        text = self.target.scrub(" ".join(str(e).split()))
        if self.dialect == "sqlite" and "locked" in text:
            text += f" (another process held the database for more than {self.target.busy_timeout_s:g} s)"
        return f"the JDBC catalog at {self.target.uri} could not {what}: {text}"

    @contextmanager
    def _transaction(self, conn: Any, write: bool) -> Iterator[Tx]:
        if self.dialect == "sqlite":
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield Tx(self, conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
        with conn.transaction():
            yield Tx(self, conn)

    def autocommit(self, fn: Callable[[Tx], T], *, what: str = "use") -> T:
        """``fn``'s statements each in a transaction of its own (the lock's short statements)."""
        with self._guard:
            conn = self._connection()
            try:
                return fn(Tx(self, conn))
            except (UniqueViolation, MetastoreError):
                raise
            except Exception as e:
                if self._is_driver_error(e):
                    if self._is_connection_error(e):
                        self.close()
                    raise MetastoreError(self._failed(what, e)) from None
                raise

