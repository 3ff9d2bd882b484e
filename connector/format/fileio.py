"""File IO with the two primitives a table format needs: atomic publish without overwrite,
and errors that name the file. This module is the one seam through which lakelog touches storage:
:class:`FileIO` for local (and mounted shared) file systems, and
:class:`~lakelog.connector.format.objectstore.S3FileIO` for ``s3://`` object stores; :func:`io_for`
picks the one serving a location.

Paths are plain strings: absolute local paths (``file://`` URIs are accepted wherever a path is)
or ``s3://bucket/key`` URIs.

Errors: a file that is not there is a :class:`~lakelog.connector.errors.MissingFileError` on read
(a ``FileNotFoundError``) and otherwise the plain ``FileNotFoundError`` / ``FileExistsError``
callers test for; every other ``OSError`` (a full disk, a read-only file system, no permission, an
I/O error) becomes a :class:`~lakelog.connector.errors.StorageError` naming the operation and the
path, with the original error as its ``__cause__``. :func:`storage_errors` applies the same rule to
files written outside this class (Parquet data files, spills).
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from lakelog.connector.errors import (
    LakelogError,
    MissingFileError,
    OptionError,
    PathEscapeError,
    StorageError,
)

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from lakelog.connector.format.lock import Hold

__all__ = [
    "FileIO",
    "local_path",
    "location",
    "is_object_store",
    "io_for",
    "register_io",
    "ensure_inside",
    "storage_errors",
    "os_error_code",
]

_OBJECT_SCHEMES = ("s3://", "s3a://", "s3n://")


def local_path(path_or_uri: str) -> str:
    """Turn a local path or a ``file:`` URI into an absolute local path.

    Every spelling Flink and Paimon accept means the same directory: ``/tmp/x``, ``file:/tmp/x``,
    ``file:///tmp/x`` and ``file://localhost/tmp/x``. Other schemes (``s3://``, ``hdfs://``) raise
    :class:`~lakelog.connector.errors.OptionError`: lakelog stores tables on local (or mounted
    shared) file systems only.
    """
    p = str(path_or_uri)
    if p.startswith("file:"):
        rest = p[len("file:") :]
        if rest.startswith("//"):
            host, sep, tail = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise OptionError(f"file URI {path_or_uri!r} names host {host!r}; only local files are read")
            rest = sep + tail
        p = rest or "/"
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", p):
        raise OptionError(
            f"unsupported file system scheme in {path_or_uri!r}: only local paths and file: URIs"
        )
    return os.path.abspath(os.path.expanduser(p))


def is_object_store(path: str) -> bool:
    """Whether ``path`` is an ``s3://`` (``s3a://``, ``s3n://``) URI."""
    return str(path).startswith(_OBJECT_SCHEMES)


def location(path_or_uri: str) -> str:
    """A table or warehouse location in its one spelling: an absolute local path (see
    :func:`local_path`), or ``s3://bucket/prefix`` without a trailing slash (``s3a://`` and
    ``s3n://`` are read as ``s3://``, as Paimon reads them). Other schemes raise
    :class:`OptionError` naming the location."""
    p = str(path_or_uri)
    if is_object_store(p):
        rest = p.split("://", 1)[1]
        bucket, _, key = rest.partition("/")
        parts = [x for x in key.split("/") if x]
        if not bucket or any(x in (".", "..") for x in parts):
            raise OptionError(f"invalid object store location {path_or_uri!r}: expected s3://bucket/prefix")
        return "/".join(["s3:/", bucket, *parts])
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", p) and not p.startswith("file:"):
        scheme = p.split("://", 1)[0]
        raise OptionError(
            f"unsupported file system scheme {scheme!r} in {path_or_uri!r}: lakelog stores tables on "
            "local paths, file: URIs and s3:// object stores"
        )
    return local_path(p)


# object-store file IOs by the bucket they serve ("s3://bucket"): a table opened by its location
# (a Flink job's workers, SQL statements, the CLI) uses the file IO its catalog configured
_STORES: dict[str, FileIO] = {}


def _bucket_root(path: str) -> str:
    return "/".join(location(path).split("/")[:3])


def register_io(root: str, file_io: FileIO) -> None:
    """Serve the object-store locations under ``root``'s bucket with ``file_io`` in this process."""
    _STORES[_bucket_root(root)] = file_io


