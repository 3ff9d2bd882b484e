"""Flink SQL over lakelog tables, without a Java connector factory.

Python cannot register a Flink ``DynamicTableFactory``, so :class:`LakelogSql` wraps a
``StreamTableEnvironment`` and handles the statements that touch lakelog itself:

* ``CREATE TABLE t (...) WITH ('connector'='lakelog', 'path'='<wh>/<db>.db/<t>', <table options>)``
  and any ``CREATE TABLE`` inside a lakelog catalog: Flink keeps the DDL; the wrapper validates it
  (types, options, keys) and creates the physical table when it does not exist. Bad DDL is dropped
  again and raises before any job runs.
* ``CREATE CATALOG c WITH ('type'='lakelog', 'warehouse'='...')``: an in-memory Flink catalog that
  mirrors the warehouse's databases and tables; ``USE CATALOG c`` and ``CREATE DATABASE`` work.
* Queries (``SELECT``/``WITH``, and the source side of ``INSERT``): every lakelog table after
  ``FROM``/``JOIN`` (with its ``/*+ OPTIONS(...) */`` hint, or ``t$snapshots``, ``t$files``,
  ``t$options``, ``t$audit_log``) is replaced by a temporary view over
  :func:`lakelog.operators.source.read_lakelog_table` (or over the system table's rows).
* ``INSERT INTO <lakelog table> ...``: the query is cast to the table's columns and written with
  :func:`lakelog.operators.sink.sink_to_lakelog`; the job runs at once.
* ``SET 'execution.runtime-mode' = 'batch'|'streaming'`` (and any other ``SET``); everything else
  goes to Flink unchanged.

Run a script: ``lakelog sql -f script.sql`` (= ``python -m lakelog.jobs.sql -f script.sql``) on a local
MiniCluster, ``... --remote [host:port]`` on a running cluster, or ``flink run -py jobs/sql.py -f
script.sql`` through Flink's CLI. Settings come from the Flink configuration directory
(``--conf-dir``, ``$FLINK_CONF_DIR`` or the repository's ``flink-conf/``; see
:mod:`lakelog.jobs.flink_env`). An ``INSERT INTO`` a deduplicating primary-key table drops ``-U`` rows,
as Paimon's Flink sink does.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa

try:
    import lakelog
    from lakelog.connector.errors import LakelogError, OptionError, SchemaError
    from lakelog.connector.format.fileio import local_path
    from lakelog.connector.table.catalog import parse_table_path
except ImportError as _e:  # pragma: no cover - run as a file by an interpreter without lakelog
    if __name__ != "__main__":
        raise
    raise SystemExit(
        f"{sys.executable} cannot import lakelog ({_e}); install it: pip install -e '<repo>[flink]'"
    ) from _e

__all__ = ["split_statements", "LakelogSql", "main"]

_LAKELOG_KEYS = ("connector", "path")


# ---- lexing -------------------------------------------------------------------------------------------
@dataclass
class _Tok:
    kind: str  # 'id', 'qid' (backticked), 'str', 'num', 'hint', 'sym', 'ws', 'comment'
    text: str
    start: int
    end: int


_LEX = re.compile(
    r"(?P<ws>\s+)|(?P<hint>/\*\+.*?\*/)|(?P<comment>/\*.*?\*/|--[^\n]*)|(?P<str>'(?:[^']|'')*')"
    r"|(?P<dq>\"(?:[^\"]|\"\")*\")|(?P<qid>`(?:[^`]|``)*`)|(?P<id>[A-Za-z_][\w$]*)|(?P<num>\d+(?:\.\d*)?)"
    r"|(?P<sym>.)",
    re.S,
)


def _lex(text: str) -> Iterator[_Tok]:
    pos = 0
    while pos < len(text):
        m = _LEX.match(text, pos)
        if m is None:  # an unterminated quote or comment: the rest is one token
            yield _Tok("sym", text[pos:], pos, len(text))
            return
        kind = m.lastgroup or "sym"
        yield _Tok("str" if kind == "dq" else kind, m.group(), pos, m.end())
        pos = m.end()


def split_statements(text: str) -> list[str]:
    """Statements of a script, split on ``;`` outside quotes, identifiers and comments."""
    out: list[str] = []
    start = 0
    for tok in _lex(text):
        if tok.kind == "sym" and tok.text == ";":
            out.append(text[start : tok.start])
            start = tok.end
    out.append(text[start:])
    cleaned = []
    for s in out:
        if any(t.kind not in ("ws", "comment") for t in _lex(s)):
            cleaned.append(s.strip())
    return cleaned


def _words(stmt: str) -> list[str]:
    return [t.text.upper() for t in _lex(stmt) if t.kind == "id"][:4]


def _unquote(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("``", "`")
    return tok


def _hint_option(opts: dict[str, str], key: str, default: str, kind: type) -> Any:
    """A typed lookup hint option; a malformed value raises :class:`OptionError` naming it."""
    text = opts.get(key, default).strip()
    if kind is bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind is int and re.fullmatch(r"[+-]?\d+", text) and int(text) > 0:
        return int(text)
    allowed = "true or false" if kind is bool else "a whole number greater than 0"
    raise OptionError(f"invalid value {text!r} for lookup option {key!r}: expected {allowed}")


def _parse_kv_list(text: str) -> dict[str, str]:
    """``'k' = 'v', 'k2' = 'v2'`` -> dict."""
    strs = [t.text for t in _lex(text) if t.kind == "str"]
    if len(strs) % 2:
        raise OptionError(f"cannot parse options {text!r}: expected 'key' = 'value' pairs")
    vals = [s[1:-1].replace("''", "'") for s in strs]
    return dict(zip(vals[0::2], vals[1::2]))


def _with_clause(stmt: str) -> dict[str, str]:
    m = re.search(r"\bWITH\s*\((.*)\)\s*$", stmt, re.I | re.S)
    return _parse_kv_list(m.group(1)) if m else {}


_CLAUSE_END = {
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "ON",
    "UNION",
    "SELECT",
    "WINDOW",
    "EXCEPT",
    "INTERSECT",
    "MATCH_RECOGNIZE",
    "USING",
    "OFFSET",
    "FETCH",
    "QUALIFY",
}
_NOT_ALIAS = _CLAUSE_END | {
    "JOIN",
    "LEFT",
    "RIGHT",
    "FULL",
    "INNER",
    "CROSS",
    "OUTER",
    "AS",
    "FOR",
    "NATURAL",
}


# ---- the wrapper -----------------------------------------------------------------------------------------
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
        """``config``: Flink settings for the environment (e.g. from
        :func:`lakelog.jobs.flink_env.load_settings`; ``execution.target: remote`` submits to a
        cluster). ``mode`` defaults to its ``execution.runtime-mode``, else streaming; checkpoints
        default to its ``execution.checkpointing.interval``, else every 2 s."""
        self._config = dict(config or {})
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
        from lakelog.jobs.flink_env import is_remote

        return is_remote(self._config)

    # -- environment --
    def _make_env(self, mode: str) -> None:
        from pyflink.datastream import RuntimeExecutionMode
        from pyflink.table import EnvironmentSettings, StreamTableEnvironment

        from lakelog.jobs.flink_env import execution_environment

        mode = mode.lower()
        if mode not in ("streaming", "batch"):
            raise OptionError(f"'execution.runtime-mode' must be 'streaming' or 'batch', not {mode!r}")
        if mode == self.mode:
            return
        self.mode = mode
        env = execution_environment({"python.executable": sys.executable, **self._config})
        env.set_runtime_mode(
            RuntimeExecutionMode.BATCH if mode == "batch" else RuntimeExecutionMode.STREAMING
        )
        if self._parallelism:
            env.set_parallelism(self._parallelism)
        if mode == "streaming" and (
            self._checkpoint_ms or "execution.checkpointing.interval" not in self._config
        ):
            env.enable_checkpointing(self._checkpoint_ms or 2000)
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
            elif _is_job_client(res):
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
        w = _words(stmt)
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
        from pyflink.util.java_utils import get_field_value

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
        m = re.match(r"\s*SET\s+(.*)$", stmt, re.I | re.S)
        body = (m.group(1) if m else "").strip()
        if not body:
            return None
        if "'" in body:
            kv = _parse_kv_list(body)
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
        cat = lakelog.Catalog(warehouse)
        for db in cat.list_databases():
            self.t_env.execute_sql(f"CREATE DATABASE IF NOT EXISTS `{name}`.`{db}`")
            for t in cat.list_tables(db):
                ddl = _ddl_for(f"`{name}`.`{db}`.`{t}`", cat.get_table(f"{db}.{t}").store)
                self.t_env.execute_sql(ddl)

    def _create_catalog(self, stmt: str) -> Any:
        opts = _with_clause(stmt)
        if opts.get("type", "").lower() != "lakelog":
            return self.t_env.execute_sql(stmt)
        m = re.match(r"\s*CREATE\s+CATALOG\s+(?:IF\s+NOT\s+EXISTS\s+)?(`(?:[^`]|``)*`|\w+)", stmt, re.I)
        if m is None:
            raise OptionError(f"cannot parse catalog name in {stmt!r}")
        wh = opts.get("warehouse")
        if not wh:
            raise OptionError(f"lakelog catalog {m.group(1)} needs option 'warehouse'")
        name = _unquote(m.group(1))
        wh = lakelog.Catalog(wh).warehouse  # any file: spelling; creates the directory
        self.catalogs[name] = wh
        self._register_catalog(name, wh)
        return None

    def _create_database(self, stmt: str) -> Any:
        res = self.t_env.execute_sql(stmt)
        cat = self.t_env.get_current_catalog()
        m = re.match(r"\s*CREATE\s+DATABASE\s+(?:IF\s+NOT\s+EXISTS\s+)?([`\w.$]+)", stmt, re.I)
        if m:
            parts = [_unquote(p) for p in _split_path(m.group(1))]
            if len(parts) == 2:
                cat = parts[0]
            if cat in self.catalogs:
                        lakelog.Catalog(self.catalogs[cat]).create_database(parts[-1], exist_ok=True)
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
        from pyflink.table.catalog import ObjectPath

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
            catalog = lakelog.Catalog(self.catalogs[cat])
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
        cat, db, name = self._resolve([_unquote(p) for p in _split_path(m.group(1))])
        in_lakelog_catalog = cat in self.catalogs
        opts = _with_clause(stmt)
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
        import lakelog
        from lakelog.connector.format.options import validate_options
        from lakelog.connector.format.types import parse_type_string, to_arrow_type

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
        catalog = lakelog.Catalog(wh)
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
        options = {}
        if hint:
            m = re.search(r"OPTIONS\s*\((.*)\)", hint, re.I | re.S)
            if m:
                options = _parse_kv_list(m.group(1))
        from lakelog.connector.table.system_tables import SYSTEM_TABLES

        if system and system not in SYSTEM_TABLES:
            raise SchemaError(f"unknown system table {name!r}; known: {', '.join(SYSTEM_TABLES)}")
        if system and system != "audit_log":
            table = self._system_table(path, system)
        else:
            from lakelog.operators.source import read_lakelog_table

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
        from lakelog.connector.format.store import TableStore
        from lakelog.connector.table.system_tables import system_table

        return self._from_arrow(system_table(TableStore(path), system))

    def _from_arrow(self, data: pa.Table) -> Any:
        from pyflink.table import DataTypes

        from lakelog.operators.scan_ops import table_rows

        def dt(t: pa.DataType) -> Any:
            if pa.types.is_int32(t):
                return DataTypes.INT()
            if pa.types.is_integer(t):
                return DataTypes.BIGINT()
            if pa.types.is_timestamp(t):
                return DataTypes.TIMESTAMP(3)
            return DataTypes.STRING()

        schema = DataTypes.ROW([DataTypes.FIELD(f.name, dt(f.type)) for f in data.schema])
        rows = list(table_rows(data))
        return self.t_env.from_elements(rows, schema)

    def rewrite_lookup_joins(self, sql: str) -> str:
        """``JOIN <lakelog table> FOR SYSTEM_TIME AS OF ... ON d.k = o.k`` as a ``LATERAL TABLE`` join
        over a table function (see :func:`lakelog.operators.lookup.rewrite_lookup_joins`). Hint
        options: ``continuous.discovery-interval`` (refresh interval), ``lookup.refresh.async``,
        ``lookup.cache-rows``."""
        if not re.search(r"\bSYSTEM_TIME\b", sql, re.I):
            return sql
        from lakelog.operators.lookup import register_lookup_function, rewrite_lookup_joins

        def register(path: str, keys: list[str], hint: Optional[str]) -> tuple[str, list[str]]:
            m = re.search(r"OPTIONS\s*\((.*)\)", hint or "", re.I | re.S)
            opts = _parse_kv_list(m.group(1)) if m else {}
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
        toks = list(_lex(sql))
        out: list[str] = []
        i = 0
        depth = 0
        clause: dict[int, str] = {}
        expect = False
        while i < len(toks):
            tok = toks[i]
            up = tok.text.upper() if tok.kind == "id" else ""
            if tok.kind == "sym" and tok.text == "(":
                depth += 1
                expect = False
            elif tok.kind == "sym" and tok.text == ")":
                clause.pop(depth, None)
                depth -= 1
            elif tok.kind == "sym" and tok.text == ",":
                expect = clause.get(depth) == "FROM"
                out.append(tok.text)
                i += 1
                continue
            elif up in ("FROM", "JOIN"):
                clause[depth] = "FROM"
                expect = True
                out.append(tok.text)
                i += 1
                continue
            elif up in _CLAUSE_END:
                clause[depth] = up
                expect = False
            if expect and tok.kind in ("id", "qid") and up not in ("LATERAL", "TABLE", "UNNEST"):
                j = i
                parts = [_unquote(toks[j].text)]
                while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind in ("id", "qid"):
                    parts.append(_unquote(toks[j + 2].text))
                    j += 2
                k = j + 1
                while k < len(toks) and toks[k].kind in ("ws", "comment"):
                    k += 1
                hint = toks[k].text if k < len(toks) and toks[k].kind == "hint" else None
                view = self._view_for(*self._resolve(parts), hint)
                if view is not None:
                    end = k if hint else j
                    n = end + 1
                    while n < len(toks) and toks[n].kind in ("ws", "comment"):
                        n += 1
                    has_alias = n < len(toks) and (
                        toks[n].kind == "qid"
                        or (toks[n].kind == "id" and toks[n].text.upper() not in _NOT_ALIAS)
                        or toks[n].text.upper() == "AS"
                    )
                    alias = "" if has_alias else " AS `" + parts[-1].replace("`", "``") + "`"
                    out.append(view + alias)
                    i = end + 1
                    expect = False
                    continue
                expect = False
            elif tok.kind not in ("ws", "comment", "hint"):
                expect = expect and tok.kind == "sym" and tok.text == "("
            out.append(tok.text)
            i += 1
        return "".join(out)

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
        parts = [_unquote(p) for p in _split_path(m.group(2))]
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

    def insert_into(self, table_path: str, table: Any, *, job_name: str = "lakelog-insert") -> Any:
        """Write Flink ``table`` into the lakelog table at ``table_path`` and run the job.

        Batch mode waits for the job; streaming mode returns the ``JobClient``."""
        from lakelog.connector.format.store import TableStore
        from lakelog.connector.format.types import type_to_string, with_nullable

        try:
            from lakelog.operators.sink import sink_table_to_lakelog
        except ImportError as e:  # pragma: no cover
            raise LakelogError(f"INSERT INTO lakelog tables needs lakelog.operators.sink: {e}") from e
        store = TableStore(table_path)
        target = store.schema.fields
        names = table.get_schema().get_field_names()
        if len(names) != len(target):
            raise SchemaError(
                f"INSERT INTO {os.path.basename(table_path)}: the query has {len(names)} columns, "
                f"the table has {len(target)} ({[f.name for f in target]})"
            )
        self._views += 1
        src = f"__lakelog_insert_{self._views}"
        self.t_env.create_temporary_view(src, table)
        casts = ", ".join(
            f"CAST(`{q}` AS {type_to_string(with_nullable(f.type, True))}) AS `{f.name}`"
            for q, f in zip(names, target)
        )
        cast_table = self.t_env.sql_query(f"SELECT {casts} FROM `{src}`")
        # an insert-only query goes in as is, an updating one as its changelog (-U rows dropped for
        # tables that only need the new row, as Paimon's sink does)
        sink_table_to_lakelog(self.t_env, cast_table, table_path, batch=self.mode == "batch")
        if self.mode == "batch":
            self.env.execute(job_name)
            return None
        return self.env.execute_async(job_name)


def _is_job_client(obj: Any) -> bool:
    from pyflink.common import JobClient

    return isinstance(obj, JobClient)


def _split_path(text: str) -> list[str]:
    return [t.text for t in _lex(text) if t.kind in ("id", "qid")]


def _table_name(where: str) -> str:
    return where.rsplit(".", 1)[-1]


def _ddl_for(qualified: str, store: Any) -> str:
    from lakelog.connector.format.types import type_to_string

    cols = [f"`{f.name}` {type_to_string(f.type)}" for f in store.schema.fields]
    pk = list(store.schema.primary_keys)
    if pk:
        cols.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in pk) + ") NOT ENFORCED")
    part = list(store.schema.partition_keys)
    ddl = f"CREATE TABLE IF NOT EXISTS {qualified} (" + ", ".join(cols) + ")"
    if part:
        ddl += " PARTITIONED BY (" + ", ".join(f"`{k}`" for k in part) + ")"
    return ddl


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``lakelog sql -f script.sql [--mode batch|streaming] [--parallelism N] [--conf-dir DIR]
    [--remote [HOST:PORT]] [--detached]``."""
    from lakelog.jobs.flink_env import is_remote, load_settings

    p = argparse.ArgumentParser(prog="lakelog sql", description="Run a Flink SQL script over lakelog tables")
    p.add_argument("-f", "--file", required=True, help="SQL script (statements separated by ';')")
    p.add_argument(
        "--mode",
        default=None,
        choices=["streaming", "batch"],
        help="runtime mode (default: execution.runtime-mode of the Flink configuration)",
    )
    p.add_argument("--parallelism", type=int, default=None)
    p.add_argument("--checkpoint-interval-ms", type=int, default=None)
    p.add_argument(
        "--conf-dir",
        default=None,
        help="Flink configuration directory (default: $FLINK_CONF_DIR, else the repository's flink-conf/)",
    )
    p.add_argument(
        "--remote",
        nargs="?",
        const=True,
        default=None,
        metavar="HOST:PORT",
        help="submit to a running cluster (default: rest.address:rest.port of the configuration)",
    )
    p.add_argument(
        "--detached",
        action="store_true",
        help="with a remote cluster: submit streaming INSERT jobs and exit without waiting",
    )
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--"]:  # `flink run -py jobs/sql.py -- -f x.sql` may pass the separator on
        args_in = args_in[1:]
    args = p.parse_args(args_in)
    try:
        settings = load_settings(args.conf_dir, remote=args.remote)
        if args.detached and not is_remote(settings):
            raise OptionError("--detached needs a remote cluster (--remote or execution.target: remote)")
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
        sql = LakelogSql(
            args.mode,
            parallelism=args.parallelism,
            checkpoint_interval_ms=args.checkpoint_interval_ms,
            config=settings,
        )
        sql.run_script(text, wait=not args.detached)
    except (LakelogError, OSError) as e:
        print(f"lakelog sql: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if not __package__:
        # run as a file (`flink run -py jobs/sql.py`, `python jobs/sql.py`): use the installed package's
        # module, so that nothing the job ships to Python workers refers to this __main__ copy
        from lakelog.jobs.sql import main as _installed_main

        sys.exit(_installed_main())
    sys.exit(main())
