"""Manifests and manifest lists: byte compatibility with pypaimon both ways, merging, rolling, errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakelog.connector.errors import CorruptFileError, MissingFileError, OptionError
from lakelog.connector.format import avro, manifest_codec
from lakelog.connector.format import manifest as M
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.manifest import (
    EMPTY_ROW,
    DataFileMeta,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    compute_partition_stats,
    merge_entries,
)
from lakelog.connector.format.manifest_codec import MANIFEST_ENTRY_SCHEMA, MANIFEST_FILE_META_SCHEMA
from lakelog.connector.format.manifest_files import ManifestFile, ManifestList
from lakelog.connector.format.snapshot import Snapshot, SnapshotManager
from lakelog.connector.format.types import DataType
from tests._meta_oracle import build_tables, read_all

STRING = DataType("VARCHAR", length=2147483647)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
NAME_RE = re.compile(r"^manifest-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d+$")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_tables(str(tmp_path_factory.mktemp("pp") / "wh"))


def _manifest_dir(oracle: Mapping[str, Any], name: str) -> str:
    return os.path.join(oracle[f"{name}_path"], "manifest")


def _files(mdir: str, lists: bool) -> list[str]:
    return sorted(
        n for n in os.listdir(mdir) if n.startswith("manifest-") and n.startswith("manifest-list-") == lists
    )


def _raw(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def _millis(v: Any) -> Any:
    return (v - EPOCH) // dt.timedelta(milliseconds=1) if isinstance(v, dt.datetime) else v


def _stats_raw(s: SimpleStats) -> dict[str, Any]:
    return {"_MIN_VALUES": s.min_values, "_MAX_VALUES": s.max_values, "_NULL_COUNTS": s.null_counts}


def _entry_raw(e: ManifestEntry) -> dict[str, Any]:
    f = e.file
    return {
        "_VERSION": 2,
        "_KIND": e.kind,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": {
            "_FILE_NAME": f.file_name,
            "_FILE_SIZE": f.file_size,
            "_ROW_COUNT": f.row_count,
            "_MIN_KEY": f.min_key,
            "_MAX_KEY": f.max_key,
            "_KEY_STATS": _stats_raw(f.key_stats),
            "_VALUE_STATS": _stats_raw(f.value_stats),
            "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
            "_SCHEMA_ID": f.schema_id,
            "_LEVEL": f.level,
            "_EXTRA_FILES": f.extra_files,
            "_CREATION_TIME": f.creation_time_millis,
            "_DELETE_ROW_COUNT": f.delete_row_count,
            "_EMBEDDED_FILE_INDEX": f.embedded_file_index,
            "_FILE_SOURCE": f.file_source,
            "_VALUE_STATS_COLS": f.value_stats_cols,
            "_EXTERNAL_PATH": f.external_path,
            "_FIRST_ROW_ID": f.first_row_id,
            "_WRITE_COLS": f.write_cols,
            "_WRITE_COLS_SEQUENCES": f.write_cols_sequences,
        },
    }


def _normalize_raw_entry(r: dict[str, Any]) -> dict[str, Any]:
    r = dict(r)
    r["_FILE"] = dict(r["_FILE"], _CREATION_TIME=_millis(r["_FILE"]["_CREATION_TIME"]))
    return r


def _meta_raw(m: ManifestFileMeta) -> dict[str, Any]:
    return {
        "_VERSION": 2,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": _stats_raw(m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
        "_TOTAL_BUCKETS": m.total_buckets,
        "_EXTRA_FILES": m.extra_files,
    }


def _pp_stats_of(pp_table: Any) -> Any:
    """A partition-stats function built on pypaimon's own row codec (independent of binary_row)."""
    from pypaimon.table.row.generic_row import GenericRow, GenericRowDeserializer, GenericRowSerializer

    fields = pp_table.partition_keys_fields

    def fn(counts: Mapping[bytes, int], types: Sequence[DataType]) -> SimpleStats:
        rows = [(GenericRowDeserializer.from_bytes(b, fields).values, n) for b, n in counts.items()]
        cols = list(zip(*[vals for vals, _ in rows]))
        mins = [min((v for v in c if v is not None), default=None) for c in cols]
        maxs = [max((v for v in c if v is not None), default=None) for c in cols]
        nulls: list[int | None] = [sum(n for vals, n in rows if vals[i] is None) for i in range(len(fields))]
        to_bytes = GenericRowSerializer.to_bytes
        return SimpleStats(to_bytes(GenericRow(mins, fields)), to_bytes(GenericRow(maxs, fields)), nulls)

    return fn


