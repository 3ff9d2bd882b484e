"""Sustained-ingestion benchmark: many upsert commits into a primary-key table with compaction on.

Not a timed test: one run prints figures, their targets and PASS/FAIL. See benchmarks/README.md.

    python benchmarks/bench_ingest.py                  # 10M upserts, batches of 100k, 2M Zipf keys, 4 buckets
    python benchmarks/bench_ingest.py --quick          # 1M upserts over 200k keys
    python benchmarks/bench_ingest.py --quick --profile /tmp/prof --profile-only   # cProfile of the ingestion
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.metadata
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import (  # noqa: E402
    BENCH_SCHEMA,
    TABLE,
    MemorySampler,
    Timing,
    fmt_bytes,
    fmt_rate,
    normalize,
    paimon_create,
    paimon_open,
    render_table,
    rss_bytes,
    serial_thread_pools,
    time_best,
    time_interleaved,
)

__all__ = ["main", "ZipfSource", "Config"]

WRITE_ONLY = {"write-only": "true"}  # no compaction inside write(): every commit adds a sorted run
CONNECTOR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "connector")

TARGET_INGEST_RATE = 500_000.0  # rows/s
TARGET_WRITE_AMP = 5.0  # bytes written / input as Parquet zstd 1
TARGET_RSS = 1.5 * (1 << 30)  # bytes
TARGET_READ_VS_PARQUET = 0.5  # "within 2x" of pq.read_table

_CITIES = [
    "amsterdam", "berlin", "cairo", "delhi", "edinburgh", "florence", "geneva", "hanoi", "istanbul",
    "jakarta", "kyoto", "lisbon", "madrid", "nairobi", "oslo", "paris", "quito", "rome", "seoul",
    "tokyo", "utrecht", "vienna", "warsaw", "xian", "york", "zurich",
]

DEFINITIONS = """\
Definitions (wall-clock time.perf_counter; one run; the machine is shared, see the load averages):
  data            {rows} upserts in {nb} batches of {batch}, 5 columns (id BIGINT primary key, name STRING,
                  price DOUBLE, qty BIGINT, city STRING). Keys: rank = (numpy Generator.zipf(a={a}) - 1) mod
                  {keys}, id = P[rank] with P a fixed random permutation of [0, {keys}) (so the hot keys are
                  scattered over the key range, not the smallest ids). Batch i is drawn from
                  default_rng([seed, 1, i]), seed {seed}; the batches are generated in the ingesting
                  process but outside the timed calls. {buckets} buckets, default table options.
  ingestion       rows / wall time of ingesting every batch, in a child process. Main figure: a
                  long-lived writer (t.stream_writer(), as a streaming job holds one) writes each batch
                  and commits it (w.write(batch); w.commit(): one atomic commit per batch, as at a
                  checkpoint); Paimon universal compaction runs on background threads and its results
                  join later commits; the timed total ends with w.commit(wait_compaction=True), which
                  waits for the last compactions. For information, the same batches through one-shot
                  t.write(batch) calls (a new writer per commit that waits for its compaction).
  bytes written   sum of the sizes of ALL data files the table ever created: files in bucket-*/ at the
                  end (nothing is expired during the run) + data files lakelog deleted itself before
                  committing them (intermediate compaction outputs, counted by wrapping FileIO.delete in
                  the child). Cross-check: sum of file_size of ADD entries over all snapshots' delta
                  manifests (APPEND = level-0 flushes, COMPACT = compaction outputs).
  bytes ingested  (a) the input batches written once as Parquet, zstd level 1 (the table's own codec and
                  level), one file per batch: the write-amplification denominator; (b) the in-memory Arrow
                  size (nbytes) of the input batches, for information.
  sorted runs     per bucket after every commit, from t.files(): each level-0 file counts one, each
                  non-empty level > 0 counts one; the maximum over buckets and commits is printed. The
                  limit is num-sorted-run.stop-trigger (default compaction-trigger + 3).
  peak RSS        of the ingesting child process (imports, table, one batch at a time, writer): the
                  kernel's high-water mark VmHWM at the end, and the max of psutil RSS sampled every 5 ms.
  merged read     rows returned / wall time of t.to_arrow() on a fresh table handle, vs pq.read_table of
                  ONE file holding the same final rows (last write per key), written once with pyarrow's
                  defaults (snappy; zstd 1 for information). Best of --reps, interleaved. Measured on the
                  state the ingestion left, and again after t.compact(full=True).
  vs pypaimon     scaled: the first {prows} rows of the same batches written into a fresh lakelog table and
                  a pypaimon 2.1 table (bucket={buckets}, one commit per batch; pypaimon never compacts),
                  then each read fully by its own library; ratio of read rows/s. The lakelog table compacts
                  inside write() (so its read merges fewer runs); a third table with write-only=true keeps
                  one sorted run per commit and bucket, the layout pypaimon leaves: its ratio is printed too.
  compaction      counted by wrapping BucketCompactor.compute in the child: rewrites, bytes they read and
                  wrote, and their wall time summed over the writer's bucket threads (thread-seconds).
