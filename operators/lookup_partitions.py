"""Which partitions of a dimension a lookup table serves (Paimon's ``scan.partitions`` for lookups).

* ``max_pt()``: the partition with the largest values (compared field by field in the order of the
  partition keys, a null lowest), ``max_two_pt()``: the two largest. The choice follows the table:
  when a commit adds files to a partition that outranks a served one, or an overwrite may have
  dropped one, the lookup table reloads the new choice in full (Paimon's
  ``lookup.dynamic-partition``, which checks every ``lookup.dynamic-partition.refresh-interval``;
  lakelog checks at every refresh, from the files the new snapshots added).
* ``k=v[,k2=v2][;k=v...]``: fixed partitions (a spec may name some of the partition keys).

No pyflink here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Optional

from lakelog.connector.errors import InvalidInputError, OptionError
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.partition_specs import parse_partition_specs, partition_spec, spec_matcher

__all__ = ["PartitionChoice"]

_TOP = {"max_pt()": 1, "max_two_pt()": 2}


@dataclass(frozen=True)
class PartitionChoice:
    """The partitions a lookup serves: the ``top`` largest (0: not dynamic) or those ``matches``
    accepts (None: all)."""

    text: Optional[str]
    top: int
    matches: Optional[Callable[[bytes], bool]]

    @classmethod
    def parse(
        cls, store: TableStore, text: Optional[str], option: str = "scan.partitions"
    ) -> PartitionChoice:
        """The choice ``text`` names for ``store``; OptionError naming ``option`` when it is not
        ``max_pt()``, ``max_two_pt()`` or partition specs of this table."""
        if text is None or not text.strip():
            return cls(None, 0, None)
        value = text.strip()
        where = f"option {option!r} = {value!r}"
        if not store.schema.partition_keys:
            raise OptionError(f"{where}: table {store.path} is not partitioned")
        top = _TOP.get(value.lower().replace(" ", ""))
        if top is not None:
            return cls(value, top, None)
        try:
            specs = [partition_spec(store, s) for s in parse_partition_specs(value)]
        except InvalidInputError as e:
            raise OptionError(f"{where}: {e}; or max_pt(), max_two_pt()") from None
        matchers = [spec_matcher(store, s) for s in specs]
        return cls(value, 0, lambda p: any(m(p) for m in matchers))

    @property
    def dynamic(self) -> bool:
        return self.top > 0

    def largest(self, store: TableStore, partitions: Iterable[bytes]) -> frozenset[bytes]:
        """The ``top`` largest of ``partitions``."""
        ranked = sorted(set(partitions), key=lambda p: _rank(store, p), reverse=True)
        return frozenset(ranked[: self.top])

    def outranked(self, store: TableStore, served: frozenset[bytes], added: Iterable[bytes]) -> bool:
        """Would a partition that got new files (``added``) change the ``top`` largest ``served``?"""
        new = set(added) - served
        if not new:
            return False
        if len(served) < self.top:
            return True
        lowest = min(_rank(store, p) for p in served)
        return any(_rank(store, p) > lowest for p in new)


def _rank(store: TableStore, partition: bytes) -> tuple[tuple[bool, Any], ...]:
    """A partition's values as a sort key: field by field, a null lowest."""
    return tuple((v is not None, v) for v in store.partition_values(partition))
