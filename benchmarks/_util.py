"""Small helpers shared by the benchmarks: timing, memory sampling, deterministic data, table printing."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BENCH_SCHEMA",
    "loadavg",
    "step",
    "Timing",
    "MemorySampler",
    "TABLE",
    "paimon_create",
    "paimon_open",
    "make_batches",
    "final_rows",
    "normalize",
    "time_best",
    "time_interleaved",
    "rss_bytes",
    "fmt_rate",
    "fmt_bytes",
    "render_table",
    "SerialExecutor",
    "serial_thread_pools",
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


def _time_once(timing: Timing, fn: Callable[..., Any], setup: Callable[[], Any] | None) -> None:
    args = (setup(),) if setup is not None else ()
    gc.collect()
    t0 = time.perf_counter()
    timing.result = fn(*args)
    timing.times.append(time.perf_counter() - t0)


def time_best(fn: Callable[..., Any], reps: int, setup: Callable[[], Any] | None = None) -> Timing:
    """Run ``fn`` ``reps`` times (``setup`` untimed before each, its result passed to ``fn``); keep every
    wall time and the last result."""
    timing = Timing()
    for _ in range(max(1, reps)):
        _time_once(timing, fn, setup)
    return timing


def time_interleaved(
    measures: dict[str, tuple[Callable[..., Any], Callable[[], Any] | None]], reps: int
) -> dict[str, Timing]:
    """Like :func:`time_best` for several measures, run round-robin (A B C A B C ...), so that a
    burst of load from other processes hits the measures being compared alike."""
    out = {name: Timing() for name in measures}
    for _ in range(max(1, reps)):
        for name, (fn, setup) in measures.items():
            _time_once(out[name], fn, setup)
    return out


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


class SerialExecutor:
    """A stand-in for ``ThreadPoolExecutor`` that runs every task in the calling thread.

    cProfile sees only the thread that enabled it, so profiling swaps this in to make the work done
    in pools visible (at the cost of the parallelism).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered through the future, like a real pool
            fut.set_exception(e)
        return fut

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], **kwargs: Any) -> Iterator[Any]:
        return iter([fn(*args) for args in zip(*iterables)])

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        pass


_POOL_ATTR = "ThreadPoolExecutor"


@contextlib.contextmanager
def serial_thread_pools(package: str) -> Iterator[list[str]]:
    """Replace ``ThreadPoolExecutor`` in every loaded module of ``package`` by :class:`SerialExecutor`;
    yield the names of the patched modules."""
    patched: list[tuple[Any, Any]] = []
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name == package or name.startswith(package + ".")):
            pool = getattr(mod, _POOL_ATTR, None)
            if pool is not None:
                patched.append((mod, pool))
                setattr(mod, _POOL_ATTR, SerialExecutor)
    try:
        yield [m.__name__ for m, _ in patched]
    finally:
        for mod, pool in patched:
            setattr(mod, _POOL_ATTR, pool)


TABLE = "bench.t"


def paimon_create(warehouse: str, buckets: int) -> Any:
    """A fresh pypaimon primary-key table (key ``id``) of BENCH_SCHEMA in ``warehouse``."""
    from pypaimon import CatalogFactory, Schema

    shutil.rmtree(warehouse, ignore_errors=True)
    cat = CatalogFactory.create({"warehouse": warehouse})
    cat.create_database("bench", True)
    schema = Schema.from_pyarrow_schema(BENCH_SCHEMA, primary_keys=["id"], options={"bucket": str(buckets)})
    cat.create_table(TABLE, schema, False)
    return cat.get_table(TABLE)


def paimon_open(warehouse: str) -> Any:
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": warehouse}).get_table(TABLE)


def loadavg() -> str:
    """The 1/5/15-minute load average, for progress lines of the benchmarks."""
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def step(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {loadavg()}] {msg}", file=sys.stderr, flush=True)
