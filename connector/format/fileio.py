"""Local file IO with the two primitives a table format needs: atomic publish without overwrite,
and errors that name the file.

Paths are plain strings; ``file://`` URIs are accepted wherever a path is.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

from lakelog.connector.errors import MissingFileError, OptionError, PathEscapeError

__all__ = ["FileIO", "local_path", "ensure_inside"]


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


def ensure_inside(root: str, path: str) -> str:
    """Return ``path`` resolved, or raise :class:`PathEscapeError` if it leaves ``root``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise PathEscapeError(f"path {path!r} escapes the warehouse {root!r}")
    return real


class FileIO:
    """File operations on the local file system. Stateless, so it pickles trivially."""

    def read_bytes(self, path: str) -> bytes:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise MissingFileError(f"file not found: {path}") from None

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def list_dir(self, path: str) -> list[str]:
        """Names in a directory; an absent directory lists as empty."""
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def walk_files(self, path: str) -> Iterator[str]:
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                yield os.path.join(dirpath, name)

    def delete(self, path: str) -> bool:
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> None:
        import shutil

        shutil.rmtree(path, ignore_errors=True)

    def rename_dir(self, src: str, dst: str) -> None:
        if os.path.exists(dst):
            raise FileExistsError(dst)
        os.rename(src, dst)

    def file_size(self, path: str) -> int:
        return os.path.getsize(path)

    def mtime(self, path: str) -> float:
        return os.path.getmtime(path)

    def temp_path(self, path: str) -> str:
        d, name = os.path.split(path)
        return os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")

    def _write_temp(self, path: str, data: bytes) -> str:
        """Write ``data`` to a new temp file beside ``path`` and fsync it; return the temp path.
        A failed write (a full disk, say) removes its temp file before raising."""
        self.mkdirs(os.path.dirname(path))
        tmp = self.temp_path(path)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            self.delete(tmp)
            raise
        return tmp

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new immutable file (data files, manifests): temp file, fsync, rename."""
        tmp = self._write_temp(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            self.delete(tmp)
            raise

    def try_publish(self, path: str, data: bytes) -> bool:
        """Atomically create ``path`` holding ``data``; return False if ``path`` already exists.

        The content goes to a temp file first, and a hard link publishes it: ``link`` fails when
        the target exists, so a published file is never half-written and never overwritten.
        """
        tmp = self._write_temp(path, data)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.remove(tmp)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace a small mutable file (hints, consumers) atomically."""
        self.write_bytes(path, data)
