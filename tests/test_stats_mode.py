"""metadata.stats-mode and fields.<f>.stats-mode decide the column statistics of data files, as in
Paimon: none (left out; _VALUE_STATS_COLS names the kept columns), counts (null counts only),
truncate(n) and full. Key statistics are always kept. Readers (lakelog's and pypaimon's) prune by
what is there and never lose a row."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.format.binary_row import deserialize_row

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("v", pa.int64())])
LONG = "abcdefghijklmnopqrstuvwxyz"  # 26 characters


def _table(catalog: lakelog.Catalog, name: str, pk: bool, options: dict[str, str]) -> lakelog.Table:
    opts = {"bucket": "1", **options} if pk else {"bucket": "-1", **options}
    return catalog.create_table(name, SCHEMA, primary_key=["id"] if pk else None, options=opts)


def _write(t: lakelog.Table, lo: int, hi: int) -> None:
    ids = list(range(lo, hi))
    t.write(pa.table({"id": ids, "name": [LONG + str(i) if i % 3 else None for i in ids], "v": ids}, schema=SCHEMA))


def _file(t: lakelog.Table):  # type: ignore[no-untyped-def]
    (entry,) = t.store.live_entries(t.latest_snapshot())
    return entry.file


def _value_stats(t: lakelog.Table) -> tuple[list, list, list, list[str] | None]:  # type: ignore[type-arg]
    f = _file(t)
    cols = f.value_stats_cols
    names = cols if cols is not None else SCHEMA.names
    types = [t.store.schema.field(c).type for c in names]
    s = f.value_stats
    return list(deserialize_row(s.min_values, types)), list(deserialize_row(s.max_values, types)), s.null_counts, cols


@pytest.mark.parametrize("pk", [True, False])
def test_each_mode_writes_what_paimon_writes(catalog: lakelog.Catalog, pk: bool) -> None:
    got = {}
    for mode in ("none", "counts", "truncate(4)", "full", None):
        t = _table(catalog, f"db.{'pk' if pk else 'app'}_{len(got)}", pk, {"metadata.stats-mode": mode} if mode else {})
        _write(t, 1, 10)
        got[mode] = _value_stats(t)
    assert got["none"] == ([], [], [], [])
    mins, maxs, nulls, cols = got["counts"]
    assert cols is None and mins == [None] * 3 and maxs == [None] * 3 and nulls == [0, 3, 0]
    mins, maxs, nulls, cols = got["truncate(4)"]
    assert mins == [1, "abcd", 1] and maxs == [9, "abce", 9] and nulls == [0, 3, 0]
    mins, maxs, _, _ = got["full"]
    assert mins[1] == LONG + "1" and maxs[1] == LONG + "8"
    mins, maxs, _, _ = got[None]  # Paimon's default: truncate(16)
    assert mins[1] == LONG[:16] and len(maxs[1]) == 16
    if pk:  # key statistics stay, whatever the mode
        for mode in ("none", "counts"):
            t = catalog.get_table(f"db.pk_{list(got).index(mode)}")
            k = _file(t).key_stats
            assert list(deserialize_row(k.min_values, t.store.key_types)) == [1]


def test_field_modes_override_the_table_mode(catalog: lakelog.Catalog) -> None:
    t = _table(catalog, "db.t", False, {"metadata.stats-mode": "full", "fields.name.stats-mode": "none",
                                          "fields.v.stats-mode": "counts"})
    _write(t, 1, 10)
    mins, maxs, nulls, cols = _value_stats(t)
    assert cols == ["id", "v"] and mins == [1, None] and maxs == [9, None] and nulls == [0, 0]


@pytest.mark.parametrize("mode", ["none", "counts", "truncate(2)", "full"])
def test_reads_prune_by_what_the_mode_kept_and_lose_no_row(catalog: lakelog.Catalog, mode: str) -> None:
    t = _table(catalog, "db.t", False, {"metadata.stats-mode": mode})
    for lo in range(0, 50, 10):
        _write(t, lo, lo + 10)
    narrow = (pc.field("v") >= 12) & (pc.field("v") <= 14)
    kept = sum(len(s.files) for s in t.plan(filter=narrow))
    assert kept == (1 if mode in ("truncate(2)", "full") else 5)
    assert sorted(t.to_arrow(filter=narrow).column("id").to_pylist()) == [12, 13, 14]
    by_name = pc.field("name") == LONG + "13"
    assert t.to_arrow(filter=by_name).column("id").to_pylist() == [13]
    pytest.importorskip("pypaimon")
    from .interop_util import pp_read

    got = pp_read(catalog.warehouse, "db.t", predicate=lambda b: b.between("v", 12, 14))
    assert sorted(got.column("id").to_pylist()) == [12, 13, 14]
