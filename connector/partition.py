"""Partition values: splitting a table by partition, encoding them, and their directory names."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

__all__ = ["partition_path", "escape_path_name", "DEFAULT_PARTITION_NAME"]

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"

# Characters Hive and Paimon escape in partition directory names, plus the control range.
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(0x20)}


def escape_path_name(value: str) -> str:
    """Escape a partition value for use as a directory name (``%XX`` for unsafe characters)."""
    if not any(c in _ESCAPED for c in value):
        return value
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _value_to_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def partition_path(
    names: Sequence[str], values: Sequence[Any], default_name: str = DEFAULT_PARTITION_NAME
) -> str:
    """``k1=v1/k2=v2`` for a partition; null or blank values use the default partition name."""
    parts = []
    for name, v in zip(names, values):
        s = default_name if v is None or (isinstance(v, str) and not v.strip()) else _value_to_string(v)
        if s in (".", ".."):
            s = escape_path_name(s).replace(".", "%2E")
        parts.append(f"{escape_path_name(name)}={escape_path_name(s)}")
    return "/".join(parts)
