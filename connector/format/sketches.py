"""Sets serialized into VARBINARY values: what the ``rbm32``, ``rbm64``, ``hll_sketch`` and
``theta_sketch`` aggregate functions unite.

Paimon's aggregation engine keeps such a value per key and unites a key's values on merge
(``FieldRoaringBitmap32Agg``, ``FieldRoaringBitmap64Agg``, ``FieldHllSketchAgg``,
``FieldThetaSketchAgg``). The bytes are the libraries' own layouts, so Paimon's readers and
lakelog's merge each other's values:

* ``rbm32``: a 32-bit Roaring bitmap in the portable serialization, run-optimised as Paimon's
  ``RoaringBitmap32.serialize`` writes it (the codec is :mod:`lakelog.connector.format.roaring`);
* ``rbm64``: a 64-bit Roaring bitmap of Java ``long`` values as Paimon's ``RoaringBitmap64`` writes
  it, the Java library's own dump of a ``Roaring64Bitmap``, run-optimised (the codec is
  :mod:`lakelog.connector.format.roaring64`);
* ``hll_sketch``: an Apache DataSketches HLL sketch (compact). A union takes the smallest ``lg_k``
  of its inputs and yields an ``HLL_4`` sketch, as ``HllSketchUtil.union`` does;
* ``theta_sketch``: an Apache DataSketches compact Theta sketch (serial version 3). A union uses
  DataSketches' default size (``lg_k`` 12) and seed and yields an ordered compact sketch, as
  ``ThetaSketch.union`` does.

The sketches need the ``datasketches`` package (``pip install 'lakelog[sketches]'``), the Python
binding of the same library Paimon's Java code uses; it is imported only when a sketch is touched.

Public helpers make and read such values from Python (``lakelog.sketches``)::

    >>> from lakelog import sketches
    >>> sketches.bitmap32_values(sketches.bitmap32([3, 1, 2]))
    array([1, 2, 3], dtype=uint64)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Union

import numpy as np

from lakelog.connector.errors import CorruptFileError, InvalidInputError, MissingDependencyError
from lakelog.connector.format.roaring import decode_roaring32, encode_roaring32
from lakelog.connector.format.roaring64 import decode_roaring64, encode_roaring64

__all__ = [
    "UNION_FUNCTIONS",
    "bitmap32",
    "bitmap32_values",
    "bitmap64",
    "bitmap64_values",
    "hll_sketch",
    "hll_estimate",
    "theta_sketch",
    "theta_estimate",
    "unite",
    "check_value",
    "check_column",
    "require_datasketches",
]

UNION_FUNCTIONS = frozenset({"rbm32", "rbm64", "hll_sketch", "theta_sketch"})
"""Aggregate functions whose values are serialized sets united on merge."""

DEFAULT_LG_K = 12  # DataSketches' default for HLL sketches and Theta unions (4,096 nominal entries)
_U32 = (1 << 32) - 1
Value = Union[int, float, str, bytes]


def _datasketches(function: str, field: str = "") -> Any:
    try:
        import datasketches
    except ImportError:
        of = f" of field {field!r}" if field else ""
        raise MissingDependencyError(
            f"the {function!r} aggregate function{of} reads and writes Apache DataSketches sketches, "
            "which needs the 'datasketches' package: pip install 'lakelog[sketches]'") from None
    return datasketches


def require_datasketches(function: str, field: str) -> None:
    """Refuse a table whose ``function`` (a sketch) cannot run here, naming ``field``."""
    _datasketches(function, field)


# ---- making and reading values ----------------------------------------------------------------------
def bitmap32(values: Iterable[int] | np.ndarray) -> bytes:
    """An ``rbm32`` value: the set of ``values`` (integers in 0 .. 2**32 - 1)."""
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size and (arr.dtype.kind not in "iu" or int(arr.min()) < 0 or int(arr.max()) > _U32):
        raise InvalidInputError("bitmap32() takes integers from 0 to 2**32 - 1")
    return encode_roaring32(np.unique(arr.astype(np.uint64)), run_optimize=True)


def bitmap32_values(data: bytes) -> np.ndarray:
    """The sorted values (``uint64``) of an ``rbm32`` value."""
    return _bitmap(data, "bitmap32_values()")


def bitmap64(values: Iterable[int] | np.ndarray) -> bytes:
    """An ``rbm64`` value: the set of ``values`` (integers in -2**63 .. 2**63 - 1, Java longs)."""
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size and (arr.dtype.kind not in "iu" or int(arr.min()) < -(1 << 63) or int(arr.max()) >= 1 << 63):
        raise InvalidInputError("bitmap64() takes integers from -2**63 to 2**63 - 1")
    return encode_roaring64(arr.astype(np.int64))


def bitmap64_values(data: bytes) -> np.ndarray:
    """The values (``int64``) of an ``rbm64`` value, sorted as signed numbers."""
    return np.sort(_bitmap64(data, "bitmap64_values()"))


def hll_sketch(values: Iterable[Value], lg_k: int = DEFAULT_LG_K) -> bytes:
    """An ``hll_sketch`` value: an HLL_4 sketch of ``values`` (DataSketches' compact bytes).
    Integers hash as Java's ``HllSketch.update(long)``, strings as ``update(String)``."""
    ds = _datasketches("hll_sketch")
    sk = ds.hll_sketch(lg_k, ds.tgt_hll_type.HLL_4)
    for v in values:
        sk.update(v)
    return bytes(sk.serialize_compact())


def hll_estimate(data: bytes) -> float:
    """The distinct count an ``hll_sketch`` value estimates."""
    return float(_hll(data, "hll_estimate()").get_estimate())


def theta_sketch(values: Iterable[Value], lg_k: int = DEFAULT_LG_K) -> bytes:
    """A ``theta_sketch`` value: a compact Theta sketch of ``values``."""
    ds = _datasketches("theta_sketch")
    sk = ds.update_theta_sketch(lg_k)
    for v in values:
        sk.update(v)
    return bytes(sk.compact().serialize())


def theta_estimate(data: bytes) -> float:
    """The distinct count a ``theta_sketch`` value estimates."""
    return float(_theta(data, "theta_estimate()").get_estimate())


# ---- the merge's side ---------------------------------------------------------------------------------
def _hll(data: bytes, where: str) -> Any:
    ds = _datasketches("hll_sketch")
    try:
        return ds.hll_sketch.deserialize(bytes(data))
    except (RuntimeError, ValueError) as e:
        raise InvalidInputError(f"the value in {where} is not a serialized HLL sketch: {e}") from None


def _theta(data: bytes, where: str) -> Any:
    ds = _datasketches("theta_sketch")
    try:
        return ds.compact_theta_sketch.deserialize(bytes(data))
    except (RuntimeError, ValueError) as e:
        raise InvalidInputError(f"the value in {where} is not a serialized Theta sketch: {e}") from None


def _bitmap(data: bytes, where: str) -> np.ndarray:
    return _whole(decode_roaring32, data, where, "Roaring bitmap")


def _bitmap64(data: bytes, where: str) -> np.ndarray:
    return _whole(decode_roaring64, data, where, "Roaring64Bitmap")


def _whole(
    decode: Callable[[bytes, str, str], tuple[np.ndarray, int]], data: bytes, where: str, what: str
) -> np.ndarray:
    """The values of a bitmap that fills ``data``; anything else is :class:`InvalidInputError`."""
    try:
        values, used = decode(data, where, "the value")
    except CorruptFileError as e:
        raise InvalidInputError(str(e)) from None
    if used != len(data):
        raise InvalidInputError(f"the value in {where} is a {what} followed by {len(data) - used} more bytes")
    return values


def check_value(function: str, data: bytes, where: str) -> None:
    """Refuse (:class:`InvalidInputError` naming ``where``) a value that ``function`` cannot read."""
    if function == "rbm32":
        _bitmap(data, where)
    elif function == "rbm64":
        _bitmap64(data, where)
    elif function == "hll_sketch":
        _hll(data, where)
    else:
        _theta(data, where)


def check_column(function: str, values: Any, column: str) -> None:
    """Refuse a column of values (an Arrow array) holding one that ``function`` cannot read: the
    error names the column and the row, and nothing is written."""
    for i, v in enumerate(values.to_pylist()):
        if v is not None:
            check_value(function, v, f"column {column!r}, row {i}")


def unite(function: str, values: Sequence[bytes], where: str) -> bytes:
    """The union of two or more values of an aggregate function in :data:`UNION_FUNCTIONS`."""
    if function == "rbm32":
        sets = [_bitmap(v, where) for v in values]
        return encode_roaring32(np.unique(np.concatenate(sets)), run_optimize=True)
    if function == "rbm64":
        return encode_roaring64(np.concatenate([_bitmap64(v, where) for v in values]))
    ds = _datasketches(function)
    if function == "hll_sketch":
        sketches = [_hll(v, where) for v in values]
        union = ds.hll_union(min(s.lg_config_k for s in sketches))
        for s in sketches:
            union.update(s)
        return bytes(union.get_result(ds.tgt_hll_type.HLL_4).serialize_compact())
    theta_union = ds.theta_union(DEFAULT_LG_K)
    for v in values:
        theta_union.update(_theta(v, where))
    return bytes(theta_union.get_result().serialize())
