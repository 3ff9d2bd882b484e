"""Literals and arguments are taken exactly or refused by name (issue 19, items 4 and 8).

* A literal that a column cannot hold exactly (``1.054`` for a ``DECIMAL(5, 2)``, ``300`` for a
  TINYINT, an integer beyond BIGINT, a timestamp finer than the column) is refused by filters,
  ``where``, partition specs, overwrites, rescales, compactions and SQL, as a write refuses it,
  instead of being rounded into another value that then chooses rows or partitions; integer
  literals against DECIMAL columns compare exactly.
* Arguments of the wrong type or out of range raise an ``ArgumentError`` naming the argument
  (``ArgumentTypeError``, also a ``TypeError``, for the wrong type), never a raw ``AttributeError``,
  ``OverflowError`` or a misleading "corrupt snapshot file"; ``lakelog`` flags refuse negatives.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import (
    ArgumentError,
    ArgumentTypeError,
    InvalidInputError,
    LakelogError,
    OptionError,
)
from lakelog.jobs.cli import main as cli
from lakelog.operators.sql.errors import SqlError
from lakelog.operators.sql.overwrite import literal_value, static_partition, truncate
from lakelog.operators.sql.procedures import CallContext, call_procedure

SCHEMA = pa.schema(
    [
        pa.field("p", pa.decimal128(5, 2), False),
        pa.field("id", pa.int64(), False),
        ("b", pa.int8()),
        ("ts", pa.timestamp("ms")),
        ("big", pa.decimal128(38, 0)),
        ("v", pa.string()),
    ]
)


def batch(p: str, ids: list[int]) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "p": [Decimal(p)] * n,
            "id": ids,
            "b": [1] * n,
            "ts": [datetime.datetime(2024, 1, 1)] * n,
            "big": [Decimal(10**30)] * n,
            "v": [f"{p}-{i}" for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture()
def table(catalog: lakelog.Catalog) -> lakelog.Table:
    """Partition p = 1.05 holds ids 1 and 2, partition p = 2.00 id 3 (two snapshots)."""
    t = catalog.create_table(
        "db.t", SCHEMA, primary_key=["p", "id"], partition_by=["p"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "100"},
    )  # fmt: skip
    t.write(batch("1.05", [1, 2]))
    t.write(batch("2.00", [3]))
    return t


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def unchanged(t: lakelog.Table, before: list[int]) -> None:
    assert [s.id for s in t.snapshots()] == before
    assert ids(t.to_arrow()) == [1, 2, 3]


# ---- item 4: literals held exactly or refused ------------------------------------------------------------
@pytest.mark.parametrize(
    "flt,literal,type_",
    [
        ("p = 1.054", "1.054", "DECIMAL(5, 2)"),
        ("p IN (1.05, 1.054)", "1.054", "DECIMAL(5, 2)"),
        ("p BETWEEN 1 AND 1.054", "1.054", "DECIMAL(5, 2)"),
        ("p < 1000", "1000", "DECIMAL(5, 2)"),  # beyond the precision
        ("b = 300", "300", "TINYINT"),
        ("id = 99999999999999999999999", "99999999999999999999999", "BIGINT"),
        ("id = 1.00000000000000000001", "1.00000000000000000001", "BIGINT"),
        ("ts = '2024-01-01 00:00:00.0005'", "'2024-01-01 00:00:00.0005'", "TIMESTAMP(3)"),
    ],
)
def test_a_filter_literal_the_column_cannot_hold_is_refused_by_name(
    table: lakelog.Table, flt: str, literal: str, type_: str
) -> None:
    column = flt.split()[0]
    with pytest.raises(OptionError) as e:
        table.to_arrow(filter=flt)
    msg = str(e.value)
    assert f"literal {literal}" in msg and f"column {column!r}" in msg and type_ in msg, msg


def test_filter_literals_that_fit_compare_exactly(table: lakelog.Table) -> None:
    assert ids(table.to_arrow(filter="p = 1.05")) == [1, 2]
    assert ids(table.to_arrow(filter="p = 1.050")) == [1, 2]
    assert ids(table.to_arrow(filter="p > 1")) == [1, 2, 3]  # an integer against a DECIMAL: 1.00
    assert ids(table.to_arrow(filter="p >= 2")) == [3]
    assert ids(table.to_arrow(filter="p IN (2, 1.05)")) == [1, 2, 3]
    assert ids(table.to_arrow(filter="big = 1000000000000000000000000000000")) == [1, 2, 3]
    assert ids(table.to_arrow(filter="big > 999999999999999999999999999999")) == [1, 2, 3]
    assert ids(table.to_arrow(filter="id = 1.0")) == [1]
    assert ids(table.to_arrow(filter="ts = '2024-01-01 00:00:00.000'")) == [1, 2, 3]


def test_an_expression_filter_arrow_cannot_apply_is_refused_when_the_read_is_made(table: lakelog.Table) -> None:
    with pytest.raises(OptionError, match=r"filter \(p > 1\).*decimal"):
        table.scan(filter=pc.field("p") > 1)
    assert ids(table.to_arrow(filter=pc.field("p") > pc.scalar(Decimal("1")))) == [1, 2, 3]
    assert ids(table.to_arrow(filter=pc.field("p") == 1.054)) == []  # Arrow converts the column


def test_an_overwrite_spec_the_column_cannot_hold_replaces_nothing(table: lakelog.Table) -> None:
    before = [s.id for s in table.snapshots()]
    new = batch("1.05", [9]).drop_columns(["p"])
    with pytest.raises(InvalidInputError, match=r"p=1\.054.*column 'p'.*DECIMAL\(5, 2\)"):
        table.overwrite(new, {"p": 1.054})
    with pytest.raises(InvalidInputError, match=r"p='1\.054'.*DECIMAL\(5, 2\)"):
        table.overwrite(new, {"p": "1.054"})
    unchanged(table, before)
    assert table.overwrite(new, {"p": 1.05}) is not None  # a float that is a decimal of scale 2
    assert ids(table.to_arrow()) == [3, 9]


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.compact(partitions=[{"p": 1.054}]),
        lambda t: t.compact(where="p = 1.054"),
        lambda t: t.compact(where="p IN (1.054)"),
        lambda t: t.rescale(partitions=[{"p": 1.054}], buckets=3),
        lambda t: t.overwrite(batch("1.05", [9]).drop_columns(["p"]), {"p": 1.054}),
    ],
    ids=["compact-partitions", "compact-where", "compact-where-in", "rescale", "overwrite"],
)
def test_partition_choices_refuse_rounded_literals(table: lakelog.Table, call: Callable[[Any], Any]) -> None:
    before = [s.id for s in table.snapshots()]
    with pytest.raises(InvalidInputError, match=r"1\.054.*column 'p'.*DECIMAL\(5, 2\)"):
        call(table)
    unchanged(table, before)


def test_integer_partition_values_beyond_the_column_are_refused(catalog: lakelog.Catalog) -> None:
    schema = pa.schema([pa.field("hh", pa.int8(), False), pa.field("id", pa.int64(), False)])
    t = catalog.create_table("db.h", schema, primary_key=["hh", "id"], partition_by=["hh"])
    t.write(pa.table({"hh": pa.array([44], pa.int8()), "id": [1]}, schema=schema))
    for value in (300, 2**70, "300"):
        with pytest.raises(InvalidInputError, match=f"hh={value!r}.*TINYINT"):
            t.compact(partitions=[{"hh": value}])
    with pytest.raises(InvalidInputError, match="hh = 300.*TINYINT"):
        t.compact(where="hh = 300")
    t.compact(partitions=[{"hh": 44}])  # the value the column holds


def test_the_cli_and_sql_refuse_rounded_partition_literals(
    table: lakelog.Table, catalog: lakelog.Catalog, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = [s.id for s in table.snapshots()]
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--where", "p = 1.054"]) == 2
    assert "1.054" in capsys.readouterr().err
    assert cli(["--warehouse", warehouse, "compact", "db.t", "--partition", "p=1.054"]) == 2
    assert cli(["--warehouse", warehouse, "rescale", "db.t", "--partition", "p=1.054", "--buckets", "3"]) == 2
    ctx = CallContext(catalog, "lakelog", "db")
    with pytest.raises(SqlError, match=r"1\.054.*'p'.*DECIMAL\(5, 2\)"):
        call_procedure(ctx, "compact", ["db.t"], {"where": "p = 1.054"})
    with pytest.raises(SqlError, match=r"1\.054"):
        call_procedure(ctx, "compact", ["db.t"], {"partitions": "p=1.054"})
    # DELETE FROM t WHERE p = 1.054 (partition columns only): an overwrite of that partition
    with pytest.raises(InvalidInputError, match=r"1\.054.*DECIMAL\(5, 2\)"):
        truncate(None, table.path, {"p": "1.054"}, "DELETE FROM db.t")
    unchanged(table, before)


def test_a_static_insert_partition_is_held_exactly(table: lakelog.Table) -> None:
    """``INSERT INTO t PARTITION (p = 1.054) ...`` would be cast to 1.05 by Flink: refused first."""
    where = "INSERT INTO lakelog.db.t"
    with pytest.raises(SqlError, match=r"p=1\.054 .*DECIMAL\(5, 2\)"):
        static_partition(table.store, {"p": "1.054"}, where)
    assert static_partition(table.store, {"p": "1.05"}, where) == {"p": Decimal("1.05")}
    assert static_partition(table.store, {"p": "-1"}, where) == {"p": Decimal("-1.00")}
    assert literal_value("- 1.5") == Decimal("-1.5") and literal_value("-3") == -3


# ---- item 8: arguments of the wrong type or out of range --------------------------------------------
def _bad_table_calls() -> list[tuple[str, Callable[[lakelog.Table], Any], type[Exception], str]]:
    dt = datetime.datetime
    return [
        ("rescale-buckets-str", lambda t: t.rescale(buckets="abc"), ArgumentTypeError, "'buckets'"),
        ("rescale-buckets-float", lambda t: t.rescale(buckets=1.5), ArgumentTypeError, "'buckets'"),
        ("rescale-buckets-bool", lambda t: t.rescale(buckets=True), ArgumentTypeError, "'buckets'"),
        ("rescale-partitions-str", lambda t: t.rescale(partitions="p=1.05"), ArgumentTypeError, "'partitions'"),
        ("rescale-partitions-dict", lambda t: t.rescale(partitions={"p": "1.05"}), ArgumentTypeError,
         "'partitions'"),
        ("compact-partitions-str", lambda t: t.compact(partitions="p=1.05"), ArgumentTypeError, "'partitions'"),
        ("compact-partitions-dict", lambda t: t.compact(partitions={"p": "1.05"}), ArgumentTypeError,
         "'partitions'"),
        ("compact-partitions-of-str", lambda t: t.compact(partitions=["p=1.05"]), ArgumentTypeError,
         "'partitions[]'"),
        ("compact-full-str", lambda t: t.compact(full="no"), ArgumentTypeError, "'full'"),
        ("compact-where-int", lambda t: t.compact(where=5), ArgumentTypeError, "'where'"),
        ("compact-progress", lambda t: t.compact(progress=5), ArgumentTypeError, "'progress'"),
        ("overwrite-partition-list", lambda t: t.overwrite(batch("1.05", [9]), [{"p": "1.05"}]),
         ArgumentTypeError, "'partition'"),
        ("overwrite-partition-str", lambda t: t.overwrite(batch("1.05", [9]), "p=1.05"), ArgumentTypeError,
         "'partition'"),
        ("scan-snapshot-str", lambda t: t.to_arrow(snapshot_id="1"), ArgumentTypeError, "'snapshot_id'"),
        ("scan-snapshot-bool", lambda t: t.to_arrow(snapshot_id=True), ArgumentTypeError, "'snapshot_id'"),
        ("scan-timestamp-str", lambda t: t.to_arrow(timestamp="1"), ArgumentTypeError, "'timestamp'"),
        ("scan-tag-int", lambda t: t.to_arrow(tag=1), ArgumentTypeError, "'tag'"),
        ("scan-columns-str", lambda t: t.to_arrow(columns="id"), ArgumentTypeError, "'columns'"),
        ("scan-two-points", lambda t: t.to_arrow(snapshot_id=1, timestamp=dt.now()), ArgumentError,
         "'timestamp'"),
        ("reader-chunks-0", lambda t: t.to_reader(max_chunksize=0), ArgumentError, "'max_chunksize'"),
        ("snapshot-str", lambda t: t.snapshot("1"), ArgumentTypeError, "'snapshot_id'"),
        ("files-str", lambda t: t.files("1"), ArgumentTypeError, "'snapshot_id'"),
        ("bucket-counts-str", lambda t: t.bucket_counts("1"), ArgumentTypeError, "'snapshot_id'"),
        ("changes-str", lambda t: t.changes("1"), ArgumentTypeError, "'from_snapshot_id'"),
        ("changes-none", lambda t: t.changes(None), ArgumentTypeError, "'from_snapshot_id'"),
        ("changes-to-str", lambda t: t.changes(1, "2"), ArgumentTypeError, "'to_snapshot_id'"),
        ("changes-negative", lambda t: t.changes(-1), ArgumentError, "'from_snapshot_id'"),
        ("rollback-none", lambda t: t.rollback_to(None), ArgumentError, "'snapshot_id'"),
        ("rollback-str", lambda t: t.rollback_to("1"), ArgumentTypeError, "'snapshot_id'"),
        ("rollback-bool", lambda t: t.rollback_to(True), ArgumentTypeError, "'snapshot_id'"),
        ("rollback-tag-int", lambda t: t.rollback_to(tag=1), ArgumentTypeError, "'tag'"),
        ("create-tag-int", lambda t: t.create_tag(1), ArgumentTypeError, "'name'"),
        ("create-tag-snapshot-str", lambda t: t.create_tag("x", "1"), ArgumentTypeError, "'snapshot_id'"),
        ("expire-retain-bool", lambda t: t.expire_snapshots(retain_min=True), ArgumentTypeError,
         "'retain_min'"),
        ("expire-retain-str", lambda t: t.expire_snapshots(retain_max="3"), ArgumentTypeError, "'retain_max'"),
        ("expire-older-str", lambda t: t.expire_snapshots(older_than_millis="0"), ArgumentTypeError,
         "'older_than_millis'"),
        ("expire-deletes-negative", lambda t: t.expire_snapshots(max_deletes=-1), ArgumentError,
         "'max_deletes'"),
        ("orphans-negative", lambda t: t.remove_orphan_files(-5), ArgumentError, "'older_than_seconds'"),
        ("orphans-nan", lambda t: t.remove_orphan_files(float("nan")), ArgumentError, "'older_than_seconds'"),
        ("orphans-dry-run-str", lambda t: t.remove_orphan_files(dry_run="yes"), ArgumentTypeError, "'dry_run'"),
        ("subscribe-snapshot-str", lambda t: t.subscribe(scan_mode="from-snapshot", snapshot_id="1"),
         ArgumentTypeError, "'snapshot_id'"),
        ("subscribe-columns-str", lambda t: t.subscribe(columns="id"), ArgumentTypeError, "'columns'"),
        ("subscribe-poll-negative", lambda t: t.subscribe(poll_interval=-1), ArgumentError, "'poll_interval'"),
        ("writer-user-int", lambda t: t.writer(commit_user=5), ArgumentTypeError, "'commit_user'"),
        ("filter-int", lambda t: t.to_arrow(filter=5), ArgumentTypeError, "'filter'"),
    ]  # fmt: skip


_CALLS = _bad_table_calls()


@pytest.mark.parametrize("name,call,error,argument", _CALLS, ids=[c[0] for c in _CALLS])
def test_a_bad_argument_is_refused_by_name_and_changes_nothing(
    table: lakelog.Table, name: str, call: Callable[[lakelog.Table], Any], error: type[Exception], argument: str
) -> None:
    before = [s.id for s in table.snapshots()]
    with pytest.raises(error) as e:
        call(table)
    assert isinstance(e.value, LakelogError) and isinstance(e.value, ValueError)
    assert isinstance(e.value, TypeError) == issubclass(error, ArgumentTypeError)
    assert argument in str(e.value), str(e.value)
    unchanged(table, before)


def test_good_arguments_of_other_integer_and_time_types_still_work(table: lakelog.Table) -> None:
    import numpy as np

    assert ids(table.to_arrow(snapshot_id=np.int64(1))) == [1, 2]
    assert ids(table.to_arrow(timestamp=table.snapshot(2).time_millis)) == [1, 2, 3]
    assert ids(table.to_arrow(timestamp=datetime.datetime.now())) == [1, 2, 3]
    assert table.changes(np.int32(1)).num_rows == 1
    assert table.rescale(partitions=({"p": Decimal("1.05")},), buckets=np.int64(3)) is not None
    assert table.bucket_counts()[(Decimal("1.05"),)] == 3


@pytest.mark.parametrize(
    "call,argument",
    [
        (lambda c: c.create_table("db.u", SCHEMA, primary_key="id"), "'primary_key'"),
        (lambda c: c.create_table("db.u", SCHEMA, partition_by="p"), "'partition_by'"),
        (lambda c: c.create_table("db.u", SCHEMA, options=[("bucket", "1")]), "'options'"),
        (lambda c: c.create_table("db.u", {"a": "INT"}), "'schema'"),
        (lambda c: c.create_table("db.u", SCHEMA, exist_ok="no"), "'exist_ok'"),
        (lambda c: c.get_table(5), "'identifier'"),
        (lambda c: c.drop_table("db.t", missing_ok="yes"), "'missing_ok'"),
        (lambda c: c.drop_database("db", cascade="yes"), "'cascade'"),
    ],
    ids=["pk-str", "partition-str", "options-list", "schema-dict", "exist-ok", "identifier", "missing-ok",
         "cascade"],
)  # fmt: skip
def test_catalog_arguments_of_the_wrong_type_are_refused_by_name(
    catalog: lakelog.Catalog, table: lakelog.Table, call: Callable[[lakelog.Catalog], Any], argument: str
) -> None:
    with pytest.raises(ArgumentTypeError, match=argument):
        call(catalog)
    assert catalog.list_tables("db") == ["t"]


@pytest.mark.parametrize(
    "argv",
    [
        ["expire", "db.t", "--older-than-seconds", "-5"],
        ["expire", "db.t", "--older-than-seconds", "nan"],
        ["expire", "db.t", "--retain-min", "0"],
        ["expire", "db.t", "--retain-max", "-1"],
        ["expire", "db.t", "--orphans", "--orphan-age-seconds", "-1"],
        ["rescale", "db.t", "--buckets", "0"],
        ["rollback", "db.t", "--snapshot", "-1"],
        ["files", "db.t", "--snapshot", "0"],
        ["compact", "db.t", "--job", "--parallelism", "0"],
        ["compact", "db.t", "--streaming", "--max-rounds", "-1"],
        ["compact", "db.t", "--streaming", "--idle-timeout", "-1"],
    ],
)
def test_cli_numeric_flags_refuse_negatives(
    table: lakelog.Table, warehouse: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = [s.id for s in table.snapshots()]
    with pytest.raises(SystemExit) as e:
        cli(["--warehouse", warehouse, *argv])
    assert e.value.code == 2
    flag = next(a for a in argv if a.startswith("--") and a != "--orphans" and a not in ("--job", "--streaming"))
    assert f"argument {flag}" in capsys.readouterr().err
    unchanged(table, before)


def test_cli_expire_with_a_sound_age_still_expires(table: lakelog.Table, warehouse: str) -> None:
    assert cli(["--warehouse", warehouse, "expire", "db.t", "--retain-min", "1", "--older-than-seconds", "0"]) == 0
    assert [s.id for s in table.snapshots()] == [2]
