"""Shared set-up of the PyFlink tests: every test here runs Flink (a MiniCluster or a cluster).

- Every test in this folder is marked ``flink`` (``-m "not flink"`` skips them all), before
  tests/conftest.py gives ``unit`` to tests without a suite mark, and ignores PyFlink's
  deprecation warnings and the exceptions its threads raise when a job is cancelled.
- Every test here gets a time limit (:data:`FLINK_TEST_TIMEOUT`, unless it sets its own) and, when
  it runs out, one more try: PyFlink's Python worker sometimes fails to reach its JVM at start-up
  and Beam then waits forever (seen once in CI, under load). A test that fails otherwise, or times
  out twice, fails.
- ``flink_env``: the one environment factory of the project
  (:func:`lakelog.operators.flink_env.flink_environment`), reading the repository's
  ``flink-conf/`` whatever ``$FLINK_CONF_DIR`` says, with a ``restarts=`` shortcut for the
  fixed-delay restart strategy that failover tests need.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

REPO_CONF_DIR = str(Path(__file__).resolve().parents[2] / "flink-conf")
# PyFlink's deprecations, and the exceptions its threads in this process raise when a job is
# cancelled or a Python worker is killed (test_concurrent_writers kills them on purpose)
_EXPECTED_WARNINGS = ("DeprecationWarning", "pytest.PytestUnhandledThreadExceptionWarning")


#: Seconds a Flink test may run (the longest, a TaskManager killed on a cluster, took 194 s in CI).
FLINK_TEST_TIMEOUT = 600


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.flink)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(FLINK_TEST_TIMEOUT))
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=["Timeout"]))
            for warning in _EXPECTED_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(f"ignore::{warning}"))


@pytest.fixture()
def flink_env() -> Callable[..., Any]:
    """``flink_env(mode=, parallelism=, checkpoint_interval_ms=, config=, restarts=)`` -> a
    ``StreamExecutionEnvironment`` (see ``flink_environment``); ``restarts=n``: up to ``n`` restarts,
    500 ms apart."""
    pytest.importorskip("pyflink")
    from lakelog.operators.flink_env import flink_environment

    def make(
        *, restarts: Optional[int] = None, config: Optional[dict[str, str]] = None, **kwargs: Any
    ) -> Any:
        conf = dict(config or {})
        if restarts is not None:
            conf.update(
                {
                    "restart-strategy.type": "fixed-delay",
                    "restart-strategy.fixed-delay.attempts": str(restarts),
                    "restart-strategy.fixed-delay.delay": "500 ms",
                }
            )
        return flink_environment(conf_dir=REPO_CONF_DIR, config=conf, **kwargs)

    return make
