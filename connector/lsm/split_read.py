"""Reading splits: merge-on-read of primary-key buckets, projection, exact filtering, schema evolution.

A primary-key bucket holds sorted runs on several levels. The files are cut into *sections*: groups
whose key ranges overlap. A section of one file is read as it is (its retractions dropped); a
larger section is merged (newest sequence number wins): in place, file by file, for a deduplicate
table when it fits (see :mod:`~lakelog.connector.lsm.newest`), else by a sort merge that streams
it in key order. Sections are independent, so a streaming read holds one section at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.connector.errors import CorruptFileError
from lakelog.connector.format.binary_row import deserialize_row
from lakelog.connector.format.data_file import iter_data_file, iter_row_groups_where, read_data_file
from lakelog.connector.format.key_value import SEQUENCE_NUMBER, VALUE_KIND, key_column
from lakelog.connector.format.manifest import DataFileMeta
from lakelog.connector.format.schema import TableSchema
from lakelog.connector.format.schema_evolution import evolve_table, physical_names
from lakelog.connector.format.store import TableStore, file_schema
from lakelog.connector.format.types import DataType
from lakelog.connector.lsm.deletion_vectors import DeletionVectorReader, keep_mask
from lakelog.connector.lsm.kv import (
    DEDUPLICATE,
    MergeFunction,
    comparable_value,
    drop_retractions,
    live_kinds,
)
from lakelog.connector.lsm.merge.engine import merge_function_for
from lakelog.connector.lsm.newest import in_sequence_order, newest_masks
from lakelog.connector.lsm.sort_merge import merge_streams
from lakelog.connector.lsm.split import Split

__all__ = ["referenced_columns", "key_decoder", "sections", "SplitRead"]


def _live(t: pa.Table) -> pa.Table:
    """``t`` without its retractions, when it carries ``_VALUE_KIND`` (see ``kinds``)."""
    return drop_retractions(t) if VALUE_KIND in t.column_names else t


def referenced_columns(expr: Optional[pc.Expression], names: Sequence[str]) -> list[str]:
    """Columns of ``names`` that ``expr`` may refer to (an over-approximation: extra reads are safe)."""
    if expr is None:
        return []
    text = str(expr)
    return [n for n in names if re.search(r"(?<![\w.])" + re.escape(n) + r"(?![\w])", text)]

_READ_THREADS = 4


def key_decoder(key_types: Sequence[DataType]) -> Callable[[bytes], tuple[Any, ...]]:
    """Decodes a file's min/max key (a serialized BinaryRow) into a tuple ordered as Paimon orders
    keys (floats by Java's ``Double.compare``), for :func:`sections`."""
    types = list(key_types)

    def decode(data: bytes) -> tuple[Any, ...]:
        return tuple(comparable_value(v) for v in deserialize_row(data, types))

    return decode


def sections(files: Sequence[DataFileMeta], key_of: Any) -> list[list[DataFileMeta]]:
    """Group files whose [min_key, max_key] ranges overlap (transitively), in key order."""
    items = sorted(((key_of(f.min_key), key_of(f.max_key), f) for f in files), key=lambda t: t[0])
    out: list[list[DataFileMeta]] = []
    current_max: Any = None
    for lo, hi, f in items:
        if out and lo <= current_max:
            out[-1].append(f)
            if hi > current_max:
                current_max = hi
        else:
            out.append([f])
            current_max = hi
    return out


class SplitRead:
    """Reads splits of one table with an optional projection and filter."""

    def __init__(
        self,
        store: TableStore,
        *,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[pc.Expression] = None,
        batch_rows: int = 128 * 1024,
        sequence_number: bool = False,
    ) -> None:
        """``sequence_number``: a primary-key table's rows come with a leading ``_SEQUENCE_NUMBER``
        column, the sequence number of the row each key's merge kept (the largest it merged)."""
        self.store = store
        self.schema: TableSchema = store.schema
        full = self.schema.arrow_schema()
        if columns is not None:
            from lakelog.connector.errors import SchemaError

            unknown = [c for c in columns if full.get_field_index(c) < 0]
            if unknown:
                raise SchemaError(f"unknown column(s) {unknown}; the table has {full.names}")
        self.columns = list(columns) if columns is not None else list(full.names)
        self.filter = filter
        filter_cols = referenced_columns(filter, full.names)
        # Columns read from files: the projection plus whatever the filter needs, in schema order.
        need = set(self.columns) | set(filter_cols)
        self.read_columns = [n for n in full.names if n in need]
        self.sequence_number = sequence_number and store.is_primary_key_table
        # the leading system columns of the output
        self._sys_out = [SEQUENCE_NUMBER] if self.sequence_number else []
        self.output_schema = pa.schema(
            [pa.field(SEQUENCE_NUMBER, pa.int64(), False)] * len(self._sys_out)
            + [full.field(c) for c in self.columns]
        )
        self.key_names = [key_column(k) for k in store.key_names]
        self._key_types = store.key_types
        self._schemas: dict[int, TableSchema] = {self.schema.id: self.schema}
        self._layout = store.file_layout()
        self._arrow_schemas: dict[int, pa.Schema] = {}
        self.batch_rows = batch_rows
        self.merge_function: MergeFunction = merge_function_for(store)
        # engines other than plain deduplicate look at more than the key and sequence number
        # (sequence fields, sequence groups, every aggregated field): merge whole rows, project after
        plain = self.merge_function is DEDUPLICATE
        self.merge_read_columns = self.read_columns if plain else list(full.names)
        self._vectors = DeletionVectorReader()
        self._stats_schema = full
        self._filter_columns = filter_cols
        self._other_branches: dict[str, SplitRead] = {}  # readers of scan.fallback-branch's splits

    # ---- files ------------------------------------------------------------------------------------
    def _file_schema(self, schema_id: int) -> TableSchema:
        s = self._schemas.get(schema_id)
        if s is None:
            s = self.store.schema_manager.schema(schema_id)
            if list(s.primary_keys) != list(self.schema.primary_keys):
                # primary keys never change (no schema change alters them): one file was edited
                files = [self.store.schema_manager.schema_path(i) for i in (schema_id, self.schema.id)]
                raise CorruptFileError(
                    f"schema files {files[0]} and {files[1]} of {self.store.path} declare different "
                    f"primary keys ({list(s.primary_keys)} and {list(self.schema.primary_keys)}); "
                    "primary keys never change, so one of them was edited or replaced: restore it"
                )
            self._schemas[schema_id] = s
        return s

    def _file_arrow_schema(self, schema_id: int) -> pa.Schema:
        """The Arrow schema of files written under schema ``schema_id`` (their columns' types)."""
        s = self._arrow_schemas.get(schema_id)
        if s is None:
            s = file_schema(self.store, self._file_schema(schema_id), field_ids=False)
            self._arrow_schemas[schema_id] = s
        return s

    def read_file(
        self,
        split: Split,
        f: DataFileMeta,
        *,
        system: bool | Sequence[str],
        columns: Optional[Sequence[str]] = None,
        kinds: bool = False,
    ) -> pa.Table:
        """One data file's rows (see :meth:`iter_file`) as one table."""
        whole = 1 << 30
        chunks = list(self.iter_file(split, f, system=system, batch_rows=whole, columns=columns, kinds=kinds))
        return pa.concat_tables(chunks) if len(chunks) != 1 else chunks[0]

    def iter_file(
        self,
        split: Split,
        f: DataFileMeta,
        *,
        system: bool | Sequence[str],
        batch_rows: int = 0,
        columns: Optional[Sequence[str]] = None,
        deleted: Optional[np.ndarray] = None,
        kinds: bool = False,
    ) -> Iterator[pa.Table]:
        """A data file's rows in chunks: system columns (all of them when ``system`` is True, or
        those named) and the read columns (or ``columns``), evolved to the current schema; without
        the rows at the positions ``deleted`` names (its deletion vector). ``kinds``: also
        ``_VALUE_KIND``, last, unless the file's statistics show it holds no retraction."""
        chunks = self._iter_file(split, f, system=system, batch_rows=batch_rows, columns=columns, kinds=kinds)
        if deleted is None or len(deleted) == 0:
            yield from chunks
            return
        start = 0
        for chunk in chunks:
            keep = keep_mask(deleted, start, chunk.num_rows)
            start += chunk.num_rows
            yield chunk if keep is None else chunk.filter(pa.array(keep))

    def _iter_file(
        self,
        split: Split,
        f: DataFileMeta,
        *,
        system: bool | Sequence[str],
        batch_rows: int = 0,
        columns: Optional[Sequence[str]] = None,
        kinds: bool = False,
    ) -> Iterator[pa.Table]:
        path = self.store.data_file_path(split.partition, split.bucket, f.file_name, f.external_path)
        if isinstance(system, bool):
            sys_cols = self.key_names + [SEQUENCE_NUMBER, VALUE_KIND] if system else []
        else:
            sys_cols = list(system)
        rows = batch_rows or self.batch_rows
        wanted = list(columns) if columns is not None else self.read_columns
        types = self._file_arrow_schema(f.schema_id)
        if f.schema_id == self.schema.id:
            if rows >= f.row_count:
                yield read_data_file(
                    path, sys_cols + wanted, expect=f, schema=types, layout=self._layout, kinds=kinds
                )
            else:
                yield from iter_data_file(
                    path, sys_cols + wanted, rows, expect=f, schema=types, layout=self._layout, kinds=kinds
                )
            return
        old = self._file_schema(f.schema_id)
        mapping = physical_names(old, self.schema, wanted)
        phys = [p for p in (mapping[c] for c in wanted) if p is not None]
        for data in iter_data_file(
            path, sys_cols + phys, rows, expect=f, schema=types, layout=self._layout, kinds=kinds
        ):
            values = evolve_table(data.select(phys), old, self.schema, wanted)
            for i, c in enumerate(sys_cols):
                values = values.add_column(i, data.schema.field(c), data.column(c))
            if VALUE_KIND in data.column_names and VALUE_KIND not in sys_cols:
                values = values.append_column(data.schema.field(VALUE_KIND), data.column(VALUE_KIND))
            yield values

    # ---- splits -----------------------------------------------------------------------------------
    def deleted(self, split: Split, f: DataFileMeta) -> Optional[np.ndarray]:
        """The positions of ``f`` that the split's deletion vectors delete (None: not in
        deletion-vector mode)."""
        if split.deletion_vectors is None:
            return None
        return self._vectors.positions(split.deletion_vectors.get(f.file_name))

    def read_split(self, split: Split, *, whole_files: bool = False) -> Iterator[pa.Table]:
        """Tables of the split's rows (chunks of sections), projected and filtered. A file read
        alone (no merge) comes in chunks of ``batch_rows``, or, with ``whole_files`` (the caller
        keeps every row anyway), whole: one read decodes its row groups and columns in parallel.
        A deduplicate section is merged in place (:meth:`_newest_rows`: its rows then come out of
        key order) with ``whole_files``, or when it holds no more rows than the sort merge would
        hold (a chunk of each run); otherwise the sort merge streams it in key order."""
        if split.branch is not None and split.branch != self.store.branch:
            yield from self._read_other_branch(split, whole_files)
            return
        alone = 1 << 62 if whole_files else 0
        if split.deletion_vectors is not None and self.store.is_primary_key_table:
            yield from self._read_without_merge(split, alone)
            return
        if not self.store.is_primary_key_table:
            for f in sorted(split.files, key=lambda f: f.min_sequence_number):
                for chunk in self._iter_filtered(split, f, self.deleted(split, f), alone):
                    yield self._finish(chunk)
            return
        key_types = self._key_types
        for sec in sections(split.files, key_decoder(key_types)):
            if len(sec) == 1:  # merged already: only its retractions to drop
                chunks = self.iter_file(split, sec[0], system=self._sys_out, batch_rows=alone, kinds=True)
                for chunk in chunks:
                    yield self._finish(_live(chunk))
                continue
            # oldest first (top level down, then by sequence): each key's versions then arrive in
            # sequence order, which lets the merge keep its newest without sorting by sequence
            oldest_first = sorted(sec, key=lambda f: (-f.level, f.min_sequence_number))
            # in place when read whole, or when holding the section costs no more than the sort
            # merge's chunk of every run would
            small = sum(f.row_count for f in sec) <= len(sec) * self.batch_rows
            newest = self._newest_rows(split, oldest_first) if whole_files or small else None
            if newest is not None:
                yield from newest
                continue
            streams = [
                self.iter_file(split, f, system=True, columns=self.merge_read_columns) for f in oldest_first
            ]
            for merged in merge_streams(streams, self.key_names, merge=self.merge_function):
                yield self._finish(merged)

    def _newest_rows(self, split: Split, files: Sequence[DataFileMeta]) -> Optional[list[pa.Table]]:
        """A section of a deduplicate table merged in place (read whole): each file's rows that
        hold their key's newest version (see :mod:`~lakelog.connector.lsm.newest`), filtered file
        by file, in no particular key order. Sequence numbers are not read to merge (only to
        output, with ``sequence_number``): the files' order (``files``, oldest first) gives each
        key's versions in order, which their sequence ranges must confirm. A value column that is
        a key column is taken from the key (the same values, read once), and ``_VALUE_KIND`` only
        from files that may hold retractions. None when this does not apply (another merge
        engine, an older schema's file, or files whose sequence ranges leave the order open): the
        caller merges by sorting."""
        if self.merge_function is not DEDUPLICATE or any(f.schema_id != self.schema.id for f in files):
            return None
        if not in_sequence_order(files, key_decoder(self._key_types)):
            return None
        from_key = {c: key_column(c) for c in self.read_columns if key_column(c) in self.key_names}
        values = [c for c in self.read_columns if c not in from_key]
        system = self.key_names + self._sys_out
        tables = [self.read_file(split, f, system=system, columns=values, kinds=True) for f in files]
        out = []
        for t, keep in zip(tables, newest_masks(tables, self.key_names)):
            if VALUE_KIND in t.column_names:
                live = live_kinds(t.column(VALUE_KIND))
                keep &= np.asarray(live.to_numpy(zero_copy_only=False), dtype=bool)
            if not keep.all():
                t = t.filter(pa.array(keep))
            for c, k in from_key.items():
                t = t.append_column(c, t.column(k))
            out.append(self._finish(t))
        return out

    def _read_without_merge(self, split: Split, batch_rows: int) -> Iterator[pa.Table]:
        """Deletion-vector mode: every file above level 0 alone, without its deleted rows. A file
        holding retractions (Paimon may leave them in files it wrote) keeps only its inserts and
        updates.

        Level-0 files (not compacted yet: a snapshot between a commit's APPEND and its COMPACT,
        or the rows of write-only writers) are merged with the files whose key ranges they
        overlap, so that every snapshot reads as what was committed. Paimon's readers skip them
        until a compaction has pushed them up."""
        upper = [f for f in split.files if f.level > 0]
        if len(upper) == len(split.files):
            groups = [[f] for f in sorted(upper, key=lambda f: (f.level, f.file_name))]
        else:
            groups = sections(split.files, key_decoder(self._key_types))
        for sec in groups:
            if all(f.level > 0 for f in sec):
                for f in sec:
                    yield from self._read_alone(split, f, batch_rows)
                continue
            streams = [
                self.iter_file(
                    split, f, system=True, columns=self.merge_read_columns, deleted=self.deleted(split, f)
                )
                for f in sec
            ]
            for merged in merge_streams(streams, self.key_names, merge=self.merge_function):
                yield self._finish(merged)

    def _read_alone(self, split: Split, f: DataFileMeta, batch_rows: int) -> Iterator[pa.Table]:
        for chunk in self._iter_filtered(split, f, self.deleted(split, f), batch_rows, kinds=True):
            yield self._finish(_live(chunk))

    def _iter_filtered(
        self,
        split: Split,
        f: DataFileMeta,
        deleted: Optional[np.ndarray],
        batch_rows: int = 0,
        *,
        kinds: bool = False,
    ) -> Iterator[pa.Table]:
        """A file read alone (no merge), its columns only (and ``kinds`` as for :meth:`iter_file`):
        with a filter, only its row groups whose statistics the filter may match (files of older
        schemas are read whole)."""
        if self.filter is None or f.schema_id != self.schema.id or not self._filter_columns:
            yield from self.iter_file(
                split, f, system=self._sys_out, deleted=deleted, batch_rows=batch_rows, kinds=kinds
            )
            return
        path = self.store.data_file_path(split.partition, split.bucket, f.file_name, f.external_path)
        for start, rows in iter_row_groups_where(
            path, self._sys_out + self.read_columns, self.filter, self._stats_schema, self._filter_columns,
            expect=f, schema=self._file_arrow_schema(f.schema_id), layout=self._layout, kinds=kinds,
        ):
            keep = keep_mask(deleted, start, rows.num_rows) if deleted is not None else None
            yield rows if keep is None else rows.filter(pa.array(keep))

    def _read_other_branch(self, split: Split, whole_files: bool) -> Iterator[pa.Table]:
        """A split of another branch (``scan.fallback-branch``): read as that branch reads it (its
        schema, merge engine and buckets), in this read's columns and types."""
        import dataclasses

        from lakelog.connector.format.branches import branch_location
        from lakelog.connector.format.store import TableStore

        assert split.branch is not None
        read = self._other_branches.get(split.branch)
        if read is None:
            store = TableStore(branch_location(self.store.path, split.branch), self.store.file_io)
            read = SplitRead(
                store, columns=self.columns, filter=self.filter, sequence_number=self.sequence_number
            )
            self._other_branches[split.branch] = read
        for t in read.read_split(dataclasses.replace(split, branch=None), whole_files=whole_files):
            yield t.cast(self.output_schema) if t.schema != self.output_schema else t

    def _finish(self, t: pa.Table) -> pa.Table:
        if self.filter is not None and t.num_rows:
            t = t.filter(self.filter)
        t = t.select(self.output_names)
        return t.cast(self.output_schema) if t.schema != self.output_schema else t

    @property
    def output_names(self) -> list[str]:
        """The output's columns: ``_SEQUENCE_NUMBER`` first when asked for, then the read's."""
        return self._sys_out + self.columns

    def read_splits(self, splits: Sequence[Split]) -> pa.Table:
        """All rows of ``splits`` as one table (splits read in parallel)."""
        if not splits:
            return self.output_schema.empty_table()
        if len(splits) == 1:
            parts = list(self.read_split(splits[0], whole_files=True))
        else:
            with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(splits))) as pool:
                read = pool.map(lambda s: list(self.read_split(s, whole_files=True)), splits)
                parts = [t for ts in read for t in ts]
        parts = [p for p in parts if p.num_rows] or [self.output_schema.empty_table()]
        return pa.concat_tables(parts)

    def to_reader(
        self, splits: Sequence[Split], *, max_chunksize: Optional[int] = None
    ) -> pa.RecordBatchReader:
        """A streaming reader: one split section in memory at a time."""

        def batches() -> Iterator[pa.RecordBatch]:
            for s in splits:
                for t in self.read_split(s):
                    yield from t.to_batches(max_chunksize=max_chunksize)

        return pa.RecordBatchReader.from_batches(self.output_schema, batches())
