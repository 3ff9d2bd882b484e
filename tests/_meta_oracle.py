"""pypaimon-written tables for the metadata-format tests (manifests, snapshots, tags).

pypaimon is only a test oracle: it writes the reference files and reads back what lakelog writes.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string()), ("x", pa.float64())])


def _batch(i: int) -> pa.Table:
    return pa.table(
        {
            "dt": [f"2024-01-0{i % 2 + 1}"] * 5 + ["2024-01-03"],
            "id": list(range(i * 5, i * 5 + 6)),
            "v": ["a" * (k * 3) for k in range(6)],
            "x": [1.5, None, 2.0, 3.0, 4.0, 5.0],
        },
        schema=SCHEMA,
    )


def build_tables(warehouse: str) -> dict[str, Any]:
    """Create ``db.pk`` (primary key dt+id, partitioned by dt, 2 buckets) and ``db.ap`` (append,
    partitioned by dt) with three commits each, a tag ``t1`` on snapshot 2, a tag ``ttl`` with a
    retention, and an overwrite of partition 2024-01-03 in ``db.ap`` (snapshot 4, DELETE entries).

    Returns {"pk": table, "ap": table, "pk_path": ..., "ap_path": ..., "catalog": ...}.
    """
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", False)
    catalog.create_table(
        "db.pk",
        Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options={"bucket": "2"}
        ),
        False,
    )
    catalog.create_table("db.ap", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"]), False)
    out: dict[str, Any] = {"catalog": catalog}
    for name in ("pk", "ap"):
        table = catalog.get_table(f"db.{name}")
        for i in range(3):
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            write.write_arrow(_batch(i))
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()
        table.create_tag("t1", 2)
        table.create_tag("ttl", 3, time_retained="1d")
        out[name] = table
        out[f"{name}_path"] = os.path.join(warehouse, "db.db", name)
    ap = out["ap"]
    builder = ap.new_batch_write_builder().overwrite({"dt": "2024-01-03"})
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"dt": ["2024-01-03"], "id": [99], "v": ["over"], "x": [9.0]}, schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    out["ap"] = out["catalog"].get_table("db.ap")
    out["pk"] = out["catalog"].get_table("db.pk")
    return out


def read_all(table: Any) -> list[dict[str, Any]]:
    """Every row pypaimon reads from ``table``'s latest snapshot, sorted."""
    rb = table.new_read_builder()
    splits = rb.new_scan().plan().splits()
    t = rb.new_read().to_arrow(splits)
    return sorted(t.to_pylist(), key=lambda r: (r["dt"], r["id"]))
