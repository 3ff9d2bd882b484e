"""Parquet INT96 timestamps: the 12 bytes of a value, written and read exactly.

INT96 holds 8 bytes of nanoseconds within the day, then a 4-byte Julian day, both little-endian.
Paimon writes TIMESTAMP(7..9) and TIMESTAMP_LTZ(7..9) so. Paimon and pyarrow split a value before
1970 by truncating towards zero, so its nanoseconds of the day are negative; readers add the two parts
as signed numbers. lakelog writes whole days and nanoseconds of the day from 0 (:func:`encode`), which
every reader decodes alike.

pyarrow cannot be trusted with reading them. Its default reading (nanoseconds) wraps around outside
1677-09-21 .. 2262-04-11, and its ``coerce_int96_timestamp_unit`` reading takes the nanoseconds of
the day as unsigned, so a value before 1970 with a time of day comes back 584 years late. A wrapped
value can equal a valid one in both readings (1600-01-01 00:00:01 is read as 2184-07-20
23:34:34.709551616 in both), so no check of pyarrow's output can catch every wrong value. lakelog
reads the 12 bytes (:func:`~lakelog.connector.format.parquet_footer.binary_view`) and converts them
(:func:`timestamps`) exactly, or raises :class:`UnrepresentableValueError` naming the file and column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.connector.errors import UnrepresentableValueError

__all__ = ["int96_columns", "timestamps", "encode", "JULIAN_EPOCH_DAY"]

JULIAN_EPOCH_DAY = 2440588  # the Julian day of 1970-01-01
_NS_PER_DAY = 86_400 * 10**9
_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_INT96_RECORD = np.dtype([("nanos", "<i8"), ("day", "<i4")])
_SAFE = 2.0**63 * (1 - 1e-9)  # |value| below this (as a float estimate) fits an int64 for certain


def int96_columns(f: pq.ParquetFile, columns: Optional[Sequence[str]] = None) -> list[str]:
    """The top-level columns of ``f`` (among ``columns``) holding an INT96 leaf."""
    schema = f.metadata.schema
    hits = [c.path for c in (schema.column(i) for i in range(len(schema))) if c.physical_type == "INT96"]
    if not hits:
        return []
    names = list(columns) if columns is not None else f.schema_arrow.names
    return [n for n in names if any(p == n or p.startswith(n + ".") for p in hits)]


# ---- reading ------------------------------------------------------------------------------------------
def _instant(days: int, nanos: int) -> str:
    try:
        t = dt.datetime(1970, 1, 1) + dt.timedelta(days=days, microseconds=nanos // 1000)
        return f"{t.isoformat()}{nanos % 1000:03d}" if t.microsecond or nanos % 1000 else t.isoformat()
    except OverflowError:
        return f"Julian day {days + JULIAN_EPOCH_DAY} + {nanos} ns"


def timestamps(arr: pa.Array, target: pa.TimestampType, where: str) -> pa.Array:
    """INT96 bytes (``fixed_size_binary(12)``) as ``target``, exactly."""
    if arr.offset:
        arr = pa.concat_arrays([arr])
    n = len(arr)
    raw = np.frombuffer(arr.buffers()[1], dtype=_INT96_RECORD, count=n)
    nanos = raw["nanos"].astype(np.int64)
    days = raw["day"].astype(np.int64) - JULIAN_EPOCH_DAY
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    if nulls is not None:
        nanos[nulls] = 0
        days[nulls] = 0
    per = _NS_PER_UNIT[target.unit]
    per_day = _NS_PER_DAY // per
    estimate = days.astype(np.float64) * per_day + nanos.astype(np.float64) / per
    odd = (np.abs(estimate) >= _SAFE) | (nanos <= -_NS_PER_DAY) | (nanos >= _NS_PER_DAY)
    values = days * per_day + np.floor_divide(nanos, per)
    for i in np.flatnonzero(odd):  # only values at or beyond the edge of the range reach here
        d, ns = int(days[i]), int(nanos[i])
        v = d * per_day + ns // per
        if not -(2**63) <= v < 2**63:
            lo, hi = (_instant(*divmod(x * per, _NS_PER_DAY)) for x in (-(2**63), 2**63 - 1))
            raise UnrepresentableValueError(
                f"{where} holds {_instant(d, ns)} (INT96), outside the range of its Arrow type {target}: "
                f"{lo} .. {hi}"
            )
        values[i] = v
    lost = (np.remainder(nanos, per) != 0) if per > 1 else None
    if lost is not None and lost.any():
        i = int(np.flatnonzero(lost)[0])
        raise UnrepresentableValueError(
            f"{where} holds {_instant(int(days[i]), int(nanos[i]))} (INT96), "
            f"finer than its Arrow type {target}"
        )
    return pa.array(values, pa.int64(), mask=nulls).view(target)


# ---- writing ---------------------------------------------------------------------------------------------
def encode(arr: pa.Array) -> pa.Array:
    """A ``timestamp[ns]`` array as the INT96 bytes of each value, typed ``fixed_size_binary(12)``."""
    n = len(arr)
    ns = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=n, offset=arr.offset * 8)  # nulls: any value
    days = np.floor_divide(ns, _NS_PER_DAY)
    out = np.empty(n, dtype=_INT96_RECORD)
    out["day"] = days + JULIAN_EPOCH_DAY
    np.subtract(ns, days * _NS_PER_DAY, out=out["nanos"])  # from 0: floor division
    validity = pc.is_valid(arr).buffers()[1] if arr.null_count else None
    return pa.Array.from_buffers(pa.binary(12), n, [validity, pa.py_buffer(out)], arr.null_count)


