"""The SQL wrapper: a ``StreamTableEnvironment`` that understands lakelog tables.

Python cannot register a Flink ``DynamicTableFactory``, so :class:`LakelogSql` handles the statements
that touch lakelog itself and passes everything else to Flink:

* ``CREATE TABLE t (...) WITH ('connector'='lakelog', 'path'='<wh>/<db>.db/<t>', <table options>)``
  and any ``CREATE TABLE`` inside a lakelog catalog: Flink keeps the DDL; the wrapper validates it
  (types, options, keys) and creates the physical table when it does not exist. Bad DDL is dropped
  again and raises before any job runs.
* ``CREATE CATALOG c WITH ('type'='lakelog', 'warehouse'='...')``: an in-memory Flink catalog that
  mirrors the warehouse's databases and tables; ``USE CATALOG c`` and ``CREATE DATABASE`` work.
* Queries (``SELECT``/``WITH``, and the source side of ``INSERT``): every lakelog table after
  ``FROM``/``JOIN`` (with its ``/*+ OPTIONS(...) */`` hint, or ``t$snapshots``, ``t$files``,
  ``t$options``, ``t$audit_log``) is replaced by a temporary view over
  :func:`lakelog.operators.source.read_lakelog_table` (or over the system table's rows); lookup
  joins (``FOR SYSTEM_TIME AS OF``) become ``LATERAL TABLE`` joins (:mod:`.rewrite`).
* ``INSERT INTO <lakelog table> ...``: the query is cast to the table's columns and written with
  :func:`lakelog.operators.sink.sink_table_to_lakelog`; the job runs at once. An ``INSERT INTO`` a
  deduplicating primary-key table drops ``-U`` rows, as Paimon's Flink sink does.
* ``SET 'execution.runtime-mode' = 'batch'|'streaming'`` (and any other ``SET``).

The environment comes from :func:`lakelog.operators.flink_env.flink_environment`; scripts run
through :mod:`lakelog.jobs.sql` (``lakelog sql -f``). This module imports pyflink.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa
from pyflink.common import JobClient
from pyflink.table import EnvironmentSettings, StreamTableEnvironment
from pyflink.table.catalog import ObjectPath
from pyflink.util.java_utils import get_field_value

from lakelog.connector.errors import LakelogError, OptionError, SchemaError
from lakelog.connector.format.fileio import local_path
from lakelog.connector.format.options import validate_options
from lakelog.connector.format.store import TableStore
from lakelog.connector.format.types import parse_type_string, to_arrow_type, type_to_string, with_nullable
from lakelog.connector.table.catalog import Catalog, parse_table_path
from lakelog.connector.table.system_tables import SYSTEM_TABLES, system_table
from lakelog.operators.flink_env import flink_environment, is_remote, load_settings, runtime_mode
from lakelog.operators.flink_types import row_data_type
from lakelog.operators.lookup import register_lookup_function
from lakelog.operators.sink import sink_table_to_lakelog
from lakelog.operators.source import read_lakelog_table
from lakelog.operators.source_plan import table_rows
from lakelog.operators.sql.lexer import (
    hint_options,
    leading_words,
    name_parts,
    significant,
    split_statements,
    string_pairs,
    unquote,
    with_options,
)
from lakelog.operators.sql.rewrite import rewrite_lookup_joins, rewrite_table_refs
from lakelog.operators.table_ref import TableLike, table_path

__all__ = ["LakelogSql"]

_LAKELOG_KEYS = ("connector", "path")


class LakelogSql:
    """A ``StreamTableEnvironment`` that understands lakelog tables (see the module docs)."""

    def __init__(
        self,
        mode: Optional[str] = None,
        *,
        parallelism: Optional[int] = None,
        checkpoint_interval_ms: Optional[int] = None,
        config: Optional[Mapping[str, str]] = None,
    ) -> None:
        """``config``: Flink settings for the environment (default: the Flink configuration
        directory's, see :func:`lakelog.operators.flink_env.load_settings`; ``execution.target:
        remote`` submits to a cluster). ``mode`` defaults to its ``execution.runtime-mode``, else
        streaming; checkpoints default to its ``execution.checkpointing.interval``, else every 2 s."""
        self._config = dict(load_settings() if config is None else config)
        default_mode = self._config.pop("execution.runtime-mode", "streaming")
        if parallelism:  # the table config must not bring the configuration's default back
            self._config["parallelism.default"] = str(parallelism)
        self._parallelism = parallelism
        self._checkpoint_ms = checkpoint_interval_ms
        self.catalogs: dict[str, str] = {}  # lakelog catalog name -> warehouse
        self._ddl_log: list[str] = []
        self._replaying = False
        self._views = 0
        self.mode = ""
        self._make_env(mode or default_mode)

    @property
    def remote(self) -> bool:
        """True when jobs go to a remote cluster (``execution.target: remote``)."""
        return is_remote(self._config)

    # -- environment --
    def _make_env(self, mode: str) -> None:
        mode = runtime_mode({}, mode)
        if mode == self.mode:
            return
        self.mode = mode
        env = flink_environment(
            mode=mode,
            parallelism=self._parallelism,
            checkpoint_interval_ms=self._checkpoint_ms,
            settings=self._config,
        )
        settings = (
            EnvironmentSettings.in_batch_mode()
            if mode == "batch"
            else EnvironmentSettings.in_streaming_mode()
        )
        old = getattr(self, "t_env", None)
        self.env = env
        self.t_env = StreamTableEnvironment.create(env, environment_settings=settings)
        for k, v in self._config.items():
            self.t_env.get_config().set(k, v)
        if old is not None:
            self._replay(old)

    def _replay(self, old: Any) -> None:
        """Carry DDL (catalogs, databases, tables, views) over to a new environment (mode switch)."""
        current = old.get_current_catalog(), old.get_current_database()
        log, self._ddl_log = self._ddl_log, []
        self._replaying = True
        try:
            for stmt in log:
                self.execute(stmt)
        finally:
            self._replaying = False
        self.t_env.use_catalog(current[0])
        self.t_env.use_database(current[1])

    # -- statements --
    def run_script(self, text: str, *, print_results: bool = True, wait: bool = True) -> list[Any]:
        """Run every statement of ``text``. Query results are printed (``print_results``); lakelog
        ``INSERT`` jobs in streaming mode are waited for unless ``wait`` is False (a detached
        submission to a cluster); batch-mode inserts always run to the end."""
        results = []
        for stmt in split_statements(text):
            res = self.execute(stmt)
            if res is None:
                pass
            elif isinstance(res, JobClient):
                job_id = res.get_job_id()
                if wait:
                    res.get_job_execution_result().result()
                if print_results:
                    print(f"job {job_id} {'finished' if wait else 'submitted'}", flush=True)
            elif print_results:
                res.print()
            elif wait and hasattr(res, "wait"):
                res.wait()
            results.append(res)
        return results

    def execute(self, stmt: str) -> Any:
        """Run one statement; returns a Flink ``TableResult`` (or None for statements handled here)."""
        w = leading_words(stmt)
        if not w:
            return None
        head = w[0]
        if head == "SET":
            return self._set(stmt)
        if head in ("CREATE", "DROP", "ALTER", "USE"):
            res = self._ddl(head, w, stmt)
            self._ddl_log.append(stmt)
            return res
        if head in ("INSERT",):
            return self._insert(stmt)
        if head in ("SELECT", "WITH", "VALUES"):
            mark = self._pending_transformations()
            try:
                return self.sql_query(stmt).execute()
            finally:
                # the query's job took the read pipelines that the rewrite built on self.env; left in
                # the environment they would run again inside the next INSERT's job (an unbounded
                # streaming read would keep that job from ever finishing)
                self._drop_transformations(mark)
        return self.t_env.execute_sql(stmt)

    def _transformation_list(self) -> Any:
        return get_field_value(self.env._j_stream_execution_environment, "transformations")

    def _pending_transformations(self) -> int:
        return int(self._transformation_list().size())

    def _drop_transformations(self, mark: int) -> None:
        pending = self._transformation_list()  # a py4j JavaList
        while len(pending) > mark:
            pending.pop()

    def _ddl(self, head: str, w: list[str], stmt: str) -> Any:
        if head == "CREATE" and "CATALOG" in w[1:2]:
            return self._create_catalog(stmt)
        if head == "CREATE" and ("TABLE" in w[1:3]) and not re.search(r"\bAS\s+SELECT\b", stmt, re.I):
            return self._create_table(stmt)
        if head == "CREATE" and "DATABASE" in w[1:2]:
            return self._create_database(stmt)
        return self.t_env.execute_sql(stmt)

    def _set(self, stmt: str) -> None:
        # what follows the SET keyword (a script's comments before it belong to the statement)
        tokens = significant(stmt)
        body = stmt[tokens[0].end :].strip() if tokens else ""
        if not body:
            return None
        if "'" in body:
            kv = string_pairs(body)
        else:
            key, _, value = body.partition("=")
            kv = {key.strip(): value.strip()}
        for k, v in kv.items():
            if k == "execution.runtime-mode":
                self._make_env(v)
            else:
                self._config[k] = v
                self.t_env.get_config().set(k, v)
        return None

    # -- catalogs --
    def _register_catalog(self, name: str, warehouse: str) -> None:
        self.t_env.execute_sql(f"CREATE CATALOG `{name}` WITH ('type'='generic_in_memory')")
        cat = Catalog(warehouse)
        for db in cat.list_databases():
            self.t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS `{name}`.`{db}`")
            for t in cat.list_tables(db):
                ddl = _ddl_for(f"`{name}`.`{db}`.`{t}`", cat.get_table(f"{db}.{t}").store)
                self.t_env.execute_sql(ddl)

    def _create_catalog(self, stmt: str) -> Any:
        opts = with_options(stmt)
        if opts.get("type", "").lower() != "lakelog":
            return self.t_env.execute_sql(stmt)
        m = re.match(r"\s*CREATE\s+CATALOG\s+(?:IF\s+NOT\s+EXISTS\s+)?(`(?:[^`]|``)*`|\w+)", stmt, re.I)
        if m is None:
            raise OptionError(f"cannot parse catalog name in {stmt!r}")
        wh = opts.get("warehouse")
        if not wh:
            raise OptionError(f"lakelog catalog {m.group(1)} needs option 'warehouse'")
        name = unquote(m.group(1))
        wh = Catalog(wh).warehouse  # any file: spelling; creates the directory
        self.catalogs[name] = wh
        self._register_catalog(name, wh)
        return None

    def _create_database(self, stmt: str) -> Any:
        res = self.t_env.execute_sql(stmt)
        cat = self.t_env.get_current_catalog()
        m = re.match(r"\s*CREATE\s+DATABASE\s+(?:IF\s+NOT\s+EXISTS\s+)?([`\w.$]+)", stmt, re.I)
        if m:
            parts = name_parts(m.group(1))
            if len(parts) == 2:
                cat = parts[0]
            if cat in self.catalogs:
                Catalog(self.catalogs[cat]).create_database(parts[-1], exist_ok=True)
        return res

    # -- tables --
    def _resolve(self, parts: Sequence[str]) -> tuple[str, str, str]:
        cat, db = self.t_env.get_current_catalog(), self.t_env.get_current_database()
        if len(parts) == 3:
            return parts[0], parts[1], parts[2]
        if len(parts) == 2:
            return cat, parts[0], parts[1]
        return cat, db, parts[0]

    def _catalog_table(self, cat: str, db: str, name: str) -> Any:
        try:
            c = self.t_env.get_catalog(cat)
            if c is None:
                return None
            return c.get_table(ObjectPath(db, name))
        except Exception:
            return None

    def lakelog_path(self, cat: str, db: str, name: str) -> Optional[str]:
        """The table path when ``cat.db.name`` is a lakelog table, else None."""
        if cat in self.catalogs:
            catalog = Catalog(self.catalogs[cat])
            ident = f"{db}.{name}"
            return catalog.table_path(ident) if catalog.table_exists(ident) else None
        t = self._catalog_table(cat, db, name)
        if t is None:
            return None
        opts: dict[str, str] = {str(k): str(v) for k, v in dict(t.get_options()).items()}
        if opts.get("connector") != "lakelog":
            return None
        given = opts.get("path")
        if not given:
            raise OptionError(f"lakelog table {cat}.{db}.{name} needs option 'path'")
        return local_path(given)

    def _create_table(self, stmt: str) -> Any:
        m = re.match(
            r"\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?((?:(?:`(?:[^`]|``)*`|[\w$]+)\.?)+)",
            stmt,
            re.I,
        )
        if m is None:
            return self.t_env.execute_sql(stmt)
        cat, db, name = self._resolve(name_parts(m.group(1)))
        in_lakelog_catalog = cat in self.catalogs
        opts = with_options(stmt)
        if not in_lakelog_catalog and opts.get("connector") != "lakelog":
            return self.t_env.execute_sql(stmt)
        existed = self._catalog_table(cat, db, name) is not None
        if existed and self._replaying:
            return None  # mirrored from the warehouse when the catalog was registered again
        res = self.t_env.execute_sql(stmt)
        if existed:
            return res
        try:
            self._create_physical(cat, db, name, opts, in_lakelog_catalog)
        except Exception:
            self.t_env.execute_sql(f"DROP TABLE IF EXISTS `{cat}`.`{db}`.`{name}`")
            raise
        return res

    def _create_physical(self, cat: str, db: str, name: str, opts: dict[str, str], in_catalog: bool) -> None:
        where = f"{cat}.{db}.{name}"
        table_opts = {k: v for k, v in opts.items() if k not in _LAKELOG_KEYS}
        validate_options(table_opts)
        if in_catalog:
            wh, pdb = self.catalogs[cat], db
        else:
            path = opts.get("path")
            if not path:
                raise OptionError(
                    f"lakelog table {where} needs option 'path' = '<warehouse>/<db>.db/<table>'"
                )
            wh, pdb, name = parse_table_path(path)
        j_table = self.t_env.from_path(f"`{cat}`.`{db}`.`{_table_name(where)}`")._j_table
        resolved = j_table.getResolvedSchema()
        fields = []
        for c in resolved.getColumns():
            cname = c.getName()
            if not c.isPhysical():
                raise SchemaError(
                    f"column {cname!r} of {where}: computed and metadata columns cannot be stored"
                )
            tstr = c.getDataType().getLogicalType().asSerializableString()
            try:
                dtype = parse_type_string(tstr)
                atype = to_arrow_type(dtype)
            except LakelogError as e:
                raise SchemaError(
                    f"column {cname!r} of {where} has type {tstr} that lakelog cannot store: {e}"
                ) from e
            fields.append(pa.field(cname, atype, dtype.nullable))
        pk_opt = resolved.getPrimaryKey()
        pk = list(pk_opt.get().getColumns()) if pk_opt.isPresent() else []
        table = self._catalog_table(cat, db, _table_name(where))
        partition = list(table._j_catalog_base_table.getPartitionKeys()) if table is not None else []
        missing = [p for p in partition if pk and p not in pk]
        if missing:
            raise SchemaError(f"primary key {pk} of {where} must contain the partition field(s) {missing}")
        catalog = Catalog(wh)
        ident = f"{pdb}.{name}"
        if catalog.table_exists(ident):
            return
        catalog.create_table(
            ident,
            pa.schema(fields),
            primary_key=pk or None,
            partition_by=partition or None,
            options=table_opts,
        )

    # -- queries --
    def _view_for(self, cat: str, db: str, name: str, hint: Optional[str]) -> Optional[str]:
        base, _, system = name.partition("$")
        path = self.lakelog_path(cat, db, base)
        if path is None:
            return None
        options = hint_options(hint)
        if system and system not in SYSTEM_TABLES:
            raise SchemaError(f"unknown system table {name!r}; known: {', '.join(SYSTEM_TABLES)}")
        if system and system != "audit_log":
            table = self._system_table(path, system)
        else:
            table = read_lakelog_table(
                self.t_env,
                path,
                env=self.env,
                mode=self.mode,
                options=options,
                audit_log=system == "audit_log",
            )
        self._views += 1
        vcat, vdb = self.t_env.get_current_catalog(), self.t_env.get_current_database()
        view = f"__lakelog_view_{self._views}"
        qualified = f"`{vcat}`.`{vdb}`.`{view}`"
        self.t_env.create_temporary_view(qualified, table)
        return qualified

    def _system_table(self, path: str, system: str) -> Any:
        data = system_table(TableStore(path), system)
        return self.t_env.from_elements(list(table_rows(data)), row_data_type(data.schema))

    def rewrite_lookup_joins(self, sql: str) -> str:
        """``JOIN <lakelog table> FOR SYSTEM_TIME AS OF ... ON d.k = o.k`` as a ``LATERAL TABLE`` join
        over a table function (see :func:`lakelog.operators.sql.rewrite.rewrite_lookup_joins`). Hint
        options: ``continuous.discovery-interval`` (refresh interval), ``lookup.refresh.async``,
        ``lookup.cache-rows``."""
        if not re.search(r"\bSYSTEM_TIME\b", sql, re.I):
            return sql

        def register(path: str, keys: list[str], hint: Optional[str]) -> tuple[str, list[str]]:
            opts = hint_options(hint)
            self._views += 1
            name = f"__lakelog_lookup_{self._views}"
            cols = register_lookup_function(
                self.t_env,
                name,
                path,
                key_columns=keys,
                refresh_interval=opts.get("continuous.discovery-interval"),
                async_refresh=_hint_option(opts, "lookup.refresh.async", "false", bool),
                cache_rows=_hint_option(opts, "lookup.cache-rows", "10000", int),
            )
            return name, cols

        return rewrite_lookup_joins(sql, lambda parts: self.lakelog_path(*self._resolve(parts)), register)

    def rewrite(self, sql: str) -> str:
        """``sql`` with every lakelog table reference replaced by a view over its source."""
        sql = self.rewrite_lookup_joins(sql)
        return rewrite_table_refs(sql, lambda parts, hint: self._view_for(*self._resolve(parts), hint))

    def sql_query(self, sql: str) -> Any:
        """A Flink ``Table`` for a query that may read lakelog tables."""
        return self.t_env.sql_query(self.rewrite(sql))

    def _insert(self, stmt: str) -> Any:
        m = re.match(
            r"\s*INSERT\s+(INTO|OVERWRITE)\s+((?:(?:`(?:[^`]|``)*`|[\w$]+)\.?)+)\s*(\([^)]*\))?\s*(.*)$",
            stmt,
            re.I | re.S,
        )
        if m is None:
            return self.t_env.execute_sql(self.rewrite(stmt))
        parts = name_parts(m.group(2))
        cat, db, name = self._resolve(parts)
        path = self.lakelog_path(cat, db, name)
        if path is None:
            return self.t_env.execute_sql(self.rewrite(stmt))
        if m.group(1).upper() == "OVERWRITE":
            raise OptionError(f"INSERT OVERWRITE into lakelog table {cat}.{db}.{name} is not supported")
        if m.group(3):
            raise OptionError(
                f"INSERT INTO {name} with a column list is not supported; select all columns in order"
            )
        return self.insert_into(path, self.sql_query(m.group(4)), job_name=f"insert-into-{name}")

    def insert_into(self, target: TableLike, table: Any, *, job_name: str = "lakelog-insert") -> Any:
        """Write Flink ``table`` into ``target`` (a lakelog ``Table`` or a table path) and run the job.

        Batch mode waits for the job; streaming mode returns the ``JobClient``."""
        path = table_path(target)
        store = TableStore(path)
        fields = store.schema.fields
        names = table.get_schema().get_field_names()
        if len(names) != len(fields):
            raise SchemaError(
                f"INSERT INTO {os.path.basename(path)}: the query has {len(names)} columns, "
                f"the table has {len(fields)} ({[f.name for f in fields]})"
            )
        self._views += 1
        src = f"__lakelog_insert_{self._views}"
        self.t_env.create_temporary_view(src, table)
        casts = ", ".join(
            f"CAST(`{q}` AS {type_to_string(with_nullable(f.type, True))}) AS `{f.name}`"
            for q, f in zip(names, fields)
        )
        cast_table = self.t_env.sql_query(f"SELECT {casts} FROM `{src}`")
        # an insert-only query goes in as is, an updating one as its changelog (-U rows dropped for
        # tables that only need the new row, as Paimon's sink does)
        sink_table_to_lakelog(self.t_env, cast_table, path, batch=self.mode == "batch")
        if self.mode == "batch":
            self.env.execute(job_name)
            return None
        return self.env.execute_async(job_name)


def _table_name(where: str) -> str:
    return where.rsplit(".", 1)[-1]


def _ddl_for(qualified: str, store: TableStore) -> str:
    cols = [f"`{f.name}` {type_to_string(f.type)}" for f in store.schema.fields]
    pk = list(store.schema.primary_keys)
    if pk:
        cols.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in pk) + ") NOT ENFORCED")
    part = list(store.schema.partition_keys)
    ddl = f"CREATE TABLE IF NOT EXISTS {qualified} (" + ", ".join(cols) + ")"
    if part:
        ddl += " PARTITIONED BY (" + ", ".join(f"`{k}`" for k in part) + ")"
    return ddl


def _hint_option(opts: dict[str, str], key: str, default: str, kind: type) -> Any:
    """A typed lookup hint option; a malformed value raises :class:`OptionError` naming it."""
    text = opts.get(key, default).strip()
    if kind is bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind is int and re.fullmatch(r"[+-]?\d+", text) and int(text) > 0:
        return int(text)
    allowed = "true or false" if kind is bool else "a whole number greater than 0"
    raise OptionError(f"invalid value {text!r} for lookup option {key!r}: expected {allowed}")
