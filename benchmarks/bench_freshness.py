"""Freshness of the PyFlink sink: from a row being emitted to it being visible to a streaming read.

Not a timed test: one run prints latency percentiles, the target and PASS/FAIL. See
benchmarks/README.md.

    /work/flinkvenv/bin/python benchmarks/bench_freshness.py                  # 200 rows/s for 40 s
    /work/flinkvenv/bin/python benchmarks/bench_freshness.py --checkpoint-ms 1000 --flush-ms 250
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _flink_ops import Recorder, Stamp, discard, operator, read_records, ship_by_value  # noqa: E402
from _util import loadavg, render_table, step  # noqa: E402

__all__ = ["main", "SnapshotPoller"]

WORKER_MODE_ENV = "_python_worker_execution_mode"  # read by PyFlink when a job is executed locally
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("emit_ms", pa.int64()),
        pa.field("map_ms", pa.int64()),
        pa.field("payload", pa.string()),
    ]
)

METHOD = """\
Method (one Flink job on a local MiniCluster, Python workers in their own processes; shared machine):
  emitter    Flink's datagen source (Java, 'rows-per-second' = --rate, ids 0, 1, 2, ...) with a
             PROCTIME() column materialised right after it (emit_ms: the wall-clock time the row left
             the source, on the JVM) -> Stamp (Python map; map_ms: when the row reached Python; PyFlink
             hands rows to a Python function in bundles, so map_ms - emit_ms is up to the bundle time).
             Latency is measured from emit_ms, i.e. it includes that hand-over. The source holds more
             rows than are measured, so the job is still emitting when it is cancelled: every
             measured row goes through the sink's normal, checkpoint-gated commit path (never the
             end-of-input commit).
  sink       sink_to_lakelog into a primary-key table (id, emit_ms, map_ms, payload), one table per flush
             interval tried (all fed by the same emitter, in the same job).
  readers    (a) "streaming read": read_lakelog(mode='streaming', default scan mode latest-full: the
             snapshot current at its first poll in full, then each new snapshot's changes; discovery
             interval --discovery-ms) of each table in the same job, followed by a Python map
             (chained, parallelism 1) that records time.time() when each row reaches it;
             (b) "snapshot poller": a thread of this client process that lists the table's snapshots
             every --poll-ms and reads the rows each new APPEND snapshot added (lakelog's
             delta read, lakelog.connector.table.changes.delta_rows), recording the wall time after the
             read. (b) is when a row became visible in the table; (a) adds the Flink reader's
             discovery interval and its hand-off.
  latency    arrival wall time - emit_ms, per row, for the rows emitted in the measured window minus
             the first --warmup-s seconds (job start-up, first checkpoint, first writer set-up);
             the warm-up rows are reported separately.
  target     p95 and max <= checkpoint interval + 2 s."""


# ---- the snapshot poller ----------------------------------------------------------------------------------
class SnapshotPoller(threading.Thread):
    """Follows a table's snapshots from this process; records when each id first became readable."""

    def __init__(self, table_path: str, interval_s: float) -> None:
        super().__init__(daemon=True)
        from lakelog.connector.format.store import TableStore

        self.store = TableStore(table_path)
        self.interval_s = interval_s
        self.arrivals: dict[int, tuple[int, int]] = {}  # id -> (emit_ms, arrival_ms)
        self.next_snapshot = 1
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    def run(self) -> None:
        from lakelog.connector.table.changes import delta_rows

        try:
            while not self._halt.is_set():
                latest = self.store.snapshot_manager.latest_id()
                while latest is not None and self.next_snapshot <= latest:
                    t = delta_rows(self.store, self.next_snapshot - 1, self.next_snapshot)
                    now = int(time.time() * 1000)
                    ids = t.column("id").to_pylist()
                    emits = t.column("emit_ms").to_pylist()
                    for i, e in zip(ids, emits):
                        self.arrivals.setdefault(i, (e, now))
                    self.next_snapshot += 1
                self._halt.wait(self.interval_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join()


# ---- job ------------------------------------------------------------------------------------------------------
@dataclass
class Variant:
    flush_ms: Optional[int]  # None: the sink's default
    table_path: str = ""
    record_path: str = ""
    poller: Optional[SnapshotPoller] = None
    flink: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "sink default (none: writes at each checkpoint)" if self.flush_ms is None else f"{self.flush_ms} ms"


def stats(lat_ms: list[int]) -> dict[str, float]:
    if not lat_ms:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "max": float("nan"), "min": float("nan")}
    a = np.asarray(lat_ms, dtype=np.float64) / 1000.0
    return {"n": len(a), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max()), "min": float(a.min())}


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="lakelog-freshness-")
    try:
        return run(args, workdir)
    finally:
        if not args.keep and args.workdir is None:
            time.sleep(1.0)  # let the cancelled job's tasks stop writing
            shutil.rmtree(workdir, ignore_errors=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=200.0, help="rows per second emitted")
    p.add_argument("--seconds", type=float, default=40.0, help="measured emission window")
    p.add_argument("--warmup-s", type=float, default=5.0, help="first seconds of the window reported apart")
    p.add_argument("--checkpoint-ms", type=int, default=2000)
    p.add_argument("--flush-ms", default="default",
                   help="writer flush interval in ms, or 'default' (the sink's default: none, the writers "
                        "write at each checkpoint barrier); a comma list makes one table per value")
    p.add_argument("--parallelism", type=int, default=2, help="writer parallelism (and job default)")
    p.add_argument("--buckets", type=int, default=2)
    p.add_argument("--bundle-time", type=int, default=1000,
                   help="python.fn-execution.bundle.time (ms); default: Flink's (1000), not flink-conf/'s (200)")
    p.add_argument("--discovery-ms", type=int, default=200, help="read_lakelog continuous.discovery-interval")
    p.add_argument("--poll-ms", type=int, default=50, help="snapshot poller interval")
    p.add_argument("--no-flink-reader", action="store_true", help="only the snapshot poller")
    p.add_argument("--timeout-s", type=float, default=180.0, help="give up waiting for rows after this")
    p.add_argument("--workers", choices=["process", "loopback"], default="process")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    return p


