"""Checks of the arguments of lakelog's Python API: the value as given, or an
:class:`~lakelog.connector.errors.ArgumentError` naming the argument.

Python would accept many wrong values silently (``True`` is the integer 1, ``int(1.5)`` is 1, a
string is a sequence of one-letter strings) or fail far from the call with an unrelated message
(a snapshot id ``"1"`` read as a damaged snapshot file). These helpers refuse them where the
argument enters: a wrong type raises :class:`~lakelog.connector.errors.ArgumentTypeError` (a
``TypeError`` and a ``ValueError``), a value out of range :class:`~lakelog.connector.errors.ArgumentError`
(a ``ValueError``).
"""

from __future__ import annotations

import datetime
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

from lakelog.connector.errors import ArgumentError, ArgumentTypeError

__all__ = [
    "integer",
    "optional_integer",
    "seconds",
    "flag",
    "text",
    "optional_text",
    "names",
    "mapping",
    "spec_list",
    "callback",
    "point_in_time",
]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_error(name: str, expected: str, value: Any) -> ArgumentTypeError:
    given = f"{type(value).__name__} {_shown(value)}"
    return ArgumentTypeError(f"argument {name!r} must be {expected}, not {given}")


def _is_integer(value: Any) -> bool:
    """Python and numpy integers; ``bool`` (and numpy's bool, which is no Integral) are not integers."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def integer(name: str, value: Any, *, minimum: Optional[int] = None) -> int:
    """``value`` as an ``int``: an integer (not a bool, float or string), at least ``minimum``."""
    if not _is_integer(value):
        raise _type_error(name, "an integer", value)
    out = int(value)
    if minimum is not None and out < minimum:
        raise ArgumentError(f"argument {name!r} must be at least {minimum}, not {out}")
    return out


def optional_integer(name: str, value: Any, *, minimum: Optional[int] = None) -> Optional[int]:
    """None, or :func:`integer`."""
    return None if value is None else integer(name, value, minimum=minimum)


def seconds(name: str, value: Any) -> float:
    """A duration in seconds: a finite number (not a bool or string) that is not negative."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_error(name, "a number of seconds", value)
    out = float(value)
    if not math.isfinite(out) or out < 0:
        raise ArgumentError(f"argument {name!r} must be a finite number of seconds >= 0, not {value!r}")
    return out


def flag(name: str, value: Any) -> bool:
    """``value`` when it is a bool (``"no"`` or ``0`` are no answer to a yes-or-no question)."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise _type_error(name, "True or False", value)


def text(name: str, value: Any) -> str:
    """``value`` when it is a string."""
    if not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return value


def optional_text(name: str, value: Any) -> Optional[str]:
    return None if value is None else text(name, value)


def names(name: str, value: Any) -> list[str]:
    """A list of names (column names): a list or tuple of strings, not one string (which Python
    would take for a list of its letters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise _type_error(name, "a list of names", value)
    for item in value:
        if not isinstance(item, str):
            raise _type_error(f"{name}[]", "a name (a string)", item)
    return list(value)


def mapping(name: str, value: Any) -> Mapping[Any, Any]:
    """``value`` when it is a mapping (a dict)."""
    if not isinstance(value, Mapping):
        raise _type_error(name, "a dict", value)
    return value


def spec_list(name: str, value: Any) -> list[Mapping[str, Any]]:
    """A list of partition specs, each a dict (``[{"dt": "2024-06-01"}]``). A string such as
    ``"dt=2024-06-01"`` or a single dict is refused, saying how to write it."""
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(
            f"argument {name!r} must be a list of partition specs (dicts), not the string {_shown(value)}: "
            "write a list of dicts, e.g. [{'dt': '2024-06-01', 'hh': 1}]"
        )
    if isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"argument {name!r} must be a list of partition specs, not one dict {_shown(value)}: "
            f"write [{_shown(dict(value))}]"
        )
    if not isinstance(value, Iterable):
        raise _type_error(name, "a list of partition specs (dicts)", value)
    out = list(value)
    for item in out:
        if not isinstance(item, Mapping):
            raise _type_error(f"{name}[]", "a partition spec (a dict)", item)
    return out


def callback(name: str, value: Any) -> Optional[Callable[..., Any]]:
    """None or a callable."""
    if value is not None and not callable(value):
        raise _type_error(name, "a function", value)
    return value


def point_in_time(name: str, value: Any) -> int:
    """A time as epoch milliseconds: a number of milliseconds (not a bool or string), or a
    ``datetime`` (a naive one in local time)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_error(name, "epoch milliseconds (a number) or a datetime", value)
    if not math.isfinite(float(value)):
        raise ArgumentError(f"argument {name!r} must be a finite number of milliseconds, not {value!r}")
    return int(float(value))
