"""Write cost of each Parquet layout choice (field ids, statistics, INT96, decimals as integers,
checksums).

Not a timed test: one run prints CPU-time *ratios* of one data-file write (``DataFileWriter.write`` of a
sorted key-value table, statistics for the manifest included) against a baseline, variants interleaved
in the same process, files on tmpfs so that the disk is out of the figure. See benchmarks/README.md.

    python benchmarks/bench_parquet_layout.py                        # 1M rows, 7 rounds
    python benchmarks/bench_parquet_layout.py --rows 200000 --rounds 3
    python benchmarks/bench_parquet_layout.py --baseline OLD/connector/format/data_file.py
        # adds the data_file module of another checkout (the code before these layouts) as "before"

It then prints the read side of the checksums: CPU time of ``read_data_file`` (every column) of the
shipped file, which verifies its footer checksum and every page CRC, against the same rows written
without checksums (nothing to verify), and ``pq.read_table`` of each file for reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.connector.format.data_file import DataFileWriter, read_data_file
from lakelog.connector.format.parquet_layout import (
    WriteLayout,
    data_file_schema,
    decimal_as_integer_supported,
)
from lakelog.connector.format.types import fields_from_arrow_schema

__all__ = ["main"]

ORDERS = [("name", pa.string()), ("price", pa.float64()), ("qty", pa.int64()), ("city", pa.string())]
WIDE = [*ORDERS, ("n", pa.int32()), ("d10", pa.decimal128(10, 2)), ("d38", pa.decimal128(38, 10)),
        ("day", pa.date32()), ("ts3", pa.timestamp("ms")), ("ts6", pa.timestamp("us")),
        ("ltz6", pa.timestamp("us", tz="UTC"))]
SHAPES = {"orders": ORDERS, "wide": WIDE, "wide+ts9": [*WIDE, ("ts9", pa.timestamp("ns"))]}

OLD = WriteLayout(field_ids=False, statistics="none", int96=False, decimal_as_integer=False, checksums=False)
VARIANTS: dict[str, WriteLayout] = {
    "old layout (new code)": OLD,
    "+ field ids": WriteLayout(True, "none", False, False, False),
    "+ statistics, keys": WriteLayout(False, "keys", False, False, False),
    "+ statistics, all": WriteLayout(False, "all", False, False, False),
    "+ INT96": WriteLayout(False, "none", True, False, False),
    "+ checksums (page CRCs, footer)": WriteLayout(False, "none", False, False, True),
    "shipped (ids, all stats, INT96, CRCs)": WriteLayout(),
    "shipped without checksums": WriteLayout(checksums=False),
    "alternative (ids, key stats, INT96)": WriteLayout(statistics="keys", checksums=False),
}
if decimal_as_integer_supported():
    VARIANTS["+ decimals as INT32/INT64"] = WriteLayout(False, "none", False, True, False)


def key_value_table(columns: list[tuple[str, pa.DataType]], rows: int, seed: int) -> tuple[pa.Table, pa.Schema]:
    """A sorted primary-key data file's rows (``_KEY_id``, system columns, ``id`` and ``columns``)."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(rows * 4, rows, replace=False)).astype(np.int64)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), *columns])
    arrays: list[pa.Array] = [pa.array(ids)]
    for _, t in columns:
        nulls = rng.random(rows) < 0.05
        if pa.types.is_string(t):
            values = pa.array([f"user-{i}" for i in rng.integers(0, rows, rows)], t, mask=nulls)
        elif pa.types.is_floating(t):
            values = pa.array(rng.random(rows) * 1000, t, mask=nulls)
        elif pa.types.is_decimal(t):
            ints = pa.array(rng.integers(-(10**7), 10**7, rows), pa.int64(), mask=nulls)
            values = ints.cast(pa.decimal128(38, t.scale)).cast(t)
        elif pa.types.is_date32(t):
            values = pa.array(rng.integers(0, 20_000, rows).astype(np.int32), pa.int32(), mask=nulls).view(t)
        elif pa.types.is_timestamp(t):
            per = {"ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
            values = pa.array(rng.integers(0, 2 * 10**9, rows) * per + rng.integers(0, per, rows), pa.int64(),
                              mask=nulls).view(t)
        else:
            values = pa.array(rng.integers(0, 10_000, rows), pa.int64(), mask=nulls).cast(t)
        arrays.append(values)
    fields = fields_from_arrow_schema(schema)
    file_schema = data_file_schema(fields, ["id"], ["id"])
    kv = pa.Table.from_arrays(
        [pa.array(ids), pa.array(np.arange(rows, dtype=np.int64)), pa.array(np.zeros(rows, np.int8)), *arrays],
        schema=file_schema,
    )
    return kv, file_schema


def writer_for(schema: pa.Schema, directory: str, layout: Optional[WriteLayout], module: Any = None) -> Any:
    fields = fields_from_arrow_schema(pa.schema(list(schema)[3:]))
    id_type = fields[0].type
    kwargs: dict[str, Any] = {"layout": layout} if layout is not None else {}
    cls = module.DataFileWriter if module is not None else DataFileWriter
    return cls(directory, 0, ["_KEY_id"], [id_type], [f.name for f in fields], [f.type for f in fields],
               file_schema=schema, **kwargs)


def cpu(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(columns: list[tuple[str, pa.DataType]], rows: int, rounds: int, root: str, before: Any) -> None:
    """Print the CPU time of one file write per variant, and its ratio to the baseline."""
    table, schema = key_value_table(columns, rows, seed=1)
    runs: dict[str, Callable[[], Any]] = {}
    if before is not None:
        runs["before (old code)"] = lambda: writer_for(schema, root, None, before).write(table, level=0)
    for name, layout in VARIANTS.items():
        runs[name] = lambda lo=layout: writer_for(schema, root, lo).write(table, level=0)
    times: dict[str, list[float]] = {k: [] for k in runs}
    sizes: dict[str, int] = {}
    for _ in range(rounds):
        for name, fn in runs.items():
            shutil.rmtree(root)
            os.makedirs(root)
            times[name].append(cpu(fn))
            sizes[name] = sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root))
    base = "before (old code)" if before is not None else "old layout (new code)"
    b_min, b_med = min(times[base]), statistics.median(times[base])
    print(f"{len(schema)} columns                          min s   ratio(min)  ratio(median)  size MiB")
    for name in runs:
        t = times[name]
        print(f"  {name:36s} {min(t):6.3f}   {min(t) / b_min:6.3f}      {statistics.median(t) / b_med:6.3f}"
              f"       {sizes[name] / 2**20:7.2f}")


