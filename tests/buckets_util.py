"""Shared checks of the bucket tests: every key in the bucket its partition's count sends it to."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

import lakelog
from lakelog.connector.format.bucket import bucket_key_hashes, buckets_from_hashes
from lakelog.connector.format.data_file import read_data_file
from lakelog.connector.format.index_file import HASH_INDEX, read_hash_index
from lakelog.connector.format.key_value import key_column
from lakelog.connector.format.schema import BucketMode


def file_keys(t: lakelog.Table, e: Any) -> pa.Table:
    """The key columns of one live data file, named like the table's columns."""
    store = t.store
    data = read_data_file(store.data_file_path(e.partition, e.bucket, e.file.file_name))
    if store.is_primary_key_table:
        return data.select([key_column(k) for k in store.key_names]).rename_columns(store.key_names)
    return data


def assert_keys_in_their_buckets(t: lakelog.Table) -> None:
    """Fixed buckets: each row's bucket is its hash modulo the count its file records, and all files
    of a partition record one count. Dynamic buckets: each key hash is in its bucket's HASH file and
    in no other bucket's of the partition."""
    store = t.store
    snap = t.latest_snapshot()
    live = store.live_entries(snap)
    mode = store.schema.bucket_mode
    counts: dict[bytes, set[int]] = {}
    for e in live:
        counts.setdefault(e.partition, set()).add(e.total_buckets)
    for p, c in counts.items():
        assert len(c) == 1, f"partition {store.partition_values(p)} mixes bucket counts {c}"
    if mode == BucketMode.HASH_FIXED:
        keys = list(store.schema.bucket_keys)
        for e in live:
            rows = file_keys(t, e)
            if not rows.num_rows:
                continue
            got = buckets_from_hashes(bucket_key_hashes(rows, keys, store.field_types(keys)), e.total_buckets)
            assert (got == e.bucket).all(), (
                f"file {e.file.file_name} of bucket {e.bucket}/{e.total_buckets} holds keys of buckets "
                f"{sorted(set(got.tolist()))}"
            )
    elif mode == BucketMode.HASH_DYNAMIC:
        index: dict[tuple[bytes, int], np.ndarray] = {}
        for ie in store.index_entries(snap):
            if ie.index_file.index_type == HASH_INDEX:
                index[(ie.partition, ie.bucket)] = read_hash_index(store.file_io, store.index_file_path(ie))
        owner: dict[tuple[bytes, int], int] = {}
        for (p, b), hashes in index.items():
            for h in np.unique(hashes).tolist():
                assert (p, h) not in owner, f"hash {h} in buckets {owner[(p, h)]} and {b}"
                owner[(p, h)] = b
        for e in live:
            rows = file_keys(t, e)
            hashes = bucket_key_hashes(rows, store.key_names, store.key_types)
            for h in np.unique(hashes).tolist():
                assert owner.get((e.partition, h)) == e.bucket, (
                    f"key hash {h} in bucket {e.bucket} but the index says {owner.get((e.partition, h))}"
                )