def _file_meta(name: str, **kw: Any) -> DataFileMeta:
    base: dict[str, Any] = dict(
        file_name=name,
        file_size=1000,
        row_count=10,
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=SimpleStats.empty(),
        value_stats=SimpleStats.empty(),
        min_sequence_number=0,
        max_sequence_number=9,
        schema_id=0,
        level=0,
    )
    base.update(kw)
    return DataFileMeta(**base)


def _entry(
    kind: int, name: str, bucket: int = 0, level: int = 0, partition: bytes = EMPTY_ROW, **kw: Any
) -> ManifestEntry:
    return ManifestEntry(kind, partition, bucket, 4, _file_meta(name, level=level, **kw))


def _rich_entry(i: int) -> ManifestEntry:
    """An entry using every field, with values of every size class (incl. negatives and nulls)."""
    return ManifestEntry(
        i % 2,
        b"\x00\x00\x00\x01" + bytes(range(8)) + i.to_bytes(8, "little"),
        i % 7,
        7,
        DataFileMeta(
            file_name=f"data-{i}-é-0.parquet",
            file_size=2**40 + i,
            row_count=i * 1000,
            min_key=b"k" * (i % 50),
            max_key=b"K" * 300,
            key_stats=SimpleStats(b"a", b"b", [0, None, 2**33]),
            value_stats=SimpleStats(b"", b"\xff" * 200, None),
            min_sequence_number=-1,
            max_sequence_number=2**62,
            schema_id=i % 3,
            level=i % 6,
            extra_files=[f"data-{i}.index", "x"] if i % 3 else [],
            creation_time_millis=1_700_000_000_000 + i,
            delete_row_count=None if i % 4 else i,
            embedded_file_index=None if i % 5 else b"\x01\x02",
            file_source=i % 2,
            value_stats_cols=None if i % 2 else ["a", "b"],
            external_path=None if i % 3 else f"file:///ext/{i}",
            first_row_id=None if i % 2 else i * 10,
            write_cols=["dt", "id"] if i % 4 == 0 else None,
            write_cols_sequences=[1, -2, 2**40] if i % 4 == 0 else ([] if i % 4 == 1 else None),
        ),
    )


# ---------------------------------------------------------------------------------------------
# Reading pypaimon-written files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", ["pk", "ap"])
def test_reading_pypaimon_manifests_matches_raw_avro(oracle: dict[str, Any], table: str) -> None:
    mdir = _manifest_dir(oracle, table)
    mf = ManifestFile(FileIO(), mdir)
    names = _files(mdir, lists=False)
    assert names
    kinds = set()
    for name in names:
        ours = mf.read(name)
        raw = [_normalize_raw_entry(r) for r in _raw(os.path.join(mdir, name))]
        assert [_entry_raw(e) for e in ours] == raw
        kinds.update(e.kind for e in ours)
        # the fast decoder is used for pypaimon's files (same layout)
        with open(os.path.join(mdir, name), "rb") as f:
            _values, fast = avro.decode_file(f.read(), manifest_codec.ENTRY_SHAPE, "_FILE", manifest_codec.decode_entries)
        assert fast
    if table == "ap":
        assert kinds == {0, 1}  # the overwrite wrote DELETE entries


