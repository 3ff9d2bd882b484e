"""The key-value layout of primary-key data files, and Paimon's row kinds.

A primary-key data file holds ``_KEY_<k>`` for each trimmed primary-key field, then
``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` (the row kind) and every table column. Within one file each key
appears once and rows are sorted by key.
"""

from __future__ import annotations

__all__ = ["KEY_PREFIX", "SEQUENCE_NUMBER", "VALUE_KIND", "SYSTEM_FIELD_NAMES", "RowKind", "key_column"]

KEY_PREFIX = "_KEY_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
#: Column names reserved for Paimon's system columns; a table column may not take them.
SYSTEM_FIELD_NAMES = frozenset({SEQUENCE_NUMBER, VALUE_KIND, "_VALUE_COUNT", "_LEVEL", "_ROW_ID"})


class RowKind:
    """Paimon's row kinds, as stored in ``_VALUE_KIND`` and printed in audit logs."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3
    SHORT = ("+I", "-U", "+U", "-D")


def key_column(name: str) -> str:
    return KEY_PREFIX + name
