"""The lakelog Flink source on a MiniCluster: a parallel batch scan and a streaming read with a consumer."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import lakelog

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), False),
        pa.field("id", pa.int64(), False),
        pa.field("v", pa.string()),
        pa.field("amt", pa.decimal128(10, 2)),
    ]
)


def _rows(dt: str, ids: list[int], v: str) -> pa.Table:
    return pa.table(
        {
            "dt": [dt] * len(ids),
            "id": ids,
            "v": [f"{v}{i}" for i in ids],
            "amt": [Decimal(i) / 4 for i in ids],
        },
        schema=SCHEMA,
    )


def _env(flink_env: Any, streaming: bool) -> Any:
    if streaming:
        return flink_env(mode="streaming", parallelism=2, checkpoint_interval_ms=500)
    return flink_env(mode="batch", parallelism=2)


def test_batch_scan_parallel_with_pushdown(tmp_path: Any, flink_env: Any) -> None:
    from lakelog.operators.source import plan_batch, read_lakelog

    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "3"}
    )
    t.write(pa.concat_tables([_rows("a", list(range(20)), "x"), _rows("b", list(range(20)), "y")]))
    t.write(_rows("a", [1, 2], "z"))
    _, splits = plan_batch(t.path, filter="dt = 'a' AND id < 5")
    assert 1 <= len(splits) <= 3  # partition b pruned
    ds = read_lakelog(_env(flink_env, False), t.path, columns=["id", "v", "amt"], filter="dt = 'a' AND id < 5")
    got = sorted(tuple(r) for r in ds.execute_and_collect())
    assert got == [
        (0, "x0", Decimal("0.00")),
        (1, "z1", Decimal("0.25")),
        (2, "z2", Decimal("0.50")),
        (3, "x3", Decimal("0.75")),
        (4, "x4", Decimal("1.00")),
    ]


def test_streaming_read_rowkinds_consumer_and_resume(tmp_path: Any, flink_env: Any) -> None:
    from pyflink.common import RowKind

    from lakelog.operators.source import read_lakelog

    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", SCHEMA, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"}
    )
    t.write(_rows("a", [1, 2], "x"))  # 1
    t.write(_rows("b", [3], "x"))  # 2

    def run(expect: int, actions: dict[int, Any]) -> list[tuple[Any, tuple[Any, ...]]]:
        ds = read_lakelog(
            _env(flink_env, True),
            t.path,
            mode="streaming",
            consumer_id="c1",
            discovery_interval=0.1,
            columns=["dt", "id", "v"],
        )
        got: list[tuple[Any, tuple[Any, ...]]] = []
        it = ds.execute_and_collect()
        try:
            for r in it:
                got.append((r.get_row_kind(), tuple(r)))
                if len(got) in actions:
                    actions[len(got)]()
                if len(got) >= expect:
                    break
        finally:
            it.close()
        return got

    got = run(
        6, {3: lambda: t.write(_rows("a", [1], "u")), 5: lambda: t.delete(pa.table({"dt": ["b"], "id": [3]}))}
    )
    assert sorted(got[:3]) == [
        (RowKind.INSERT, ("a", 1, "x1")),
        (RowKind.INSERT, ("a", 2, "x2")),
        (RowKind.INSERT, ("b", 3, "x3")),
    ]
    assert got[3:] == [
        (RowKind.UPDATE_BEFORE, ("a", 1, "x1")),
        (RowKind.UPDATE_AFTER, ("a", 1, "u1")),
        (RowKind.DELETE, ("b", 3, "x3")),
    ]
    assert t.store.consumer_manager.get("c1") == 5  # snapshots 1..4 read

    # expiration keeps what the consumer still needs
    t.write(_rows("c", [9], "n"))  # 5
    t.expire_snapshots(retain_min=1, retain_max=1)
    assert [s.id for s in t.snapshots()] == [5]
    # a new job with the same consumer id resumes at snapshot 5: no full read again
    got2 = run(1, {})
    assert got2 == [(RowKind.INSERT, ("c", 9, "n9"))]
