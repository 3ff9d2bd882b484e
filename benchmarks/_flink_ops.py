"""PyFlink operators and helpers shared by the freshness benchmarks (``bench_freshness.py``,
``bench_log.py``).

Python workers cannot import the benchmarks folder: a script that uses these registers this module
with ``cloudpickle.register_pickle_by_value`` (see :func:`ship_by_value`), and :func:`operator`
turns a plain class into a PyFlink function class at run time, so that importing this module needs
no PyFlink."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["Stamp", "Recorder", "operator", "read_records", "discard", "ship_by_value"]

class Stamp:
    """Map ``Row(id, born) -> Row(id, emit_ms, map_ms, payload)``: emit_ms is ``born`` (an Instant: when
    the row left the Java source) in epoch ms, map_ms the wall-clock time the row reached Python."""

    def open(self, runtime_context: Any) -> None:
        from pyflink.common import Row

        self.row = Row

    def map(self, r: Any) -> Any:
        i = int(r[0])
        born = r[1]
        emit_ms = int(born.seconds) * 1000 + int(born.nanos) // 1_000_000
        return self.row(i, emit_ms, int(time.time() * 1000), f"row-{i}")


class Recorder:
    """Map after a streaming read: appends ``id,emit_ms,arrival_ms`` of every row to a file
    (line-buffered, so that the benchmark's process sees the arrivals as they come)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, runtime_context: Any) -> None:
        self.fh = open(self.path, "a", buffering=1)  # noqa: SIM115 - lives as long as the operator

    def map(self, row: Any) -> int:
        self.fh.write(f"{row[0]},{row[1]},{int(time.time() * 1000)}\n")
        return int(row[0])

    def close(self) -> None:
        fh = getattr(self, "fh", None)
        if fh is not None:
            fh.close()


def operator(base: type, mixin: type, *args: Any) -> Any:
    """An instance of ``mixin`` made a PyFlink ``base`` (``MapFunction``, ``FlatMapFunction``)."""
    cls = type(f"_{mixin.__name__}Fn", (mixin, base), {})
    return cls(*args)


def read_records(path: str) -> dict[int, tuple[int, int]]:
    """What a :class:`Recorder` wrote: ``id -> (emit_ms, arrival_ms)`` of each id's first arrival."""
    out: dict[int, tuple[int, int]] = {}
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            parts = line.strip().split(",")
            if len(parts) == 3:
                out.setdefault(int(parts[0]), (int(parts[1]), int(parts[2])))
    return out


def discard(ds: Any) -> None:
    """End ``ds`` in Flink's discarding sink (one subtask)."""
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    j_sink = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name("discard").set_parallelism(1)


def ship_by_value(*modules: Any) -> None:
    """Make cloudpickle send this module and ``modules`` to the Python workers by value."""
    import cloudpickle

    for m in (sys.modules[__name__], *modules):
        cloudpickle.register_pickle_by_value(m)
