"""Cross-partition upsert: a primary key without every partition field. A key lives in one
partition; writing it into another moves it (deduplicate), or goes to the partition it has
(partial-update, aggregation), or is dropped (first-row), as Paimon's cross-partition assigner
decides. The key index is bootstrapped from the table when a writer starts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import CommitConflictError, InvalidInputError, OptionError

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.int64())])


def rows(dt: Any, ids: Any, v: Any) -> pa.Table:
    ids = list(ids)
    dts = dt if isinstance(dt, list) else [dt] * len(ids)
    vs = v if isinstance(v, list) else [v] * len(ids)
    return pa.table({"dt": dts, "id": ids, "v": vs}, schema=SCHEMA)


def make(catalog: lakelog.Catalog, name: str = "db.x", **options: str) -> lakelog.Table:
    return catalog.create_table(name, SCHEMA, primary_key=["id"], partition_by=["dt"], options=options)


def content(t: lakelog.Table, **scan: Any) -> dict[int, tuple[str, int]]:
    got: dict[int, tuple[str, int]] = {}
    for r in t.to_arrow(**scan).to_pylist():
        assert r["id"] not in got, f"key {r['id']} in partitions {got[r['id']][0]} and {r['dt']}"
        got[r["id"]] = (r["dt"], r["v"])
    return got


def test_created_without_bucket_it_is_dynamic(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    assert t.options["bucket"] == "-1" and t.store.schema.bucket_mode == "KEY_DYNAMIC"
    with pytest.raises(OptionError, match="sequence.field"):
        make(catalog, "db.seq", **{"sequence.field": "v"})


def test_deduplicate_moves_a_key_and_deletes_it_from_its_old_partition(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"changelog-producer": "input"})
    s1 = t.write(rows("a", range(5), 1))
    s2 = t.write(rows("b", [3, 4, 9], 2))
    assert content(t) == {0: ("a", 1), 1: ("a", 1), 2: ("a", 1), 3: ("b", 2), 4: ("b", 2), 9: ("b", 2)}
    got = sorted((r["rowkind"], r["dt"], r["id"]) for r in t.changes(s1, s2).to_pylist())
    assert got == [("+I", "b", 3), ("+I", "b", 4), ("+I", "b", 9), ("-D", "a", 3), ("-D", "a", 4)]
    assert {p: n for p, n in t.bucket_counts().items()} == {("a",): -1, ("b",): -1}
    import os

    assert not os.path.exists(os.path.join(t.path, "index")) and t.latest_snapshot().index_manifest is None


def test_a_new_writer_bootstraps_the_key_index_from_the_table(catalog: lakelog.Catalog) -> None:
    make(catalog).write(rows("a", range(10), 1))
    t = catalog.get_table("db.x")
    t.delete(rows("a", [2], 0))
    with t.stream_writer() as w:
        w.write(rows("c", [1, 2, 11], 3)).commit()
        w.write(rows("d", [1], 4)).commit()
    got = content(t)
    assert got[1] == ("d", 4) and got[2] == ("c", 3) and got[11] == ("c", 3) and got[5] == ("a", 1)
    assert len(got) == 11


def test_moves_within_one_batch_end_in_the_last_partition(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", [1, 2], 0))
    t.write(rows(["b", "c", "a", "c", "b"], [1, 1, 1, 2, 7], [10, 11, 12, 13, 14]))
    assert content(t) == {1: ("a", 12), 2: ("c", 13), 7: ("b", 14)}
    t.write(rows(["b", "b"], [1, 1], [20, 21]))
    assert content(t)[1] == ("b", 21)


@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_partial_update_and_aggregation_keep_the_key_in_its_partition(catalog: lakelog.Catalog, engine: str) -> None:
    opts = {"merge-engine": engine}
    if engine == "aggregation":
        opts["fields.v.aggregate-function"] = "sum"
    t = make(catalog, **opts)
    t.write(rows("a", [1, 2], 5))
    t.write(rows(["b", "c"], [1, 3], [7, 8]))  # 1 stays in a; 3 is new: its first row's partition
    t.write(rows(["d", "c"], [3, 3], [1, 1]))
    want_1 = 12 if engine == "aggregation" else 7
    want_3 = 10 if engine == "aggregation" else 1
    assert content(t) == {1: ("a", want_1), 2: ("a", 5), 3: ("c", want_3)}


def test_first_row_keeps_the_first_partition(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"merge-engine": "first-row"})
    t.write(rows("a", [1], 5))
    t.write(rows(["b", "a", "c", "c"], [1, 1, 4, 4], [6, 7, 8, 9]))
    assert content(t) == {1: ("a", 5), 4: ("c", 8)}


def test_dynamic_buckets_inside_a_partition(catalog: lakelog.Catalog) -> None:
    t = make(catalog, **{"dynamic-bucket.target-row-num": "3"})
    t.write(rows("a", range(10), 1))
    files = t.files().to_pylist()
    assert sorted({f["bucket"] for f in files}) == [0, 1, 2, 3]
    t.write(rows("b", range(3), 2))  # moves out of a: a's buckets 0 gets room again
    t.write(rows("a", [20, 21], 3))
    got = content(t)
    assert got[20] == ("a", 3) and got[0] == ("b", 2) and len(got) == 12
    # a new writer counts the live keys of each bucket (Paimon's bootstrap): bucket 0 of a lost its
    # keys to b and is empty, so it is not counted; bucket 3 has room for the new keys
    by_key = {}
    for f in t.files().to_pylist():
        if f["partition"] == "{a}":
            from lakelog.connector.format.data_file import read_data_file

            for k in read_data_file(f["file_path"]).column("_KEY_id").to_pylist():
                by_key[k] = f["bucket"]
    assert by_key[20] == 3 and by_key[21] == 3


def test_fixed_buckets_with_a_cross_partition_key(catalog: lakelog.Catalog) -> None:
    from .buckets_util import assert_keys_in_their_buckets

    t = make(catalog, bucket="3")
    assert t.store.schema.bucket_mode == "HASH_FIXED"
    t.write(rows("a", range(20), 1))
    t.write(rows("b", range(10, 30), 2))
    got = content(t)
    assert len(got) == 30 and got[15] == ("b", 2) and got[5] == ("a", 1)
    assert_keys_in_their_buckets(t)


def test_another_writer_in_between_is_refused(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(rows("a", range(5), 1))
    w = t.stream_writer()
    w.write(rows("b", [1], 2))
    w._write.flush()  # its key index is loaded, with rows not committed
    catalog.get_table("db.x").write(rows("c", [1], 3))
    with pytest.raises(CommitConflictError, match="cross-partition table .* another writer"):
        w.commit()
    assert content(t)[1] == ("c", 3)
    with t.stream_writer() as w2:  # a writer with nothing pending reloads the index and goes on
        w2.write(rows("d", [2], 4)).commit()
        catalog.get_table("db.x").write(rows("e", [2, 3], 5))
        w2.write(rows("f", [3], 6)).commit()
    got = content(t)
    assert got[2] == ("e", 5) and got[3] == ("f", 6)


def test_overwrite_keeps_keys_inside_the_partitions_it_replaces(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    t.write(pa.concat_tables([rows("a", range(5), 1), rows("b", range(5, 8), 2)]))
    t.overwrite(rows("a", [1, 2, 30], 9))
    assert content(t) == {1: ("a", 9), 2: ("a", 9), 30: ("a", 9), 5: ("b", 2), 6: ("b", 2), 7: ("b", 2)}
    with pytest.raises(InvalidInputError, match="lives in a partition this overwrite does not replace"):
        t.overwrite(rows("a", [6], 0))
    assert content(t)[6] == ("b", 2)


@pytest.mark.parametrize("parallelism", ["1", "3"])
def test_bootstrap_reads_as_many_splits_at_once_as_the_option_says(
    catalog: lakelog.Catalog, monkeypatch: pytest.MonkeyPatch, parallelism: str
) -> None:
    """cross-partition-upsert.bootstrap-parallelism: the key index loads with that many readers
    (at most 4 threads in one process), and loads every key either way."""
    import concurrent.futures

    from lakelog.connector.table import cross_partition

    t = make(catalog, **{"cross-partition-upsert.bootstrap-parallelism": parallelism})
    for dt in "abcd":
        t.write(rows(dt, [ord(dt) * 10 + i for i in range(3)], 1))
    sizes: list[int] = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers: int) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers=max_workers)

    monkeypatch.setattr(cross_partition, "ThreadPoolExecutor", Recording)
    with catalog.get_table("db.x").stream_writer() as w:
        w.write(rows("e", [ord("a") * 10], 2)).commit()  # moves a key: the index was loaded
    assert sizes == [int(parallelism)]
    assert content(t)[ord("a") * 10] == ("e", 2) and len(content(t)) == 12