"""


# ---------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------
class ZipfSource:
    """Deterministic upsert batches whose keys are Zipf-skewed over ``[0, keys)``."""

    def __init__(self, rows: int, batch: int, keys: int, a: float, seed: int) -> None:
        if a <= 1.0:
            raise ValueError(f"--zipf-a must be > 1 (numpy's zipf), got {a}")
        self.rows, self.batch, self.keys, self.a, self.seed = rows, batch, keys, a, seed
        self.num_batches = -(-rows // batch)
        self._perm = np.random.default_rng([seed, 0]).permutation(keys).astype(np.int64)
        self._cities = pa.array(_CITIES, pa.string())

    def size_of(self, i: int) -> int:
        return min(self.batch, self.rows - i * self.batch)

    def ids(self, i: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        rng = np.random.default_rng([self.seed, 1, i])
        rank = (rng.zipf(self.a, self.size_of(i)) - 1) % self.keys
        out: np.ndarray[Any, np.dtype[np.int64]] = self._perm[rank]
        return out

    def batch_at(self, i: int) -> pa.Table:
        n = self.size_of(i)
        ids = self.ids(i)
        rng = np.random.default_rng([self.seed, 2, i])
        tags = pa.array(rng.integers(0, 1_000_000, n, dtype=np.int64))
        name = pc.binary_join_element_wise("user-", pc.cast(pa.array(ids), pa.string()), "-",
                                           pc.cast(tags, pa.string()), "")
        city = self._cities.take(pa.array(rng.integers(0, len(_CITIES), n, dtype=np.int32)))
        cols = [pa.array(ids), name, pa.array(rng.random(n) * 1000.0),
                pa.array(rng.integers(0, 10_000, n, dtype=np.int64)), city]
        return pa.Table.from_arrays(cols, schema=BENCH_SCHEMA)


@dataclass
class InputStats:
    arrow_bytes: int
    parquet_zstd_bytes: int
    distinct_keys: int
    hottest_key_share: float


def input_stats(src: ZipfSource) -> InputStats:
    """Arrow and Parquet (zstd 1) size of all input batches, and the key skew actually drawn."""
    arrow_bytes = parquet_bytes = 0
    seen = np.zeros(src.keys, dtype=np.int64)
    for i in range(src.num_batches):
        b = src.batch_at(i)
        arrow_bytes += b.nbytes
        sink = pa.BufferOutputStream()
        pq.write_table(b, sink, compression="zstd", compression_level=1)
        parquet_bytes += sink.getvalue().size
        seen += np.bincount(b.column("id").to_numpy(), minlength=src.keys)
    return InputStats(arrow_bytes, parquet_bytes, int(np.count_nonzero(seen)), float(seen.max() / src.rows))


def expected_rows(src: ZipfSource, num_batches: int) -> pa.Table:
    """The last write of each key over the first ``num_batches`` batches, sorted by id."""
    last_batch = np.full(src.keys, -1, dtype=np.int32)
    last_row = np.zeros(src.keys, dtype=np.int32)
    for i in range(num_batches):
        ids = src.ids(i)
        uniq, first_in_rev = np.unique(ids[::-1], return_index=True)
        last_batch[uniq] = i
        last_row[uniq] = len(ids) - 1 - first_in_rev
    parts = []
    for i in range(num_batches):
        b = src.batch_at(i)
        ids = b.column("id").to_numpy()
        keep = (last_batch[ids] == i) & (last_row[ids] == np.arange(len(ids)))
        parts.append(b.filter(pa.array(keep)))
    return pa.concat_tables(parts).sort_by("id").combine_chunks()


# ---------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------
def lakelog_create(warehouse: str, buckets: int, options: dict[str, str] | None = None) -> Any:
    import lakelog

    shutil.rmtree(warehouse, ignore_errors=True)
    return lakelog.Catalog(warehouse).create_table(TABLE, BENCH_SCHEMA, primary_key=["id"],
                                                   options={"bucket": str(buckets), **(options or {})})


def lakelog_open(warehouse: str) -> Any:
    import lakelog

    return lakelog.Catalog(warehouse).get_table(TABLE)


def lakelog_write_all(table: Any, batches: list[pa.Table]) -> int:
    for b in batches:
        table.write(b)
    return len(batches)


def paimon_write_all(table: Any, batches: list[pa.Table]) -> int:
    """One pypaimon batch write (write_arrow, prepare_commit, commit) per batch."""
    for batch in batches:
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        commit = builder.new_commit()
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    return len(batches)


def paimon_read(table: Any) -> pa.Table:
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def live_data_files(warehouse: str) -> int:
    """Data files a full read opens, as pypaimon plans it (works on lakelog's tables too)."""
    return sum(len(s.files) for s in paimon_open(warehouse).new_read_builder().new_scan().plan().splits())


def sorted_runs_per_bucket(files: pa.Table) -> dict[int, int]:
    """Sorted runs of each bucket in a ``t.files()`` table: level-0 files one each, other levels one."""
    runs: dict[int, int] = {}
    levels: set[tuple[int, int]] = set()
    for bucket, level in zip(files.column("bucket").to_pylist(), files.column("level").to_pylist()):
        if level == 0:
            runs[bucket] = runs.get(bucket, 0) + 1
        elif (bucket, level) not in levels:
            levels.add((bucket, level))
            runs[bucket] = runs.get(bucket, 0) + 1
    return runs


def data_bytes_on_disk(table_path: str) -> tuple[int, int]:
    """(bytes, count) of the data files under the table's bucket-* directories (any partition depth)."""
    total = count = 0
    for root, _dirs, names in os.walk(table_path):
        if os.path.basename(root).startswith("bucket-"):
            for n in names:
                if n.startswith("data-"):
                    total += os.path.getsize(os.path.join(root, n))
                    count += 1
    return total, count


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, n)) for r, _d, ns in os.walk(path) for n in ns)


