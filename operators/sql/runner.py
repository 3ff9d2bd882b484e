"""The SQL wrapper: a ``StreamTableEnvironment`` whose statements on lakelog tables and catalogs do
what Flink and Paimon document, durably, or fail before any job starts.

Python cannot register a Flink ``DynamicTableFactory`` or ``Catalog``, so :class:`LakelogSql`
classifies each statement (:mod:`.statements`) and handles those that touch lakelog itself:

* catalogs: ``CREATE CATALOG c WITH ('type'='lakelog', 'warehouse'=...)`` mirrors the warehouse
  into a Flink in-memory catalog (:mod:`.mirror`), kept in step with the disk; databases and
  tables are created, altered and dropped in the warehouse (:mod:`.ddl`), then in the mirror;
* reads: each lakelog table a query names becomes a temporary view over a lakelog source for
  that statement (:mod:`.reads`; system tables, time travel, dynamic options);
* writes: ``INSERT``, ``DELETE``, ``UPDATE``, ``TRUNCATE`` (:mod:`.dml`, :mod:`.overwrite`);
* ``CALL sys.<procedure>`` (:mod:`.procedures`), ``SET``/``RESET`` (Flink settings and Paimon's
  dynamic table options), ``SHOW PARTITIONS``/``PROCEDURES``.

Everything else goes to Flink as it is; a statement of a kind lakelog does not handle that names
a lakelog table is refused (:class:`~.errors.UnsupportedStatementError`) instead of acting on the
mirror only. A runtime-mode switch builds a new environment and replays the session's Flink state
(catalogs, temporary objects, ``USE``), never a lakelog change. The environment comes from
:func:`lakelog.operators.flink_env.flink_environment`; scripts run through :mod:`lakelog.jobs.sql`.
This module imports pyflink.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from py4j.protocol import Py4JJavaError
from pyflink.common import JobClient
from pyflink.java_gateway import get_gateway
from pyflink.table import EnvironmentSettings, StreamTableEnvironment
from pyflink.table.catalog import ObjectPath
from pyflink.util.java_utils import get_field_value

from lakelog.connector.errors import LakelogError, OptionError, TableAlreadyExistsError
from lakelog.connector.format.branches import branch_location, check_branch_name, list_branches
from lakelog.connector.format.fileio import io_for, is_object_store, location, register_io
from lakelog.connector.format.objectstore import S3_OPTION_KEYS
from lakelog.connector.format.options import Duration, validate_options
from lakelog.connector.format.store import TableStore
from lakelog.connector.table.catalog import SYSTEM_DATABASE, Catalog, parse_table_path
from lakelog.connector.table.table import Table
from lakelog.operators.flink_env import (
    flink_environment,
    is_remote,
    load_settings,
    pin_planner_thread,
    runtime_mode,
)
from lakelog.operators.lookup import register_lookup_function, register_route_function, routed_by_column
from lakelog.operators.lookup_shard import routing_buckets, worth_sharding
from lakelog.operators.sink import sink_table_to_lakelog
from lakelog.operators.sql import ddl, dml, reads
from lakelog.operators.sql.errors import SqlError, UnsupportedStatementError, flink_error, message_of
from lakelog.operators.sql.lexer import (
    Token,
    drop_lookup_hints,
    hint_options,
    lookup_hints,
    matching_paren,
    read_name,
    significant,
    split_commas,
    split_statements,
    with_options,
    without_options,
)
from lakelog.operators.sql.mirror import Mirror
from lakelog.operators.sql.procedures import CallContext, call_procedure, parse_call, procedure_names
from lakelog.operators.sql.results import SqlResult
from lakelog.operators.sql.rewrite import LookupCall, ProbeSide, rewrite_lookup_joins, rewrite_table_refs
from lakelog.operators.sql.session import CATALOG_TYPES, CatalogSpec, DynamicOptions
from lakelog.operators.sql.statements import Statement, classify
from lakelog.operators.sql.table_ddl import quote_ident
from lakelog.operators.table_ref import TableLike, table_path

__all__ = ["LakelogSql"]

# settings a live TableEnvironment takes; any other key needs a new environment (taken lazily)
_LIVE_PREFIXES = ("table.", "sql-client.")
# statements whose effect lives in the Flink session only: replayed after a runtime-mode switch
_SESSION_KINDS = {
    "CREATE CATALOG", "DROP CATALOG", "USE CATALOG", "USE", "USE MODULES", "CREATE DATABASE",
    "DROP DATABASE", "ALTER DATABASE", "CREATE TABLE", "DROP TABLE", "ALTER TABLE", "CREATE VIEW",
    "DROP VIEW", "ALTER VIEW", "CREATE FUNCTION", "DROP FUNCTION", "ALTER FUNCTION", "LOAD MODULE",
    "UNLOAD MODULE", "ADD JAR", "REMOVE JAR", "CREATE MODEL", "DROP MODEL", "ALTER MODEL",
}  # fmt: skip


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
        self._default_mode = runtime_mode({}, self._config.pop("execution.runtime-mode", None))
        if parallelism:  # the table config must not bring the configuration's default back
            self._config["parallelism.default"] = str(parallelism)
        self._initial = dict(self._config)
        self._parallelism = parallelism
        self._checkpoint_ms = checkpoint_interval_ms
        self.mirror = Mirror()
        self.dynamic = DynamicOptions()
        self._session_log: list[str] = []
        self._replaying = False
        self._env_stale = False
        self._lake_views: dict[tuple[str, str, str], str] = {}  # temporary views reading lakelog -> query
        self._temporary: set[tuple[str, str, str]] = set()  # temporary tables of other connectors
        # TEMPORARY 'connector' = 'lakelog' tables: their paths (Flink's catalogs do not list them)
        self._temporary_lake: dict[tuple[str, str, str], str] = {}
        self._views: list[str] = []  # internal views of the statement being run
        self._view_count = 0
        self._statement_set: Optional[Any] = None  # a Flink StatementSet while BEGIN STATEMENT SET is open
        self._set_jobs = 0  # lakelog inserts added to the open statement set
        self.mode = ""
        self._make_env(mode or self._default_mode)

    @property
    def remote(self) -> bool:
        """True when jobs go to a remote cluster (``execution.target: remote``)."""
        return is_remote(self._config)

    def setting(self, key: str) -> Optional[str]:
        """The value ``SET`` gave ``key`` in this session (a Flink setting), else None."""
        return self._config.get(key)

    @property
    def catalogs(self) -> dict[str, str]:
        """The session's lakelog catalogs: name -> warehouse."""
        return {n: s.warehouse for n, s in self.mirror.specs.items()}

    # ---- environment -----------------------------------------------------------------------------
    def _make_env(self, mode: str, *, force: bool = False) -> None:
        mode = runtime_mode({}, mode)
        if mode == self.mode and not force:
            return
        if self._statement_set is not None:
            raise SqlError("cannot change settings inside a statement set; END it first")
        old = getattr(self, "t_env", None)
        current = (old.get_current_catalog(), old.get_current_database()) if old is not None else None
        self.mode = mode
        self.env = flink_environment(
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
        self.t_env = StreamTableEnvironment.create(self.env, environment_settings=settings)
        for k, v in self._config.items():
            self.t_env.get_config().set(k, v)
        self._env_stale = False
        if old is not None:
            self._replay(current)

    def _replay(self, current: Optional[tuple[str, str]]) -> None:
        """Rebuild the session's Flink state in a new environment (after a mode or settings change)."""
        log = list(self._session_log)
        self.mirror = Mirror()
        self._temporary.clear()
        self._temporary_lake.clear()
        self._replaying = True  # the log stays as it is: it describes the new session as well
        try:
            for stmt in log:
                self.execute(stmt)
        finally:
            self._replaying = False
        if current is not None:
            self.t_env.use_catalog(current[0])
            self.t_env.use_database(current[1])

    def _transformations(self) -> Any:
        return get_field_value(self.env._j_stream_execution_environment, "transformations")

    def _drop_transformations(self, mark: int) -> None:
        pending = self._transformations()  # a py4j JavaList
        while len(pending) > mark:
            pending.pop()

    # ---- scripts and statements ----------------------------------------------------------------------
    def run_script(self, text: str, *, print_results: bool = True, wait: bool = True) -> list[Any]:
        """Run every statement of ``text``. Results are printed (``print_results``); lakelog
        ``INSERT`` jobs in streaming mode are waited for unless ``wait`` is False (a detached
        submission to a cluster) or ``table.dml-sync`` says so; batch-mode inserts always run to
        the end."""
        results = []
        for stmt in split_statements(text):
            res = self.execute(stmt)
            self.finish(res, print_results=print_results, wait=wait)
            results.append(res)
        return results

    def finish(self, res: Any, *, print_results: bool = True, wait: bool = True) -> None:
        """Wait for (and print) one statement's result as :meth:`run_script` does."""
        sync = str(self._config.get("table.dml-sync", "")).lower() == "true"
        if res is None:
            return
        if isinstance(res, JobClient):
            job_id = res.get_job_id()
            if wait or sync:
                res.get_job_execution_result().result()
            if print_results:
                print(f"job {job_id} {'finished' if wait or sync else 'submitted'}", flush=True)
        elif print_results:
            res.print()
        elif wait and hasattr(res, "wait"):
            res.wait()

    def execute(self, stmt: str) -> Any:
        """Run one statement; returns a Flink ``TableResult``, a :class:`SqlResult`, a ``JobClient``
        (a streaming INSERT) or None."""
        st = classify(stmt)
        if st.kind == "EMPTY":
            return None
        if self._env_stale and st.kind not in ("SET", "RESET"):
            self._make_env(self.mode, force=True)
        mark = len(self._transformations())
        pin_planner_thread(self.t_env)  # another thread's Py4J call may have moved this one's
        try:
            res = self._dispatch(st)
        except SqlError:
            raise
        except LakelogError as e:
            raise _named(e, st) from e
        except Exception as e:
            err = flink_error(st.head, e)
            if err is not None:
                raise err from None
            raise
        finally:
            self._drop_views()
            if self._statement_set is None:
                self._drop_transformations(mark)
        if st.kind in _SESSION_KINDS and not self._replaying and self._is_session_state(st):
            self._session_log.append(st.text)
        return res

    def _is_session_state(self, st: Statement) -> bool:
        """Whether a statement that succeeded changed Flink's session only (a lakelog change is on
        disk and is never replayed; its catalog mirror is)."""
        if st.kind in ("CREATE CATALOG", "DROP CATALOG", "USE CATALOG", "USE", "USE MODULES"):
            return True
        if st.kind in ("LOAD MODULE", "UNLOAD MODULE", "ADD JAR", "REMOVE JAR"):
            return True
        parts = st.target
        cat = self._resolve_catalog(parts, st.kind)
        return st.temporary or not self.mirror.is_lakelog(cat) or st.kind.endswith("VIEW")

    def _resolve_catalog(self, parts: Sequence[str], kind: str) -> str:
        if kind.endswith("DATABASE"):
            return parts[0] if len(parts) == 2 else self.t_env.get_current_catalog()
        return self.resolve(parts)[0] if parts else self.t_env.get_current_catalog()

    def _dispatch(self, st: Statement) -> Any:
        k = st.kind
        if k == "SET":
            return self._set(st)
        if k == "RESET":
            return self._reset(st)
        if k == "QUERY":
            return self.sql_query(st.text).execute()
        if k == "INSERT":
            return self._insert(st)
        if k in ("BEGIN STATEMENT SET", "EXECUTE", "END"):
            return self._statement_set_step(st)
        handler = _HANDLERS.get(k)
        if handler is not None:
            return handler(self, st)
        return self._other(st)

    # ---- names ------------------------------------------------------------------------------------------
    def resolve(self, parts: Sequence[str]) -> tuple[str, str, str]:
        """``[cat.][db.]name`` -> (catalog, database, name) against the session's current ones."""
        cat, db = self.t_env.get_current_catalog(), self.t_env.get_current_database()
        if len(parts) >= 3:
            return parts[-3], parts[-2], parts[-1]
        if len(parts) == 2:
            return cat, parts[0], parts[1]
        return cat, db, parts[0] if parts else ""

    def _catalog_table(self, cat: str, db: str, name: str) -> Any:
        """Flink's catalog table ``cat.db.name``, or None (temporary lakelog tables are in
        ``_temporary_lake``: asking Flink's CatalogManager for them raced its planner)."""
        try:
            c = self.t_env.get_catalog(cat)
            if c is None:
                return None
            return c.get_table(ObjectPath(db, name))
        except Exception:
            return None

    def lakelog_path(self, cat: str, db: str, name: str) -> Optional[str]:
        """The table path when ``cat.db.name`` is a lakelog table (in a lakelog catalog, or a
        ``'connector' = 'lakelog'`` table elsewhere), else None. A temporary table of the session
        shadows a catalog table of the same name, as in Flink."""
        if (cat, db, name) in self._temporary or (cat, db, name) in self._lake_views:
            return None
        if (cat, db, name) in self._temporary_lake:
            return self._temporary_lake[(cat, db, name)]
        if self.mirror.is_lakelog(cat):
            catalog = self.mirror.catalog(cat)
            base, sep, branch = name.partition("$branch_")  # a branch: T$branch_<b>
            try:
                ident = f"{db}.{base}"
                path = catalog.table_path(ident) if catalog.table_exists(ident) else None
                if path is None or not sep:
                    return path
                check_branch_name(branch)
            except LakelogError:
                return None
            if branch not in list_branches(catalog.file_io, path):
                raise SqlError(f"no branch {branch!r} in {cat}.{db}.{base}: CALL sys.create_branch makes one")
            return branch_location(path, branch)
        t = self._catalog_table(cat, db, name)
        if t is None:
            return None
        opts: dict[str, str] = {str(k): str(v) for k, v in dict(t.get_options()).items()}
        if opts.get("connector") != "lakelog":
            return None
        given = opts.get("path")
        if not given:
            raise OptionError(f"lakelog table {cat}.{db}.{name} needs option 'path'")
        return location(given)

    def target(self, st: Statement) -> tuple[str, str, str, Optional[str]]:
        """(catalog, database, name, lakelog path or None) of the table a statement names; the
        mirror is brought up to date with the disk first."""
        cat, db, name = self.resolve(st.target)
        if self.mirror.is_lakelog(cat) and (cat, db, name) not in self._temporary:
            self.mirror.sync_table(self.t_env, cat, db, name)
        return cat, db, name, self.lakelog_path(cat, db, name)

    # ---- views ------------------------------------------------------------------------------------------
    def temporary_view(self, table: Any) -> str:
        """Register ``table`` as an internal view of the running statement; return its quoted name."""
        self._view_count += 1
        name = f"__lakelog_view_{self._view_count}"
        self.t_env.create_temporary_view(name, table)
        self._views.append(name)
        return quote_ident(name)

    def _drop_views(self) -> None:
        for name in self._views:
            self.t_env.drop_temporary_view(name)
        self._views = []

    def expand_view(self, cat: str, db: str, name: str) -> Optional[str]:
        """A temporary view whose query reads lakelog tables, as a subquery read afresh."""
        query = self._lake_views.get((cat, db, name))
        if query is None:
            return None
        return "(" + self.rewrite(query) + ")"

    # ---- queries -----------------------------------------------------------------------------------------
    def rewrite_lookup_joins(self, sql: str) -> str:
        """``JOIN <lakelog table> FOR SYSTEM_TIME AS OF <probe column> ... ON d.k = o.k`` as a
        ``LATERAL TABLE`` join over a table function (see
        :func:`lakelog.operators.sql.rewrite.rewrite_lookup_joins`). Hint options:
        ``continuous.discovery-interval`` (refresh interval), ``lookup.refresh.async``,
        ``lookup.cache`` (``auto``/``full``/``memory``), ``lookup.cache-max-memory-size``,
        ``lookup.cache-max-disk-size``, ``lookup.cache-rows``, ``scan.partitions`` (``max_pt()``
        ...); any other option is refused. The table's own ``lookup.cache*`` options apply where
        the hint sets none.
        A ``LOOKUP`` query hint naming the join's table retries a probe that misses
        (``'retry-predicate' = 'lookup_miss'``, ``'retry-strategy' = 'fixed_delay'``,
        ``'fixed-delay'``, ``'max-attempts'``), as Flink's, and shards it by bucket or not
        (``'shuffle'``, see :meth:`_route_probes`)."""
        if not re.search(r"\bSYSTEM_TIME\b", sql, re.I):
            return sql
        hints = lookup_hints(sql)
        taken: set[str] = set()  # the names of the rewritten joins, which LOOKUP hints may name

        def register(
            path: str, keys: list[str], hint: Optional[str], names: list[str], probe: Optional[ProbeSide]
        ) -> LookupCall:
            where = f"lookup join on {names[0]}"
            opts = hint_options(hint)
            _check_lookup_options(opts, where)
            mine = [h for h in hints if h.get("table") in names]
            taken.update(names)
            attempts, delay, shuffle = _lookup_hint(mine, where)
            routed = self._route_probes(path, keys, probe, shuffle, where)
            self._view_count += 1
            name = f"__lakelog_lookup_{self._view_count}"
            # a unique key (it holds the primary key) is looked up a batch at a time (one ROW per probe)
            pk = list(TableStore(path).schema.primary_keys)
            unique = bool(pk) and set(pk) <= set(keys)
            cols = register_lookup_function(
                self.t_env,
                name,
                path,
                vectorized=unique,
                key_columns=keys,
                refresh_interval=opts.get("continuous.discovery-interval"),
                async_refresh=_hint_option(opts, "lookup.refresh.async", "false", bool),
                cache_rows=_hint_option(opts, "lookup.cache-rows", None, int),
                cache=opts.get("lookup.cache"),
                cache_max_memory=opts.get("lookup.cache-max-memory-size"),
                cache_max_disk=opts.get("lookup.cache-max-disk-size"),
                retry_attempts=attempts,
                retry_delay=delay,
                shards=self._lookup_shards() if routed is not None else 0,
                partitions=_lookup_partitions(opts, where),
            )
            return LookupCall(name, cols, routed, pk[0] if unique else None)

        out = rewrite_lookup_joins(sql, lambda parts: self.lakelog_path(*self.resolve(parts)), register)
        return drop_lookup_hints(out, taken) if taken else out

    def _lookup_shards(self) -> int:
        """The parallelism of a statement's operators: the number of shards of a lookup table."""
        value = self.t_env.get_config().get("table.exec.resource.default-parallelism", "-1")
        if int(value) > 0:
            return int(value)
        return int(self.env.get_parallelism())

    def _route_probes(
        self, path: str, keys: list[str], probe: Optional[ProbeSide], shuffle: Optional[bool], where: str
    ) -> Optional[str]:
        """A view of the probe side with each probe sent to the subtask that holds its key's bucket
        (the dimension sharded by bucket, issue 22), or None where the join is not sharded: turned
        off (``'shuffle' = 'false'``), parallelism 1, batch mode, a probe side that is not one table
        reference, has a watermark or is not insert-only, a key that does not name a bucket; by
        default also a dimension smaller than ``SHARD_BYTES``. Where ``'shuffle' = 'true'`` asks
        for it, each of these but the first two is an error."""
        shards = self._lookup_shards()
        if shuffle is False or shards < 2:
            return None

        def cannot(why: str) -> None:
            if shuffle:
                raise OptionError(f"{where}: LOOKUP 'shuffle' = 'true' cannot be honoured: {why}")

        if self.mode == "batch":  # the adaptive batch scheduler picks each operator's parallelism
            cannot("in batch mode Flink chooses the join's parallelism from the data (streaming only)")
            return None

        if probe is None:
            cannot("the probe side is not a single table reference")
            return None
        store = TableStore(path)
        buckets, why = routing_buckets(store, keys)
        if buckets is None:
            cannot(f"lookups cannot be sharded by bucket: {why}")
            return None
        if shuffle is None and not worth_sharding(store):
            return None  # a small dimension: a copy in every subtask is cheaper than routing
        self._view_count += 1
        route = f"__lakelog_route_{self._view_count}"
        register_route_function(self.t_env, route, path, keys, shards)
        alias = quote_ident(probe.alias)
        query = f"SELECT {route}({', '.join(probe.args)}) AS `__lakelog_shard`, {alias}.* FROM {probe.text}"
        table = self.t_env.sql_query(self.rewrite(query))
        if _has_rowtime(table):
            cannot("the probe side has a watermark (routing would lose its time attribute)")
            return None
        try:
            routed = routed_by_column(self.t_env, table, "__lakelog_shard", shards)
        except Py4JJavaError as e:
            if "update changes" not in str(e):
                raise
            cannot("the probe side is not insert-only")
            return None
        return self.temporary_view(routed)

    def rewrite(self, sql: str) -> str:
        """``sql`` with every lakelog table reference replaced by a view over its source."""
        sql = self.rewrite_lookup_joins(sql)

        def view_for(
            parts: list[str], hint: Optional[str], at: Optional[str], where: list[str]
        ) -> Optional[str]:
            millis = self._time_travel_millis(at) if at is not None else None
            return reads.view_for(self, parts, hint, millis, where)

        return rewrite_table_refs(sql, view_for)

    def _time_travel_millis(self, expr: str) -> int:
        """``FOR SYSTEM_TIME AS OF <expr>`` as epoch milliseconds (local time, as Flink's session)."""
        toks = significant(expr)
        if len(toks) == 2 and toks[0].word == "TIMESTAMP" and toks[1].kind == "str":
            return reads.local_millis(toks[1].text[1:-1], "FOR SYSTEM_TIME AS OF")
        if len(toks) == 1 and toks[0].kind == "str":
            return reads.local_millis(toks[0].text[1:-1], "FOR SYSTEM_TIME AS OF")
        with self.t_env.sql_query(f"SELECT CAST({expr} AS TIMESTAMP(3))").execute().collect() as it:
            value = next(iter(it))[0]
        return int(value.timestamp() * 1000)

    def sql_query(self, sql: str) -> Any:
        """A Flink ``Table`` for a query that may read lakelog tables."""
        try:
            return self.t_env.sql_query(self.rewrite(sql))
        finally:
            self._drop_views()

    # ---- settings --------------------------------------------------------------------------------------
    def _set(self, st: Statement) -> Any:
        m = re.match(r"\s*SET\s*(.*)$", st.text, re.I | re.S)
        body = (m.group(1) if m else "").strip()
        if not body:
            items = sorted({**self._config, **dict(self.dynamic.items())}.items())
            items.append(("execution.runtime-mode", self.mode))
            return SqlResult.table(["key", "value"], sorted(items))
        if "'" in body:
            toks = [t for t in significant(body) if t.kind == "str"]
            if len(toks) != 2:
                raise SqlError(f"cannot read {st.text!r}: expected SET 'key' = 'value'")
            key, value = (t.text[1:-1].replace("''", "'") for t in toks)
        else:
            key, _, value = body.partition("=")
            key, value = key.strip(), value.strip()
        if key == "execution.runtime-mode":
            self._make_env(value)
        elif DynamicOptions.is_table_key(key):
            self.dynamic.set(key, value)
        else:
            self._config[key] = value
            self.t_env.get_config().set(key, value)
            if not key.startswith(_LIVE_PREFIXES):
                self._env_stale = True
        return SqlResult.ok()

    def _reset(self, st: Statement) -> Any:
        strs = [t for t in significant(st.text) if t.kind == "str"]
        names = [t.text for t in significant(st.text)[1:] if t.kind == "id"]
        key = strs[0].text[1:-1] if strs else (names[0] if names else None)
        if key is None:
            self.dynamic.reset()
            self._config = dict(self._initial)
            self._make_env(self._default_mode, force=True)
            return SqlResult.ok()
        if key == "execution.runtime-mode":
            self._make_env(self._default_mode)
        elif DynamicOptions.is_table_key(key):
            self.dynamic.reset(key)
        else:
            if key in self._initial:
                self._config[key] = self._initial[key]
                self.t_env.get_config().set(key, self._initial[key])
            else:
                self._config.pop(key, None)
            self._env_stale = True
        return SqlResult.ok()

    # ---- writes ------------------------------------------------------------------------------------------
    def _insert(self, st: Statement) -> Any:
        spec = dml.parse_insert(st.text)
        cat, db, name, path = self.target(Statement("INSERT", st.text, tuple(spec.target)))
        if path is None:
            if self._statement_set is not None:
                self._statement_set.add_insert_sql(self.rewrite(st.text))
                return None
            return self.t_env.execute_sql(self.rewrite(st.text))
        return dml.insert(self, spec, path, cat, db, name)

    @property
    def in_statement_set(self) -> bool:
        """Whether writes are being added to a statement set (run at ``END``)."""
        return self._statement_set is not None

    def run_pipeline(self, job_name: str) -> Any:
        """Run what the statement added to the environment (a lakelog sink): batch mode waits for
        it, streaming mode returns the ``JobClient``; inside a statement set it waits for END."""
        if self._statement_set is not None:
            self._set_jobs += 1
            return None
        if self.mode == "batch":
            result = self.env.execute(job_name)
            return SqlResult.ok(f"OK (job {result.get_job_id()} finished)")
        return self.env.execute_async(job_name)

    def insert_into(self, target: TableLike, table: Any, *, job_name: str = "lakelog-insert") -> Any:
        """Write Flink ``table`` into ``target`` (a lakelog ``Table`` or a table path) and run the job.

        Batch mode waits for the job; streaming mode returns the ``JobClient``."""
        path = table_path(target)
        spec = dml.InsertSpec([], False, {}, {}, None, "")
        cast = dml._select_for_table(self, TableStore(path), table, spec, f"INSERT INTO {path}")
        try:
            sink_table_to_lakelog(self.t_env, cast, path, batch=self.mode == "batch")
        finally:
            self._drop_views()
        return self.run_pipeline(job_name)

    def _statement_set_step(self, st: Statement) -> Any:
        words = [t.word for t in significant(st.text)]
        if st.kind == "END":
            if self._statement_set is None:
                raise SqlError("END without BEGIN STATEMENT SET")
            stmt_set, self._statement_set = self._statement_set, None
            jobs, self._set_jobs = self._set_jobs, 0
            stmt_set.attach_as_datastream()
            if jobs == 0 and not len(self._transformations()):
                return None
            return self.run_pipeline("lakelog-statement-set")
        if words[:3] in (["BEGIN", "STATEMENT", "SET"], ["EXECUTE", "STATEMENT", "SET"]):
            if self._statement_set is not None:
                raise SqlError("a statement set is already open")
            self._statement_set = self.t_env.create_statement_set()
            self._set_jobs = 0
            rest = re.sub(r"^\s*EXECUTE\s+STATEMENT\s+SET\s+BEGIN\s*", "", st.text, flags=re.I)
            if rest != st.text and rest.strip():
                return self.execute(rest)
            return None
        if words[:1] == ["EXECUTE"] and words[1:2] == ["INSERT"]:
            return self.execute(st.text.split(None, 1)[1])
        return self._other(st)

    # ---- anything else -------------------------------------------------------------------------------
    def _other(self, st: Statement) -> Any:
        """A statement lakelog does not handle: a syntax error as Flink's parser reports it (a typo
        such as ``SELEC`` is no unsupported statement), refused when it names a lakelog table,
        else Flink's."""
        self._check_syntax(st)
        toks = significant(st.text)
        for i, t in enumerate(toks):
            if not t.is_name:
                continue
            parts = [t.name]
            j = i
            while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].is_name:
                parts.append(toks[j + 2].name)
                j += 2
            try:
                lake = self.lakelog_path(*self.resolve(parts)) is not None
            except LakelogError:
                lake = False
            if lake:
                raise UnsupportedStatementError(
                    f"{st.kind} on lakelog table {'.'.join(parts)} is not supported by lakelog"
                )
        return self.t_env.execute_sql(st.text)

    def _check_syntax(self, st: Statement) -> None:
        """Raise :class:`SqlError` with the first line of Flink's parse error when the statement
        is no SQL Flink can parse (only syntax: names are resolved later)."""
        syntax: Optional[str] = None
        try:
            self.t_env._j_tenv.getParser().parse(st.text)
        except Exception as e:  # py4j: the Java exception's class tells a syntax error apart
            java = getattr(e, "java_exception", None)
            name = java.getClass().getName() if java is not None else ""
            if java is not None and name.endswith(("SqlParserException", "CalciteException")):
                syntax = str(java.getMessage()).strip().splitlines()[0]
        if syntax is not None:  # raised here, without the Java error as its context
            raise SqlError(f"{st.head}: syntax error: {syntax}")

    def _pass(self, st: Statement) -> Any:
        """A statement for Flink alone (its queries still read lakelog tables through views)."""
        return self.t_env.execute_sql(
            self.rewrite(st.text) if re.search(r"\bSELECT\b", st.text, re.I) else st.text
        )


