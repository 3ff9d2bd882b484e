"""The main PyFlink job: a changelog streams into a partitioned primary-key lakelog table while a
streaming read of the same table prints what arrives; a batch query then checks the result.

Run: ``python -m lakelog.jobs.pipeline [--warehouse DIR] [--orders N] [--rate R] [--conf-dir DIR]``

Everything is embedded: a local MiniCluster (settings from ``flink-conf/config.yaml`` or
``$FLINK_CONF_DIR``; see :mod:`lakelog.operators.flink_env`) and a local warehouse (default: a temporary
folder, removed afterwards). Three Flink jobs, all through the SQL wrapper
(:class:`lakelog.operators.sql.LakelogSql`):

1. ``SELECT * FROM lk.shop.customer_totals`` in streaming mode, submitted first: it follows the
   table's snapshots and receives their changes (``+I`` for a new customer, ``-U``/``+U`` for a
   changed one); the job prints one line per burst of changes (about one per checkpoint) and stops
   the query once its materialised view holds the final totals.
2. ``INSERT INTO lk.shop.customer_totals SELECT dt, customer, COUNT(*), SUM(amount), MAX(seq) ...
   GROUP BY dt, customer`` over a bounded ``datagen`` sequence of orders: the aggregation emits a
   primary-key changelog (``+I`` for a new customer, then ``-U``/``+U`` for every later order); the
   SQL wrapper passes its upserts (``+I``/``+U``; ``-U`` is dropped for a deduplicating table, as
   Paimon's Flink sink does) to the lakelog sink, which commits at every checkpoint.
3. ``SET 'execution.runtime-mode' = 'batch'`` and a ``GROUP BY dt`` query: printed, and compared
   with the totals computed here from the generator's formula, like the table itself (``OK``).
"""

from __future__ import annotations

import argparse
import contextlib
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

__all__ = ["expected_totals", "run", "main", "TABLE", "DAYS", "CUSTOMERS"]

TABLE = "shop.customer_totals"
DAYS = 3  # partitions: 2024-06-01 .. 2024-06-03
CUSTOMERS = 7  # DAYS * CUSTOMERS primary keys (3 and 7 are coprime: every pair occurs)

DDL = """
CREATE CATALOG lk WITH ('type' = 'lakelog', 'warehouse' = '{warehouse}');
CREATE DATABASE IF NOT EXISTS lk.shop;
CREATE TABLE lk.shop.customer_totals (
  dt         STRING NOT NULL,
  customer   STRING NOT NULL,
  orders     BIGINT,
  amount     DECIMAL(12, 2),
  last_order BIGINT,
  PRIMARY KEY (dt, customer) NOT ENFORCED
) PARTITIONED BY (dt) WITH ('bucket' = '2');

-- a bounded generator: order number `seq` = 1..N, spread over {seconds} s
CREATE TEMPORARY TABLE order_events (seq BIGINT) WITH (
  'connector' = 'datagen', 'rows-per-second' = '{rate}', 'number-of-rows' = '{orders}',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '{orders}'
);
CREATE TEMPORARY VIEW orders AS
SELECT seq,
       CONCAT('2024-06-0', CAST(seq % {days} + 1 AS STRING)) AS dt,
       CONCAT('c', CAST(seq % {customers} AS STRING)) AS customer,
       CAST((seq * 37) % 10000 AS DECIMAL(12, 2)) / 100 AS amount
FROM order_events;
"""

INSERT = """
INSERT INTO lk.shop.customer_totals
SELECT dt, customer, COUNT(*), SUM(amount), MAX(seq) FROM orders GROUP BY dt, customer
"""

FOLLOW = "SELECT * FROM lk.shop.customer_totals /*+ OPTIONS('continuous.discovery-interval' = '500 ms') */"

SUMMARY = """
SELECT dt, COUNT(*) AS customers, SUM(orders) AS orders, SUM(amount) AS amount
FROM lk.shop.customer_totals GROUP BY dt
"""

_PAUSE = object()
Key = tuple[str, str]
Totals = dict[Key, tuple[int, Decimal, int]]  # (dt, customer) -> (orders, amount, last order)


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


@dataclass
class _Burst:
    kinds: Counter[str]
    keys: int
    orders: int


