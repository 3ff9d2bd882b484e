"""The clock of lakelog's streaming graphs: a Java source of evenly spaced ticks.

PyFlink cannot define sources, and a Python function runs only when an element reaches it, so the
streaming sources (the snapshot and log followers) and the compaction job's planner are driven by
ticks: one parallelism-1 source of at least one tick a second (faster for intervals under a second).

The ticks come from Flink's ``DataGeneratorSource``, whose rate limiter spaces them evenly, with
lakelog's one-line generator function (``lakelog.flink.Ticks``, built with the sink's Java operator,
see :mod:`lakelog.operators.jvm`). SQL's ``datagen`` connector, the fallback without a JDK, emits a
second's rows in one burst and then sleeps: a follower driven by it looks at most once a second
whatever its interval (measured: 20 ticks within a millisecond, then a pause of about a second).
This module imports pyflink.
"""

from __future__ import annotations

import logging
import uuid
from typing import Optional

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors import Source
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment

from lakelog.operators import jvm

__all__ = ["ticks", "tick_rate"]

log = logging.getLogger(__name__)

_UNBOUNDED = 2**63 - 1


def tick_rate(interval_s: float) -> tuple[int, int]:
    """(ticks per second, ticks per ``interval_s``): one tick a second for intervals of a second or
    more, else about one tick per interval."""
    rate = max(1, int(round(1.0 / interval_s))) if interval_s < 1 else 1
    return rate, max(1, int(round(interval_s * rate)))


def ticks(
    env: StreamExecutionEnvironment, interval_s: float, *, rounds: Optional[int] = None
) -> tuple[DataStream, int]:
    """(a stream of ticks, how many ticks make one ``interval_s``). With ``rounds`` the stream is
    bounded: it ends after that many intervals."""
    rate, per_round = tick_rate(interval_s)
    count = rounds * per_round if rounds else None
    try:
        jvm.add_to(env)
    except jvm.JdkNotFoundError as exc:
        if rate > 1:
            log.warning(
                "lakelog: no JDK, so streaming reads tick through SQL's datagen, which bursts once a "
                "second: intervals under a second act as one second (%s)",
                exc,
            )
        return _datagen_ticks(env, rate, count), per_round
    j = get_gateway().jvm
    source = j.org.apache.flink.connector.datagen.source.DataGeneratorSource(
        j.lakelog.flink.Ticks(),
        count if count is not None else _UNBOUNDED,
        j.org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy.perSecond(float(rate)),
        Types.INT().get_java_type_info(),
    )
    name = f"lakelog-ticks-{rate}-per-s"
    stream = env.from_source(Source(source), WatermarkStrategy.no_watermarks(), name, type_info=Types.INT())
    return stream.set_parallelism(1), per_round


def _datagen_ticks(env: StreamExecutionEnvironment, rate: int, count: Optional[int]) -> DataStream:
    t_env = StreamTableEnvironment.create(env)
    name = f"lakelog_ticker_{uuid.uuid4().hex[:12]}"
    bounded = f", 'number-of-rows'='{count}'" if count is not None else ""
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE {name} (tick INT) WITH ('connector'='datagen', "
        f"'rows-per-second'='{rate}', 'fields.tick.kind'='random', 'fields.tick.min'='0', "
        f"'fields.tick.max'='0', 'scan.parallelism'='1'{bounded})"
    )
    return t_env.to_data_stream(t_env.from_path(name))
