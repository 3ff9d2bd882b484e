"""Snapshot expiration, orphan-file cleanup and the ``lakelog`` command line."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import SnapshotNotFoundError
from lakelog.connector.table.maintenance import referenced_files
from lakelog.jobs.cli import main

from .conftest import ORDERS, rows

OLD = time.time() - 10 * 86400  # an mtime well past any orphan guard


def orders(dt: str, ids: list[int], name: str = "x") -> pa.Table:
    n = len(ids)
    return pa.table(
        {"dt": [dt] * n, "id": ids, "name": [f"{name}{i}" for i in ids], "amount": [float(i) for i in ids]},
        schema=ORDERS,
    )


def make(catalog: lakelog.Catalog, options: dict[str, str] | None = None) -> lakelog.Table:
    opts = {"bucket": "2", "write-only": "true", **(options or {})}  # write-only: one snapshot per write
    return catalog.create_table(
        "shop.orders", ORDERS, primary_key=["dt", "id"], partition_by=["dt"], options=opts
    )


def write_n(t: lakelog.Table, n: int) -> list[int]:
    """``n`` commits, each updating keys 0..3 of partition d1 and adding key 10+i."""
    out = []
    for i in range(n):
        sid = t.write(orders("d1", [0, 1, 2, 3, 10 + i], name=f"v{i}-"))
        assert sid is not None
        out.append(sid)
    return out


def ids(t: lakelog.Table) -> list[int]:
    return [s.id for s in t.snapshots()]


def data_files_on_disk(t: lakelog.Table) -> set[str]:
    out = set()
    for d, _, files in os.walk(t.path):
        out |= {os.path.join(d, f) for f in files if f.endswith(".parquet")}
    return out


def manifest_files_on_disk(t: lakelog.Table) -> set[str]:
    return set(os.listdir(os.path.join(t.path, "manifest")))


def live_paths(t: lakelog.Table, snap: lakelog.connector.format.snapshot.Snapshot) -> set[str]:
    st = t.store
    return {st.data_file_path(e.partition, e.bucket, e.file.file_name) for e in st.live_entries(snap)}


def age_everything(t: lakelog.Table) -> None:
    for d, _, files in os.walk(t.path):
        for f in files:
            os.utime(os.path.join(d, f), (OLD, OLD))


def now_millis() -> int:
    return int(time.time() * 1000) + 1


# ---- retention semantics ---------------------------------------------------------------------------------
def test_defaults_keep_young_snapshots(catalog: lakelog.Catalog) -> None:
    t = make(catalog)  # defaults: min 10, max unbounded, 1 h
    write_n(t, 12)
    assert t.expire_snapshots() == []  # the two beyond min=10 are younger than an hour
    assert ids(t) == list(range(1, 13))
    # an explicit time limit of "now" expires everything beyond the 10 newest
    assert t.expire_snapshots(older_than_millis=now_millis()) == [1, 2]
    assert ids(t) == list(range(3, 13))


def test_num_retained_max_option_forces_expiry_of_young_snapshots(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"})
    assert t.options["snapshot.num-retained.max"] == "3"
    write_n(t, 6)
    assert t.expire_snapshots() == [1, 2, 3]  # young, but only 3 may remain
    assert ids(t) == [4, 5, 6]
    assert t.expire_snapshots() == []


def test_num_retained_min_option_protects_old_snapshots(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.num-retained.min": "4", "snapshot.time-retained": "1 ms"})
    write_n(t, 6)
    time.sleep(0.01)
    assert t.expire_snapshots() == [1, 2]  # all are old; the 4 newest stay
    assert ids(t) == [3, 4, 5, 6]


def test_time_retained_option_and_older_than_override(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 h"})
    write_n(t, 3)
    time.sleep(0.005)
    cut = now_millis()
    time.sleep(0.005)
    write_n(t, 2)
    assert t.expire_snapshots() == []  # everything is younger than an hour
    # the override: snapshots strictly older than the limit go, the first at/after it stays
    assert t.expire_snapshots(older_than_millis=cut) == [1, 2, 3]
    assert ids(t) == [4, 5]
    s4 = t.snapshot(4)
    assert t.expire_snapshots(older_than_millis=s4.time_millis) == []  # equal time: kept


def test_time_retained_short_option(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms"})
    write_n(t, 5)
    time.sleep(0.01)
    assert t.expire_snapshots() == [1, 2, 3]
    assert ids(t) == [4, 5]


def test_overrides_beat_options(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "5"})
    write_n(t, 8)
    # max forces 1..3 out; but an override of min/max keeps more or fewer
    assert t.expire_snapshots(retain_min=1, retain_max=7) == [1]
    assert t.expire_snapshots(retain_min=2, retain_max=2) == [2, 3, 4, 5, 6]
    assert ids(t) == [7, 8]


def test_expire_limit_option_and_max_deletes(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"snapshot.expire.limit": "2"})
    write_n(t, 7)
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [1, 2]
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis(), max_deletes=3) == [3, 4, 5]
    assert ids(t) == [6, 7]


def test_invalid_retention_is_refused(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    write_n(t, 2)
    with pytest.raises(ValueError, match="retain_min"):
        t.expire_snapshots(retain_min=0)
    with pytest.raises(ValueError, match="retain_max"):
        t.expire_snapshots(retain_min=3, retain_max=2)
    assert ids(t) == [1, 2]


def test_expire_on_empty_table(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == []
    assert t.remove_orphan_files(older_than_seconds=0) == []


def test_earliest_hint_follows_expiry(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    write_n(t, 5)
    hint = Path(t.path) / "snapshot" / "EARLIEST"
    assert hint.read_text().strip() == "1"
    t.expire_snapshots(retain_min=2, older_than_millis=now_millis())
    assert hint.read_text().strip() == "4"
    assert t.store.snapshot_manager.earliest_id() == 4
    assert not (Path(t.path) / "snapshot" / "snapshot-3").exists()
    assert (Path(t.path) / "snapshot" / "LATEST").read_text().strip() == "5"
    # time travel to an expired snapshot is a clear error; a kept one still reads
    with pytest.raises(SnapshotNotFoundError):
        t.to_arrow(snapshot_id=3)
    assert t.to_arrow(snapshot_id=4).num_rows == 4 + 4


# ---- files -------------------------------------------------------------------------------------------------
def test_files_of_expired_snapshots_go_tag_and_kept_files_stay(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    s1 = t.write(orders("d1", [1, 2, 3]))
    t.write(orders("d2", [7]))  # s2: a file that stays live to the end
    t.create_tag("first", s1)
    s3 = t.write(orders("d1", [1, 2, 3], name="y"))  # overwrites every key of s1
    tagged_rows = rows(t.to_arrow(snapshot_id=s1), "dt", "id")
    files_s1 = live_paths(t, t.snapshot(s1))
    files_s3_delta = {
        t.store.data_file_path(e.partition, e.bucket, e.file.file_name)
        for e in t.store.delta_entries(t.snapshot(s3))
    }
    s4 = t.compact(full=True)
    assert s4 is not None
    latest_files = live_paths(t, t.snapshot(s4))
    s5 = t.write(orders("d1", [4]))
    before = data_files_on_disk(t)
    assert files_s1 | files_s3_delta | latest_files <= before

    assert t.expire_snapshots(retain_min=2, older_than_millis=now_millis()) == [1, 2, 3]
    after = data_files_on_disk(t)
    kept_files = live_paths(t, t.snapshot(s4)) | live_paths(t, t.snapshot(s5))
    assert kept_files <= after
    assert files_s1 <= after, "files of a tagged snapshot must survive"
    # s3's level-0 files were compacted away in s4 and no tag holds them: gone
    assert files_s3_delta.isdisjoint(after)
    assert after == kept_files | files_s1
    # the tag still reads, and so does every kept snapshot
    assert rows(t.to_arrow(tag="first"), "dt", "id") == tagged_rows
    assert t.to_arrow(snapshot_id=s4).num_rows == 4
    assert t.to_arrow().num_rows == 5

    # manifests: everything left is referenced by a kept snapshot or the tag
    kept = t.snapshots() + [t.store.tag_manager.get("first")]
    _, meta = referenced_files(t.store, kept)
    assert manifest_files_on_disk(t) == meta

    # expiring down to the latest keeps the tag's files; once the tag is gone they are orphans,
    # which orphan cleanup removes (with the tag's manifests)
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [s4]
    assert data_files_on_disk(t) == live_paths(t, t.snapshot(s5)) | files_s1
    assert rows(t.to_arrow(tag="first"), "dt", "id") == tagged_rows
    tag_meta = referenced_files(t.store, [t.store.tag_manager.get("first")])[1]
    t.delete_tag("first")
    age_everything(t)
    removed = {os.path.basename(p) for p in t.remove_orphan_files(older_than_seconds=3600)}
    _, meta = referenced_files(t.store, t.snapshots())
    assert tag_meta - meta <= removed and tag_meta - meta
    assert manifest_files_on_disk(t) == meta
    # s5's (unmerged) base manifests still name s1's files (added, then deleted by the compaction):
    # like Paimon, orphan cleanup leaves files that a snapshot mentions; expiring s5 removes them
    assert files_s1 <= data_files_on_disk(t)
    assert t.to_arrow().num_rows == 5
    s6 = t.write(orders("d3", [1]))
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [s5]
    assert data_files_on_disk(t) == live_paths(t, t.snapshot(s6))
    assert t.to_arrow().num_rows == 6


def test_files_still_live_in_kept_snapshot_survive_expiry(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    s1 = t.write(orders("d9", [5]))  # a partition nobody writes again
    f1 = live_paths(t, t.snapshot(s1))
    write_n(t, 3)
    t.expire_snapshots(retain_min=1, older_than_millis=now_millis())
    assert ids(t) == [4]
    live = live_paths(t, t.snapshot(4))
    assert f1 <= live and f1 <= data_files_on_disk(t)  # written by an expired snapshot, still live
    assert data_files_on_disk(t) == live
    assert t.to_arrow().num_rows == 1 + 4 + 3


def test_append_table_expiry_deletes_compacted_files(catalog: lakelog.Catalog) -> None:
    t = catalog.create_table("db.log", ORDERS, partition_by=["dt"])
    for i in range(3):
        t.write(orders("d1", [i, i]))
    t.compact(full=True)
    assert len(t.files()) == 1
    t.expire_snapshots(retain_min=1, older_than_millis=now_millis())
    assert data_files_on_disk(t) == live_paths(t, t.latest_snapshot())
    assert t.to_arrow().num_rows == 6
    assert sorted(t.changes(0).column("id").to_pylist()) == [0, 0, 1, 1, 2, 2]


# ---- consumers ---------------------------------------------------------------------------------------------
def test_consumer_protects_snapshots_it_has_not_read(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    write_n(t, 6)
    cm = t.store.consumer_manager
    cm.reset("reader-1", 3)
    assert cm.get("reader-1") == 3
    # even a retain_max of 1 cannot take snapshots the consumer still needs
    assert t.expire_snapshots(retain_min=1, retain_max=1, older_than_millis=now_millis()) == [1, 2]
    assert ids(t) == [3, 4, 5, 6]
    assert (Path(t.path) / "snapshot" / "EARLIEST").read_text().strip() == "3"
    for sid in (3, 4, 5, 6):
        assert t.to_arrow(snapshot_id=sid).num_rows == 4 + sid
    ch = t.changes(3, 6)  # the consumer can still read its changes
    assert sorted(ch.column("id").to_pylist()) == [0, 0, 1, 1, 2, 2, 3, 3, 13, 14, 15]
    # the slowest consumer wins
    cm.reset("reader-2", 5)
    cm.reset("reader-1", 4)
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [3]
    cm.delete("reader-1")
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [4]
    cm.delete("reader-2")
    assert t.expire_snapshots(retain_min=1, older_than_millis=now_millis()) == [5]
    assert ids(t) == [6]


# ---- orphan files ------------------------------------------------------------------------------------------
def test_orphan_cleanup_removes_only_old_unreferenced_files(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    write_n(t, 3)
    t.create_tag("keep", 2)
    t.store.consumer_manager.reset("c", 3)
    t.compact(full=True)
    before = {sid: rows(t.to_arrow(snapshot_id=sid), "dt", "id") for sid in ids(t)}
    root = Path(t.path)
    bucket_dir = next(root.glob("dt=d1/bucket-*"))
    orphan_data = bucket_dir / "data-00000000-0000-0000-0000-000000000000-0.parquet"
    orphan_data.write_bytes(b"PAR1 not really")
    orphan_manifest = root / "manifest" / "manifest-deadbeef-0"
    orphan_manifest.write_bytes(b"junk")
    stale_tmp = root / "snapshot" / ".snapshot-99.0123abcd.tmp"
    stale_tmp.write_bytes(b"{}")
    stale_tmp_data = bucket_dir / ".data-x.parquet.0a1b.tmp"
    stale_tmp_data.write_bytes(b"x")
    age_everything(t)
    young_orphan = bucket_dir / "data-11111111-1111-1111-1111-111111111111-0.parquet"
    young_orphan.write_bytes(b"in flight")
    young_tmp = root / "snapshot" / ".snapshot-100.ffff.tmp"
    young_tmp.write_bytes(b"{}")
    all_before = {p for p in root.rglob("*") if p.is_file()}

    expected = {str(p) for p in (orphan_data, orphan_manifest, stale_tmp, stale_tmp_data)}
    dry = t.remove_orphan_files(older_than_seconds=3600, dry_run=True)
    assert set(dry) == expected
    assert dry == sorted(dry)
    assert {p for p in root.rglob("*") if p.is_file()} == all_before  # dry run deletes nothing

    removed = t.remove_orphan_files(older_than_seconds=3600)
    assert set(removed) == expected
    left = {p for p in root.rglob("*") if p.is_file()}
    assert left == all_before - {Path(p) for p in expected}
    assert young_orphan.exists() and young_tmp.exists()
    for name in ("EARLIEST", "LATEST", "snapshot-1"):
        assert (root / "snapshot" / name).exists()
    assert (root / "schema" / "schema-0").exists()
    assert (root / "tag" / "tag-keep").exists()
    assert (root / "consumer" / "consumer-c").exists()
    for sid, want in before.items():
        assert rows(t.to_arrow(snapshot_id=sid), "dt", "id") == want
    assert t.to_arrow(tag="keep").num_rows == 4 + 2
    assert t.remove_orphan_files(older_than_seconds=3600) == []  # idempotent


def test_orphan_cleanup_after_expiry_leaves_a_readable_table(catalog: lakelog.Catalog) -> None:
    t = make(catalog)
    write_n(t, 4)
    t.delete(pa.table({"dt": ["d1"], "id": [0]}))
    t.compact(full=True)
    write_n(t, 2)
    want = rows(t.to_arrow(), "dt", "id")
    t.expire_snapshots(retain_min=1, older_than_millis=now_millis())
    age_everything(t)
    t.remove_orphan_files(older_than_seconds=0)
    assert data_files_on_disk(t) == live_paths(t, t.latest_snapshot())
    assert rows(t.to_arrow(), "dt", "id") == want


def test_orphan_cleanup_deletes_index_and_statistics_files_no_snapshot_lists(catalog: lakelog.Catalog) -> None:
    """Index files are listed by the snapshots' index manifests, statistics files by the snapshots'
    ``statistics`` field: one no snapshot lists is an orphan, as Paimon's orphan cleaning has it
    (the index tests and tests/test_statistics.py check that listed ones are kept)."""
    t = make(catalog)
    write_n(t, 1)
    root = Path(t.path)
    (root / "index").mkdir()
    index_file = root / "index" / "index-5b8b5a1f-0"
    index_file.write_bytes(b"dv")
    (root / "statistics").mkdir()
    stats_file = root / "statistics" / "stat-1"
    stats_file.write_bytes(b"{}")
    age_everything(t)
    assert t.remove_orphan_files(older_than_seconds=0) == [str(index_file), str(stats_file)]
    assert not index_file.exists() and not stats_file.exists()


def test_branch_and_changelog_metadata_protect_their_files(catalog: lakelog.Catalog) -> None:
    """A Paimon branch (``branch/branch-<name>/snapshot``, ``.../tag``) and long-lived changelog
    metadata (``changelog/changelog-<id>``) share the table's manifests and data files."""
    t = make(catalog)
    s1 = t.write(orders("d1", [1, 2]))
    s2 = t.write(orders("d1", [1, 2], name="y"))
    s3 = t.write(orders("d1", [1, 2], name="z"))
    t.compact(full=True)
    root = Path(t.path)
    branch_snap = root / "branch" / "branch-dev" / "snapshot" / f"snapshot-{s1}"
    branch_snap.parent.mkdir(parents=True)
    branch_snap.write_bytes((root / "snapshot" / f"snapshot-{s1}").read_bytes())
    branch_tag = root / "branch" / "branch-dev" / "tag" / "tag-b"
    branch_tag.parent.mkdir(parents=True)
    branch_tag.write_bytes((root / "snapshot" / f"snapshot-{s2}").read_bytes())
    changelog = root / "changelog" / f"changelog-{s3}"
    changelog.parent.mkdir()
    changelog.write_bytes((root / "snapshot" / f"snapshot-{s3}").read_bytes())
    held = {sid: live_paths(t, t.snapshot(sid)) for sid in (s1, s2, s3)}
    t.expire_snapshots(retain_min=1, older_than_millis=now_millis())
    assert ids(t) == [4]
    age_everything(t)
    t.remove_orphan_files(older_than_seconds=0)
    on_disk = data_files_on_disk(t)
    for sid, files in held.items():
        assert files <= on_disk, f"files of snapshot {sid} (held by a branch/changelog) were deleted"
    _, meta = referenced_files(
        t.store,
        [t.store.snapshot_manager.snapshot(4)]
        + [
            lakelog.connector.format.snapshot.Snapshot.from_json(p.read_bytes())
            for p in (branch_snap, branch_tag, changelog)
        ],
    )
    assert meta <= manifest_files_on_disk(t)
    assert branch_snap.exists() and branch_tag.exists() and changelog.exists()


