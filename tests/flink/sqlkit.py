"""Helpers of the Flink SQL tests: a session, its rows, and a look at the warehouse from a new
process (what a later session, or another engine, would see)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any, Optional, Union

from tests.flink.conftest import REPO_CONF_DIR


def session(mode: str = "batch", **kwargs: Any) -> Any:
    """A :class:`LakelogSql` on the repository's configuration, without restarts (a failing job
    fails once)."""
    from lakelog.operators.flink_env import load_settings
    from lakelog.operators.sql import LakelogSql

    config = load_settings(REPO_CONF_DIR)
    config["restart-strategy.type"] = "none"
    kwargs.setdefault("parallelism", 1)
    return LakelogSql(mode, config=config, **kwargs)


def rows(result: Any) -> list[tuple[Any, ...]]:
    """A result's rows, sorted (a Flink TableResult or a SqlResult)."""
    if hasattr(result, "rows"):
        return sorted(result.rows, key=repr)
    with result.collect() as it:
        return sorted((tuple(r) for r in it), key=repr)


def stream_changes(
    res: Any,
    until: Union[int, Callable[[list[tuple[str, tuple[Any, ...]]]], bool]],
    seconds: float = 90,
    *,
    then: Optional[tuple[int, Callable[[], Any]]] = None,
) -> list[tuple[str, tuple[Any, ...]]]:
    """The changes (RowKind name, values) of a streaming query's result ``res``, until there are
    ``until`` of them or ``until(changes so far)`` holds; a query that stalls is cancelled after
    ``seconds`` and what came back is returned (the caller's assertion says what was missing).
    ``then = (k, f)``: call ``f()`` once the k-th change is in."""
    import threading

    got: list[tuple[str, tuple[Any, ...]]] = []
    done = (lambda g: len(g) == until) if isinstance(until, int) else until
    timer = threading.Timer(seconds, lambda: res.get_job_client().cancel())
    timer.start()
    try:
        with res.collect() as it:
            for r in it:
                got.append((r.get_row_kind().name, tuple(r)))
                if then is not None and len(got) == then[0]:
                    then[1]()
                if done(got):
                    break
    except Exception:  # cancelled: the caller's assertion says what was seen
        pass
    finally:
        timer.cancel()
    return got


def query(sql: Any, text: str) -> list[tuple[Any, ...]]:
    return rows(sql.execute(text))


def inspect(warehouse: str, code: str) -> Any:
    """Run ``code`` in a new Python process with ``cat = lakelog.Catalog(warehouse)``; it assigns
    ``out``, which comes back through JSON."""
    program = f"import json, lakelog\ncat = lakelog.Catalog({warehouse!r})\nout = None\n"
    program += textwrap.dedent(code) + "\nprint(json.dumps(out, default=str))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYFLINK_GATEWAY")}
    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def refused(sql: Any, stmt: str, match: Optional[str] = None) -> str:
    """The one-line message ``stmt`` fails with (a lakelog error naming the statement)."""
    from lakelog.connector.errors import LakelogError
    from lakelog.operators.sql.errors import describe_error

    try:
        sql.execute(stmt)
    except LakelogError as e:
        text = describe_error(e)
        assert "\n" not in text.strip(), text
        if match is not None:
            assert match in text, text
        return text
    raise AssertionError(f"{stmt!r} did not fail")
