"""Processes for the JDBC catalog's concurrency tests: ``python -m tests.jdbc_workers <command>
<json>``, where the JSON holds ``warehouse``, ``options`` (the catalog options) and the command's
own arguments. Each prints one line per event and flushes, so the test can follow it.

* ``hold``: take the commit lock of table ``table``; print ``held``; then obey stdin lines:
  ``check`` prints ``lost <True|False>``, ``release`` leaves the lock and prints ``released``.
  With ``pickled`` (a file holding a pickled ``TableStore``), the store's own lock instead, as a
  Flink worker would get it: no catalog is opened. With ``adopt`` (a file holding a pickled
  ``(table path, lock)``, as a job ships them), the lock of the table opened by path after
  :func:`~lakelog.operators.table_ref.adopt_lock`, as a job's committer opens it.
* ``create``: wait until wall time ``at``, create table ``table``; print ``won`` or ``exists``.
* ``drop``: wait until ``at``, drop table ``table``; print ``dropped`` or ``missing``.
* ``commit``: write ``commits`` one-row commits with ids ``base + i`` into ``table``; print
  ``done <seconds>``.
* ``lockloop``: take and leave the commit lock of ``table`` ``times`` times; print ``done <seconds>``.
"""

from __future__ import annotations

import json
import pickle
import sys
import time
from typing import Any

import pyarrow as pa

import lakelog
from lakelog.connector.errors import TableAlreadyExistsError, TableNotFoundError

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("writer", pa.int64())])


def _say(*words: Any) -> None:
    print(*words, flush=True)


def _wait_until(at: float) -> None:
    while time.time() < at:
        time.sleep(max(0.0, min(0.01, at - time.time())))


def _hold(sm: Any) -> None:
    with sm.lock() as hold:
        _say("held")
        for line in sys.stdin:
            if line.strip() == "check":
                _say("lost", hold.lost())
            elif line.strip() == "release":
                break
    _say("released")


def main(command: str, args: dict[str, Any]) -> None:
    if command == "hold" and args.get("pickled"):
        with open(args["pickled"], "rb") as f:
            sm = pickle.load(f).snapshot_manager
        _hold(sm)
        return
    if command == "hold" and args.get("adopt"):
        from lakelog.connector.format.store import TableStore
        from lakelog.operators.table_ref import adopt_lock

        with open(args["adopt"], "rb") as f:
            path, lock = pickle.load(f)
        adopt_lock(path, lock)
        _hold(TableStore(path).snapshot_manager)
        return
    cat = lakelog.Catalog(args["warehouse"], options=args["options"])
    if command == "hold":
        _hold(cat.get_table(args["table"]).store.snapshot_manager)
    elif command == "create":
        _wait_until(args["at"])
        try:
            cat.create_table(args["table"], SCHEMA, primary_key=["id"])
            _say("won")
        except TableAlreadyExistsError:
            _say("exists")
    elif command == "drop":
        _wait_until(args["at"])
        try:
            cat.drop_table(args["table"])
            _say("dropped")
        except TableNotFoundError:
            _say("missing")
    elif command == "commit":
        t = cat.get_table(args["table"])
        _wait_until(args.get("at", 0))
        start = time.perf_counter()
        for i in range(args["commits"]):
            t.write(pa.table({"id": [args["base"] + i], "writer": [args["writer"]]}, schema=SCHEMA))
        _say("done", round(time.perf_counter() - start, 3))
    elif command == "lockloop":
        sm = cat.get_table(args["table"]).store.snapshot_manager
        _wait_until(args.get("at", 0))
        start = time.perf_counter()
        for _ in range(args["times"]):
            with sm.lock():
                pass
        _say("done", round(time.perf_counter() - start, 3))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
