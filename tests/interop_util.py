"""Helpers for the pypaimon interoperability suite: pypaimon as the external oracle.

pypaimon (a test dependency) reads and writes the same warehouse as lakelog. Everything here goes
through pypaimon's public catalog / read-builder / write-builder API; results come back as Arrow
tables and are compared order-insensitively with :func:`canon`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "pp_catalog",
    "pp_create_table",
    "pp_table",
    "pp_write",
    "pp_read",
    "pp_plan_files",
    "pp_alter",
    "canon",
    "assert_same_rows",
    "data_files",
    "keys_by_bucket",
    "bucket_of_key",
    "pp_buckets",
    "PredicateFn",
]

PredicateFn = Callable[[Any], Any]
"""Builds a pypaimon ``Predicate`` from a ``PredicateBuilder``."""


def pp_catalog(warehouse: str) -> Any:
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": warehouse})


def pp_create_table(
    warehouse: str,
    identifier: str,
    schema: pa.Schema,
    *,
    primary_key: Optional[Sequence[str]] = None,
    partition_by: Optional[Sequence[str]] = None,
    options: Optional[Mapping[str, str]] = None,
) -> None:
    from pypaimon import Schema

    cat = pp_catalog(warehouse)
    cat.create_database(identifier.split(".")[0], True)
    ps = Schema.from_pyarrow_schema(
        schema,
        partition_keys=list(partition_by or []),
        primary_keys=list(primary_key or []),
        options=dict(options or {}),
    )
    cat.create_table(identifier, ps, False)


def pp_table(warehouse: str, identifier: str, snapshot_id: Optional[int] = None) -> Any:
    t = pp_catalog(warehouse).get_table(identifier)
    if snapshot_id is not None:
        t = t.copy({"scan.snapshot-id": str(snapshot_id)})
    return t


def pp_write(warehouse: str, identifier: str, *batches: pa.Table) -> None:
    """One pypaimon batch commit holding ``batches`` (cast to the table's Arrow schema)."""
    t = pp_table(warehouse, identifier)
    wb = t.new_batch_write_builder()
    write = wb.new_write()
    commit = wb.new_commit()
    try:
        for b in batches:
            write.write_arrow(b)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _read_builder(
    warehouse: str,
    identifier: str,
    snapshot_id: Optional[int],
    columns: Optional[Sequence[str]],
    predicate: Optional[PredicateFn],
) -> Any:
    rb = pp_table(warehouse, identifier, snapshot_id).new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate(rb.new_predicate_builder()))
    if columns is not None:
        rb = rb.with_projection(list(columns))
    return rb


def pp_read(
    warehouse: str,
    identifier: str,
    *,
    snapshot_id: Optional[int] = None,
    columns: Optional[Sequence[str]] = None,
    predicate: Optional[PredicateFn] = None,
) -> pa.Table:
    """The table's rows as pypaimon reads them (merged, projected, filtered, as of a snapshot)."""
    rb = _read_builder(warehouse, identifier, snapshot_id, columns, predicate)
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def pp_plan_files(
    warehouse: str,
    identifier: str,
    *,
    snapshot_id: Optional[int] = None,
    predicate: Optional[PredicateFn] = None,
) -> list[str]:
    """Names of the data files pypaimon's scan keeps after partition / bucket / statistics pruning."""
    rb = _read_builder(warehouse, identifier, snapshot_id, None, predicate)
    return sorted(f.file_name for s in rb.new_scan().plan().splits() for f in s.files)


def pp_alter(warehouse: str, identifier: str, changes: list[Any]) -> None:
    pp_catalog(warehouse).alter_table(identifier, changes)


# ---- comparison --------------------------------------------------------------------------------------
def canon(t: pa.Table, columns: Optional[Sequence[str]] = None) -> list[tuple[Any, ...]]:
    """Rows of ``t`` (in ``columns`` order) as tuples, sorted: an order-insensitive fingerprint.

    Nested values (lists, dicts, map entry lists) are compared by value; sorting uses their repr.
    """
    names = list(columns) if columns is not None else t.column_names
    cols = [t.column(n).to_pylist() for n in names]
    return sorted(zip(*cols), key=repr) if cols else []


def assert_same_rows(got: pa.Table, want: pa.Table, what: str = "") -> None:
    """Same column names and the same multiset of rows (any order)."""
    assert sorted(got.column_names) == sorted(want.column_names), (what, got.column_names, want.column_names)
    names = want.column_names
    g, w = canon(got, names), canon(want, names)
    if g != w:
        missing = [r for r in w if r not in g][:5]
        extra = [r for r in g if r not in w][:5]
        raise AssertionError(
            f"{what}: {len(g)} rows vs {len(w)} expected; missing {missing}; unexpected {extra}"
        )


# ---- data files on disk -------------------------------------------------------------------------------
def data_files(table_path: str) -> Iterable[tuple[int, str]]:
    """(bucket, path) of every Parquet data file under ``table_path``, live or not."""
    for root, _dirs, files in os.walk(table_path):
        base = os.path.basename(root)
        if not base.startswith("bucket-"):
            continue
        bucket = int(base[len("bucket-") :])
        for name in files:
            if name.endswith(".parquet"):
                yield bucket, os.path.join(root, name)


def keys_by_bucket(table_path: str, key_columns: Sequence[str]) -> dict[tuple[Any, ...], set[int]]:
    """Every key tuple found in any data file, with the set of buckets holding it."""
    out: dict[tuple[Any, ...], set[int]] = {}
    for bucket, path in data_files(table_path):
        t = pq.read_table(path, columns=list(key_columns))
        for key in zip(*(t.column(c).to_pylist() for c in key_columns)):
            out.setdefault(key, set()).add(bucket)
    return out


def bucket_of_key(mapping: Mapping[tuple[Any, ...], set[int]]) -> dict[tuple[Any, ...], int]:
    """``keys_by_bucket`` result -> key -> bucket, asserting each key lives in exactly one bucket."""
    split = {k: b for k, b in mapping.items() if len(b) != 1}
    assert not split, f"keys found in several buckets: {dict(list(split.items())[:5])}"
    return {k: next(iter(b)) for k, b in mapping.items()}


def pp_buckets(warehouse: str, identifier: str, keys: pa.Table) -> list[int]:
    """The bucket pypaimon's own writer (``FixedBucketRowKeyExtractor``) gives each row of ``keys``
    (the bucket-key columns) in the table: an oracle independent of lakelog's bucket function."""
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor

    schema = pp_table(warehouse, identifier).table_schema
    arrow = PyarrowFieldParser.from_paimon_schema(schema.fields)
    n = keys.num_rows
    columns = [
        keys.column(f.name).combine_chunks().cast(f.type) if f.name in keys.column_names else pa.nulls(n, f.type)
        for f in arrow
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=pa.schema([f.with_nullable(True) for f in arrow]))
    _, buckets = FixedBucketRowKeyExtractor(schema).extract_partition_bucket_batch(batch)
    return list(buckets)
