"""Per-row (partition, bucket) keys for the PyFlink sink, without pyflink and without numpy per row.

The sink routes every row to the writer that owns its (partition, bucket): the key is
``"<serialized partition hex>:<bucket>"``. The bucket is Paimon's: murmur3_x86_32 (seed 42) of the
bucket-key BinaryRow, then ``abs(java_remainder(hash, buckets))``, which equals ``abs(hash) % buckets``.

This runs once per input row in a Python worker, so it avoids the general-purpose encoders where it
safely can:

* partitions repeat, so their hex string is cached (bounded);
* the key strings of a partition's buckets are chosen so that Flink spreads the buckets evenly over
  the writer subtasks (see below);
* bucket keys made of integer and string columns are encoded by a specialised BinaryRow encoder that
  is checked byte for byte against :func:`lakelog.connector.format.binary_row.to_binary_row` on sample values
  when it is built (and not used if any sample differs); nulls, other types and values the fast
  encoder rejects go through ``to_binary_row`` (which also produces the error messages).

Balancing: ``key_by`` sends a key to the writer subtask that owns its *key group*
(``murmur(hashCode) % max_parallelism``), so a handful of bucket keys can easily all land on one
subtask (with 2 writers, the 4 bucket keys of an unpartitioned table all went to the same one, and
that subtask's Python worker became the job's bottleneck). With ``max_parallelism`` given, the
encoder appends a salt (``~<n>``) to each key until its key group is near the middle of the bucket's
own slot of the key-group ring: bucket ``b`` of a partition aims at slot ``(offset + b) % buckets``
(the offset is a hash of the partition), so consecutive buckets fall into consecutive key-group
ranges, i.e. onto different writer subtasks for any parallelism. A partition's buckets are its own
count's (a rescaled table keeps older partitions' counts); past ``_MAX_SLOTS`` buckets, slot
``(offset + b * slots // buckets) % slots`` gives every slot an equal share. Keys depend only on
the partition, its bucket count, the bucket and the max parallelism (which Flink keeps fixed for a
job's keyed state), so they stay the same across restarts and rescaling. The key-group function
mirrors Flink's ``KeyGroupRangeAssignment`` for the key ``Row.of(key)`` that PyFlink's ``key_by``
uses; the sink checks it against the JVM before relying on it.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from typing import Any, Callable, Optional

from lakelog.connector.errors import InvalidInputError
from lakelog.connector.format.binary_row import null_bits_size, serialize_row, to_binary_row
from lakelog.connector.format.types import DataType

__all__ = [
    "KeyEncoder",
    "parse_key",
    "fast_binary_row_encoder",
    "flink_key_group",
    "default_max_parallelism",
    "java_string_hash",
]

SEED = 42
_INT_SLOTS = {"TINYINT": "<b7x", "SMALLINT": "<h6x", "INT": "<i4x", "BIGINT": "<q"}
_STRING_ROOTS = ("CHAR", "VARCHAR")
_INLINE_TAIL = [bytes(7 - n) + bytes([0x80 | n]) for n in range(8)]  # pad + inline marker, by length
_MAX_CACHED_PARTITIONS = 4096
_INT_SAMPLES = {
    "TINYINT": [0, 1, -1, 127, -128],
    "SMALLINT": [0, 7, -7, 32767, -32768],
    "INT": [0, 1, -1, 2**31 - 1, -(2**31), 123456789],
    "BIGINT": [0, 1, -1, 2**63 - 1, -(2**63), 9876543210123],
}
_STRING_SAMPLES = ["", "a", "abcdefg", "abcdefgh", "é" * 3, "é" * 4, "x" * 17, "ü€𝄞"]

Encoder = Callable[[Sequence[Any]], bytes]
_M32 = 0xFFFFFFFF
_MAX_SALT_TRIES = 1 << 16
_MAX_SLOTS = 128  # more slots than writer subtasks buys nothing; each key costs ~2 * slots tries


# ---- Flink's key groups -------------------------------------------------------------------------------
def _i32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def _rotl32(x: int, r: int) -> int:
    x &= _M32
    return ((x << r) | (x >> (32 - r))) & _M32


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & _M32
    return _i32(h)


def _flink_murmur(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)`` (non-negative)."""
    h = (code * 0xCC9E2D51) & _M32
    h = _rotl32(h, 15)
    h = (h * 0x1B873593) & _M32
    h = _rotl32(h, 13)
    h = (h * 5 + 0xE6546B64) & _M32
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    v = _i32(h)
    if v >= 0:
        return v
    return -v if v != -(1 << 31) else 0