def io_for(path: str, options: Mapping[str, str] | None = None) -> FileIO:
    """The file IO serving location ``path``: the local one, or for ``s3://`` the one built from
    ``options`` (Paimon's ``s3.*`` catalog options), else the one registered for its bucket, else
    one from the AWS environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...)."""
    if not is_object_store(path):
        location(path)  # refuses unknown schemes
        return _LOCAL
    from lakelog.connector.format.objectstore import S3FileIO, s3_options

    if options and s3_options(options):
        return S3FileIO(options)
    root = _bucket_root(path)
    if root not in _STORES:
        _STORES[root] = S3FileIO({})
    return _STORES[root]


def ensure_inside(root: str, path: str) -> str:
    """Return ``path`` resolved, or raise :class:`PathEscapeError` if it leaves ``root``."""
    if is_object_store(root) or is_object_store(path):
        real_root, real = location(root), location(path)
        if real != real_root and not real.startswith(real_root + "/"):
            raise PathEscapeError(f"path {path!r} escapes the warehouse {root!r}")
        return real
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise PathEscapeError(f"path {path!r} escapes the warehouse {root!r}")
    return real


def os_error_code(e: OSError) -> int | None:
    """The errno of ``e``; pyarrow's IO errors carry it only in their text (``[errno 28] ...``).
    None for errors that are not the file system's (pyarrow reports undecodable files as
    ``OSError`` too)."""
    if e.errno is not None:
        return int(e.errno)
    m = re.search(r"\berrno (\d+)", str(e), re.I)
    return int(m.group(1)) if m is not None else None


_HINTS = {
    _errno.ENOSPC: "; free space on the device and retry (this call committed nothing)",
    _errno.EDQUOT: "; the disk quota is exhausted",
    _errno.EROFS: "; the table's file system is mounted read-only",
    _errno.EACCES: "; check the permissions of the table directory",
    _errno.EPERM: "; check the permissions of the table directory",
}


@contextlib.contextmanager
def storage_errors(action: str, path: str) -> Iterator[None]:
    """Turn an ``OSError`` raised inside the block into a :class:`StorageError` naming ``action``
    (``"write"``, ``"create the directory"``, ...) and ``path``. ``FileNotFoundError`` and
    ``FileExistsError`` pass unchanged (callers test for them), as do lakelog's own errors."""
    try:
        yield
    except (FileNotFoundError, FileExistsError, LakelogError):
        raise
    except OSError as e:
        code = os_error_code(e)
        reason = e.strerror or (os.strerror(code) if code is not None else str(e))
        name = _errno.errorcode.get(code) if code is not None else None
        label = f" ({name})" if name else ""
        hint = _HINTS.get(code, "") if code is not None else ""
        raise StorageError(f"cannot {action} {path}: {reason}{label}{hint}", path, code) from e


