"""The main PyFlink job: a changelog streams into a partitioned primary-key lakelog table with a
Kafka log while a streaming read of the same table prints what arrives, from the log and from the
files side by side; a batch query then checks the result.

Run: ``python -m lakelog.jobs.pipeline [--warehouse DIR] [--orders N] [--rate R] [--conf-dir DIR]
[--log-consistency eventual|transactional] [--kafka HOST:PORT | --no-log]``

Everything is embedded: a local MiniCluster (settings from ``flink-conf/config.yaml`` or
``$FLINK_CONF_DIR``; see :mod:`lakelog.operators.flink_env`), a local warehouse (default: a temporary
folder, removed afterwards) and a single-node Kafka broker (:mod:`lakelog.jobs.kafka_broker`: its
pinned jars fetched into the cache on first use, started on free loopback ports in a temporary
folder and stopped at the end; without Java 17 or newer the job says so and runs without the log).
Three Flink jobs, all through the SQL wrapper (:class:`lakelog.operators.sql.LakelogSql`):

1. A streaming ``SELECT`` of ``lk.shop.customer_totals`` twice, as one ``UNION ALL``, submitted
   first: once through the table's Kafka log (the hybrid read: the snapshot, then the log) and once
   from its files (``'streaming-read-mode' = 'file'``: each new snapshot's changes). Both receive
   the changes (``+I`` for a new customer, ``-U``/``+U`` for a changed one: the log holds the rows
   as written, so its read is an upsert table and Flink derives the ``-U``); the job prints one
   line per burst of changes and path, with the latency from the order
   that caused each change to its arrival, and stops the query once both materialised views hold
   the final totals. A warm-up row, written and deleted once it has come through both paths, shows
   that the query is live before the first order is made.
2. ``INSERT INTO lk.shop.customer_totals SELECT dt, customer, COUNT(*), SUM(amount), MAX(seq),
   MAX(made_at) ... GROUP BY dt, customer`` over a bounded ``datagen`` sequence of orders: the
   aggregation emits a primary-key changelog (``+I`` for a new customer, then ``-U``/``+U`` for
   every later order); the SQL wrapper passes its upserts (``+I``/``+U``; ``-U`` is dropped for a
   deduplicating table, as Paimon's Flink sink does) to the lakelog sink, which commits at every
   checkpoint; with an ``eventual`` log (the default here) its writers also send every change to
   the topic as it arrives, with a ``transactional`` one each commit publishes its changes.
3. ``SET 'execution.runtime-mode' = 'batch'`` and a ``GROUP BY dt`` query: printed, and compared
   with the totals computed here from the generator's formula, like the table itself (``OK``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LakelogError
from lakelog.jobs.cli import count_arg, seconds_arg

__all__ = ["expected_totals", "run", "main", "TABLE", "DAYS", "CUSTOMERS", "Freshness", "latency_summary"]

TABLE = "shop.customer_totals"
DAYS = 3  # partitions: 2024-06-01 .. 2024-06-03
CUSTOMERS = 7  # DAYS * CUSTOMERS primary keys (3 and 7 are coprime: every pair occurs)
PATHS = ("log", "files")  # the streaming read's two paths, as its rows' `path` column names them

CATALOG = "CREATE CATALOG lk WITH ('type' = 'lakelog', 'warehouse' = '{warehouse}');"

DDL = (
    CATALOG
    + """
CREATE DATABASE IF NOT EXISTS lk.shop;
CREATE TABLE lk.shop.customer_totals (
  dt         STRING NOT NULL,
  customer   STRING NOT NULL,
  orders     BIGINT,
  amount     DECIMAL(12, 2),
  last_order BIGINT,
  last_at    TIMESTAMP_LTZ(3),
  PRIMARY KEY (dt, customer) NOT ENFORCED
) PARTITIONED BY (dt) WITH ('bucket' = '2'{log_options});

