"""A lookup table's state on local disk: Paimon's ``lookup.cache`` modes for lakelog.

A :class:`~lakelog.operators.lookup_table.LookupTable` holds a dimension's rows (Arrow record
batches), one row position index per lookup key (sorted 64-bit hashes and positions, 16 bytes a row)
and two small per-row arrays. Where they live is the cache mode (:class:`CachePolicy`):

* ``memory``: on the Python heap (fastest; the worker must hold the whole dimension).
* ``full``: in local files, memory-mapped: the rows in an uncompressed Arrow IPC file (so a batch
  read from it is a view of the mapping, no copy), the index arrays raw. The heap holds no per-row
  data; the kernel's page cache keeps the pages that probes touch and drops cold ones under memory
  pressure, so a cache miss costs a disk read, never a table scan. ``lookup.cache-rows`` bounds the
  per-key result cache of the per-record path in front of it.
* ``auto`` (default, as Paimon's): ``memory`` until the state outgrows
  ``lookup.cache-max-memory-size``, then ``full`` for the rest of the table's life. A first load
  whose data files alone already exceed that size loads straight to disk.

``lookup.cache-max-disk-size`` bounds a disk state: a refresh that would pass it fails with the
option named, and the last good snapshot keeps being served.

Every file is unlinked as soon as it is mapped (the mapping keeps its pages until the last array or
batch over it is dropped), so a crashed worker leaves nothing behind and a replaced state's space
returns to the disk with its last reference. Files are written to ``directory`` (default the
temporary directory: Flink sets ``TMPDIR`` to its ``io.tmp.dirs`` for Python workers).
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import pyarrow as pa

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import MemorySize

__all__ = ["CACHE_MODES", "CachePolicy", "SpillDir", "on_disk"]

CACHE_MODES = ("auto", "full", "memory")
SMALL = 64 << 10  # arrays smaller than this stay on the heap (a mapping costs a page and a file)
_TARGET_ROWS = 1 << 20  # rows per record batch written (fewer, larger batches: fewer take() segments)
_TARGET_BYTES = 64 << 20


def _size(value: Union[int, str, None], key: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() in ("", "unlimited", "max"):
            return None
        try:
            return int(MemorySize.parse(value))
        except (ValueError, OptionError) as e:
            raise OptionError(f"{key} = {value!r} is not a memory size (e.g. '256 mb'): {e}") from None
    if int(value) <= 0:
        raise OptionError(f"{key} must be positive, not {value}")
    return int(value)


@dataclass(frozen=True)
class CachePolicy:
    """Where a lookup table keeps its state (see the module docstring). ``max_disk`` None: no
    limit. ``directory``: where its files go (None: the temporary directory)."""

    mode: str = "auto"
    max_memory: int = 256 << 20
    max_disk: Optional[int] = None
    rows: int = 10_000
    directory: Optional[str] = None

    @classmethod
    def of(
        cls,
        options: Any,
        *,
        mode: Optional[str] = None,
        max_memory: Union[int, str, None] = None,
        max_disk: Union[int, str, None] = None,
        rows: Optional[int] = None,
        directory: Optional[str] = None,
    ) -> CachePolicy:
        """The policy from explicit values, else the table's ``options`` (``CoreOptions``)."""
        m = str(mode if mode is not None else options.lookup_cache.value).strip().lower()
        if m not in CACHE_MODES:
            raise OptionError(f"lookup.cache = {mode!r}: must be one of {', '.join(CACHE_MODES)}")
        mem = _size(max_memory, "lookup.cache-max-memory-size")
        disk = _size(max_disk, "lookup.cache-max-disk-size")
        if max_disk is None and options.lookup_cache_max_disk_size is not None:
            disk = int(options.lookup_cache_max_disk_size)
        n = options.lookup_cache_rows if rows is None else int(rows)
        if n < 0:
            raise OptionError(f"lookup.cache-rows must not be negative, not {n}")
        if directory is not None and not os.path.isdir(directory):
            raise OptionError(f"lookup cache directory {directory!r} is not a directory")
        return cls(
            mode=m,
            max_memory=int(options.lookup_cache_max_memory_size) if mem is None else mem,
            max_disk=disk,
            rows=n,
            directory=directory,
        )


def on_disk(a: Any) -> bool:
    """Is numpy array ``a`` a view of a mapped file (made by :class:`SpillDir`)?"""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


class SpillDir:
    """Writes arrays and record batches to unlinked, memory-mapped files in ``directory``."""

    def __init__(self, directory: Optional[str] = None) -> None:
        self.directory = directory or tempfile.gettempdir()

    def _file(self, suffix: str) -> tuple[int, str]:
        try:
            return tempfile.mkstemp(prefix="lakelog-lookup-", suffix=suffix, dir=self.directory)
        except OSError as e:
            raise OptionError(f"cannot create a lookup cache file in {self.directory}: {e}") from e

    def empty(self, n: int, dtype: Any) -> np.ndarray:
        """A writable array of ``n`` ``dtype`` values over a new mapped file (heap for small ones)."""
        dt = np.dtype(dtype)
        size = n * dt.itemsize
        if size < SMALL or size == 0:
            return np.empty(n, dtype=dt)
        fd, path = self._file(".bin")
        try:
            os.ftruncate(fd, size)
            m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
            os.unlink(path)
        return np.frombuffer(memoryview(m), dtype=dt)

    def array(self, a: np.ndarray) -> np.ndarray:
        """``a`` on disk (as it is when it already is, or is small)."""
        if on_disk(a) or a.nbytes < SMALL or a.nbytes == 0:
            return a
        out = self.empty(len(a), a.dtype)
        out[:] = a
        return out

    def batches(self, batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> list[pa.RecordBatch]:
        """``batches`` written to one Arrow IPC file, in batches of about a million rows, and read
        back as views of its mapping. Streams: holds one output batch at a time."""
        fd, path = self._file(".arrow")
        os.close(fd)
        try:
            pending: list[pa.RecordBatch] = []
            rows = nbytes = 0
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, schema) as writer:

                def flush() -> None:
                    if pending:
                        merged = pa.Table.from_batches(pending, schema=schema).combine_chunks()
                        for b in merged.to_batches():
                            writer.write_batch(b)
                        pending.clear()

                for b in batches:
                    if not b.num_rows:
                        continue
                    if b.schema != schema:
                        b = pa.RecordBatch.from_arrays(b.columns, schema=schema)
                    pending.append(b)
                    rows += b.num_rows
                    nbytes += b.nbytes
                    if rows >= _TARGET_ROWS or nbytes >= _TARGET_BYTES:
                        flush()
                        rows = nbytes = 0
                flush()
            source = pa.memory_map(path, "r")
            reader = pa.ipc.open_file(source)
            return [reader.get_batch(i) for i in range(reader.num_record_batches)]
        except OSError as e:
            raise OptionError(f"cannot write the lookup cache file {path}: {e}") from e
        finally:
            os.unlink(path)
