"""Statements that replace a lakelog table's data with one OVERWRITE snapshot: ``INSERT OVERWRITE``,
``TRUNCATE TABLE``, ``ALTER TABLE ... DROP PARTITION``, and ``DELETE`` without a condition or on
partition columns only. This module imports pyflink."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from lakelog.operators.sql.errors import UnsupportedStatementError

if TYPE_CHECKING:
    from lakelog.operators.sql.runner import LakelogSql

__all__ = ["overwrite_rows", "truncate", "drop_partitions"]


def _waiting(where: str) -> UnsupportedStatementError:
    return UnsupportedStatementError(
        f"{where}: overwrite commits are not available in this build of lakelog (Table.overwrite)"
    )


def overwrite_rows(
    sql: LakelogSql,
    path: str,
    table: Any,
    partition: Mapping[str, str],
    options: Mapping[str, str],
    where: str,
) -> Any:
    raise _waiting(where)


def truncate(sql: LakelogSql, path: str, partition: Optional[Mapping[str, str]], where: str) -> Any:
    raise _waiting(where)


def drop_partitions(sql: LakelogSql, path: str, specs: Sequence[Mapping[str, str]], where: str) -> Any:
    raise _waiting(where)