-- a bounded generator: order number `seq` = 1..N, spread over {seconds} s; made_at: when it was made
CREATE TEMPORARY TABLE order_events (seq BIGINT, proc AS PROCTIME()) WITH (
  'connector' = 'datagen', 'rows-per-second' = '{rate}', 'number-of-rows' = '{orders}',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '{orders}'
);
CREATE TEMPORARY VIEW orders AS
SELECT seq,
       CONCAT('2024-06-0', CAST(seq % {days} + 1 AS STRING)) AS dt,
       CONCAT('c', CAST(seq % {customers} AS STRING)) AS customer,
       CAST((seq * 37) % 10000 AS DECIMAL(12, 2)) / 100 AS amount,
       CAST(proc AS TIMESTAMP_LTZ(3)) AS made_at
FROM order_events;
-- the aggregation emits each customer's new totals every half second, not once per order: the
-- Kafka log carries every change the sink writes, and half a second of orders in one update
-- keeps the streaming read's collect() (one round trip to the JVM per row) ahead of it
SET 'table.exec.mini-batch.enabled' = 'true';
SET 'table.exec.mini-batch.allow-latency' = '500 ms';
SET 'table.exec.mini-batch.size' = '5000';
"""
)

LOG_OPTIONS = """,
  'log.system' = 'kafka', 'kafka.bootstrap.servers' = '{servers}', 'log.consistency' = '{consistency}'"""

INSERT = """
INSERT INTO lk.shop.customer_totals
SELECT dt, customer, COUNT(*), SUM(amount), MAX(seq), MAX(made_at) FROM orders GROUP BY dt, customer
"""

# the same table twice: through its Kafka log (the default for a log table) and from its files.
# last_at is read as the session's wall clock: PyFlink's collect() cannot hand TIMESTAMP_LTZ values
# (java.time.Instant) to Python, and the job reads them back as local times
COLUMNS = "dt, customer, orders, amount, last_order, CAST(last_at AS TIMESTAMP(3)) AS last_at"
FOLLOW_FILES = (
    f"SELECT 'files' AS path, {COLUMNS} FROM lk.shop.customer_totals "
    "/*+ OPTIONS('streaming-read-mode' = 'file', 'continuous.discovery-interval' = '500 ms') */"
)
FOLLOW_BOTH = f"SELECT 'log' AS path, {COLUMNS} FROM lk.shop.customer_totals UNION ALL " + FOLLOW_FILES

SUMMARY = """
SELECT dt, COUNT(*) AS customers, SUM(orders) AS orders, SUM(amount) AS amount
FROM lk.shop.customer_totals GROUP BY dt
"""

Key = tuple[str, str]
# a row written and deleted before the INSERT starts: once it has come through every path of the
# streaming read, that read is live, and the orders' latencies do not include its start-up
WARM_UP: Key = ("2024-06-01", "warm-up")
Totals = dict[Key, tuple[int, Decimal, int]]  # (dt, customer) -> (orders, amount, last order)
KAFKA_JAVA = 17  # Kafka 4's broker needs Java 17 or newer


def expected_totals(orders: int) -> Totals:
    """What the INSERT must leave in the table, from the generator's formula (vectorised)."""
    seq = np.arange(1, orders + 1, dtype=np.int64)
    key = (seq % DAYS) * CUSTOMERS + seq % CUSTOMERS
    cents = (seq * 37) % 10000
    n = DAYS * CUSTOMERS
    count = np.bincount(key, minlength=n)
    total = np.bincount(key, weights=cents, minlength=n)  # exact: sums stay far below 2**53
    last = np.zeros(n, dtype=np.int64)
    np.maximum.at(last, key, seq)
    out: Totals = {}
    for k in np.flatnonzero(count):
        dt = f"2024-06-0{k // CUSTOMERS + 1}"
        out[(dt, f"c{k % CUSTOMERS}")] = (int(count[k]), Decimal(int(total[k])) / 100, int(last[k]))
    return out


