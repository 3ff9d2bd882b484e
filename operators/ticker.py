"""The clock of lakelog's streaming graphs: a Java ``datagen`` source of ticks.

PyFlink cannot define sources, and a Python function runs only when an element reaches it, so the
streaming source's snapshot follower and the compaction job's planner are driven by ticks: one
parallelism-1 ``datagen`` table of at least one tick a second (faster for intervals under a
second). This module imports pyflink.
"""

from __future__ import annotations

import uuid
from typing import Optional

from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.table import StreamTableEnvironment

__all__ = ["ticks"]


def ticks(
    env: StreamExecutionEnvironment, interval_s: float, *, rounds: Optional[int] = None
) -> tuple[DataStream, int]:
    """(a stream of ticks, how many ticks make one ``interval_s``). With ``rounds`` the stream is
    bounded: it ends after that many intervals."""
    rate = max(1, int(round(1.0 / interval_s))) if interval_s < 1 else 1
    per_round = max(1, int(round(interval_s * rate)))
    t_env = StreamTableEnvironment.create(env)
    name = f"lakelog_ticker_{uuid.uuid4().hex[:12]}"
    bounded = f", 'number-of-rows'='{rounds * per_round}'" if rounds else ""
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE {name} (tick INT) WITH ('connector'='datagen', "
        f"'rows-per-second'='{rate}', 'fields.tick.kind'='random', 'fields.tick.min'='0', "
        f"'fields.tick.max'='0', 'scan.parallelism'='1'{bounded})"
    )
    return t_env.to_data_stream(t_env.from_path(name)), per_round
