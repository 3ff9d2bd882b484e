"""The embedded demo: a partitioned primary-key table on a local warehouse, no Flink needed.

Run: ``python -m lakelog.jobs.demo [--warehouse DIR]``
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Sequence
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

import lakelog

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("status", pa.string()),
    ]
)


def _orders(dt: str, ids: Sequence[int], status: str, scale: int) -> pa.Table:
    from decimal import Decimal

    return pa.table(
        {
            "dt": [dt] * len(ids),
            "id": list(ids),
            "customer": [f"c{i % 7}" for i in ids],
            "amount": [Decimal(i * scale) / 100 for i in ids],
            "status": [status] * len(ids),
        },
        schema=SCHEMA,
    )


def _text(table: pa.Table) -> str:
    """A small right-aligned text rendering of an Arrow table (the demo needs no pandas)."""
    cells = [[str(v) for v in col.to_pylist()] for col in table.columns]
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(table.column_names, cells)]
    lines = [" ".join(n.rjust(w) for n, w in zip(table.column_names, widths))]
    for row in zip(*cells):
        lines.append(" ".join(c.rjust(w) for c, w in zip(row, widths)))
    return "\n".join(lines)


def run(warehouse: str) -> None:
    catalog = lakelog.Catalog(warehouse)
    t = catalog.create_table(
        "shop.orders",
        SCHEMA,
        primary_key=["dt", "id"],
        partition_by=["dt"],
        options={"bucket": "4"},
        exist_ok=True,
    )
    print(f"table {t.identifier} at {t.path}")
    s1 = t.write(
        pa.concat_tables(
            [_orders("2024-06-01", range(1, 9), "new", 1000), _orders("2024-06-02", range(1, 5), "new", 700)]
        )
    )
    s2 = t.write(_orders("2024-06-01", [2, 3, 9], "paid", 1100))  # two updates and one insert
    s3 = t.delete(pa.table({"dt": ["2024-06-01", "2024-06-02"], "id": [5, 1]}))
    with t.writer() as w:  # several batches, one commit
        w.write(_orders("2024-06-02", [2], "shipped", 900))
        w.write(_orders("2024-06-03", [1, 2], "new", 500))
    t.create_tag("after-load")
    s5 = t.compact(full=True)
    print(f"snapshots written: {s1}, {s2}, {s3}, {w.snapshot_id} and compaction {s5}")

    print("\n== table (latest) ==")
    print(_text(t.to_arrow().sort_by([("dt", "ascending"), ("id", "ascending")])))
    print("\n== paid orders on 2024-06-01 (filter pushdown) ==")
    flt = (pc.field("dt") == "2024-06-01") & (pc.field("status") == "paid")
    print(_text(t.to_arrow(columns=["id", "amount"], filter=flt).sort_by("id")))
    print(f"\n== time travel: snapshot {s1} ==")
    print(f"{t.to_arrow(snapshot_id=s1).num_rows} rows then, {t.to_arrow().num_rows} rows now")
    print(f"\n== changes after snapshot {s1} ==")
    print(
        _text(t.changes(s1).sort_by([("dt", "ascending"), ("id", "ascending")]))
    )
    print("\n== snapshot history ==")
    for s in t.snapshots():
        print(f"  {s.id:>3}  {s.commit_kind:8}  total={s.total_record_count:<4} delta={s.delta_record_count}")
    print(f"tags: {t.tags()}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--warehouse", help="warehouse directory (default: a temporary one, removed afterwards)")
    args = p.parse_args(argv)
    if args.warehouse:
        run(args.warehouse)
        return
    tmp = tempfile.mkdtemp(prefix="lakelog-demo-")
    try:
        run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
