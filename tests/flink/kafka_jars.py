"""Flink's own Kafka SQL connector for the tests that check foreign readers of the log: the shaded
``flink-sql-connector-kafka`` jar (the thin one breaks PyFlink's wrappers; see
/work/shared/kafka-notes.md), fetched once into the cache by the broker's pinned-jar code."""

from __future__ import annotations

from lakelog.jobs.kafka_broker import Artifact, cache_dir, fetch_jars

# its SHA-1 matched the .sha1 file Maven Central publishes beside it
KAFKA_SQL_CONNECTOR = Artifact(
    "org.apache.flink",
    "flink-sql-connector-kafka",
    "5.0.0-2.2",
    "5605c691d11a501382c383fecba37a7a552467da5ab7ba904ef5d6f3d62c5616",
)


def kafka_connector_jar() -> str:
    """A ``file://`` URL of the connector jar, for ``env.add_jars``."""
    lib = fetch_jars(cache_dir() / "flink-connectors", artifacts=[KAFKA_SQL_CONNECTOR])
    return (lib / KAFKA_SQL_CONNECTOR.file_name).resolve().as_uri()