@pytest.mark.parametrize("table", ["pk", "ap"])
def test_reading_pypaimon_manifest_lists_matches_raw_avro(oracle: dict[str, Any], table: str) -> None:
    mdir = _manifest_dir(oracle, table)
    ml = ManifestList(FileIO(), mdir)
    names = _files(mdir, lists=True)
    assert names
    for name in names:
        assert [_meta_raw(m) for m in ml.read(name)] == _raw(os.path.join(mdir, name))


def test_schemas_equal_pypaimon_writer_schemas(oracle: dict[str, Any]) -> None:
    mdir = _manifest_dir(oracle, "pk")
    with open(os.path.join(mdir, _files(mdir, lists=False)[0]), "rb") as f:
        assert fastavro.reader(f).writer_schema == json.loads(json.dumps(MANIFEST_ENTRY_SCHEMA))
    with open(os.path.join(mdir, _files(mdir, lists=True)[0]), "rb") as f:
        assert fastavro.reader(f).writer_schema == json.loads(json.dumps(MANIFEST_FILE_META_SCHEMA))


# ---------------------------------------------------------------------------------------------
# pypaimon reading what we write
# ---------------------------------------------------------------------------------------------


def _pp_entry_view(e: Any) -> tuple[Any, ...]:
    from pypaimon.table.row.generic_row import GenericRowSerializer

    f = e.file
    b = GenericRowSerializer.to_bytes
    return (
        e.kind,
        tuple(e.partition.values),
        e.bucket,
        e.total_buckets,
        f.file_name,
        f.file_size,
        f.row_count,
        tuple(f.min_key.values),
        tuple(f.max_key.values),
        b(f.key_stats.min_values),
        b(f.key_stats.max_values),
        f.key_stats.null_counts,
        b(f.value_stats.min_values),
        b(f.value_stats.max_values),
        f.value_stats.null_counts,
        f.min_sequence_number,
        f.max_sequence_number,
        f.schema_id,
        f.level,
        f.extra_files,
        f.creation_time.get_millisecond() if f.creation_time else None,
        f.delete_row_count,
        f.embedded_index,
        f.file_source,
        f.value_stats_cols,
        f.external_path,
        f.first_row_id,
        f.write_cols,
        f.write_cols_sequences,
    )


def _pp_meta_view(m: Any) -> tuple[Any, ...]:
    from pypaimon.table.row.generic_row import GenericRowSerializer

    s = m.partition_stats
    return (
        m.num_added_files,
        m.num_deleted_files,
        GenericRowSerializer.to_bytes(s.min_values),
        GenericRowSerializer.to_bytes(s.max_values),
        s.null_counts,
        m.schema_id,
        m.min_bucket,
        m.max_bucket,
        m.min_level,
        m.max_level,
        m.min_row_id,
        m.max_row_id,
        m.total_buckets,
        m.extra_files,
    )