# ---------------------------------------------------------------------------------------------------
# the ingesting child process
# ---------------------------------------------------------------------------------------------------
def vm_hwm() -> int | None:
    """The kernel's peak-RSS mark of this process (Linux), in bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Instruments:
    """Counters patched into lakelog's classes for the duration of a ``with`` block:

    - ``FileIO.delete``: data files lakelog removes itself (compaction outputs consumed by a later
      compaction before any commit), so that bytes written counts them too;
    - ``BucketCompactor.compute``: number of compactions, bytes of the files they rewrote and wrote (a
      one-file unit that only moves up a level reads and writes nothing), and their wall time summed
      over the writer's bucket threads (thread-seconds: the threads overlap).
    """

    def __init__(self) -> None:
        self.deleted_bytes = self.deleted_files = 0
        self.compactions = self.upgrades = 0
        self.compact_in_bytes = self.compact_out_bytes = 0
        self.compact_seconds = 0.0
        self._lock = threading.Lock()
        self._undo: list[tuple[type, str, Any]] = []

    def _patch(self, cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = cls.__dict__[name]
        self._undo.append((cls, name, original))
        setattr(cls, name, make(original))

    def __enter__(self) -> Instruments:
        from lakelog.connector.format import fileio
        from lakelog.connector.lsm import compaction as compact

        def make_delete(original: Callable[..., Any]) -> Callable[..., Any]:
            def delete(io_self: Any, path: str) -> bool:
                local = fileio.local_path(path)
                size = 0
                if os.path.basename(local).startswith("data-") and os.path.exists(local) and \
                        os.path.basename(os.path.dirname(local)).startswith("bucket-"):
                    size = os.path.getsize(local)
                removed = bool(original(io_self, path))
                if removed and size:
                    with self._lock:
                        self.deleted_bytes += size
                        self.deleted_files += 1
                return removed

            return delete

        def make_run(original: Callable[..., Any]) -> Callable[..., Any]:
            def run(comp_self: Any, unit: Any, drop_deletes: bool) -> Any:
                t0 = time.perf_counter()
                res = original(comp_self, unit, drop_deletes)
                dt = time.perf_counter() - t0
                before = {f.file_name for f in res.before}
                rewritten = not (len(res.after) == 1 and res.after[0].file_name in before)
                with self._lock:
                    self.compact_seconds += dt
                    if rewritten:
                        self.compactions += 1
                        self.compact_in_bytes += sum(f.file_size for f in res.before)
                        self.compact_out_bytes += sum(f.file_size for f in res.after)
                    else:
                        self.upgrades += 1
                return res

            return run

        self._patch(fileio.FileIO, "delete", make_delete)
        self._patch(compact.BucketCompactor, "compute", make_run)
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, name, original in reversed(self._undo):
            setattr(cls, name, original)
        self._undo = []


def ingest(cfg: Config, warehouse: str, progress: bool = True,
           around_write: Callable[[Callable[[], Any]], Any] | None = None) -> dict[str, Any]:
    """Write every batch (a stream writer committing each, or one-shot ``t.write`` calls with
    ``cfg.writer == "one-shot"``); measure time, sorted runs, RSS and bytes. ``around_write`` wraps
    each write call (profiling)."""
    src = ZipfSource(cfg.rows, cfg.batch, cfg.keys, cfg.zipf_a, cfg.seed)
    table = lakelog_create(warehouse, cfg.buckets)
    stop_trigger = int(table.store.options.num_sorted_run_stop_trigger)
    compaction_trigger = int(table.store.options.num_sorted_run_compaction_trigger)
    write_buffer = int(table.store.options.write_buffer_size.bytes)
    times: list[float] = []
    cpu_times: list[float] = []
    snaps_per_commit: list[int] = []
    max_runs = 0
    max_runs_at = -1
    runs_hist: Counter[int] = Counter()
    last_snapshot = 0
    batch = src.batch_at(0)
    rss_before = rss_bytes()
    t_start = time.perf_counter()
    stream = table.stream_writer() if cfg.writer == "stream" else None

    def write_one(b: pa.Table) -> Any:
        if stream is None:
            return table.write(b)
        return stream.write(b).commit()

    drain = 0.0
    with Instruments() as inst, MemorySampler(interval_s=0.005) as sampler:
        for i in range(src.num_batches):
            if i:
                batch = src.batch_at(i)
            c0, t0 = time.process_time(), time.perf_counter()
            sid = write_one(batch) if around_write is None else around_write(partial(write_one, batch))
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
            snaps_per_commit.append(int(sid) - last_snapshot)
            last_snapshot = int(sid)
            runs = sorted_runs_per_bucket(table.files())
            for r in runs.values():
                runs_hist[r] += 1
            worst = max(runs.values(), default=0)
            if worst > max_runs:
                max_runs, max_runs_at = worst, i
            if progress and ((i + 1) % 10 == 0 or i + 1 == src.num_batches):
                done = sum(src.size_of(k) for k in range(i + 1))
                step(f"  ingest {i + 1}/{src.num_batches} batches, {fmt_rate(done / sum(times))}, "
                     f"max sorted runs {max_runs}, RSS {fmt_bytes(rss_bytes())}")
        if stream is not None:  # the last compactions: waited for and committed, inside the timing
            c0, t0 = time.process_time(), time.perf_counter()
            stream.commit(wait_compaction=True)
            drain = time.perf_counter() - t0
            cpu_times.append(time.process_time() - c0)
            stream.close()
    wall = time.perf_counter() - t_start
    hwm = vm_hwm()
    on_disk, n_files = data_bytes_on_disk(table.path)
    added = {"APPEND": 0, "COMPACT": 0}
    added_files = {"APPEND": 0, "COMPACT": 0}
    for snap in table.snapshots():
        kind = snap.commit_kind if snap.commit_kind in added else "APPEND"
        for e in table.store.delta_entries(snap):
            if e.kind == 0:
                added[kind] += e.file.file_size
                added_files[kind] += 1
    final_files = table.files()
    levels = Counter(final_files.column("level").to_pylist())
    return {
        "rows": cfg.rows,
        "batches": src.num_batches,
        "write_times": times,
        "writer": cfg.writer,
        "drain": drain,
        "write_cpu_times": cpu_times,
        "snapshots_per_commit": snaps_per_commit,
        "wall": wall,
        "max_runs": max_runs,
        "max_runs_at": max_runs_at,
        "runs_hist": {str(k): v for k, v in sorted(runs_hist.items())},
        "stop_trigger": stop_trigger,
        "compaction_trigger": compaction_trigger,
        "write_buffer": write_buffer,
        "rss_before": rss_before,
        "rss_sampled_peak": sampler.max_rss,
        "rss_samples": sampler.samples,
        "vm_hwm": hwm,
        "bytes_on_disk": on_disk,
        "files_on_disk": n_files,
        "bytes_deleted": inst.deleted_bytes,
        "files_deleted": inst.deleted_files,
        "compactions": inst.compactions,
        "upgrades": inst.upgrades,
        "compact_in_bytes": inst.compact_in_bytes,
        "compact_out_bytes": inst.compact_out_bytes,
        "compact_seconds": inst.compact_seconds,
        "bytes_added_append": added["APPEND"],
        "bytes_added_compact": added["COMPACT"],
        "files_added_append": added_files["APPEND"],
        "files_added_compact": added_files["COMPACT"],
        "live_bytes": int(pc.sum(final_files.column("file_size_in_bytes")).as_py() or 0),
        "live_files": final_files.num_rows,
        "final_levels": {str(k): v for k, v in sorted(levels.items())},
        "snapshots": last_snapshot,
        "metadata_bytes": dir_bytes(os.path.join(table.path, "manifest"))
        + dir_bytes(os.path.join(table.path, "snapshot")),
    }


def run_ingest_child(cfg: Config, warehouse: str) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--ingest-child", json.dumps(asdict(cfg)), warehouse]
    env = {**os.environ, _T0_ENV: repr(_T0)}
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)  # stderr passes through
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------------
# profiling
# ---------------------------------------------------------------------------------------------------
def print_profile(prof: cProfile.Profile, title: str, top: int) -> None:
    print(f"\n=== cProfile {title} ===")
    for key, what in (("tottime", "own time, any code"), ("cumulative", "cumulative, lakelog code only")):
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        if key == "tottime":
            stats.strip_dirs().sort_stats(key).print_stats(top)
        else:
            stats.sort_stats(key).print_stats(r"/connector/", top)
        lines = [ln for ln in buf.getvalue().replace(CONNECTOR_DIR + os.sep, "").splitlines() if ln.strip()]
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
        print(f"--- by {key} ({what})")
        print("\n".join(lines[start:]))


def profile_run(cfg: Config, outdir: str, top: int) -> None:
    """The ingestion (only the write calls are profiled) and the final read, under cProfile, with
    lakelog's thread pools run serially so that the profiler sees their work."""
    os.makedirs(outdir, exist_ok=True)
    warehouse = os.path.join(cfg.workdir, "lakelog-prof")
    import lakelog.connector.lsm.split_read  # noqa: F401  (load the modules whose pools get serialised)
    import lakelog.connector.table.write  # noqa: F401

    prof = cProfile.Profile()

    def around(fn: Callable[[], Any]) -> Any:
        prof.enable()
        try:
            return fn()
        finally:
            prof.disable()

    with serial_thread_pools("lakelog") as patched:
        res = ingest(cfg, warehouse, progress=False, around_write=around)
        prof.dump_stats(os.path.join(outdir, "ingest_write.prof"))
        print(f"thread pools run serially while profiling, in: {', '.join(patched) or '-'}")
        print_profile(prof, f"ingest: {res['batches']} x t.write, {sum(res['write_times']):.2f}s under the "
                      f"profiler ({os.path.join(outdir, 'ingest_write.prof')})", top)
        table = lakelog_open(warehouse)
        rprof = cProfile.Profile()
        t0 = time.perf_counter()
        rprof.enable()
        table.to_arrow()
        rprof.disable()
        rprof.dump_stats(os.path.join(outdir, "ingest_read.prof"))
        print_profile(rprof, f"final merged read t.to_arrow(), {time.perf_counter() - t0:.2f}s under the "
                      "profiler", top)