def _named(e: LakelogError, st: Statement) -> LakelogError:
    """``e`` with the statement's head in front of its message (same error class)."""
    msg = message_of(e)
    if msg.startswith(st.kind):
        return e
    try:
        return type(e)(f"{st.head}: {msg}")
    except TypeError:  # an error class with another constructor: keep it as it is
        return e


# ---- statement handlers -----------------------------------------------------------------------------------
def _create_catalog(sql: LakelogSql, st: Statement) -> Any:
    opts = with_options(st.text)
    if opts.get("type", "").lower() not in CATALOG_TYPES:
        return sql._pass(st)
    name = st.target[-1] if st.target else ""
    if name in sql.t_env.list_catalogs():
        if "IF NOT EXISTS" in st.flags:
            return SqlResult.ok()
        raise SqlError(f"CREATE CATALOG {name}: a catalog of that name exists")
    sql.mirror.register(sql.t_env, CatalogSpec.of(name, opts))
    return SqlResult.ok()


def _drop_catalog(sql: LakelogSql, st: Statement) -> Any:
    res = sql._pass(st)
    if st.target:
        sql.mirror.unregister(st.target[-1])
    return res


def _use(sql: LakelogSql, st: Statement) -> Any:
    if st.kind == "USE CATALOG":
        res = sql._pass(st)
        if st.target and sql.mirror.is_lakelog(st.target[-1]):
            sql.mirror.sync_catalog(sql.t_env, st.target[-1])
        return res
    parts = st.target
    cat = parts[0] if len(parts) == 2 else sql.t_env.get_current_catalog()
    if sql.mirror.is_lakelog(cat) and parts:
        sql.mirror.sync_database(sql.t_env, cat, parts[-1])
    return sql._pass(st)


