"""``lakelog sql``: run a Flink SQL script over lakelog tables, or type statements at a prompt.

``lakelog sql -f script.sql`` (= ``python -m lakelog.jobs.sql -f script.sql``) runs the script on a
local MiniCluster, ``... --remote [host:port]`` on a running cluster, and ``flink run -py jobs/sql.py
-f script.sql`` through Flink's CLI; ``lakelog sql`` alone opens an interactive prompt
(:mod:`lakelog.jobs.sql_shell`). An error prints as a few lines, its root cause (``--verbose``: with
Flink's full stack); the JVM's and the Python workers' own output goes to a log file unless
``--verbose``. Settings come from the Flink configuration directory
(``--conf-dir``, ``$FLINK_CONF_DIR`` or the repository's ``flink-conf/``; see
:mod:`lakelog.operators.flink_env`). The statements run through
:class:`lakelog.operators.sql.LakelogSql`, which says what lakelog adds to Flink SQL.

This module only parses arguments and runs the script. ``flink run -py`` runs it as a file, by an
interpreter that may lack lakelog: the imports below say so instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Optional, TextIO

try:
    from lakelog.connector.errors import LakelogError, OptionError
    from lakelog.jobs.cli import count_arg
except ImportError as _e:  # pragma: no cover - run as a file by an interpreter without lakelog
    if __name__ != "__main__":
        raise
    raise SystemExit(
        f"{sys.executable} cannot import lakelog ({_e}); install it: pip install -e '<repo>[flink]'"
    ) from _e

__all__ = ["main"]


@contextlib.contextmanager
def _quiet_stderr(log_path: str) -> Iterator[TextIO]:
    """Send file descriptor 2 (inherited by the JVM and its Python workers, whose logs and
    tracebacks would flood the terminal) to ``log_path``; yield a stream on the original stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    original = os.fdopen(os.dup(saved), "w", buffering=1)
    try:
        yield original
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        original.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``lakelog sql [-f script.sql] [--mode batch|streaming] [--parallelism N] [--conf-dir DIR]
    [--remote [HOST:PORT]] [--detached] [--verbose]``; without ``-f`` an interactive prompt."""
    p = argparse.ArgumentParser(prog="lakelog sql", description="Run Flink SQL over lakelog tables")
    p.add_argument("-f", "--file", help="SQL script (statements separated by ';'); without it: a prompt")
    p.add_argument(
        "--mode",
        default=None,
        choices=["streaming", "batch"],
        help="runtime mode (default: execution.runtime-mode of the Flink configuration)",
    )
    p.add_argument("--parallelism", type=count_arg(1), default=None)
    p.add_argument("--checkpoint-interval-ms", type=count_arg(1), default=None)
    p.add_argument(
        "--conf-dir",
        default=None,
        help="Flink configuration directory (default: $FLINK_CONF_DIR, else the repository's flink-conf/)",
    )
    p.add_argument(
        "--remote",
        nargs="?",
        const=True,
        default=None,
        metavar="HOST:PORT",
        help="submit to a running cluster (default: rest.address:rest.port of the configuration)",
    )
    p.add_argument(
        "--detached",
        action="store_true",
        help="with a remote cluster: submit streaming INSERT jobs and exit without waiting",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="errors with Flink's full stack; the JVM's and workers' output on the terminal",
    )
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--"]:  # `flink run -py jobs/sql.py -- -f x.sql` may pass the separator on
        args_in = args_in[1:]
    args = p.parse_args(args_in)
    if importlib.util.find_spec("pyflink") is None:
        print("lakelog sql: runs Flink: install the flink extra ('lakelog[flink]')", file=sys.stderr)
        return 2
    if args.verbose:
        code, message = _run(args, sys.stderr, None)
    else:
        log_path = os.path.join(tempfile.gettempdir(), f"lakelog-sql-{os.getpid()}.log")
        with _quiet_stderr(log_path) as err:
            code, message = _run(args, err, log_path)
    if message:
        print(message, file=sys.stderr, flush=True)
    return code


def _run(args: argparse.Namespace, err: TextIO, log_path: Optional[str]) -> tuple[int, Optional[str]]:
    """Run the script or the prompt: (exit status, the message of the error that ended it)."""
    from lakelog.operators.flink_env import is_remote, load_settings
    from lakelog.operators.sql.errors import FlinkError, describe_error
    from lakelog.operators.sql.runner import LakelogSql

    try:
        settings = load_settings(args.conf_dir, remote=args.remote)
        if args.detached and not is_remote(settings):
            raise OptionError("--detached needs a remote cluster (--remote or execution.target: remote)")
        text = None
        if args.file:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        sql = LakelogSql(
            args.mode,
            parallelism=args.parallelism,
            checkpoint_interval_ms=args.checkpoint_interval_ms,
            config=settings,
        )
        if text is None:
            from lakelog.jobs.sql_shell import Shell

            return Shell(sql, verbose=args.verbose, err=err).run(), None
        sql.run_script(text, wait=not args.detached)
    except Exception as e:  # noqa: BLE001 - every error ends the script with its root cause
        from_flink = isinstance(e, FlinkError) or not isinstance(e, LakelogError)
        where = ""
        if log_path and from_flink:
            where = f" (JVM and worker output: {log_path}; --verbose shows all)"
        code = 2 if isinstance(e, (LakelogError, OSError)) else 1
        return code, f"lakelog sql: {describe_error(e, verbose=args.verbose)}{where}"
    return 0, None


if __name__ == "__main__":
    if not __package__:
        # run as a file (`flink run -py jobs/sql.py`, `python jobs/sql.py`): use the installed package's
        # module, so that nothing the job ships to Python workers refers to this __main__ copy
        from lakelog.jobs.sql import main as _installed_main

        sys.exit(_installed_main())
    sys.exit(main())
