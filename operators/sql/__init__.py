"""Flink SQL over lakelog tables.

- :mod:`.lexer`: the one SQL tokenizer, statement splitting and option lists (no pyflink);
- :mod:`.statements`: each statement's kind and target (no pyflink);
- :mod:`.rewrite`: table references, time travel and lookup joins rewritten at token offsets
  (no pyflink);
- :mod:`.runner`: :class:`LakelogSql`, the ``StreamTableEnvironment`` wrapper that runs statements
  (imports pyflink; loaded on first use of the name here), with :mod:`.mirror` (lakelog catalogs),
  :mod:`.ddl`, :mod:`.reads`, :mod:`.dml`, :mod:`.overwrite` and :mod:`.procedures`.

Scripts run through :mod:`lakelog.jobs.sql` (``lakelog sql -f``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LakelogSql", "split_statements"]


def __getattr__(name: str) -> Any:
    if name == "LakelogSql":
        from lakelog.operators.sql.runner import LakelogSql

        return LakelogSql
    if name == "split_statements":
        from lakelog.operators.sql.lexer import split_statements

        return split_statements
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
