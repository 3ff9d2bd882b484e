"""Values as the text Paimon's system tables show: Flink's cast to STRING for partitions
(``{2024-01-01, 3}``), Java's ``toString`` for keys and column statistics (``[c]``,
``{cnt=0, word=a}``), and Java's ``Duration.toString`` (``PT24H``). Flink-free."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping, Sequence
from typing import Any

from lakelog.connector.format.partition import partition_value_string
from lakelog.connector.format.types import DataType

__all__ = ["cast_text", "row_cast_text", "java_text", "java_list_text", "java_map_text", "java_duration"]


def cast_text(v: Any, data_type: DataType) -> str:
    """Flink's ``CAST(v AS STRING)`` of one value (``null`` for None)."""
    if v is None:
        return "null"
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return partition_value_string(v, data_type, legacy=False)


def row_cast_text(values: Sequence[Any], types: Sequence[DataType]) -> str:
    """Flink's cast of a ROW to STRING: ``{v1, v2}`` (``{}`` for no fields)."""
    return "{" + ", ".join(cast_text(v, t) for v, t in zip(values, types)) + "}"


def java_text(v: Any, data_type: DataType | None = None) -> str:
    """Java's ``toString`` of Paimon's internal value (``LocalDateTime`` as ``2024-01-01T08:30``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        text = v.strftime("%Y-%m-%dT%H:%M")
        if v.second or v.microsecond:
            text += f":{v.second:02d}"
        if v.microsecond:
            text += f".{v.microsecond:06d}".rstrip("0").ljust(4, "0")
        return text
    if isinstance(v, (float, decimal.Decimal, datetime.date, datetime.time)):
        return partition_value_string(v, data_type, legacy=False)
    if isinstance(v, bytes):
        return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in v) + "]"
    return str(v)


def java_list_text(items: Sequence[Any]) -> str:
    """``List.toString`` / ``Arrays.toString``: ``[a, b]``."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def java_map_text(items: Mapping[str, str]) -> str:
    """``Map.toString`` of a map sorted by key: ``{a=1, b=2}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(items.items())) + "}"


def java_duration(d: datetime.timedelta) -> str:
    """Java's ``Duration.toString``: ``PT24H``, ``PT1H30M``, ``PT0.5S``, ``PT0S``."""
    total = decimal.Decimal(d.days * 86400 + d.seconds) + decimal.Decimal(d.microseconds) / 1_000_000
    if total == 0:
        return "PT0S"
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    out = "PT"
    if hours:
        out += f"{sign}{int(hours)}H"
    if minutes:
        out += f"{sign}{int(minutes)}M"
    if seconds:
        text = format(seconds.normalize(), "f")
        out += f"{sign}{text}S"
    return out
