"""Fixtures of the JDBC catalog's tests: a real PostgreSQL server for the session (the
``postgres`` mark) and ``jdbc_options``, one JDBC catalog's options per test, on SQLite (a file of
the test) or on that server (a catalog key of its own).

The server is started by :class:`tests.postgres_server.PostgresServer` (``initdb``/``pg_ctl`` as
the ``postgres`` user). Without the server binaries the ``postgres`` tests are skipped, loudly; with
``LAKELOG_REQUIRE_POSTGRES=1`` (as ``.ci/run`` sets it) they fail instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres_server import REQUIRE_ENV, PostgresServer
from tests.services import unavailable

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    reason = PostgresServer.unavailable_reason()
    if reason is not None:
        unavailable("POSTGRESQL", reason, REQUIRE_ENV)
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def sqlite_options(path: Path, **extra: str) -> dict[str, str]:
    return {"metastore": "jdbc", "uri": f"jdbc:sqlite:{path}", **extra}


@pytest.fixture(params=BACKENDS)
def jdbc_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def jdbc_options(jdbc_backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Options of a fresh JDBC catalog: a new SQLite file, or a new catalog key on the server."""
    if jdbc_backend == "sqlite":
        return sqlite_options(tmp_path / "catalog.db")
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.options(**{"catalog-key": f"k{uuid.uuid4().hex[:12]}"})
