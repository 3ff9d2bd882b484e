"""Tables in ``s3://`` warehouses, against a real S3 API server on loopback (tests/s3_server.py).

The same table code runs on local disks and on object stores; what differs is the file IO seam
(:mod:`lakelog.connector.format.objectstore`): snapshots published by conditional creates, the
lease lock, data files staged locally and uploaded whole. These tests check that the differences
do not show: the model-based test on S3, writer processes racing, lost answers, refusals.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakelog
from lakelog.connector.errors import (
    LakelogError,
    OptionError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsafeStoreError,
)
from lakelog.connector.format import objectstore
from lakelog.connector.format.objectstore import S3FileIO
from tests.jdbc_fixtures import sqlite_options
from tests.s3_server import BUCKET, SECRET_KEY, S3Server
from tests.services import free_port
from tests.test_model import CONFIGS, run_model

from .conftest import ORDERS

pytestmark = pytest.mark.s3

S3Args = tuple[str, dict[str, str]]


def orders(ids: list[int], dt: str = "d", name: str = "n") -> pa.Table:
    n = len(ids)
    return pa.table({"dt": [dt] * n, "id": ids, "name": [name] * n, "amount": [1.0] * n}, schema=ORDERS)


def _catalog(args: S3Args) -> lakelog.Catalog:
    warehouse, options = args
    return lakelog.Catalog(warehouse, options=options)


# ---- the model on S3 -------------------------------------------------------------------------------
_S3_CONFIGS = [c for c in CONFIGS if c.name in ("pk-partitioned-3b", "append-partitioned-unaware", "pk-dynamic")]


@pytest.mark.parametrize("cfg", _S3_CONFIGS, ids=[c.name for c in _S3_CONFIGS])
def test_model_on_s3(s3_catalog_args: S3Args, cfg: object) -> None:
    """The model-based test (random writes, deletes, compactions, expirations, tags, time travel,
    change logs, streaming reads, checked against a dict after every step) on an S3 warehouse."""
    run_model(_catalog(s3_catalog_args), cfg, 7, 16)  # type: ignore[arg-type]


def test_a_table_on_s3_reads_back_what_was_written(s3_catalog_args: S3Args, s3_server: S3Server) -> None:
    c = _catalog(s3_catalog_args)
    t = c.create_table("db.t", ORDERS, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"})
    for i in range(4):
        t.write(orders([i, i + 1, i + 2], dt="a" if i % 2 else "b", name=f"w{i}"))
    t.delete(orders([3], dt="a"))
    rows = sorted((r["dt"], r["id"], r["name"]) for r in t.to_arrow().to_pylist())
    assert rows == [("a", 1, "w1"), ("a", 2, "w1"), ("a", 4, "w3"), ("a", 5, "w3"),
                    ("b", 0, "w0"), ("b", 1, "w0"), ("b", 2, "w2"), ("b", 3, "w2"), ("b", 4, "w2")]
    assert sorted(r["id"] for r in t.to_arrow(snapshot_id=1).to_pylist()) == [0, 1, 2]
    t.compact(full=True)
    assert sorted((r["dt"], r["id"]) for r in t.to_arrow().to_pylist()) == [(d, i) for d, i, _ in rows]
    assert c.list_databases() == ["db"] and c.list_tables("db") == ["t"]
    # Paimon's layout, under the warehouse prefix
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]
    keys = s3_server.keys(prefix + "/db.db/t/")
    assert any("/dt=a/bucket-" in k and k.endswith(".parquet") for k in keys)
    assert any(k.endswith("/snapshot/snapshot-6") for k in keys)
    assert any(k.endswith("/schema/schema-0") for k in keys)
    assert not [k for k in keys if k.endswith(".tmp")]  # nothing staged in the store
    # another process (another catalog object) sees the same table
    assert _catalog(s3_catalog_args).get_table("db.t").to_arrow().num_rows == len(rows)


def test_dropping_a_table_and_a_database_on_s3(s3_catalog_args: S3Args, s3_server: S3Server) -> None:
    c = _catalog(s3_catalog_args)
    c.create_database("empty")
    assert "empty" in c.list_databases()  # an empty database is its marker object, as Paimon's S3A
    t = c.create_table("db.t", ORDERS)
    t.write(orders([1, 2]))
    c.drop_table("db.t")
    assert not c.table_exists("db.t")
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]
    assert s3_server.keys(prefix + "/db.db/t/") == []
    c.create_table("db.u", ORDERS).write(orders([1]))
    # a file-system catalog's name is the directory: no atomic step exists to rename it on S3
    with pytest.raises(UnsafeStoreError, match="JDBC metastore"):
        c.rename_table("db.u", "db.v")
    assert c.get_table("db.u").to_arrow().num_rows == 1


# ---- renames in a JDBC catalog on S3 ---------------------------------------------------------------
def _jdbc_on_s3(args: S3Args, tmp_path: Path, **extra: str) -> lakelog.Catalog:
    warehouse, options = args
    return lakelog.Catalog(warehouse, options={**options, **sqlite_options(tmp_path / "catalog.db", **extra)})


@pytest.mark.parametrize("lock", ["lease", "jdbc"])
def test_a_jdbc_catalog_renames_a_table_on_s3_by_copy(
    s3_catalog_args: S3Args, s3_server: S3Server, tmp_path: Path, lock: str
) -> None:
    """The rename copies every object under the table's commit lock and moves the name in one
    transaction; the old prefix is empty afterwards; the renamed table reads, writes and time
    travels as before; a writer that opened the old name finds the table gone (nothing lands under
    the old prefix), and a new table can take the old name."""
    c = _jdbc_on_s3(s3_catalog_args, tmp_path, **({"lock.enabled": "true"} if lock == "jdbc" else {}))
    t = c.create_table("db.t", ORDERS, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"})
    t.write(orders([1, 2, 3], dt="a"))
    t.write(orders([3, 4], dt="b", name="x"))
    stale = c.get_table("db.t")
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]
    before = {k.split("/db.db/t/", 1)[1] for k in s3_server.keys(prefix + "/db.db/t/")}
    c.rename_table("db.t", "db.u")
    assert s3_server.keys(prefix + "/db.db/t/") == []
    after = {k.split("/db.db/u/", 1)[1] for k in s3_server.keys(prefix + "/db.db/u/")}
    assert after == {k for k in before if not k.rsplit("/", 1)[-1].startswith(".")}
    assert c.list_tables("db") == ["u"] and not c.table_exists("db.t")
    u = c.get_table("db.u")
    assert sorted(u.to_arrow().column("id").to_pylist()) == [1, 2, 3, 3, 4]
    assert sorted(u.to_arrow(snapshot_id=1).column("id").to_pylist()) == [1, 2, 3]
    u.write(orders([5], dt="a"))
    assert u.latest_snapshot().id == 3
    # the writer that opened the old name: its table is gone, and it says so
    with pytest.raises(TableNotFoundError, match="gone"):
        stale.write(orders([9], dt="a"))
    assert [k for k in s3_server.keys(prefix + "/db.db/t/") if "/snapshot/snapshot-" in k] == []
    # the old name is free again
    c.create_table("db.t", ORDERS).write(orders([7]))
    assert c.get_table("db.t").to_arrow().column("id").to_pylist() == [7]
    with pytest.raises(TableAlreadyExistsError):
        c.rename_table("db.u", "db.t")
    assert sorted(c.get_table("db.u").to_arrow().column("id").to_pylist()) == [1, 2, 3, 3, 4, 5]


def test_a_rename_on_s3_interrupted_in_its_transaction_renames_nothing(
    s3_catalog_args: S3Args, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy that fails half way (the third object) rolls the names back and leaves the table as
    it was; a copy left behind by a process that died (the marker in it) does not stop the next
    rename onto that name."""
    c = _jdbc_on_s3(s3_catalog_args, tmp_path)
    t = c.create_table("db.t", ORDERS, primary_key=["dt", "id"], options={"bucket": "2"})
    t.write(orders([1, 2, 3]))
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]

    def content() -> list[str]:  # the table's objects but the commit lock's lease objects
        return sorted(k for k in s3_server.keys(prefix + "/db.db/t/") if "/.lease-" not in k)

    before = content()
    calls = [0]
    real = S3FileIO._idempotent

    def failing(self: S3FileIO, request: Any) -> Any:
        if "copy_tree" in str(request.__qualname__):
            calls[0] += 1
            if calls[0] == 3:
                raise StorageError("cannot copy: injected", "s3://x")
        return real(self, request)

    monkeypatch.setattr(S3FileIO, "_idempotent", failing)
    with pytest.raises(StorageError, match="injected"):
        c.rename_table("db.t", "db.u")
    monkeypatch.undo()
    assert calls[0] >= 3
    assert c.list_tables("db") == ["t"]
    assert content() == before
    assert s3_server.keys(prefix + "/db.db/u/") == []
    assert sorted(c.get_table("db.t").to_arrow().column("id").to_pylist()) == [1, 2, 3]
    # what a rename that died in its copy leaves: a partial copy holding the marker
    io = c.file_io
    io.write_bytes(f"{s3_catalog_args[0]}/db.db/u/.lakelog-moving", b"{}")
    io.write_bytes(f"{s3_catalog_args[0]}/db.db/u/bucket-0/data-x.parquet", b"partial")
    c.rename_table("db.t", "db.u")
    u = c.get_table("db.u")
    assert sorted(u.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert not [k for k in s3_server.keys(prefix + "/db.db/u/") if k.endswith("data-x.parquet")]


def test_a_jdbc_catalog_renames_an_empty_database_on_s3_and_refuses_one_with_tables(
    s3_catalog_args: S3Args, tmp_path: Path
) -> None:
    c = _jdbc_on_s3(s3_catalog_args, tmp_path)
    c.create_database("empty")
    c.rename_database("empty", "void")
    assert "void" in c.list_databases() and "empty" not in c.list_databases()
    c.create_table("db.t", ORDERS).write(orders([1]))
    with pytest.raises(UnsafeStoreError, match=r"rename the tables into a new database one by one"):
        c.rename_database("db", "db2")
    assert c.list_databases() == sorted(["db", "void"]) and c.get_table("db.t").to_arrow().num_rows == 1
    c.create_database("db2")
    c.rename_table("db.t", "db2.t")
    assert c.get_table("db2.t").to_arrow().num_rows == 1


# ---- racing writers ------------------------------------------------------------------------------------
WRITERS, COMMITS = 3, 4


def _writer(warehouse: str, options: dict[str, str], writer: int) -> None:
    t = lakelog.Catalog(warehouse, options=options).get_table("db.t")
    for i in range(COMMITS):
        t.write(orders([writer * 1000 + i * 10 + j for j in range(5)], dt=f"p{writer % 2}", name=f"w{writer}"))


@pytest.mark.parametrize("primary_key", [True, False], ids=["pk", "append"])
def test_processes_racing_into_one_s3_table_each_land_once(s3_catalog_args: S3Args, primary_key: bool) -> None:
    """Writer processes commit at once into one table; every commit lands exactly once, the ids
    form one chain, and no two snapshots claim one id (conditional creates, leases)."""
    c = _catalog(s3_catalog_args)
    c.create_table(
        "db.t", ORDERS, primary_key=["dt", "id"] if primary_key else None, partition_by=["dt"],
        options={"bucket": "2"} if primary_key else None,
    )
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(*s3_catalog_args, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    t = c.get_table("db.t")
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    appends = [s for s in snaps if s.commit_kind == "APPEND"]
    assert len(appends) == WRITERS * COMMITS
    assert len({s.commit_user for s in appends}) == WRITERS * COMMITS
    ids = t.to_arrow().column("id").to_pylist()
    assert sorted(ids) == sorted(w * 1000 + i * 10 + j for w in range(WRITERS) for i in range(COMMITS) for j in range(5))


def test_a_conditional_create_has_one_winner(s3_catalog_args: S3Args) -> None:
    io = _catalog(s3_catalog_args).file_io
    path = f"{s3_catalog_args[0]}/race/snapshot-1"
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def go(i: int) -> None:
        mine = S3FileIO(s3_catalog_args[1])  # clients of their own, as separate writers have
        barrier.wait()
        if mine.try_publish(path, f"writer {i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert io.read_bytes(path) == f"writer {wins[0]}".encode()


class _LostAnswer:
    """A real client whose next conditional ``put_object`` (a publish) reaches the server but whose
    answer is lost."""

    def __init__(self, client: object) -> None:
        self._client = client
        self.lost = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)

    def put_object(self, **kw: object) -> object:
        from botocore.exceptions import ReadTimeoutError

        result = self._client.put_object(**kw)  # type: ignore[attr-defined]
        if not self.lost and "IfNoneMatch" in kw:
            self.lost += 1
            raise ReadTimeoutError(endpoint_url="lost")
        return result


def test_a_publish_whose_answer_was_lost_is_resolved_by_reading_back(s3_catalog_args: S3Args) -> None:
    io = S3FileIO(s3_catalog_args[1])
    io.conditional_writes(s3_catalog_args[0])
    io._client = _LostAnswer(io.client)
    path = f"{s3_catalog_args[0]}/lost/snapshot-1"
    assert io.try_publish(path, b"mine") is True  # it landed: the same bytes are there
    other = S3FileIO(s3_catalog_args[1])
    other._client = _LostAnswer(other.client)
    other.client.lost = 1  # its answers arrive
    assert other.try_publish(path, b"theirs") is False
    assert io.read_bytes(path) == b"mine"


def test_a_table_commits_through_a_lost_answer(s3_catalog_args: S3Args) -> None:
    """A commit whose snapshot PUT landed but whose answer was lost reports success once, and the
    snapshot is not committed twice."""
    c = _catalog(s3_catalog_args)
    t = c.create_table("db.t", ORDERS, primary_key=["dt", "id"])
    t.write(orders([1]))
    lossy = _LostAnswer(c.file_io.client)
    c.file_io._client = lossy
    t.write(orders([2]))
    assert lossy.lost == 1
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]


def test_a_store_without_conditional_writes_is_refused_for_writing(s3_catalog_args: S3Args, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A store that ignores If-None-Match (as the probe finds; set here, since the server honours
    it) is never written unsafely: writes fail before anything is published, reads work, and a
    JDBC catalog's lock makes writing safe again."""
    warehouse, options = s3_catalog_args
    c = _catalog(s3_catalog_args)
    t = c.create_table("db.t", ORDERS)
    t.write(orders([1, 2]))
    key = (c.file_io.where, BUCKET)
    saved = objectstore._probed.get(key)
    objectstore._probed[key] = False
    try:
        with pytest.raises(UnsafeStoreError, match="conditional"):
            t.write(orders([3]))
        assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2]
        assert [s.id for s in t.snapshots()] == [1]
        jdbc = lakelog.Catalog(
            warehouse, options={**options, "metastore": "jdbc", "uri": f"jdbc:sqlite:{tmp_path}/c.db",
                                "lock.enabled": "true"}
        )
        u = jdbc.create_table("db.u", ORDERS, primary_key=["dt", "id"])
        u.write(orders([5]))
        u.write(orders([6]))
        assert sorted(u.to_arrow().column("id").to_pylist()) == [5, 6]
    finally:
        if saved is None:
            objectstore._probed.pop(key, None)
        else:
            objectstore._probed[key] = saved


# ---- bad input, secrets --------------------------------------------------------------------------------
def test_unknown_schemes_are_refused_naming_them() -> None:
    with pytest.raises(OptionError, match="unsupported file system scheme 'hdfs'"):
        lakelog.Catalog("hdfs://nn/warehouse")
    with pytest.raises(OptionError, match="expected s3://bucket/prefix"):
        lakelog.Catalog("s3:///nobucket")


def test_a_bucket_that_does_not_exist_is_named(s3_server: S3Server) -> None:
    with pytest.raises(OptionError, match="bucket 'no-such-bucket' does not exist"):
        lakelog.Catalog("s3://no-such-bucket/wh", options=s3_server.options())


def test_an_endpoint_that_does_not_answer_fails_clearly(s3_server: S3Server) -> None:
    port = free_port()
    opts = {**s3_server.options(), "s3.endpoint": f"http://127.0.0.1:{port}", "s3.max-attempts": "1"}
    with pytest.raises(OptionError, match=f"cannot reach http://127.0.0.1:{port}"):
        lakelog.Catalog("s3://warehouse/wh", options=opts)


def test_options_that_contradict_each_other_are_refused(s3_server: S3Server) -> None:
    with pytest.raises(OptionError, match="go together"):
        lakelog.Catalog("s3://warehouse/wh", options={"s3.endpoint": s3_server.endpoint, "s3.access-key": "x"})
    with pytest.raises(OptionError, match="s3.path.style.access"):
        lakelog.Catalog("s3://warehouse/wh", options={**s3_server.options(), "s3.path.style.access": "yes"})


def test_missing_credentials_are_named(s3_server: S3Server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without keys and without an AWS environment the catalog says where credentials come from
    (checked in a clean process: this one's environment may hold some)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    code = (
        "import lakelog, lakelog.connector.errors\n"
        "try:\n"
        f"    lakelog.Catalog('s3://warehouse/wh', options={{'s3.endpoint': {s3_server.endpoint!r}}})\n"
        "except lakelog.connector.errors.OptionError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "no S3 credentials" in out.stdout, out.stderr
    assert "s3.access-key" in out.stdout


def test_secrets_appear_nowhere(s3_catalog_args: S3Args, s3_server: S3Server) -> None:
    """The secret key is in no file the table writes, no repr and no error."""
    c = _catalog(s3_catalog_args)
    t = c.create_table("db.t", ORDERS, primary_key=["dt", "id"])
    t.write(orders([1, 2]))
    assert SECRET_KEY not in repr(c) + repr(c.file_io) + repr(t)
    assert SECRET_KEY not in str(t.options)
    client = s3_server.client()
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]
    for key in s3_server.keys(prefix):
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert SECRET_KEY.encode() not in body, key
    missing = f"{s3_catalog_args[0]}/db.db/t/bucket-0/nope.parquet"
    with pytest.raises(LakelogError) as e:
        c.file_io.read_bytes(missing)
    assert SECRET_KEY not in str(e.value) and "nope.parquet" in str(e.value)
    bad = S3FileIO({**s3_catalog_args[1], "s3.secret-key": "wrong-" + SECRET_KEY})
    try:
        bad.read_bytes(missing)
    except (StorageError, LakelogError) as err:
        assert SECRET_KEY not in str(err)


# ---- lookup tables ---------------------------------------------------------------------------------------
def _lookup_in_a_fresh_process(spec_bytes: bytes, out: mp.Queue[object]) -> None:
    import pickle

    spec = pickle.loads(spec_bytes)  # noqa: S301 - the test's own bytes, as a Flink worker gets its plan
    lt = spec.open()
    try:
        out.put([lt.get(1), lt.get(2), lt.get(9)])
    finally:
        lt.close()


def test_a_lookup_table_on_s3_opens_from_its_shipped_spec(s3_catalog_args: S3Args) -> None:
    """A lookup join's worker gets a pickled :class:`LookupSpec` and no catalog: the spec carries
    the table's file IO, so a fresh process (with no AWS environment of its own) reads the table
    and sees a later commit after a refresh."""
    import pickle

    from lakelog.operators.lookup_table import LookupSpec, LookupTable

    c = _catalog(s3_catalog_args)
    t = c.create_table("db.dim", ORDERS, primary_key=["id"], options={"bucket": "2"})
    t.write(orders([1, 2], name="first"))
    lt = LookupTable(t, columns=["name"], refresh_interval=0)
    assert lt.get(1) == {"name": "first"}
    t.write(orders([2], name="second"))
    assert lt.get(2) == {"name": "second"}  # refreshed from the store
    lt.close()
    spec = LookupSpec.of(t, columns=["name"])
    ctx = mp.get_context("spawn")
    q: mp.Queue[object] = ctx.Queue()
    p = ctx.Process(target=_lookup_in_a_fresh_process, args=(pickle.dumps(spec), q))
    p.start()
    got = q.get(timeout=120)
    p.join(60)
    assert got == [{"name": "first"}, {"name": "second"}, None]


@pytest.fixture(scope="module")
def iam_server() -> object:
    """A second S3 server that checks IAM users and policies (moto's IAM enforcement)."""
    reason = S3Server.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = S3Server(iam=True).start()
    try:
        yield server
    finally:
        server.stop()


def test_a_read_only_bucket_reads_and_refuses_writes_naming_the_object(iam_server: S3Server) -> None:
    """Keys that may only read: the table reads as the writer left it; a write, a create and a
    drop each fail with one error naming the object and 'access denied', and leave every key of
    the bucket as it was."""
    wh = iam_server.warehouse()
    admin = lakelog.Catalog(wh, options=iam_server.options())
    t = admin.create_table("db.orders", ORDERS, primary_key=["dt", "id"], partition_by=["dt"], options={"bucket": "2"})
    t.write(orders([1, 2, 3]))
    before = sorted(iam_server.keys(wh.split(f"{BUCKET}/", 1)[1]))
    reader = lakelog.Catalog(wh, options=iam_server.read_only_options())
    ro = reader.get_table("db.orders")
    assert sorted(ro.to_arrow().column("id").to_pylist()) == [1, 2, 3]
    attempts = [
        lambda: ro.write(orders([4])),
        lambda: ro.delete(pa.table({"dt": ["d"], "id": [1]})),
        lambda: reader.create_table("db.other", ORDERS, primary_key=["dt", "id"], partition_by=["dt"]),
        lambda: reader.drop_table("db.orders"),
    ]
    for attempt in attempts:
        with pytest.raises(LakelogError) as err:
            attempt()
        text = str(err.value).lower()
        assert "access denied" in text or "accessdenied" in text, err.value
        assert "s3://" in str(err.value), err.value  # names the object
        assert sorted(iam_server.keys(wh.split(f"{BUCKET}/", 1)[1])) == before
    assert sorted(admin.get_table("db.orders").to_arrow().column("id").to_pylist()) == [1, 2, 3]


# ---- data files travel in parallel -------------------------------------------------------------------
def _rows(n: int, seed: int) -> pa.Table:
    import numpy as np

    rnd = np.random.default_rng(seed)
    return pa.table(
        {"dt": ["d"] * n, "id": np.arange(n, dtype=np.int64), "name": rnd.integers(0, 1 << 40, n).astype(str),
         "amount": rnd.random(n)},
        schema=ORDERS,
    )


def test_data_files_upload_in_parallel_and_a_failed_upload_leaves_nothing(
    s3_catalog_args: S3Args, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that rolls over several data files uploads them while it encodes the next ones
    (more than one upload in flight), and reads back every row; when one upload fails, the write
    fails naming the object, nothing is committed and no data file of it stays in the bucket."""
    c = _catalog(s3_catalog_args)
    t = c.create_table("db.t", ORDERS, options={"bucket": "1", "bucket-key": "id", "target-file-size": "64 kb"})
    in_flight, most = [0], [0]
    lock = threading.Lock()
    real = S3FileIO.upload

    def counted(self: S3FileIO, local: str, path: str) -> None:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            real(self, local, path)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(S3FileIO, "upload", counted)
    rows = _rows(4 * 131_072 + 1000, 1)  # a file rolls over at the end of a 128k-row chunk
    t.write(rows)
    prefix = s3_catalog_args[0].split(f"{BUCKET}/", 1)[1]
    before = sorted(s3_server.keys(prefix))
    assert len([k for k in before if k.endswith(".parquet")]) >= 4
    assert most[0] > 1, "one upload at a time"
    got = t.to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == rows.column("id").to_pylist()
    assert got.column("name").to_pylist() == rows.column("name").to_pylist()

    calls = [0]

    def failing(self: S3FileIO, local: str, path: str) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise StorageError(f"cannot upload {path}: injected", path)
        real(self, local, path)

    monkeypatch.setattr(S3FileIO, "upload", failing)
    with pytest.raises(StorageError, match="injected"):
        t.write(_rows(4 * 131_072 + 1000, 2))
    assert calls[0] > 3  # the other files were uploaded (and then removed)
    assert sorted(s3_server.keys(prefix)) == before
    assert len(t.snapshots()) == 1 and t.to_arrow().num_rows == rows.num_rows