class _Follower:
    """Consumes the streaming SELECT in a thread, keeps the materialised view, and stops the
    query once the view equals ``expected`` (totals only grow, so that happens at the very end)."""

    def __init__(self, result: Any, expected: Totals) -> None:
        self.result = result
        self.expected = expected
        self.view: Totals = {}
        self.matching = 0
        self.events: queue.Queue[Optional[_Burst | BaseException]] = queue.Queue()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lakelog-follow", daemon=True)

    def _apply(self, kind: str, row: tuple[Any, ...]) -> None:
        key: Key = (row[0], row[1])
        before = self.view.get(key)
        if kind in ("-U", "-D"):
            self.view.pop(key, None)
        else:
            self.view[key] = (int(row[2]), Decimal(row[3]), int(row[4]))
        was, now = before == self.expected.get(key), self.view.get(key) == self.expected.get(key)
        self.matching += int(now) - int(was)

    def _run(self) -> None:
        short = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}
        try:
            with self.result.collect() as rows:
                for r in rows:
                    kind = short[r.get_row_kind().name]
                    self._apply(kind, tuple(r))
                    self.events.put(_Burst(Counter([kind]), len(self.view), self._orders()))
                    if self.matching == len(self.expected) and len(self.view) == len(self.expected):
                        self.done.set()
                        _quiet_cancelled_workers()
                        break  # leaving the with-block cancels the streaming query
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.events.put(e)
        finally:
            self.events.put(None)

    def stop(self) -> None:
        """Cancel the streaming query (after a failure elsewhere)."""
        _quiet_cancelled_workers()
        with contextlib.suppress(Exception):  # already finished or gone
            self.result.get_job_client().cancel()

    def _orders(self) -> int:
        return sum(v[0] for v in self.view.values())


class _CancelNoiseFilter:
    """``sys.stderr`` while the streaming query is being cancelled: its in-process Python workers
    (PyFlink's loopback mode) print the expected CANCELLED / channel-closed tracebacks of that
    cancellation; everything else passes through."""

    MARKERS = ("StatusCode.CANCELLED", "Multiplexer hanging up", "Channel closed prematurely", "_queue.Empty")

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if any(m in text for m in self.MARKERS):
            return len(text)
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
    found = re.findall(r"^\s*(?:Caused by: )?([\w.]*(?:Error|Exception): .+)$", text, re.M)
    return found[-1].strip() if found else (text.splitlines() or [type(e).__name__])[0][:300]


def _follow(follower: _Follower, started: float, timeout_s: float, latest: Any, check_insert: Any) -> None:
    """Print one line per burst of changes (a pause of 0.4 s ends a burst) until the follower is
    done; ``check_insert()`` raises when the INSERT job failed."""
    follower.thread.start()
    pending: Optional[_Burst] = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                ev: Any = follower.events.get(timeout=0.4)
            except queue.Empty:
                ev = _PAUSE
            if isinstance(ev, _Burst):
                if pending is None:
                    pending = ev
                else:
                    pending.kinds.update(ev.kinds)
                    pending.keys, pending.orders = ev.keys, ev.orders
                continue
            if pending is not None:
                kinds = "  ".join(f"{k} {pending.kinds.get(k, 0):>3}" for k in ("+I", "-U", "+U", "-D"))
                print(
                    f"[{time.monotonic() - started:5.1f}s] read  {kinds}   -> {pending.keys:>2} customers, "
                    f"{pending.orders:>5} orders  (table at snapshot {latest()})",
                    flush=True,
                )
                pending = None
            if isinstance(ev, BaseException):
                raise RuntimeError(f"the streaming read failed: {_root_cause(ev)}") from ev
            if ev is None:
                return
            check_insert()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the streaming read did not catch up within {timeout_s:.0f} s")
    except BaseException:
        follower.stop()
        raise


