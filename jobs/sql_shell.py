"""``lakelog sql`` without ``-f``: an interactive prompt like Flink's SQL client.

Statements end with ``;`` and may span lines; results print as tables (a streaming query prints
its changes as they come, with an ``op`` column, until it ends or Ctrl-C stops it); a streaming
``INSERT`` is submitted and runs in the background while the shell lives. ``HELP``, ``QUIT`` /
``EXIT``; the input history is kept in ``~/.lakelog_sql_history`` (when ``readline`` is there).
Errors print as a few lines (``--verbose``: with the full Flink stack) and the shell goes on.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, Optional, TextIO

from lakelog.operators.sql.errors import describe_error
from lakelog.operators.sql.lexer import split_statements, tokenize
from lakelog.operators.sql.results import SqlResult, cell_text, format_table

__all__ = ["Shell", "statements_of"]

HISTORY = os.path.expanduser("~/.lakelog_sql_history")
HELP = """Statements end with ';' and may span lines. Flink SQL plus, on lakelog catalogs:
  CREATE CATALOG c WITH ('type'='lakelog', 'warehouse'='/path');  USE CATALOG c;
  CREATE/ALTER/DROP TABLE ..., INSERT INTO/OVERWRITE ..., DELETE, UPDATE, TRUNCATE TABLE;
  SELECT ... FROM t [FOR SYSTEM_TIME AS OF TIMESTAMP '...'];  SELECT * FROM t$snapshots;
  CALL sys.compact('db.t');  SHOW PROCEDURES;  SET 'key' = 'value';  RESET 'key';
QUIT or EXIT leaves. See the README's SQL table for what lakelog supports."""


def statements_of(buffer: str) -> tuple[list[str], str]:
    """The complete statements in ``buffer`` (each ended by a ``;`` outside quotes and comments)
    and the rest, still being typed."""
    last = -1
    for tok in tokenize(buffer):
        if tok.kind == "sym" and tok.text == ";":
            last = tok.end
    if last < 0:
        return [], buffer
    return split_statements(buffer[:last]), buffer[last:]


class Shell:
    """The prompt loop over a :class:`~lakelog.operators.sql.runner.LakelogSql` session."""

    def __init__(
        self,
        sql: Any,
        *,
        verbose: bool = False,
        out: Optional[TextIO] = None,
        err: Optional[TextIO] = None,
        read: Optional[Callable[[str], str]] = None,
    ) -> None:
        self.sql = sql
        self.verbose = verbose
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._read = read or input
        self._history = read is None and _setup_history()

    def run(self) -> int:
        """Read and run statements until QUIT/EXIT or end of input; 0."""
        print(
            "lakelog SQL: Flink SQL on lakelog tables. End statements with ';'; HELP; for help.",
            file=self.out,
        )
        buffer = ""
        try:
            while True:
                try:
                    line = self._read("Flink SQL> " if not buffer.strip() else "> ")
                except EOFError:
                    print(file=self.out)
                    return 0
                except KeyboardInterrupt:
                    print(file=self.out)
                    buffer = ""
                    continue
                stmts, buffer = statements_of(buffer + line + "\n")
                for stmt in stmts:
                    if stmt.strip().upper() in ("QUIT", "EXIT"):
                        return 0
                    self.run_statement(stmt)
        finally:
            if self._history:
                _save_history()

    def run_statement(self, stmt: str) -> None:
        if stmt.strip().upper() == "HELP":
            print(HELP, file=self.out)
            return
        try:
            res = self.sql.execute(stmt)
            self._show(res)
        except KeyboardInterrupt:
            print("[INFO] cancelled", file=self.out)
        except Exception as e:  # noqa: BLE001 - the shell reports every error and goes on
            print(f"[ERROR] {describe_error(e, verbose=self.verbose)}", file=self.err, flush=True)

    def _show(self, res: Any) -> None:
        if res is None:
            print("[INFO] Execute statement succeeded.", file=self.out)
            return
        if isinstance(res, SqlResult):
            print(res.text(), file=self.out, flush=True)
            return
        if hasattr(res, "get_job_id") and not hasattr(res, "collect"):  # a JobClient
            print(f"[INFO] Job {res.get_job_id()} submitted; it runs while the shell is open.", file=self.out)
            return
        self._print_table_result(res)

    def _print_table_result(self, res: Any) -> None:
        """A Flink ``TableResult``: an ``OK`` for statements, rows for queries (streamed with their
        kinds when the result is a changelog)."""
        from pyflink.table import ResultKind

        if res.get_result_kind() != ResultKind.SUCCESS_WITH_CONTENT:
            print("[INFO] Execute statement succeeded.", file=self.out)
            return
        names = list(res.get_table_schema().get_field_names())
        job = res.get_job_client()
        if job is None:  # a statement's content (SHOW, DESCRIBE): no job behind it
            with res.collect() as it:
                print(format_table(names, [tuple(r) for r in it]), file=self.out, flush=True)
            return
        streaming = str(self.sql.mode) == "streaming"
        with res.collect() as it:
            if not streaming:
                print(format_table(names, [tuple(r) for r in it]), file=self.out, flush=True)
                return
            self._stream(names, it)

    def _stream(self, names: list[str], rows: Iterator[Any]) -> None:
        """Print a streaming query's changes as they arrive, one line each (Ctrl-C stops it)."""
        print(" | ".join(["op", *names]), file=self.out, flush=True)
        count = 0
        try:
            for r in rows:
                op = r.get_row_kind().short_string() if hasattr(r, "get_row_kind") else "+I"
                print(" | ".join([op, *map(cell_text, r)]), file=self.out, flush=True)
                count += 1
        except KeyboardInterrupt:
            print(f"[INFO] query stopped after {count} change(s)", file=self.out)
            return
        print(f"[INFO] {count} change(s); the query ended", file=self.out)


def _setup_history() -> bool:
    try:
        import readline
    except ImportError:  # pragma: no cover - no readline on this platform
        return False
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)
    readline.set_history_length(1000)
    return True


def _save_history() -> None:
    try:
        import readline

        readline.write_history_file(HISTORY)
    except (ImportError, OSError):  # pragma: no cover
        pass
