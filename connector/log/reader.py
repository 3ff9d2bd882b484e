"""Reading the log: the records after given offsets, decoded into change batches.

A :class:`LogTail` consumes the table's topic from a start offset per partition (``read_committed``
for a transactional log, so only changes of published snapshots arrive), decodes the records into
Arrow change batches (a leading ``rowkind`` column, then the table's columns) and tracks its
position. It skips the records of the commit it was told to skip: a hybrid read that starts at
snapshot S begins at S's ``logOffsets``, and the only records after them that S already holds are
S's own, when a failed writer's transaction was published again later (see
:mod:`lakelog.connector.log.publisher`); their headers name S's commit user, identifier and kind.

A tail never skips silently: a gap record (snapshots whose changes never reached the log), and a
position the topic no longer holds (retention deleted it, or the topic was recreated), raise
:class:`~lakelog.connector.errors.LogSystemError` naming the table, the partition and the offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LogSystemError
from lakelog.connector.format.key_value import RowKind
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_evolution import evolve_table
from lakelog.connector.log.client import ClientError
from lakelog.connector.log.codec import COMMIT_HEADER, KIND_HEADER, SCHEMA_HEADER, USER_HEADER, decode_values
from lakelog.connector.log.kafka import LogConfig
from lakelog.connector.log.publisher import COMMIT_KIND_HEADER, GAP_HEADER

__all__ = ["CommitId", "LogTail", "ChangeBatch", "ROWKIND"]

log = logging.getLogger(__name__)

ROWKIND = "rowkind"
_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class CommitId:
    """The commit a record belongs to: what its headers name."""

    user: str
    identifier: int
    kind: str


@dataclass
class ChangeBatch:
    """Changes read from the log: rows with a leading ``rowkind`` column, and the position after
    them in every partition they came from."""

    rows: pa.Table
    positions: dict[int, int] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.rows.num_rows)


class LogTail:
    """Consumes the table's topic from ``start`` (``{partition: offset}``; partitions it does not
    name start at the earliest offset the topic keeps)."""

    def __init__(
        self,
        config: LogConfig,
        schema: TableSchema,
        start: Mapping[int, int],
        *,
        skip: Optional[CommitId] = None,
        schema_of: Optional[Callable[[int], TableSchema]] = None,
    ) -> None:
        self.config = config
        self.table_schema = schema
        self.schema = schema.arrow_schema()
        self._schema_of = schema_of
        self.skip = skip
        parts = config.topic_partitions()
        if parts is None:
            raise LogSystemError(f"{config.describe()} does not exist: the table's log is gone")
        earliest = config.list_offsets("earliest")
        self.positions: dict[int, int] = {}
        for p in range(parts):
            pos = start.get(p)
            if pos is None:
                pos = earliest[p]
            elif pos < earliest[p]:
                raise LogSystemError(
                    f"{config.describe()} no longer holds offsets {pos}..{earliest[p] - 1} of partition {p} "
                    f"(retention deleted them, or the topic was recreated)"
                )
            self.positions[p] = pos
        self._consumer = config.consumer()
        self._consumer.assign(self.positions)
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()

    def __enter__(self) -> LogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, timeout: float = 0.5, *, max_records: int = _MAX_RECORDS) -> Optional[ChangeBatch]:
        """The changes that arrived (None when none arrived within ``timeout`` seconds)."""
        try:
            msgs = self._consumer.poll(max_records, timeout)
        except ClientError as e:
            if e.reason == "offset-out-of-range":
                p = e.partition
                raise LogSystemError(
                    f"{self.config.describe()} no longer holds offset {self.positions.get(p)} of partition "
                    f"{p}: retention deleted changes this reader had not read ({e})"
                ) from e
            raise LogSystemError(f"reading {self.config.describe()}: {e}") from e
        if not msgs:
            return None
        values: list[Optional[bytes]] = []
        keys: list[Optional[bytes]] = []
        kinds: list[Optional[bytes]] = []
        schemas: list[Optional[bytes]] = []
        moved: dict[int, int] = {}
        for m in msgs:
            p, off = m.partition, m.offset
            moved[p] = off + 1
            headers = m.headers
            gap = headers.get(GAP_HEADER)
            if gap is not None:
                raise LogSystemError(
                    f"the log of {self.config.table} has no changes for snapshots {gap.decode()} (partition "
                    f"{p}, offset {off}): their files expired before a writer could publish them; read "
                    "those snapshots' successors from the files instead"
                )
            if self.skip is not None and self._is_skipped(headers):
                continue
            values.append(m.value)
            keys.append(m.key)
            kinds.append(headers.get(KIND_HEADER))
            schemas.append(headers.get(SCHEMA_HEADER))
        self.positions.update(moved)
        rows = self._decode(values, keys, kinds, schemas)
        return ChangeBatch(rows, moved)

    def _is_skipped(self, headers: Mapping[str, Any]) -> bool:
        s = self.skip
        assert s is not None
        return (
            headers.get(USER_HEADER) == s.user.encode()
            and headers.get(COMMIT_HEADER) == str(s.identifier).encode()
            and headers.get(COMMIT_KIND_HEADER) == s.kind.encode()
        )

    def _decode(
        self,
        values: list[Optional[bytes]],
        keys: list[Optional[bytes]],
        kinds: list[Optional[bytes]],
        schemas: list[Optional[bytes]],
    ) -> pa.Table:
        """Decode in runs of one schema each, every run evolved to the reader's schema (by field id:
        renamed, added, dropped and widened columns), keeping the records' order."""
        parts: list[pa.Table] = []
        codes: list[np.ndarray] = []
        start = 0
        for end in range(1, len(values) + 1):
            if end < len(values) and schemas[end] == schemas[start]:
                continue
            written = self._written_schema(schemas[start])
            rows, got = decode_values(
                values[start:end], keys[start:end], kinds[start:end], written.arrow_schema()
            )
            if written.id != self.table_schema.id:
                rows = evolve_table(rows, written, self.table_schema)
            parts.append(rows.cast(self.schema))
            codes.append(got)
            start = end
        if not parts:
            rows, code = self.schema.empty_table(), np.zeros(0, dtype=np.int8)
        else:
            rows, code = pa.concat_tables(parts), np.concatenate(codes)
        names = np.array(RowKind.SHORT, dtype=object)[code.astype(np.int64)]
        return rows.add_column(0, pa.field(ROWKIND, pa.string(), False), pa.array(names, pa.string()))

    def _written_schema(self, header: Optional[bytes]) -> TableSchema:
        if header is None or self._schema_of is None:
            return self.table_schema  # another writer's record: read as the table is now
        sid = int(header)
        if sid == self.table_schema.id:
            return self.table_schema
        return self._schema_of(sid)

    def batches(self, *, idle_timeout: Optional[float] = None, poll: float = 0.2) -> Iterator[ChangeBatch]:
        """Change batches as they arrive; ends after ``idle_timeout`` seconds without any (never
        when None)."""
        import time

        last = time.monotonic()
        while not self._closed:
            batch = self.poll(poll)
            if batch is None:
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    return
                continue
            last = time.monotonic()
            if batch.num_rows:
                yield batch

    def end_offsets(self) -> dict[int, int]:
        """``{partition: offset}`` a reader at the log's end would be at (for "caught up" checks)."""
        return self.config.list_offsets("latest")
