"""The Kafka log store (``'log.system' = 'kafka'``): freshness per consistency mode, sink throughput
with the log on vs off, and the hybrid read of a big table with a live tail.

Not timed tests: one run prints percentiles, ratios, the goals and PASS/FAIL. The script starts
its own Kafka broker (lakelog.jobs.kafka_broker, in the work folder) unless --bootstrap is given.
See benchmarks/README.md.

    .venv/bin/python benchmarks/bench_log.py                                   # all three parts
    .venv/bin/python benchmarks/bench_log.py --only freshness --rounds 2       # 10 s checkpoints
    .venv/bin/python benchmarks/bench_log.py --only throughput --rows 1000000 --rounds 2
    .venv/bin/python benchmarks/bench_log.py --only hybrid --table-rows 1000000
    .venv/bin/python benchmarks/bench_log.py --clients confluent-kafka,kafka-python   # both side by side
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _flink_ops import Recorder, Stamp, discard, operator, read_records, ship_by_value  # noqa: E402
from _util import fmt_rate, loadavg, render_table, step  # noqa: E402

__all__ = ["main"]

WORKER_MODE_ENV = "_python_worker_execution_mode"  # read by PyFlink when a job is executed locally
VARIANTS = ("eventual", "transactional", "files")
THROUGHPUT_TARGET = 0.7
LIVE_BASE = 1_000_000_000  # ids of the hybrid part's live tail start here

FRESH_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("emit_ms", pa.int64()),
        pa.field("map_ms", pa.int64()),
        pa.field("payload", pa.string()),
    ]
)
HYBRID_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("written_ms", pa.int64()),
        pa.field("payload", pa.string()),
    ]
)

METHOD = """\
Method (local MiniCluster, Python workers in their own processes, a single-node Kafka 4.4 broker on
the loopback started by this script; 2 shared cores, so absolute times are noise: compare the
percentiles and ratios of one run, and runs at similar load):

freshness   One Flink job per variant, run one after another with the same settings (interleaved
            over --rounds). Flink's datagen (Java, --rate rows/s, ids 0, 1, 2, ...) with a PROCTIME()
            column materialised at the source (emit_ms: when the row left the source, on the JVM)
            -> a Python map stamping map_ms (when the row reached Python) -> sink_to_lakelog into a
            primary-key table (id, emit_ms, map_ms, payload) with
              eventual       'log.system'='kafka', 'log.consistency'='eventual'
              transactional  'log.system'='kafka' (transactional is the default)
              files          no log (the file-only path)
            Readers, all at once:
              flink     read_lakelog(mode='streaming') of the table in the same job (LogFollower on
                        the log, SnapshotFollower on the files with --discovery-ms), then a chained
                        Python map recording time.time() per row;
              subscribe t.subscribe() in a thread of this process (poll interval 50 ms);
              kafka     (log variants) a plain consumer of the topic in this process (the log's client)
                        (read_committed for the transactional log), recording each record's Kafka
                        timestamp (CreateTime: when lakelog produced it) and its arrival.
            latency = arrival - emit_ms per row, over the rows emitted in the measured window minus
            the first --warmup-s seconds. Goals (issue 14): eventual p99 < 1 s at a 10 s checkpoint
            interval; transactional p99 <= checkpoint interval + 1 s; files: none (shown beside).
throughput  bench_flink_ingest.py's job (NumberSequenceSource -> Python map -> sink_to_lakelog into a
            4-bucket primary-key table, changelog=False, PyFlink's bundle defaults 100000 / 1 s,
            2 s checkpoints) into a table without a log, with a transactional log and with an
            eventual log; rows / (last snapshot time - first row time), medians over --rounds;
            goal: log on / log off >= 0.7. Each table is checked afterwards, and its topic: every
            id once (transactional) or at least once (eventual).
