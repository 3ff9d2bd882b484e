"""What several Flink test modules share besides the ``flink_env`` fixture (tests/flink/conftest.py).

- :func:`ship_by_value`: Python workers cannot import a test module, so the module's functions and
  classes (test-only maps, sources) travel to them by value.
- :func:`two_taskmanagers`: small Python bundles on two TaskManagers of two slots each. Cancelling a
  failed attempt sometimes kills a TaskManager (a PyFlink 2.3 bug, see flink-conf/): a second one
  with enough slots lets a failover test's job restart.
"""

from __future__ import annotations

import sys


def ship_by_value(module_name: str) -> None:
    """Have cloudpickle ship module ``module_name`` (a test's ``__name__``) to Python workers by value."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


def two_taskmanagers(bundle_size: int = 500) -> dict[str, str]:
    """Settings for ``flink_env(config=...)``: bundles of ``bundle_size`` rows or 100 ms, on two
    TaskManagers with two slots each."""
    return {
        "python.fn-execution.bundle.size": str(bundle_size),
        "python.fn-execution.bundle.time": "100",
        "minicluster.number-of-taskmanagers": "2",
        "taskmanager.numberOfTaskSlots": "2",
    }
