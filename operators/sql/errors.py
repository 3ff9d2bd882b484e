"""Errors of the SQL wrapper, and any error as a few lines: the root cause of a Flink (Java) error,
the message of a lakelog one. No pyflink (Java errors are read from their text).

A Java error reaches Python as a py4j error or as PyFlink's ``JavaException`` whose text is the
whole Java stack: ``<class>: <message>``, ``\\tat ...`` frames and ``Caused by: ...`` sections. The
root cause is the last ``Caused by`` (or the first line when there is none); when it carries a
Python traceback (an error raised in a Python worker) the traceback's last line is the cause.
"""

from __future__ import annotations

import re
import traceback
from typing import Optional

from lakelog.connector.errors import LakelogError

__all__ = [
    "SqlError",
    "UnsupportedStatementError",
    "FlinkError",
    "message_of",
    "root_cause",
    "describe_error",
    "flink_error",
]


class SqlError(LakelogError):
    """A statement failed; the message names the statement."""


class UnsupportedStatementError(SqlError):
    """A statement that touches a lakelog table or catalog and that lakelog does not support; it
    fails before any job starts."""


class FlinkError(SqlError):
    """Flink refused a statement or a job failed: the root cause, with Flink's full text kept in
    :attr:`details`."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


_CLASS_LINE = re.compile(r"^(?:Caused by: )?([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\s?(.*))?$")
_PY_ERROR = re.compile(r"^([A-Za-z_][\w.]*):\s?(.*)$")
_MAX_LINES = 6


def message_of(e: BaseException) -> str:
    """An exception's message (the plain text for KeyError-based errors, which quote it)."""
    if len(e.args) == 1 and isinstance(e.args[0], str):
        return e.args[0]
    return str(e)


def _sections(text: str) -> list[list[str]]:
    """The stack text split into its exception sections (first line + continuation lines)."""
    out: list[list[str]] = []
    lines = text.splitlines()
    if lines and lines[0].startswith("An error occurred while calling"):  # py4j's preamble
        lines = lines[1:]
        if lines and lines[0].startswith(": "):
            lines[0] = lines[0][2:]
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("at ") or stripped.startswith("... ") or not stripped:
            if out and out[-1] and not out[-1][-1].startswith("\tat"):
                out[-1].append("\tat")  # marks the end of the message lines
            continue
        if line.startswith("Caused by: ") or (not out and _CLASS_LINE.match(line)):
            out.append([line[len("Caused by: ") :] if line.startswith("Caused by: ") else line])
        elif out and out[-1][-1] != "\tat":
            out[-1].append(line)
        elif not out:
            out.append([line])
    return [[x for x in s if x != "\tat"] for s in out]


def root_cause(text: str) -> str:
    """The root cause of a Java stack text, as ``SimpleName: message`` (a few lines at most)."""
    sections = _sections(text)
    if not sections:
        return text.strip()
    lines = sections[-1]
    if any("Traceback (most recent call last)" in x for x in lines):
        # a Python worker's error: the traceback's last unindented line
        py = [m for m in (_PY_ERROR.match(x) for x in lines[1:] if x[:1] not in (" ", "\t")) if m]
        if py:
            name, msg = py[-1].group(1), py[-1].group(2)
            return f"{name.rsplit('.', 1)[-1]}: {_unquote(msg)}".strip()
    m = _CLASS_LINE.match(lines[0])
    first = lines[0]
    if m:
        first = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2) or ''}".strip()
    body = [first, *lines[1:]]
    if len(body) > _MAX_LINES:
        body = body[:_MAX_LINES] + ["..."]
    return "\n".join(body).rstrip()


def _unquote(msg: str) -> str:
    """A KeyError-based error's message printed with quotes: without them."""
    if len(msg) >= 2 and msg[0] == msg[-1] and msg[0] in "'\"":
        return msg[1:-1]
    return msg


def _java_text(e: BaseException) -> Optional[str]:
    """The Java stack text of a py4j or PyFlink Java error (or of the error it was raised from)."""
    for x in (e, e.__cause__, e.__context__):
        if x is None:
            continue
        stack = getattr(x, "stack_trace", None)
        if isinstance(stack, str):
            return stack
        if type(x).__name__ == "Py4JJavaError":
            return str(x)
    return None


def describe_error(e: BaseException, *, verbose: bool = False) -> str:
    """``e`` as a few lines: a lakelog error's message, a Java error's root cause, any other error's
    type and message; with ``verbose`` the full Java stack or Python traceback follows."""
    if isinstance(e, FlinkError):
        text = message_of(e)
        return text + (f"\n\n{e.details}" if verbose and e.details else "")
    java = _java_text(e)
    if java is not None:
        text = root_cause(java)
        return text + (f"\n\n{java}" if verbose else "")
    text = message_of(e) if isinstance(e, LakelogError) else f"{type(e).__name__}: {message_of(e)}"
    if verbose:
        text += "\n\n" + "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text


def flink_error(head: str, e: BaseException) -> Optional[FlinkError]:
    """A :class:`FlinkError` for statement ``head`` when ``e`` is a Java error, else None."""
    java = _java_text(e)
    if java is None:
        return None
    return FlinkError(f"{head}: {root_cause(java)}", java)
