"""File IO on S3 and S3-compatible object stores (``s3://bucket/prefix``).

Two well-kept libraries do the talking; nothing here speaks HTTP by itself:

* ``pyarrow.fs.S3FileSystem`` reads and writes objects: ranged reads for Parquet footers and
  column chunks, multipart uploads for large data files, listings.
* ``boto3`` makes the one request pyarrow lacks, the conditional create
  (``PutObject`` with ``If-None-Match: *``) that publishes a snapshot, a schema, a tag or a lease:
  of several writers racing for one key exactly one wins, without rename and without a lock
  service.

Options are Paimon's catalog options (``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``,
``s3.region``, ``s3.path.style.access``, ``s3.session-token``; the Hadoop ``fs.s3a.*`` spellings
too); without keys, the standard AWS environment variables and credential chain apply, and
``AWS_ENDPOINT_URL`` names an endpoint. Secrets live only in this object: its ``repr``, its errors
and the files it writes never show them.

An object store has no directories, no flock and no atomic rename, so three things differ from the
local :class:`~lakelog.connector.format.fileio.FileIO`:

* publishing is the conditional create; a store that ignores ``If-None-Match`` (found by a probe,
  once per bucket and process, before the first publish) is refused for writing unless the
  catalog provides a lock (a JDBC metastore with ``lock.enabled``); reads always work;
* the commit lock is the lease lock of :mod:`lakelog.connector.format.lock`;
* a PUT whose answer was lost is resolved by reading the object back: the same bytes mean it
  landed (as Paimon resolves it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Optional

from lakelog.connector.errors import (
    LakelogError,
    MissingFileError,
    OptionError,
    StorageError,
    UnsafeStoreError,
)
from lakelog.connector.format.fileio import FileIO

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    import pyarrow.fs as pafs

    from lakelog.connector.format.lock import Hold

__all__ = ["S3FileIO", "S3_SCHEMES", "S3_OPTION_KEYS", "split_uri", "s3_options"]

_log = logging.getLogger(__name__)

S3_SCHEMES = ("s3://", "s3a://", "s3n://")

# Paimon's option names first; the Hadoop S3A names Paimon maps them to are read too
_ALIASES = {
    "endpoint": ("s3.endpoint", "fs.s3a.endpoint"),
    "access_key": ("s3.access-key", "s3.access.key", "fs.s3a.access.key"),
    "secret_key": ("s3.secret-key", "s3.secret.key", "fs.s3a.secret.key"),
    "session_token": ("s3.session-token", "s3.session.token", "fs.s3a.session.token"),
    "region": ("s3.region", "fs.s3a.endpoint.region", "fs.s3a.region"),
    "path_style": ("s3.path.style.access", "s3.path-style-access", "fs.s3a.path.style.access"),
    "max_attempts": ("s3.max-attempts", "fs.s3a.attempts.maximum"),
}
S3_OPTION_KEYS = frozenset(k for keys in _ALIASES.values() for k in keys)
WHOLE_READ_BYTES = 8 * 1024 * 1024  # data files up to this size are fetched in one request
_COPY_IN_ONE_REQUEST = 5 * 1024**3  # CopyObject's limit; larger objects are copied in parts
_RETRY_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "ConditionalRequestConflict",
        "503",
        "500",
    }
)


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b``)."""
    for scheme in S3_SCHEMES:
        if uri.startswith(scheme):
            bucket, _, key = uri[len(scheme) :].partition("/")
            return bucket, key.strip("/")
    raise OptionError(f"not an s3:// location: {uri!r}")


def s3_options(options: Mapping[str, str]) -> dict[str, str]:
    """The S3 settings among catalog ``options``, by their canonical names."""
    out: dict[str, str] = {}
    for name, keys in _ALIASES.items():
        for k in keys:
            if k in options and str(options[k]).strip():
                out[name] = str(options[k]).strip()
                break
    return out


