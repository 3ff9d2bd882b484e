"""PyFlink ingestion benchmark: the lakelog sink vs a discarding sink, same source, same map, same run.

Not a timed test: one run prints figures, the target and PASS/FAIL. See benchmarks/README.md.

    /work/flinkvenv/bin/python benchmarks/bench_flink_ingest.py                 # 2M rows, PK + append table
    /work/flinkvenv/bin/python benchmarks/bench_flink_ingest.py --rows 500000 --tables pk
    /work/flinkvenv/bin/python benchmarks/bench_flink_ingest.py --exec-mode thread
    /work/flinkvenv/bin/python benchmarks/bench_flink_ingest.py --floor   # + a no-op keyed stage (diagnosis)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import BENCH_SCHEMA, fmt_rate, loadavg, render_table, step  # noqa: E402

__all__ = ["main", "RowMaker", "JobResult"]

TARGET_RATIO = 0.7
WORKER_MODE_ENV = "_python_worker_execution_mode"  # read by PyFlink when a job is executed locally
CITIES = ["amsterdam", "berlin", "cairo", "delhi", "edinburgh", "florence", "geneva", "hanoi"]

METHOD = """\
Method (one process, jobs run one after another on a local MiniCluster; the machine is shared):
  source     NumberSequenceSource(0, rows-1) at the job parallelism (Java, bounded).
  map        the same Python MapFunction in every job: x -> Row(id=x, name='user-<x>', price=(x % 100000)
             / 100, qty=x % 10000, city=<one of 8>) (the table's 5 columns); it records the wall-clock
             time of its first and its last row (time.time()) and writes them out in close().
  baseline   source -> map -> DiscardingSink (Java), the same environment settings.
  lakelog    source -> map -> sink_to_lakelog(table), default settings: lakelog's Java RowBatcher
             (chained to the map) gathers the rows into Arrow batches, a Python flat-map cuts each
             batch into one blob per (partition, bucket); key_by(partition, bucket) -> writer (one
             call per blob; writes before each checkpoint barrier) -> checkpoint-gated commit
             channel -> committer. Fresh table per job. pk: primary-key table fed as an insert-only
             stream of upserts (changelog=False); append: append table; pk-changelog: primary-key
             table with changelog=True (the default for primary-key tables; RowKinds are read on
             the JVM). --python-only: the sink's Python-only path (java=False: a pandas UDF batches,
             a Python flat-map reads RowKinds first).
  throughput rows / (t_end - t_first), t_first = the earliest first-row time over the map subtasks, so
             the job start-up (MiniCluster, Python workers) is excluded. baseline: t_end = the latest
             last-row time of the map subtasks (the discarding sink is chained, in Java). lakelog:
             t_end = time_millis of the table's last snapshot, i.e. the moment every row is committed
             and readable (includes the final flush and commit after end of input).
  floor      (--floor) source -> map -> key_by(id % 4) -> a KeyedProcessFunction that does nothing ->
             discard: the cost of any keyed Python stage after the map, i.e. the best a sink that
             needs keyed state per (partition, bucket) could do in PyFlink.
  CPU        CPU seconds of the JVM, the Python workers and this client between t_first and t_end
             (psutil, per process of this process tree, sampled every 0.25 s and interpolated; also
             split into python / jvm), reported as rows per CPU-second: less sensitive than rows/s
             to other load on the machine.
  workers    --workers process (default): Python workers are separate processes, one per task slot
             (set through PyFlink's _python_worker_execution_mode=process), as on a real cluster.
             loopback: PyFlink's default for a local MiniCluster: every Python function of every
             subtask runs in threads of this client process, under one GIL.
  check      after each lakelog job the table is read back: row count, distinct ids, sum(id), sum(qty),
             sum of name lengths must equal what the source produced."""


# ---- the shared map -----------------------------------------------------------------------------------
class RowMaker:
    """``x -> Row`` of the benchmark schema; records first/last row wall times, dumped in ``close``."""

    def __init__(self, stats_dir: str, run_id: str) -> None:
        self.stats_dir = stats_dir
        self.run_id = run_id
        self.first = 0.0
        self.last = 0.0
        self.count = 0

    def open(self, runtime_context: Any) -> None:
        from pyflink.common import Row

        self.row = Row
        self.first = 0.0
        self.count = 0

    def map(self, x: int) -> Any:
        t = time.time()
        if not self.count:
            self.first = t
        self.last = t
        self.count += 1
        return self.row(x, "user-" + str(x), (x % 100_000) / 100.0, x % 10_000, CITIES[x & 7])

    def close(self) -> None:
        if not self.count:
            return
        path = os.path.join(self.stats_dir, f"{self.run_id}-{uuid.uuid4().hex}.json")
        with open(path, "w") as fh:
            json.dump({"first": self.first, "last": self.last, "count": self.count, "pid": os.getpid()}, fh)


def _map_function(stats_dir: str, run_id: str) -> Any:
    from pyflink.datastream import MapFunction

    class _RowMakerFn(RowMaker, MapFunction):  # type: ignore[misc]
        pass

    return _RowMakerFn(stats_dir, run_id)


def _noop_keyed() -> Any:
    from pyflink.datastream import KeyedProcessFunction

    class _Noop(KeyedProcessFunction):  # type: ignore[misc]
        def process_element(self, value: Any, ctx: Any) -> Any:
            return iter(())

    return _Noop()


def expected_sums(rows: int) -> dict[str, int]:
    x = np.arange(rows, dtype=np.int64)
    name_len = int((5 + np.char.str_len(x.astype(str))).sum()) if rows <= 50_000_000 else -1
    return {"rows": rows, "ids": rows, "sum_id": int(x.sum()), "sum_qty": int((x % 10_000).sum()),
            "name_len": name_len}


def table_sums(t: pa.Table) -> dict[str, int]:
    return {
        "rows": t.num_rows,
        "ids": int(pc.count_distinct(t.column("id")).as_py()),
        "sum_id": int(pc.sum(t.column("id")).as_py() or 0),
        "sum_qty": int(pc.sum(t.column("qty")).as_py() or 0),
        "name_len": int(pc.sum(pc.utf8_length(t.column("name"))).as_py() or 0),
    }


# ---- CPU of the process tree ---------------------------------------------------------------------------
def process_cpu() -> dict[tuple[int, float], tuple[str, float]]:
    """User + system CPU seconds of this process and each live descendant, keyed by (pid, start time),
    with a label: 'python' (Python workers), 'jvm' (the MiniCluster JVM) or 'client' (this process)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return {}
    me = psutil.Process()
    out: dict[tuple[int, float], tuple[str, float]] = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            with p.oneshot():
                c = p.cpu_times()
                name = p.name()
                key = (p.pid, p.create_time())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        label = "client" if p.pid == me.pid else ("jvm" if "java" in name else "python")
        out[key] = (label, c.user + c.system)
    return out


class CpuSampler:
    """Samples the CPU of this process tree every ``interval_s`` in a thread. Python workers are not
    reaped into any process of the tree when they exit, so each process is tracked by pid and keeps
    its last sampled value after it is gone (a worker's last < interval_s of CPU can be missed).
    ``between(t0, t1)`` interpolates linearly between samples."""

    LABELS = ("python", "jvm", "client")

    def __init__(self, interval_s: float = 0.25) -> None:
        import threading

        self.interval_s = interval_s
        self.last: dict[tuple[int, float], tuple[str, float]] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.last.update(process_cpu())
        totals = dict.fromkeys(self.LABELS, 0.0)
        for label, cpu in self.last.values():
            totals[label] += cpu
        self.samples.append((time.time(), totals))

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, t: float, label: Optional[str] = None) -> float:
        ts = np.array([s[0] for s in self.samples])
        labels = [label] if label else list(self.LABELS)
        cs = np.array([sum(s[1][x] for x in labels) for s in self.samples])
        return float(np.interp(t, ts, cs))

    def between(self, t0: float, t1: float, label: Optional[str] = None) -> float:
        return self.at(t1, label) - self.at(t0, label)


