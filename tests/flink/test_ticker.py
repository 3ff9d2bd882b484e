"""The clock of the streaming sources (lakelog.operators.ticker): ticks spaced evenly.

SQL's datagen, the clock before, emitted a second's ticks in one burst and slept the rest of the
second, so a log follower meant to look every 50 ms looked once a second (measured: 20 ticks within
a millisecond, then a pause of about a second).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyflink")


def test_ticks_under_a_second_are_spaced_evenly(flink_env: Any) -> None:
    from pyflink.table import Schema, StreamTableEnvironment

    from lakelog.operators import jvm
    from lakelog.operators.ticker import ticks

    if jvm.javac_path() is None:
        pytest.skip("the even clock is built with a JDK; without one the ticks come from SQL's datagen")
    env = flink_env(mode="streaming", parallelism=1)
    stream, per_round = ticks(env, 0.05, rounds=30)
    assert per_round == 1
    t_env = StreamTableEnvironment.create(env)
    # stamp every tick on the JVM as it leaves the source (a Python map would see Flink's bundles)
    schema = Schema.new_builder().column_by_expression("at", "PROCTIME()").build()
    t_env.create_temporary_view("ticks", t_env.from_data_stream(stream, schema))
    with t_env.execute_sql("SELECT CAST(`at` AS TIMESTAMP(3)) FROM ticks").collect() as rows:
        times = sorted(r[0].timestamp() for r in rows)
    assert len(times) == 30  # bounded: 30 intervals of one tick each
    gaps_ms = np.diff(times) * 1000
    # 20 ticks a second: about 50 ms apart (a loaded machine stretches some gaps, never to zero)
    assert np.median(gaps_ms) >= 25, gaps_ms.tolist()
    assert (gaps_ms < 5).sum() <= 5, gaps_ms.tolist()
