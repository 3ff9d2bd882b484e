"""Small helpers shared by the benchmarks: timing, memory sampling, deterministic data, table printing."""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BENCH_SCHEMA",
    "Timing",
    "MemorySampler",
    "make_batches",
    "final_rows",
    "normalize",
    "time_best",
    "rss_bytes",
    "fmt_rate",
    "fmt_bytes",
    "render_table",
]

BENCH_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("price", pa.float64()),
        pa.field("qty", pa.int64()),
        pa.field("city", pa.string()),
    ]
)

_CITIES = [
    "amsterdam", "berlin", "cairo", "delhi", "edinburgh", "florence", "geneva", "hanoi", "istanbul",
    "jakarta", "kyoto", "lisbon", "madrid", "nairobi", "oslo", "paris", "quito", "rome", "seoul",
    "tokyo", "utrecht", "vienna", "warsaw", "xian", "york", "zurich",
]


def make_batches(rows: int, batches: int, seed: int) -> list[pa.Table]:
    """``batches`` tables of ``rows // batches`` upserts each, keys drawn uniformly from ``[0, rows)``."""
    rng = np.random.default_rng(seed)
    per_batch = rows // batches
    cities = pa.array(_CITIES, pa.string())
    out: list[pa.Table] = []
    for _ in range(batches):
        ids = rng.integers(0, rows, per_batch, dtype=np.int64)
        tags = rng.integers(0, 1_000_000, per_batch, dtype=np.int64)
        name = pc.binary_join_element_wise(
            "user-", pc.cast(pa.array(ids), pa.string()), "-", pc.cast(pa.array(tags), pa.string()), ""
        )
        city = cities.take(pa.array(rng.integers(0, len(_CITIES), per_batch, dtype=np.int32)))
        out.append(
            pa.Table.from_arrays(
                [
                    pa.array(ids),
                    name,
                    pa.array(rng.random(per_batch) * 1000.0),
                    pa.array(rng.integers(0, 10_000, per_batch, dtype=np.int64)),
                    city,
                ],
                schema=BENCH_SCHEMA,
            )
        )
    return out


def final_rows(batches: list[pa.Table]) -> pa.Table:
    """What an upsert-by-``id`` store holds after all batches: the last write of each key, sorted by id."""
    all_rows = pa.concat_tables(batches).combine_chunks()
    ids = all_rows.column("id").to_numpy()
    rev = ids[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)
    last_idx = (len(ids) - 1 - first_in_rev).astype(np.int64)
    return all_rows.take(pa.array(last_idx)).sort_by("id").combine_chunks()


def normalize(table: pa.Table) -> pa.Table:
    """Cast to :data:`BENCH_SCHEMA` (column order, types, nullability), sort by id, one chunk per column."""
    arrays = [table.column(f.name).cast(f.type) for f in BENCH_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=BENCH_SCHEMA).sort_by("id").combine_chunks()


@dataclass
class Timing:
    """Wall times (seconds) of the repetitions of one measure; ``best`` is the minimum."""

    times: list[float] = field(default_factory=list)
    result: Any = None

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def first(self) -> float:
        return self.times[0]


def time_best(fn: Callable[..., Any], reps: int, setup: Callable[[], Any] | None = None) -> Timing:
    """Run ``fn`` ``reps`` times (``setup`` untimed before each), keep every wall time and the last result."""
    timing = Timing()
    for _ in range(max(1, reps)):
        args = (setup(),) if setup is not None else ()
        gc.collect()
        t0 = time.perf_counter()
        timing.result = fn(*args)
        timing.times.append(time.perf_counter() - t0)
    return timing


def rss_bytes() -> int:
    """Resident set size of this process (psutil if installed, else /proc/self/statm)."""
    try:
        import psutil

        return int(psutil.Process(os.getpid()).memory_info().rss)
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class MemorySampler:
    """Samples Arrow's allocated bytes and the process RSS in a background thread, keeping the maxima."""

    def __init__(self, interval_s: float = 0.002) -> None:
        self.interval_s = interval_s
        self.max_arrow = pa.total_allocated_bytes()
        self.max_rss = rss_bytes()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max_arrow = max(self.max_arrow, pa.total_allocated_bytes())
            self.max_rss = max(self.max_rss, rss_bytes())
            self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.max_arrow = max(self.max_arrow, pa.total_allocated_bytes())
        self.max_rss = max(self.max_rss, rss_bytes())


def fmt_rate(rows_per_s: float) -> str:
    if rows_per_s >= 1e6:
        return f"{rows_per_s / 1e6:.2f} M rows/s"
    return f"{rows_per_s / 1e3:.1f} k rows/s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def render_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown-style table with padded columns."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