class Freshness:
    """When each update of a customer's totals became visible on each path of the streaming read.

    An update is (key, last order, made): the totals after order ``last order``, made (generated) at
    ``made``. Every row a path delivers names its key's last order and when that order was made, so
    rows of any path make updates known: the log's carry every update the aggregation emitted, the
    files' only the newest of each commit. An update is visible on a path from the first row of that
    path, for its key, whose last order is at or past the update's; its latency there is that row's
    arrival minus ``made``. (A row's own ``arrival - made`` would flatter the file path: its rows
    show only the newest order of a commit, not the older ones that waited for the commit.)"""

    def __init__(self, paths: Sequence[str]) -> None:
        self.made: dict[Key, dict[int, float]] = {}
        self.rows: dict[str, dict[Key, list[tuple[int, float]]]] = {p: {} for p in paths}
        self.first: dict[str, float] = {}  # when each path delivered its first row

    def add(self, path: str, key: Key, last_order: int, made: float, arrived: float) -> list[float]:
        """Record a row (times in seconds since the epoch); returns the latencies of the updates
        known so far that it makes visible on its path."""
        self.made.setdefault(key, {})[last_order] = made
        rows = self.rows[path].setdefault(key, [])
        before = max((n for n, _ in rows), default=0)
        rows.append((last_order, arrived))
        self.first.setdefault(path, arrived)
        return [arrived - m for n, m in self.made[key].items() if before < n <= last_order]

    def latencies(self, path: str, *, made_after: Optional[float] = None) -> list[float]:
        """The latency on ``path`` of every update known (made after ``made_after``, if given) that
        the path has delivered."""
        out = []
        for key, updates in self.made.items():
            rows = self.rows[path].get(key, [])
            for n, m in updates.items():
                if made_after is not None and m <= made_after:
                    continue
                seen = [a for last, a in rows if last >= n]
                if seen:
                    out.append(min(seen) - m)
        return out

    def steady(self, path: str) -> list[float]:
        """:meth:`latencies` of the updates made once every path had delivered its first row (the
        first ones also wait for the INSERT job to start)."""
        return self.latencies(path, made_after=max(self.first.values()) if self.first else None)


@dataclass
class _Change:
    path: str
    kind: str
    latencies: list[float]  # of the updates this change made visible (see Freshness)
    keys: int
    orders: int


@dataclass
class _Burst:
    first: float  # when its first change arrived (time.monotonic())
    kinds: Counter[str]
    latencies: list[float]
    keys: int
    orders: int


class _Follower:
    """Consumes the streaming SELECT in a thread, keeps one materialised view per path, and stops
    the query once every view equals ``expected`` (totals only grow, so that happens at the very end)."""

    def __init__(self, result: Any, expected: Totals, paths: Sequence[str]) -> None:
        self.result = result
        self.expected = expected
        self.views: dict[str, Totals] = {p: {} for p in paths}
        self.matching = dict.fromkeys(paths, 0)
        self.freshness = Freshness(paths)
        self.events: queue.Queue[Optional[_Change | BaseException]] = queue.Queue()
        self.done = threading.Event()
        self.warm: set[str] = set()  # the paths that delivered the WARM_UP row
        self.live = threading.Event()  # ... every path did
        # the thread waits for this once the read is live: no call into the JVM of this thread runs
        # while the main thread plans the INSERT. (PyFlink's Py4J client opens another connection,
        # i.e. another Java thread, for a call made while one is in flight, and Flink's planner
        # fails on a thread other than its own: NullPointerException 'metadataHandlerProvider'.)
        self.resume = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lakelog-follow", daemon=True)

    def _apply(self, path: str, kind: str, row: tuple[Any, ...]) -> None:
        view = self.views[path]
        key: Key = (row[0], row[1])
        before = view.get(key)
        if kind in ("-U", "-D"):
            view.pop(key, None)
        else:
            view[key] = (int(row[2]), Decimal(row[3]), int(row[4]))
        was, now = before == self.expected.get(key), view.get(key) == self.expected.get(key)
        self.matching[path] += int(now) - int(was)

    def _complete(self) -> bool:
        n = len(self.expected)
        return all(self.matching[p] == n and len(v) == n for p, v in self.views.items())

    def _run(self) -> None:
        short = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}
        try:
            with self.result.collect() as rows:
                for r in rows:
                    arrived = time.time()
                    kind = short[r.get_row_kind().name]
                    path, values = r[0], tuple(r)[1:]
                    if (values[0], values[1]) == WARM_UP:  # not an order: only says the path is live
                        self.warm.add(path)
                        if len(self.warm) == len(self.views) and not self.live.is_set():
                            self.live.set()
                            self.resume.wait()
                        continue
                    self._apply(path, kind, values)
                    latencies: list[float] = []
                    made = values[5]
                    if kind in ("+I", "+U") and made is not None:  # a -U is the old row
                        key = (values[0], values[1])
                        latencies = self.freshness.add(path, key, int(values[4]), made.timestamp(), arrived)
                    view = self.views[path]
                    orders = sum(v[0] for v in view.values())
                    self.events.put(_Change(path, kind, latencies, len(view), orders))
                    if self._complete():
                        self.done.set()
                        _quiet_cancelled_workers()
                        break  # leaving the with-block cancels the streaming query
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.events.put(e)
        finally:
            self.events.put(None)

    def stop(self) -> None:
        """Cancel the streaming query (after a failure elsewhere)."""
        self.resume.set()
        _quiet_cancelled_workers()
        with contextlib.suppress(Exception):  # already finished or gone
            self.result.get_job_client().cancel()


