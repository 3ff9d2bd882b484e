"""Table statistics (``ANALYZE``, ``t$statistics``; issue 24): each column's statistics checked
against a row-at-a-time oracle over random writes, deletes and compactions, and the statistics
file's life: carried by later commits while the schema stays, dropped after a schema change, kept
by expiration, rollback and orphan cleanup as long as a snapshot or tag references it."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import ArgumentTypeError, CorruptFileError, SchemaError
from lakelog.connector.table.statistics import java_timestamp_text
from lakelog.connector.table.system_tables import system_table

SCHEMA = pa.schema([
    pa.field("k", pa.int64(), False), ("i8", pa.int8()), ("f", pa.float32()), ("d", pa.float64()),
    ("s", pa.string()), ("bin", pa.binary()), ("dt", pa.date32()), ("ts", pa.timestamp("ms")),
    ("ts6", pa.timestamp("us")), ("ltz", pa.timestamp("ms", tz="UTC")), ("dec", pa.decimal128(9, 3)),
    ("b", pa.bool_()), ("tm", pa.time32("ms")), ("arr", pa.list_(pa.int32())),
])  # fmt: skip
EPOCH = datetime.datetime(1970, 1, 1)


def _value(rng: random.Random, name: str) -> Any:
    if rng.random() < 0.2:
        return None
    n = rng.randrange(-50, 50)
    return {
        "i8": n,
        "f": n / 4,
        "d": n / 3,
        "s": "é" * rng.randrange(0, 4) + "x" * rng.randrange(0, 5),
        "bin": bytes(rng.randrange(0, 6)),
        "dt": datetime.date(2024, 1, 1) + datetime.timedelta(days=n),
        "ts": datetime.datetime(2024, 1, 1) + datetime.timedelta(milliseconds=n * 250_001),
        "ts6": datetime.datetime(2024, 1, 1) + datetime.timedelta(microseconds=n * 1_000_001),
        "ltz": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=n),
        "dec": decimal.Decimal(n) / 8,
        "b": n % 2 == 0,
        "tm": datetime.time(n % 24, abs(n) % 60, 0, 1000 * abs(n)),
        "arr": [n],
    }[name]


def _rows(rng: random.Random, keys: list[int]) -> pa.Table:
    cols = {"k": keys}
    for f in SCHEMA:
        if f.name != "k":
            cols[f.name] = [_value(rng, f.name) for _ in keys]
    return pa.table(cols, schema=SCHEMA)


def _text(v: Any, t: pa.DataType) -> str:
    """The oracle's text of a min/max value, computed from the Python value (not from Arrow)."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        whole = v.strftime("%Y-%m-%d %H:%M:%S")
        digits = 3 if t.unit == "ms" else 6
        frac = f"{v.microsecond:06d}"[:digits] if digits == 3 else f"{v.microsecond:06d}"
        return f"{whole}.{frac}"
    if isinstance(v, datetime.date):
        return str((v - EPOCH.date()).days)
    if isinstance(v, datetime.time):
        return str(((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000)
    return str(v)


def _expected(rows: list[dict[str, Any]], name: str, t: pa.DataType) -> dict[str, Any]:
    values = [r[name] for r in rows if r[name] is not None]
    out: dict[str, Any] = {"nullCount": len(rows) - len(values), "distinctCount": len(set(values))}
    if pa.types.is_string(t) or pa.types.is_binary(t):
        if values:
            out["avgLen"] = sum(len(v) for v in values) // len(values)
            out["maxLen"] = max(len(v) for v in values)
    elif not pa.types.is_boolean(t) and values:
        out["min"], out["max"] = min(values), max(values)
    return out


def _check(table: lakelog.Table, model: dict[int, dict[str, Any]]) -> None:
    stats = table.statistics()
    assert stats is not None
    rows = list(model.values())
    assert stats.merged_record_count == len(rows)
    assert set(stats.columns) == {f.name for f in SCHEMA if f.name != "arr"}
    for f in SCHEMA:
        if f.name == "arr":
            continue
        got, want = stats.columns[f.name], _expected(rows, f.name, f.type)
        assert got.column_id == table.store.schema.field(f.name).id
        assert got.null_count == want["nullCount"], f.name
        assert got.distinct_count == want["distinctCount"], f.name
        assert (got.avg_len, got.max_len) == (want.get("avgLen"), want.get("maxLen")), f.name
        if "min" not in want:
            assert got.min is None and got.max is None, f.name
        elif pa.types.is_floating(f.type):  # the text reads back as the very value
            assert (float(got.min), float(got.max)) == (want["min"], want["max"]), f.name
        else:
            assert (got.min, got.max) == (_text(want["min"], f.type), _text(want["max"], f.type)), f.name


@pytest.mark.parametrize("options", [
    {"bucket": "2"},
    {"bucket": "2", "deletion-vectors.enabled": "true"},
    {"bucket": "1", "merge-engine": "first-row"},
])  # fmt: skip
def test_column_statistics_match_a_row_oracle_after_random_changes(
    tmp_path: Path, options: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakelog.connector.table import statistics

    monkeypatch.setattr(statistics, "_UNIQUE_FLUSH", 8)  # distinct values reduced across batches too
    rng = random.Random(len(options) * 7 + len(str(options)))
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", SCHEMA, primary_key=["k"], options=options)
    first_row = options.get("merge-engine") == "first-row"
    model: dict[int, dict[str, Any]] = {}
    for step in range(12):
        keys = rng.sample(range(40), rng.randrange(1, 12))
        if rng.random() < 0.25 and model and not first_row:
            gone = [k for k in keys if k in model]
            t.delete(pa.table({"k": keys}, schema=pa.schema([SCHEMA.field("k")])))
            for k in gone:
                del model[k]
        else:
            batch = _rows(rng, keys)
            t.write(batch)
            for r in batch.to_pylist():
                if not (first_row and r["k"] in model):
                    model[r["k"]] = r
        if step % 5 == 4:
            t.compact(full=rng.random() < 0.5)
        if step % 3 == 2:
            sid = t.analyze(all_columns=True)
            assert t.latest_snapshot().id == sid and t.latest_snapshot().commit_kind == "ANALYZE"
            assert t.statistics().snapshot_id == sid - 1
            _check(t, model)
    assert t.to_arrow().num_rows == len(model)  # ANALYZE snapshots change no data


def test_an_append_table_counts_what_deletes_left(tmp_path: Path) -> None:
    schema = pa.schema([("a", pa.int32()), ("s", pa.string())])
    t = lakelog.Catalog(str(tmp_path)).create_table(
        "db.t", schema, options={"bucket": "-1", "deletion-vectors.enabled": "true"}
    )
    t.write(pa.table({"a": [1, 2, 3, 3], "s": ["x", "yy", None, "zzz"]}, schema=schema))
    t.delete_where("a = 1")
    t.analyze(["a", "s"])
    stats = t.statistics()
    assert stats.merged_record_count == 3
    assert stats.columns["a"].to_json_object() == {
        "colId": 0, "distinctCount": 2, "min": "2", "max": "3", "nullCount": 0
    }
    assert stats.columns["s"].to_json_object() == {
        "colId": 1, "distinctCount": 2, "nullCount": 1, "avgLen": 2, "maxLen": 3
    }
    # the size is the data's share that the merged rows make: fewer rows than stored, less size
    stored = sum(t.files().column("file_size_in_bytes").to_pylist())
    assert 0 < stats.merged_record_size < stored


def test_java_timestamp_text_trims_the_fraction_to_the_precision() -> None:
    ms, us = 1_000_000, 1_000
    assert java_timestamp_text(0, 3) == "1970-01-01 00:00:00.000"
    assert java_timestamp_text(0, 0) == "1970-01-01 00:00:00"
    assert java_timestamp_text(1_500 * ms, 3) == "1970-01-01 00:00:01.500"
    assert java_timestamp_text(1_500_000 * us, 6) == "1970-01-01 00:00:01.500000"
    assert java_timestamp_text(1_000_000_001, 9) == "1970-01-01 00:00:01.000000001"
    assert java_timestamp_text(-1 * ms, 3) == "1969-12-31 23:59:59.999"
    assert java_timestamp_text(1_500 * ms, 4) == "1970-01-01 00:00:01.5000"
    assert java_timestamp_text(1_500 * ms, 0) == "1970-01-01 00:00:01.5"


def _table(tmp_path: Path, **options: str) -> lakelog.Table:
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    opts = {"bucket": "1", **options}
    return lakelog.Catalog(str(tmp_path)).create_table("db.t", schema, primary_key=["k"], options=opts)


def _write(t: lakelog.Table, *keys: int) -> int:
    rows = pa.table({"k": list(keys), "v": [str(k) for k in keys]})
    return t.write(rows.cast(pa.schema([t.schema.field(n) for n in rows.column_names])))


def test_later_commits_carry_the_statistics_until_the_schema_changes(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert t.analyze() is None and t.statistics() is None  # no snapshot: nothing to analyze
    _write(t, 1, 2)
    sid = t.analyze()
    name = t.latest_snapshot().statistics
    assert t.statistics().merged_record_count == 2
    _write(t, 3)
    t.compact(full=True)
    t.overwrite(pa.table({"k": [7], "v": ["7"]}, schema=t.schema))
    assert [s.statistics for s in t.snapshots()[sid - 1 :]] == [name] * 4
    assert t.statistics().snapshot_id == sid - 1  # what they carry describes the analyzed snapshot
    assert system_table(t.store, "statistics").to_pylist() == [{
        "snapshot_id": 1, "schema_id": 0, "mergedRecordCount": 2,
        "mergedRecordSize": t.statistics().merged_record_size, "colstat": "{ }",
    }]  # fmt: skip
    # time travel: the table of an earlier snapshot shows what that one referenced
    assert system_table(t.store, "statistics", snapshot=t.snapshot(1)).num_rows == 0
    t.alter(lakelog.AddColumn("w", pa.int32()))
    _write(t, 4)
    assert t.latest_snapshot().statistics is None  # computed on the old schema: dropped, as Paimon does
    t.rollback_to_as_latest(sid)
    assert t.latest_snapshot().statistics == name  # the target's, as Paimon's rollback


def test_expiration_and_orphan_cleanup_keep_referenced_statistics_only(tmp_path: Path) -> None:
    t = _table(tmp_path, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                             "snapshot.time-retained": "1 ms"})  # fmt: skip
    stats_dir = Path(t.store.path) / "statistics"
    _write(t, 1)
    t.analyze()
    first = t.latest_snapshot().statistics
    t.create_tag("keep")  # holds the first statistics file
    _write(t, 2)
    t.analyze()
    second = t.latest_snapshot().statistics
    _write(t, 3)
    t.analyze(["v"])
    third = t.latest_snapshot().statistics
    t.expire_snapshots()
    assert sorted(os.listdir(stats_dir)) == sorted([first, third])  # the second: nobody refers to it
    t.delete_tag("keep")
    (stats_dir / "stat-stray-0").write_text("{}")  # a crashed ANALYZE's file
    gone = t.remove_orphan_files(older_than_seconds=0)
    assert sorted(Path(p).name for p in gone if "/statistics/" in p) == sorted([first, "stat-stray-0"])
    assert os.listdir(stats_dir) == [third] and second not in gone
    assert t.statistics().columns["v"].distinct_count == 3


def test_rollback_removes_the_statistics_of_the_snapshots_it_drops(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _write(t, 1)
    t.analyze()
    _write(t, 2)
    t.rollback_to(1)
    assert not os.listdir(Path(t.store.path) / "statistics")


def test_a_damaged_statistics_file_fails_its_readers_not_the_next_commit(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _write(t, 1)
    t.analyze()
    path = Path(t.store.path) / "statistics" / t.latest_snapshot().statistics
    path.write_text("{not json")
    with pytest.raises(CorruptFileError, match=path.name):
        t.statistics()
    _write(t, 2)  # the commit drops the statistics it cannot read
    assert t.latest_snapshot().statistics is None and t.to_arrow().num_rows == 2


def test_bad_requests_are_refused_naming_the_column(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), ("m", pa.map_(pa.string(), pa.int32()))])
    t = lakelog.Catalog(str(tmp_path)).create_table("db.t", schema, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "m": [[("a", 1)]]}, schema=schema))
    with pytest.raises(SchemaError, match="'nope'.*no such column"):
        t.analyze(["nope"])
    with pytest.raises(SchemaError, match="'m'.*MAP"):
        t.analyze(["m"])
    with pytest.raises(SchemaError, match="not both"):
        t.analyze(["k"], all_columns=True)
    with pytest.raises(ArgumentTypeError, match="columns"):
        t.analyze("k")
    assert len(t.snapshots()) == 1 and not (Path(t.store.path) / "statistics").exists()
    t.analyze(all_columns=True)  # the map column is left out
    assert set(t.statistics().columns) == {"k"}
    assert json.loads(system_table(t.store, "statistics").column("colstat")[0].as_py()) == {
        "k": {"colId": 0, "distinctCount": 1, "min": "1", "max": "1", "nullCount": 0}
    }