class FileIO:
    """File operations on the local file system. Stateless, so it pickles trivially."""

    is_local = True
    # rename_dir moves a directory at once; an object store copies every object instead, so its
    # callers copy (copy_tree) and delete under their own commit point
    atomic_rename = True

    def __repr__(self) -> str:
        return "FileIO(local)"

    def __eq__(self, other: object) -> bool:
        return type(other) is FileIO

    def __hash__(self) -> int:
        return hash(FileIO)

    def open_input(self, path: str) -> pa.NativeFile:
        """``path`` opened for random access reads (Parquet footers and column chunks)."""
        import pyarrow as pa

        try:
            with storage_errors("open", path):
                return pa.OSFile(path, "rb")
        except FileNotFoundError:
            raise MissingFileError(f"file not found: {path}") from None

    def upload(self, local: str, path: str) -> None:
        """Move the finished local file ``local`` to ``path`` (same file system: a rename)."""
        with storage_errors("write", path):
            os.replace(local, path)

    def upload_in_background(self, local: str, path: str) -> Future[None]:
        """:meth:`upload`, done by the time the returned future is (here at once: a rename)."""
        done: Future[None] = Future()
        try:
            self.upload(local, path)
            done.set_result(None)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the future
            done.set_exception(e)
        return done

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def create_dir(self, path: str) -> None:
        """Create a directory that exists while empty (a database): :meth:`mkdirs` here; a marker
        object on an object store, where :meth:`mkdirs` does nothing."""
        self.mkdirs(path)

    def read_bytes(self, path: str) -> bytes:
        try:
            with storage_errors("read", path), open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise MissingFileError(f"file not found: {path}") from None

    def exists(self, path: str) -> bool:
        """Whether a file or directory is at ``path``."""
        return os.path.exists(path)

    def file_exists(self, path: str) -> bool:
        """Whether a file is at ``path`` (one request on an object store, where :meth:`exists` may
        need a listing to find a directory)."""
        return os.path.exists(path)

    def mkdirs(self, path: str) -> None:
        with storage_errors("create the directory", path):
            os.makedirs(path, exist_ok=True)

    def list_dir(self, path: str) -> list[str]:
        """Names in a directory; an absent directory lists as empty."""
        try:
            with storage_errors("list the directory", path):
                return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def walk_files(self, path: str) -> Iterator[str]:
        def fail(e: OSError) -> None:
            if not isinstance(e, FileNotFoundError):  # a directory removed while walking is fine
                with storage_errors("list the directory", e.filename or path):
                    raise e

        for dirpath, _dirs, files in os.walk(path, onerror=fail):
            for name in files:
                yield os.path.join(dirpath, name)

    def delete(self, path: str) -> bool:
        """Remove a file; False when it is not there. A read-only file system refuses even the removal
        of a file that does not exist (EROFS, not ENOENT): that is no error either."""
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False
        except OSError:
            if not os.path.lexists(path):
                return False
            with storage_errors("delete", path):
                raise

    def delete_dir(self, path: str) -> None:
        """Remove a directory tree; one removed meanwhile (wholly or partly) is fine, a file system
        that refuses raises :class:`StorageError`."""
        import shutil

        def fail(_fn: object, failed: str, exc: BaseException) -> None:
            if isinstance(exc, FileNotFoundError):
                return
            with storage_errors("delete", failed):
                raise exc

        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=fail)
        else:
            shutil.rmtree(path, onerror=lambda fn, failed, info: fail(fn, failed, info[1]))

    def delete_empty_dir(self, path: str) -> bool:
        """Remove ``path`` if it is an empty directory; False when it is absent or not empty."""
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno in (_errno.ENOTEMPTY, _errno.EEXIST):
                return False
            with storage_errors("delete the directory", path):
                raise

    def rename_dir(self, src: str, dst: str) -> None:
        if os.path.exists(dst):
            raise FileExistsError(dst)
        with storage_errors(f"rename {src} to", dst):
            os.rename(src, dst)

    def copy_tree(self, src: str, dst: str, *, skip: Callable[[str], bool] = lambda name: False) -> int:
        """Copy every file under ``src`` to the same place under ``dst``, except those whose base
        name ``skip`` picks; returns how many were copied."""
        import shutil

        copied = 0
        for path in self.walk_files(src):
            if skip(os.path.basename(path)):
                continue
            target = os.path.join(dst, os.path.relpath(path, src))
            self.mkdirs(os.path.dirname(target))
            with storage_errors(f"copy {path} to", target):
                shutil.copy2(path, target)
            copied += 1
        return copied

    def delete_files(self, paths: Sequence[str]) -> None:
        """Remove the files ``paths`` (absent ones are fine)."""
        for path in paths:
            self.delete(path)

    def file_size(self, path: str) -> int:
        with storage_errors("read the size of", path):
            return os.path.getsize(path)

    def mtime(self, path: str) -> float:
        with storage_errors("read the modification time of", path):
            return os.path.getmtime(path)

    def temp_path(self, path: str) -> str:
        d, name = os.path.split(path)
        return os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")

    def _write_temp(self, path: str, data: bytes) -> str:
        """``data`` in a new fsynced temp file next to ``path``; the temp file is removed again when
        writing fails (a full disk leaves no ``.tmp`` behind)."""
        self.mkdirs(os.path.dirname(path))
        tmp = self.temp_path(path)
        try:
            with storage_errors("write", path), open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        return tmp

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new immutable file (data files, manifests): temp file, fsync, rename."""
        tmp = self._write_temp(path, data)
        try:
            with storage_errors("write", path):
                os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def try_publish(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` holding ``data``; return False if ``path`` already exists.

        The content goes to a temp file first, and a hard link publishes it: ``link`` fails when
        the target exists, so a published file is never half-written and never overwritten.
        """
        tmp = self._write_temp(path, data)
        try:
            with storage_errors("publish", path):
                os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace a small mutable file (hints, consumers) atomically."""
        self.write_bytes(path, data)

    def lock(self, path: str, timeout_s: float) -> contextlib.AbstractContextManager[Hold]:
        """Hold the lock file ``path`` exclusively across threads and processes (``flock``; see
        :mod:`lakelog.connector.format.lock`), waiting at most ``timeout_s`` seconds."""
        from lakelog.connector.format.lock import file_lock

        return file_lock(path, timeout_s)


_LOCAL = FileIO()
