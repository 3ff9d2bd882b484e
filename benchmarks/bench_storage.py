"""Storage benchmark: lakelog's primary-key write and merged read against pypaimon 2.1 and raw Parquet.

Not a timed test: one run prints throughput *ratios* measured on the same data in the same process
(absolute times on a shared machine are noise). See benchmarks/README.md.

    python benchmarks/bench_storage.py                         # 1M rows, 10 batches, 4 buckets
    python benchmarks/bench_storage.py --rows 100000 --batches 5   # quick run
    python benchmarks/bench_storage.py --profile /tmp/prof     # + cProfile of lakelog write and read
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.metadata
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import (  # noqa: E402
    BENCH_SCHEMA,
    TABLE,
    MemorySampler,
    Timing,
    final_rows,
    fmt_bytes,
    fmt_rate,
    make_batches,
    normalize,
    paimon_create,
    paimon_open,
    render_table,
    rss_bytes,
    serial_thread_pools,
    time_best,
    time_interleaved,
)

__all__ = ["main"]

CONNECTOR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "connector")
DEFAULT_WRITE_BUFFER = 256 << 20  # Paimon's default write-buffer-size
WRITE_ONLY = {"write-only": "true"}  # no compaction inside write(): every commit adds one sorted run

TARGETS = {
    "write_vs_paimon": 10.0,
    "write_vs_parquet": 0.4,
    "read_vs_paimon": 10.0,
    "read_vs_parquet": 0.3,
}

DEFINITIONS = """\
Definitions (all on the same deterministic data, in one process, wall-clock time.perf_counter):
  data           {batches} batches x {per_batch} upserts, 5 columns (id BIGINT key, name STRING, price DOUBLE,
                 qty BIGINT, city STRING), keys uniform in [0, {rows}), seed {seed}; {buckets} buckets.
  write rows/s   input rows / wall time of the {batches} calls. lakelog: t.write(batch), one atomic
                 commit each.
                 pypaimon: per batch new_batch_write_builder() -> write_arrow -> prepare_commit -> commit
                 into a PK table with bucket={buckets}. parquet: pq.write_table(batch, file) per batch
                 (headline: pyarrow defaults = snappy; also zstd level 1). Table creation is not timed.
  read rows/s    rows returned / wall time of a full merged read. lakelog: t.to_arrow() (merge-on-read over
                 all sorted runs). pypaimon: new_read_builder() -> new_scan().plan().splits() ->
                 new_read().to_arrow(splits) of its own table. parquet: pq.read_table of ONE file holding
                 the final deduplicated rows (default options). A fresh table handle per repetition.
  lakelog table  default options, so write() compacts inline the way Paimon's batch writer does
                 (num-sorted-run.compaction-trigger = 5) and the read merges fewer runs. Info rows:
                 a second table with write-only=true (no inline compaction: {batches} sorted runs per
                 bucket, as pypaimon 2.1's writer leaves them), written and read the same way.
  after compact  the same lakelog read after t.compact(full=True) (info; compared with parquet).
  repetitions    best (minimum time) of --reps for lakelog write/read and parquet, run interleaved
                 (lakelog, parquet, parquet zstd, lakelog, ...) so load bursts hit both sides; pypaimon
                 write once, pypaimon read best of --paimon-reps (it is slow).
  peak memory    a separate child process runs the lakelog write of all batches (the input batches are
                 already built); Arrow peak = max(sampled pa.total_allocated_bytes(), pool max_memory())
                 minus the bytes allocated before the first write(); RSS peak = max sampled RSS (psutil
                 or /proc, every 2 ms) minus RSS before. Budget = 4 x one input batch (Arrow nbytes) +
                 the write buffer, where the buffer holds at most one batch per commit
                 (min(write-buffer-size, batch)); the budget with the full configured
                 write-buffer-size is printed too.
"""


@dataclass
class Config:
    rows: int
    batches: int
    buckets: int
    seed: int
    reps: int
    paimon_reps: int
    workdir: str


# ---------------------------------------------------------------------------------------------------
# lakelog
# ---------------------------------------------------------------------------------------------------
def lakelog_create(warehouse: str, buckets: int, options: dict[str, str] | None = None) -> Any:
    import lakelog

    shutil.rmtree(warehouse, ignore_errors=True)
    cat = lakelog.Catalog(warehouse)
    opts = {"bucket": str(buckets), **(options or {})}
    return cat.create_table(TABLE, BENCH_SCHEMA, primary_key=["id"], options=opts)


def lakelog_open(warehouse: str) -> Any:
    import lakelog

    return lakelog.Catalog(warehouse).get_table(TABLE)


def lakelog_write_all(table: Any, batches: list[pa.Table]) -> list[int | None]:
    return [table.write(b) for b in batches]


def lakelog_write_buffer_bytes(table: Any) -> int:
    try:
        return int(table.store.options.write_buffer_size.bytes)
    except AttributeError:
        return DEFAULT_WRITE_BUFFER


# ---------------------------------------------------------------------------------------------------
# pypaimon
# ---------------------------------------------------------------------------------------------------
def paimon_write_all(table: Any, batches: list[pa.Table]) -> str:
    writer_class = ""
    for batch in batches:
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        commit = builder.new_commit()
        writer_class = type(write).__name__
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    return writer_class


def paimon_read(table: Any) -> pa.Table:
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    return builder.new_read().to_arrow(splits)


def live_data_files(warehouse: str) -> int:
    """Data files a full read must open, as pypaimon's scan plans them (works on lakelog's tables too)."""
    splits = paimon_open(warehouse).new_read_builder().new_scan().plan().splits()
    return sum(len(s.files) for s in splits)


# ---------------------------------------------------------------------------------------------------
# raw parquet
# ---------------------------------------------------------------------------------------------------
def parquet_write_all(directory: str, batches: list[pa.Table], **options: Any) -> None:
    for i, batch in enumerate(batches):
        pq.write_table(batch, os.path.join(directory, f"batch-{i}.parquet"), **options)


def fresh_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# ---------------------------------------------------------------------------------------------------
# memory probe (child process, so the Arrow pool's max_memory() belongs to the write alone)
# ---------------------------------------------------------------------------------------------------
def memory_probe(cfg: Config) -> dict[str, int]:
    batches = make_batches(cfg.rows, cfg.batches, cfg.seed)
    table = lakelog_create(os.path.join(cfg.workdir, "lakelog-mem"), cfg.buckets)
    gc.collect()
    pool = pa.default_memory_pool()
    base_arrow = pa.total_allocated_bytes()
    base_rss = rss_bytes()
    with MemorySampler() as sampler:
        lakelog_write_all(table, batches)
    pool_peak = pool.max_memory() or 0
    return {
        "arrow_peak": max(sampler.max_arrow, pool_peak) - base_arrow,
        "arrow_peak_sampled": sampler.max_arrow - base_arrow,
        "rss_peak": sampler.max_rss - base_rss,
        "samples": sampler.samples,
        "batch_bytes": batches[0].nbytes,
        "write_buffer": lakelog_write_buffer_bytes(table),
    }


def run_memory_probe(cfg: Config) -> dict[str, int]:
    cmd = [
        sys.executable, os.path.abspath(__file__), "--memory-probe",
        "--rows", str(cfg.rows), "--batches", str(cfg.batches), "--buckets", str(cfg.buckets),
        "--seed", str(cfg.seed), "--workdir", cfg.workdir,
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# ---------------------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------------------
def compare(name: str, got: pa.Table, want: pa.Table) -> tuple[bool, str]:
    g = normalize(got)
    if g.num_rows != want.num_rows:
        return False, f"{name}: MISMATCH rows {g.num_rows} != {want.num_rows}"
    if g.equals(want):
        return True, f"{name}: OK ({g.num_rows} rows, same content)"
    for col in BENCH_SCHEMA.names:
        if not g.column(col).equals(want.column(col)):
            return False, f"{name}: MISMATCH in column {col!r} ({g.num_rows} rows)"
    return False, f"{name}: MISMATCH"


# ---------------------------------------------------------------------------------------------------
# profiling
# ---------------------------------------------------------------------------------------------------
def profile_lakelog(cfg: Config, batches: list[pa.Table], outdir: str, top: int) -> None:
    os.makedirs(outdir, exist_ok=True)
    warehouse = os.path.join(cfg.workdir, "lakelog-prof")
    table = lakelog_create(warehouse, cfg.buckets)
    jobs = [
        ("write", lambda: lakelog_write_all(table, batches)),
        ("read", lambda: lakelog_open(warehouse).to_arrow()),
        ("compact", lambda: lakelog_open(warehouse).compact(full=True)),
        ("read_after_compact", lambda: lakelog_open(warehouse).to_arrow()),
    ]
    import lakelog.connector.lsm.split_read  # noqa: F401  (load the modules whose pools get serialised)

    for name, job in jobs:
        prof = cProfile.Profile()
        with serial_thread_pools("lakelog") as patched:
            t0 = time.perf_counter()
            prof.enable()
            job()
            prof.disable()
            wall = time.perf_counter() - t0
        path = os.path.join(outdir, f"lakelog_{name}.prof")
        prof.dump_stats(path)
        print(f"\n=== cProfile lakelog {name}: {wall:.3f}s wall under the profiler (dump: {path}) ===")
        if patched:
            print(f"    thread pools run serially while profiling, in: {', '.join(patched)}")
        views = (("tottime", "own time, any code"), ("cumulative", "cumulative, lakelog code only"))
        for key, title in views:
            buf = io.StringIO()
            stats = pstats.Stats(prof, stream=buf)
            if key == "tottime":
                stats.strip_dirs().sort_stats(key).print_stats(top)
            else:
                stats.sort_stats(key).print_stats(r"/connector/", top)
            body = buf.getvalue().replace(CONNECTOR_DIR + os.sep, "")
            lines = [ln for ln in body.splitlines() if ln.strip()]
            start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
            print(f"--- by {key} ({title})")
            print("\n".join(lines[start:]))


# ---------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------
def verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return "info"
    return "PASS" if ratio >= target else "FAIL"


def run(cfg: Config, profile_dir: str | None, profile_top: int, cross_check: bool) -> int:
    per_batch = cfg.rows // cfg.batches
    total_in = per_batch * cfg.batches
    print(f"lakelog storage benchmark: python {sys.version.split()[0]}, pyarrow {pa.__version__}, "
          f"pypaimon {_version('pypaimon')}, {os.cpu_count()} cores, workdir {cfg.workdir}")
    print(DEFINITIONS.format(batches=cfg.batches, per_batch=per_batch, rows=cfg.rows, seed=cfg.seed,
                             buckets=cfg.buckets))

    batches = make_batches(cfg.rows, cfg.batches, cfg.seed)
    expected = final_rows(batches)
    print(f"input: {total_in} rows, one batch = {fmt_bytes(batches[0].nbytes)} Arrow; "
          f"final table: {expected.num_rows} distinct keys\n")

    # ---- writes ----
    ll_wh = os.path.join(cfg.workdir, "lakelog")
    wo_wh = os.path.join(cfg.workdir, "lakelog-write-only")
    pq_dir = os.path.join(cfg.workdir, "parquet")
    step(f"lakelog write / parquet write, interleaved x{cfg.reps}")
    w = time_interleaved(
        {
            "lakelog": (lambda t: lakelog_write_all(t, batches), lambda: lakelog_create(ll_wh, cfg.buckets)),
            "lakelog_wo": (
                lambda t: lakelog_write_all(t, batches),
                lambda: lakelog_create(wo_wh, cfg.buckets, WRITE_ONLY),
            ),
            "parquet": (lambda _: parquet_write_all(pq_dir, batches), lambda: fresh_dir(pq_dir)),
            "parquet_zstd": (
                lambda _: parquet_write_all(pq_dir, batches, compression="zstd", compression_level=1),
                lambda: fresh_dir(pq_dir),
            ),
        },
        cfg.reps,
    )
    ll_write, wo_write = w["lakelog"], w["lakelog_wo"]
    pq_write, pq_write_zstd = w["parquet"], w["parquet_zstd"]
    pp_wh = os.path.join(cfg.workdir, "pypaimon")
    step("pypaimon write")
    pp_write = time_best(lambda t: paimon_write_all(t, batches), 1,
                         setup=lambda: paimon_create(pp_wh, cfg.buckets))

    # ---- reads ----
    final_path = os.path.join(cfg.workdir, "final.parquet")
    pq.write_table(expected, final_path)
    final_zstd = os.path.join(cfg.workdir, "final-zstd1.parquet")
    pq.write_table(expected, final_zstd, compression="zstd", compression_level=1)
    step(f"lakelog read / parquet read, interleaved x{cfg.reps}")
    r = time_interleaved(
        {
            "lakelog": (lambda t: t.to_arrow(), lambda: lakelog_open(ll_wh)),
            "lakelog_wo": (lambda t: t.to_arrow(), lambda: lakelog_open(wo_wh)),
            "parquet": (lambda: pq.read_table(final_path), None),
            "parquet_zstd": (lambda: pq.read_table(final_zstd), None),
        },
        cfg.reps,
    )
    ll_read, wo_read, pq_read, pq_read_zstd = r["lakelog"], r["lakelog_wo"], r["parquet"], r["parquet_zstd"]
    step("pypaimon read")
    pp_read = time_best(paimon_read, cfg.paimon_reps, setup=lambda: paimon_open(pp_wh))
    cross: pa.Table | None = paimon_read(paimon_open(ll_wh)) if cross_check else None
    files = {name: live_data_files(wh) for name, wh in (("ll", ll_wh), ("wo", wo_wh), ("pp", pp_wh))}

    # ---- compaction ----
    step("lakelog compact + read")
    ll_compact = time_best(lambda t: t.compact(full=True), 1, setup=lambda: lakelog_open(ll_wh))
    rc = time_interleaved(
        {
            "lakelog": (lambda t: t.to_arrow(), lambda: lakelog_open(ll_wh)),
            "parquet": (lambda: pq.read_table(final_path), None),
        },
        cfg.reps,
    )
    ll_read_c, pq_read_c = rc["lakelog"], rc["parquet"]
    cross_c: pa.Table | None = paimon_read(paimon_open(ll_wh)) if cross_check else None

    # ---- memory ----
    step("lakelog write peak memory (child process)")
    mem = run_memory_probe(cfg)
    print()

    # ---- checks ----
    checks = [
        compare("lakelog merged read == expected last-write-wins rows", ll_read.result, expected),
        compare("pypaimon merged read == expected last-write-wins rows", pp_read.result, expected),
        compare("lakelog read == pypaimon read (row count + content)", ll_read.result,
                normalize(pp_read.result)),
        compare("lakelog read after compact(full=True) == expected", ll_read_c.result, expected),
        compare("lakelog write-only table read == expected", wo_read.result, expected),
    ]
    if cross is not None and cross_c is not None:
        checks.append(compare("pypaimon reading lakelog's table == expected", cross, expected))
        checks.append(compare("pypaimon reading lakelog's compacted table == expected", cross_c, expected))

    # ---- report ----
    def wr(t: Timing) -> float:
        return total_in / t.best

    def rr(t: Timing) -> float:
        return t.result.num_rows / t.best

    rows: list[list[str]] = []

    def add(measure: str, ours: float, base: float, target: float | None, unit: str = "rate") -> None:
        ratio = ours / base
        fmt = fmt_rate if unit == "rate" else fmt_bytes
        tgt = f">= {target:g}x" if target is not None else "-"
        rows.append([measure, fmt(ours), fmt(base), f"{ratio:.2f}x", tgt, verdict(ratio, target)])

    add("write rows/s vs pypaimon", wr(ll_write), wr(pp_write), TARGETS["write_vs_paimon"])
    add("write rows/s vs parquet (default=snappy)", wr(ll_write), wr(pq_write), TARGETS["write_vs_parquet"])
    add("write rows/s vs parquet (zstd 1)", wr(ll_write), wr(pq_write_zstd), None)
    add("write rows/s, write-only=true vs pypaimon", wr(wo_write), wr(pp_write), None)
    add("write rows/s, write-only=true vs parquet", wr(wo_write), wr(pq_write), None)
    add("merged read rows/s vs pypaimon", rr(ll_read), rr(pp_read), TARGETS["read_vs_paimon"])
    add("merged read rows/s vs parquet (default)", rr(ll_read), rr(pq_read), TARGETS["read_vs_parquet"])
    add("merged read rows/s vs parquet (zstd 1)", rr(ll_read), rr(pq_read_zstd), None)
    add("merged read rows/s, write-only table vs pypaimon", rr(wo_read), rr(pp_read), None)
    add("merged read rows/s, write-only table vs parquet", rr(wo_read), rr(pq_read), None)
    add("read after compact rows/s vs parquet", rr(ll_read_c), rr(pq_read_c), None)
    add("read after compact rows/s vs pypaimon", rr(ll_read_c), rr(pp_read), None)

    batch_bytes = mem["batch_bytes"]
    buffer_eff = min(mem["write_buffer"], batch_bytes)
    budget = 4 * batch_bytes + buffer_eff
    budget_cfg = 4 * batch_bytes + mem["write_buffer"]
    mem_rows = [
        ["Arrow peak of lakelog write", fmt_bytes(mem["arrow_peak"]), fmt_bytes(budget),
         f"{mem['arrow_peak'] / budget:.2f}x", "<= 1x", "PASS" if mem["arrow_peak"] <= budget else "FAIL"],
        ["RSS peak of lakelog write", fmt_bytes(mem["rss_peak"]), fmt_bytes(budget),
         f"{mem['rss_peak'] / budget:.2f}x", "-", "info"],
        ["Arrow peak vs configured buffer budget", fmt_bytes(mem["arrow_peak"]), fmt_bytes(budget_cfg),
         f"{mem['arrow_peak'] / budget_cfg:.2f}x", "<= 1x",
         "PASS" if mem["arrow_peak"] <= budget_cfg else "FAIL"],
    ]

    print(render_table(["measure", "lakelog", "baseline", "ratio", "target", "result"], rows))
    print(f"  data files a full read opens: lakelog {files['ll']} (default options), lakelog write-only "
          f"{files['wo']}, pypaimon {files['pp']}, lakelog after compact(full=True) "
          f"{live_data_files(ll_wh)}")
    print()
    print(render_table(["memory", "lakelog", "budget", "ratio", "target", "result"], mem_rows))
    print(f"  budget = 4 x batch ({fmt_bytes(batch_bytes)}) + buffer min(write-buffer-size "
          f"{fmt_bytes(mem['write_buffer'])}, batch) = {fmt_bytes(budget)}; configured-buffer budget "
          f"{fmt_bytes(budget_cfg)}; {mem['samples']} samples")
    print()
    print("times (s, every repetition):")
    for name, t in [("lakelog write", ll_write), ("lakelog write, write-only", wo_write),
                    ("pypaimon write", pp_write), ("parquet write", pq_write),
                    ("parquet write zstd1", pq_write_zstd), ("lakelog read", ll_read),
                    ("lakelog read, write-only table", wo_read),
                    ("pypaimon read", pp_read), ("parquet read", pq_read),
                    ("parquet read zstd1", pq_read_zstd),
                    ("lakelog compact(full)", ll_compact), ("lakelog read after compact", ll_read_c),
                    ("parquet read (after-compact round)", pq_read_c)]:
        print(f"  {name:36s} " + " ".join(f"{x:.3f}" for x in t.times))
    print(f"  pypaimon writer: {pp_write.result} (pypaimon_rust native writer "
          f"{'available' if _has_native_paimon() else 'not installed'})")
    print()
    print("checks:")
    for ok, msg in checks:
        print(f"  [{'OK' if ok else '!!'}] {msg}")

    if profile_dir:
        profile_lakelog(cfg, batches, profile_dir, profile_top)
    return 0 if all(ok for ok, _ in checks) else 1


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _has_native_paimon() -> bool:
    try:
        import pypaimon_rust  # noqa: F401
    except ImportError:
        return False
    return True


_T0 = time.perf_counter()


def step(name: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {name} ...", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="total input rows and key range (default 1M)")
    p.add_argument("--batches", type=int, default=10, help="number of write() commits (default 10)")
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--reps", type=int, default=3, help="repetitions of the cheap measures (best is kept)")
    p.add_argument("--paimon-reps", type=int, default=1, help="repetitions of the pypaimon read")
    p.add_argument("--workdir", default=None, help="scratch directory (default: a new temp dir, removed)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--no-cross-check", action="store_true", help="skip pypaimon reading lakelog's table")
    p.add_argument("--profile", metavar="DIR", default=None, help="also cProfile lakelog write/read into DIR")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--profile-only", action="store_true", help="only profile, skip the comparison")
    p.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    workdir = args.workdir or tempfile.mkdtemp(prefix="lakelog-bench-")
    os.makedirs(workdir, exist_ok=True)
    cfg = Config(rows=args.rows, batches=args.batches, buckets=args.buckets, seed=args.seed,
                 reps=args.reps, paimon_reps=args.paimon_reps, workdir=workdir)
    if args.memory_probe:
        print(json.dumps(memory_probe(cfg)))
        return 0
    try:
        if args.profile_only:
            if not args.profile:
                p.error("--profile-only needs --profile DIR")
            batches = make_batches(cfg.rows, cfg.batches, cfg.seed)
            profile_lakelog(cfg, batches, args.profile, args.profile_top)
            return 0
        return run(cfg, args.profile, args.profile_top, not args.no_cross_check)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