def flink_key_group(key: str, max_parallelism: int) -> int:
    """The key group of ``Row.of(key)`` (the key PyFlink's ``key_by`` hands to Java): Flink's
    ``KeyGroupRangeAssignment.assignToKeyGroup``. ``Row.hashCode`` of an insert row with one string
    field is ``31 * 0 + (31 * 1 + (31 * 1 + key.hashCode()))``."""
    return _flink_murmur(_i32(62 + java_string_hash(key))) % max_parallelism


def default_max_parallelism(parallelism: int) -> int:
    """Flink's ``KeyGroupRangeAssignment.computeDefaultMaxParallelism``."""
    p = max(1, parallelism)
    n = p + p // 2
    pow2 = 1 << (n - 1).bit_length() if n > 1 else 1
    return min(max(pow2, 128), 32768)


def balanced_key(base: str, slot: int, slots: int, max_parallelism: int) -> str:
    """``base`` plus the first salt (``~1``, ``~2``, ...; none if ``base`` already fits) whose key
    group lies near the middle of ``slot`` of ``slots`` equal slices of the key-group ring."""
    width = max_parallelism / slots
    center = (slot + 0.5) * width
    tolerance = max(0.5, width / 4)
    for salt in range(_MAX_SALT_TRIES):
        key = base if salt == 0 else f"{base}~{salt}"
        kg = flink_key_group(key, max_parallelism)
        if abs(kg + 0.5 - center) <= tolerance:
            return key
    return base  # pragma: no cover - the tolerance covers at least one key group


def _compile(types: Sequence[DataType]) -> Optional[Encoder]:
    slots: list[Optional[struct.Struct]] = []
    for t in types:
        if t.root in _INT_SLOTS:
            slots.append(struct.Struct(_INT_SLOTS[t.root]))
        elif t.root in _STRING_ROOTS:
            slots.append(None)
        else:
            return None
    header = bytes(null_bits_size(len(types)))
    fixed_size = len(header) + 8 * len(types)
    if len(slots) == 1 and slots[0] is not None:  # the common single integer key
        pack = slots[0].pack

        def encode_one(values: Sequence[Any]) -> bytes:
            return header + pack(values[0])

        return encode_one

    def encode(values: Sequence[Any]) -> bytes:
        parts = [header]
        var: list[bytes] = []
        var_len = 0
        for value, slot in zip(values, slots):
            if slot is not None:
                parts.append(slot.pack(value))
                continue
            data = value.encode("utf-8")  # AttributeError for non-str: the caller falls back
            n = len(data)
            if n <= 7:
                parts.append(data + _INLINE_TAIL[n])
            else:
                parts.append((((fixed_size + var_len) << 32) | n).to_bytes(8, "little"))
                padded = data + bytes(-n % 8)
                var.append(padded)
                var_len += len(padded)
        return b"".join(parts + var)

    return encode


def _samples(t: DataType) -> list[Any]:
    return _INT_SAMPLES[t.root] if t.root in _INT_SLOTS else _STRING_SAMPLES


def fast_binary_row_encoder(types: Sequence[DataType]) -> Optional[Encoder]:
    """A specialised BinaryRow encoder for non-null rows of ``types`` (integers and strings only), or
    None when the types are not covered or the encoder disagrees with ``to_binary_row`` on a sample."""
    encode = _compile(types)
    if encode is None or not types:
        return None
    combos = itertools.islice(itertools.product(*[_samples(t) for t in types]), 512)
    for combo in combos:
        if encode(combo) != to_binary_row(list(combo), types):
            return None
    return encode


