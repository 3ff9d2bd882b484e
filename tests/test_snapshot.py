"""Snapshots, tags and consumers: JSON compatibility with pypaimon, atomic commits, stale hints."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakelog.connector.errors import CorruptFileError, OptionError, SnapshotNotFoundError, TagError
from lakelog.connector.format.consumers import ConsumerManager
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.snapshot import Snapshot, SnapshotManager
from lakelog.connector.format.tags import TagManager
from tests._meta_oracle import build_tables


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_tables(str(tmp_path_factory.mktemp("pp") / "wh"))


def _snap(sid: int, **kw: Any) -> Snapshot:
    base: dict[str, Any] = dict(
        id=sid,
        schema_id=0,
        base_manifest_list=f"manifest-list-b-{sid}",
        delta_manifest_list=f"manifest-list-d-{sid}",
        commit_user="user-a",
        commit_identifier=sid,
        commit_kind="APPEND",
        time_millis=1_000 * sid,
        total_record_count=10 * sid,
        delta_record_count=10,
    )
    base.update(kw)
    return Snapshot(**base)


def _manager(tmp_path: Path, n: int = 0, **kw: Any) -> SnapshotManager:
    sm = SnapshotManager(FileIO(), str(tmp_path / "t"))
    for i in range(1, n + 1):
        assert sm.try_commit(_snap(i, **kw))
    return sm


# ---------------------------------------------------------------------------------------------
# JSON compatibility
# ---------------------------------------------------------------------------------------------

_KEYS = {
    "version": "version",
    "id": "id",
    "schemaId": "schema_id",
    "baseManifestList": "base_manifest_list",
    "deltaManifestList": "delta_manifest_list",
    "totalRecordCount": "total_record_count",
    "deltaRecordCount": "delta_record_count",
    "commitUser": "commit_user",
    "commitIdentifier": "commit_identifier",
    "commitKind": "commit_kind",
    "timeMillis": "time_millis",
    "baseManifestListSize": "base_manifest_list_size",
    "deltaManifestListSize": "delta_manifest_list_size",
    "uuid": "uuid",
    "writerVersion": "writer_version",
}


@pytest.mark.parametrize("table", ["pk", "ap"])
def test_pypaimon_snapshots_read_and_reprint_byte_identically(oracle: dict[str, Any], table: str) -> None:
    sm = SnapshotManager(FileIO(), oracle[f"{table}_path"])
    ids = sm.snapshot_ids()
    assert ids == ([1, 2, 3, 4] if table == "ap" else [1, 2, 3])
    for sid in ids:
        path = sm.snapshot_path(sid)
        text = Path(path).read_text()
        s = sm.snapshot(sid)
        raw = json.loads(text)
        for key, value in raw.items():
            assert getattr(s, _KEYS[key]) == value, key
        assert s.to_json() == text  # same keys, order, indentation
    assert sm.latest_id() == ids[-1]
    assert sm.earliest_id() == 1
    if table == "ap":
        assert sm.snapshot(4).commit_kind == "OVERWRITE"


def test_pypaimon_reads_our_snapshots(tmp_path: Path) -> None:
    from pypaimon.common.json_util import JSON
    from pypaimon.snapshot.snapshot import Snapshot as PPSnapshot
    from pypaimon.snapshot.snapshot_manager import SnapshotManager as PPManager

    s = _snap(
        1,
        changelog_manifest_list="manifest-list-c-1",
        changelog_manifest_list_size=77,
        changelog_record_count=3,
        index_manifest="index-manifest-1",
        watermark=-5,
        statistics="stats-1",
        properties={"k": "v"},
        next_row_id=100,
        uuid="u-1",
        writer_version="lakelog-test",
        base_manifest_list_size=11,
        delta_manifest_list_size=12,
        log_offsets={0: 5, 3: 9},
    )
    pp = JSON.from_json(s.to_json(), PPSnapshot)
    for key, attr in _KEYS.items():
        assert getattr(pp, attr) == getattr(s, attr), key
    assert (pp.changelog_manifest_list, pp.changelog_manifest_list_size, pp.changelog_record_count) == (
        "manifest-list-c-1",
        77,
        3,
    )
    assert (pp.index_manifest, pp.watermark, pp.statistics, pp.properties, pp.next_row_id) == (
        "index-manifest-1",
        -5,
        "stats-1",
        {"k": "v"},
        100,
    )
    # through pypaimon's snapshot manager on disk, including a LATEST hint we wrote
    sm = _manager(tmp_path, 3)
    from pypaimon.filesystem.local_file_io import LocalFileIO

    ppm = PPManager(LocalFileIO(sm.table_path), sm.table_path)
    latest = ppm.get_latest_snapshot()
    assert latest is not None and latest.id == 3 and latest.commit_user == "user-a"


def test_json_omits_nulls_and_ignores_unknown_keys() -> None:
    s = _snap(7)
    obj = json.loads(s.to_json())
    assert "changelogManifestList" not in obj and "uuid" not in obj and "logOffsets" not in obj
    assert list(obj)[:5] == ["version", "id", "schemaId", "baseManifestList", "deltaManifestList"]
    obj["someFutureField"] = {"x": 1}
    assert Snapshot.from_json(json.dumps(obj)) == s
    with_offsets = _snap(7, log_offsets={1: 10, 0: 3})
    back = Snapshot.from_json(with_offsets.to_json())
    assert back.log_offsets == {1: 10, 0: 3}
    assert json.loads(with_offsets.to_json())["logOffsets"] == {"1": 10, "0": 3}


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        '{"version": 3, "id": 1}',
        json.dumps({**_snap(1).to_dict(), "id": "one"}),
        json.dumps({**_snap(1).to_dict(), "commitUser": None}),
        json.dumps({**_snap(1).to_dict(), "properties": {"a": 1}}),
        "",
    ],
)
def test_corrupt_snapshot_file_names_the_file(tmp_path: Path, text: str) -> None:
    sm = _manager(tmp_path, 1)
    Path(sm.snapshot_path(1)).write_text(text)
    with pytest.raises(CorruptFileError, match=re.escape(sm.snapshot_path(1))):
        sm.snapshot(1)
    with pytest.raises(CorruptFileError, match=re.escape(sm.snapshot_path(1))):
        sm.latest()


def test_missing_snapshot(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 2)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 5"):
        sm.snapshot(5)
    empty = SnapshotManager(FileIO(), str(tmp_path / "empty"))
    assert empty.latest_id() is None and empty.earliest_id() is None
    assert empty.latest() is None and empty.snapshots() == []
    assert empty.earlier_or_equal_time_millis(10**15) is None
    assert empty.find_by_commit("u", 1) is False


# ---------------------------------------------------------------------------------------------
# Atomic commits and hints
# ---------------------------------------------------------------------------------------------


def test_try_commit_never_overwrites(tmp_path: Path) -> None:
    sm = _manager(tmp_path)
    assert sm.try_commit(_snap(1, commit_user="first"))
    assert not sm.try_commit(_snap(1, commit_user="second"))
    assert sm.snapshot(1).commit_user == "first"
    assert Path(sm.latest_hint_path).read_text() == "1"
    assert Path(sm.earliest_hint_path).read_text() == "1"


def test_racing_commits_for_one_id_have_one_winner(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 4)
    results: dict[str, bool] = {}
    barrier = threading.Barrier(8)

    def attempt(user: str) -> None:
        barrier.wait()
        results[user] = sm.try_commit(_snap(5, commit_user=user))

    threads = [threading.Thread(target=attempt, args=(f"u{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [u for u, ok in results.items() if ok]
    assert len(winners) == 1
    assert sm.snapshot(5).commit_user == winners[0]
    assert sm.latest_id() == 5
    # no temp file is left; the commit lock's file stays (readers list only snapshot-*)
    assert sorted(os.listdir(sm.snapshot_dir)) == [".lock", "EARLIEST", "LATEST"] + [
        f"snapshot-{i}" for i in range(1, 6)
    ]


@pytest.mark.parametrize("hint", ["2", "", "garbage", "9", None, "-1"])
def test_stale_or_bad_latest_hint(tmp_path: Path, hint: str | None) -> None:
    sm = _manager(tmp_path, 5)
    if hint is None:
        os.remove(sm.latest_hint_path)
    else:
        Path(sm.latest_hint_path).write_text(hint)
    assert sm.latest_id() == 5
    latest = sm.latest()
    assert latest is not None and latest.id == 5


def test_latest_hint_far_behind(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 40)
    Path(sm.latest_hint_path).write_text("1")
    assert sm.latest_id() == 40


def test_earliest_after_expiry(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 6)
    assert sm.earliest_id() == 1
    assert sm.delete(1) and sm.delete(2)
    assert not sm.delete(2)
    assert sm.earliest_id() == 3  # stale hint (1) is verified and ignored
    sm.commit_hint_earliest(3)
    assert sm.earliest_id() == 3
    sm.commit_hint_earliest(5)  # a hint ahead of reality (snapshot 4 still exists)
    assert sm.earliest_id() == 3
    os.remove(sm.earliest_hint_path)
    assert sm.earliest_id() == 3
    assert [s.id for s in sm.snapshots()] == [3, 4, 5, 6]
    earliest = sm.earliest()
    assert earliest is not None and earliest.id == 3


def test_listing_ignores_temp_files_and_hints(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 3)
    Path(sm.snapshot_dir, ".snapshot-4.abc.tmp").write_text("{}")
    Path(sm.snapshot_dir, "snapshot-x").write_text("{}")
    assert sm.snapshot_ids() == [1, 2, 3]
    os.remove(sm.latest_hint_path)
    assert sm.latest_id() == 3


def test_earlier_or_equal_time_millis(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 10)  # snapshot i committed at 1000 * i
    found = sm.earlier_or_equal_time_millis(5500)
    assert found is not None and found.id == 5
    found = sm.earlier_or_equal_time_millis(7000)
    assert found is not None and found.id == 7
    assert sm.earlier_or_equal_time_millis(999) is None
    found = sm.earlier_or_equal_time_millis(10**12)
    assert found is not None and found.id == 10
    sm.delete(1)
    sm.delete(2)
    found = sm.earlier_or_equal_time_millis(3500)
    assert found is not None and found.id == 3
    assert sm.earlier_or_equal_time_millis(2500) is None


def test_find_by_commit(tmp_path: Path) -> None:
    sm = _manager(tmp_path)
    commits = [("a", 1), ("b", 1), ("a", 2), ("a", 2), ("b", 5), ("a", 3)]
    for sid, (user, ident) in enumerate(commits, start=1):
        assert sm.try_commit(_snap(sid, commit_user=user, commit_identifier=ident))
    for user, ident in commits:
        assert sm.find_by_commit(user, ident)
    assert not sm.find_by_commit("a", 4)
    assert not sm.find_by_commit("b", 3)
    assert not sm.find_by_commit("c", 1)
    latest_b = sm.latest_of_user("b")
    assert latest_b is not None and latest_b.id == 5
    assert sm.latest_of_user("nobody") is None


def test_hint_failures_do_not_fail_the_commit(tmp_path: Path) -> None:
    sm = _manager(tmp_path, 1)
    os.remove(sm.latest_hint_path)
    os.mkdir(sm.latest_hint_path)  # the hint cannot be written now
    assert sm.try_commit(_snap(2))
    assert sm.latest_id() == 2


# ---------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------


def test_tags_create_get_list_delete(tmp_path: Path) -> None:
    tm = TagManager(FileIO(), str(tmp_path / "t"))
    assert tm.list() == {}
    tm.create("v2", _snap(2))
    tm.create("a-first", _snap(5))
    tm.create("b", _snap(2))
    assert tm.get("v2") == _snap(2)
    assert list(tm.list()) == ["b", "v2", "a-first"]  # by snapshot id, then name
    assert tm.exists("b") and not tm.exists("zz")
    with pytest.raises(TagError, match="already exists"):
        tm.create("b", _snap(3))
    assert tm.get("b").id == 2
    tm.delete("b")
    assert not tm.exists("b")
    with pytest.raises(TagError, match="does not exist"):
        tm.delete("b")
    with pytest.raises(TagError, match="does not exist"):
        tm.get("b")
    info = tm.get_info("v2")
    assert info.create_time is None and info.time_retained is None


@pytest.mark.parametrize("name", ["", "  ", "a/b", "..", "x..y", "a\\b", "123"])
def test_invalid_tag_names(tmp_path: Path, name: str) -> None:
    tm = TagManager(FileIO(), str(tmp_path / "t"))
    with pytest.raises(TagError):
        tm.create(name, _snap(1))


def test_tag_with_retention_round_trips(tmp_path: Path) -> None:
    tm = TagManager(FileIO(), str(tmp_path / "t"))
    before = dt.datetime.now().replace(microsecond=0)
    tm.create("keep", _snap(3), time_retained=dt.timedelta(hours=36))
    info = tm.get_info("keep")
    assert info.snapshot == _snap(3)
    assert info.time_retained == dt.timedelta(hours=36)
    assert info.create_time is not None and before <= info.create_time <= dt.datetime.now()
    obj = json.loads(Path(tm.tag_path("keep")).read_text())
    assert obj["tagTimeRetained"] == 129600.0 and isinstance(obj["tagCreateTime"], list)


def test_tags_written_by_pypaimon(oracle: dict[str, Any]) -> None:
    tm = TagManager(FileIO(), oracle["pk_path"])
    sm = SnapshotManager(FileIO(), oracle["pk_path"])
    tags = tm.list()
    assert list(tags) == ["t1", "ttl"]
    assert tags["t1"] == sm.snapshot(2)
    assert tags["ttl"] == sm.snapshot(3)
    info = tm.get_info("ttl")
    assert info.time_retained == dt.timedelta(days=1)
    assert info.create_time is not None and abs(info.create_time - dt.datetime.now()) < dt.timedelta(hours=1)


def test_pypaimon_reads_our_tags(tmp_path: Path) -> None:
    from pypaimon.filesystem.local_file_io import LocalFileIO
    from pypaimon.tag.tag_manager import TagManager as PPTagManager

    root = str(tmp_path / "t")
    tm = TagManager(FileIO(), root)
    tm.create("plain", _snap(2, uuid="u2"))
    tm.create("ttl", _snap(3), time_retained=dt.timedelta(minutes=90))
    pp = PPTagManager(LocalFileIO(root), root)
    plain = pp.get("plain")
    assert plain is not None and plain.id == 2 and plain.uuid == "u2" and plain.tag_time_retained is None
    ttl = pp.get("ttl")
    assert ttl is not None and ttl.id == 3 and ttl.tag_time_retained == dt.timedelta(minutes=90)
    assert sorted(pp.list_tags()) == ["plain", "ttl"]


def test_corrupt_tag_names_the_file(tmp_path: Path) -> None:
    tm = TagManager(FileIO(), str(tmp_path / "t"))
    tm.create("x", _snap(1))
    Path(tm.tag_path("x")).write_text("{oops")
    with pytest.raises(CorruptFileError, match=re.escape(tm.tag_path("x"))):
        tm.get("x")


# ---------------------------------------------------------------------------------------------
# Consumers
# ---------------------------------------------------------------------------------------------


def test_consumers(tmp_path: Path) -> None:
    cm = ConsumerManager(FileIO(), str(tmp_path / "t"))
    assert cm.get("c1") is None and cm.list() == {} and cm.min_next_snapshot() is None
    cm.reset("c1", 5)
    cm.reset("c2", 3)
    cm.reset("c1", 7)
    assert cm.get("c1") == 7
    assert cm.list() == {"c1": 7, "c2": 3}
    assert cm.min_next_snapshot() == 3
    assert json.loads(Path(cm.consumer_path("c1")).read_text()) == {"nextSnapshot": 7}
    assert cm.delete("c2") and not cm.delete("c2")
    assert cm.min_next_snapshot() == 7


def test_consumer_expiry(tmp_path: Path) -> None:
    cm = ConsumerManager(FileIO(), str(tmp_path / "t"))
    cm.reset("old", 1)
    cm.reset("new", 2)
    old_time = time.time() - 3600
    os.utime(cm.consumer_path("old"), (old_time, old_time))
    assert cm.expire(int((time.time() - 60) * 1000)) == ["old"]
    assert cm.list() == {"new": 2}


@pytest.mark.parametrize("cid", ["", "a/b", "..", ".", "a\\b"])
def test_invalid_consumer_ids(tmp_path: Path, cid: str) -> None:
    cm = ConsumerManager(FileIO(), str(tmp_path / "t"))
    with pytest.raises(OptionError, match="consumer"):
        cm.reset(cid, 1)


def test_corrupt_consumer_names_the_file(tmp_path: Path) -> None:
    cm = ConsumerManager(FileIO(), str(tmp_path / "t"))
    cm.reset("c", 1)
    Path(cm.consumer_path("c")).write_text('{"next": 1}')
    with pytest.raises(CorruptFileError, match=re.escape(cm.consumer_path("c"))):
        cm.get("c")


def test_consumers_interoperate_with_pypaimon(tmp_path: Path) -> None:
    from pypaimon.consumer.consumer import Consumer
    from pypaimon.consumer.consumer_manager import ConsumerManager as PPConsumerManager
    from pypaimon.filesystem.local_file_io import LocalFileIO

    root = str(tmp_path / "t")
    cm = ConsumerManager(FileIO(), root)
    pp = PPConsumerManager(LocalFileIO(root), root)
    cm.reset("ours", 4)
    pp.reset_consumer("theirs", Consumer(next_snapshot=9))
    assert pp.consumers() == {"ours": 4, "theirs": 9}
    assert cm.list() == {"ours": 4, "theirs": 9}