class _CancelNoiseFilter:
    """``sys.stderr`` while the streaming query is being cancelled: its in-process Python workers
    (PyFlink's loopback mode) print the expected CANCELLED / channel-closed tracebacks of that
    cancellation; everything else passes through."""

    MARKERS = ("StatusCode.CANCELLED", "Multiplexer hanging up", "Channel closed prematurely", "_queue.Empty")

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.dropped = False  # the last write was noise: a line end after it is too

    def write(self, text: str) -> int:
        if any(m in text for m in self.MARKERS) or (self.dropped and not text.strip()):
            self.dropped = True
            return len(text)
        self.dropped = False
        return int(self.stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _quiet_cancelled_workers() -> None:
    """Keep the expected noise of stopping the streaming query out of the job's output."""
    previous = threading.excepthook

    def hook(args: Any) -> None:
        exc = args.exc_value
        if "grpc" in type(exc).__module__ and "CANCELLED" in str(exc):
            return
        previous(args)

    threading.excepthook = hook
    if not isinstance(sys.stderr, _CancelNoiseFilter):
        sys.stderr = _CancelNoiseFilter(sys.stderr)  # type: ignore[assignment]


def _print_table(table: pa.Table) -> None:
    cells = [[str(v) for v in col.to_pylist()] for col in table.columns]
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(table.column_names, cells)]
    print("  " + " ".join(n.rjust(w) for n, w in zip(table.column_names, widths)))
    for row in zip(*cells):
        print("  " + " ".join(c.rjust(w) for c, w in zip(row, widths)))


def _root_cause(e: BaseException) -> str:
    """The innermost ``...Error: message`` line of a (Java-wrapped) failure, else its first line."""
    text = str(e)
    found = re.findall(r"^[\s:]*(?:Caused by: )?([\w.$]*(?:Error|Exception): .+)$", text, re.M)
    return found[-1].strip() if found else (text.splitlines() or [type(e).__name__])[0][:300]


def _ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def latency_summary(latencies: Sequence[float]) -> str:
    """``p50 x s, max y s`` of latencies in seconds."""
    if not latencies:
        return "no changes"
    return f"p50 {_ms(list(latencies), 50):.2f} s, max {max(latencies):.2f} s"