class KeyEncoder:
    """Computes the sink key of a row given as a sequence of values in table column order.

    ``num_buckets`` is the default bucket count (the table's); a partition written with another
    count (a rescaled table keeps each partition's count until it is rewritten) passes its own to
    :meth:`key`, :meth:`bucket` and :meth:`key_for`, and its keys are balanced for that count."""

    def __init__(
        self,
        partition_idx: Sequence[int],
        partition_types: Sequence[DataType],
        bucket_idx: Sequence[int],
        bucket_types: Sequence[DataType],
        num_buckets: int,
        max_parallelism: Optional[int] = None,
    ) -> None:
        self.max_parallelism = max_parallelism if num_buckets > 0 else None
        self.partition_idx = list(partition_idx)
        self.partition_types = list(partition_types)
        self.bucket_idx = list(bucket_idx)
        self.bucket_types = list(bucket_types)
        self.num_buckets = int(num_buckets)
        self._fast = fast_binary_row_encoder(self.bucket_types) if self.num_buckets > 0 else None
        self._keys_by_partition: dict[Any, list[str]] = {}
        self._constant: dict[int, list[str]] = {}  # unpartitioned tables: keys by bucket count
        import mmh3

        self._hash = mmh3.hash

    def _count(self, num_buckets: Optional[int]) -> int:
        if self.num_buckets <= 0:
            return 1  # unaware buckets: one key per partition
        n = self.num_buckets if num_buckets is None else int(num_buckets)
        if n < 1:
            raise InvalidInputError(f"a fixed-bucket partition needs a bucket count above 0, not {n}")
        return n

    def _keys_of(self, part_hex: str, n: int) -> list[str]:
        if self.max_parallelism is None:
            return [f"{part_hex}:{b}" for b in range(n)]
        import mmh3

        slots = min(n, self.max_parallelism, _MAX_SLOTS)
        offset = mmh3.hash(part_hex, SEED, signed=False) % slots if self.partition_idx else 0
        mp = self.max_parallelism
        # more buckets than slots: consecutive buckets share a slot, every slot gets n / slots of them
        return [
            balanced_key(f"{part_hex}:{b}", (offset + b * slots // n) % slots, slots, mp) for b in range(n)
        ]

    def _keys_for_partition(self, pv: tuple[Any, ...], n: int) -> list[str]:
        if not self.partition_idx:
            keys = self._constant.get(n)
            if keys is None:
                keys = self._constant[n] = self._keys_of(serialize_row([], []).hex(), n)
            return keys
        try:
            keys = self._keys_by_partition.get((pv, n))
        except TypeError:  # an unhashable value: no caching
            return self._keys_of(serialize_row(list(pv), self.partition_types).hex(), n)
        if keys is None:
            keys = self._keys_of(serialize_row(list(pv), self.partition_types).hex(), n)
            if len(self._keys_by_partition) >= _MAX_CACHED_PARTITIONS:
                self._keys_by_partition.clear()
            self._keys_by_partition[(pv, n)] = keys
        return keys

    def bucket_row(self, values: Sequence[Any]) -> bytes:
        """The BinaryRow bytes of the row's bucket key (the murmur3 input)."""
        bv = [values[i] for i in self.bucket_idx]
        if self._fast is not None:
            try:
                return self._fast(bv)
            except (struct.error, AttributeError, TypeError, OverflowError):
                pass  # a null, a value of another type: the general encoder decides (or raises)
        return to_binary_row(bv, self.bucket_types)

    def bucket(self, values: Sequence[Any], num_buckets: Optional[int] = None) -> int:
        """The row's bucket in a partition of ``num_buckets`` buckets (default: the table's)."""
        if self.num_buckets <= 0:
            return 0
        n = self._count(num_buckets)
        return abs(self._hash(self.bucket_row(values), SEED, signed=True)) % n

    def key(self, values: Sequence[Any], num_buckets: Optional[int] = None) -> str:
        """The writer key of a row whose partition has ``num_buckets`` buckets (default: the table's)."""
        n = self._count(num_buckets)
        keys = self._keys_for_partition(tuple(values[i] for i in self.partition_idx), n)
        return keys[self.bucket(values, n)]

    def key_for(self, partition_values: Sequence[Any], bucket: int, num_buckets: Optional[int] = None) -> str:
        """The key of a (partition, bucket) known already (e.g. computed for a whole batch), in a
        partition of ``num_buckets`` buckets (default: the table's)."""
        n = self._count(num_buckets)
        if self.num_buckets > 0 and not 0 <= bucket < n:
            raise InvalidInputError(f"bucket {bucket} is outside a partition of {n} buckets")
        return self._keys_for_partition(tuple(partition_values), n)[bucket if self.num_buckets > 0 else 0]


def parse_key(key: str) -> tuple[bytes, int]:
    """(serialized partition, bucket) of a writer key made by :class:`KeyEncoder`."""
    part_hex, _, rest = key.partition(":")
    return bytes.fromhex(part_hex), int(rest.split("~", 1)[0])
