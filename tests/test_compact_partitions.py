"""Compaction of some partitions: ``t.compact(partitions=...)``, ``lakelog compact --partition`` (in
process or as the Flink job), and ``CALL sys.compact(..., partitions => 'k=v,k2=v2;k=v3')`` compact
the chosen partitions' buckets only and leave every other file as it was; what the table holds
never changes."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError
from lakelog.jobs.cli import main as cli
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError
from lakelog.operators.sql.procedures import CallContext, call_procedure

SCHEMA = pa.schema(
    [
        pa.field("region", pa.string(), False),
        pa.field("day", pa.int32(), False),
        pa.field("id", pa.int64(), False),
        pa.field("v", pa.string()),
    ]
)
REGIONS = ("eu", "us")
DAYS = (1, 2, 3)
Key = tuple[str, int, int]


def make(catalog: lakelog.Catalog) -> lakelog.Table:
    return catalog.create_table(
        "db.t", SCHEMA, primary_key=["region", "day", "id"], partition_by=["region", "day"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "100"},
    )  # fmt: skip


def rows(keys: list[Key], v: str) -> pa.Table:
    return pa.table(
        {
            "region": [k[0] for k in keys],
            "day": pa.array([k[1] for k in keys], pa.int32()),
            "id": [k[2] for k in keys],
            "v": [f"{v}-{k[2]}" for k in keys],
        },
        schema=SCHEMA,
    )


def content(t: lakelog.Table) -> dict[Key, str]:
    return {(r["region"], r["day"], r["id"]): r["v"] for r in t.to_arrow().to_pylist()}


def files_by_partition(t: lakelog.Table) -> dict[tuple[str, int], dict[int, set[str]]]:
    """(region, day) -> bucket -> the names of its live files."""
    out: dict[tuple[str, int], dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for f in t.files().to_pylist():
        parts = dict(p.split("=", 1) for p in f["file_path"].split("/") if "=" in p)
        out[(parts["region"], int(parts["day"]))][f["bucket"]].add(f["file_path"].rsplit("/", 1)[1])
    return out


def chosen(spec: dict[str, Any]) -> set[tuple[str, int]]:
    return {
        (r, d) for r in REGIONS for d in DAYS
        if spec.get("region", r) == r and int(spec.get("day", d)) == d
    }  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_compacting_chosen_partitions_against_a_model(catalog: lakelog.Catalog, seed: int) -> None:
    """Random upserts, deletes and partition-scoped full compactions: the table always equals the
    model; each compaction leaves one file per bucket in the partitions it chose and every other
    partition's files exactly as they were."""
    rnd = random.Random(seed)
    t = make(catalog)
    model: dict[Key, str] = {}
    keys = [(r, d, i) for r in REGIONS for d in DAYS for i in range(30)]
    for step in range(14):
        if step % 3 == 2:  # a compaction of some partitions (strings, as a command line gives them)
            specs = rnd.choice(
                [
                    [{"region": rnd.choice(REGIONS)}],
                    [{"day": str(rnd.choice(DAYS))}],
                    [{"region": "eu", "day": "2"}, {"region": "us", "day": "3"}],
                ]
            )
            want = set().union(*(chosen(s) for s in specs))
            before = files_by_partition(t)
            sid = t.compact(partitions=specs)
            after = files_by_partition(t)
            for part in set(before) | set(after):
                if part in want:
                    assert all(len(names) == 1 for names in after[part].values()), (part, after[part])
                else:
                    assert after.get(part) == before.get(part), part
            if sid is not None:
                assert t.snapshot(sid).commit_kind == "COMPACT"
        elif rnd.random() < 0.25 and model:
            gone = rnd.sample(sorted(model), min(5, len(model)))
            t.delete(rows(gone, "x").select(["region", "day", "id"]))
            for k in gone:
                model.pop(k)
        else:
            batch = rnd.sample(keys, 25)
            t.write(rows(batch, f"s{step}"))
            model.update({k: f"s{step}-{k[2]}" for k in batch})
        assert content(t) == model, step