def _follow(
    follower: _Follower, started: float, timeout_s: float, latest: Any, check_insert: Any, span: float
) -> None:
    """Print one line per burst of changes of each path (a pause of 0.4 s in a path, or ``span``
    seconds since its first change, ends its burst: a log delivers all the time) until the
    follower is done; ``check_insert()`` raises when the INSERT job failed."""
    pending: dict[str, _Burst] = {}
    last: dict[str, float] = {}
    width = max(len(p) for p in follower.views)
    deadline = time.monotonic() + timeout_s

    def flush(path: str) -> None:
        b = pending.pop(path)
        kinds = "  ".join(f"{k} {b.kinds.get(k, 0):>3}" for k in ("+I", "-U", "+U", "-D"))
        print(
            f"[{time.monotonic() - started:5.1f}s] read {path:<{width}}  {kinds}   -> {b.keys:>2} customers, "
            f"{b.orders:>5} orders, latency {latency_summary(b.latencies)}  (table at snapshot {latest()})",
            flush=True,
        )

    try:
        while True:
            try:
                ev: Any = follower.events.get(timeout=0.1)
            except queue.Empty:
                ev = _PAUSE
            now = time.monotonic()
            if isinstance(ev, _Change):
                b = pending.get(ev.path)
                if b is None:
                    b = pending[ev.path] = _Burst(now, Counter(), [], 0, 0)
                b.kinds[ev.kind] += 1
                b.latencies.extend(ev.latencies)
                b.keys, b.orders = ev.keys, ev.orders
                last[ev.path] = now
                if now - b.first < span:
                    continue
            final = ev is None or isinstance(ev, BaseException)
            ended = [p for p, b in pending.items() if final or now - last[p] >= 0.4 or now - b.first >= span]
            for path in ended:
                flush(path)
            if isinstance(ev, _Change):
                continue
            if isinstance(ev, BaseException):
                raise RuntimeError(f"the streaming read failed: {_root_cause(ev)}") from ev
            if ev is None:
                return
            check_insert()
            if now > deadline:
                raise TimeoutError(f"the streaming read did not catch up within {timeout_s:.0f} s")
    except BaseException:
        follower.stop()
        raise


_PAUSE = object()


def _warm_up(table: Any, follower: _Follower, started: float, timeout_s: float) -> int:
    """Write the WARM_UP row, wait until every path of the streaming read has delivered it, delete
    it; returns the table's snapshot id after that (the INSERT's commits come later). The streaming
    SELECT takes a while to start (its Python workers; many seconds on a busy machine): without
    this, the first orders would wait for it, or all of them on a slow start."""
    schema = table.schema
    row = {"dt": WARM_UP[0], "customer": WARM_UP[1], "orders": 0, "amount": Decimal(0), "last_order": 0}
    table.write(pa.table([pa.array([row.get(f.name)], f.type) for f in schema], schema=schema))
    deadline = time.monotonic() + timeout_s
    while not follower.live.wait(0.2):
        if not follower.thread.is_alive() or time.monotonic() > deadline:
            follower.stop()
            with contextlib.suppress(queue.Empty):  # the reason it stopped, if it failed
                while (ev := follower.events.get(timeout=30)) is not None:
                    if isinstance(ev, BaseException):
                        raise RuntimeError(f"the streaming read failed: {_root_cause(ev)}") from ev
            raise TimeoutError(f"the streaming read did not start within {timeout_s:.0f} s")
    keys = pa.table({"dt": [WARM_UP[0]], "customer": [WARM_UP[1]]})
    sid = table.delete(keys.cast(pa.schema([schema.field("dt"), schema.field("customer")])))
    print(
        f"[{time.monotonic() - started:5.1f}s] streaming read live on every path (a warm-up row came "
        "through each; deleted)",
        flush=True,
    )
    return int(sid if sid is not None else table.store.snapshot_manager.latest_id() or 0)


