"""What a SQL session knows beside Flink, without Flink: its lakelog catalogs and the table options
set with ``SET`` (Paimon's dynamic options). No pyflink.

* :class:`CatalogSpec`: a ``CREATE CATALOG c WITH ('type'='lakelog', ...)``'s options, checked:
  ``warehouse`` (any ``file:`` spelling), ``default-database``, ``metastore`` (``filesystem``, or
  ``jdbc`` with ``uri``, ``jdbc.*``, ``catalog-key``, ``lock.enabled`` and the other options of
  :mod:`lakelog.connector.catalog.options`, which go to :class:`lakelog.Catalog` as they are),
  ``table-default.<key>`` (copied into every table created in the catalog unless the DDL sets the
  key, as Paimon's catalog does), ``cache-*`` (lakelog keeps no catalog cache: no effect).
* :class:`DynamicOptions`: Paimon's dynamic options: ``SET '<table option>' = 'v'`` applies to
  every lakelog table the session reads or writes, ``SET 'paimon.<catalog>.<db>.<table>.<option>'
  = 'v'`` (each part may be ``*``) to matching tables, and wins over the global one; a statement's
  ``/*+ OPTIONS(...) */`` hint wins over both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from lakelog.connector.catalog.options import JDBC_OPTIONS, JDBC_PREFIX
from lakelog.connector.errors import OptionError
from lakelog.connector.format.fileio import location
from lakelog.connector.format.objectstore import S3_OPTION_KEYS
from lakelog.connector.format.options import find_option, validate_options

__all__ = ["CatalogSpec", "DynamicOptions", "CATALOG_TYPES", "TABLE_DEFAULT_PREFIX"]

CATALOG_TYPES = ("lakelog", "paimon")
TABLE_DEFAULT_PREFIX = "table-default."
_NO_EFFECT = ("cache-enabled", "cache.expiration-interval", "cache.partition.max-num",
              "cache.manifest.small-file-memory", "cache.manifest.small-file-threshold",
              "cache.manifest.max-memory", "cache.snapshot.max-num-per-table",
              "cache-expire-after-access", "cache-expire-after-write")  # fmt: skip
_KNOWN = ("type", "warehouse", "default-database", "metastore", "property-version")


@dataclass(frozen=True)
class CatalogSpec:
    """A lakelog catalog of a session."""

    name: str
    warehouse: str
    default_database: str = "default"
    table_defaults: dict[str, str] = field(default_factory=dict)
    # what lakelog.Catalog(warehouse, options=...) takes: the metastore's options (secrets included)
    catalog_options: dict[str, str] = field(default_factory=dict, repr=False)

    @staticmethod
    def of(name: str, options: Mapping[str, str]) -> CatalogSpec:
        """Check a ``CREATE CATALOG`` statement's options (each problem names the option)."""
        where = f"CREATE CATALOG {name}"
        warehouse = options.get("warehouse")
        if not warehouse:
            raise OptionError(
                f"{where}: a lakelog catalog needs option 'warehouse' (a local path or file: URI)"
            )
        metastore = options.get("metastore", "filesystem")
        if metastore not in ("filesystem", "jdbc"):
            raise OptionError(
                f"{where}: option 'metastore' = {metastore!r} is not supported: lakelog catalogs keep "
                "their tables in the warehouse directory ('filesystem') or in Paimon's JDBC catalog tables "
                "('jdbc')"
            )
        jdbc = metastore == "jdbc"
        defaults: dict[str, str] = {}
        catalog_options: dict[str, str] = {}
        for k, v in options.items():
            if k.startswith(TABLE_DEFAULT_PREFIX):
                defaults[k[len(TABLE_DEFAULT_PREFIX) :]] = v
            elif jdbc and (k in JDBC_OPTIONS or k.startswith(JDBC_PREFIX)) or k in S3_OPTION_KEYS:
                catalog_options[k] = v
            elif k not in _KNOWN and k not in _NO_EFFECT:
                more = (", 'uri', 'jdbc.<driver property>', 'catalog-key', 'lock.enabled', "
                        "'lock-acquire-timeout'" if jdbc else "")
                raise OptionError(
                    f"{where}: option {k!r} is not supported by lakelog catalogs (they take 'warehouse', "
                    f"'default-database', 'metastore' = 'filesystem' or 'jdbc'{more}, 's3.*' and "
                    "'table-default.<table option>')"
                )
        try:
            validate_options(defaults)
        except OptionError as e:
            raise OptionError(f"{where}: table-default options: {e}") from None
        try:
            path = location(warehouse)
        except OptionError as e:
            raise OptionError(f"{where}: option 'warehouse': {e}") from None
        return CatalogSpec(name, path, options.get("default-database", "default"), defaults, catalog_options)

    def with_defaults(self, options: Mapping[str, str]) -> dict[str, str]:
        """A new table's options: ``options`` plus every ``table-default.*`` key they do not set."""
        out = dict(options)
        for k, v in self.table_defaults.items():
            out.setdefault(k, v)
        return out


_TABLE_KEY = re.compile(r"^paimon\.([^.]+)\.([^.]+)\.([^.]+)\.(.+)$")


class DynamicOptions:
    """Table options set for the session (see the module docs)."""

    def __init__(self) -> None:
        self._global: dict[str, str] = {}
        self._tables: dict[tuple[str, str, str, str], str] = {}

    @staticmethod
    def is_table_key(key: str) -> bool:
        """Whether ``SET key`` sets a dynamic table option (a lakelog table option, or a
        ``paimon.<catalog>.<db>.<table>.<option>`` key)."""
        return _TABLE_KEY.match(key) is not None or find_option(key) is not None

    def set(self, key: str, value: str) -> None:
        m = _TABLE_KEY.match(key)
        option = m.group(4) if m else key
        try:
            validate_options({option: value}, strict=True)
        except OptionError as e:
            raise OptionError(f"SET {key!r}: {e}") from None
        if m:
            self._tables[(m.group(1), m.group(2), m.group(3), option)] = value
        else:
            self._global[key] = value

    def reset(self, key: Optional[str] = None) -> bool:
        """Forget ``key`` (every key when None); whether it was set."""
        if key is None:
            found = bool(self._global or self._tables)
            self._global.clear()
            self._tables.clear()
            return found
        m = _TABLE_KEY.match(key)
        if m:
            return self._tables.pop((m.group(1), m.group(2), m.group(3), m.group(4)), None) is not None
        return self._global.pop(key, None) is not None

    def items(self) -> list[tuple[str, str]]:
        """Every key set, as given."""
        out = list(self._global.items())
        out += [(f"paimon.{c}.{d}.{t}.{k}", v) for (c, d, t, k), v in self._tables.items()]
        return out

    def for_table(self, catalog: str, database: str, table: str) -> dict[str, str]:
        """The dynamic options of one table: the global ones, then matching table keys (exact parts
        win over ``*``)."""
        out = dict(self._global)
        matches = []
        for (c, d, t, k), v in self._tables.items():
            if all(p in ("*", x) for p, x in ((c, catalog), (d, database), (t, table))):
                matches.append(((c != "*") + (d != "*") + (t != "*"), k, v))
        for _, k, v in sorted(matches, key=lambda m: m[0]):
            out[k] = v
        return out
