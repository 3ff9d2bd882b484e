"""Partition values: splitting a table by partition, encoding them, and their directory names.

A partition directory is ``k1=v1/k2=v2``, each name and value escaped like Paimon's
``PartitionPathUtils``. How a value becomes text depends on ``partition.legacy-name`` (default true):

* legacy (Java ``toString`` of the internal value): DATE as days since the epoch (``19723``), TIME as
  milliseconds of the day, TIMESTAMP as ``LocalDateTime.toString()`` (``2024-01-01T08:30``,
  ``...T08:30:05.123``), TIMESTAMP_LTZ likewise on its UTC fields;
* otherwise the SQL cast to string: DATE ``2024-01-01``, TIMESTAMP ``2024-01-01 08:30:05.123``
  (fraction trimmed of trailing zeros down to the type's precision), TIMESTAMP_LTZ in local time.

Both: booleans ``true``/``false``, decimals in plain notation, FLOAT/DOUBLE as Java's
``Float``/``Double.toString`` (``1.0``, ``1.0E10``), null or blank values the default partition name.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.options import CoreOptions
from lakelog.connector.format.types import DataType

__all__ = [
    "partition_path",
    "partition_value_string",
    "escape_path_name",
    "DEFAULT_PARTITION_NAME",
    "java_pattern_to_strptime",
    "partition_time",
    "check_partition_time_options",
]

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"

# Characters Paimon's PartitionPathUtils escapes in directory names (Hive's list plus '}'), and the
# control range.
_ESCAPED = set("\"#%'*/:=?\\\x7f{}[]^") | {chr(c) for c in range(0x20)}
_EPOCH_DAY = datetime.date(1970, 1, 1)
_DEFAULT_TIMESTAMP_PRECISION = 6
_MAX_DIRECTORY_NAME_BYTES = 255


def escape_path_name(value: str) -> str:
    """Escape a partition value for use as a directory name (``%XX`` for unsafe characters)."""
    if not any(c in _ESCAPED for c in value):
        return value
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _java_floating(v: float, single: bool) -> str:
    """Java's ``Float.toString`` / ``Double.toString`` (shortest round-trip digits)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    digits = np.format_float_scientific(np.float32(v) if single else v, unique=True, trim="-")
    mantissa, exp_text = digits.split("e")
    exponent = int(exp_text)
    if 1e-3 <= abs(v) < 1e7:
        text = format(decimal.Decimal(mantissa).scaleb(exponent), "f")
        return text if "." in text else text + ".0"
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{exponent}"


def _legacy_timestamp(ts: datetime.datetime) -> str:
    """``java.time.LocalDateTime.toString()``: seconds and fraction only when non-zero."""
    text = f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T{ts.hour:02d}:{ts.minute:02d}"
    if ts.second or ts.microsecond:
        text += f":{ts.second:02d}"
        if ts.microsecond:
            text += (
                f".{ts.microsecond // 1000:03d}" if ts.microsecond % 1000 == 0 else f".{ts.microsecond:06d}"
            )
    return text


def _cast_timestamp(ts: datetime.datetime, precision: int) -> str:
    """The SQL cast of a TIMESTAMP(precision) to string."""
    text = f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d} {ts.hour:02d}:{ts.minute:02d}:{ts.second:02d}"
    fraction = f"{ts.microsecond * 1000:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    return f"{text}.{fraction}" if fraction else text


