"""A real Kafka broker for the test session, started by the same code as ``lakelog kafka start``.

Use it from a test module with::

    from tests.kafka_fixtures import kafka_broker  # noqa: F401  (the fixture)

``kafka_broker`` is session-scoped: one broker (single-node KRaft on free loopback ports, in a
temporary directory) serves every test of the session and is stopped at its end. With
``LAKELOG_KAFKA_BOOTSTRAP=host:port`` set, the tests use that running broker instead and start
none. Without Java the tests that use it are skipped (with ``LAKELOG_REQUIRE_KAFKA=1``, as in CI,
they fail); a failed start or jar download fails them.
Topics are not auto-created: make one per test with :func:`create_topic`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import pytest

from lakelog.jobs.kafka_broker import KafkaBroker, KafkaBrokerError, find_java

BOOTSTRAP_ENV = "LAKELOG_KAFKA_BOOTSTRAP"
REQUIRE_ENV = "LAKELOG_REQUIRE_KAFKA"  # CI: a missing Java fails the kafka tests instead of skipping them


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where the tests' broker listens; ``broker`` is None for an outside one (``$LAKELOG_KAFKA_BOOTSTRAP``)."""

    bootstrap_servers: str
    broker: Optional[KafkaBroker]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaEndpoint]:
    outside = os.environ.get(BOOTSTRAP_ENV)
    if outside:
        yield KafkaEndpoint(outside, None)
        return
    try:
        find_java()
    except KafkaBrokerError as e:
        if os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{REQUIRE_ENV} is set but no broker can start: {e}")
        pytest.skip(str(e))
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start(timeout=180.0)  # two loaded cores: allow for a slow JVM start
    try:
        yield KafkaEndpoint(broker.bootstrap_servers, broker)
    finally:
        broker.stop()


def create_topic(bootstrap_servers: str, partitions: int = 1, name: Optional[str] = None) -> str:
    """Create a topic (a fresh unique name unless ``name`` is given) and return its name."""
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = name or f"t-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    return topic