def run(
    warehouse: str,
    *,
    orders: int = 3000,
    rate: int = 200,
    parallelism: Optional[int] = 1,
    conf_dir: Optional[str] = None,
    timeout_s: float = 240.0,
    kafka: Optional[str] = None,
    consistency: str = "eventual",
    checkpoint_ms: Optional[int] = None,
) -> bool:
    """Run the three jobs on ``warehouse``; True when the table holds exactly the expected totals.
    With ``kafka`` (bootstrap servers) the table has a Kafka log of that ``consistency``, and the
    streaming read follows it beside the files."""
    import lakelog
    from lakelog.operators.flink_env import load_settings
    from lakelog.operators.sql import LakelogSql

    started = time.monotonic()
    catalog = lakelog.Catalog(warehouse)
    if catalog.table_exists(TABLE):  # a previous run's table (--warehouse): start afresh
        catalog.drop_table(TABLE)
    expected = expected_totals(orders)
    settings = load_settings(conf_dir)
    if checkpoint_ms:  # the session's table config would bring the file's interval back otherwise
        settings["execution.checkpointing.interval"] = f"{checkpoint_ms} ms"
    sql = LakelogSql("streaming", config=settings, parallelism=parallelism or None)
    log_options = LOG_OPTIONS.format(servers=kafka, consistency=consistency) if kafka else ""
    sql.run_script(
        DDL.format(
            warehouse=warehouse,
            rate=rate,
            orders=orders,
            days=DAYS,
            customers=CUSTOMERS,
            seconds=f"{orders / rate:.0f}",
            log_options=log_options,
        ),
        print_results=False,
    )
    table = catalog.get_table(TABLE)
    checkpoint_s = sql.env.get_checkpoint_config().get_checkpoint_interval() / 1000
    print(
        f"table {TABLE} at {table.path}: primary key {table.primary_keys}, partitioned by "
        f"{table.partition_keys}, {table.options.get('bucket')} buckets per partition"
    )
    if kafka:
        print(
            f"  with a Kafka log ({consistency}): topic {table.options.get('kafka.topic')} at {kafka}, "
            "Debezium JSON, one partition per bucket"
        )
    print(
        f"streaming {orders} orders ({rate}/s) as per-customer totals, "
        f"checkpoints every {checkpoint_s:g} s ...",
        flush=True,
    )

    # the streaming SELECT first, so that it is up and following when the first change lands. It runs
    # in a session of its own with at-least-once checkpoints: Flink's collect() hands out the rows of
    # an exactly-once job only once a checkpoint of that job has completed, which would show its own
    # checkpoints' pace instead of the table's freshness (the INSERT keeps exactly-once)
    viewer = LakelogSql(
        "streaming",
        config={**settings, "execution.checkpointing.mode": "AT_LEAST_ONCE"},
        parallelism=parallelism or None,
    )
    viewer.run_script(CATALOG.format(warehouse=warehouse), print_results=False)
    paths = PATHS if kafka else ("files",)
    follower = _Follower(viewer.execute(FOLLOW_BOTH if kafka else FOLLOW_FILES), expected, paths)
    print(
        f"[{time.monotonic() - started:5.1f}s] streaming SELECT submitted: "
        + (
            "the table through its Kafka log (log) and from its files (files)"
            if kafka
            else "the table from its files"
        ),
        flush=True,
    )
    follower.thread.start()
    warmed = _warm_up(table, follower, started, timeout_s)
    try:
        insert = sql.execute(INSERT)  # streaming: returns the JobClient of the running INSERT job
        print(f"[{time.monotonic() - started:5.1f}s] INSERT job {insert.get_job_id()} submitted", flush=True)
    except BaseException:
        follower.stop()
        raise
    follower.resume.set()
    store = table.store
    done = insert.get_job_execution_result()

    def check_insert() -> None:
        if done.done():
            try:
                done.result()
            except Exception as e:
                raise RuntimeError(f"the INSERT job failed: {_root_cause(e)}") from e

    _follow(
        follower,
        started,
        timeout_s,
        lambda: store.snapshot_manager.latest_id(),
        check_insert,
        span=max(1.0, checkpoint_s),
    )
    done.result()
    snaps = [s for s in table.refresh().snapshots() if s.id > warmed]
    kinds = Counter(s.commit_kind for s in snaps)
    print(
        f"[{time.monotonic() - started:5.1f}s] INSERT job finished: {len(snaps)} snapshots "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); streaming read stopped"
    )
    print(_comparison(follower.freshness, consistency if kafka else None, checkpoint_s))

    sql.execute("SET 'execution.runtime-mode' = 'batch'")
    with sql.execute(SUMMARY).collect() as it:
        summary = sorted(tuple(r) for r in it)
    print(f"[{time.monotonic() - started:5.1f}s] batch query, totals per day:")
    _print_table(
        pa.table({n: [r[i] for r in summary] for i, n in enumerate(["dt", "customers", "orders", "amount"])})
    )

    per_day: dict[str, list[Any]] = {}
    for (dt, _), (n, amount, _last) in expected.items():
        agg = per_day.setdefault(dt, [dt, 0, 0, Decimal(0)])
        agg[1] += 1
        agg[2] += n
        agg[3] += amount
    want_summary = sorted(tuple(v) for v in per_day.values())
    got_rows = table.refresh().to_arrow().to_pylist()
    got: Totals = {(r["dt"], r["customer"]): (r["orders"], r["amount"], r["last_order"]) for r in got_rows}
    ok = got == expected and len(got_rows) == len(expected) and summary == want_summary
    if ok:
        read = " and its log" if kafka else ""
        print(
            f"OK: {len(expected)} customers, {orders} orders, the table{read}, the streaming read and the "
            f"batch query match the generated changelog ({time.monotonic() - started:.1f} s)"
        )
    else:
        wrong = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
        print(
            f"MISMATCH: {len(wrong)} keys differ, e.g. {wrong[:3]}; batch query {summary} "
            f"expected {want_summary}",
            file=sys.stderr,
        )
    return ok


