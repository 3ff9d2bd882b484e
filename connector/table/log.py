"""The table's side of the log store: which tables have one, their Kafka configuration, the topic
registered at ``create_table``, and the publisher their commits go through."""

from __future__ import annotations

from typing import Optional

from lakelog.connector.errors import OptionError
from lakelog.connector.format.options import CoreOptions, LogConsistency, LogSystem
from lakelog.connector.format.store import TableStore
from lakelog.connector.log.kafka import LogConfig
from lakelog.connector.log.publisher import LogPublisher, publisher_for

__all__ = ["log_config", "log_publisher", "check_log_options"]

_FORMATS = ("debezium-json",)
_KEY_FORMATS = ("json",)


def _identifier(store: TableStore) -> str:
    import os

    db_dir, name = os.path.split(store.path.rstrip("/"))
    return f"{os.path.basename(db_dir).removesuffix('.db')}.{name}"


def log_config(store: TableStore) -> Optional[LogConfig]:
    """The Kafka configuration of the table's log; None for tables without one."""
    opts = store.options
    if opts.log_system != LogSystem.KAFKA:
        return None
    buckets = opts.bucket if opts.bucket > 0 else 1
    return LogConfig.of(opts, _identifier(store), buckets, list(store.schema.primary_keys))


def log_publisher(store: TableStore) -> Optional[LogPublisher]:
    """The publisher commits of this table go through (transactional logs only)."""
    config = log_config(store)
    if config is None or not config.transactional:
        return None
    return publisher_for(config)


def check_log_options(options: CoreOptions, *, table: str, primary_keys: bool, bucket: int) -> None:
    """Paimon's rules for the log options, checked when the table is created or altered."""
    if options.log_system != LogSystem.KAFKA:
        return
    fmt = options.get(CoreOptions.LOG_FORMAT)
    if fmt not in _FORMATS:
        raise OptionError(f"option 'log.format' = {fmt!r} of {table}: lakelog writes {list(_FORMATS)}")
    key_fmt = options.get(CoreOptions.LOG_KEY_FORMAT)
    if key_fmt not in _KEY_FORMATS:
        raise OptionError(
            f"option 'log.key.format' = {key_fmt!r} of {table}: lakelog writes {list(_KEY_FORMATS)}"
        )
    if options.log_consistency == LogConsistency.EVENTUAL and not primary_keys:
        raise OptionError(
            f"option 'log.consistency' = 'eventual' of {table} needs a primary key: repeated records "
            "are only harmless when they upsert a key"
        )
    if options.log_changelog_mode.value == "upsert" and not primary_keys:
        raise OptionError(f"option 'log.changelog-mode' = 'upsert' of {table} needs a primary key")
    if primary_keys and bucket < 1:
        raise OptionError(
            f"table {table}: the Kafka log needs a fixed 'bucket' (one topic partition per bucket; "
            "in dynamic bucket mode and cross-partition upserts a key's records could land in two "
            "partitions, whose order Kafka does not keep)"
        )
    if not options.kafka_options().get("bootstrap.servers"):
        raise OptionError(f"table {table} has 'log.system' = 'kafka' but no 'kafka.bootstrap.servers'")