# ---- command line ------------------------------------------------------------------------------------------
@pytest.fixture()
def cli_table(catalog: lakelog.Catalog) -> lakelog.Table:
    t = make(catalog)
    t.write(orders("d1", [1, 2, 3]))
    t.write(orders("d2", [4]))
    t.write(orders("d1", [1], name="y"))
    t.create_tag("nightly", 2)
    return t


def test_cli_tables(
    warehouse: str, cli_table: lakelog.Table, catalog: lakelog.Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog.create_table("other.t2", ORDERS)
    assert main(["--warehouse", warehouse, "tables"]) == 0
    assert capsys.readouterr().out.split() == ["other.t2", "shop.orders"]
    assert main(["tables", "shop", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.split() == ["shop.orders"]


def test_cli_show(warehouse: str, cli_table: lakelog.Table, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--warehouse", warehouse, "show", "shop.orders"]) == 0
    out = capsys.readouterr().out
    assert "table shop.orders" in out
    assert "dt: string NOT NULL  [primary key, partition]" in out
    assert "id: int64 NOT NULL  [primary key]" in out
    assert "bucket = 2" in out
    assert "snapshots (3):" in out
    assert "nightly -> snapshot 2" in out
    lines = [ln.split() for ln in out.splitlines() if ln.strip().startswith(("1 ", "2 ", "3 "))]
    assert [ln[0] for ln in lines] == ["1", "2", "3"] and all(ln[1] == "APPEND" for ln in lines)


def test_cli_files(warehouse: str, cli_table: lakelog.Table, capsys: pytest.CaptureFixture[str]) -> None:
    n = cli_table.files().num_rows
    assert main(["--warehouse", warehouse, "files", "--table", "shop.orders"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"{n} file(s)")
    assert "dt=d1  bucket-" in out and "dt=d2  bucket-" in out
    assert out.count("  L0  data-") == n
    assert main(["--warehouse", warehouse, "files", "shop.orders", "--snapshot", "1", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)
    assert {f["partition"] for f in files} == {"{d1}"}
    assert sum(f["record_count"] for f in files) == 3
    assert main(["--warehouse", warehouse, "sys", "shop.orders", "partitions", "--json"]) == 0
    parts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["partition"] for p in parts] == ["{d1}", "{d2}"]
    assert main(["--warehouse", warehouse, "sys", "shop.orders", "tags"]) == 0
    assert "| tag_name " in capsys.readouterr().out


def test_cli_compact_and_expire(
    warehouse: str, cli_table: lakelog.Table, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--warehouse", warehouse, "compact", "--table", "shop.orders", "--progress"]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip() == "compaction committed snapshot 4"
    assert "compacting shop.orders [" in cap.err and "buckets" in cap.err
    assert main(["--warehouse", warehouse, "compact", "shop.orders"]) == 0
    assert capsys.readouterr().out.strip() == "nothing to compact"

    assert (
        main(
            [
                "--warehouse",
                warehouse,
                "expire",
                "shop.orders",
                "--retain-min",
                "1",
                "--older-than-seconds",
                "0",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == "expired 3 snapshot(s): 1..3"
    assert ids(cli_table) == [4]
    assert cli_table.to_arrow(tag="nightly").num_rows == 4  # the tag survived
    cli_table.write(orders("d3", [1]))
    cli_table.write(orders("d3", [2]))
    # --retain-max alone lowers the table's minimum (10) to it
    assert main(["--warehouse", warehouse, "expire", "shop.orders", "--retain-max", "2"]) == 0
    assert capsys.readouterr().out.strip() == "expired 1 snapshot(s): 4..4"
    assert ids(cli_table) == [5, 6]
    cli_table.delete_tag("nightly")
    age_everything(cli_table)
    assert (
        main(["--warehouse", warehouse, "expire", "shop.orders", "--orphans", "--orphan-age-seconds", "60"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "expired 0 snapshot(s)"
    assert out[1].startswith("removed ") and out[1] != "removed 0 orphan file(s)"  # the tag's manifests
    assert live_paths(cli_table, cli_table.latest_snapshot()) <= data_files_on_disk(cli_table)
    assert cli_table.to_arrow().num_rows == 6


def test_cli_errors_exit_2_with_a_message(
    warehouse: str,
    cli_table: lakelog.Table,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["--warehouse", warehouse, "show", "shop.nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lakelog: ") and "shop.nope" in err and "does not exist" in err
    assert main(["--warehouse", warehouse, "tables", "nodb"]) == 2
    assert "nodb" in capsys.readouterr().err
    assert main(["--warehouse", warehouse, "files", "shop.orders", "--snapshot", "42"]) == 2
    assert "42" in capsys.readouterr().err
    assert (
        main(["--warehouse", warehouse, "expire", "shop.orders", "--retain-min", "3", "--retain-max", "1"])
        == 2
    )
    assert "retain" in capsys.readouterr().err
    assert main(["--warehouse", warehouse, "show"]) == 2
    assert "name the table" in capsys.readouterr().err
    missing = os.path.join(os.path.dirname(warehouse), "typo")
    assert main(["--warehouse", missing, "tables"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not os.path.exists(missing)
    monkeypatch.delenv("LAKELOG_WAREHOUSE", raising=False)
    assert main(["tables"]) == 2
    assert "--warehouse" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--warehouse", warehouse, "frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert ids(cli_table) == [1, 2, 3]  # nothing happened to the table


def test_cli_warehouse_from_environment(
    warehouse: str,
    cli_table: lakelog.Table,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAKELOG_WAREHOUSE", warehouse)
    assert main(["tables"]) == 0
    assert capsys.readouterr().out.split() == ["shop.orders"]


# ---- options of maintenance ------------------------------------------------------------------------------
def _aged(path: Path, seconds: float) -> Path:
    t = time.time() - seconds
    os.utime(path, (t, t))
    return path


def test_orphan_clean_older_than_is_the_default_guard(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"orphan-clean.older-than": "2 h"})
    write_n(t, 1)
    bucket_dir = next(Path(t.path).glob("dt=d1/bucket-*"))
    one_hour = bucket_dir / "data-1h-0.parquet"
    one_hour.write_bytes(b"x")
    _aged(one_hour, 3600)
    three_hours = bucket_dir / "data-3h-0.parquet"
    three_hours.write_bytes(b"x")
    _aged(three_hours, 3 * 3600)
    assert t.remove_orphan_files(dry_run=True) == [str(three_hours)]
    assert main(["--warehouse", catalog.warehouse, "expire", "shop.orders", "--orphans"]) == 0
    assert one_hour.exists() and not three_hours.exists()
    # the default (1 d) protects both ages
    other = catalog.create_table("db.plain", ORDERS, primary_key=["dt", "id"], options={"bucket": "1"})
    other.write(orders("d1", [1]))
    orphan = Path(other.path) / "bucket-0" / "data-3h-0.parquet"
    orphan.write_bytes(b"x")
    _aged(orphan, 3 * 3600)
    assert other.remove_orphan_files() == []
    assert other.remove_orphan_files(older_than_seconds=3600) == [str(orphan)]  # an argument still wins


def test_consumer_expiration_time_releases_snapshots_of_idle_consumers(catalog: lakelog.Catalog) -> None:
    t = make(catalog, {"consumer.expiration-time": "1 h", "snapshot.num-retained.min": "1"})
    write_n(t, 4)
    cm = t.store.consumer_manager
    cm.reset("idle", 1)
    cm.reset("active", 3)
    _aged(Path(cm.consumer_path("idle")), 2 * 3600)
    assert t.expire_snapshots(older_than_millis=now_millis()) == [1, 2]  # 'active' still needs 3
    assert cm.list() == {"active": 3}
    # without the option an idle consumer pins its snapshots forever
    keep = catalog.create_table("db.keep", ORDERS, primary_key=["dt", "id"],
                                options={"bucket": "1", "write-only": "true", "snapshot.num-retained.min": "1"})
    write_n(keep, 3)
    keep.store.consumer_manager.reset("idle", 1)
    _aged(Path(keep.store.consumer_manager.consumer_path("idle")), 30 * 86400)
    assert keep.expire_snapshots(older_than_millis=now_millis()) == []
    assert keep.store.consumer_manager.list() == {"idle": 1}


@pytest.mark.parametrize("clean", [True, False])
def test_snapshot_clean_empty_directories(catalog: lakelog.Catalog, clean: bool) -> None:
    t = make(catalog, {"snapshot.clean-empty-directories": str(clean).lower(), "snapshot.num-retained.min": "1"})
    t.write(orders("d1", [1, 2]))
    t.write(orders("d2", [3]))
    t.delete(orders("d1", [1, 2]))
    t.compact(full=True)  # partition d1 now has no live file
    t.expire_snapshots(older_than_millis=now_millis())
    root = Path(t.path)
    assert not list(root.glob("dt=d1/bucket-*/*.parquet"))
    assert (root / "dt=d1").exists() is not clean
    assert list(root.glob("dt=d2/bucket-*/*.parquet"))  # live partitions keep their directories
    assert rows(t.to_arrow(), "id") == rows(orders("d2", [3]), "id")