def _comparison(freshness: Freshness, consistency: Optional[str], checkpoint_s: float) -> str:
    """The final line: the latency of each path of the streaming read, side by side, over the
    updates made after start-up (:meth:`Freshness.steady`)."""
    steady = {p: freshness.steady(p) for p in freshness.rows}

    def figures(values: list[float]) -> str:
        return f"{_ms(values, 50):.2f} / {_ms(values, 95):.2f} / {max(values):.2f} s" if values else "-"

    parts = []
    if "log" in steady:
        parts.append(f"Kafka log ({consistency}) {figures(steady['log'])}")
    parts.append(f"files only {figures(steady['files'])}")
    n = max(len(v) for v in steady.values())
    text = (
        f"latency, order made -> visible in the streaming read (p50 / p95 / max over {n} updates after "
        "start-up): " + "; ".join(parts) + f" (commits every {checkpoint_s:g} s)"
    )
    if steady.get("log") and steady["files"]:
        ratio = _ms(steady["files"], 50) / max(_ms(steady["log"], 50), 1e-3)
        text += f"; the log is {ratio:.1f}x fresher at p50"
    return text


class _TransientKafkaWarnings(logging.Filter):
    """The clients' warnings that a broker which has just started is still loading its coordinators
    (librdkafka retries on its own): the job starts its broker right before it writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Coordinator load in progress" not in record.getMessage()


class _Kafka:
    """The job's Kafka broker: started in a thread (while Flink starts), stopped at the end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.broker: Any = None
        self.servers: Optional[str] = None
        self.error: Optional[BaseException] = None
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._start, name="lakelog-kafka", daemon=True)

    def _start(self) -> None:
        from lakelog.jobs.kafka_broker import KafkaBroker

        t0 = time.monotonic()
        try:
            self.broker = KafkaBroker(self.folder)
            self.servers = self.broker.start(timeout=180.0).bootstrap_servers
        except BaseException as e:  # noqa: BLE001 - reported by bootstrap()
            self.error = e
        self.seconds = time.monotonic() - t0

    def bootstrap(self) -> str:
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(
                f"the Kafka broker did not start: {self.error} (--no-log runs the job without the log)"
            ) from self.error
        assert self.servers is not None
        return self.servers

    def stop(self) -> None:
        self.thread.join()
        if self.broker is not None:
            with contextlib.suppress(Exception):  # best effort at the end of the run
                self.broker.stop(timeout=15.0)