def partition_value_string(v: Any, data_type: Optional[DataType] = None, *, legacy: bool = True) -> str:
    """The text of one non-null partition value (before escaping); ``data_type`` tells FLOAT from
    DOUBLE and gives the timestamp precision (without it: DOUBLE, precision 6)."""
    root = data_type.root if data_type is not None else None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _java_floating(v, single=root == "FLOAT")
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:  # TIMESTAMP_LTZ: legacy names use the UTC fields, casts local time
            utc = v.astimezone(datetime.timezone.utc)
            v = (utc if legacy else utc.astimezone()).replace(tzinfo=None)
        if legacy:
            return _legacy_timestamp(v)
        precision = _DEFAULT_TIMESTAMP_PRECISION
        if data_type is not None and data_type.precision is not None:
            precision = data_type.precision
        return _cast_timestamp(v, precision)
    if isinstance(v, datetime.date):
        return str((v - _EPOCH_DAY).days) if legacy else v.isoformat()
    if isinstance(v, datetime.time):
        if legacy:
            return str(((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000)
        return v.isoformat(timespec="milliseconds") if v.microsecond else v.isoformat(timespec="seconds")
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def partition_path(
    names: Sequence[str],
    values: Sequence[Any],
    default_name: str = DEFAULT_PARTITION_NAME,
    *,
    types: Optional[Sequence[DataType]] = None,
    legacy_name: bool = True,
) -> str:
    """``k1=v1/k2=v2`` for a partition; null or blank values use the default partition name.

    ``types`` (the partition fields' types) and ``legacy_name`` (option ``partition.legacy-name``)
    decide how values are written; see the module docstring.
    """
    parts = []
    for i, (name, v) in enumerate(zip(names, values)):
        if v is None or (isinstance(v, str) and not v.strip()):
            s = default_name
        else:
            s = partition_value_string(v, types[i] if types is not None else None, legacy=legacy_name)
        part = f"{escape_path_name(name)}={escape_path_name(s)}"
        if len(part.encode("utf-8")) > _MAX_DIRECTORY_NAME_BYTES:
            raise InvalidInputError(
                f"partition value {_shorten(s)} of column {name!r} is too long: its directory name "
                f"{name}=... takes {len(part.encode('utf-8'))} bytes after escaping, and file systems "
                f"allow {_MAX_DIRECTORY_NAME_BYTES}"
            )
        parts.append(part)
    return "/".join(parts)


def _shorten(text: str, keep: int = 40) -> str:
    return repr(text) if len(text) <= keep else repr(text[:keep]) + f"... ({len(text)} characters)"


# ---- partition times (partition.timestamp-pattern / -formatter) ----------------------------------
_JAVA_FIELDS = {"yyyy": "%Y", "uuuu": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_DEFAULT_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H", "%Y-%m-%d")


def java_pattern_to_strptime(pattern: str) -> str:
    """``yyyy-MM-dd HH:mm:ss`` -> ``%Y-%m-%d %H:%M:%S`` (the date-time letters partitions use,
    quoted literals ``'T'``); other pattern letters raise :class:`OptionError`."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise OptionError(f"option 'partition.timestamp-formatter' = {pattern!r}: unclosed quote")
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        if c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            token = pattern[i:j]
            if token not in _JAVA_FIELDS:
                raise OptionError(
                    f"option 'partition.timestamp-formatter' = {pattern!r}: lakelog reads the pattern "
                    f"letters {', '.join(_JAVA_FIELDS)}, not {token!r}"
                )
            out.append(_JAVA_FIELDS[token])
            i = j
            continue
        out.append("%%" if c == "%" else c)
        i += 1
    return "".join(out)


def partition_time(
    keys: Sequence[str], texts: Sequence[str], pattern: Optional[str], formatter: Optional[str]
) -> Optional[datetime.datetime]:
    """The time of a partition with values ``texts`` (its fields ``keys``), or None if it does not
    parse."""
    if pattern is None:
        text = texts[0]
    else:
        text = pattern
        for k, v in sorted(zip(keys, texts), key=lambda kv: -len(kv[0])):  # $hour before $h
            text = text.replace(f"${k}", v)
    formats = (java_pattern_to_strptime(formatter),) if formatter else _DEFAULT_FORMATS
    for fmt in formats:
        try:
            return datetime.datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    return None


def check_partition_time_options(options: CoreOptions, partition_keys: Sequence[str]) -> None:
    """Refuse a formatter lakelog cannot read and a pattern naming unknown fields (at create and
    ALTER)."""
    formatter = options.get(CoreOptions.PARTITION_TIMESTAMP_FORMATTER)
    if formatter:
        java_pattern_to_strptime(formatter)
    pattern = options.get(CoreOptions.PARTITION_TIMESTAMP_PATTERN)
    if pattern:
        for name in re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", pattern):
            if name not in partition_keys:
                raise OptionError(
                    f"option 'partition.timestamp-pattern' = {pattern!r} names ${name}, which is not a "
                    f"partition field {list(partition_keys)}"
                )