def _flag(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise OptionError(f"option {name!r} must be 'true' or 'false', not {value!r}")
    return v == "true"


# data files on their way to an object store, a few at once (each a PUT or a multipart upload)
UPLOAD_THREADS = 8
_uploads: list[ThreadPoolExecutor] = []
_uploads_lock = threading.Lock()


def _upload_pool() -> ThreadPoolExecutor:
    with _uploads_lock:
        if not _uploads:
            pool = ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="lakelog-upload")
            _uploads.append(pool)
        return _uploads[0]


# one probe per (endpoint, bucket) and process: does the store refuse a second create of a key?
_probed: dict[tuple[str, str], bool] = {}
_probe_lock = threading.Lock()


class S3FileIO(FileIO):
    """File operations on one S3 endpoint; paths are ``s3://bucket/key`` URIs.

    It pickles without its clients (rebuilt on first use), so it travels to Flink workers with the
    table; its settings, credentials included, travel with it as Flink ships any connector's
    configuration.
    """

    is_local = False
    atomic_rename = False

    def __init__(self, options: Optional[Mapping[str, str]] = None) -> None:
        given = {str(k): str(v) for k, v in (options or {}).items()}
        s = s3_options(given)
        endpoint = (
            s.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        )
        self.endpoint: Optional[str] = None
        self.scheme = "https"
        if endpoint:
            scheme, sep, rest = endpoint.partition("://")
            if sep:
                if scheme not in ("http", "https"):
                    raise OptionError(f"option 's3.endpoint' must be an http(s) URL, not {endpoint!r}")
                self.scheme, endpoint = scheme, rest
            self.endpoint = endpoint.rstrip("/")
        self.region = (
            s.get("region")
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        self.path_style = (
            _flag("s3.path.style.access", s["path_style"]) if "path_style" in s else bool(self.endpoint)
        )
        self._access_key = s.get("access_key")
        self._secret_key = s.get("secret_key")
        self._session_token = s.get("session_token")
        if (self._access_key is None) != (self._secret_key is None):
            raise OptionError("options 's3.access-key' and 's3.secret-key' go together: give both or neither")
        try:
            self.max_attempts = int(s.get("max_attempts", "6"))
        except ValueError:
            raise OptionError(
                f"option 's3.max-attempts' must be an integer, not {s['max_attempts']!r}"
            ) from None
        if self.max_attempts < 1:
            raise OptionError("option 's3.max-attempts' must be at least 1")
        self._fs: Optional[pafs.S3FileSystem] = None
        self._client: Any = None

    # ---- identity, pickling ---------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """The endpoint, for messages (never a credential)."""
        return f"{self.scheme}://{self.endpoint}" if self.endpoint else f"AWS S3 ({self.region})"

    def __repr__(self) -> str:
        return f"S3FileIO(endpoint={self.where!r}, region={self.region!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None
        state["_client"] = None
        return state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, S3FileIO) and self.__getstate__() == other.__getstate__()

    def __hash__(self) -> int:
        return hash((self.endpoint, self.region))

    # ---- clients ----------------------------------------------------------------------------------
    @property
    def fs(self) -> pafs.S3FileSystem:
        if self._fs is None:
            import pyarrow.fs as pafs

            self._fs = pafs.S3FileSystem(
                access_key=self._access_key,
                secret_key=self._secret_key,
                session_token=self._session_token,
                region=self.region,
                scheme=self.scheme,
                endpoint_override=self.endpoint,
                force_virtual_addressing=not self.path_style,
                connect_timeout=10,
                request_timeout=60,
                retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=self.max_attempts),
            )
        return self._fs

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise OptionError(
                    "s3:// warehouses need boto3 for conditional writes: pip install 'lakelog[s3]'"
                ) from None
            self._client = boto3.client(
                "s3",
                endpoint_url=f"{self.scheme}://{self.endpoint}" if self.endpoint else None,
                aws_access_key_id=self._access_key,
                aws_secret_access_key=self._secret_key,
                aws_session_token=self._session_token,
                region_name=self.region,
                config=Config(
                    s3={"addressing_style": "path" if self.path_style else "virtual"},
                    retries={"max_attempts": self.max_attempts, "mode": "standard"},
                    connect_timeout=10,
                    read_timeout=60,
                ),
            )
        return self._client

    # ---- errors -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, action: str, path: str) -> Iterator[None]:
        """A failed request becomes a :class:`StorageError` naming the action, the object and the
        endpoint (never a credential); a missing object stays a ``FileNotFoundError``."""
        try:
            yield
        except (FileNotFoundError, FileExistsError, LakelogError):
            raise
        except Exception as e:  # botocore's ClientError / EndpointConnectionError, pyarrow's OSError
            code = _error_code(e)
            if code in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(path) from None
            if code == "NoSuchBucket":
                raise StorageError(
                    f"cannot {action} {path}: the bucket does not exist at {self.where}", path
                ) from None
            hint = ""
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                hint = "; check the credentials (s3.access-key / s3.secret-key) and the bucket policy"
            msg = _scrub(str(e), self)
            raise StorageError(f"cannot {action} {path} at {self.where}: {msg}{hint}", path) from None

    def check_bucket(self, uri: str) -> None:
        """Fail with one clear error when the bucket of ``uri`` cannot be reached: no credentials,
        an endpoint that does not answer, a bucket that does not exist, access denied."""
        bucket, _ = split_uri(uri)
        if self._access_key is None:
            import botocore.session

            if botocore.session.get_session().get_credentials() is None:
                raise OptionError(
                    f"no S3 credentials for {uri}: set 's3.access-key' and 's3.secret-key', or the "
                    "AWS environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or profile"
                )
        try:
            self.client.head_bucket(Bucket=bucket)
        except Exception as e:
            code = _error_code(e)
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise OptionError(
                    f"warehouse {uri}: bucket {bucket!r} does not exist at {self.where}"
                ) from None
            if code in ("403", "AccessDenied"):
                raise OptionError(
                    f"warehouse {uri}: access to bucket {bucket!r} at {self.where} is denied; check the "
                    "credentials (s3.access-key / s3.secret-key) and the bucket policy"
                ) from None
            raise OptionError(f"warehouse {uri}: cannot reach {self.where}: {_scrub(str(e), self)}") from None

    # ---- FileIO ---------------------------------------------------------------------------------------
    @staticmethod
    def _key(path: str) -> str:
        bucket, key = split_uri(path)
        return f"{bucket}/{key}" if key else bucket

    def read_bytes(self, path: str) -> bytes:
        """A whole small object (metadata: snapshots, hints, leases, manifests) in one GET, so that a
        concurrent overwrite is seen wholly or not at all (pyarrow reads in ranges)."""
        bucket, key = split_uri(path)
        try:
            with self._errors("read", path):
                return bytes(
                    self._idempotent(lambda: self.client.get_object(Bucket=bucket, Key=key)["Body"].read())
                )
        except FileNotFoundError:
            raise MissingFileError(f"file not found: {path}") from None

    def _info(self, path: str) -> Any:
        with self._errors("look up", path):
            return self.fs.get_file_info(self._key(path))

    def file_exists(self, path: str) -> bool:
        """One HEAD request."""
        bucket, key = split_uri(path)
        try:
            with self._errors("look up", path):
                self._idempotent(lambda: self.client.head_object(Bucket=bucket, Key=key))
            return True
        except FileNotFoundError:
            return False

    def exists(self, path: str) -> bool:
        """An object at ``path``, or objects under the prefix ``path/`` (a directory)."""
        if self.file_exists(path):
            return True
        bucket, key = split_uri(path)
        with self._errors("list", path):
            got = self._idempotent(
                lambda: self.client.list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/") + "/", MaxKeys=1)
            )
        return bool(got.get("KeyCount", 0))

    def is_dir(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self._info(path).type == pafs.FileType.Directory)

    def mkdirs(self, path: str) -> None:
        """Object stores have no directories: a prefix exists once an object is under it."""

    def create_dir(self, path: str) -> None:
        """The marker object ``<key>/`` (what Hadoop's S3A writes for a directory)."""
        bucket, key = split_uri(path)
        with self._errors("create the directory", path):
            self.client.put_object(Bucket=bucket, Key=key + "/", Body=b"")

    def _select(self, path: str, recursive: bool) -> list[Any]:
        import pyarrow.fs as pafs

        with self._errors("list", path):
            return list(
                self.fs.get_file_info(
                    pafs.FileSelector(self._key(path), allow_not_found=True, recursive=recursive)
                )
            )

    def list_dir(self, path: str) -> list[str]:
        return sorted({info.base_name for info in self._select(path, False)})

    def walk_files(self, path: str) -> Iterator[str]:
        import pyarrow.fs as pafs

        scheme = path[: path.index("://") + 3]
        for info in self._select(path, True):
            if info.type == pafs.FileType.File:
                yield scheme + info.path

    def delete(self, path: str) -> bool:
        """A HEAD (for the answer: was it there?) and a DELETE. Not pyarrow's ``delete_file``, which
        leaves a marker object for the parent "directory" behind."""
        if not self.file_exists(path):
            return False
        bucket, key = split_uri(path)
        with self._errors("delete", path):
            self._idempotent(lambda: self.client.delete_object(Bucket=bucket, Key=key))
        return True

    def delete_dir(self, path: str) -> None:
        with self._errors("delete", path):
            self.fs.delete_dir_contents(self._key(path), missing_dir_ok=True)
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_dir(self._key(path))  # the directory's marker object, if any

    def delete_empty_dir(self, path: str) -> bool:
        return False  # a prefix without objects does not exist

    def rename_dir(self, src: str, dst: str) -> None:
        raise UnsafeStoreError(
            f"cannot rename {src} to {dst}: an object store renames by copying every object, which is "
            "not atomic; keep table names in a JDBC metastore, or create the table anew and copy it"
        )

    def copy_tree(self, src: str, dst: str, *, skip: Callable[[str], bool] = lambda name: False) -> int:
        """Server-side copies of every object under ``src`` to the same key under ``dst``, several
        at once, except those whose base name ``skip`` picks; returns how many were copied."""
        import pyarrow.fs as pafs

        src, dst = src.rstrip("/"), dst.rstrip("/")
        src_bucket, src_key = split_uri(src)
        dst_bucket, dst_key = split_uri(dst)
        objects = [
            (info.path[len(self._key(src)) + 1 :], int(info.size or 0))
            for info in self._select(src, True)
            if info.type == pafs.FileType.File and not skip(info.base_name)
        ]

        def copy(rel: str, size: int) -> None:
            source = {"Bucket": src_bucket, "Key": f"{src_key}/{rel}"}
            with self._errors(f"copy {src}/{rel} to", f"{dst}/{rel}"):
                target = f"{dst_key}/{rel}"
                if size < _COPY_IN_ONE_REQUEST:
                    self._idempotent(
                        lambda: self.client.copy_object(CopySource=source, Bucket=dst_bucket, Key=target)
                    )
                else:  # a multipart copy (boto3's managed transfer)
                    self.client.copy(source, dst_bucket, target)

        for future in [_upload_pool().submit(copy, rel, size) for rel, size in objects]:
            future.result()
        return len(objects)

    def delete_files(self, paths: Sequence[str]) -> None:
        """Remove the objects ``paths`` (absent ones are fine): one request per 1000 keys of a
        bucket, not a HEAD and a DELETE each."""
        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            bucket, key = split_uri(path)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), 1000):
                batch = {"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True}

                def request(bucket: str = bucket, batch: dict[str, Any] = batch) -> Any:
                    return self.client.delete_objects(Bucket=bucket, Delete=batch)

                with self._errors("delete", f"s3://{bucket}/{keys[start]}"):
                    got = self._idempotent(request)
                failed = got.get("Errors") or []
                if failed:
                    first = failed[0]
                    raise StorageError(
                        f"cannot delete s3://{bucket}/{first.get('Key')} at {self.where}: "
                        f"{first.get('Code')} {first.get('Message', '')} ({len(failed)} objects not deleted)",
                        f"s3://{bucket}/{first.get('Key')}",
                    )

    def file_size(self, path: str) -> int:
        info = self._info(path)
        if info.size is None:
            raise FileNotFoundError(path)
        return int(info.size)

    def mtime(self, path: str) -> float:
        info = self._info(path)
        if info.mtime is None:
            raise FileNotFoundError(path)
        return float(info.mtime.timestamp())

    def temp_path(self, path: str) -> str:
        d, name = path.rsplit("/", 1)
        return f"{d}/.{name}.{uuid.uuid4().hex}.tmp"

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole object in one PUT: atomic, readers see all of it or nothing."""
        bucket, key = split_uri(path)
        with self._errors("write", path):
            self._idempotent(lambda: self.client.put_object(Bucket=bucket, Key=key, Body=data))

    def _idempotent(self, request: Callable[[], Any]) -> Any:
        """Run a request that may be repeated safely, again (with backoff) while no answer comes or
        the store throttles; other errors, and the last failure, are raised."""
        delay = 0.05
        for attempt in range(self.max_attempts):
            try:
                return request()
            except Exception as e:
                if attempt + 1 >= self.max_attempts or (
                    _error_code(e) is not None and _error_code(e) not in _RETRY_CODES
                ):
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        self.write_bytes(path, data)

    def open_input(self, path: str) -> pa.NativeFile:
        """``path`` for random access reads. A file of at most :data:`WHOLE_READ_BYTES` comes in one
        GET (a suffix range: the footer and every column chunk at once, no HEAD first); a larger
        one is read by ranges as the reader asks (pyarrow's S3 file)."""
        import pyarrow as pa

        bucket, key = split_uri(path)
        try:
            with self._errors("open", path):
                got = self._idempotent(
                    lambda: self.client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{WHOLE_READ_BYTES}")
                )
                total = int(str(got.get("ContentRange") or "/-1").rsplit("/", 1)[1])
                if total < 0 or total <= WHOLE_READ_BYTES:
                    return pa.BufferReader(got["Body"].read())
                got["Body"].close()
                return self.fs.open_input_file(self._key(path))
        except FileNotFoundError:
            raise MissingFileError(f"file not found: {path}") from None

    def upload_in_background(self, local: str, path: str) -> Future[None]:
        """:meth:`upload` on the process's upload threads (:data:`UPLOAD_THREADS`), so that a writer
        encodes its next file, and other buckets' writers theirs, while this one travels; the local
        file is removed once the upload has ended, whether it succeeded or not. The caller waits
        for the future before it hands the file to a commit."""

        def run() -> None:
            try:
                self.upload(local, path)
            finally:
                with contextlib.suppress(OSError):
                    os.remove(local)

        return _upload_pool().submit(run)

    def upload(self, local: str, path: str) -> None:
        """Copy the local file ``local`` to ``path`` (multipart for large files)."""
        import pyarrow.fs as pafs

        with self._errors("upload", path):
            if os.path.getsize(local) <= WHOLE_READ_BYTES:  # one PUT instead of a multipart upload's 3
                bucket, key = split_uri(path)
                with open(local, "rb") as f:
                    data = f.read()
                self._idempotent(lambda: self.client.put_object(Bucket=bucket, Key=key, Body=data))
            else:
                pafs.copy_files(local, self._key(path), destination_filesystem=self.fs)

    # ---- publishing ---------------------------------------------------------------------------------
    def conditional_writes(self, path: str) -> bool:
        """Whether the store behind ``path`` refuses a second create of one key (probed once)."""
        bucket, prefix = split_uri(path)
        where = (self.where, bucket)
        with _probe_lock:
            if where in _probed:
                return _probed[where]
        key = f"{prefix.split('/', 1)[0]}/.lakelog-probe-{uuid.uuid4().hex}".lstrip("/")
        with self._errors("probe conditional writes in", f"s3://{bucket}/{key}"):
            self.client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*")
                ok = False
            except Exception as e:
                if _error_code(e) not in ("PreconditionFailed", "412"):
                    raise
                ok = True
            finally:
                with contextlib.suppress(Exception):
                    self.client.delete_object(Bucket=bucket, Key=key)
        if not ok:
            _log.warning(
                "the S3 store at %s ignores If-None-Match: tables there need a catalog lock", self.where
            )
        with _probe_lock:
            _probed[where] = ok
        return ok

    def try_publish(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless it exists (``If-None-Match: *``); False if it
        exists. Throttling and conflicting concurrent requests are retried with backoff; when an
        answer is lost, the object is read back: the same bytes mean this call created it."""
        from lakelog.connector.format.lock import external_lock_held

        if not self.conditional_writes(path):
            if not external_lock_held():
                raise UnsafeStoreError(
                    f"cannot publish {path}: the S3 store at {self.where} does not honour conditional "
                    "writes (If-None-Match), so two writers could both win one snapshot id; keep the "
                    "table in a JDBC metastore with 'lock.enabled'='true' (reads work as they are)"
                )
            if self.file_exists(path):  # serialised by the catalog's lock
                return False
            self.write_bytes(path, data)
            return True
        bucket, key = split_uri(path)
        delay = 0.05
        for attempt in range(self.max_attempts + 2):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except Exception as e:
                code = _error_code(e)
                if code in ("PreconditionFailed", "412"):
                    return self._landed(path, data, attempt)
                if code in _RETRY_CODES or code is None:
                    # no answer, or a throttled / conflicting request: it may have landed
                    got = self._read_back(path)
                    if got is not None:
                        return got == data
                    if attempt < self.max_attempts + 1:
                        time.sleep(delay)
                        delay = min(delay * 2, 2.0)
                        continue
                with self._errors("publish", path):
                    raise
        raise StorageError(f"cannot publish {path} at {self.where}: no answer after retries", path)

    def _landed(self, path: str, data: bytes, attempt: int) -> bool:
        """A create refused because the key exists: ours if a retried request already created it."""
        if attempt == 0:
            return False
        return self._read_back(path) == data

    def _read_back(self, path: str) -> Optional[bytes]:
        try:
            return self.read_bytes(path)
        except MissingFileError:
            return None
        except StorageError:
            return None

    def lock(self, path: str, timeout_s: float) -> contextlib.AbstractContextManager[Hold]:
        """The lease lock of the directory of ``path`` (no flock on an object store)."""
        from lakelog.connector.format.lock import lease_lock

        return lease_lock(self, path.rsplit("/", 1)[0], timeout_s)  # type: ignore[no-any-return]


def _error_code(e: BaseException) -> Optional[str]:
    """The S3 error code of a botocore error (None for a connection that gave no answer)."""
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return str(status) if status else None
    if type(e).__module__.startswith(("botocore", "urllib3")):
        return None  # a connection error or a timeout: no answer came
    text = str(e)
    if isinstance(e, OSError):
        for code in ("NoSuchBucket", "AccessDenied", "SlowDown", "NoSuchKey"):
            if code in text:
                return code
        return "pyarrow"
    return None


def _scrub(text: str, io: S3FileIO) -> str:
    """``text`` without the credentials of ``io``."""
    for secret in (io._secret_key, io._session_token, io._access_key):
        if secret:
            text = text.replace(secret, "***")
    return text