def run(
    warehouse: str,
    *,
    orders: int = 3000,
    rate: int = 200,
    parallelism: Optional[int] = 1,
    conf_dir: Optional[str] = None,
    timeout_s: float = 240.0,
) -> bool:
    """Run the three jobs on ``warehouse``; True when the table holds exactly the expected totals."""
    import lakelog
    from lakelog.operators.flink_env import load_settings
    from lakelog.operators.sql import LakelogSql

    started = time.monotonic()
    catalog = lakelog.Catalog(warehouse)
    if catalog.table_exists(TABLE):  # a previous run's table (--warehouse): start afresh
        catalog.drop_table(TABLE)
    expected = expected_totals(orders)
    sql = LakelogSql("streaming", config=load_settings(conf_dir), parallelism=parallelism or None)
    sql.run_script(
        DDL.format(
            warehouse=warehouse,
            rate=rate,
            orders=orders,
            days=DAYS,
            customers=CUSTOMERS,
            seconds=f"{orders / rate:.0f}",
        ),
        print_results=False,
    )
    table = catalog.get_table(TABLE)
    print(
        f"table {TABLE} at {table.path}: primary key {table.primary_keys}, partitioned by "
        f"{table.partition_keys}, {table.options.get('bucket')} buckets per partition"
    )
    print(
        f"streaming {orders} orders ({rate}/s) as per-customer totals, checkpoints every "
        f"{sql.env.get_checkpoint_config().get_checkpoint_interval() / 1000:g} s ...",
        flush=True,
    )

    # the streaming SELECT first, so that it is up and following when the first snapshot lands
    follower = _Follower(sql.execute(FOLLOW), expected)
    print(f"[{time.monotonic() - started:5.1f}s] streaming SELECT submitted", flush=True)
    insert = sql.execute(INSERT)  # streaming: returns the JobClient of the running INSERT job
    print(f"[{time.monotonic() - started:5.1f}s] INSERT job {insert.get_job_id()} submitted", flush=True)
    store = table.store
    done = insert.get_job_execution_result()

    def check_insert() -> None:
        if done.done():
            try:
                done.result()
            except Exception as e:
                raise RuntimeError(f"the INSERT job failed: {_root_cause(e)}") from e

    _follow(follower, started, timeout_s, lambda: store.snapshot_manager.latest_id(), check_insert)
    done.result()
    snaps = table.refresh().snapshots()
    kinds = Counter(s.commit_kind for s in snaps)
    print(
        f"[{time.monotonic() - started:5.1f}s] INSERT job finished: {len(snaps)} snapshots "
        f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); streaming read stopped"
    )

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
        print(
            f"OK: {len(expected)} customers, {orders} orders, the table and the batch query match "
            f"the generated changelog ({time.monotonic() - started:.1f} s)"
        )
    else:
        wrong = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
        print(
            f"MISMATCH: {len(wrong)} keys differ, e.g. {wrong[:3]}; batch query {summary} "
            f"expected {want_summary}",
            file=sys.stderr,
        )
    return ok


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lakelog.jobs.pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--warehouse", help="warehouse directory (default: a temporary one, removed afterwards)")
    p.add_argument("--orders", type=int, default=3000, help="orders to generate (default 3000)")
    p.add_argument("--rate", type=int, default=200, help="orders per second (default 200)")
    p.add_argument(
        "--parallelism",
        type=int,
        default=1,
        help="job parallelism (default 1: the data is small; 0 = parallelism.default of the configuration)",
    )
    p.add_argument(
        "--conf-dir", help="Flink configuration directory (default: $FLINK_CONF_DIR, else flink-conf/)"
    )
    p.add_argument("--timeout", type=float, default=240.0, help="give up after this many seconds")
    args = p.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress lines appear as they happen, also in pipes
    if args.orders < 1 or args.rate < 1:
        p.error("--orders and --rate must be positive")
    tmp = None
    warehouse = args.warehouse
    if not warehouse:
        tmp = tempfile.mkdtemp(prefix="lakelog-pipeline-")
        warehouse = os.path.join(tmp, "warehouse")
        # this process's temporary files (the sink's commit channel folder among them) go there too,
        # so that nothing of the run outlives it
        tempfile.tempdir = tmp
    try:
        ok = run(
            os.path.abspath(warehouse),
            orders=args.orders,
            rate=args.rate,
            parallelism=args.parallelism,
            conf_dir=args.conf_dir,
            timeout_s=args.timeout,
        )
    except (LakelogError, RuntimeError, TimeoutError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        ok = False
    finally:
        if tmp is not None:
            tempfile.tempdir = None
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