@pytest.mark.parametrize("table", ["pk", "ap"])
@pytest.mark.parametrize("stats", ["pypaimon-row-codec", "binary_row"])
def test_pypaimon_reads_our_manifests_and_lists(oracle: dict[str, Any], table: str, stats: str) -> None:
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    pp = oracle[table]
    mdir = _manifest_dir(oracle, table)
    fn = _pp_stats_of(pp) if stats == "pypaimon-row-codec" else compute_partition_stats
    mf = ManifestFile(FileIO(), mdir, partition_stats_fn=fn)
    ml = ManifestList(FileIO(), mdir)
    pp_mf, pp_ml = ManifestFileManager(pp), ManifestListManager(pp)

    # pypaimon's metas of its own manifests, by manifest name
    pp_metas = {}
    for name in _files(mdir, lists=True):
        for m in pp_ml.read(name):
            pp_metas[m.file_name] = m
    written = []
    for name in sorted(pp_metas):
        ours = mf.read(name)
        metas = mf.write(ours, [STRING])
        assert len(metas) == 1
        meta = metas[0]
        written.append(meta)
        assert NAME_RE.match(meta.file_name)
        assert meta.file_size == os.path.getsize(os.path.join(mdir, meta.file_name))
        # pypaimon decodes our file to exactly what it decodes from its own
        theirs = [_pp_entry_view(e) for e in pp_mf.read(name, drop_stats=False)]
        again = [_pp_entry_view(e) for e in pp_mf.read(meta.file_name, drop_stats=False)]
        assert again == theirs
        # and our manifest meta equals the one pypaimon computed for the same entries
        assert _pp_meta_view(_as_pp_meta(meta, pp)) == _pp_meta_view(pp_metas[name])
    list_name, list_size = ml.write(written)
    assert list_size == os.path.getsize(os.path.join(mdir, list_name))
    assert list_name.startswith("manifest-list-")
    got = pp_ml.read(list_name)
    assert [m.file_name for m in got] == [m.file_name for m in written]
    assert [m.file_size for m in got] == [m.file_size for m in written]
    assert [_pp_meta_view(m) for m in got] == [_pp_meta_view(_as_pp_meta(m, pp)) for m in written]
    assert ml.read(list_name) == written


def _as_pp_meta(m: ManifestFileMeta, pp: Any) -> Any:
    """Our meta seen through pypaimon's classes (BinaryRow stats) for like-for-like comparison."""
    from pypaimon.manifest.schema.manifest_file_meta import ManifestFileMeta as PPMeta
    from pypaimon.manifest.schema.simple_stats import SimpleStats as PPStats
    from pypaimon.table.row.binary_row import BinaryRow

    fields = pp.partition_keys_fields
    s = m.partition_stats
    return PPMeta(
        file_name=m.file_name,
        file_size=m.file_size,
        num_added_files=m.num_added_files,
        num_deleted_files=m.num_deleted_files,
        partition_stats=PPStats(
            BinaryRow(s.min_values, fields), BinaryRow(s.max_values, fields), s.null_counts
        ),
        schema_id=m.schema_id,
        min_bucket=m.min_bucket,
        max_bucket=m.max_bucket,
        min_level=m.min_level,
        max_level=m.max_level,
        min_row_id=m.min_row_id,
        max_row_id=m.max_row_id,
        total_buckets=m.total_buckets,
        extra_files=m.extra_files,
    )


@pytest.mark.parametrize("table", ["pk", "ap"])
def test_pypaimon_reads_a_table_whose_metadata_we_rewrote(tmp_path: Path, table: str) -> None:
    """Merge the latest snapshot's manifests into one, publish it as a new snapshot, and let
    pypaimon read the table: the rows must be unchanged."""
    oracle = build_tables(str(tmp_path / "wh"))
    pp = oracle[table]
    before = read_all(pp)
    path = oracle[f"{table}_path"]
    mdir = os.path.join(path, "manifest")
    io_ = FileIO()
    sm = SnapshotManager(io_, path)
    latest = sm.latest()
    assert latest is not None
    mf = ManifestFile(io_, mdir, partition_stats_fn=_pp_stats_of(pp))
    ml = ManifestList(io_, mdir)
    entries = []
    for lst in (latest.base_manifest_list, latest.delta_manifest_list):
        for meta in ml.read(lst):
            entries.extend(mf.read(meta.file_name))
    live = merge_entries(entries)
    assert all(e.kind == 0 for e in live)
    metas = mf.write(live, [STRING])
    base, base_size = ml.write(metas)
    delta, delta_size = ml.write([])
    snap = Snapshot(
        id=latest.id + 1,
        schema_id=latest.schema_id,
        base_manifest_list=base,
        delta_manifest_list=delta,
        commit_user="lakelog-test",
        commit_identifier=1,
        commit_kind="COMPACT",
        time_millis=int(time.time() * 1000),
        total_record_count=latest.total_record_count,
        delta_record_count=0,
        base_manifest_list_size=base_size,
        delta_manifest_list_size=delta_size,
    )
    assert sm.try_commit(snap)
    from pypaimon import CatalogFactory

    fresh = CatalogFactory.create({"warehouse": str(tmp_path / "wh")}).get_table(f"db.{table}")
    assert fresh.snapshot_manager().get_latest_snapshot().id == latest.id + 1
    assert read_all(fresh) == before


