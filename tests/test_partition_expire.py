"""partition.expiration-time with partition.timestamp-pattern / -formatter and
partition.expiration-check-interval: old partitions are dropped by one commit, at commit time or
on request, as Paimon's values-time expiration does."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import OptionError

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string())])
TODAY = dt.date.today()


def day(n: int) -> str:
    """The date ``n`` days ago, as 'yyyy-MM-dd'."""
    return (TODAY - dt.timedelta(days=n)).isoformat()


def rows(days: list[str], first: int = 0) -> pa.Table:
    return pa.table({"dt": days, "id": list(range(first, first + len(days))), "v": ["x"] * len(days)}, schema=SCHEMA)


def make(catalog: lakelog.Catalog, options: dict[str, str], pk: bool = True) -> lakelog.Table:
    opts = {"bucket": "2", "partition.expiration-time": "7 d", **options}
    if not pk:
        opts["bucket-key"] = "id"
    return catalog.create_table(f"db.t{uuid.uuid4().hex[:6]}", SCHEMA, primary_key=["dt", "id"] if pk else None,
                                partition_by=["dt"], options=opts)


def partitions(t: lakelog.Table) -> list[str]:
    return sorted(set(t.to_arrow().column("dt").to_pylist()))


@pytest.mark.parametrize("pk", [True, False])
def test_expire_partitions_drops_the_old_ones_in_one_commit(catalog: lakelog.Catalog, pk: bool) -> None:
    t = make(catalog, {"partition.expiration-check-interval": "1 d", "write-only": "true"}, pk=pk)
    t.write(rows([day(10), day(10), day(8), day(1), day(0)]))
    before = len(t.snapshots())
    assert t.expire_partitions() == [{"dt": day(10)}, {"dt": day(8)}]
    assert partitions(t) == [day(1), day(0)]
    assert len(t.snapshots()) == before + 1 and t.latest_snapshot().commit_kind == "COMPACT"
    assert t.expire_partitions() == []  # nothing left to drop
    assert t.to_arrow(snapshot_id=before).num_rows == 5  # time travel still sees them
    pytest.importorskip("pypaimon")
    from .interop_util import pp_read

    assert sorted(set(pp_read(catalog.warehouse, t.identifier).column("dt").to_pylist())) == [day(1), day(0)]


def test_writers_expire_at_commit_once_per_check_interval(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {})  # check interval: 1 h
    t.write(rows([day(9), day(0)]))  # the first commit of this process checks at once
    assert partitions(t) == [day(0)]
    t.write(rows([day(30)], first=10))  # within the interval: no check
    assert partitions(t) == [day(30), day(0)]
    every = make(catalog, {"partition.expiration-check-interval": "0 s"})
    every.write(rows([day(0)]))
    with every.stream_writer() as w:
        w.write(rows([day(20)], first=5)).commit()
        assert partitions(every) == [day(0)]
        w.write(rows([day(0), day(21)], first=7)).commit()  # the writer carries on after a drop
    assert partitions(every) == [day(0)]
    assert sorted(every.to_arrow().column("id").to_pylist()) == [0, 7]


def test_write_only_writers_do_not_expire_partitions(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"write-only": "true", "partition.expiration-check-interval": "0 s"})
    t.write(rows([day(9), day(0)]))
    assert partitions(t) == [day(9), day(0)]


def test_the_sink_committer_expires_partitions_after_its_commit(tmp_path: Path) -> None:
    from lakelog.connector.table.write import TableWrite
    from lakelog.operators.codec import Committable
    from lakelog.operators.committer import SinkCommitter

    t = make(lakelog.Catalog(str(tmp_path)), {"partition.expiration-check-interval": "0 s"})
    w = TableWrite(t.store)
    w.write(rows([day(12), day(0)]))
    c = Committable(uuid.uuid4().hex, "k", w.prepare_commit(), None)
    w.close()
    SinkCommitter(t.store, "sink-user", "run1").commit([c], 1, final=False)
    assert partitions(t) == [day(0)]


def test_pattern_and_formatter_build_the_time_from_several_fields(catalog: lakelog.Catalog) -> None:
    schema = pa.schema([pa.field("y", pa.int32(), False), pa.field("m", pa.string(), False),
                        pa.field("d", pa.string(), False), pa.field("id", pa.int64(), False)])
    t = catalog.create_table(
        "db.ymd", schema, primary_key=["y", "m", "d", "id"], partition_by=["y", "m", "d"],
        options={"bucket": "1", "partition.expiration-time": "2 d", "partition.timestamp-pattern": "$y$m$d",
                 "partition.timestamp-formatter": "yyyyMMdd", "write-only": "true"},
    )
    old, new = TODAY - dt.timedelta(days=5), TODAY
    t.write(pa.table({"y": [old.year, new.year], "m": [f"{old.month:02d}", f"{new.month:02d}"],
                      "d": [f"{old.day:02d}", f"{new.day:02d}"], "id": [1, 2]}, schema=schema))
    assert t.expire_partitions() == [{"y": old.year, "m": f"{old.month:02d}", "d": f"{old.day:02d}"}]
    assert t.to_arrow().column("id").to_pylist() == [2]


def test_partitions_without_a_readable_time_are_kept(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"write-only": "true"})
    t.write(rows(["not-a-date", day(100)]))
    assert t.expire_partitions() == [{"dt": day(100)}]
    assert partitions(t) == ["not-a-date"]


@pytest.mark.parametrize(
    "options,fragment",
    [
        ({"partition.timestamp-formatter": "yyyy-MM-dd EEE"}, "'EEE'"),
        ({"partition.timestamp-pattern": "$dt $hour:00"}, "$hour"),
    ],
)
def test_time_options_lakelog_cannot_follow_are_refused(
    catalog: lakelog.Catalog, options: dict[str, str], fragment: str
) -> None:
    with pytest.raises(OptionError, match=fragment.replace("$", r"\$")):
        make(catalog, options)