def java_for_kafka() -> tuple[bool, str]:
    """(whether a Java that runs Kafka's broker is here, what was found)."""
    import subprocess

    from lakelog.jobs.kafka_broker import KafkaBrokerError, find_java

    try:
        java = find_java()
    except KafkaBrokerError as e:
        return False, str(e)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{java} -version failed: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        return True, java  # an unusual banner: let the broker try
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < KAFKA_JAVA:
        return (
            False,
            f"{java} is Java {major}; the Kafka {_kafka_version()} broker needs Java {KAFKA_JAVA} or newer",
        )
    return True, java


def _kafka_version() -> str:
    from lakelog.jobs.kafka_broker import KAFKA_VERSION

    return KAFKA_VERSION


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lakelog.jobs.pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--warehouse", help="warehouse directory (default: a temporary one, removed afterwards)")
    p.add_argument("--orders", type=count_arg(1), default=3000, help="orders to generate (default 3000)")
    p.add_argument("--rate", type=count_arg(1), default=200, help="orders per second (default 200)")
    p.add_argument(
        "--parallelism",
        type=count_arg(0),
        default=1,
        help="job parallelism (default 1: the data is small; 0 = parallelism.default of the configuration)",
    )
    p.add_argument(
        "--conf-dir", help="Flink configuration directory (default: $FLINK_CONF_DIR, else flink-conf/)"
    )
    p.add_argument("--timeout", type=seconds_arg, default=240.0, help="give up after this many seconds")
    p.add_argument(
        "--checkpoint-interval",
        type=seconds_arg,
        default=5.0,
        help="seconds between the INSERT job's checkpoints, i.e. its commits (default 5; the file "
        "path's freshness follows them, the log's does not)",
    )
    p.add_argument(
        "--log-consistency",
        choices=["eventual", "transactional"],
        default="eventual",
        help="the Kafka log's 'log.consistency' (default eventual: changes reach the log as written)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--kafka", metavar="HOST:PORT", help="use this Kafka broker instead of starting one")
    where.add_argument("--no-log", action="store_true", help="no Kafka log: the file-only path alone")
    args = p.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress lines appear as they happen, also in pipes
    if args.orders < 1 or args.rate < 1 or args.checkpoint_interval <= 0:
        p.error("--orders, --rate and --checkpoint-interval must be positive")
    tmp = tempfile.mkdtemp(prefix="lakelog-pipeline-")
    warehouse = args.warehouse
    if not warehouse:
        warehouse = os.path.join(tmp, "warehouse")
    # this process's temporary files (the sink's commit channel folder, the broker's folder) go
    # there too, so that nothing of the run outlives it
    tempfile.tempdir = tmp
    kafka: Optional[_Kafka] = None
    servers: Optional[str] = args.kafka
    if servers is None and not args.no_log:
        usable, found = java_for_kafka()
        if usable:
            kafka = _Kafka(os.path.join(tmp, "kafka"))
            kafka.thread.start()
            print(
                f"starting a Kafka {_kafka_version()} broker (jars cached under ~/.cache/lakelog) ...",
                flush=True,
            )
        else:
            print(f"no Kafka log: {found}; the streaming read follows the files only", flush=True)
    try:
        if kafka is not None:
            servers = kafka.bootstrap()
            logging.getLogger("lakelog.kafka.client").addFilter(_TransientKafkaWarnings())
            print(f"Kafka broker ready at {servers} ({kafka.seconds:.1f} s)", flush=True)
        ok = run(
            os.path.abspath(warehouse),
            orders=args.orders,
            rate=args.rate,
            parallelism=args.parallelism,
            conf_dir=args.conf_dir,
            timeout_s=args.timeout,
            kafka=servers,
            consistency=args.log_consistency,
            checkpoint_ms=int(args.checkpoint_interval * 1000),
        )
    except (LakelogError, RuntimeError, TimeoutError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        ok = False
    finally:
        if kafka is not None:
            kafka.stop()
        tempfile.tempdir = None
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