# ---------------------------------------------------------------------------------------------
# Round trips, codecs, rolling
# ---------------------------------------------------------------------------------------------


def test_round_trip_every_field(tmp_path: Path) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path))
    entries = [_rich_entry(i) for i in range(300)]
    (meta,) = mf.write(entries, [])
    assert mf.read(meta.file_name) == entries
    # fastavro decodes the same values (with the timestamp-millis logical type intact)
    raw = _raw(mf.path(meta.file_name))
    assert isinstance(raw[0]["_FILE"]["_CREATION_TIME"], dt.datetime)
    assert [_normalize_raw_entry(r) for r in raw] == [_entry_raw(e) for e in entries]
    with open(mf.path(meta.file_name), "rb") as f:
        assert fastavro.reader(f).writer_schema == json.loads(json.dumps(MANIFEST_ENTRY_SCHEMA))


def test_meta_summarizes_entries(tmp_path: Path) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path))
    entries = [
        _entry(0, "a", bucket=3, level=1, schema_id=2, first_row_id=100, row_count=10),
        _entry(1, "b", bucket=1, level=4, schema_id=5, first_row_id=0, row_count=5),
        _entry(0, "c", bucket=2, level=0, schema_id=1, first_row_id=50, row_count=60),
    ]
    (m,) = mf.write(entries, [])
    assert (m.num_added_files, m.num_deleted_files) == (2, 1)
    assert (m.min_bucket, m.max_bucket, m.min_level, m.max_level) == (1, 3, 0, 4)
    assert m.schema_id == 5
    assert (m.min_row_id, m.max_row_id) == (0, 109)
    assert m.total_buckets == 4
    assert m.partition_stats == SimpleStats.empty()
    mixed = [*entries[:2], dataclasses.replace(entries[2], total_buckets=8)]
    mixed[0] = dataclasses.replace(mixed[0], file=dataclasses.replace(mixed[0].file, first_row_id=None))
    (m2,) = mf.write(mixed, [])
    assert m2.total_buckets is None
    assert (m2.min_row_id, m2.max_row_id) == (None, None)


def test_partition_stats_count_nulls_per_entry() -> None:
    from lakelog.connector.format.binary_row import deserialize_row, serialize_row

    types = [STRING, DataType("INT")]
    p1 = serialize_row(["b", 1], types)
    p2 = serialize_row(["a", None], types)
    p3 = serialize_row([None, 7], types)
    s = compute_partition_stats({p1: 2, p2: 3, p3: 1}, types)
    assert deserialize_row(s.min_values, types) == ("a", 1)
    assert deserialize_row(s.max_values, types) == ("b", 7)
    assert s.null_counts == [1, 3]


@pytest.mark.parametrize(
    ("compression", "codec"),
    [("zstd", "zstandard"), ("deflate", "deflate"), ("none", "null"), ("bzip2", "bzip2"), ("xz", "xz")],
)
def test_codecs(tmp_path: Path, compression: str, codec: str) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path), compression=compression)
    ml = ManifestList(FileIO(), str(tmp_path), compression=compression)
    entries = [_rich_entry(i) for i in range(50)]
    metas = mf.write(entries, [])
    name, _size = ml.write(metas)
    for n in (metas[0].file_name, name):
        with open(mf.path(n), "rb") as f:
            assert fastavro.reader(f).metadata["avro.codec"] == codec
    assert mf.read(metas[0].file_name) == entries
    assert ml.read(name) == metas


def test_unsupported_compression_is_an_option_error(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="manifest.compression"):
        ManifestFile(FileIO(), str(tmp_path), compression="lz4")