# ---- jobs --------------------------------------------------------------------------------------------
@dataclass
class Config:
    rows: int
    parallelism: int
    checkpoint_ms: int
    exec_mode: str
    buckets: int
    bundle_size: Optional[int]
    bundle_time_ms: Optional[int]
    workdir: str
    extra_conf: dict[str, str] = field(default_factory=dict)
    java: bool = True


@dataclass
class JobResult:
    name: str
    wall_s: float
    net_runtime_s: float
    first: float
    last_map: float
    end: float
    map_rows: int
    cpu_s: float
    subtasks: int
    job_cpu_s: float = 0.0
    cpu_python_s: float = 0.0
    cpu_jvm_s: float = 0.0
    check: Optional[dict[str, int]] = None
    snapshots: int = 0
    data_files: int = 0

    @property
    def rate(self) -> float:
        return self.map_rows / max(1e-9, self.end - self.first)

    @property
    def map_rate(self) -> float:
        return self.map_rows / max(1e-9, self.last_map - self.first)


def make_env(cfg: Config) -> Any:
    from lakelog.operators.flink_env import flink_environment

    conf = {"python.execution-mode": cfg.exec_mode, "restart-strategy.type": "none"}
    if cfg.bundle_size:
        conf["python.fn-execution.bundle.size"] = str(cfg.bundle_size)
    if cfg.bundle_time_ms:
        conf["python.fn-execution.bundle.time"] = str(cfg.bundle_time_ms)
    conf.update(cfg.extra_conf)
    return flink_environment(mode="streaming", parallelism=cfg.parallelism,
                             checkpoint_interval_ms=cfg.checkpoint_ms, config=conf)