def measure_read(columns: list[tuple[str, pa.DataType]], rows: int, rounds: int, root: str) -> None:
    """Print the CPU time of reading one data file back with its checksums verified, against the
    same file without checksums."""
    table, schema = key_value_table(columns, rows, seed=1)
    paths: dict[str, str] = {}
    for name, layout in (("without checksums", WriteLayout(checksums=False)), ("with checksums", WriteLayout())):
        d = os.path.join(root, name.replace(" ", "-"))
        os.makedirs(d)
        (meta,) = writer_for(schema, d, layout).write(table, level=0)
        paths[name] = os.path.join(d, meta.file_name)
    runs: dict[str, Callable[[], Any]] = {}
    for name, path in paths.items():
        runs[f"read_data_file, {name}"] = lambda p=path: read_data_file(p)
        runs[f"pq.read_table, {name}"] = lambda p=path: pq.read_table(p, use_threads=False)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            times[name].append(cpu(fn))
    base = "read_data_file, without checksums"
    b_min, b_med = min(times[base]), statistics.median(times[base])
    print(f"{len(schema)} columns, read                    min s   ratio(min)  ratio(median)")
    for name in runs:
        t = times[name]
        print(f"  {name:36s} {min(t):6.3f}   {min(t) / b_min:6.3f}      {statistics.median(t) / b_med:6.3f}")


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--baseline", help="a data_file.py to load as the 'before' code")
    args = ap.parse_args(argv)
    before = None
    if args.baseline:
        spec = importlib.util.spec_from_file_location("_before_data_file", args.baseline)
        assert spec is not None and spec.loader is not None
        before = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = before
        spec.loader.exec_module(before)
    root = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        print(f"pyarrow {pa.__version__}, {args.rows} rows, {args.rounds} rounds; CPU seconds of one file write")
        for shape, columns in SHAPES.items():
            print(f"\n{shape}: ", end="")
            measure(columns, args.rows, args.rounds, root, before)
        for shape, columns in SHAPES.items():
            shutil.rmtree(root)
            os.makedirs(root)
            print(f"\n{shape}: ", end="")
            measure_read(columns, args.rows, args.rounds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