def run(args: argparse.Namespace, workdir: str) -> int:
    os.environ[WORKER_MODE_ENV] = args.workers
    variants = [Variant(None if x.strip() == "default" else int(x)) for x in args.flush_ms.split(",") if x.strip()]
    measured = int(args.rate * args.seconds)
    warm = int(args.rate * args.warmup_s)
    total = measured + int(args.rate * 120)  # the job is cancelled long before the emitter runs dry
    load_start = loadavg()
    ship_by_value(sys.modules[__name__])
    from pyflink.common import Types
    from pyflink.datastream import MapFunction
    from pyflink.table import StreamTableEnvironment

    import lakelog
    from lakelog.operators.flink_env import flink_environment
    from lakelog.operators.sink import row_type_of, sink_to_lakelog
    from lakelog.operators.source import read_lakelog

    job = None
    try:
        cat = lakelog.Catalog(os.path.join(workdir, "wh"))
        conf = {"restart-strategy.type": "none"}
        conf["python.fn-execution.bundle.time"] = str(args.bundle_time)
        env = flink_environment(mode="streaming", parallelism=args.parallelism,
                                checkpoint_interval_ms=args.checkpoint_ms, config=conf)
        t_env = StreamTableEnvironment.create(env)
        t_env.execute_sql(
            "CREATE TEMPORARY TABLE fresh_ids (id BIGINT, born AS PROCTIME()) WITH ('connector'='datagen', "
            f"'rows-per-second'='{args.rate:g}', 'fields.id.kind'='sequence', 'fields.id.start'='0', "
            f"'fields.id.end'='{total - 1}')"
        )
        born = t_env.sql_query("SELECT id, CAST(born AS TIMESTAMP_LTZ(3)) AS born FROM fresh_ids")
        rows = (t_env.to_data_stream(born)
                .map(operator(MapFunction, Stamp), output_type=row_type_of(SCHEMA)).name("stamp"))
        for i, v in enumerate(variants):
            t = cat.create_table(f"bench.fresh_{i}", SCHEMA, primary_key=["id"],
                                 options={"bucket": str(args.buckets)})
            v.table_path = str(t.store.path)
            v.record_path = os.path.join(workdir, f"arrivals-{i}.csv")
            sink_to_lakelog(rows, v.table_path, flush_interval=v.flush_ms,
                            channel_dir=os.path.join(workdir, f"channel-{i}-{uuid.uuid4().hex[:6]}"))
            if not args.no_flink_reader:
                read = read_lakelog(env, v.table_path, mode="streaming",
                                    discovery_interval=args.discovery_ms / 1000.0)
                recorded = (read.map(operator(MapFunction, Recorder, v.record_path), output_type=Types.LONG()).set_parallelism(1)
                            .name(f"record-{i}"))
                discard(recorded)
            v.poller = SnapshotPoller(v.table_path, args.poll_ms / 1000.0)
            v.poller.start()
        step(f"submitting: {len(variants)} table(s), {measured} measured rows at {args.rate:g} rows/s")
        job = env.execute_async("lakelog-freshness")
        deadline = time.time() + args.timeout_s + args.seconds
        while time.time() < deadline:
            time.sleep(1.0)
            done = True
            for v in variants:
                assert v.poller is not None
                if v.poller.error is not None:
                    raise RuntimeError(f"snapshot poller failed: {v.poller.error!r}")
                have = sum(1 for i in range(measured) if i in v.poller.arrivals)
                flink_have = -1
                if not args.no_flink_reader:
                    v.flink = read_records(v.record_path)
                    flink_have = sum(1 for i in range(measured) if i in v.flink)
                    done &= flink_have >= measured
                done &= have >= measured
                status = f"poller {have}/{measured}" + (f", flink {flink_have}/{measured}" if flink_have >= 0 else "")
            step(f"waiting for rows ({status} for the last table)")
            if done:
                break
    finally:
        if job is not None:
            try:
                job.cancel().result()
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"cancel: {exc!r}", file=sys.stderr)
        for v in variants:
            if v.poller is not None and v.poller.is_alive():
                v.poller.stop()
    load_end = loadavg()
    target_s = args.checkpoint_ms / 1000.0 + 2.0
    print(METHOD)
    print()
    print(f"settings: runtime mode STREAMING, checkpointing every {args.checkpoint_ms} ms (EXACTLY_ONCE), "
          f"python.execution-mode=process (workers: {args.workers}), parallelism {args.parallelism}, "
          f"python.fn-execution.bundle.time={args.bundle_time} ms (other settings from flink-conf/), {args.rate:g} rows/s for {args.seconds:g} s "
          f"({measured} rows, first {args.warmup_s:g} s = {warm} rows are warm-up), {args.buckets} buckets, "
          f"read_lakelog discovery {args.discovery_ms} ms, poller every {args.poll_ms} ms, committer poll "
          f"300 ms; load average (1/5/15 min) at start {load_start}, end {load_end}")
    print()
    head = ["writer flush interval", "reader", "rows", "p50 s", "p95 s", "max s", "min s", "warm-up p50/max s",
            "target", "p95", "max"]
    body = []
    ok = True
    for v in variants:
        assert v.poller is not None
        for reader, arr in (("snapshot poller", v.poller.arrivals), ("streaming read (read_lakelog)", v.flink)):
            if reader.startswith("streaming") and args.no_flink_reader:
                continue
            lat = [arr[i][1] - arr[i][0] for i in range(warm, measured) if i in arr]
            lat_warm = [arr[i][1] - arr[i][0] for i in range(warm) if i in arr]
            s, w = stats(lat), stats(lat_warm)
            missing = measured - sum(1 for i in range(measured) if i in arr)
            ok &= missing == 0
            body.append([v.label, reader, f"{s['n']}" + (f" ({missing} missing)" if missing else ""),
                         f"{s['p50']:.2f}", f"{s['p95']:.2f}", f"{s['max']:.2f}", f"{s['min']:.2f}",
                         f"{w['p50']:.2f} / {w['max']:.2f}", f"<= {target_s:g} s",
                         "PASS" if s["p95"] <= target_s else "FAIL", "PASS" if s["max"] <= target_s else "FAIL"])
    print(render_table(head, body))
    for i, v in enumerate(variants):
        t = cat.get_table(f"bench.fresh_{i}").to_arrow()
        hand = stats((np.asarray(t.column("map_ms")) - np.asarray(t.column("emit_ms"))).astype(np.int64).tolist())
        print(f"{v.label}: source -> Python map hand-over (part of the latency above) "
              f"p50 {hand['p50']:.2f} s, p95 {hand['p95']:.2f} s, max {hand['max']:.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