def _discard(ds: Any) -> None:
    from pyflink.datastream.connectors import Sink
    from pyflink.java_gateway import get_gateway

    j_sink = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    ds.sink_to(Sink(j_sink)).name("discard")


def run_job(cfg: Config, kind: str, table_path: Optional[str] = None, changelog: bool = False) -> JobResult:
    """kind: 'baseline' (discard), 'floor' (key_by + no-op keyed process + discard), 'lakelog'."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    from lakelog.operators.sink import row_type_of, sink_to_lakelog

    run_id = f"{kind}-{uuid.uuid4().hex[:8]}"
    stats_dir = os.path.join(cfg.workdir, "stats")
    os.makedirs(stats_dir, exist_ok=True)
    env = make_env(cfg)
    src = env.from_source(NumberSequenceSource(0, cfg.rows - 1), WatermarkStrategy.no_watermarks(), "numbers")
    rows = src.map(_map_function(stats_dir, run_id), output_type=row_type_of(BENCH_SCHEMA)).name("make-rows")
    if kind == "baseline":
        _discard(rows)
    elif kind == "floor":
        keyed = rows.key_by(lambda r: r[0] & 3, key_type=Types.LONG()).process(
            _noop_keyed(), output_type=Types.STRING())
        _discard(keyed)
    else:
        assert table_path is not None
        sink_to_lakelog(rows, table_path, changelog=changelog, java=cfg.java,
                        channel_dir=os.path.join(cfg.workdir, f"channel-{run_id}"))
    t0 = time.time()
    with CpuSampler() as cpu_sampler:
        result = env.execute(f"bench-{run_id}")
    wall = time.time() - t0
    stats = []
    for path in glob.glob(os.path.join(stats_dir, f"{run_id}-*.json")):
        with open(path) as fh:
            stats.append(json.load(fh))
    if not stats:
        raise RuntimeError(f"{kind}: the map wrote no timing files (was close() called?)")
    first = min(s["first"] for s in stats)
    last_map = max(s["last"] for s in stats)
    count = sum(s["count"] for s in stats)
    try:
        net = result.get_net_runtime() / 1000.0
    except Exception:  # pragma: no cover
        net = float("nan")
    res = JobResult(kind, wall, net, first, last_map, last_map, count, 0.0, len(stats))
    if table_path is not None:
        import lakelog
        from lakelog.connector.format.store import TableStore

        store = TableStore(table_path)
        snaps = store.snapshot_manager.snapshots()
        res.end = max(last_map, max(s.time_millis for s in snaps) / 1000.0) if snaps else float("nan")
        res.snapshots = len(snaps)
        table = lakelog.Table(store, os.path.basename(table_path))
        res.data_files = len(table.files())
        res.check = table_sums(table.to_arrow(columns=["id", "qty", "name"]))
    res.cpu_s = cpu_sampler.between(res.first, res.end)
    res.cpu_python_s = cpu_sampler.between(res.first, res.end, "python")
    res.cpu_jvm_s = cpu_sampler.between(res.first, res.end, "jvm")
    res.job_cpu_s = cpu_sampler.between(t0, t0 + wall)
    return res


def create_table(cfg: Config, kind: str) -> str:
    import lakelog

    wh = os.path.join(cfg.workdir, f"wh-{kind}-{uuid.uuid4().hex[:6]}")
    cat = lakelog.Catalog(wh)
    if kind == "pk":
        t = cat.create_table("bench.pk", BENCH_SCHEMA, primary_key=["id"], options={"bucket": str(cfg.buckets)})
    else:
        t = cat.create_table("bench.append", BENCH_SCHEMA,
                             options={"bucket": str(cfg.buckets), "bucket-key": "id"})
    return str(t.store.path)


def _root_cause(exc: BaseException) -> str:
    """The last 'Caused by:' line of a Java exception, else the exception's first line."""
    text = str(exc)
    causes = [line.strip() for line in text.splitlines() if line.strip().startswith("Caused by:")]
    return (causes[-1] if causes else text.strip().splitlines()[0] if text.strip() else repr(exc))[:300]


