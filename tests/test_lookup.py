"""LookupTable (lakelog.operators.lookup) against dict oracles: refreshes after upserts, deletes,
compaction and snapshot expiration; partitioned and multi-bucket tables; secondary keys; odd keys."""

from __future__ import annotations

import datetime
import decimal
import math
import random
import time
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import InvalidInputError, OptionError, SchemaError
from lakelog.connector.format.schema_changes import AddColumn
from lakelog.operators.lookup_index import column_hash, py_value_hash
from lakelog.operators.lookup_table import LookupTable
from lakelog.operators.sql.rewrite import LookupCall, ProbeSide, rewrite_lookup_joins

CUST = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("city", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
PART = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("city", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
CODES = pa.schema(
    [
        pa.field("region", pa.string(), nullable=False),
        pa.field("code", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("city", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
CITIES = ["berlin", "paris", "rome", "oslo", None]


# ---- a random workload with a dict oracle ----------------------------------------------------------------
class Workload:
    """Random upserts and deletes on a primary-key table, mirrored in ``self.rows`` (key -> row)."""

    def __init__(self, table: lakelog.Table, schema: pa.Schema, pk: list[str], seed: int) -> None:
        self.t = table
        self.schema = schema
        self.pk = pk
        self.rnd = random.Random(seed)
        self.rows: dict[tuple[Any, ...], dict[str, Any]] = {}

    def random_key(self) -> tuple[Any, ...]:
        r = self.rnd
        if self.pk == ["id"]:
            return (r.randrange(200),)
        if self.pk == ["dt", "id"]:
            return (r.choice(["2024-01-01", "2024-01-02", "2024-01-03"]), r.randrange(60))
        return (r.choice(["eu", "us", "asia"]), f"c{r.randrange(70):03d}")

    def row(self, key: tuple[Any, ...]) -> dict[str, Any]:
        r = self.rnd
        out = dict(zip(self.pk, key))
        out["name"] = r.choice([None, f"n{r.randrange(10**6)}"])
        out["city"] = r.choice(CITIES)
        out["amount"] = r.choice([None, round(r.uniform(-100, 100), 3)])
        return out

    def commit(self) -> None:
        """One commit: some upserts and some deletes of distinct keys."""
        keys = list({self.random_key() for _ in range(self.rnd.randrange(1, 30))})
        self.rnd.shuffle(keys)
        n_del = self.rnd.randrange(0, len(keys) // 2 + 1)
        deletes, upserts = keys[:n_del], keys[n_del:]
        up_rows = [self.row(k) for k in upserts]
        with self.t.writer() as w:
            if up_rows:
                w.write(pa.Table.from_pylist(up_rows, schema=self.schema))
            if deletes:
                w.delete(pa.Table.from_pylist([dict(zip(self.pk, k)) for k in deletes]))
        for k, r in zip(upserts, up_rows):
            self.rows[k] = r
        for k in deletes:
            self.rows.pop(k, None)


def _sorted_rows(rows: list[dict[str, Any]], names: list[str]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[n] for n in names) for r in rows), key=repr)


def check_primary(lt: LookupTable, w: Workload) -> None:
    names = lt.columns
    assert _sorted_rows(lt.to_arrow().to_pylist(), names) == _sorted_rows(list(w.rows.values()), names)
    assert lt.num_rows == len(w.rows)
    # a batch of present, absent and null keys
    probes: list[Optional[tuple[Any, ...]]] = [w.random_key() for _ in range(40)]
    probes += list(w.rows)[:10]
    probes.append(None)
    cols = {c: [None if p is None else p[i] for p in probes] for i, c in enumerate(w.pk)}
    got = lt.lookup(pa.table(cols)).to_pylist()
    for p, g in zip(probes, got):
        want = w.rows.get(p) if p is not None else None
        assert g == (want if want is not None else dict.fromkeys(names)), (p, g, want)
    found = lt.contains(cols)
    assert list(found) == [p is not None and p in w.rows for p in probes]
    # single keys
    for p in probes[:15] + probes[-11:-1]:
        assert p is not None
        assert lt.get(p) == w.rows.get(p)


def check_secondary(lt: LookupTable, w: Workload, column: str) -> None:
    probe = CITIES + ["nowhere"] if column == "city" else sorted({k[-1] for k in w.rows})[:20] + [10**6]
    pi, got = lt.lookup_all(pa.array(probe, type=w.schema.field(column).type))
    assert list(pi) == sorted(pi)
    for i, v in enumerate(probe):
        want = [r for r in w.rows.values() if v is not None and r[column] == v]
        mine = [got.slice(j, 1).to_pylist()[0] for j in np.flatnonzero(pi == i)]
        assert _sorted_rows(mine, lt.columns) == _sorted_rows(want, lt.columns), v
        assert _sorted_rows(lt.get_all(v), lt.columns) == _sorted_rows(want, lt.columns)


SCENARIOS = {
    "int-key-4-buckets": (CUST, ["id"], None, {"bucket": "4"}),
    "partitioned-2-buckets": (PART, ["dt", "id"], ["dt"], {"bucket": "2"}),
    "string-pair-key-3-buckets": (CODES, ["region", "code"], None, {"bucket": "3"}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_random_upserts_deletes_compaction_expiration(catalog: lakelog.Catalog, scenario: str) -> None:
    schema, pk, part, opts = SCENARIOS[scenario]
    t = catalog.create_table("db.dim", schema, primary_key=pk, partition_by=part, options=opts)
    w = Workload(t, schema, pk, seed=len(scenario))
    w.commit()
    lt = LookupTable(t.path, refresh_interval=math.inf)
    sec_col = "city" if scenario != "partitioned-2-buckets" else "id"
    sec = LookupTable(t.path, key_columns=[sec_col], columns=["name", sec_col, "amount", *pk][:4],
                      refresh_interval=math.inf)  # fmt: skip
    assert not sec.unique and lt.unique
    check_primary(lt, w)
    modes: set[str] = set()
    for rnd in range(14):
        for _ in range(w.rnd.randrange(1, 3)):
            w.commit()
        if rnd % 4 == 3:
            t.compact(full=rnd % 8 == 3)
        if rnd % 5 == 4:  # the lookups are behind: the snapshots they need disappear
            w.commit()
            t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=int(time.time() * 1000) + 1)
        assert lt.refresh()
        assert sec.refresh()
        assert lt.snapshot_id == t.latest_snapshot().id == sec.snapshot_id
        modes.add(lt.last_refresh.mode)
        check_primary(lt, w)
        check_secondary(sec, w, sec_col)
    assert {"delta", "full"} <= modes, modes
    # compaction alone changes nothing and costs nothing
    t.compact()
    assert lt.refresh() and lt.last_refresh.mode == "compact"
    check_primary(lt, w)
    assert not lt.refresh()  # nothing new


def test_basic_get_lookup_join(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "city": ["x", "y", "x"], "amount": [1.0, 2.0, 3.0]},
                     schema=CUST))  # fmt: skip
    lt = LookupTable(t, columns=["name", "city"], refresh_interval=0)
    assert lt.get(1) == {"name": "a", "city": "x"}
    assert lt.get((2,)) == {"name": "b", "city": "y"}
    assert lt.get(7) is None and lt.get(None) is None and lt.get_all(7) == []
    assert lt.get_values(3) == (("c", "x"),)
    assert lt.schema.names == ["name", "city"]
    out = lt.lookup(pa.array([3, None, 9, 1], pa.int32()))  # another integer type, cast to the key's
    assert out.to_pylist() == [
        {"name": "c", "city": "x"},
        {"name": None, "city": None},
        {"name": None, "city": None},
        {"name": "a", "city": "x"},
    ]
    assert lt.lookup([[1, 2]]).column("name").to_pylist() == ["a", "b"]  # a list of key columns
    assert lt.lookup(pa.array([2**40, -1], pa.int64())).column("name").to_pylist() == [None, None]
    orders = pa.table({"oid": [10, 11, 12, 13], "id": [3, 4, 1, 3], "name": ["o1", "o2", "o3", "o4"]})
    inner = lt.join(orders, "id")
    assert inner.column_names == ["oid", "id", "name", "name_dim", "city"]
    assert inner.to_pylist() == [
        {"oid": 10, "id": 3, "name": "o1", "name_dim": "c", "city": "x"},
        {"oid": 12, "id": 1, "name": "o3", "name_dim": "a", "city": "x"},
        {"oid": 13, "id": 3, "name": "o4", "name_dim": "c", "city": "x"},
    ]
    left = lt.join(orders.to_batches()[0], {"id": "id"}, "left", suffix="_c")
    assert left.column("name_c").to_pylist() == ["c", None, "a", "c"]
    assert left.schema.field("name_c").nullable
    # refresh_interval=0: every lookup sees the latest snapshot
    t.write(pa.table({"id": [4], "name": ["d"], "city": ["z"], "amount": [4.0]}, schema=CUST))
    t.delete(pa.table({"id": [1]}))
    assert lt.get(4) == {"name": "d", "city": "z"} and lt.get(1) is None
    assert lt.last_refresh is not None and lt.last_refresh.mode == "delta"
    assert lt.last_refresh.from_snapshot == 1 and lt.last_refresh.to_snapshot == 3
    assert lt.memory_bytes() > 0


def test_refresh_interval_controls_staleness(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    lt = LookupTable(t.path, refresh_interval="1 h")
    t.write(pa.table({"id": [1], "name": ["b"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    assert lt.get(1)["name"] == "a"  # within the interval: the loaded snapshot
    assert lt.snapshot_id == 1
    assert lt.refresh() and lt.get(1)["name"] == "b"
    default = LookupTable(t.path)  # the table's continuous.discovery-interval (10 s)
    assert default.refresh_interval == 10.0


def test_async_refresh_and_consumer(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    with LookupTable(t.path, refresh_interval=0.05, async_refresh=True, consumer_id="dim-lookup") as lt:
        assert t.store.consumer_manager.get("dim-lookup") == 2
        t.write(pa.table({"id": [1, 2], "name": ["b", "c"], "city": ["x", "y"], "amount": [1.0, 2.0]},
                         schema=CUST))  # fmt: skip
        deadline = time.monotonic() + 20
        while lt.snapshot_id != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lt.get(1)["name"] == "b" and lt.get(2)["name"] == "c"
        assert t.store.consumer_manager.get("dim-lookup") == 3
    assert lt._thread is None


def test_lazy_load_and_empty_table(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    lt = LookupTable(t.path, refresh_interval=0, lazy=True)
    assert lt.snapshot_id is None and lt.num_rows == 0
    assert lt.get(1) is None
    assert lt.lookup(pa.array([1, 2])).num_rows == 2
    t.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    assert lt.get(1)["name"] == "a" and lt.last_refresh.mode == "initial"


def test_filter_pushdown_and_rows_leaving_it(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "city": ["x", "y", "x"], "amount": [1.0, 2.0, 3.0]},
                     schema=CUST))  # fmt: skip
    lt = LookupTable(t.path, columns=["name"], filter="city = 'x' AND amount < 10", refresh_interval=0)
    assert [lt.get(i) for i in (1, 2, 3)] == [{"name": "a"}, None, {"name": "c"}]
    t.write(
        pa.table({"id": [1, 2], "name": ["a2", "b2"], "city": ["y", "x"], "amount": [1.0, 2.0]}, schema=CUST)
    )
    assert [lt.get(i) for i in (1, 2, 3)] == [None, {"name": "b2"}, {"name": "c"}]
    assert lt.last_refresh.mode == "delta"


def test_partial_update_engine_reloads_touched_buckets(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table(
        "db.cust", CUST, primary_key=["id"], options={"bucket": "4", "merge-engine": "partial-update"}
    )
    t.write(pa.table({"id": list(range(40)), "name": [f"n{i}" for i in range(40)], "city": ["x"] * 40,
                      "amount": [float(i) for i in range(40)]}, schema=CUST))  # fmt: skip
    lt = LookupTable(t.path, refresh_interval=0)
    t.write(pa.table({"id": [5], "name": [None], "city": ["y"], "amount": [None]}, schema=CUST))
    assert lt.get(5) == {"id": 5, "name": "n5", "city": "y", "amount": 5.0}  # merged, not replayed
    info = lt.last_refresh
    assert info.mode == "buckets" and "merge engine" in info.reason
    assert info.rows_read < 40  # only the touched bucket
    assert lt.num_rows == 40
    assert _sorted_rows(lt.to_arrow().to_pylist(), lt.columns) == _sorted_rows(
        t.to_arrow().to_pylist(), lt.columns
    )


def test_append_table_secondary_key(catalog: lakelog.Catalog) -> None:
    schema = pa.schema([pa.field("k", pa.string()), pa.field("v", pa.int64())])
    t = catalog.create_table("db.events", schema)
    t.write(pa.table({"k": ["a", "b", "a", None], "v": [1, 2, 3, 4]}, schema=schema))
    with pytest.raises(OptionError, match="no primary key"):
        LookupTable(t.path)
    lt = LookupTable(t.path, key_columns=["k"], refresh_interval=0)
    assert sorted(r["v"] for r in lt.get_all("a")) == [1, 3]
    assert lt.get_all(None) == []
    t.write(pa.table({"k": ["a", "c"], "v": [5, 6]}, schema=schema))
    assert sorted(r["v"] for r in lt.get_all("a")) == [1, 3, 5]
    assert lt.last_refresh.mode == "delta"
    with pytest.raises(InvalidInputError, match="not unique"):
        lt.lookup(pa.array(["a"]))
    assert lt.lookup(pa.array(["b", "c"])).column("v").to_pylist() == [2, 6]  # one match each: fine
    pi, rows = lt.lookup_all(pa.array(["c", "a", "zz", None]))
    assert list(pi) == [0, 1, 1, 1] and rows.column("v").to_pylist()[0] == 6


def test_schema_change_reloads(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    lt = LookupTable(t.path, columns=["name"], refresh_interval=0)
    t.alter(AddColumn("tier", pa.int32()))
    t2 = catalog.get_table("db.cust")
    t2.write(pa.table({"id": [2], "name": ["b"], "city": ["y"], "amount": [2.0], "tier": [7]},
                      schema=t2.schema))  # fmt: skip
    assert lt.get(2) == {"name": "b"} and lt.get(1) == {"name": "a"}
    assert lt.last_refresh.mode == "full" and "schema" in lt.last_refresh.reason


@pytest.mark.parametrize(
    "atype,values",
    [
        (pa.string(), ["", "a", "ünïcode", "x" * 100]),
        (pa.binary(), [b"", b"\x00", b"\xff\x00abc"]),
        (pa.date32(), [datetime.date(2024, 1, 1), datetime.date(1969, 12, 31)]),
        (pa.timestamp("us"), [datetime.datetime(2024, 1, 1, 12, 0, 0, 5), datetime.datetime(1999, 1, 1)]),
        (pa.decimal128(12, 2), [decimal.Decimal("1.50"), decimal.Decimal("-99.99"), decimal.Decimal("0.00")]),
        (pa.int16(), [0, -5, 300]),
        (pa.float64(), [0.0, 1.5, -2.25]),
        (pa.bool_(), [True, False]),
    ],
)
def test_key_types(catalog: lakelog.Catalog, atype: pa.DataType, values: list[Any]) -> None:
    schema = pa.schema([pa.field("k", atype, nullable=False), pa.field("v", pa.int64())])
    t = catalog.create_table("db.typed", schema, primary_key=["k"], options={"bucket": "2"})
    t.write(pa.table({"k": pa.array(values, atype), "v": list(range(len(values)))}, schema=schema))
    lt = LookupTable(t.path, refresh_interval=math.inf)
    for i, v in enumerate(values):
        assert lt.get(v) == {"k": v, "v": i}
    assert lt.lookup(pa.array(values[::-1], atype)).column("v").to_pylist() == list(range(len(values)))[::-1]
    # two-column key with the same type: exercises the equality check
    lt2 = LookupTable(t.path, key_columns=["k", "v"], refresh_interval=math.inf)
    assert lt2.get((values[0], 0)) == {"k": values[0], "v": 0}
    assert lt2.get((values[0], 1)) is None


def test_hash_python_and_arrow_agree() -> None:
    rnd = random.Random(5)
    strs = ["", "a", "ab", "é", "x" * 70] + [
        "".join(rnd.choice("abcé€") for _ in range(rnd.randrange(20))) for _ in range(50)
    ]
    arr = pa.array(strs + [None], pa.string())
    for a in (arr, arr.slice(3), pa.array(strs, pa.large_string())):
        h, valid = column_hash(a, "bytes")
        for x, hv, ok in zip(a.to_pylist(), h, valid):
            assert ok == (x is not None)
            if x is not None:
                assert int(hv) == py_value_hash(x, "bytes", a.type)
    ints = pa.array([0, 1, -1, 2**62, -(2**63), None], pa.int64())
    h, valid = column_hash(ints, "int")
    assert [int(x) for x, ok in zip(h, valid) if ok] == [
        py_value_hash(v, "int", pa.int64()) for v in ints.to_pylist() if v is not None
    ]
    assert py_value_hash(2**63, "int", pa.int64()) == -1  # cannot be in the column


def test_errors(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    with pytest.raises(SchemaError, match="unknown column"):
        LookupTable(t.path, columns=["nope"])
    with pytest.raises(SchemaError, match="unknown column"):
        LookupTable(t.path, key_columns=["nope"])
    lt = LookupTable(t.path)
    with pytest.raises(InvalidInputError, match="value"):
        lt.get((1, 2))
    with pytest.raises(OptionError):
        lt.join(pa.table({"a": [1]}), ["a", "b"])
    with pytest.raises(SchemaError):
        lt.lookup(pa.array(["x"]))
    nested = pa.schema([pa.field("k", pa.list_(pa.int64())), pa.field("v", pa.int64())])
    t2 = catalog.create_table("db.nested", nested)
    with pytest.raises(SchemaError, match="cannot be a lookup key"):
        LookupTable(t2.path, key_columns=["k"])


def test_compaction_of_replaced_rows_keeps_memory_bounded(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    ids = list(range(2000))
    t.write(
        pa.table({"id": ids, "name": ["a"] * 2000, "city": ["x"] * 2000, "amount": [0.0] * 2000}, schema=CUST)
    )
    lt = LookupTable(t.path, refresh_interval=math.inf)
    for round_ in range(4):  # every row replaced each round
        t.write(pa.table({"id": ids, "name": [f"r{round_}"] * 2000, "city": ["x"] * 2000, "amount": [0.0] * 2000},
                         schema=CUST))  # fmt: skip
        lt.refresh()
        assert lt.get(1999)["name"] == f"r{round_}"
    st = lt._state
    assert st.rows.num_rows <= 2 * 2000 + 1024 and lt.num_rows == 2000


# ---- SQL rewrite ------------------------------------------------------------------------------------------
def _resolve(parts: list[str]) -> Optional[str]:
    return "/wh/db.db/cust" if parts[-1] == "cust" else None


def _register(
    path: str, keys: list[str], hint: Optional[str], names: list[str], probe: Optional[ProbeSide]
) -> LookupCall:
    _register.calls.append((path, keys, hint))  # type: ignore[attr-defined]
    _register.probes.append(probe)  # type: ignore[attr-defined]
    return LookupCall("dim_fn", ["id", "name"])


def test_rewrite_lookup_joins() -> None:
    _register.calls = []  # type: ignore[attr-defined]
    _register.probes = []  # type: ignore[attr-defined]
    sql = (
        "SELECT o.oid, c.name FROM orders AS o JOIN cust FOR SYSTEM_TIME AS OF o.proc AS c "
        "ON o.cid = c.id WHERE o.oid > 1"
    )
    assert rewrite_lookup_joins(sql, _resolve, _register) == (
        "SELECT o.oid, c.name FROM orders AS o JOIN LATERAL TABLE(dim_fn(o.cid)) AS `c`(`id`, `name`) ON TRUE "
        "WHERE o.oid > 1"
    )
    sql = (
        "SELECT * FROM orders o LEFT JOIN db.cust /*+ OPTIONS('x'='1') */ FOR SYSTEM_TIME AS OF PROCTIME() c "
        "ON c.id = o.cid AND c.name = UPPER(o.n)"
    )
    assert rewrite_lookup_joins(sql, _resolve, _register) == (
        "SELECT * FROM orders o LEFT JOIN LATERAL TABLE(dim_fn(o.cid, UPPER(o.n))) AS `c`(`id`, `name`) ON TRUE"
    )
    assert _register.calls[-1] == ("/wh/db.db/cust", ["id", "name"], "/*+ OPTIONS('x'='1') */")  # type: ignore[attr-defined]
    # inner joins keep other conditions; non-lakelog tables stay as they are
    sql = (
        "SELECT * FROM orders o JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON o.cid = c.id AND c.name <> 'x' "
        "AND o.a BETWEEN 1 AND 2 JOIN other FOR SYSTEM_TIME AS OF o.p AS z ON z.k = o.k"
    )
    assert rewrite_lookup_joins(sql, _resolve, _register) == (
        "SELECT * FROM orders o JOIN LATERAL TABLE(dim_fn(o.cid)) AS `c`(`id`, `name`) ON (c.name <> 'x') "
        "AND (o.a BETWEEN 1 AND 2) JOIN other FOR SYSTEM_TIME AS OF o.p AS z ON z.k = o.k"
    )
    with pytest.raises(OptionError, match="LEFT lookup join"):
        rewrite_lookup_joins(
            "SELECT * FROM o LEFT JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON o.k = c.id AND c.name > 'a'",
            _resolve,
            _register,
        )
    with pytest.raises(OptionError, match="equalities"):
        rewrite_lookup_joins(
            "SELECT * FROM o JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON o.k > c.id", _resolve, _register
        )
    plain = "SELECT * FROM a JOIN cust AS c ON a.x = c.id"
    assert rewrite_lookup_joins(plain, _resolve, _register) == plain
    # the probe side, where it is one table reference (a sharded join routes it)
    assert _register.probes[:3] == [  # type: ignore[attr-defined]
        ProbeSide("orders AS o", "o", ("o.cid",)),
        ProbeSide("orders o", "o", ("o.cid", "UPPER(o.n)")),
        ProbeSide("orders o", "o", ("o.cid",)),
    ]


def test_rewrite_lookup_joins_with_a_vectorised_function() -> None:
    """A unique key is looked up a batch at a time: one ROW per probe, unnested; an inner join keeps
    the rows found (the hit column is never null in a found row), a left join keeps every probe."""

    def vec(path: str, keys: list[str], hint: Optional[str], names: list[str],
            probe: Optional[ProbeSide]) -> LookupCall:  # fmt: skip
        return LookupCall("f", ["id", "name"], None, "id")

    inner = "SELECT * FROM o JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON o.k = c.id AND c.name <> 'x'"
    assert rewrite_lookup_joins(inner, _resolve, vec) == (
        "SELECT * FROM o JOIN UNNEST(ARRAY[f(o.k)]) AS `c`(`id`, `name`) ON `c`.`id` IS NOT NULL AND (c.name <> 'x')"
    )
    left = "SELECT * FROM o LEFT OUTER JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON o.k = c.id"
    assert rewrite_lookup_joins(left, _resolve, vec) == (
        "SELECT * FROM o LEFT OUTER JOIN UNNEST(ARRAY[f(o.k)]) AS `c`(`id`, `name`) ON TRUE"
    )


def test_rewrite_lookup_joins_routes_a_single_probe_table() -> None:
    def route(path: str, keys: list[str], hint: Optional[str], names: list[str],
              probe: Optional[ProbeSide]) -> LookupCall:  # fmt: skip
        seen.append(probe)
        return LookupCall("f", ["id"], "__routed" if probe is not None else None)

    seen: list[Optional[ProbeSide]] = []
    sql = "SELECT * FROM db.orders /*+ OPTIONS('a'='b') */ AS o LEFT JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON c.id = o.k"
    assert rewrite_lookup_joins(sql, _resolve, route) == (
        "SELECT * FROM __routed AS `o` LEFT JOIN LATERAL TABLE(f(o.k)) AS `c`(`id`) ON TRUE"
    )
    assert seen == [ProbeSide("db.orders /*+ OPTIONS('a'='b') */ AS o", "o", ("o.k",))]
    # not one table reference: a subquery, a comma list, a chain of joins
    for sql in (
        "SELECT * FROM (SELECT * FROM t) AS o JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON c.id = o.k",
        "SELECT * FROM a, orders o JOIN cust FOR SYSTEM_TIME AS OF o.p AS c ON c.id = o.k",
        "SELECT * FROM a JOIN b ON a.x = b.x JOIN cust FOR SYSTEM_TIME AS OF b.p AS c ON c.id = b.k",
    ):
        seen.clear()
        assert "__routed" not in rewrite_lookup_joins(sql, _resolve, route)
        assert seen == [None], sql


def test_files_vanishing_during_a_refresh_fall_back_to_full(
    catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakelog.connector.errors import MissingFileError
    from lakelog.connector.lsm.split_read import SplitRead

    t = catalog.create_table("db.cust", CUST, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1], "name": ["a"], "city": ["x"], "amount": [1.0]}, schema=CUST))
    lt = LookupTable(t.path, refresh_interval=math.inf)
    t.write(pa.table({"id": [2], "name": ["b"], "city": ["x"], "amount": [1.0]}, schema=CUST))

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise MissingFileError("data file expired")

    monkeypatch.setattr(SplitRead, "read_file", gone)  # the delta path reads single files
    assert lt.refresh()
    assert lt.last_refresh.mode == "full" and "expired" in lt.last_refresh.reason
    assert lt.get(2) == {"id": 2, "name": "b", "city": "x", "amount": 1.0}


def test_follows_a_table_written_by_pypaimon(warehouse: str) -> None:
    pytest.importorskip("pypaimon")
    from tests.interop_util import pp_create_table, pp_read, pp_write

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("op", pa.string())])
    pp_create_table(
        warehouse, "db.t", schema, primary_key=["id"], options={"bucket": "2", "rowkind.field": "op"}
    )
    pp_write(
        warehouse,
        "db.t",
        pa.table(
            {"id": list(range(10)), "v": [f"a{i}" for i in range(10)], "op": ["+I"] * 10}, schema=schema
        ),
    )
    t = lakelog.Catalog(warehouse).get_table("db.t")
    lt = LookupTable(t.path, columns=["v"], refresh_interval=0)
    assert lt.get(3) == {"v": "a3"}
    pp_write(
        warehouse,
        "db.t",
        pa.table(
            {"id": [1, 2, 3, 11], "v": ["x", "x", "u", "n"], "op": ["-D", "-D", "+U", "+I"]}, schema=schema
        ),
    )
    want = {r["id"]: r["v"] for r in pp_read(warehouse, "db.t").to_pylist()}
    got = {i: (r or {}).get("v") for i in range(13) for r in [lt.get(i)]}
    assert got == {i: want.get(i) for i in range(13)}
    assert lt.last_refresh.mode == "delta"


def test_lookup_follows_a_rescaled_table(catalog: lakelog.Catalog) -> None:
    """A dimension whose partitions have different bucket counts (bucket 2 -> 4, one partition
    rewritten by ``rescale``, a new one written with 4): the lookup table serves every key's latest
    row through the ALTER, the writes into both kinds of partitions and the rescale's OVERWRITE."""
    from lakelog.connector.format.schema_changes import SetOption

    schema = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
                        pa.field("v", pa.string())])  # fmt: skip
    t = catalog.create_table("db.dim", schema, primary_key=["dt", "id"], partition_by=["dt"],
                             options={"bucket": "2"})  # fmt: skip
    oracle: dict[tuple[str, int], str] = {}

    def write(dt: str, ids: range, tag: str) -> None:
        t.write(pa.table({"dt": [dt] * len(ids), "id": list(ids), "v": [f"{tag}{i}" for i in ids]}, schema=schema))
        oracle.update({(dt, i): f"{tag}{i}" for i in ids})

    def check() -> None:
        assert lt.refresh() or lt.snapshot_id == t.refresh().latest_snapshot().id
        assert lt.num_rows == len(oracle)
        assert {k: lt.get(k)["v"] for k in oracle} == oracle
        modes.append(lt.last_refresh.mode if lt.last_refresh is not None else None)

    modes: list[Optional[str]] = []
    write("a", range(40), "a")
    write("b", range(40), "b")
    lt = LookupTable(t, key_columns=["dt", "id"], columns=["v"], refresh_interval=0)
    check()
    t.alter(SetOption("bucket", "4"))
    write("a", range(20, 60), "a2")  # still 2 buckets
    write("c", range(30), "c")  # 4 buckets
    check()
    assert t.rescale(partitions=[{"dt": "b"}]) is not None
    check()
    write("b", range(30, 50), "b2")  # now 4 buckets
    check()
    assert lt.get(("a", 59)) == {"v": "a259"} and lt.get(("b", 10)) == {"v": "b10"}
    # the ALTER re-reads everything (schema change), the rescale's OVERWRITE re-reads the touched
    # (partition, bucket)s of both counts, the write after it replays its level-0 files
    assert modes == ["initial", "full", "buckets", "delta"]


# ---- sharded by bucket ------------------------------------------------------------------------------------
def _shards(t: lakelog.Table, count: int, buckets: int) -> list[LookupTable]:
    from lakelog.operators.lookup_shard import Shard

    return [LookupTable(t.path, refresh_interval=math.inf, shard=Shard(i, count, buckets)) for i in range(count)]


def check_shards(shards: list[LookupTable], w: Workload) -> None:
    """The shards partition the table's rows by routing bucket, and each key's owner answers it."""
    from lakelog.operators.lookup_shard import KeyRouter

    names = shards[0].columns
    union = [r for s in shards for r in s.to_arrow().to_pylist()]
    assert _sorted_rows(union, names) == _sorted_rows(list(w.rows.values()), names)
    router = KeyRouter.of(shards[0].store, w.pk, shards[0].shard.buckets)  # type: ignore[union-attr]
    count = len(shards)
    for key in [w.random_key() for _ in range(40)] + list(w.rows)[:20]:
        owner = router.bucket_of(key) % count
        assert [s.holds(key) for s in shards] == [i == owner for i in range(count)], key
        assert shards[owner].get(key) == w.rows.get(key), key
    # the batch path agrees with the per-record one
    keys = list(w.rows)[:30]
    table = pa.table({c: [k[i] for k in keys] for i, c in enumerate(w.pk)})
    got = router.buckets_of(table)
    assert list(got) == [router.bucket_of(k) for k in keys]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_shards_by_bucket_hold_their_share_through_random_changes(
    catalog: lakelog.Catalog, scenario: str
) -> None:
    """Issue 22 (sharded by bucket): shards of 2 and 3 subtasks, refreshed through upserts, deletes,
    compactions and expirations, hold together exactly the table's rows, each only its buckets'."""
    schema, pk, part, opts = SCENARIOS[scenario]
    t = catalog.create_table("db.dim", schema, primary_key=pk, partition_by=part, options=opts)
    w = Workload(t, schema, pk, seed=7 + len(scenario))
    for _ in range(3):
        w.commit()
    buckets = int(opts["bucket"])
    groups = {n: _shards(t, n, buckets) for n in (2, 3)}
    for shards in groups.values():
        check_shards(shards, w)
    modes: set[str] = set()
    for rnd in range(8):
        w.commit()
        if rnd % 3 == 2:
            t.compact(full=True)
        if rnd == 5:
            w.commit()
            t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=int(time.time() * 1000) + 1)
        for shards in groups.values():
            for s in shards:
                s.refresh()
                if s.last_refresh is not None:
                    modes.add(s.last_refresh.mode)
            check_shards(shards, w)
    assert {"delta", "full"} <= modes, modes
    # memory: every shard holds about its share (buckets spread over the subtasks)
    whole = LookupTable(t.path, refresh_interval=math.inf)
    assert sum(s.num_rows for s in groups[2]) == whole.num_rows
    assert max(s.memory_bytes() for s in groups[2]) < whole.memory_bytes()


def test_shards_follow_a_rescaled_partition(catalog: lakelog.Catalog) -> None:
    """A partition rescaled after the job started (bucket 2 -> 3) no longer lines up with the
    routing buckets: its rows are read whole and kept by hash, so no shard misses a key."""
    from lakelog.connector.format.schema_changes import SetOption

    t = catalog.create_table("db.dim", PART, primary_key=["dt", "id"], partition_by=["dt"],
                             options={"bucket": "2"})  # fmt: skip
    w = Workload(t, PART, ["dt", "id"], seed=3)
    for _ in range(4):
        w.commit()
    shards = _shards(t, 2, 2)
    check_shards(shards, w)
    t.alter(SetOption("bucket", "3"))
    assert t.rescale(partitions=[{"dt": "2024-01-02"}]) is not None
    for _ in range(3):
        w.commit()  # 2024-01-02 written with 3 buckets, the others with 2
    for s in shards:
        assert s.refresh()
    check_shards(shards, w)
    assert {e.total_buckets for e in t.store.live_entries(t.latest_snapshot())} == {2, 3}


def test_sharding_needs_the_bucket_key_in_the_lookup_key(catalog: lakelog.Catalog) -> None:
    from lakelog.operators.lookup_shard import KeyRouter, Shard, routing_buckets

    t = catalog.create_table("db.dim", CUST, primary_key=["id"], options={"bucket": "4"})
    assert routing_buckets(t.store, ["id"]) == (4, "")
    n, why = routing_buckets(t.store, ["city"])
    assert n is None and "bucket key column(s) ['id']" in why
    with pytest.raises(OptionError, match="cannot be sharded by bucket"):
        LookupTable(t.path, key_columns=["city"], shard=Shard(0, 2, 4))
    dyn = catalog.create_table("db.dyn", CUST, primary_key=["id"], options={"bucket": "-1"})
    assert "HASH_DYNAMIC" in routing_buckets(dyn.store, ["id"])[1]
    with pytest.raises(OptionError, match="invalid lookup shard"):
        Shard(2, 2, 4)
    # a key that can match no row belongs to every shard
    router = KeyRouter.of(t.store, ["id"])
    assert router.bucket_of((None,)) == -1 and router.bucket_of((1 << 70,)) == -1


@pytest.mark.parametrize(
    "atype, values",
    [
        (pa.int32(), [0, -1, 7, 2**31 - 1, -(2**31)]),
        (pa.string(), ["", "a", "1234567", "12345678", "ü" * 30]),
        (pa.decimal128(20, 4), [decimal.Decimal("0"), decimal.Decimal("-12.5"), decimal.Decimal("9999999999.9999")]),
        (pa.decimal128(9, 2), [decimal.Decimal("1.25"), decimal.Decimal("-0.01")]),
        (pa.timestamp("us"), [datetime.datetime(2024, 1, 2, 3, 4, 5, 678901), datetime.datetime(1960, 1, 1)]),
        (pa.date32(), [datetime.date(2024, 2, 29), datetime.date(1970, 1, 1)]),
        (pa.bool_(), [True, False]),
    ],
)
def test_scalar_bucket_hash_equals_the_vectorised_one(atype: pa.DataType, values: list[Any]) -> None:
    from lakelog.connector.format.bucket import bucket_key_hash, bucket_key_hashes
    from lakelog.connector.format.types import from_arrow_type

    types = [from_arrow_type(atype), from_arrow_type(pa.int64())]
    table = pa.table({"a": pa.array(values, atype), "b": pa.array(range(len(values)), pa.int64())})
    want = list(bucket_key_hashes(table, ["a", "b"], types))
    assert [bucket_key_hash([v, i], types) for i, v in enumerate(values)] == want


# ---- the served partitions: scan.partitions (max_pt(), max_two_pt(), fixed) ------------------------------
def test_max_pt_serves_the_latest_partition_and_follows_new_ones(catalog: lakelog.Catalog) -> None:
    """Issue 22: ``max_pt()`` serves only the partition with the largest values and switches when a
    larger one gets rows; writes to older partitions change nothing; ``max_two_pt()`` serves two;
    an overwrite reloads; fixed partitions are served as named."""
    t = catalog.create_table("db.dim", PART, primary_key=["dt", "id"], partition_by=["dt"],
                             options={"bucket": "2"})  # fmt: skip

    def write(dt: str, ids: range, name: str) -> None:
        t.write(pa.table({"dt": [dt] * len(ids), "id": list(ids), "name": [f"{name}{i}" for i in ids],
                          "city": [None] * len(ids), "amount": [None] * len(ids)}, schema=PART))  # fmt: skip

    write("2024-01-01", range(10), "a")
    write("2024-01-02", range(5), "b")
    one = LookupTable(t.path, key_columns=["id"], columns=["dt", "name"], refresh_interval=0, partitions="max_pt()")
    two = LookupTable(t.path, key_columns=["id"], columns=["dt", "name"], refresh_interval=0,
                      partitions="max_two_pt()")  # fmt: skip
    assert one.get(3) == {"dt": "2024-01-02", "name": "b3"} and one.get(7) is None and one.num_rows == 5
    assert two.num_rows == 15 and len(two.get_all(3)) == 2
    write("2024-01-01", range(10, 12), "a")  # an older partition: nothing changes
    assert one.refresh() and one.last_refresh.mode == "delta" and one.num_rows == 5
    write("2024-01-02", range(5, 7), "b")  # the served one: applied as a delta
    assert one.refresh() and one.last_refresh.mode == "delta" and one.get(6) == {"dt": "2024-01-02", "name": "b6"}
    write("2024-01-03", range(2), "c")  # a new latest partition: reloaded, the old one left
    assert one.refresh() and one.last_refresh.mode == "full" and "changed" in one.last_refresh.reason
    assert one.num_rows == 2 and one.get(1) == {"dt": "2024-01-03", "name": "c1"} and one.get(3) is None
    assert two.refresh() and two.num_rows == 9  # 2024-01-02 (7 rows) and 2024-01-03
    t.overwrite(pa.table({"dt": ["2024-01-03"], "id": [8], "name": ["c8"], "city": [None], "amount": [None]},
                         schema=PART))  # fmt: skip
    assert one.refresh() and one.last_refresh.mode == "full" and one.num_rows == 1 and one.get(8)["name"] == "c8"
    fixed = LookupTable(t.path, key_columns=["id"], columns=["name"], partitions="dt=2024-01-01")
    assert fixed.num_rows == 12 and fixed.get(11) == {"name": "a11"}
    with pytest.raises(OptionError, match="'scan.partitions' = 'max_pt'"):
        LookupTable(t.path, partitions="max_pt")
    with pytest.raises(OptionError, match="not a partition field"):
        LookupTable(t.path, partitions="id=1")
    flat = catalog.create_table("db.flat", CUST, primary_key=["id"], options={"bucket": "2"})
    with pytest.raises(OptionError, match="is not partitioned"):
        LookupTable(flat.path, partitions="max_pt()")


def test_sharding_by_default_only_for_a_large_dimension(catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakelog.operators import lookup_shard

    t = catalog.create_table("db.dim", CUST, primary_key=["id"], options={"bucket": "4"})
    assert not lookup_shard.worth_sharding(t.store)  # no snapshot yet
    Workload(t, CUST, ["id"], seed=1).commit()
    assert not lookup_shard.worth_sharding(t.store)
    size = sum(e.file.file_size for e in t.store.live_entries(t.latest_snapshot()))
    monkeypatch.setattr(lookup_shard, "SHARD_BYTES", size)
    assert lookup_shard.worth_sharding(t.store)
