"""Eventual consistency: changes reach the log as soon as they are written, before any commit.

With ``log.consistency`` = ``eventual`` a writer sends each batch it is given to the topic at once,
from an idempotent (not transactional) producer, one record per row into its bucket's partition
(Paimon's rule, which needs a primary key: a change repeated after a failure upserts its key again
and does no harm in upsert mode). At its commit the writer flushes and reports the offset after its
records per partition; the snapshot keeps them as its ``logOffsets``, so a hybrid read can start
there. A record of a write that fails or is aborted may already be in the log: that is the
contract of eventual consistency (intermediate states, corrected by later records). With several
eventual writers on one bucket, a hybrid read may miss another writer's records written before the
snapshot it starts from and committed after it; transactional logs have no such gap.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import LogSystemError
from lakelog.connector.log.client import ClientError, LogProducer
from lakelog.connector.log.codec import KIND_HEADER, SCHEMA_HEADER, USER_HEADER, encode_changes, kind_header
from lakelog.connector.log.kafka import LogConfig
from lakelog.connector.log.publisher import COMMIT_KIND_HEADER, records_partitions

__all__ = ["EventualLogWriter"]


class EventualLogWriter:
    """Sends a writer's batches to the log as they are written; :meth:`flush` returns the offset
    after them in every partition it wrote."""

    def __init__(self, config: LogConfig, user: str) -> None:
        self.config = config
        self.user = user.encode()
        self._producer: Optional[LogProducer] = None
        self._partitions = 0

    def _ensure(self) -> LogProducer:
        if self._producer is None:
            parts = self.config.topic_partitions()
            if parts is None:
                raise LogSystemError(f"{self.config.describe()} does not exist")
            self._partitions = parts
            self._producer = self.config.producer()
        return self._producer

    def send(self, rows: pa.Table, kinds: np.ndarray, buckets: np.ndarray, schema_id: int) -> None:
        """One record per row (the table's columns), into its bucket's partition (see
        :func:`~lakelog.connector.log.publisher.records_partition`)."""
        producer = self._ensure()
        cfg = self.config
        kinds = np.asarray(kinds, dtype=np.int8)
        keep = np.ones(len(kinds), dtype=bool)
        if cfg.ignore_delete:
            keep &= (kinds == 0) | (kinds == 2)
        if cfg.upsert:
            keep &= kinds != 1
        if not keep.all():
            rows, kinds, buckets = rows.filter(pa.array(keep)), kinds[keep], buckets[keep]
        records = encode_changes(rows, kinds, cfg.primary_keys, upsert=False)
        base = [
            (USER_HEADER, self.user),
            (COMMIT_KIND_HEADER, b"APPEND"),
            (SCHEMA_HEADER, str(schema_id).encode()),
        ]
        # one header list per row kind, shared by its records (the client copies headers)
        by_kind = [[(KIND_HEADER, kind_header(k)), *base] for k in range(4)]
        parts = records_partitions(buckets, self._partitions)
        try:
            producer.send_all(
                (key, value, part, by_kind[kind])
                for key, value, kind, part in zip(records.keys, records.values, records.kinds.tolist(), parts)
            )
        except ClientError as e:
            raise LogSystemError(f"cannot send changes to {cfg.describe()}: {e}") from e

    def flush(self) -> dict[int, int]:
        """Wait until every record sent so far is in the log; ``{partition: offset after them}``."""
        if self._producer is None:
            return {}
        try:
            return self._producer.flush()
        except ClientError as e:
            raise LogSystemError(f"records for {self.config.describe()} were not delivered: {e}") from e
