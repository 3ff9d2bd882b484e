"""Issue 22, larger than memory: a LookupTable's state on local disk (lookup.cache = full, auto past
lookup.cache-max-memory-size) answers as the heap state does, through random changes with every
merge engine, sharded or not, and a dimension far larger than the result cache."""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.connector.errors import OptionError
from lakelog.operators import lookup_spill
from lakelog.operators.lookup_shard import Shard
from lakelog.operators.lookup_table import LookupSpec, LookupTable
from tests.test_lookup import CUST, SCENARIOS, Workload, check_primary, check_secondary

MODES = ("memory", "full", "auto")


def _open(path: str, mode: str, **kw: Any) -> LookupTable:
    lt = LookupTable(path, refresh_interval=math.inf, cache=mode, **kw)
    if mode == "auto":  # a budget that the first load fits in and the workload outgrows
        lt.cache = replace(lt.cache, max_memory=2 * lt.memory_bytes() + 1)
    return lt


def _check_place(lt: LookupTable, mode: str) -> None:
    if mode == "memory":
        assert not lt.on_disk and lt.disk_bytes() == 0
    elif lt.on_disk:
        assert lt.memory_bytes() == 0 and lt.disk_bytes() > 0, (lt.memory_bytes(), lt.disk_bytes())
    else:
        assert mode == "auto" and lt.memory_bytes() <= lt.cache.max_memory


