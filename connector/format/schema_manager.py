"""The schema files of a table: list, read and publish ``schema/schema-N`` (atomic create, optimistic
retries for ALTER).
"""

from __future__ import annotations

import re

from lakelog.connector.errors import (
    CommitConflictError,
    CorruptFileError,
    TableNotFoundError,
)
from lakelog.connector.format.fileio import FileIO
from lakelog.connector.format.schema import SchemaExistsError, TableSchema
from lakelog.connector.format.schema_changes import SchemaChange, apply_changes

__all__ = ["SchemaManager"]


# --------------------------------------------------------------------------------------------------
# SchemaManager
# --------------------------------------------------------------------------------------------------

_SCHEMA_FILE = re.compile(r"^schema-(\d+)$")


class SchemaManager:
    """Reads and publishes ``<table>/schema/schema-N``; given a branch's directory
    (``<table>/branch/branch-<b>``), that branch's schemas."""

    MAX_COMMIT_ATTEMPTS = 100

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path
        self.schema_dir = f"{table_path}/schema"
        self._cache: dict[int, TableSchema] = {}

    def schema_path(self, schema_id: int) -> str:
        return f"{self.schema_dir}/schema-{schema_id}"

    def list_ids(self) -> list[int]:
        ids = []
        for name in self.file_io.list_dir(self.schema_dir):
            m = _SCHEMA_FILE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def schema(self, schema_id: int) -> TableSchema:
        """Schema ``schema_id``; a missing file raises :class:`MissingFileError`, a broken one
        :class:`CorruptFileError` (both name the file)."""
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = self.schema_path(schema_id)
        data = self.file_io.read_bytes(path)
        s = TableSchema.from_json(data, path)
        if s.id != schema_id:
            raise CorruptFileError(f"schema file {path} holds schema id {s.id}")
        self._cache[schema_id] = s
        return s

    def latest(self) -> TableSchema | None:
        ids = self.list_ids()
        return self.schema(ids[-1]) if ids else None

    def list_all(self) -> list[TableSchema]:
        return [self.schema(i) for i in self.list_ids()]

    def commit(self, schema: TableSchema) -> bool:
        """Publish ``schema`` as ``schema-<id>``; False if that file already exists. Under the
        catalog's lock when the table has one (a store without conditional creates needs it)."""
        from lakelog.connector.format.lock import catalog_lock, external_lock_held, holding_external
        from lakelog.connector.format.snapshot import DEFAULT_LOCK_TIMEOUT_S

        provider = catalog_lock(self.table_path)
        path, data = self.schema_path(schema.id), schema.to_json().encode("utf-8")
        if provider is None or external_lock_held():
            ok = self.file_io.try_publish(path, data)
        else:
            snapshot_dir = f"{self.table_path.rstrip('/')}/snapshot"
            with holding_external(provider(snapshot_dir, DEFAULT_LOCK_TIMEOUT_S)):
                ok = self.file_io.try_publish(path, data)
        if ok:
            self._cache[schema.id] = schema
        return ok

    def create_table(self, schema: TableSchema) -> TableSchema:
        """Write ``schema`` as ``schema-0``; raises :class:`SchemaExistsError` if the table exists."""
        if self.list_ids():
            raise SchemaExistsError(f"a table already exists at {self.table_path} ({self.schema_dir})")
        first = schema if schema.id == 0 else schema.copy(id=0)
        if not self.commit(first):
            raise SchemaExistsError(f"a table already exists at {self.table_path} ({self.schema_path(0)})")
        return first

    def commit_changes(self, *changes: SchemaChange) -> TableSchema:
        """Apply ``changes`` to the latest schema and publish the result as the next version,
        retrying on top of a concurrent schema change."""
        for _ in range(self.MAX_COMMIT_ATTEMPTS):
            latest = self.latest()
            if latest is None:
                raise TableNotFoundError(
                    f"no table at {self.table_path} (no schema files in {self.schema_dir})"
                )
            names = self.file_io.list_dir(f"{self.table_path}/snapshot")
            has_snapshots = any(n.startswith("snapshot-") for n in names)
            new = apply_changes(latest, list(changes), has_snapshots=has_snapshots)
            if self.commit(new):
                return new
        raise CommitConflictError(
            f"schema change of {self.table_path} lost {self.MAX_COMMIT_ATTEMPTS} races "
            "with concurrent changes"
        )
