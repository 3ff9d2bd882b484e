"""Fixtures of the object-store tests: a real S3 API server for the session (the ``s3`` mark,
:class:`tests.s3_server.S3Server`) and ``s3_catalog_args``, a fresh warehouse prefix with the
catalog options that reach the server. Without ``moto`` the ``s3`` tests are skipped, loudly; with
``LAKELOG_REQUIRE_S3=1`` (as ``.ci/run`` sets it) they fail instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.s3_server import S3Server
from tests.services import unavailable

REQUIRE_ENV = "LAKELOG_REQUIRE_S3"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    reason = S3Server.unavailable_reason()
    if reason is not None:
        unavailable("S3", reason, REQUIRE_ENV)
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def s3_catalog_args(s3_server: S3Server) -> tuple[str, dict[str, str]]:
    """(warehouse, options) of a fresh ``s3://`` warehouse on the session's server."""
    return s3_server.warehouse(), s3_server.options()
