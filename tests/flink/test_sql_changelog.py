"""The lookup changelog written through the SQL sink equals the one the Python API writes, for every
merge engine (issue 13: a second INSERT emitted +I(1,a2) where -U(1,a), +U(1,a2) was due)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from tests.flink.sqlkit import session

pytest.importorskip("pyflink")
pytestmark = [pytest.mark.slow]

ENGINES = {
    "dedup": {},
    "partial": {"merge-engine": "partial-update"},
    "agg": {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
    "first": {"merge-engine": "first-row"},
}
SCHEMA = pa.schema([pa.field("k", pa.int32(), False), ("v", pa.string()), ("n", pa.int64())])
ROUNDS = [[(1, "a", 1), (2, "b", 2)], [(1, "a2", 5), (3, "c", 3)], [(2, None, 7)]]


def _changes(t: lakelog.Table, marks: list[int]) -> list[list[tuple[str, int, object, int]]]:
    out = []
    for a, b in zip(marks, marks[1:]):
        rows = t.changes(a, b).to_pylist()
        out.append(sorted((r["rowkind"], r["k"], r["v"], r["n"]) for r in rows))
    return out


def test_lookup_changelog_of_sql_inserts_equals_the_python_apis(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    cat = lakelog.Catalog(wh)
    for name, opts in ENGINES.items():
        for side in ("sql", "py"):
            cat.create_table(
                f"db.{name}_{side}",
                SCHEMA,
                primary_key=["k"],
                options={"changelog-producer": "lookup", **opts},
            )
    sql = session("streaming", checkpoint_interval_ms=1000)
    sql.execute(f"CREATE CATALOG lk WITH ('type'='lakelog', 'warehouse'='{wh}')")
    sql.execute("USE CATALOG lk")
    sql.execute("USE db")
    marks: dict[str, list[int]] = {f"{n}_{s}": [0] for n in ENGINES for s in ("sql", "py")}
    for batch in ROUNDS:
        values = ", ".join(f"({k}, {'NULL' if v is None else repr(v)}, {n})" for k, v, n in batch)
        sql.execute("BEGIN STATEMENT SET")
        for name in ENGINES:
            sql.execute(f"INSERT INTO {name}_sql VALUES {values}")
        job = sql.execute("END")
        job.get_job_execution_result().result()
        data = pa.table(
            {"k": [r[0] for r in batch], "v": [r[1] for r in batch], "n": [r[2] for r in batch]},
            schema=SCHEMA,
        )
        for name in ENGINES:
            cat.get_table(f"db.{name}_py").write(data)
            for side in ("sql", "py"):
                marks[f"{name}_{side}"].append(cat.get_table(f"db.{name}_{side}").latest_snapshot().id)
    for name in ENGINES:
        via_sql = _changes(cat.get_table(f"db.{name}_sql"), marks[f"{name}_sql"])
        via_py = _changes(cat.get_table(f"db.{name}_py"), marks[f"{name}_py"])
        assert via_sql == via_py, name
    assert _changes(cat.get_table("db.dedup_sql"), marks["dedup_sql"])[1] == [
        ("+I", 3, "c", 3),
        ("+U", 1, "a2", 5),
        ("-U", 1, "a", 1),
    ]