@pytest.fixture()
def tiny_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every non-empty array goes to disk (by default only those of 64 KiB and more)."""
    monkeypatch.setattr(lookup_spill, "SMALL", 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_random_changes_in_every_cache_mode(
    catalog: lakelog.Catalog, scenario: str, mode: str, tiny_spills: None
) -> None:
    """Upserts, deletes, compactions and expirations against the dict oracle; the disk state is
    refreshed by delta replays, full reloads and compactions of replaced rows alike."""
    schema, pk, part, opts = SCENARIOS[scenario]
    t = catalog.create_table("db.dim", schema, primary_key=pk, partition_by=part, options=opts)
    w = Workload(t, schema, pk, seed=3 + len(scenario) + len(mode))
    w.commit()
    lt = _open(t.path, mode)
    sec_col = "city" if scenario != "partitioned-2-buckets" else "id"
    sec = _open(t.path, mode, key_columns=[sec_col], columns=["name", sec_col, "amount", *pk][:4])
    assert lt.on_disk == (mode == "full")
    check_primary(lt, w)
    places = {lt.on_disk}
    modes: set[str] = set()
    for rnd in range(12):
        for _ in range(w.rnd.randrange(1, 4)):
            w.commit()
        if rnd % 4 == 3:
            t.compact(full=rnd % 8 == 3)
        if rnd % 5 == 4:
            w.commit()
            t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=int(time.time() * 1000) + 1)
        assert lt.refresh() and sec.refresh()
        modes.add(lt.last_refresh.mode)
        places.add(lt.on_disk)
        check_primary(lt, w)
        check_secondary(sec, w, sec_col)
        _check_place(lt, mode)
        _check_place(sec, mode)
    assert {"delta", "full"} <= modes, modes
    if mode == "auto":
        assert places == {False, True}, "auto must start on the heap and move to disk"


def _engine_table(catalog: lakelog.Catalog, engine: str) -> lakelog.Table:
    opts = {"bucket": "3", "merge-engine": engine}
    if engine == "aggregation":
        opts["fields.amount.aggregate-function"] = "sum"
    return catalog.create_table("db.dim", CUST, primary_key=["id"], options=opts)


def _merge(engine: str, old: Optional[dict[str, Any]], new: dict[str, Any]) -> dict[str, Any]:
    if old is None:
        return dict(new)
    if engine == "deduplicate":
        return dict(new)
    if engine == "first-row":
        return old
    out = dict(old)
    for k, v in new.items():
        if v is None:
            continue
        out[k] = (old[k] or 0.0) + v if (engine == "aggregation" and k == "amount") else v
    return out


@pytest.mark.parametrize("mode", ("memory", "full"))
@pytest.mark.parametrize("engine", ("deduplicate", "partial-update", "aggregation", "first-row"))
def test_every_merge_engine_in_both_places(catalog: lakelog.Catalog, engine: str, mode: str, tiny_spills: None) -> None:
    t = _engine_table(catalog, engine)
    rnd = random.Random(engine + mode)
    oracle: dict[int, dict[str, Any]] = {}
    lt = _open(t.path, mode)
    for step in range(10):
        rows = []
        for k in rnd.sample(range(150), rnd.randrange(1, 40)):
            row = {"id": k, "name": rnd.choice([None, f"n{rnd.randrange(999)}"]),
                   "city": rnd.choice([None, "oslo", "rome"]), "amount": rnd.choice([None, float(rnd.randrange(9))])}  # fmt: skip
            rows.append(row)
            oracle[k] = _merge(engine, oracle.get(k), row)
        t.write(pa.Table.from_pylist(rows, schema=CUST))
        if step % 4 == 3:
            t.compact(full=True)
        lt.refresh()
        keys = list(range(160))
        got = lt.lookup(pa.array(keys, pa.int64())).to_pylist()
        for k, g in zip(keys, got):
            assert g == oracle.get(k, dict.fromkeys(lt.columns)), (engine, k, g, oracle.get(k))
        _check_place(lt, mode)


@pytest.mark.parametrize("mode", ("memory", "full"))
def test_shards_on_disk_hold_their_share(catalog: lakelog.Catalog, mode: str, tiny_spills: None) -> None:
    schema, pk, part, opts = SCENARIOS["int-key-4-buckets"]
    t = catalog.create_table("db.dim", schema, primary_key=pk, partition_by=part, options=opts)
    w = Workload(t, schema, pk, seed=11)
    for _ in range(4):
        w.commit()
    shards = [_open(t.path, mode, shard=Shard(i, 2, 4)) for i in range(2)]
    for rnd in range(6):
        w.commit()
        if rnd == 3:
            t.compact(full=True)
        keys = sorted({k[0] for k in w.rows} | {999})
        merged: dict[int, dict[str, Any]] = {}
        for s in shards:
            s.refresh()
            _check_place(s, mode)
            mine = np.asarray(s.holds_all(pa.array(keys, pa.int64())))
            probe = [k for k, m in zip(keys, mine) if m]
            out, found = s.lookup_found(pa.array(probe, pa.int64()))
            for k, row, f in zip(probe, out.to_pylist(), found):
                if f:
                    merged[k] = row
        assert merged == {k[0]: r for k, r in w.rows.items()}


def test_auto_loads_a_large_dimension_straight_to_disk_and_disk_budget(catalog: lakelog.Catalog) -> None:
    """The table's lookup.cache* options (or the lookup's own arguments) choose the place."""
    n = 50_000
    data = pa.table({"id": np.arange(n), "name": [f"n{i}" for i in range(n)], "city": ["x"] * n,
                     "amount": np.ones(n)}, schema=CUST)  # fmt: skip
    t = catalog.create_table("db.dim", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(data)
    assert not LookupTable(t, refresh_interval=math.inf).on_disk  # auto, 256 mb
    small = catalog.create_table("db.small", CUST, primary_key=["id"],
                                 options={"bucket": "2", "lookup.cache-max-memory-size": "100 kb"})  # fmt: skip
    small.write(data)
    lt = LookupTable(small, refresh_interval=math.inf)
    assert lt.cache.mode == "auto" and lt.on_disk and lt.memory_bytes() < 64 << 10
    assert lt.last_refresh is not None and lt.last_refresh.mode == "initial"
    assert lt.get(4321) == {"id": 4321, "name": "n4321", "city": "x", "amount": 1.0}
    assert LookupTable(t, refresh_interval=math.inf, cache_max_memory="100 kb").on_disk
    tight = catalog.create_table("db.tight", CUST, primary_key=["id"],
                                 options={"bucket": "2", "lookup.cache": "full", "lookup.cache-max-disk-size": "1 mb"})  # fmt: skip
    tight.write(data)
    with pytest.raises(OptionError, match="lookup.cache-max-disk-size = 1048576"):
        LookupTable(tight)
    # the table's own options choose the place
    t2 = catalog.create_table("db.dim2", CUST, primary_key=["id"],
                              options={"bucket": "2", "lookup.cache": "full", "lookup.cache-rows": "7"})  # fmt: skip
    t2.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    lt2 = LookupTable(t2, refresh_interval=math.inf)
    assert lt2.on_disk and lt2.cache.rows == 7 and lt2.get(1)["name"] == "a"
    assert not LookupTable(t2, refresh_interval=math.inf, cache="memory").on_disk
    # a disk budget the state outgrows: the load fails naming the option, a refresh keeps the old state
    small = LookupTable(t2, refresh_interval=math.inf, cache="full", cache_max_disk="64 kb")
    t2.write(pa.table({"id": np.arange(2, 20_000), "name": ["b" * 20] * 19_998, "city": ["y"] * 19_998,
                       "amount": np.zeros(19_998)}, schema=CUST))  # fmt: skip
    with pytest.raises(OptionError, match="lookup.cache-max-disk-size = 65536"):
        small.refresh()
    assert small.num_rows == 1 and small.get(1)["name"] == "a"
    for bad, match in (({"cache": "rocksdb"}, "lookup.cache"), ({"cache_max_disk": "lots"}, "max-disk-size"),
                       ({"cache_max_memory": -1}, "max-memory-size"), ({"cache_dir": "/nonexistent/x"}, "directory")):  # fmt: skip
        with pytest.raises(OptionError, match=match):
            LookupTable(t2, lazy=True, **bad)
    spec = LookupSpec.of(t2, cache="memory", cache_max_disk="1 gb")
    assert not spec.open().on_disk


def _anon_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def test_a_dimension_twenty_times_the_result_cache(catalog: lakelog.Catalog, tmp_path: Any) -> None:
    """2M rows behind a 100k-row result cache, on disk: every probe right, in batches and one by
    one, before and after changes; the heap holds no per-row state."""
    n = 2_000_000
    t = catalog.create_table("db.big", CUST, primary_key=["id"], options={"bucket": "4"})
    ids = np.arange(n, dtype=np.int64)
    names = pc.binary_join_element_wise(pa.array(["customer-"] * n), pc.cast(pa.array(ids), pa.string()), "")
    t.write(pa.table({"id": ids, "name": names, "city": pa.array(["oslo", "rome"] * (n // 2)),
                      "amount": ids.astype(np.float64) / 4}, schema=CUST))  # fmt: skip
    spill = tmp_path / "lookup-cache"
    spill.mkdir()
    pa.default_memory_pool().release_unused()
    before = _anon_kib()
    lt = LookupTable(t, refresh_interval=math.inf, cache="full", cache_rows=100_000, cache_dir=str(spill))
    pa.default_memory_pool().release_unused()
    grew = (_anon_kib() - before) << 10
    assert lt.num_rows == n and lt.on_disk
    assert lt.memory_bytes() == 0 and lt.disk_bytes() > 100 << 20
    # the heap did not take the state (the reads' and index build's transients are released)
    assert grew < lt.disk_bytes() // 2, (grew, lt.disk_bytes())
    print(f"heap grew {grew >> 20} MiB for a state of {lt.disk_bytes() >> 20} MiB on disk")
    assert not list(spill.iterdir())  # every file unlinked once mapped

    def check(k: np.ndarray, renamed: dict[int, str]) -> None:
        out, found = lt.lookup_found(pa.array(k))
        assert bool(np.array_equal(found, (k >= 0) & (k < n)))
        want = [renamed.get(int(x), f"customer-{x}") if 0 <= x < n else None for x in k]
        assert out.column("name").to_pylist() == want
        amount = np.asarray(out.column("amount").to_numpy(zero_copy_only=False))
        assert np.allclose(amount[found], k[found] / 4)

    rng = np.random.default_rng(5)
    probes = rng.integers(-n // 10, n + n // 10, 1_000_000)
    for chunk in np.array_split(probes, 5):
        check(chunk, {})
    for k in rng.integers(0, n, 300):
        assert lt.get(int(k))["name"] == f"customer-{k}"
    changed = rng.choice(n, 5_000, replace=False)
    t.write(pa.table({"id": changed, "name": [f"new-{k}" for k in changed], "city": ["x"] * 5_000,
                      "amount": changed.astype(np.float64) / 4}, schema=CUST))  # fmt: skip
    t.delete(pa.table({"id": pa.array([0, 1], pa.int64())}))
    assert lt.refresh() and lt.last_refresh.mode == "delta"
    renamed = {int(k): f"new-{k}" for k in changed}
    check(changed, renamed)
    check(rng.integers(2, n, 200_000), renamed)
    assert lt.lookup_found(pa.array([0, 1, 2], pa.int64()))[1].tolist() == [False, False, True]
    assert lt.memory_bytes() == 0
    # the measure sees a state on the heap
    pa.default_memory_pool().release_unused()
    before = _anon_kib()
    heap = LookupTable(t, refresh_interval=math.inf, cache="memory")
    pa.default_memory_pool().release_unused()
    assert (_anon_kib() - before) << 10 > heap.memory_bytes() // 2 > lt.disk_bytes() // 4
