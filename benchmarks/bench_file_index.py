"""Point queries with and without bloom-filter and bitmap file indexes, in one run.

Not a timed test: it prints the files each query opens and the ratio of its time without the index
to its time with it, on the same tables in the same process.

    python benchmarks/bench_file_index.py               # 200 files of 5,000 rows
    python benchmarks/bench_file_index.py --files 50

Two tables, every value random so that min/max statistics cannot skip: an append table of
``--files`` commits (one data file each) queried on ``k = x`` and ``name = 'x'`` (both
bloom-filtered), and a merge-on-write primary-key table of the same rows, fully compacted into one
sorted run of small files (``target-file-size`` 96 kb), queried on its key (``k = x``: min/max
statistics already find its one file) and on ``name``; and the append table's ``city``, a column of
few values (three per file, 600 in all) indexed by bitmaps. Each query runs with
``file-index.read.enabled`` on and off (the option set by ``ALTER``), and must return the same rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import lakelog  # noqa: E402
from lakelog.connector.table.scan import plan_splits  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("name", pa.string()), ("amount", pa.float64()),
                    ("city", pa.string())])


def batches(files: int, rows: int, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    keys = rng.permutation(files * rows).astype(np.int64)
    out = []
    for i in range(files):
        k = keys[i * rows : (i + 1) * rows]
        cities = np.char.add("city-", ((i * 3 + rng.integers(0, 3, rows)) % 600).astype(str)).astype(object)
        cities[0], cities[-1] = "a", "z"  # every file spans the others: statistics cannot skip
        out.append(pa.table({"k": k, "name": pa.array(np.char.add("user-", k.astype(str))),
                             "amount": rng.random(rows), "city": pa.array(cities, pa.string())}, schema=SCHEMA))
    return out


def query(t: lakelog.Table, expr: pc.Expression, reps: int) -> tuple[int, float, int]:
    """(files planned, best seconds, rows)."""
    files = sum(len(s.files) for s in plan_splits(t.store, t.latest_snapshot(), filter=expr))
    best, rows = float("inf"), -1
    for _ in range(reps):
        t0 = time.perf_counter()
        rows = t.to_arrow(filter=expr).num_rows
        best = min(best, time.perf_counter() - t0)
    return files, best, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    index = {"file-index.bloom-filter.columns": "k,name", "file-index.bloom-filter.k.items": str(a.rows),
             "file-index.bloom-filter.name.items": str(a.rows), "file-index.bloom-filter.k.fpp": "0.01",
             "file-index.bloom-filter.name.fpp": "0.01"}
    data = batches(a.files, a.rows, seed=1)
    probe = int(data[a.files // 2].column("k")[7].as_py())
    with tempfile.TemporaryDirectory(prefix="bench-fi-") as tmp:
        cat = lakelog.Catalog(tmp)
        tables = {
            "append": cat.create_table("db.a", SCHEMA, options={"bucket": "1", "bucket-key": "k", **index,
                                                                "file-index.bitmap.columns": "city",
                                                                "compaction.min.file-num": "100000"}),
            "pk, deletion vectors": cat.create_table(
                "db.p", SCHEMA, primary_key=["k"],
                options={"bucket": "1", **index, "deletion-vectors.enabled": "true", "write-only": "true",
                         "target-file-size": "96 kb",  # rolls at 128k rows: size the filters for that
                         "file-index.bloom-filter.k.items": "131072",
                         "file-index.bloom-filter.name.items": "131072"}),
        }
        for t in tables.values():
            for b in data:
                t.write(b)
        tables["pk, deletion vectors"].compact(full=True)  # one sorted run of many small files
        print(f"{a.files} files of {a.rows} rows per table; files opened and best of {a.reps}\n")
        print(f"{'table':<22} {'query':<22} {'files with':>10} {'without':>8} {'time ratio':>11}")
        cases = [("append", "k"), ("append", "name"), ("append", "city"), ("pk, deletion vectors", "k"),
                 ("pk, deletion vectors", "name")]
        city = f"city-{(a.files // 2) * 3 % 600}"
        for table, column in cases:
            t = tables[table]
            value = {"k": probe, "name": f"user-{probe}", "city": city}[column]
            expr = pc.field(column) == value
            t.alter(lakelog.SetOption("file-index.read.enabled", "true"))
            on = query(cat.get_table(t.identifier), expr, a.reps)
            t.alter(lakelog.SetOption("file-index.read.enabled", "false"))
            off = query(cat.get_table(t.identifier), expr, a.reps)
            ok = on[2] == off[2] and (on[2] == 1 or column == "city" and on[2] > 0)
            print(f"{table:<22} {column + ' = ' + str(value)[:12]:<22} {on[0]:>10} {off[0]:>8} "
                  f"{off[1] / on[1]:10.1f}x" + ("" if ok else "  ROWS DIFFER"))


if __name__ == "__main__":
    main()
