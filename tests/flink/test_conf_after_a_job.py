"""The configuration a process's later jobs use, once a local job has run Python workers in it.

PyFlink's loopback worker pool copies the workers' environment, ``FLINK_CONF_DIR=<pyflink>/conf``
included, into this process's ``os.environ``. lakelog's jobs (and any process started from here, such
as ``python -m lakelog.jobs.pipeline`` run by a test or a user's script) must still read
``flink-conf/``: with PyFlink's defaults a Kafka log's changes arrived seconds late."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyflink")

from lakelog.operators import flink_env as flink_env_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_job_of_the_process_still_reads_flink_conf(flink_env: Any) -> None:
    from pyflink.common import Types

    env = flink_env(mode="batch", parallelism=1)
    got = list(
        env.from_collection([1, 2, 3], Types.LONG()).map(lambda x: x * 2, Types.LONG()).execute_and_collect()
    )
    assert sorted(got) == [2, 4, 6]
    leaked = os.environ.get("FLINK_CONF_DIR")
    # what PyFlink did to this process (if a later PyFlink stops doing it, the rule below is moot)
    assert leaked is not None and Path(leaked).resolve().parent.name == "pyflink", leaked
    assert Path(flink_env_module.find_conf_dir() or "") == ROOT / "flink-conf"
    assert flink_env_module.load_settings()["python.fn-execution.bundle.time"] == "200"
