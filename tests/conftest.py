"""Shared fixtures of the test suite.

Markers (registered in pyproject.toml): ``flink`` (a PyFlink MiniCluster), ``e2e`` (subprocesses,
a standalone cluster), ``soak`` (long randomized or fault-injection runs), ``postgres`` (a real
PostgreSQL server that the tests start); every other test gets
``unit`` here, so ``pytest -m unit`` runs the fast suite while developing.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pytest

import lakelog

ORDERS = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)

_SUITE_MARKERS = ("flink", "e2e", "soak", "slow", "kafka", "interop", "postgres", "s3")

# the session's Kafka broker (kafka_broker), PostgreSQL server (postgres, jdbc_options) and S3
# server (s3_server, s3_catalog_args)
pytest_plugins = ["tests.kafka_fixtures", "tests.jdbc_fixtures", "tests.s3_fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(m) for m in _SUITE_MARKERS):
            item.add_marker(pytest.mark.unit)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With pytest-xdist (``-n 2``, the README's command): the Flink tests (``tests/flink/``) are one
    unit of work, so one worker runs them one after another while the others run the rest of the
    suite, a module at a time. Two Flink jobs at once on two cores would starve each other's
    checkpoints and timers, and the standalone-cluster tests share the cluster's ports."""
    from xdist.scheduler import LoadScopeScheduling

    class FlinkApart(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/flink/"):
                return "tests/flink"
            return str(super()._split_scope(nodeid))

    return FlinkApart(config, log)


@pytest.fixture(autouse=True)
def _stop_pyflinks_leftover_flushers() -> Iterator[None]:
    """After each test: stop the flush timers that PyFlink's in-process Python workers leave behind.

    Each output stream of a Python worker that runs in this process (PyFlink's loopback mode, which
    local jobs use) starts a thread that wakes every second (``PeriodicThread`` in
    ``pyflink.fn_execution.utils.operation_utils``), and nothing stops it when the job ends: about
    30 per Flink test. Over the suite they grew to ~2,800 threads waking ~2,800 times a second for
    the GIL, and every later test in this process ran slower (the suite spent 19 CPU-minutes in the
    kernel). Between tests no job of this process should be running, so every such timer is a
    leftover; stopping one only ends its once-a-second flush request."""
    yield
    utils = sys.modules.get("pyflink.fn_execution.utils.operation_utils")
    if utils is None:  # no PyFlink worker ran in this process
        return
    for thread in threading.enumerate():
        if isinstance(thread, utils.PeriodicThread):
            thread.cancel()


@pytest.fixture()
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "wh")


@pytest.fixture()
def catalog(warehouse: str) -> lakelog.Catalog:
    return lakelog.Catalog(warehouse)


MakeTable = Callable[..., lakelog.Table]


@pytest.fixture()
def make_table(catalog: lakelog.Catalog) -> MakeTable:
    """A factory of tables in this test's warehouse: ``make_table()`` is a primary-key table of
    :data:`ORDERS` keyed by (dt, id), partitioned by dt, in 2 buckets; every argument overrides."""

    def make(
        name: str = "db.t",
        schema: pa.Schema = ORDERS,
        *,
        primary_key: Optional[Sequence[str]] = ("dt", "id"),
        partition_by: Optional[Sequence[str]] = ("dt",),
        options: Optional[dict[str, str]] = None,
    ) -> lakelog.Table:
        opts = {"bucket": "2", **(options or {})}
        return catalog.create_table(
            name,
            schema,
            primary_key=list(primary_key) if primary_key else None,
            partition_by=list(partition_by) if partition_by else None,
            options=opts,
        )

    return make


def rows(t: pa.Table, *keys: str) -> list[dict]:
    """Rows of ``t`` as dicts, sorted by ``keys`` (order-insensitive comparison helper)."""
    data = t.to_pylist()
    return sorted(data, key=lambda r: tuple(r[k] for k in keys))


requires_pypaimon = pytest.mark.skipif(
    importlib.util.find_spec("pypaimon") is None, reason="needs pypaimon (the 'test' extra)"
)
"""Marks a test that uses pypaimon as its oracle (per test: a module-level importorskip would also
skip the module's pure tests)."""
