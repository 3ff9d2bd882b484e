"""lakelog.operators: lakelog tables in PyFlink jobs.

Entry points (each takes a lakelog ``Table`` or a table path; importing this package imports no
pyflink, each name loads its module on first use):

- :func:`sink_to_lakelog`, :func:`sink_table_to_lakelog`: exactly-once writes of a DataStream or a
  Flink Table (:mod:`.sink`), or a batch overwrite (:class:`OverwriteRequest`); :func:`row_type_of`:
  the row type matching a table;
- :func:`read_lakelog`, :func:`read_lakelog_table`: bounded and streaming reads (:mod:`.source`);
- :class:`LookupTable` (no Flink), :func:`lookup_join`, :func:`register_lookup_function`: lookup
  joins (:mod:`.lookup_table`, :mod:`.lookup`);
- :func:`build_compaction`: the dedicated compaction job's graph (:mod:`.compact`);
- :class:`LakelogSql`: Flink SQL over lakelog tables (:mod:`.sql`);
- :func:`flink_environment`: the execution environment every job uses, from ``flink-conf/``
  (:mod:`.flink_env`).

Layout: modules that build Flink graphs or define PyFlink functions import pyflink at the top
(``sink``, ``source``, ``lookup``, ``compact``, ``channel``, ``ticker``, ``flink_env``,
``flink_types``, ``jvm``, ``sql.runner``); the logic they run lives in modules without pyflink
(``sink_blobs``, ``sink_keys``, ``codec``, ``committer``, ``compact_buckets``, ``source_plan``,
``lookup_table``, ``lookup_index``, ``table_ref``, ``sql.lexer``, ``sql.rewrite``), testable
without a JVM. Nothing here imports :mod:`lakelog.jobs`. The design: ``operators/README.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "sink_to_lakelog",
    "sink_table_to_lakelog",
    "OverwriteRequest",
    "row_type_of",
    "read_lakelog",
    "read_lakelog_table",
    "LookupTable",
    "lookup_join",
    "register_lookup_function",
    "build_compaction",
    "LakelogSql",
    "flink_environment",
]

_HOME = {
    "sink_to_lakelog": "sink",
    "sink_table_to_lakelog": "sink",
    "OverwriteRequest": "committer",
    "row_type_of": "flink_types",
    "read_lakelog": "source",
    "read_lakelog_table": "source",
    "LookupTable": "lookup_table",
    "lookup_join": "lookup",
    "register_lookup_function": "lookup",
    "build_compaction": "compact",
    "LakelogSql": "sql.runner",
    "flink_environment": "flink_env",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