hybrid      A transactional log table (4 buckets) loaded with --table-rows rows (t.write, 100k rows
            per commit), then a live tail: a thread commits --tail-rows rows every --tail-ms ms,
            each stamped with written_ms. Readers started while the tail runs, one after another:
            t.subscribe() (latest-full: the snapshot's rows, then the log from its logOffsets), and
            read_lakelog(mode='streaming') in a Flink job (a chained Python flat-map counts rows).
            Reported: start -> first row; the snapshot part (rows of the start snapshot) and its
            rate; start -> the first live record (the first one written after the reader's first
            row, which only the log can deliver); the tail's freshness after that (arrival -
            written_ms)."""


# ---- small helpers ----------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def lat_stats(lat_s: list[float]) -> dict[str, float]:
    return {
        "n": float(len(lat_s)),
        "p50": pct(lat_s, 50),
        "p95": pct(lat_s, 95),
        "p99": pct(lat_s, 99),
        "max": max(lat_s) if lat_s else float("nan"),
    }


@contextlib.contextmanager
def kafka(args: argparse.Namespace, workdir: str) -> Iterator[str]:
    """Bootstrap servers: --bootstrap, else a broker of our own in the work folder (stopped at the end)."""
    if args.bootstrap:
        yield args.bootstrap
        return
    from lakelog.jobs.kafka_broker import KafkaBroker

    broker = KafkaBroker(os.path.join(workdir, "kafka"))
    t0 = time.monotonic()
    status = broker.start(timeout=180.0)
    step(f"Kafka broker ready in {time.monotonic() - t0:.1f} s at {status.bootstrap_servers}")
    try:
        assert status.bootstrap_servers is not None
        yield status.bootstrap_servers
    finally:
        broker.stop()


def base_variant(variant: str) -> str:
    """``eventual@kafka-python`` -> ``eventual``."""
    return variant.partition("@")[0]


def with_clients(variants: list[str], clients: list[str]) -> list[str]:
    """Each log variant once per client (``transactional@kafka-python``); ``auto`` adds no suffix."""
    out = []
    for v in variants:
        if v in ("files", "off") or clients == ["auto"]:
            out.append(v)
        else:
            out += [v if c == "auto" else f"{v}@{c}" for c in clients]
    return out


def log_options(variant: str, servers: str) -> dict[str, str]:
    base, _, client = variant.partition("@")
    if base == "files":
        return {}
    opts = {"log.system": "kafka", "kafka.bootstrap.servers": servers, "log.kafka.client": client or "auto"}
    if base == "eventual":
        opts["log.consistency"] = "eventual"
    return opts


def flink_env(args: argparse.Namespace, *, checkpoint_ms: int, parallelism: int, conf: dict[str, str]) -> Any:
    from lakelog.operators.flink_env import flink_environment

    config = {"restart-strategy.type": "none", **conf}
    if args.bundle_time is not None:
        config["python.fn-execution.bundle.time"] = str(args.bundle_time)
    return flink_environment(
        mode="streaming", parallelism=parallelism, checkpoint_interval_ms=checkpoint_ms, config=config
    )


# ---- operators (pickled by value: the workers cannot import this script) ---------------------------------
class HybridCounter:
    """After read_lakelog of the hybrid table: counts the rows; every row's arrival is summarised per
    100 ms into a file (``t_ms,rows,live rows,max id``), and each live-tail row (id >= LIVE_BASE) is
    written out (``L,id,written_ms,arrival_ms``). Emits nothing."""

    def __init__(self, path: str, live_base: int) -> None:
        self.path = path
        self.live_base = live_base

    def open(self, runtime_context: Any) -> None:
        self.fh = open(self.path, "a", buffering=1)  # noqa: SIM115 - lives as long as the operator
        self.rows = 0
        self.slot = 0
        self.slot_rows = 0

    def flat_map(self, row: Any) -> Any:
        now = int(time.time() * 1000)
        slot = now // 100
        if slot != self.slot and self.slot_rows:
            self.fh.write(f"S,{self.slot * 100},{self.slot_rows}\n")
            self.slot_rows = 0
        self.slot = slot
        self.slot_rows += 1
        i = int(row[0])
        if i >= self.live_base:
            self.fh.write(f"S,{slot * 100},{self.slot_rows}\nL,{i},{row[1]},{now}\n")
            self.slot_rows = 0
        return iter(())

    def close(self) -> None:
        fh = getattr(self, "fh", None)
        if fh is not None:
            if self.slot_rows:
                fh.write(f"S,{self.slot * 100},{self.slot_rows}\n")
            fh.close()


# ---- client-side readers ------------------------------------------------------------------------------
class SubscribeReader(threading.Thread):
    """``t.subscribe()`` in a thread: records when each id first arrived (``id -> (emit_ms, ms)``)."""

    def __init__(self, table: Any, column: str, **options: Any) -> None:
        super().__init__(daemon=True)
        self.table = table
        self.column = column
        self.options = options
        self.arrivals: dict[int, tuple[int, int]] = {}
        self.error: Optional[BaseException] = None
        self.started_at = 0.0
        self.first_row_at: Optional[float] = None
        self.counts: list[tuple[float, int]] = []  # (time, rows so far) after every batch
        self.rows = 0
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            self.started_at = time.time()
            with self.table.subscribe(**self.options) as sub:
                while not self._halt.is_set():
                    batch = sub.poll(0.1)
                    if batch is None:
                        continue
                    now = time.time()
                    if self.first_row_at is None:
                        self.first_row_at = now
                    ms = int(now * 1000)
                    ids = batch.column("id").to_pylist()
                    stamps = batch.column(self.column).to_pylist()
                    for i, e in zip(ids, stamps):
                        self.arrivals.setdefault(i, (e, ms))
                    self.rows += len(ids)
                    self.counts.append((now, self.rows))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


class TopicReader(threading.Thread):
    """A consumer (the table's own client library) of a table's topic: ``id -> (kafka timestamp ms, arrival ms)``."""

    def __init__(self, table: Any) -> None:
        super().__init__(daemon=True)
        from lakelog.connector.table.log import log_config

        config = log_config(table.store)
        assert config is not None
        self.config = config
        self.arrivals: dict[int, tuple[int, int]] = {}
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            c = self.config.consumer()
            c.assign(dict.fromkeys(range(self.config.partitions), 0))
            try:
                while not self._halt.is_set():
                    for m in c.poll(1000, 0.1):
                        if m.value is None:
                            continue
                        ms = int(time.time() * 1000)
                        row = json.loads(m.value)["after"]
                        if row is not None:
                            self.arrivals.setdefault(int(row["id"]), (m.timestamp, ms))
            finally:
                c.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


def topic_census(table: Any, timeout_s: float = 120.0) -> tuple[int, int]:
    """(records, distinct keys) of a table's topic as its own readers see it (read_committed for a
    transactional log), read from the beginning up to the end."""
    from lakelog.connector.table.log import log_config

    config = log_config(table.store)
    assert config is not None
    end = config.list_offsets("latest", committed=config.transactional)
    c = config.consumer()
    c.assign(dict.fromkeys(end, 0))
    keys: set[bytes] = set()
    records = 0
    done = {p for p, e in end.items() if e == 0}
    deadline = time.monotonic() + timeout_s
    try:
        while len(done) < len(end) and time.monotonic() < deadline:
            for m in c.poll(10_000, 0.5):
                if m.value is not None:
                    records += 1
                    keys.add(m.key)
                if m.offset + 1 >= end[m.partition]:
                    done.add(m.partition)
            # a transactional topic ends with a commit marker, which no consumer receives
            done |= {p for p in end if c.position(p) >= end[p]}
    finally:
        c.close()
    return records, len(keys)


# ---- 1. freshness ------------------------------------------------------------------------------------
@dataclass
class FreshRun:
    variant: str
    round: int
    readers: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    kafka: dict[int, tuple[int, int]] = field(default_factory=dict)
    map_ms: dict[int, int] = field(default_factory=dict)
    emit_ms: dict[int, int] = field(default_factory=dict)
    load: str = ""
    cpu_per_s: float = float("nan")  # CPU seconds per second of this process tree (Flink, workers, broker)
    error: Optional[str] = None


def freshness_job(args: argparse.Namespace, workdir: str, servers: str, variant: str, rnd: int) -> FreshRun:
    from pyflink.common import Types
    from pyflink.datastream import MapFunction
    from pyflink.table import StreamTableEnvironment

    import lakelog
    from lakelog.operators.sink import row_type_of, sink_to_lakelog
    from lakelog.operators.source import read_lakelog

    run = FreshRun(variant, rnd, load=loadavg())
    measured = int(args.rate * args.seconds)
    total = measured + int(args.rate * 600)  # the job is cancelled long before the emitter runs dry
    tag = f"{variant.replace('@', '_').replace('-', '_')}_{rnd}_{uuid.uuid4().hex[:6]}"
    cat = lakelog.Catalog(os.path.join(workdir, "wh-fresh"))
    table = cat.create_table(
        f"bench.fresh_{tag}",
        FRESH_SCHEMA,
        primary_key=["id"],
        options={"bucket": str(args.buckets), **log_options(variant, servers)},
    )
    path = str(table.store.path)
    env = flink_env(args, checkpoint_ms=args.checkpoint_ms, parallelism=args.parallelism, conf={})
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(
        f"CREATE TEMPORARY TABLE fresh_ids (id BIGINT, born AS PROCTIME()) WITH ('connector'='datagen', "
        f"'rows-per-second'='{args.rate:g}', 'fields.id.kind'='sequence', 'fields.id.start'='0', "
        f"'fields.id.end'='{total - 1}')"
    )
    born = t_env.sql_query("SELECT id, CAST(born AS TIMESTAMP_LTZ(3)) AS born FROM fresh_ids")
    rows = t_env.to_data_stream(born).map(operator(MapFunction, Stamp), output_type=row_type_of(FRESH_SCHEMA)).name("stamp")
    sink_to_lakelog(rows, path, channel_dir=os.path.join(workdir, f"channel-{tag}"))
    record_path = os.path.join(workdir, f"arrivals-{tag}.csv")
    read = read_lakelog(env, path, mode="streaming", discovery_interval=args.discovery_ms / 1000.0)
    discard(read.map(operator(MapFunction, Recorder, record_path), output_type=Types.LONG()).set_parallelism(1).name("record"))
    readers: list[Any] = [SubscribeReader(table, "emit_ms", poll_interval=0.05)]
    topic = TopicReader(table) if variant != "files" else None
    if topic is not None:
        readers.append(topic)
    for r in readers:
        r.start()
    step(f"freshness round {rnd}: {variant} job ({measured} measured rows at {args.rate:g} rows/s)")
    import bench_flink_ingest as fi

    sampler = fi.CpuSampler()
    sampler.__enter__()
    job = env.execute_async(f"lakelog-log-freshness-{variant}")
    started = time.time()
    try:
        deadline = time.time() + args.seconds + args.timeout_s
        while time.time() < deadline:
            time.sleep(2.0)
            for r in readers:
                if r.error is not None:
                    raise RuntimeError(f"{type(r).__name__} failed: {r.error!r}")
            flink = read_records(record_path)
            have = {
                "flink": sum(1 for i in range(measured) if i in flink),
                "subscribe": sum(1 for i in range(measured) if i in readers[0].arrivals),
            }
            if topic is not None:
                have["kafka"] = sum(1 for i in range(measured) if i in topic.arrivals)
            if all(n >= measured for n in have.values()):
                break
            if int(time.time()) % 10 < 2:
                step(f"  {variant}: " + ", ".join(f"{k} {n}/{measured}" for k, n in have.items()))
        else:
            run.error = "timed out waiting for rows"
    finally:
        ended = time.time()
        sampler.__exit__(None, None, None)
        run.cpu_per_s = sampler.between(started, ended) / max(ended - started, 1e-9)
        try:
            job.cancel().result()
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"cancel: {exc!r}", file=sys.stderr)
        for r in readers:
            r.stop()
    run.readers["flink"] = read_records(record_path)
    run.readers["subscribe"] = readers[0].arrivals
    if topic is not None:
        run.kafka = topic.arrivals
    data = cat.get_table(f"bench.fresh_{tag}").to_arrow(columns=["id", "emit_ms", "map_ms"])
    for i, e, m in zip(*(data.column(c).to_pylist() for c in ("id", "emit_ms", "map_ms"))):
        if i < measured:
            run.map_ms[i] = m
            run.emit_ms[i] = e
    run.load += f" .. {loadavg()}"
    return run


def report_freshness(args: argparse.Namespace, runs: list[FreshRun]) -> bool:
    measured = int(args.rate * args.seconds)
    warm = int(args.rate * args.warmup_s)
    ckpt_s = args.checkpoint_ms / 1000.0
    goals = {"eventual": ("< 1 s", lambda p99: p99 < 1.0),
             "transactional": (f"<= {ckpt_s + 1:g} s", lambda p99: p99 <= ckpt_s + 1.0),
             "files": ("-", None)}
    bundle = f"{args.bundle_time} ms" if args.bundle_time is not None else "flink-conf/'s"
    eventual_batch = f", eventual RowBatcher interval {args.eventual_batch_ms} ms" if args.eventual_batch_ms else ""
    print(f"\n## Freshness: row emitted at the source -> visible to a streaming reader "
          f"(checkpoints every {ckpt_s:g} s, {args.rate:g} rows/s, {measured - warm} rows measured per job, "
          f"parallelism {args.parallelism}, python.fn-execution.bundle.time {bundle}{eventual_batch})\n")
    head = ["variant", "round", "reader", "rows", "p50 s", "p95 s", "p99 s", "max s", "goal p99", "result",
            "CPU s/s", "load"]
    body = []
    ok = True
    per_variant: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        if run.error:
            body.append([run.variant, str(run.round), "-", run.error, "", "", "", "", "", "FAIL", "", run.load])
            ok = False
            continue
        for reader in ("flink", "subscribe"):
            arr = run.readers[reader]
            lat = [(arr[i][1] - arr[i][0]) / 1000.0 for i in range(warm, measured) if i in arr]
            missing = (measured - warm) - len(lat)
            s = lat_stats(lat)
            goal, check = goals[base_variant(run.variant)]
            verdict = "-" if check is None else ("PASS" if check(s["p99"]) and not missing else "FAIL")
            if check is not None and verdict == "FAIL":
                ok = False
            per_variant.setdefault((run.variant, reader), []).extend(lat)
            body.append([run.variant, str(run.round), reader, f"{len(lat)}" + (f" ({missing} missing)" if missing else ""),
                         f"{s['p50']:.2f}", f"{s['p95']:.2f}", f"{s['p99']:.2f}", f"{s['max']:.2f}", goal, verdict,
                         f"{run.cpu_per_s:.2f}", run.load])
    print(render_table(head, body))
    # where the time goes: source -> Python map (PyFlink's hand-over), -> Kafka (lakelog produced the
    # record), -> a plain consumer, -> the readers
    print("\nWhere the time goes (p50 / p99 in s, all rows of the measured windows):\n")
    head2 = ["variant", "source -> Python map", "source -> produced to Kafka", "produced -> plain consumer",
             "plain consumer -> flink reader", "plain consumer -> subscribe", "source -> flink reader"]
    body2 = []
    for variant in dict.fromkeys(r.variant for r in runs):
        mine = [r for r in runs if r.variant == variant and not r.error]
        if not mine:
            continue
        hand, produced, consumed, to_flink, to_sub, total = [], [], [], [], [], []
        for run in mine:
            for i in range(warm, measured):
                e = run.emit_ms.get(i)
                if e is None:
                    continue
                m = run.map_ms.get(i)
                if m is not None:
                    hand.append((m - e) / 1000.0)
                f = run.readers["flink"].get(i)
                if f is not None:
                    total.append((f[1] - e) / 1000.0)
                k = run.kafka.get(i)
                if k is not None:
                    produced.append((k[0] - e) / 1000.0)
                    consumed.append((k[1] - k[0]) / 1000.0)
                    if f is not None:
                        to_flink.append((f[1] - k[1]) / 1000.0)
                    s = run.readers["subscribe"].get(i)
                    if s is not None:
                        to_sub.append((s[1] - k[1]) / 1000.0)

        def pp(v: list[float]) -> str:
            return f"{pct(v, 50):.2f} / {pct(v, 99):.2f}" if v else "-"

        body2.append([variant, pp(hand), pp(produced), pp(consumed), pp(to_flink), pp(to_sub), pp(total)])
    print(render_table(head2, body2))
    print("\nAll rounds pooled:\n")
    body3 = []
    for (variant, reader), lat in per_variant.items():
        s = lat_stats(lat)
        goal, check = goals[base_variant(variant)]
        verdict = "-" if check is None else ("PASS" if check(s["p99"]) else "FAIL")
        body3.append([variant, reader, str(len(lat)), f"{s['p50']:.2f}", f"{s['p99']:.2f}", f"{s['max']:.2f}", goal, verdict])
    print(render_table(["variant", "reader", "rows", "p50 s", "p99 s", "max s", "goal p99", "result"], body3))
    return ok


# ---- 2. throughput -----------------------------------------------------------------------------------
def throughput(args: argparse.Namespace, workdir: str, servers: str) -> bool:
    import bench_flink_ingest as fi

    import lakelog

    ship_by_value(fi)
    cfg = fi.Config(args.rows, args.parallelism, args.ingest_checkpoint_ms, "process", 4,
                    args.ingest_bundle_size, args.ingest_bundle_time, workdir)
    expected = fi.expected_sums(args.rows)
    variants = with_clients(["off", "transactional", "eventual"], _clients(args))
    results: dict[str, list[Any]] = {v: [] for v in variants}
    checks: list[str] = []
    ok = True
    loads = [loadavg()]
    for rnd in range(1, args.rounds + 1):
        for variant in variants:
            tag = f"{base_variant(variant)}_{rnd}_{uuid.uuid4().hex[:6]}"
            cat = lakelog.Catalog(os.path.join(workdir, "wh-ingest"))
            opts = {"bucket": "4", **log_options("files" if variant == "off" else variant, servers)}
            t = cat.create_table(f"bench.ingest_{tag}", fi.BENCH_SCHEMA, primary_key=["id"], options=opts)
            step(f"throughput round {rnd}: log {variant}, {args.rows} rows")
            try:
                r = fi.run_job(cfg, "lakelog", str(t.store.path), changelog=False)
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                checks.append(f"[!!] {variant} round {rnd} failed: {fi._root_cause(exc)}")
                ok = False
                continue
            r.name = variant
            results[variant].append(r)
            good = r.check == expected
            line = f"[{'OK' if good else '!!'}] {variant} round {rnd}: table {'holds' if good else 'differs: ' + str(r.check)}"
            if variant != "off":
                records, keys = topic_census(t)
                exact = base_variant(variant) == "transactional"
                topic_ok = keys == args.rows and (records == args.rows if exact else records >= args.rows)
                good &= topic_ok
                line += f"; topic: {records} records, {keys} distinct ids ({'OK' if topic_ok else 'WRONG'})"
            ok &= good
            checks.append(line)
    loads.append(loadavg())
    print(f"\n## Sink throughput, log on vs off ({args.rows} rows, parallelism {args.parallelism}, "
          f"checkpoints every {args.ingest_checkpoint_ms} ms, bundle {args.ingest_bundle_size} rows / "
          f"{args.ingest_bundle_time} ms; load {loads[0]} .. {loads[-1]})\n")
    body = []
    for variant, rs in results.items():
        for r in rs:
            body.append([variant, fmt_rate(r.rate), fmt_rate(r.map_rows / max(r.cpu_s, 1e-9)),
                         f"{r.cpu_s:.1f} / {r.cpu_python_s:.1f} / {r.cpu_jvm_s:.1f}", f"{r.end - r.first:.1f}",
                         str(r.snapshots)])
    print(render_table(["log", "rows/s", "rows/CPU-s", "CPU s all / python / jvm", "first row -> last commit s",
                        "snapshots"], body))
    print()
    for line in checks:
        print(line)
    off = results["off"]
    if not off:
        return False
    base = float(np.median([r.rate for r in off]))
    base_cpu = float(np.median([r.map_rows / r.cpu_s for r in off]))
    verdicts = []
    for variant in variants[1:]:
        rs = results[variant]
        if not rs:
            continue
        rate = float(np.median([r.rate for r in rs]))
        cpu = float(np.median([r.map_rows / r.cpu_s for r in rs]))
        per_round = ", ".join(f"{a.rate / b.rate:.2f}" for a, b in zip(rs, off))
        verdict = "PASS" if rate / base >= THROUGHPUT_TARGET else "FAIL"
        ok &= verdict == "PASS"
        verdicts.append([f"{variant} / off", f"{fmt_rate(rate)} / {fmt_rate(base)}", f"{rate / base:.2f}", per_round,
                         f"{cpu / base_cpu:.2f}", f">= {THROUGHPUT_TARGET}", verdict])
    print()
    print(render_table(["ratio (medians)", "rows/s", "ratio", "per round", "rows/CPU-s ratio", "goal", "result"],
                       verdicts))
    return ok


# ---- 3. hybrid read -------------------------------------------------------------------------------------
class LiveTail(threading.Thread):
    """Commits ``rows`` new rows every ``interval_s`` (ids from LIVE_BASE, stamped with written_ms)."""

    def __init__(self, table: Any, rows: int, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.table = table
        self.rows = rows
        self.interval_s = interval_s
        self.next_id = LIVE_BASE
        self.commits = 0
        self.commit_s: list[float] = []
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                ids = list(range(self.next_id, self.next_id + self.rows))
                self.next_id += self.rows
                ms = int(time.time() * 1000)
                batch = pa.table({"id": ids, "written_ms": [ms] * len(ids), "payload": ["live"] * len(ids)},
                                 schema=HYBRID_SCHEMA)
                t0 = time.monotonic()
                self.table.write(batch)
                self.commit_s.append(time.monotonic() - t0)
                self.commits += 1
                self._halt.wait(self.interval_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=60)


@dataclass
class HybridResult:
    reader: str
    start: float  # reader start (wall clock s)
    first_row: Optional[float] = None
    snapshot_rows: int = 0
    snapshot_done: Optional[float] = None
    first_live: Optional[float] = None
    tail_lat: list[float] = field(default_factory=list)
    note: str = ""


def _hybrid_result(reader: str, start: float, first_row: Optional[float], counts: list[tuple[float, int]],
                   live: list[tuple[int, int, int]], snapshot_rows: int, tail_s: float) -> HybridResult:
    """counts: (time s, rows so far); live: (id, written_ms, arrival_ms) of the live-tail rows."""
    res = HybridResult(reader, start, first_row, snapshot_rows)
    for t, n in counts:
        if n >= snapshot_rows:
            res.snapshot_done = t
            break
    if first_row is not None:
        after = [(a / 1000.0, w) for _, w, a in live if w / 1000.0 > first_row]
        if after:
            res.first_live = min(a for a, _ in after)
            res.tail_lat = [(a * 1000 - w) / 1000.0 for a, w in after if a >= res.first_live + 2.0
                            and a <= res.first_live + 2.0 + tail_s]
    return res


def hybrid(args: argparse.Namespace, workdir: str, servers: str) -> bool:
    from pyflink.datastream import FlatMapFunction

    import lakelog
    from lakelog.operators.source import read_lakelog

    cat = lakelog.Catalog(os.path.join(workdir, "wh-hybrid"))
    t = cat.create_table("bench.hybrid", HYBRID_SCHEMA, primary_key=["id"],
                         options={"bucket": "4", **log_options("transactional", servers)})
    n = args.table_rows
    step(f"hybrid: loading {n} rows (t.write, 100k per commit, each published to the log)")
    t0 = time.monotonic()
    per = 100_000
    for start in range(0, n, per):
        ids = np.arange(start, min(n, start + per), dtype=np.int64)
        t.write(pa.table({"id": ids, "written_ms": np.zeros(len(ids), dtype=np.int64),
                          "payload": [f"row-{i}" for i in ids.tolist()]}, schema=HYBRID_SCHEMA))
    load_s = time.monotonic() - t0
    step(f"hybrid: loaded in {load_s:.1f} s ({fmt_rate(n / load_s)} including the log)")
    tail = LiveTail(cat.get_table("bench.hybrid"), args.tail_rows, args.tail_ms / 1000.0)
    tail.start()
    results: list[HybridResult] = []
    loads = [loadavg()]
    try:
        time.sleep(3.0)
        # a) t.subscribe()
        step("hybrid: t.subscribe() (latest-full)")
        sub = SubscribeReader(cat.get_table("bench.hybrid"), "written_ms", poll_interval=0.05)
        sub.start()
        deadline = time.time() + args.timeout_s
        while time.time() < deadline and sub.error is None:
            time.sleep(1.0)
            arrived = dict(sub.arrivals)  # a copy: the reader thread adds to it meanwhile
            live_after = [a for i, (w, a) in arrived.items()
                          if i >= LIVE_BASE and sub.first_row_at is not None and w / 1000.0 > sub.first_row_at]
            if live_after and max(live_after) / 1000.0 > min(live_after) / 1000.0 + 2.0 + args.tail_s:
                break
        sub.stop()
        if sub.error is not None:
            raise RuntimeError(f"t.subscribe() failed: {sub.error!r}")
        live = [(i, w, a) for i, (w, a) in sub.arrivals.items() if i >= LIVE_BASE]
        start_rows = _snapshot_rows(t, sub.started_at)
        results.append(_hybrid_result("t.subscribe()", sub.started_at, sub.first_row_at, sub.counts, live,
                                      start_rows, args.tail_s))
        # b) the Flink source
        step("hybrid: read_lakelog(mode='streaming') in a Flink job")
        env = flink_env(args, checkpoint_ms=args.checkpoint_ms, parallelism=1, conf={})
        path = os.path.join(workdir, f"hybrid-flink-{uuid.uuid4().hex[:6]}.csv")
        ds = read_lakelog(env, str(t.store.path), mode="streaming")
        discard(ds.flat_map(operator(FlatMapFunction, HybridCounter, path, LIVE_BASE)).set_parallelism(1).name("count"))
        started = time.time()
        job = env.execute_async("lakelog-log-hybrid")
        try:
            deadline = time.time() + args.timeout_s
            counts: list[tuple[float, int]] = []
            live = []
            first_row = None
            while time.time() < deadline:
                time.sleep(1.0)
                counts, live, first_row = _read_counter(path)
                after = [a for _, w, a in live if first_row is not None and w / 1000.0 > first_row]
                if after and max(after) / 1000.0 > min(after) / 1000.0 + 2.0 + args.tail_s:
                    break
        finally:
            with contextlib.suppress(Exception):
                job.cancel().result()
        counts, live, first_row = _read_counter(path)
        start_rows = _snapshot_rows(t, first_row if first_row is not None else started)
        res = _hybrid_result("read_lakelog (Flink)", started, first_row, counts, live, start_rows, args.tail_s)
        res.note = "start = job submitted (includes the MiniCluster and Python workers starting)"
        results.append(res)
    finally:
        tail.stop()
    loads.append(loadavg())
    if tail.error is not None:
        print(f"[!!] live tail writer failed: {tail.error!r}")
    print(f"\n## Hybrid read: a {n}-row table with a live tail ({args.tail_rows} rows committed every "
          f"{args.tail_ms} ms; each commit {pct(tail.commit_s, 50):.2f} s p50); load {loads[0]} .. {loads[-1]}\n")
    print(f"loading {n} rows through t.write with the transactional log: {load_s:.1f} s = {fmt_rate(n / load_s)}\n")
    head = ["reader", "start -> first row s", "snapshot rows", "snapshot part s", "snapshot rows/s",
            "start -> first live record s", "first row -> first live s", "tail freshness p50 / p99 s"]
    body = []
    ok = True
    for r in results:
        def rel(x: Optional[float], base: float) -> str:
            return f"{x - base:.2f}" if x is not None else "-"

        snap_s = (r.snapshot_done - r.start) if r.snapshot_done is not None else None
        first_row_base = r.first_row if r.first_row is not None else r.start
        snap_rate = (r.snapshot_rows / (r.snapshot_done - first_row_base)
                     if r.snapshot_done is not None and r.snapshot_done > first_row_base else float("nan"))
        body.append([r.reader, rel(r.first_row, r.start), str(r.snapshot_rows),
                     f"{snap_s:.2f}" if snap_s is not None else "-", fmt_rate(snap_rate),
                     rel(r.first_live, r.start), rel(r.first_live, first_row_base),
                     f"{pct(r.tail_lat, 50):.2f} / {pct(r.tail_lat, 99):.2f}"])
        ok &= r.first_live is not None
    print(render_table(head, body))
    for r in results:
        if r.note:
            print(f"{r.reader}: {r.note}")
    print("snapshot rows/s: the snapshot part's rows / (its last row - the first row)")
    return ok


def _snapshot_rows(t: Any, at_s: float) -> int:
    """Rows of the latest snapshot committed at or before ``at_s`` (the reader's start snapshot, to
    within one live-tail commit)."""
    snap = t.store.snapshot_manager.earlier_or_equal_time_millis(int(at_s * 1000))
    if snap is None:
        return 0
    return int(t.to_arrow(snapshot_id=snap.id, columns=["id"]).num_rows)


def _read_counter(path: str) -> tuple[list[tuple[float, int]], list[tuple[int, int, int]], Optional[float]]:
    counts: list[tuple[float, int]] = []
    live: list[tuple[int, int, int]] = []
    total = 0
    first: Optional[float] = None
    if not os.path.exists(path):
        return counts, live, first
    with open(path) as fh:
        for line in fh:
            parts = line.strip().split(",")
            if parts[0] == "S" and len(parts) == 3:
                total += int(parts[2])
                t_s = int(parts[1]) / 1000.0 + 0.1
                if first is None:
                    first = int(parts[1]) / 1000.0
                counts.append((t_s, total))
            elif parts[0] == "L" and len(parts) == 4:
                live.append((int(parts[1]), int(parts[2]), int(parts[3])))
    return counts, live, first


# ---- main ------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="freshness,throughput,hybrid", help="comma list of the parts to run")
    p.add_argument("--bootstrap", default=None, help="use this Kafka broker instead of starting one")
    p.add_argument("--rounds", type=int, default=1, help="repeat the freshness and throughput jobs, interleaved")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--bundle-time", type=int, default=None,
                   help="python.fn-execution.bundle.time (ms) of the freshness and hybrid jobs; default: "
                        "flink-conf/'s (200 ms)")
    g = p.add_argument_group("freshness")
    g.add_argument("--variants", default=",".join(VARIANTS), help="comma list of eventual, transactional, files")
    p.add_argument("--clients", default="auto", help="comma list of the log's Kafka clients to run each log variant "
                   "with: kafka-python, confluent-kafka, auto (log.kafka.client)")
    g.add_argument("--rate", type=float, default=200.0, help="rows per second emitted")
    g.add_argument("--seconds", type=float, default=60.0, help="measured emission window per job")
    g.add_argument("--warmup-s", type=float, default=10.0, help="first seconds of the window not counted")
    g.add_argument("--checkpoint-ms", type=int, default=10_000)
    g.add_argument("--buckets", type=int, default=2)
    g.add_argument("--discovery-ms", type=int, default=200, help="read_lakelog's discovery interval (files)")
    g.add_argument("--timeout-s", type=float, default=180.0)
    g.add_argument("--eventual-batch-ms", type=int, default=None,
                   help="diagnosis: the RowBatcher interval of eventual tables (default: the sink's, "
                        "lakelog.operators.sink.EVENTUAL_LOG_BATCH_MS)")
    g = p.add_argument_group("throughput (bench_flink_ingest.py's job)")
    g.add_argument("--rows", type=int, default=500_000)
    g.add_argument("--ingest-checkpoint-ms", type=int, default=2000)
    g.add_argument("--ingest-bundle-size", type=int, default=100_000)
    g.add_argument("--ingest-bundle-time", type=int, default=1000)
    g = p.add_argument_group("hybrid")
    g.add_argument("--table-rows", type=int, default=1_000_000)
    g.add_argument("--tail-rows", type=int, default=5, help="rows per live-tail commit")
    g.add_argument("--tail-ms", type=int, default=200, help="live-tail commit interval")
    g.add_argument("--tail-s", type=float, default=10.0, help="seconds of live tail measured after the first live record")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    return p


def _clients(args: argparse.Namespace) -> list[str]:
    return [c.strip() for c in args.clients.split(",") if c.strip()] or ["auto"]


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = set(parts) - {"freshness", "throughput", "hybrid"}
    if unknown:
        _parser().error(f"--only: unknown part(s) {sorted(unknown)}")
    workdir = args.workdir or tempfile.mkdtemp(prefix="lakelog-bench-log-")
    os.environ[WORKER_MODE_ENV] = "process"
    ship_by_value(sys.modules[__name__])
    if args.eventual_batch_ms:
        import lakelog.operators.sink as sink

        sink.EVENTUAL_LOG_BATCH_MS = args.eventual_batch_ms  # read when a sink is built, here
    ok = True
    start_load = loadavg()
    try:
        with kafka(args, workdir) as servers:
            fresh: list[FreshRun] = []
            if "freshness" in parts:
                variants = with_clients([v.strip() for v in args.variants.split(",") if v.strip()], _clients(args))
                for rnd in range(1, args.rounds + 1):
                    for v in variants:
                        try:
                            fresh.append(freshness_job(args, workdir, servers, v, rnd))
                        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                            run = FreshRun(v, rnd, load=loadavg(), error=str(exc).splitlines()[0][:200])
                            fresh.append(run)
                            step(f"freshness {v} round {rnd} FAILED: {run.error}")
            outcome: dict[str, bool] = {}
            reports: dict[str, str] = {}
            for part, fn in (("throughput", throughput), ("hybrid", hybrid)):
                if part in parts:
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        outcome[part] = fn(args, workdir, servers)
                    reports[part] = out.getvalue()
            print(METHOD)
            print(f"\n{os.cpu_count()} CPUs; load average (1/5/15 min) at start {start_load}, end {loadavg()}")
            if fresh:
                outcome["freshness"] = report_freshness(args, fresh)
            for text in reports.values():
                print(text, end="")
            ok = all(outcome.values())
            print("\nsummary: " + ", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in outcome.items()))
    finally:
        if not args.keep and args.workdir is None:
            time.sleep(1.0)
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
