"""Model-based tests of the merge engines and changelog producers, through tables.

Each test runs random steps (upserts with colliding keys, -U/-D rows where the engine allows them,
deletes, out-of-order sequence values, full and universal compactions) against an oracle: every
row ever written per key, folded with the row-at-a-time reference (tests/merge_reference.py) in
sequence order. After every step ``t.to_arrow()`` must equal the oracle. For the ``lookup``
producer, replaying ``t.changes(0)`` from an empty table must give the table's content after every
step, and for ``full-compaction`` right after every full compaction; for ``input`` the changelog
must be exactly the rows written.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.table.commit import TableCommit
from lakelog.connector.table.write import TableWrite
from tests import merge_reference as ref

INS, UB, UA, DEL = 0, 1, 2, 3
KIND_NAMES = {"+I": INS, "-U": UB, "+U": UA, "-D": DEL}

Row = tuple[Any, ...]
Reference = Callable[[list[tuple[int, Row]]], Optional[tuple[int, Any]]]


@dataclass
class Config:
    name: str
    columns: list[tuple[str, pa.DataType, str]]  # name, arrow type, reference root
    options: dict[str, str]
    kinds: list[int]  # row kinds the random batches use
    reference: Reference
    producers: list[str]
    seq_field: Optional[str] = None
    deletes: bool = True  # t.delete(keys) is allowed
    small: dict[str, int] = field(default_factory=dict)  # sequence column -> value range (many ties)
    retract_needs_insert: bool = False  # -U/-D only for keys that were inserted before
    full_rows_after_delete: bool = False

    @property
    def names(self) -> list[str]:
        return [n for n, _, _ in self.columns]

    def ref_fields(self) -> list[tuple[str, str, bool]]:
        return [(n, root, n != "k") for n, _, root in self.columns]


def _dedupe_cols(seq: bool) -> list[tuple[str, pa.DataType, str]]:
    cols = [("k", pa.int32(), "INT"), ("v", pa.string(), "STRING"), ("n", pa.int64(), "BIGINT")]
    return cols + [("ts", pa.int64(), "BIGINT")] if seq else cols


def _agg_reference(cfg_fields: list[tuple[str, str, bool]]) -> Reference:
    def reference(rows: list[tuple[int, Row]]) -> Optional[tuple[int, Any]]:
        aggs = [
            ref.make_agg("primary-key", "INT", {}),
            ref.make_agg("sum", "BIGINT", {}),
            ref.make_agg("max", "INT", {"ignore_retract": True}),
            ref.make_agg("last_non_null_value", "STRING", {"ignore_retract": True}),
            ref.make_agg("listagg", "STRING", {"delimiter": ",", "ignore_retract": True}),
        ]
        return ref.Aggregation(cfg_fields, aggs, False).merge(rows)

    return reference


def _pu_reference(cfg_fields: list[tuple[str, str, bool]], remove_on_delete: bool) -> Reference:
    def reference(rows: list[tuple[int, Row]]) -> Optional[tuple[int, Any]]:
        return ref.PartialUpdate(cfg_fields, {}, {}, False, remove_on_delete, set()).merge(rows)

    return reference


def _pu_group_reference(cfg_fields: list[tuple[str, str, bool]]) -> Reference:
    idx = {n: i for i, (n, _, _) in enumerate(cfg_fields)}
    g1, g2 = (idx["g1"],), (idx["g2"],)
    groups = {idx["a"]: g1, idx["b"]: g1, idx["g1"]: g1, idx["c"]: g2, idx["g2"]: g2}

    def reference(rows: list[tuple[int, Row]]) -> Optional[tuple[int, Any]]:
        aggs = {0: ref.make_agg("primary-key", "INT", {}),
                idx["c"]: ref.make_agg("sum", "BIGINT", {"ignore_retract": True})}
        return ref.PartialUpdate(cfg_fields, groups, aggs, False, False, set()).merge(rows)

    return reference


ALL_PRODUCERS = ["none", "input", "lookup", "full-compaction"]


def make_configs() -> dict[str, Config]:
    cfgs: list[Config] = []
    cols = _dedupe_cols(False)
    cfgs.append(Config("deduplicate", cols, {}, [INS, UA, UB, DEL],
                       lambda rows: ref.deduplicate(rows, False), ALL_PRODUCERS))
    cols = _dedupe_cols(True)
    cfgs.append(Config("deduplicate-seq", cols, {"sequence.field": "ts"}, [INS, UA, UB, DEL],
                       lambda rows: ref.deduplicate(rows, False), ALL_PRODUCERS, seq_field="ts",
                       small={"ts": 5}))
    cols = [("k", pa.int32(), "INT"), ("a", pa.int32(), "INT"), ("b", pa.string(), "STRING"),
            ("c", pa.int64(), "BIGINT")]
    f = [(n, r, n != "k") for n, _, r in cols]
    cfgs.append(Config("partial-update", cols, {"merge-engine": "partial-update"}, [INS, UA],
                       _pu_reference(f, False), ALL_PRODUCERS, deletes=False))
    cfgs.append(Config("partial-update-remove-on-delete", cols,
                       {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
                       [INS, UA, DEL], _pu_reference(f, True), ALL_PRODUCERS, full_rows_after_delete=True))
    cols = [("k", pa.int32(), "INT"), ("a", pa.int32(), "INT"), ("b", pa.string(), "STRING"),
            ("g1", pa.int32(), "INT"), ("c", pa.int64(), "BIGINT"), ("g2", pa.int32(), "INT"),
            ("e", pa.string(), "STRING")]
    f = [(n, r, n != "k") for n, _, r in cols]
    cfgs.append(Config("partial-update-seq-group", cols,
                       {"merge-engine": "partial-update", "fields.g1.sequence-group": "a,b",
                        "fields.g2.sequence-group": "c", "fields.c.aggregate-function": "sum",
                        "fields.c.ignore-retract": "true"},
                       [INS, UA, UB, DEL], _pu_group_reference(f), ALL_PRODUCERS, small={"g1": 4, "g2": 4},
                       retract_needs_insert=True))
    cols = [("k", pa.int32(), "INT"), ("s", pa.int64(), "BIGINT"), ("mx", pa.int32(), "INT"),
            ("lnn", pa.string(), "STRING"), ("la", pa.string(), "STRING")]
    f = [(n, r, n != "k") for n, _, r in cols]
    cfgs.append(Config("aggregation", cols,
                       {"merge-engine": "aggregation", "fields.s.aggregate-function": "sum",
                        "fields.mx.aggregate-function": "max", "fields.mx.ignore-retract": "true",
                        "fields.lnn.aggregate-function": "last_non_null_value",
                        "fields.lnn.ignore-retract": "true",
                        "fields.la.aggregate-function": "listagg", "fields.la.ignore-retract": "true"},
                       [INS, UA, UB, DEL], _agg_reference(f), ALL_PRODUCERS))
    cols = _dedupe_cols(False)
    cfgs.append(Config("first-row", cols, {"merge-engine": "first-row"}, [INS, UA],
                       lambda rows: ref.first_row(rows, False), ["none", "lookup"], deletes=False))
    return {c.name: c for c in cfgs}


CONFIGS = make_configs()
def _case(name: str, producer: str) -> Any:
    return pytest.param(name, producer, id=f"{name}-{producer}")


CASES = [_case(c, p) for c in CONFIGS for p in CONFIGS[c].producers]


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


class Model:
    def __init__(self, cfg: Config, producer: str, table: lakelog.Table, rng: np.random.Generator,
                 nkeys: int, stream: bool = False) -> None:
        self.cfg = cfg
        self.producer = producer
        self.t = table
        self.rng = rng
        self.nkeys = nkeys
        self.history: dict[int, list[tuple[int, Row, int]]] = {}
        self.arrival = 0
        self.written: Counter[tuple[str, Row]] = Counter()  # input rows (input producer check)
        self.log: list[str] = []
        # stream mode: one long-lived writer commits every step without waiting for its background
        # compactions (lookup-wait=false), as a streaming job does; the lookup changelog may lag,
        # so it must replay to the table as of some earlier step
        self.stream = stream
        self.writer = table.stream_writer() if stream else None
        self.states: list[list[dict[str, Any]]] = [[]]

    # ---- oracle -------------------------------------------------------------------------------
    def expected(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        seq_i = cfg.names.index(cfg.seq_field) if cfg.seq_field else None
        out = []
        for k in sorted(self.history):
            rows = self.history[k]
            if seq_i is not None:  # nulls are the oldest; ties keep arrival order
                rows = sorted(rows, key=lambda r: (r[1][seq_i] is not None, r[1][seq_i] or 0, r[2]))
            res = cfg.reference([(kind, vals) for kind, vals, _ in rows])
            if res is None or res[0] == DEL:
                continue
            out.append(dict(zip(cfg.names, res[1])))
        return out

    def actual(self) -> list[dict[str, Any]]:
        return sorted(self.t.to_arrow().to_pylist(), key=lambda r: r["k"])

    # ---- random input -------------------------------------------------------------------------
    def _value(self, name: str, typ: pa.DataType) -> Any:
        rng = self.rng
        if name in self.cfg.small:
            return None if rng.random() < 0.15 else int(rng.integers(0, self.cfg.small[name]))
        if rng.random() < 0.25:
            return None
        if pa.types.is_string(typ):
            return str(rng.choice(["x", "y", "z", "w", ""]))
        return int(rng.integers(-20, 50))

    def batch(self, n: int) -> tuple[list[Row], list[int]]:
        rows: list[Row] = []
        kinds: list[int] = []
        seq_cols = [self.cfg.names.index(c) for c in self.cfg.small]
        for _ in range(n):
            k = int(self.rng.integers(0, self.nkeys))
            kind = int(self.rng.choice(self.cfg.kinds))
            seen = self.history.get(k, []) + [(kd, r, 0) for kd, r in zip(kinds, rows) if r[0] == k]
            if self.cfg.retract_needs_insert and kind in (UB, DEL) and not any(kd in (INS, UA) for kd, _, _ in seen):
                kind = INS
            row = [k] + [self._value(nm, ty) for nm, ty, _ in self.cfg.columns[1:]]
            if self.cfg.full_rows_after_delete and any(kd == DEL for kd, _, _ in seen):
                # a -D merged with later rows (write buffer, compaction) becomes a +I of those rows
                # only, which older levels then fill in (Paimon does the same): write whole rows
                row = [k] + [x if x is not None else ("s" if pa.types.is_string(ty) else 1)
                             for x, (nm, ty, _) in zip(row[1:], self.cfg.columns[1:])]
            # A removed key is forgotten once a compaction drops its -D (as in Paimon): keep the
            # sequence values of later rows at or above those of the retractions written before, so
            # that the oracle's fold over all rows stays right. Older values still arrive later.
            for i in seq_cols:
                floor = max((r[i] for kd, r, _ in seen if kd in (UB, DEL) and r[i] is not None), default=None)
                if floor is not None and (row[i] is None or row[i] < floor):
                    row[i] = floor + int(self.rng.integers(0, 2))
            rows.append(tuple(row))
            kinds.append(kind)
        return rows, kinds

    def _record(self, rows: list[Row], kinds: list[int]) -> None:
        for r, kind in zip(rows, kinds):
            self.history.setdefault(r[0], []).append((kind, r, self.arrival))
            self.arrival += 1
            self.written[(_kind_name(kind), r)] += 1

    def _arrow(self, rows: list[Row]) -> pa.Table:
        schema = pa.schema([pa.field(n, ty, nullable=n != "k") for n, ty, _ in self.cfg.columns])
        return pa.Table.from_pylist([dict(zip(self.cfg.names, r)) for r in rows], schema=schema)

    # ---- steps --------------------------------------------------------------------------------
    def step_write(self) -> None:
        if self.writer is not None:
            for _ in range(int(self.rng.integers(1, 3))):
                rows, kinds = self.batch(int(self.rng.integers(1, 12)))
                self.writer.write_changes(self._arrow(rows), np.array(kinds, np.int8))
                self._record(rows, kinds)
                self.log.append(f"write {list(zip(kinds, rows))}")
            self.writer.commit()
            return
        w = TableWrite(self.t.store)
        parts = int(self.rng.integers(1, 3))  # one or two batches in the same commit
        for _ in range(parts):
            rows, kinds = self.batch(int(self.rng.integers(1, 12)))
            w.write_changes(self._arrow(rows), np.array(kinds, np.int8))
            self._record(rows, kinds)
            self.log.append(f"write {list(zip(kinds, rows))}")
        TableCommit(self.t.store).commit(w.prepare_commit(), properties=w.commit_properties())

    def step_delete(self) -> None:
        keys = sorted({int(k) for k in self.rng.integers(0, self.nkeys, size=int(self.rng.integers(1, 4)))})
        if self.writer is not None:
            self.writer.delete(pa.table({"k": pa.array(keys, pa.int32())})).commit()
        else:
            self.t.delete(pa.table({"k": pa.array(keys, pa.int32())}))
        none = (None,) * (len(self.cfg.columns) - 1)
        self._record([(k,) + none for k in keys], [DEL] * len(keys))
        self.log.append(f"delete {keys}")

    def step_compact(self, full: bool) -> None:
        if self.writer is not None:  # no second writer beside a live one: wait for its compactions
            self.writer.commit(wait_compaction=True)
            self.log.append("commit, waiting for compaction")
            return
        self.t.compact(full=full)
        self.log.append(f"compact full={full}")

    def run(self, steps: int) -> None:
        for i in range(steps):
            r = self.rng.random()
            compacted_full = False
            if r < 0.15:
                self.step_compact(True)
                compacted_full = True
            elif r < 0.25:
                self.step_compact(False)
            elif r < 0.35 and self.cfg.deletes:
                self.step_delete()
            else:
                self.step_write()
            self.check(i, compacted_full)
        self.step_compact(True)
        self.check(steps, True)
        if self.writer is not None:
            self.writer.close()

    # ---- checks -------------------------------------------------------------------------------
    def context(self, step: int) -> str:
        return f"{self.cfg.name}/{self.producer} step {step}:\n" + "\n".join(self.log[-8:])

    def check(self, step: int, compacted_full: bool) -> None:
        actual, expected = self.actual(), self.expected()
        assert actual == expected, self.context(step)
        changes = self.t.changes(0) if self.t.snapshots() else None
        if changes is None:
            return
        self.states.append(actual)
        if self.stream and self.producer == "lookup" and not compacted_full:
            assert replay(changes, self.cfg.names) in self.states, "lagging changelog: " + self.context(step)
        elif self.producer == "lookup" or (self.producer == "full-compaction" and compacted_full):
            assert replay(changes, self.cfg.names) == actual, "changelog replay: " + self.context(step)
        if self.producer == "input":
            got = Counter((r.pop("rowkind"), tuple(r[n] for n in self.cfg.names)) for r in changes.to_pylist())
            assert got == self.written, "input changelog: " + self.context(step)
        if self.t.options.get("changelog-producer.row-deduplicate") == "true":
            assert not identical_update_pairs(changes, self.cfg.names), self.context(step)
        if self.cfg.name == "first-row":  # "it will generate insert only changelog" (Paimon's page)
            assert set(changes.column("rowkind").to_pylist()) <= {"+I"}, "first-row changelog: " + self.context(step)


def _kind_name(kind: int) -> str:
    return {INS: "+I", UB: "-U", UA: "+U", DEL: "-D"}[kind]


def replay(changes: pa.Table, names: list[str]) -> list[dict[str, Any]]:
    state: dict[Any, dict[str, Any]] = {}
    for r in changes.to_pylist():
        kind = r.pop("rowkind")
        if kind in ("+I", "+U"):
            state[r["k"]] = {n: r[n] for n in names}
        else:
            state.pop(r["k"], None)
    return [state[k] for k in sorted(state)]


def identical_update_pairs(changes: pa.Table, names: list[str]) -> list[dict[str, Any]]:
    rows = changes.to_pylist()
    out = []
    for a, b in zip(rows, rows[1:]):
        if a["rowkind"] == "-U" and b["rowkind"] == "+U" and all(a[n] == b[n] for n in names):
            out.append(b)
    return out


def make_table(tmp: Path, cfg: Config, producer: str, buckets: int, extra: Optional[dict[str, str]] = None
               ) -> lakelog.Table:
    schema = pa.schema([pa.field(n, ty, nullable=n != "k") for n, ty, _ in cfg.columns])
    options = {"bucket": str(buckets), "changelog-producer": producer,
               "num-sorted-run.compaction-trigger": "3", **cfg.options, **(extra or {})}
    return lakelog.Catalog(str(tmp / "wh")).create_table("db.t", schema, primary_key=["k"], options=options)


def run_model(tmp: Path, name: str, producer: str, seed: int, steps: int, nkeys: int,
              extra: Optional[dict[str, str]] = None, stream: bool = False) -> None:
    cfg = CONFIGS[name]
    rng = np.random.default_rng(seed)
    buckets = 1 if stream else 1 + seed % 2  # a lagging changelog is a prefix per bucket
    t = make_table(tmp, cfg, producer, buckets=buckets, extra=extra)
    Model(cfg, producer, t, rng, nkeys, stream=stream).run(steps)


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,producer", CASES)
def test_engine_model(tmp_path: Path, name: str, producer: str) -> None:
    run_model(tmp_path, name, producer, seed=zlib.crc32(f"{name}/{producer}".encode()), steps=12, nkeys=6)


@pytest.mark.parametrize("name,producer", [_case(n, p) for n in CONFIGS for p in ("lookup", "full-compaction")
                                           if p in CONFIGS[n].producers])
def test_row_deduplicate(tmp_path: Path, name: str, producer: str) -> None:
    run_model(tmp_path, name, producer, seed=7, steps=12, nkeys=4,
              extra={"changelog-producer.row-deduplicate": "true"})


STREAM_CASES = [_case(c, p) for c in CONFIGS for p in CONFIGS[c].producers if p != "full-compaction"]


@pytest.mark.parametrize("name,producer", STREAM_CASES)
def test_engine_model_stream_writer(tmp_path: Path, name: str, producer: str) -> None:
    """A long-lived writer with background compaction and lookup-wait=false."""
    run_model(tmp_path, name, producer, seed=zlib.crc32(f"stream/{name}/{producer}".encode()), steps=16,
              nkeys=6, extra={"lookup-wait": "false", "num-sorted-run.stop-trigger": "4"}, stream=True)


# merge-on-write: every engine Paimon allows with deletion vectors, and the producers it allows
DV_CASES = [_case(c, p) for c in CONFIGS if c != "first-row" for p in ("none", "input", "lookup")]


@pytest.mark.parametrize("name,producer", DV_CASES)
def test_engine_model_deletion_vectors(tmp_path: Path, name: str, producer: str) -> None:
    run_model(tmp_path, name, producer, seed=zlib.crc32(f"dv/{name}/{producer}".encode()), steps=14, nkeys=6,
              extra={"deletion-vectors.enabled": "true"})


@pytest.mark.parametrize("name,producer", DV_CASES)
def test_engine_model_deletion_vectors_stream_writer(tmp_path: Path, name: str, producer: str) -> None:
    run_model(tmp_path, name, producer, seed=zlib.crc32(f"dv-stream/{name}/{producer}".encode()), steps=16,
              nkeys=6, extra={"deletion-vectors.enabled": "true", "lookup-wait": "false",
                              "num-sorted-run.stop-trigger": "4"}, stream=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name,producer", CASES)
def test_engine_model_slow(tmp_path: Path, name: str, producer: str, seed: int) -> None:
    run_model(tmp_path / str(seed), name, producer, seed=100 + seed, steps=40, nkeys=12)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name,producer", STREAM_CASES)
def test_engine_model_stream_writer_slow(tmp_path: Path, name: str, producer: str, seed: int) -> None:
    run_model(tmp_path / str(seed), name, producer, seed=200 + seed, steps=40, nkeys=12,
              extra={"lookup-wait": "false", "num-sorted-run.stop-trigger": "4"}, stream=True)