def _lake_catalog_of_db(sql: LakelogSql, st: Statement) -> tuple[str, str]:
    parts = st.target
    cat = parts[0] if len(parts) == 2 else sql.t_env.get_current_catalog()
    return cat, parts[-1] if parts else ""


def _create_database(sql: LakelogSql, st: Statement) -> Any:
    cat, db = _lake_catalog_of_db(sql, st)
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)
    words = [t.word for t in significant(st.text)]
    if "COMMENT" in words or "WITH" in words:
        raise UnsupportedStatementError(
            f"CREATE DATABASE {cat}.{db}: a lakelog (filesystem) catalog keeps no database comment or "
            "properties, as Paimon's filesystem catalog"
        )
    catalog = sql.mirror.catalog(cat)
    if catalog.database_exists(db):
        if "IF NOT EXISTS" not in st.flags:
            raise SqlError(f"CREATE DATABASE {cat}.{db}: database {db!r} already exists")
    else:
        catalog.create_database(db)
    sql.mirror.sync_database(sql.t_env, cat, db)
    return SqlResult.ok()


def _drop_database(sql: LakelogSql, st: Statement) -> Any:
    cat, db = _lake_catalog_of_db(sql, st)
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)
    catalog = sql.mirror.catalog(cat)
    if not catalog.database_exists(db):
        if "IF EXISTS" in st.flags:
            return SqlResult.ok()
        raise SqlError(f"DROP DATABASE {cat}.{db}: database {db!r} does not exist")
    if db == sql.t_env.get_current_database() and cat == sql.t_env.get_current_catalog():
        raise SqlError(f"DROP DATABASE {cat}.{db}: cannot drop the current database; USE another first")
    tables = catalog.list_tables(db)
    if tables and "CASCADE" not in st.flags:
        raise SqlError(
            f"DROP DATABASE {cat}.{db}: the database holds tables {tables}; add CASCADE to drop them"
        )
    catalog.drop_database(db, cascade=True)
    sql.mirror.sync_database(sql.t_env, cat, db)
    return SqlResult.ok()