def test_rolling_at_target_size(tmp_path: Path) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path), target_file_size=20_000, compression="none")
    entries = [_entry(i % 2, f"data-{i:06d}.parquet", bucket=i % 3) for i in range(5000)]
    metas = mf.write(entries, [])
    assert len(metas) == 5  # checked every 1000 records, like Paimon
    names = [m.file_name for m in metas]
    assert all(NAME_RE.match(n) for n in names)
    prefix = names[0].rsplit("-", 1)[0]
    assert names == [f"{prefix}-{i}" for i in range(5)]
    back = [e for n in names for e in mf.read(n)]
    assert back == entries
    assert sum(m.num_added_files + m.num_deleted_files for m in metas) == 5000
    assert all(m.file_size == os.path.getsize(mf.path(m.file_name)) for m in metas)


def test_write_nothing(tmp_path: Path) -> None:
    assert ManifestFile(FileIO(), str(tmp_path)).write([], [STRING]) == []
    ml = ManifestList(FileIO(), str(tmp_path))
    name, _ = ml.write([])
    assert ml.read(name) == []


def test_older_writer_schema_goes_through_fastavro(tmp_path: Path) -> None:
    """A manifest from an older Paimon (no _VALUE_STATS_COLS.._WRITE_COLS_SEQUENCES, other record
    names, fields nested differently named) is still read, missing fields as None."""
    dropped = {"_VALUE_STATS_COLS", "_EXTERNAL_PATH", "_FIRST_ROW_ID", "_WRITE_COLS", "_WRITE_COLS_SEQUENCES"}
    schema = avro.strip_logical_types(MANIFEST_ENTRY_SCHEMA)
    schema["name"] = "org.apache.paimon.avro.generated.record"
    file_schema = schema["fields"][5]["type"]
    file_schema["name"] = "record__FILE"
    file_schema["fields"] = [f for f in file_schema["fields"] if f["name"] not in dropped]
    e = _rich_entry(3)
    rec = _entry_raw(e)
    for k in dropped:
        del rec["_FILE"][k]
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [rec, rec], codec="deflate")
    (tmp_path / "manifest-old-0").write_bytes(buf.getvalue())
    got = ManifestFile(FileIO(), str(tmp_path)).read("manifest-old-0")
    expect = dataclasses.replace(
        e.file,
        value_stats_cols=None,
        external_path=None,
        first_row_id=None,
        write_cols=None,
        write_cols_sequences=None,
    )
    assert got == [dataclasses.replace(e, file=expect)] * 2


def test_a_manifest_of_many_entries_round_trips(tmp_path: Path) -> None:
    # how fast 100k entries go is a benchmark (benchmarks/bench_hot_paths.py --only manifest)
    mf = ManifestFile(FileIO(), str(tmp_path))
    proto = _rich_entry(2)
    entries = [
        dataclasses.replace(
            proto, bucket=i % 16, file=dataclasses.replace(proto.file, file_name=f"data-{i:032d}.parquet")
        )
        for i in range(20_000)
    ]
    metas = mf.write(entries, [])
    back = [e for m in metas for e in mf.read(m.file_name)]
    assert back == entries


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path))
    with pytest.raises(MissingFileError, match="manifest-nope-0"):
        mf.read("manifest-nope-0")
    with pytest.raises(MissingFileError, match="manifest-list-nope-0"):
        ManifestList(FileIO(), str(tmp_path)).read("manifest-list-nope-0")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad-block", "empty"])
def test_corrupt_files_name_the_path(tmp_path: Path, damage: str) -> None:
    mf = ManifestFile(FileIO(), str(tmp_path), compression="none")
    (meta,) = mf.write([_rich_entry(i) for i in range(20)], [])
    p = Path(mf.path(meta.file_name))
    data = p.read_bytes()
    if damage == "garbage":
        data = b"this is not avro at all"
    elif damage == "truncated":
        data = data[: len(data) - 40]
    elif damage == "bad-block":
        data = data[:-200] + b"\xff" * 184 + data[-16:]
    else:
        data = b""
    p.write_bytes(data)
    with pytest.raises(CorruptFileError, match=re.escape(str(p))):
        mf.read(meta.file_name)


