"""Options of a JDBC catalog, under Paimon's names (``CREATE CATALOG ... WITH (...)`` and
``lakelog.Catalog(warehouse, options={...})`` take the same dict of strings).

Every ``jdbc.<name>`` option goes to the database driver as property ``<name>``. Keys of other
families (the warehouse's file IO: ``s3.*``, ``fs.*``) are not this module's business and pass
through; a misspelt key of this family (``lock.enable``) is refused naming the nearest one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import ConfigOption, Duration

__all__ = ["JdbcCatalogOptions", "JDBC_PREFIX", "JDBC_OPTIONS"]

JDBC_PREFIX = "jdbc."


def _positive_duration(v: Duration) -> Optional[str]:
    return None if v.nanos > 0 else "expected a positive duration"


def _positive(v: int) -> Optional[str]:
    return None if v > 0 else "expected a positive number"


METASTORE: ConfigOption[str] = ConfigOption("metastore", str, "filesystem", "Where names are kept: 'jdbc'.")
URI: ConfigOption[str] = ConfigOption(
    "uri", str, None, "The database: jdbc:sqlite:<file> or jdbc:postgresql://host:port/database.")
CATALOG_KEY: ConfigOption[str] = ConfigOption(
    "catalog-key", str, "jdbc", "Names this catalog's rows, so that several catalogs share one database.")
LOCK_ENABLED: ConfigOption[bool] = ConfigOption(
    "lock.enabled", bool, False, "Hold the tables' commit locks in the database (paimon_distributed_locks).")
LOCK_ACQUIRE_TIMEOUT: ConfigOption[Duration] = ConfigOption(
    "lock-acquire-timeout", Duration, None,
    "How long a commit waits for the lock (default: the table's 'lock-acquire-timeout', 8 min).",
    validator=_positive_duration)
LOCK_CHECK_MAX_SLEEP: ConfigOption[Duration] = ConfigOption(
    "lock-check-max-sleep", Duration, Duration.of_millis(100),
    "The longest pause between two tries of a waiter (Paimon's default is 8 s; lakelog's 100 ms).",
    validator=_positive_duration)
LOCK_LEASE_TIMEOUT: ConfigOption[Duration] = ConfigOption(
    "lock-lease-timeout", Duration, Duration.parse("30 s"),
    "lakelog: a holder renews its lock row every third of this; a waiter takes over a row not renewed "
    "for this long (by the database server's clock). At least 3 s.",
    validator=lambda v: None if v.nanos >= 3 * 10**9 else "expected at least 3 s")
LOCK_KEY_MAX_LENGTH: ConfigOption[int] = ConfigOption(
    "lock-key-max-length", int, 255, "The length of paimon_distributed_locks.lock_id.", validator=_positive)
SYNC_ALL_PROPERTIES: ConfigOption[bool] = ConfigOption(
    "sync-all-properties", bool, True, "Copy table options into paimon_table_properties (Paimon 1.4+).")
CLIENT_POOL_SIZE: ConfigOption[int] = ConfigOption(
    "client-pool-size", int, 2, "Accepted for Paimon; lakelog keeps one connection per process.",
    validator=_positive)

JDBC_OPTIONS: dict[str, ConfigOption[Any]] = {
    o.key: o
    for o in (METASTORE, URI, CATALOG_KEY, LOCK_ENABLED, LOCK_ACQUIRE_TIMEOUT, LOCK_CHECK_MAX_SLEEP,
              LOCK_LEASE_TIMEOUT, LOCK_KEY_MAX_LENGTH, SYNC_ALL_PROPERTIES, CLIENT_POOL_SIZE)
}
_FAMILY = ("lock", "catalog-key", "sync-all", "client-pool", "uri")


@dataclass(frozen=True)
class JdbcCatalogOptions:
    """The parsed options of a JDBC catalog (``driver`` holds secrets: never print it)."""

    uri: str
    catalog_key: str
    lock_enabled: bool
    lock_acquire_timeout_s: Optional[float]
    lock_check_max_sleep_s: float
    lock_lease_s: float
    lock_key_max_length: int
    sync_all_properties: bool
    driver: Mapping[str, str]

    def __repr__(self) -> str:
        return (f"JdbcCatalogOptions(catalog_key={self.catalog_key!r}, lock_enabled={self.lock_enabled}, "
                f"driver properties {sorted(self.driver)})")

    @staticmethod
    def parse(options: Mapping[str, str]) -> JdbcCatalogOptions:
        values: dict[str, Any] = {}
        driver: dict[str, str] = {}
        for key, raw in options.items():
            k = str(key)
            if k.startswith(JDBC_PREFIX):
                driver[k[len(JDBC_PREFIX):]] = str(raw)
                continue
            opt = JDBC_OPTIONS.get(k)
            if opt is None:
                if k.startswith(_FAMILY):
                    near = difflib.get_close_matches(k, list(JDBC_OPTIONS), n=1, cutoff=0.5)
                    hint = f"; did you mean {near[0]!r}?" if near else ""
                    raise OptionError(f"unknown JDBC catalog option {k!r}{hint}")
                continue
            values[k] = opt.parse(str(raw), k)
        uri = values.get(URI.key)
        if not uri:
            raise OptionError(
                "a JDBC catalog needs option 'uri' (jdbc:sqlite:<file> or "
                "jdbc:postgresql://host:port/database)"
            )
        key = values.get(CATALOG_KEY.key, CATALOG_KEY.default)
        if not key or not str(key).strip():
            raise OptionError("catalog option 'catalog-key' must not be empty")

        def get(o: ConfigOption[Any]) -> Any:
            return values.get(o.key, o.default)

        acquire = get(LOCK_ACQUIRE_TIMEOUT)
        return JdbcCatalogOptions(
            uri=str(uri),
            catalog_key=str(key),
            lock_enabled=bool(get(LOCK_ENABLED)),
            lock_acquire_timeout_s=acquire.seconds if acquire is not None else None,
            lock_check_max_sleep_s=get(LOCK_CHECK_MAX_SLEEP).seconds,
            lock_lease_s=get(LOCK_LEASE_TIMEOUT).seconds,
            lock_key_max_length=int(get(LOCK_KEY_MAX_LENGTH)),
            sync_all_properties=bool(get(SYNC_ALL_PROPERTIES)),
            driver=driver,
        )
