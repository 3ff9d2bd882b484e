"""Flink SQL functions that make and read the values of the set-union aggregate functions.

Paimon's pages for ``rbm32``, ``rbm64``, ``hll_sketch`` and ``theta_sketch`` register user-written
Java functions (``TO_BITMAP``, ``TO_BITMAP64``, ``HLL_SKETCH``, ``HLL_SKETCH_COUNT``...). These are
the same functions in Python, on :mod:`lakelog.sketches`; register the ones you need by their path::

    CREATE TEMPORARY FUNCTION TO_BITMAP AS 'lakelog.operators.set_functions.to_bitmap' LANGUAGE PYTHON;
    CREATE TEMPORARY FUNCTION HLL_SKETCH AS 'lakelog.operators.set_functions.hll_sketch' LANGUAGE PYTHON;

They run in Flink's Python workers, one call per row.
"""

from __future__ import annotations

from typing import Any, Optional

from pyflink.table import DataTypes
from pyflink.table.udf import udf

from lakelog.connector.format import sketches

__all__ = [
    "to_bitmap",
    "bitmap_count",
    "bitmap_contains",
    "to_bitmap64",
    "bitmap64_count",
    "bitmap64_contains",
    "hll_sketch",
    "hll_sketch_count",
    "theta_sketch",
    "theta_sketch_count",
]


@udf(result_type=DataTypes.BYTES())
def to_bitmap(*values: Optional[int]) -> bytes:
    """An ``rbm32`` value of the non-null integer arguments."""
    return sketches.bitmap32([v for v in values if v is not None])


@udf(result_type=DataTypes.BIGINT())
def bitmap_count(data: Optional[bytes]) -> Optional[int]:
    """How many values an ``rbm32`` value holds (null for null)."""
    return None if data is None else len(sketches.bitmap32_values(data))


@udf(result_type=DataTypes.BOOLEAN())
def bitmap_contains(data: Optional[bytes], value: Optional[int]) -> Optional[bool]:
    """Whether an ``rbm32`` value holds ``value``."""
    if data is None or value is None:
        return None
    return _holds(sketches.bitmap32_values(data), value)


@udf(result_type=DataTypes.BYTES())
def to_bitmap64(*values: Optional[int]) -> bytes:
    """An ``rbm64`` value of the non-null integer arguments."""
    return sketches.bitmap64([v for v in values if v is not None])


@udf(result_type=DataTypes.BIGINT())
def bitmap64_count(data: Optional[bytes]) -> Optional[int]:
    """How many values an ``rbm64`` value holds (null for null)."""
    return None if data is None else len(sketches.bitmap64_values(data))


@udf(result_type=DataTypes.BOOLEAN())
def bitmap64_contains(data: Optional[bytes], value: Optional[int]) -> Optional[bool]:
    """Whether an ``rbm64`` value holds ``value``."""
    if data is None or value is None:
        return None
    return _holds(sketches.bitmap64_values(data), value)


def _holds(values: Any, value: int) -> bool:
    """Whether the sorted ``values`` (a numpy array) hold ``value``."""
    i = int(values.searchsorted(value))
    return i < len(values) and int(values[i]) == value


@udf(result_type=DataTypes.BYTES())
def hll_sketch(*values: Any) -> bytes:
    """An ``hll_sketch`` value of the non-null arguments."""
    return sketches.hll_sketch(v for v in values if v is not None)


@udf(result_type=DataTypes.DOUBLE())
def hll_sketch_count(data: Optional[bytes]) -> float:
    """The distinct count an ``hll_sketch`` value estimates (0 for null, as Paimon's page does)."""
    return 0.0 if data is None else sketches.hll_estimate(data)


@udf(result_type=DataTypes.BYTES())
def theta_sketch(*values: Any) -> bytes:
    """A ``theta_sketch`` value of the non-null arguments."""
    return sketches.theta_sketch(v for v in values if v is not None)


@udf(result_type=DataTypes.DOUBLE())
def theta_sketch_count(data: Optional[bytes]) -> float:
    """The distinct count a ``theta_sketch`` value estimates (0 for null)."""
    return 0.0 if data is None else sketches.theta_estimate(data)