def test_reading_a_manifest_list_as_a_manifest_is_corrupt(tmp_path: Path) -> None:
    ml = ManifestList(FileIO(), str(tmp_path))
    name, _ = ml.write([ManifestFileMeta("m", 1, 1, 0, SimpleStats.empty(), 0)])
    with pytest.raises(CorruptFileError, match=name):
        ManifestFile(FileIO(), str(tmp_path)).read(name)
    mf = ManifestFile(FileIO(), str(tmp_path))
    (meta,) = mf.write([_entry(0, "x")], [])
    with pytest.raises(CorruptFileError, match=meta.file_name):
        ml.read(meta.file_name)


def test_failed_write_leaves_no_files(tmp_path: Path) -> None:
    def boom(counts: Mapping[bytes, int], types: Sequence[DataType]) -> SimpleStats:
        if len(os.listdir(tmp_path)) > 1:
            raise RuntimeError("boom")
        return SimpleStats.empty()

    mf = ManifestFile(FileIO(), str(tmp_path), target_file_size=1, partition_stats_fn=boom)
    with pytest.raises(RuntimeError):
        mf.write([_entry(0, f"f{i}") for i in range(3000)], [])
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# merge_entries and small helpers
# ---------------------------------------------------------------------------------------------


def test_merge_delete_cancels_add() -> None:
    a, b, c = _entry(0, "a"), _entry(0, "b"), _entry(0, "c")
    out = merge_entries([a, b, _entry(1, "a"), c])
    assert out == [b, c]


def test_merge_keeps_unmatched_deletes_for_delta_merging() -> None:
    base = [_entry(0, "a"), _entry(0, "b")]
    delta = [_entry(1, "a"), _entry(0, "a2")]
    merged_delta = merge_entries(delta)
    assert [(e.kind, e.file.file_name) for e in merged_delta] == [(1, "a"), (0, "a2")]
    assert (
        merge_entries(base + merged_delta) == merge_entries(base + delta) == [_entry(0, "b"), _entry(0, "a2")]
    )


def test_merge_identity_includes_level_bucket_partition() -> None:
    up = _entry(0, "a", level=0)
    out = merge_entries([up, _entry(1, "a", level=1)])  # different level: not the same file entry
    assert [(e.kind, e.file.level) for e in out] == [(0, 0), (1, 1)]
    out = merge_entries([_entry(0, "a", bucket=1), _entry(1, "a", bucket=2)])
    assert len(out) == 2
    out = merge_entries([_entry(0, "a", partition=b"p1"), _entry(1, "a", partition=b"p2")])
    assert len(out) == 2


def test_merge_re_adding_after_delete_and_duplicate_add() -> None:
    a = _entry(0, "a")
    assert merge_entries([a, _entry(1, "a"), a]) == [a]
    with pytest.raises(CorruptFileError, match="a"):
        merge_entries([a, a])


def test_upgrade_and_identifier() -> None:
    e = _entry(0, "a", level=0, extra_files=["a.index"])
    up = e.file.upgrade(3)
    assert up.level == 3 and e.file.level == 0 and up.file_name == "a"
    assert ManifestEntry(1, e.partition, e.bucket, e.total_buckets, up).identifier() != e.identifier()
    assert e.identifier() == (EMPTY_ROW, 0, 0, "a", ("a.index",), None, None)
    assert _file_meta("x", row_count=10, delete_row_count=3).add_row_count == 7


def test_local_now_millis_is_wall_clock() -> None:
    now = M.local_now_millis()
    local = dt.datetime.now().replace(tzinfo=dt.timezone.utc)
    assert abs(now - _millis(local)) < 5000