# ---------------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------------
@dataclass
class Config:
    rows: int
    batch: int
    keys: int
    zipf_a: float
    buckets: int
    seed: int
    reps: int
    paimon_rows: int
    paimon_reps: int
    workdir: str
    writer: str = "stream"  # "stream": t.stream_writer() committing every batch; "one-shot": t.write


def compare(name: str, got: pa.Table, want: pa.Table) -> tuple[bool, str]:
    g = normalize(got)
    if g.num_rows != want.num_rows:
        return False, f"{name}: MISMATCH rows {g.num_rows} != {want.num_rows}"
    if g.equals(want):
        return True, f"{name}: OK ({g.num_rows} rows, same content)"
    bad = [c for c in BENCH_SCHEMA.names if not g.column(c).equals(want.column(c))]
    return False, f"{name}: MISMATCH in column(s) {bad} ({g.num_rows} rows)"


def loadavg() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def run(cfg: Config, cross_check: bool) -> int:
    src = ZipfSource(cfg.rows, cfg.batch, cfg.keys, cfg.zipf_a, cfg.seed)
    p_batches = max(1, min(src.num_batches, cfg.paimon_rows // cfg.batch))
    p_rows = sum(src.size_of(i) for i in range(p_batches))
    loads = {"start": loadavg()}
    print(f"lakelog ingestion benchmark: python {sys.version.split()[0]}, pyarrow {pa.__version__}, "
          f"pypaimon {_version('pypaimon')}, {os.cpu_count()} cores, load average (1/5/15 min) "
          f"{loads['start']}, workdir {cfg.workdir}")
    print(DEFINITIONS.format(rows=cfg.rows, nb=src.num_batches, batch=cfg.batch, a=cfg.zipf_a, keys=cfg.keys,
                             seed=cfg.seed, buckets=cfg.buckets, prows=p_rows))

    step("input sizes (Arrow, Parquet zstd 1) and key skew")
    stats = input_stats(src)
    print(f"input: {cfg.rows} rows; Arrow {fmt_bytes(stats.arrow_bytes)}, as Parquet zstd 1 "
          f"{fmt_bytes(stats.parquet_zstd_bytes)}; {stats.distinct_keys} distinct keys drawn of {cfg.keys}; "
          f"hottest key = {stats.hottest_key_share:.1%} of rows\n")

    # ---- ingestion (child process) ----
    warehouse = os.path.join(cfg.workdir, "lakelog")
    loads["before ingest"] = loadavg()
    step(f"ingest {cfg.rows} rows in a child process")
    ing = run_ingest_child(cfg, warehouse)
    loads["after ingest"] = loadavg()
    step(f"ingest {cfg.rows} rows again through one-shot t.write calls (information)")
    oneshot = run_ingest_child(replace(cfg, writer="one-shot"), os.path.join(cfg.workdir, "lakelog-one-shot"))
    loads["after one-shot ingest"] = loadavg()

    # ---- reads ----
    step("expected final rows")
    expected = expected_rows(src, src.num_batches)
    final_path = os.path.join(cfg.workdir, "final.parquet")
    final_zstd = os.path.join(cfg.workdir, "final-zstd1.parquet")
    pq.write_table(expected, final_path)
    pq.write_table(expected, final_zstd, compression="zstd", compression_level=1)
    read_jobs: dict[str, tuple[Callable[..., Any], Callable[[], Any] | None]] = {
        "lakelog": (lambda t: t.to_arrow(), lambda: lakelog_open(warehouse)),
        "parquet": (lambda: pq.read_table(final_path), None),
        "parquet_zstd": (lambda: pq.read_table(final_zstd), None),
    }
    step(f"merged read at the end of ingestion, interleaved with parquet x{cfg.reps}")
    r_end = time_interleaved(read_jobs, cfg.reps)
    files_end = len(lakelog_open(warehouse).files())
    step("compact(full=True)")
    before_compact = data_bytes_on_disk(lakelog_open(warehouse).path)[0]
    compact_t = time_best(lambda t: t.compact(full=True), 1, setup=lambda: lakelog_open(warehouse))
    compact_bytes = data_bytes_on_disk(lakelog_open(warehouse).path)[0] - before_compact
    step(f"read after compact(full=True), interleaved with parquet x{cfg.reps}")
    r_full = time_interleaved(read_jobs, cfg.reps)
    files_full = len(lakelog_open(warehouse).files())
    checks = [
        compare("lakelog read at the end of ingestion == expected last-write-wins rows",
                r_end["lakelog"].result, expected),
        compare("lakelog read after compact(full=True) == expected", r_full["lakelog"].result, expected),
    ]
    if cross_check:
        step("pypaimon reads lakelog's compacted table")
        checks.append(compare("pypaimon reading lakelog's compacted table == expected",
                              paimon_read(paimon_open(warehouse)), expected))
    del expected

    # ---- scaled comparison with pypaimon ----
    step(f"scaled run: {p_rows} rows into lakelog and pypaimon")
    p_expected = expected_rows(src, p_batches)
    p_inputs = [src.batch_at(i) for i in range(p_batches)]
    ll_small = os.path.join(cfg.workdir, "lakelog-small")
    wo_small = os.path.join(cfg.workdir, "lakelog-small-write-only")
    pp_small = os.path.join(cfg.workdir, "pypaimon-small")
    ll_w = time_best(lambda t: lakelog_write_all(t, p_inputs), 1,
                     setup=lambda: lakelog_create(ll_small, cfg.buckets))
    wo_w = time_best(lambda t: lakelog_write_all(t, p_inputs), 1,
                     setup=lambda: lakelog_create(wo_small, cfg.buckets, WRITE_ONLY))
    pp_w = time_best(lambda t: paimon_write_all(t, p_inputs), 1, setup=lambda: paimon_create(pp_small, cfg.buckets))
    step(f"scaled run: reads (lakelog x{cfg.reps}, pypaimon x{cfg.paimon_reps})")
    ll_r = time_best(lambda t: t.to_arrow(), cfg.reps, setup=lambda: lakelog_open(ll_small))
    wo_r = time_best(lambda t: t.to_arrow(), cfg.reps, setup=lambda: lakelog_open(wo_small))
    pp_r = time_best(paimon_read, cfg.paimon_reps, setup=lambda: paimon_open(pp_small))
    small_files = {name: live_data_files(wh) for name, wh in (("ll", ll_small), ("wo", wo_small), ("pp", pp_small))}
    checks += [
        compare(f"scaled: lakelog read == expected ({p_rows} input rows)", ll_r.result, p_expected),
        compare("scaled: lakelog write-only table read == expected", wo_r.result, p_expected),
        compare("scaled: pypaimon read == expected", pp_r.result, p_expected),
    ]
    loads["end"] = loadavg()
    print()

    # ---- figures ----
    write_s = sum(ing["write_times"]) + ing["drain"]
    rate = cfg.rows / write_s
    oneshot_rate = cfg.rows / sum(oneshot["write_times"])
    written = ing["bytes_on_disk"] + ing["bytes_deleted"]
    wa = written / stats.parquet_zstd_bytes
    wa_arrow = written / stats.arrow_bytes
    hwm = ing["vm_hwm"] or ing["rss_sampled_peak"]
    peak_rss = max(hwm, ing["rss_sampled_peak"])

    def rr(t: Timing) -> float:
        return float(t.result.num_rows / t.best)

    end_ratio = rr(r_end["lakelog"]) / rr(r_end["parquet"])
    full_ratio = rr(r_full["lakelog"]) / rr(r_full["parquet"])
    pp_ratio = rr(ll_r) / rr(pp_r)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    rows = [
        ["ingestion rows/s (stream writer, commit per batch, background compaction)", fmt_rate(rate),
         f">= {fmt_rate(TARGET_INGEST_RATE)}", verdict(rate >= TARGET_INGEST_RATE)],
        ["  one-shot t.write per batch (waits for its compaction)", fmt_rate(oneshot_rate), "-", "info"],
        ["  one-shot: max sorted runs / write amplification",
         f"{oneshot['max_runs']} / {(oneshot['bytes_on_disk'] + oneshot['bytes_deleted']) / stats.parquet_zstd_bytes:.2f}",
         "-", "info"],
        ["write amplification: bytes written / input as Parquet zstd 1",
         f"{wa:.2f} ({fmt_bytes(written)} / {fmt_bytes(stats.parquet_zstd_bytes)})", f"<= {TARGET_WRITE_AMP:g}",
         verdict(wa <= TARGET_WRITE_AMP)],
        ["  bytes written / input Arrow nbytes", f"{wa_arrow:.2f} (Arrow {fmt_bytes(stats.arrow_bytes)})", "-",
         "info"],
        ["max sorted runs in a bucket (after any commit)",
         f"{ing['max_runs']} (batch {ing['max_runs_at'] + 1})", f"<= stop-trigger {ing['stop_trigger']}",
         verdict(ing["max_runs"] <= ing["stop_trigger"])],
        ["peak RSS of the ingesting process (VmHWM)", fmt_bytes(peak_rss), f"< {fmt_bytes(TARGET_RSS)}",
         verdict(peak_rss < TARGET_RSS)],
        ["  sampled RSS peak / RSS before the first write",
         f"{fmt_bytes(ing['rss_sampled_peak'])} / {fmt_bytes(ing['rss_before'])}", "-", "info"],
        ["merged read rows/s at the end vs parquet (default)",
         f"{fmt_rate(rr(r_end['lakelog']))} vs {fmt_rate(rr(r_end['parquet']))} = {end_ratio:.2f}x",
         f">= {TARGET_READ_VS_PARQUET:g}x", verdict(end_ratio >= TARGET_READ_VS_PARQUET)],
        ["  same vs parquet zstd 1", f"{rr(r_end['lakelog']) / rr(r_end['parquet_zstd']):.2f}x "
         f"(parquet zstd {fmt_rate(rr(r_end['parquet_zstd']))})", "-", "info"],
        ["read after compact(full=True) vs parquet (default)",
         f"{fmt_rate(rr(r_full['lakelog']))} vs {fmt_rate(rr(r_full['parquet']))} = {full_ratio:.2f}x",
         f">= {TARGET_READ_VS_PARQUET:g}x", verdict(full_ratio >= TARGET_READ_VS_PARQUET)],
        ["  same vs parquet zstd 1", f"{rr(r_full['lakelog']) / rr(r_full['parquet_zstd']):.2f}x", "-", "info"],
        [f"read rows/s vs pypaimon (scaled: {p_rows} input rows)",
         f"{fmt_rate(rr(ll_r))} vs {fmt_rate(rr(pp_r))} = {pp_ratio:.1f}x", "-", "info"],
        ["  same, lakelog table with write-only=true (no compaction, like pypaimon)",
         f"{fmt_rate(rr(wo_r))} vs {fmt_rate(rr(pp_r))} = {rr(wo_r) / rr(pp_r):.1f}x", "-", "info"],
        ["  write rows/s vs pypaimon (same scaled run)",
         f"{fmt_rate(p_rows / ll_w.best)} vs {fmt_rate(p_rows / pp_w.best)} = {pp_w.best / ll_w.best:.1f}x",
         "-", "info"],
    ]
    print(render_table(["measure", "value", "target", "result"], rows))
    print()
    t = ing["write_times"]
    compacting = [x for x, n in zip(t, ing["snapshots_per_commit"]) if n > 1]
    plain = [x for x, n in zip(t, ing["snapshots_per_commit"]) if n <= 1]
    print("details:")
    print("  load average (1/5/15 min): " + "; ".join(f"{k} {v}" for k, v in loads.items()))
    print(f"  ingestion: {ing['batches']} commits, {write_s:.1f}s writing and committing (of which "
          f"{ing['drain']:.2f}s for the final wait for compaction; {ing['wall']:.1f}s child wall incl. "
          f"batch generation and t.files() checks); per commit p50 {pct(t, 50):.3f}s, p90 {pct(t, 90):.3f}s, "
          f"max {max(t):.3f}s")
    cpu = sum(ing["write_cpu_times"])
    print(f"  CPU time writing (process_time, all threads): {cpu:.1f}s = {cpu / write_s:.2f} cores busy on "
          f"average over {os.cpu_count()}; {fmt_rate(cfg.rows / cpu)} per CPU-second")
    print(f"  commits that compacted (APPEND + COMPACT snapshot): {len(compacting)} taking "
          f"{sum(compacting):.1f}s (mean {np.mean(compacting) if compacting else 0:.3f}s); the other "
          f"{len(plain)} took {sum(plain):.1f}s (mean {np.mean(plain) if plain else 0:.3f}s)")
    print(f"  compaction (background threads): {ing['compactions']} rewrites (+{ing['upgrades']} level moves without "
          f"I/O), read {fmt_bytes(ing['compact_in_bytes'])}, wrote {fmt_bytes(ing['compact_out_bytes'])}, "
          f"{ing['compact_seconds']:.1f} thread-seconds (summed over the writer's bucket threads, which overlap)")
    print(f"  bytes written: {fmt_bytes(written)} = on disk {fmt_bytes(ing['bytes_on_disk'])} "
          f"({ing['files_on_disk']} files) + deleted before commit {fmt_bytes(ing['bytes_deleted'])} "
          f"({ing['files_deleted']} files)")
    print(f"  manifests' ADD entries: level-0 flushes {fmt_bytes(ing['bytes_added_append'])} "
          f"({ing['files_added_append']} files, {ing['bytes_added_append'] / stats.parquet_zstd_bytes:.2f}x input "
          f"parquet) + compaction outputs {fmt_bytes(ing['bytes_added_compact'])} "
          f"({ing['files_added_compact']} files) = "
          f"{fmt_bytes(ing['bytes_added_append'] + ing['bytes_added_compact'])} (should equal on disk)")
    print(f"  table at the end: {ing['live_files']} live files, {fmt_bytes(ing['live_bytes'])}, levels "
          f"{ing['final_levels']}; final rows as Parquet zstd 1: {fmt_bytes(os.path.getsize(final_zstd))}; "
          f"{ing['snapshots']} snapshots, metadata (manifest/ + snapshot/) {fmt_bytes(ing['metadata_bytes'])}")
    print(f"  sorted runs per bucket after a commit (runs: bucket-commits): {ing['runs_hist']}; "
          f"compaction-trigger {ing['compaction_trigger']}, stop-trigger {ing['stop_trigger']}")
    print(f"  peak RSS: VmHWM {fmt_bytes(ing['vm_hwm'] or 0)}, sampled {fmt_bytes(ing['rss_sampled_peak'])} "
          f"({ing['rss_samples']} samples); write-buffer-size {fmt_bytes(ing['write_buffer'])}; one batch "
          f"{fmt_bytes(stats.arrow_bytes / src.num_batches)} Arrow")
    print(f"  compact(full=True): {compact_t.best:.2f}s, wrote {fmt_bytes(compact_bytes)}; live data files "
          f"{files_end} at the end of ingestion -> {files_full} after")
    print(f"  scaled run: data files a full read opens: lakelog {small_files['ll']} (default options), lakelog "
          f"write-only {small_files['wo']}, pypaimon {small_files['pp']}")
    print("  times (s, every repetition):")
    for name, tm in [("lakelog read at end", r_end["lakelog"]), ("parquet read", r_end["parquet"]),
                     ("parquet zstd1 read", r_end["parquet_zstd"]),
                     ("lakelog read after compact", r_full["lakelog"]), ("parquet read", r_full["parquet"]),
                     ("parquet zstd1 read", r_full["parquet_zstd"]),
                     ("scaled: lakelog write", ll_w), ("scaled: lakelog write-only write", wo_w),
                     ("scaled: pypaimon write", pp_w), ("scaled: lakelog read", ll_r),
                     ("scaled: lakelog write-only read", wo_r), ("scaled: pypaimon read", pp_r)]:
        print(f"    {name:34s} " + " ".join(f"{x:.3f}" for x in tm.times))
    print()
    print("checks:")
    for ok, msg in checks:
        print(f"  [{'OK' if ok else '!!'}] {msg}")
    return 0 if all(ok for ok, _ in checks) else 1


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


_T0_ENV = "LAKELOG_BENCH_T0"
_T0 = float(os.environ.get(_T0_ENV, time.time()))


def step(name: str) -> None:
    """A progress line on stderr, stamped with the seconds since the benchmark started."""
    print(f"[{time.time() - _T0:7.1f}s] {name}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--ingest-child"]:
        cfg = Config(**json.loads(argv[1]))
        print(json.dumps(ingest(cfg, argv[2])))
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=None, help="upserts in total (default 10M; --quick 1M)")
    p.add_argument("--batch", type=int, default=100_000, help="rows per t.write() commit (default 100k)")
    p.add_argument("--keys", type=int, default=None, help="key space [0, keys) (default 2M; --quick 200k)")
    p.add_argument("--zipf-a", type=float, default=1.1, help="numpy zipf exponent a > 1 (default 1.1)")
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--quick", action="store_true", help="1M rows over 200k keys, 200k-row pypaimon run")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each read (best kept)")
    p.add_argument("--paimon-rows", type=int, default=None,
                   help="input rows of the scaled lakelog/pypaimon comparison (default 500k; --quick 200k)")
    p.add_argument("--paimon-reps", type=int, default=1, help="repetitions of the pypaimon read")
    p.add_argument("--no-cross-check", action="store_true", help="skip pypaimon reading the big table")
    p.add_argument("--workdir", default=None, help="scratch directory (default: a new temp dir, removed)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--profile", metavar="DIR", default=None,
                   help="also run the ingestion and final read in-process under cProfile (dumps in DIR)")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--profile-only", action="store_true", help="only the profiled run")
    args = p.parse_args(argv)
    rows = args.rows if args.rows is not None else (1_000_000 if args.quick else 10_000_000)
    keys = args.keys if args.keys is not None else (200_000 if args.quick else 2_000_000)
    prows = args.paimon_rows if args.paimon_rows is not None else (200_000 if args.quick else 500_000)
    workdir = args.workdir or tempfile.mkdtemp(prefix="lakelog-ingest-")
    os.makedirs(workdir, exist_ok=True)
    cfg = Config(rows=rows, batch=args.batch, keys=keys, zipf_a=args.zipf_a, buckets=args.buckets,
                 seed=args.seed, reps=args.reps, paimon_rows=prows, paimon_reps=args.paimon_reps,
                 workdir=workdir)
    if args.profile_only and not args.profile:
        p.error("--profile-only needs --profile DIR")
    try:
        code = 0 if args.profile_only else run(cfg, not args.no_cross_check)
        if args.profile:
            profile_run(cfg, args.profile, args.profile_top)
        return code
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
