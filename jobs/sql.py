"""``lakelog sql``: run a Flink SQL script over lakelog tables.

``lakelog sql -f script.sql`` (= ``python -m lakelog.jobs.sql -f script.sql``) runs the script on a
local MiniCluster, ``... --remote [host:port]`` on a running cluster, and ``flink run -py jobs/sql.py
-f script.sql`` through Flink's CLI. Settings come from the Flink configuration directory
(``--conf-dir``, ``$FLINK_CONF_DIR`` or the repository's ``flink-conf/``; see
:mod:`lakelog.operators.flink_env`). The statements run through
:class:`lakelog.operators.sql.LakelogSql`, which says what lakelog adds to Flink SQL.

This module only parses arguments and runs the script. ``flink run -py`` runs it as a file, by an
interpreter that may lack lakelog: the imports below say so instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from typing import Optional

try:
    from lakelog.connector.errors import LakelogError, OptionError
except ImportError as _e:  # pragma: no cover - run as a file by an interpreter without lakelog
    if __name__ != "__main__":
        raise
    raise SystemExit(
        f"{sys.executable} cannot import lakelog ({_e}); install it: pip install -e '<repo>[flink]'"
    ) from _e

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``lakelog sql -f script.sql [--mode batch|streaming] [--parallelism N] [--conf-dir DIR]
    [--remote [HOST:PORT]] [--detached]``."""
    p = argparse.ArgumentParser(prog="lakelog sql", description="Run a Flink SQL script over lakelog tables")
    p.add_argument("-f", "--file", required=True, help="SQL script (statements separated by ';')")
    p.add_argument(
        "--mode",
        default=None,
        choices=["streaming", "batch"],
        help="runtime mode (default: execution.runtime-mode of the Flink configuration)",
    )
    p.add_argument("--parallelism", type=int, default=None)
    p.add_argument("--checkpoint-interval-ms", type=int, default=None)
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
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--"]:  # `flink run -py jobs/sql.py -- -f x.sql` may pass the separator on
        args_in = args_in[1:]
    args = p.parse_args(args_in)
    if importlib.util.find_spec("pyflink") is None:
        print("lakelog sql: runs Flink: install the flink extra ('lakelog[flink]')", file=sys.stderr)
        return 2
    from lakelog.operators.flink_env import is_remote, load_settings
    from lakelog.operators.sql.runner import LakelogSql

    try:
        settings = load_settings(args.conf_dir, remote=args.remote)
        if args.detached and not is_remote(settings):
            raise OptionError("--detached needs a remote cluster (--remote or execution.target: remote)")
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
        sql = LakelogSql(
            args.mode,
            parallelism=args.parallelism,
            checkpoint_interval_ms=args.checkpoint_interval_ms,
            config=settings,
        )
        sql.run_script(text, wait=not args.detached)
    except (LakelogError, OSError) as e:
        print(f"lakelog sql: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if not __package__:
        # run as a file (`flink run -py jobs/sql.py`, `python jobs/sql.py`): use the installed package's
        # module, so that nothing the job ships to Python workers refers to this __main__ copy
        from lakelog.jobs.sql import main as _installed_main

        sys.exit(_installed_main())
    sys.exit(main())