def _refuse_in_lakelog(what: str, why: str) -> Any:
    def handler(sql: LakelogSql, st: Statement) -> Any:
        cat = sql._resolve_catalog(st.target, st.kind)
        if sql.mirror.is_lakelog(cat) and not st.temporary:
            raise UnsupportedStatementError(f"{st.head}: {why}")
        return sql._pass(st)

    handler.__name__ = f"_refuse_{what}"
    return handler


def _parse(sql: LakelogSql, st: Statement) -> Any:
    """Flink's operation for ``st`` (parsed against the mirror; nothing runs)."""
    ops = sql.t_env._j_tenv.getParser().parse(st.text)
    return ops.get(0)


def _create_table(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name = sql.resolve(st.target)
    lake = sql.mirror.is_lakelog(cat)
    opts = with_options(st.text)
    connector = opts.get("connector")
    if connector == "lakelog" and not lake:
        st = _store_options_apart(st, opts)
    if st.temporary and connector != "lakelog":
        res = sql._pass(st)
        sql._temporary.add((cat, db, name))
        return res
    if not lake and connector != "lakelog":
        return sql._pass(st)
    where = f"CREATE TABLE {cat}.{db}.{name}"
    if lake and connector not in (None, "lakelog", "paimon"):
        raise UnsupportedStatementError(
            f"{where}: a lakelog catalog only stores lakelog tables, but the statement sets 'connector' = "
            f"{connector!r}; create a TEMPORARY table for other connectors"
        )
    if lake:
        sql.mirror.sync_database(sql.t_env, cat, db)
        if sql.mirror.sync_table(sql.t_env, cat, db, name):
            if "IF NOT EXISTS" in st.flags:
                return SqlResult.ok()
            raise SqlError(f"{where}: table {db}.{name} already exists in {sql.mirror.specs[cat].warehouse}")
    op = _parse(sql, st)
    spec = ddl.table_spec(op.getCatalogTable(), where)
    if lake:
        options = sql.mirror.specs[cat].with_defaults(spec.options)
        warehouse, pdb, pname = sql.mirror.specs[cat].warehouse, db, name
    else:
        options = spec.options
        path = spec.flink_options.get("path")
        if not path:
            raise SqlError(
                f"{where}: a 'connector' = 'lakelog' table needs option 'path' "
                "= '<warehouse>/<db>.db/<table>'"
            )
        warehouse, pdb, pname = parse_table_path(path)
    validate_options(options)
    catalog = sql.mirror.catalog(cat) if lake else Catalog(warehouse)
    ident = f"{pdb}.{pname}"
    if not catalog.table_exists(ident):
        try:
            catalog.create_table(
                ident,
                spec.fields,
                primary_key=spec.primary_key or None,
                partition_by=spec.partition_keys or None,
                options=options,
                comment=spec.comment,
            )
        except TableAlreadyExistsError:
            if "IF NOT EXISTS" not in st.flags:
                raise
    if lake:
        sql.mirror.sync_table(sql.t_env, cat, db, name)
        return SqlResult.ok()
    res = sql._pass(st)
    if st.temporary:
        sql._temporary.discard((cat, db, name))
        sql._temporary_lake[(cat, db, name)] = location(path)
    return res


def _store_options_apart(st: Statement, opts: Mapping[str, str]) -> Statement:
    """A ``'path'`` table's object-store options (``s3.endpoint``, ``s3.access-key``, ...; Paimon's
    names) configure the file IO of its location in this session, from which the jobs that read
    and write it ship it to their workers; they are no table options, so the statement goes on
    without them: neither the table's schema file nor Flink's catalog (``SHOW CREATE TABLE``) ever
    holds a secret."""
    store = {k: v for k, v in opts.items() if k in S3_OPTION_KEYS}
    if not store:
        return st
    path = opts.get("path")
    if not path or not is_object_store(path):
        raise OptionError(
            f"{st.head}: options {sorted(store)} configure an s3:// location, but 'path' is "
            f"{path!r}"
        )
    register_io(path, io_for(path, store))
    return dataclasses.replace(st, text=without_options(st.text, store))


def _ctas(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name = sql.resolve(st.target)
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)
    where = f"CREATE TABLE {cat}.{db}.{name} AS"
    if st.kind == "REPLACE TABLE AS":
        raise UnsupportedStatementError(
            f"{st.head}: REPLACE TABLE AS is not supported by lakelog (nor by Paimon)"
        )
    if st.temporary:
        raise UnsupportedStatementError(
            f"{where}: a TEMPORARY table in a lakelog catalog cannot be created AS SELECT"
        )
    head, query = _split_as(st.text)
    if sql.mirror.sync_table(sql.t_env, cat, db, name):
        if "IF NOT EXISTS" in st.flags:
            return SqlResult.ok()
        raise SqlError(f"{where}: table {db}.{name} already exists")
    q = sql.sql_query(query)
    schema = q.get_schema()
    cols = ", ".join(
        f"{quote_ident(n)} {t.to_sql_type() if hasattr(t, 'to_sql_type') else t}"
        for n, t in zip(schema.get_field_names(), _type_strings(q))
    )
    ddl_text = _with_columns(head, cols)
    _create_table(sql, classify(ddl_text))
    spec = dml.InsertSpec(list(st.target), False, {}, {}, None, query)
    path = sql.lakelog_path(cat, db, name)
    assert path is not None
    try:
        return dml.insert(sql, spec, path, cat, db, name)
    except BaseException:
        sql.mirror.catalog(cat).drop_table(f"{db}.{name}", missing_ok=True)
        sql.mirror.sync_table(sql.t_env, cat, db, name)
        raise


def _type_strings(table: Any) -> list[str]:
    """The SQL types of a Flink Table's columns."""
    j_schema = table._j_table.getResolvedSchema()
    return [c.getDataType().getLogicalType().asSerializableString() for c in j_schema.getColumns()]


def _split_as(text: str) -> tuple[str, str]:
    """A CTAS statement's DDL head and its query (split at the top-level AS)."""
    toks = significant(text)
    depth = 0
    for i, t in enumerate(toks):
        depth += t.text == "("
        depth -= t.text == ")"
        if (
            depth == 0
            and t.word == "AS"
            and i + 1 < len(toks)
            and toks[i + 1].word in ("SELECT", "WITH", "VALUES", "(")
        ):
            return text[: t.start].strip(), text[toks[i + 1].start :]
    raise SqlError(f"cannot find the query of {text[:80]!r}")


def _with_columns(head: str, cols: str) -> str:
    """The CTAS head with the query's columns: merged into its ``( ... )`` part (which may hold a
    primary key), or added after the table name."""
    toks = significant(head)
    # CREATE TABLE [IF NOT EXISTS] name [(...)] ...
    i = 2
    while i < len(toks) and toks[i].word in ("IF", "NOT", "EXISTS"):
        i += 1
    parts_end = i
    while parts_end + 2 < len(toks) and toks[parts_end + 1].text == "." and toks[parts_end + 2].is_name:
        parts_end += 2
    nxt = parts_end + 1
    if nxt < len(toks) and toks[nxt].text == "(":
        inner_start = toks[nxt].end
        return head[:inner_start] + cols + ", " + head[inner_start:]
    at = toks[parts_end].end
    return head[:at] + f" ({cols})" + head[at:]


def _drop_table(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    if st.temporary or (cat, db, name) in sql._temporary:
        sql._temporary.discard((cat, db, name))
        sql._temporary_lake.pop((cat, db, name), None)
        return sql._pass(st)
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)  # a 'connector' = 'lakelog' reference: the session entry only
    if path is None:
        if "IF EXISTS" in st.flags:
            return SqlResult.ok()
        raise SqlError(f"DROP TABLE {cat}.{db}.{name}: table {db}.{name} does not exist")
    sql.mirror.catalog(cat).drop_table(f"{db}.{name}")
    sql.mirror.sync_table(sql.t_env, cat, db, name)
    return SqlResult.ok()


def _alter_table(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    where = f"ALTER TABLE {cat}.{db}.{name}"
    if (cat, db, name) in sql._temporary or (path is None and not sql.mirror.is_lakelog(cat)):
        return sql._pass(st)
    if path is None:
        if "IF EXISTS" in st.flags:
            return SqlResult.ok()
        raise SqlError(f"{where}: table {db}.{name} does not exist")
    if not sql.mirror.is_lakelog(cat):
        raise UnsupportedStatementError(
            f"{where}: a 'connector' = 'lakelog' table outside a lakelog catalog is a reference; alter "
            "the table through a lakelog catalog (CREATE CATALOG ... WITH ('type'='lakelog', ...))"
        )
    op = _parse(sql, st)
    kind = op.getClass().getSimpleName()
    table = sql.mirror.catalog(cat).get_table(f"{db}.{name}")
    if kind == "AlterTableRenameOperation":
        new = op.getNewTableIdentifier()
        if new.getCatalogName() != cat:
            raise UnsupportedStatementError(f"{where}: RENAME TO another catalog is not supported")
        sql.mirror.catalog(cat).rename_table(f"{db}.{name}", f"{new.getDatabaseName()}.{new.getObjectName()}")
        sql.mirror.sync_table(sql.t_env, cat, db, name)
        sql.mirror.sync_table(sql.t_env, cat, new.getDatabaseName(), new.getObjectName())
        return SqlResult.ok()
    if kind == "DropPartitionsOperation":
        from lakelog.operators.sql.overwrite import drop_partitions

        specs = [dict(s.getPartitionSpec()) for s in op.getPartitionSpecs()]
        return drop_partitions(sql, path, specs, where, if_exists=bool(op.ignoreIfPartitionNotExists()))
    if kind == "AlterTableChangeOperation":
        new_schema = (
            sql.t_env._j_tenv.getCatalogManager().resolveCatalogTable(op.getNewTable()).getResolvedSchema()
        )
        changes = ddl.alter_changes(op, table.store.schema, new_schema, where)
        if changes:
            table.alter(*changes)
        sql.mirror.sync_table(sql.t_env, cat, db, name)
        return SqlResult.ok()
    raise UnsupportedStatementError(
        f"{where}: {op.asSummaryString().splitlines()[0]} is not supported by lakelog"
    )


def _create_view(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name = sql.resolve(st.target)
    if sql.mirror.is_lakelog(cat) and not st.temporary:
        raise UnsupportedStatementError(
            f"{st.head}: a lakelog (filesystem) catalog stores no views, as Paimon's filesystem catalog; "
            "use CREATE TEMPORARY VIEW"
        )
    toks = significant(st.text)
    query_at = next((i for i, t in enumerate(toks) if t.word == "AS"), None)
    if query_at is None or query_at + 1 >= len(toks):
        return sql._pass(st)
    query = st.text[toks[query_at + 1].start :]
    rewritten = sql.rewrite(query)
    reads_lakelog = "__lakelog_view_" in rewritten
    sql._drop_views()
    if not reads_lakelog:
        return sql._pass(st)
    exists = (cat, db, name) in sql._lake_views
    if exists and "IF NOT EXISTS" in st.flags:
        return SqlResult.ok()
    table = sql.sql_query(query)
    if exists:
        sql.t_env.drop_temporary_view(".".join(quote_ident(p) for p in (cat, db, name)))
    sql.t_env.create_temporary_view(".".join(quote_ident(p) for p in (cat, db, name)), table)
    sql._lake_views[(cat, db, name)] = query
    return SqlResult.ok()


def _drop_view(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name = sql.resolve(st.target)
    if sql._lake_views.pop((cat, db, name), None) is not None:
        sql.t_env.drop_temporary_view(".".join(quote_ident(p) for p in (cat, db, name)))
        return SqlResult.ok()
    return sql._pass(st)


def _truncate(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    if path is None:
        return sql._pass(st)
    from lakelog.operators.sql.overwrite import truncate

    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"TRUNCATE TABLE {cat}.{db}.{name}: runs in batch mode only (as in Flink); "
            "SET 'execution.runtime-mode' = 'batch'"
        )
    return truncate(sql, path, None, f"TRUNCATE TABLE {cat}.{db}.{name}")


def _analyze(sql: LakelogSql, st: Statement) -> Any:
    """``ANALYZE TABLE t COMPUTE STATISTICS [FOR COLUMNS c1, c2 | FOR ALL COLUMNS]`` on a lakelog
    table: its statistics computed and committed (``Table.analyze``), as Paimon's catalog keeps
    them. Batch mode only, as in Flink; ``PARTITION (...)`` and ``NOSCAN`` are refused."""
    cat, db, name, path = sql.target(st)
    if path is None:
        return sql._pass(st)
    where = f"ANALYZE TABLE {cat}.{db}.{name}"
    if sql.mode != "batch":
        raise UnsupportedStatementError(
            f"{where}: runs in batch mode only (as in Flink); SET 'execution.runtime-mode' = 'batch'"
        )
    toks = significant(st.text)
    _, i = read_name(toks, 2)
    words = [t.word or t.text for t in toks[i:]]
    if words[:1] == ["PARTITION"]:
        raise UnsupportedStatementError(
            f"{where}: PARTITION is not supported: Paimon's tables keep table statistics, not partition ones"
        )
    if words[:2] != ["COMPUTE", "STATISTICS"]:
        raise SqlError(f"{where}: expected COMPUTE STATISTICS after the table name")
    rest, tail = words[2:], toks[i + 2 :]
    columns: list[str] = []
    all_columns = False
    if rest[-1:] == ["NOSCAN"]:
        raise UnsupportedStatementError(
            f"{where}: NOSCAN is not supported: a merged row count needs a read of the rows"
        )
    if rest == ["FOR", "ALL", "COLUMNS"]:
        all_columns = True
    elif rest[:2] == ["FOR", "COLUMNS"] and len(rest) > 2:
        names = tail[2:]
        if names[-1].text == ",":
            raise SqlError(f"{where}: a column name must follow the last comma")
        for item in split_commas(names):
            if len(item) != 1 or not item[0].is_name:
                got = " ".join(t.text for t in item)
                raise SqlError(f"{where}: expected column names separated by commas, got {got!r}")
            columns.append(item[0].name)
    elif rest:
        raise SqlError(f"{where}: expected FOR COLUMNS c1, c2 or FOR ALL COLUMNS, got {' '.join(rest)!r}")
    sid = Table(TableStore(path), path).analyze(columns or None, all_columns=all_columns)
    return SqlResult.ok("OK" if sid is None else f"OK (snapshot {sid})")


def _delete(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    if path is None:
        return sql._pass(st)
    return dml.delete(sql, st.text, path, cat, db, name)


def _update(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    if path is None:
        return sql._pass(st)
    return dml.update(sql, st.text, path, cat, db, name)


def _call(sql: LakelogSql, st: Statement) -> Any:
    parts, positional, named = parse_call(st.text)
    if len(parts) < 2 or parts[-2] != "sys":
        raise UnsupportedStatementError(f"{st.head}: lakelog's procedures are called as sys.<name>")
    cat = parts[0] if len(parts) == 3 else sql.t_env.get_current_catalog()
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)
    ctx = CallContext(sql.mirror.catalog(cat), cat, sql.t_env.get_current_database(), session=sql)
    res = call_procedure(ctx, parts[-1], positional, named)
    sql.mirror.sync_catalog(sql.t_env, cat)
    return res


def _show_partitions(sql: LakelogSql, st: Statement) -> Any:
    cat, db, name, path = sql.target(st)
    if path is None:
        return sql._pass(st)
    from lakelog.connector.table.partition_specs import matching_partitions
    from lakelog.operators.sql.overwrite import static_partition

    where = f"SHOW PARTITIONS {cat}.{db}.{name}"
    store = TableStore(path)
    snap = store.snapshot_manager.latest()
    seen = sorted({e.partition for e in store.live_entries(snap)}) if snap is not None else []
    keys = list(store.schema.partition_keys)
    if not keys:
        raise SqlError(f"{where}: the table is not partitioned")
    given = _partition_clause(st.text, where)
    if given is not None:  # PARTITION (k = v, ...): the partitions holding those values
        spec = static_partition(store, given, where)
        if len(spec) != len(given):
            raise SqlError(f"{where}: PARTITION {dict(given)} holds a value that is no literal")
        seen = sorted(matching_partitions(store, seen, spec))
    rows = sorted((store.partition_dir(store.partition_values(p)),) for p in seen)
    return SqlResult.table(["partition"], rows)


def _partition_clause(text: str, where: str) -> Optional[dict[str, str]]:
    """The ``PARTITION (k = v, ...)`` after a statement's table name, as column -> literal text;
    None without one."""
    toks = significant(text)
    at = next((i for i, t in enumerate(toks) if t.word == "PARTITION"), None)
    if at is None:
        return None
    end = matching_paren(toks, at + 1)
    if at + 1 >= len(toks) or toks[at + 1].text != "(" or end >= len(toks):
        raise SqlError(f"{where}: expected PARTITION (column = value, ...)")
    out: dict[str, str] = {}
    items = toks[at + 2 : end]
    for part in _split_commas(items):
        if len(part) < 3 or not part[0].is_name or part[1].text != "=":
            found = " ".join(t.text for t in part)
            raise SqlError(f"{where}: expected PARTITION (column = value, ...), found {found!r}")
        out[part[0].name] = " ".join(t.text for t in part[2:])
    return out


def _split_commas(toks: list[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    for t in toks:
        if t.text == ",":
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


def _show_procedures(sql: LakelogSql, st: Statement) -> Any:
    cat = st.target[0] if st.target else sql.t_env.get_current_catalog()
    if not sql.mirror.is_lakelog(cat):
        return sql._pass(st)
    return SqlResult.table(["procedure name"], [(f"sys.{n}",) for n in procedure_names()])


def _synced_pass(sql: LakelogSql, st: Statement) -> Any:
    """SHOW/DESCRIBE: bring the mirror up to date with the warehouse, then let Flink answer."""
    kind = st.kind
    if kind in ("DESCRIBE", "SHOW CREATE TABLE", "SHOW COLUMNS", "SHOW CREATE VIEW") and st.target:
        sql.target(st)
    else:
        cat = st.target[0] if kind == "SHOW DATABASES" and st.target else None
        if cat is None and st.target and kind in ("SHOW TABLES", "SHOW VIEWS", "SHOW FUNCTIONS"):
            cat = st.target[0] if len(st.target) == 2 else sql.t_env.get_current_catalog()
        cat = cat or sql.t_env.get_current_catalog()
        if sql.mirror.is_lakelog(cat):
            sql.mirror.sync_catalog(sql.t_env, cat)
            db = st.target[-1] if kind == "SHOW TABLES" and st.target else sql.t_env.get_current_database()
            if kind == "SHOW TABLES" and db == SYSTEM_DATABASE:  # Paimon's global system tables
                from lakelog.connector.table.global_system_tables import GLOBAL_TABLES

                return SqlResult.table(["table name"], [(n,) for n in sorted(GLOBAL_TABLES)])
    return sql._pass(st)


def _explain(sql: LakelogSql, st: Statement) -> Any:
    return sql.t_env.execute_sql(sql.rewrite(st.text))


def _noop(sql: LakelogSql, st: Statement) -> Any:
    return SqlResult.ok()


_HANDLERS: dict[str, Any] = {
    "CREATE CATALOG": _create_catalog,
    "DROP CATALOG": _drop_catalog,
    "ALTER CATALOG": _refuse_in_lakelog(
        "catalog", "a lakelog catalog's options cannot change; create it again"
    ),
    "USE CATALOG": _use,
    "USE": _use,
    "CREATE DATABASE": _create_database,
    "DROP DATABASE": _drop_database,
    "ALTER DATABASE": _refuse_in_lakelog(
        "database", "a lakelog (filesystem) catalog keeps no database properties"
    ),
    "CREATE TABLE": _create_table,
    "CREATE TABLE AS": _ctas,
    "REPLACE TABLE AS": _ctas,
    "DROP TABLE": _drop_table,
    "ALTER TABLE": _alter_table,
    "CREATE VIEW": _create_view,
    "DROP VIEW": _drop_view,
    "ALTER VIEW": _refuse_in_lakelog("view", "a lakelog catalog stores no views"),
    "CREATE FUNCTION": _refuse_in_lakelog(
        "function", "a lakelog catalog stores no functions; use CREATE TEMPORARY [SYSTEM] FUNCTION"
    ),
    "DROP FUNCTION": _refuse_in_lakelog("function", "a lakelog catalog stores no functions"),
    "ALTER FUNCTION": _refuse_in_lakelog("function", "a lakelog catalog stores no functions"),
    "CREATE MODEL": _refuse_in_lakelog("model", "a lakelog catalog stores no models"),
    "DROP MODEL": _refuse_in_lakelog("model", "a lakelog catalog stores no models"),
    "ALTER MODEL": _refuse_in_lakelog("model", "a lakelog catalog stores no models"),
    "CREATE MATERIALIZED TABLE": _refuse_in_lakelog("mt", "materialized tables are not supported by lakelog"),
    "DROP MATERIALIZED TABLE": _refuse_in_lakelog("mt", "materialized tables are not supported by lakelog"),
    "ALTER MATERIALIZED TABLE": _refuse_in_lakelog("mt", "materialized tables are not supported by lakelog"),
    "TRUNCATE TABLE": _truncate,
    "DELETE": _delete,
    "UPDATE": _update,
    "CALL": _call,
    "ANALYZE TABLE": _analyze,
    "SHOW PARTITIONS": _show_partitions,
    "SHOW PROCEDURES": _show_procedures,
    "DESCRIBE": _synced_pass,
    "SHOW CREATE TABLE": _synced_pass,
    "SHOW CREATE VIEW": _synced_pass,
    "SHOW COLUMNS": _synced_pass,
    "SHOW TABLES": _synced_pass,
    "SHOW VIEWS": _synced_pass,
    "SHOW DATABASES": _synced_pass,
    "SHOW FUNCTIONS": _synced_pass,
    "SHOW CATALOGS": _synced_pass,
    "SHOW CURRENT CATALOG": _synced_pass,
    "SHOW CURRENT DATABASE": _synced_pass,
    "EXPLAIN": _explain,
    "LOAD MODULE": LakelogSql._pass,
    "UNLOAD MODULE": LakelogSql._pass,
    "USE MODULES": LakelogSql._pass,
    "ADD JAR": LakelogSql._pass,
    "REMOVE JAR": LakelogSql._pass,
    "QUIT": _noop,
    "EXIT": _noop,
    "HELP": _noop,
    "CLEAR": _noop,
}


_LOOKUP_OPTIONS = (
    "continuous.discovery-interval",
    "lookup.refresh.async",
    "lookup.cache",
    "lookup.cache-max-memory-size",
    "lookup.cache-max-disk-size",
    "lookup.cache-rows",
    "scan.partitions",
    "lookup.dynamic-partition",
    "lookup.dynamic-partition.refresh-interval",
)
_RETRY_KEYS = ("retry-predicate", "retry-strategy", "fixed-delay", "max-attempts")


def _check_lookup_options(opts: dict[str, str], where: str) -> None:
    """Refuse the ``OPTIONS`` of a lookup join's table that lookups do not take: unknown keys and
    Paimon's keys lakelog lacks (``lookup.cache``, ...) as table options do, and table options that
    have no effect on a lookup."""
    for key, value in opts.items():
        if key in _LOOKUP_OPTIONS:
            continue
        try:
            validate_options({key: value})
        except OptionError as e:
            raise OptionError(f"{where}: {e}") from None
        raise OptionError(
            f"{where}: option {key!r} has no effect on a lakelog lookup join; lookups take "
            f"{', '.join(_LOOKUP_OPTIONS)}"
        )


def _lookup_partitions(opts: dict[str, str], where: str) -> Optional[str]:
    """The partitions a lookup join serves: ``scan.partitions`` (``max_pt()``, ``max_two_pt()``,
    ``k=v`` specs) or the older ``lookup.dynamic-partition`` (``max_pt()`` only). Their
    ``lookup.dynamic-partition.refresh-interval`` is taken and has nothing to do: lakelog checks
    for a new latest partition at every refresh of the dimension."""
    older = opts.get("lookup.dynamic-partition")
    if older is not None and older.strip().lower().replace(" ", "") != "max_pt()":
        raise OptionError(f"{where}: 'lookup.dynamic-partition' = {older!r}: only max_pt() is supported")
    interval = opts.get("lookup.dynamic-partition.refresh-interval")
    if interval is not None:
        Duration.parse(interval)  # a malformed value is an error, as Paimon's
    return opts.get("scan.partitions") or older


def _lookup_hint(hints: list[dict[str, str]], where: str) -> tuple[int, float, Optional[bool]]:
    """(retries after a miss, seconds between them, shuffle) from the ``LOOKUP`` hints naming a
    lookup join's table: Flink's retry keys ((0, 0) without retry) and Paimon's ``'shuffle'`` (None
    when not given). Asynchronous lookups are refused: lakelog's lookups are synchronous."""
    merged: dict[str, str] = {}
    for h in hints:
        merged.update(h)
    merged.pop("table", None)
    shuffle = _hint_option(merged, "shuffle", "", bool) if "shuffle" in merged else None
    merged.pop("shuffle", None)
    asynchronous = {"output-mode", "capacity", "timeout"} & merged.keys()
    if merged.get("async", "false").lower() != "false" or asynchronous:
        raise OptionError(
            f"{where}: asynchronous lookups (LOOKUP 'async', 'output-mode', 'capacity', 'timeout') are "
            "not supported by lakelog; its lookups are synchronous"
        )
    merged.pop("async", None)
    unknown = sorted(k for k in merged if k not in _RETRY_KEYS)
    if unknown:
        raise OptionError(f"{where}: unknown LOOKUP hint option {unknown[0]!r}; known: table, async, "
                          f"shuffle, {', '.join(_RETRY_KEYS)}")
    if not merged:
        return 0, 0.0, shuffle
    missing = [k for k in _RETRY_KEYS if k not in merged]
    if missing:
        needs = ", ".join(_RETRY_KEYS)
        raise OptionError(f"{where}: a LOOKUP retry needs {needs}; missing {', '.join(missing)}")
    for key, only in (("retry-predicate", "lookup_miss"), ("retry-strategy", "fixed_delay")):
        if merged[key].lower() != only:
            raise OptionError(f"{where}: LOOKUP {key!r} = {merged[key]!r}: lakelog retries on {only!r} only")
    delay = Duration.parse(merged["fixed-delay"]).seconds
    return _hint_option(merged, "max-attempts", "1", int), delay, shuffle


def _hint_option(opts: dict[str, str], key: str, default: Optional[str], kind: type) -> Any:
    """A typed lookup hint option (``default`` None: None when it is not set); a malformed value
    raises :class:`OptionError` naming it."""
    given = opts.get(key, default)
    if given is None:
        return None
    text = given.strip()
    if kind is bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind is int and re.fullmatch(r"[+-]?\d+", text) and int(text) > 0:
        return int(text)
    allowed = "true or false" if kind is bool else "a whole number greater than 0"
    raise OptionError(f"invalid value {text!r} for lookup option {key!r}: expected {allowed}")


def _has_rowtime(table: Any) -> bool:
    """Does a Flink ``Table`` have a rowtime (event-time) column?"""
    checks = get_gateway().jvm.org.apache.flink.table.types.logical.utils.LogicalTypeChecks
    columns = table._j_table.getResolvedSchema().getColumns()
    return any(checks.isRowtimeAttribute(c.getDataType().getLogicalType()) for c in columns)