def thread_mode_pythonpath(workdir: str) -> None:
    """Thread mode runs Python inside the JVM (pemja) with sys.path from PYTHONPATH, where .pth files
    (the venv's editable install of lakelog) are not processed: put the venv's site-packages and a
    symlinked ``lakelog`` package (the package-dir mapping of pyproject.toml) on PYTHONPATH."""
    import lakelog

    site = os.path.join(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    # lakelog/__init__.py is <checkout>/connector/_root/__init__.py
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lakelog.__file__))))
    pkg = os.path.join(workdir, "pythonpath", "lakelog")
    os.makedirs(pkg, exist_ok=True)
    links = {"__init__.py": os.path.join(root, "connector", "_root", "__init__.py"),
             "connector": os.path.join(root, "connector"), "operators": os.path.join(root, "operators"),
             "jobs": os.path.join(root, "jobs")}
    for name, target in links.items():
        if not os.path.lexists(os.path.join(pkg, name)):
            os.symlink(target, os.path.join(pkg, name))
    parts = [site, os.path.dirname(pkg), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(x for x in parts if x)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--checkpoint-ms", type=int, default=2000)
    p.add_argument("--exec-mode", choices=["process", "thread"], default="process",
                   help="python.execution-mode")
    p.add_argument("--workers", choices=["process", "loopback"], default="process",
                   help="process-mode Python workers: separate processes, or threads of this client")
    p.add_argument("--buckets", type=int, default=4)
    p.add_argument("--tables", default="pk,append,pk-changelog",
                   help="comma list of pk (insert-only upserts), append, pk-changelog (RowKinds read per row)")
    # Flink's own defaults, not flink-conf/'s (1000 rows, 200 ms): the published figures used them
    p.add_argument("--bundle-size", type=int, default=100_000, help="python.fn-execution.bundle.size")
    p.add_argument("--bundle-time", type=int, default=1000, help="python.fn-execution.bundle.time (ms)")
    p.add_argument("--python-only", action="store_true", help="the sink's Python-only path (java=False)")
    p.add_argument("--floor", action="store_true", help="also run map -> key_by -> no-op keyed process")
    p.add_argument("--rounds", type=int, default=1, help="repeat baseline + tables, interleaved")
    p.add_argument("--conf", action="append", default=[], help="extra Flink option key=value")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    for t in tables:
        if t not in ("pk", "append", "pk-changelog"):
            p.error(f"--tables: unknown table kind {t!r}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="lakelog-flink-ingest-")
    extra = dict(kv.split("=", 1) for kv in args.conf)
    cfg = Config(args.rows, args.parallelism, args.checkpoint_ms, args.exec_mode, args.buckets,
                 args.bundle_size, args.bundle_time, workdir, extra, java=not args.python_only)
    if args.exec_mode == "thread":
        thread_mode_pythonpath(workdir)
    os.environ[WORKER_MODE_ENV] = args.workers
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    import pyflink

    loads = {"start": loadavg()}
    results: list[JobResult] = []
    failures: list[str] = []
    expected = expected_sums(args.rows)
    try:
        for rnd in range(args.rounds):
            jobs = [("baseline", "baseline")] + ([("floor", "floor")] if args.floor else [])
            jobs += [(f"lakelog-{kind}", kind) for kind in tables]
            for name, kind in jobs:
                step(f"round {rnd + 1}: {name} job")
                try:
                    if name.startswith("lakelog"):
                        r = run_job(cfg, "lakelog", create_table(cfg, kind.split("-")[0]),
                                    changelog=kind.endswith("-changelog"))
                    else:
                        r = run_job(cfg, kind)
                except Exception as exc:  # noqa: BLE001 - reported in the output, the run goes on
                    failures.append(f"{name} (round {rnd + 1}): {_root_cause(exc)}")
                    step(f"{name} job FAILED: {failures[-1]}")
                    continue
                r.name = name
                results.append(r)
        loads["end"] = loadavg()
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    print(METHOD)
    print()
    print(f"settings: pyflink {getattr(pyflink, '__version__', '?')}, runtime mode STREAMING, checkpointing every "
          f"{cfg.checkpoint_ms} ms (EXACTLY_ONCE), python.execution-mode={cfg.exec_mode} (workers: {args.workers}), parallelism "
          f"{cfg.parallelism}, bundle.size={cfg.bundle_size}, bundle.time="
          f"{cfg.bundle_time_ms} ms, other settings from flink-conf/, rows {cfg.rows}, {cfg.buckets} buckets, "
          f"sink path {'Java RowBatcher' if cfg.java else 'Python-only (java=False)'}, "
          f"{os.cpu_count()} CPUs; load average (1/5/15 min) at start {loads['start']}, end {loads.get('end', '?')}")
    print()
    head = ["job", "rows/s (first row -> end)", "map rows/s", "rows/CPU-s", "CPU s: all / python / jvm",
            "t_end - t_first s", "job wall s", "job CPU s", "snapshots", "files"]
    body = []
    for r in results:
        body.append([r.name, fmt_rate(r.rate), fmt_rate(r.map_rate), fmt_rate(r.map_rows / r.cpu_s),
                     f"{r.cpu_s:.1f} / {r.cpu_python_s:.1f} / {r.cpu_jvm_s:.1f}", f"{r.end - r.first:.1f}",
                     f"{r.wall_s:.1f}", f"{r.job_cpu_s:.1f}", str(r.snapshots or "-"), str(r.data_files or "-")])
    print(render_table(head, body))
    print()
    ok = not failures
    for f in failures:
        print(f"[!!] job failed: {f}")
    verdicts = []
    base = [r for r in results if r.name == "baseline"]
    if not base:
        return 1
    base_rate = float(np.median([r.rate for r in base]))
    base_cpu = float(np.median([r.map_rows / r.cpu_s for r in base]))
    floor = [r for r in results if r.name == "floor"]
    if floor:
        rate = float(np.median([r.rate for r in floor]))
        verdicts.append(["floor (no-op keyed stage) / baseline", f"{fmt_rate(rate)} / {fmt_rate(base_rate)}",
                         f"{rate / base_rate:.2f}", "-", "info",
                         f"{float(np.median([r.map_rows / r.cpu_s for r in floor])) / base_cpu:.2f}"])
    for kind in tables:
        rs = [r for r in results if r.name == f"lakelog-{kind}"]
        if not rs:
            continue
        rate = float(np.median([r.rate for r in rs]))
        ratio = rate / base_rate
        cpu_ratio = float(np.median([r.map_rows / r.cpu_s for r in rs])) / base_cpu
        verdicts.append([f"lakelog {kind} table / baseline", f"{fmt_rate(rate)} / {fmt_rate(base_rate)}",
                         f"{ratio:.2f}", f">= {TARGET_RATIO}", "PASS" if ratio >= TARGET_RATIO else "FAIL",
                         f"{cpu_ratio:.2f}"])
        for r in rs:
            good = r.check == expected and r.map_rows == args.rows
            ok &= good
            print(f"[{'OK' if good else '!!'}] {r.name}: table holds {r.check} (expected {expected}); "
                  f"map saw {r.map_rows} rows")
    for r in base:
        good = r.map_rows == args.rows
        ok &= good
        if not good:
            print(f"[!!] baseline map saw {r.map_rows} rows, expected {args.rows}")
    print()
    print(render_table(["ratio", "rows/s", "ratio", "target", "result", "rows/CPU-s ratio"], verdicts))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