def test_a_spec_names_partition_fields_and_values_of_their_types(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows([("eu", 1, 1)], "a"))
    t.write(rows([("eu", 1, 2)], "b"))
    latest = t.latest_snapshot().id
    with pytest.raises(InvalidInputError, match="'id' is not a partition field"):
        t.compact(partitions=[{"id": "1"}])
    with pytest.raises(InvalidInputError, match="day=.*'monday'.*int32"):
        t.compact(partitions=[{"day": "monday"}])
    assert t.compact(partitions=[{"region": "asia"}]) is None  # matches nothing: nothing to do
    assert t.compact(partitions=[]) is None
    assert t.latest_snapshot().id == latest
    assert t.compact(partitions=[{"region": "eu", "day": 1}]) == latest + 1


def test_cli_compact_partition(catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    t = make(catalog)
    for v in ("a", "b"):
        t.write(rows([("eu", 1, 1), ("us", 1, 1)], v))
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--partition", "region=eu,day=1"]) == 0
    assert "compaction committed snapshot 3" in capsys.readouterr().out
    files = files_by_partition(t)
    assert [len(n) for n in files[("eu", 1)].values()] == [1] and [len(n) for n in files[("us", 1)].values()] == [2]
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--partition", "region"]) == 2
    assert "expected k=v" in capsys.readouterr().err
    assert t.latest_snapshot().id == 3


def test_the_compaction_jobs_plan_keeps_to_the_chosen_partitions(catalog: lakelog.Catalog) -> None:
    """What the Flink compaction job (batch and streaming planner) compacts with ``partitions``."""
    from lakelog.connector.table.partition_specs import partition_spec
    from lakelog.operators.compact_buckets import parse_bucket_key, plan_compaction

    t = make(catalog)
    for v in ("a", "b"):
        t.write(rows([(r, d, i) for r in REGIONS for d in DAYS for i in range(4)], v))
    every = plan_compaction(t.store, full=True)
    assert {t.store.partition_values(parse_bucket_key(k)[0]) for k in every} == {
        (r, d) for r in REGIONS for d in DAYS
    }
    specs = [partition_spec(t.store, {"day": "2"}), partition_spec(t.store, {"region": "us", "day": "3"})]
    chosen = plan_compaction(t.store, full=True, partitions=specs)
    assert {t.store.partition_values(parse_bucket_key(k)[0]) for k in chosen} == {("eu", 2), ("us", 2), ("us", 3)}
    assert chosen == [k for k in every if k in chosen]


def test_call_sys_compact_partitions(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    for v in ("a", "b"):
        t.write(rows([("eu", 1, 1), ("eu", 2, 1), ("us", 3, 1)], v))
    ctx = CallContext(catalog, "lk", "db")
    result = call_procedure(ctx, "compact", [], {"table": "db.t", "partitions": "region=eu,day=1;region=us"})
    assert result.rows == [("Success",)]
    files = files_by_partition(t)
    assert {p: sum(len(n) for n in b.values()) for p, b in files.items()} == {("eu", 1): 1, ("eu", 2): 2, ("us", 3): 1}
    with pytest.raises(SqlError, match="argument 'partitions' = 'region'.*k=v"):
        call_procedure(ctx, "compact", ["t"], {"partitions": "region"})
    with pytest.raises(UnsupportedStatementError, match=r"\['partition_idle_time'\] are not supported"):
        call_procedure(ctx, "compact", ["t"], {"partition_idle_time": "1 d"})
    assert content(t) == {("eu", 1, 1): "b-1", ("eu", 2, 1): "b-1", ("us", 3, 1): "b-1"}


def test_partition_text_is_read_alike_by_the_cli_and_sql(
    catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One reader of ``k=v[,k2=v2][;...]`` text: ``--partition`` and ``CALL sys.*`` accept and refuse
    the same spellings (spaces around keys and values are dropped, as Paimon does)."""
    from lakelog.connector.table.partition_specs import parse_partition_specs
    from lakelog.jobs.cli import partition_arg

    assert parse_partition_specs(" region = eu , day=1 ; day=2 ;") == [
        {"region": "eu", "day": "1"},
        {"day": "2"},
    ]
    for bad, why in (
        ("region", "'region'"),
        ("=eu", "'=eu'"),
        ("day=1,,", "''"),
        (" ; ", "names no partition"),
    ):
        with pytest.raises(InvalidInputError, match=why):
            parse_partition_specs(bad)
    assert partition_arg("region = eu, day = 1") == {"region": "eu", "day": "1"}
    t = make(catalog)
    for v in ("a", "b"):
        t.write(rows([("eu", 1, 1), ("us", 1, 1)], v))
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--partition", "region= eu ,day=1"]) == 0
    assert [len(n) for n in files_by_partition(t)[("eu", 1)].values()] == [1]
    # several partitions are several flags on the command line, not one ';' list
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--partition", "region=us;day=1"]) == 2
    assert "one partition per --partition" in capsys.readouterr().err
    ctx = CallContext(catalog, "lk", "db")
    assert call_procedure(ctx, "compact", ["t"], {"partitions": " region = us "}).rows == [("Success",)]
    assert [len(n) for n in files_by_partition(t)[("us", 1)].values()] == [1]
    with pytest.raises(SqlError, match="argument 'partitions' = ' ; '.*names no partition"):
        call_procedure(ctx, "compact", ["t"], {"partitions": " ; "})


def test_where_chooses_partitions_by_a_predicate(
    catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Paimon's ``where`` argument of compact: a predicate on the partition fields, from Python,
    ``CALL sys.compact``, ``lakelog compact --where`` and the compaction job's planner; other
    columns, or with ``partitions``, are refused by name before anything is compacted."""

    def compacted(t: lakelog.Table) -> set[tuple[str, int]]:
        """The partitions whose buckets hold one file each."""
        return {p for p, b in files_by_partition(t).items() if all(len(n) == 1 for n in b.values())}

    t = make(catalog)
    every = [(r, d, i) for r in REGIONS for d in DAYS for i in range(6)]
    for v in ("a", "b"):
        t.write(rows(every, v))
    model = content(t)
    assert compacted(t) == set()
    latest = t.latest_snapshot().id
    for bad, match in (
        ("id > 3", r"only the partition fields \['region', 'day'\].*id"),
        ("day >", "ends too early"),
    ):
        with pytest.raises(InvalidInputError, match=match):
            t.compact(where=bad)
    with pytest.raises(InvalidInputError, match="partitions or where, not both"):
        t.compact(partitions=[{"day": 1}], where="day = 1")
    assert t.latest_snapshot().id == latest
    assert t.compact(where="region = 'zz'") is None  # matches nothing: nothing to do
    assert t.compact(where="region = 'eu' AND day >= 2") == latest + 1
    assert compacted(t) == {("eu", 2), ("eu", 3)}
    ctx = CallContext(catalog, "lk", "db")
    assert call_procedure(ctx, "compact", ["t"], {"where": "day = 1 OR (region = 'us' AND day = 3)"}).rows == [
        ("Success",)
    ]
    assert compacted(t) == {("eu", 1), ("eu", 2), ("eu", 3), ("us", 1), ("us", 3)}
    from lakelog.operators.compact_buckets import parse_bucket_key, plan_compaction

    planned = plan_compaction(t.store, full=True, where="day <> 1")
    assert {t.store.partition_values(parse_bucket_key(k)[0]) for k in planned} == {("us", 2)}
    with pytest.raises(SqlError, match="'partitions' or 'where', not both"):
        call_procedure(ctx, "compact", ["t"], {"where": "day = 2", "partitions": "day=2"})
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--where", "day = 2", "--partition", "day=2"]) == 2
    assert "not both" in capsys.readouterr().err
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--where", "day IN (2)"]) == 0
    assert compacted(t) == {(r, d) for r in REGIONS for d in DAYS}
    assert content(t) == model
    flat = catalog.create_table("db.flat", SCHEMA, primary_key=["region", "day", "id"], options={"bucket": "1"})
    flat.write(rows(every[:3], "a"))
    with pytest.raises(InvalidInputError, match="not partitioned"):
        flat.compact(where="day = 1")
