"""Shared fixtures: one real Kafka broker per test session, a topic prefix per test.

The broker is, in order of preference: the one named by ``DCB_BOOTSTRAP_SERVERS``;
a testcontainers Kafka when a Docker engine answers; else the project's own
embedded broker (``streams.infra.broker``) on free ports with a throw-away data
folder, its jars from the shared cache.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.codec import AvroCodec, SchemaCatalog
from streams.infra.broker import EmbeddedBroker
from streams.infra.ports import free_port
from streams.settings import BrokerSettings, DcbSettings, TopicSettings


def _docker_engine_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()  # type: ignore[attr-defined]  # untyped package
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> BrokerSettings:
    """Settings of the embedded broker the session starts (when it starts one)."""
    port = free_port()
    controller_port = free_port()
    return BrokerSettings(
        port=port,
        controller_port=controller_port,
        data_dir=tmp_path_factory.mktemp("broker"),
        retention_check_interval_ms=1_000,  # the bounded-retention test waits for it
    )


@pytest.fixture(scope="session")
def bootstrap_servers(broker_settings: BrokerSettings) -> Iterator[str]:
    if servers := os.environ.get("DCB_BOOTSTRAP_SERVERS"):
        yield servers
        return
    if _docker_engine_answers():
        from testcontainers.community.kafka import KafkaContainer

        container = (
            KafkaContainer()
            .with_kraft()
            .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
            .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        )
        with container:
            yield container.get_bootstrap_server()
        return
    broker = EmbeddedBroker(broker_settings)
    broker.start()
    try:
        yield broker_settings.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture
def topic_prefix() -> str:
    """A fresh prefix, so tests never see each other's topics or groups."""
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
def settings(bootstrap_servers: str, topic_prefix: str) -> DcbSettings:
    return DcbSettings(
        bootstrap_servers=bootstrap_servers,
        topics=TopicSettings(prefix=topic_prefix, partitions=3, tag_partitions=4),
    )


@pytest.fixture(scope="session")
def codec() -> AvroCodec:
    return AvroCodec(SchemaCatalog())


@pytest.fixture
def schema_dir() -> Path:
    return SchemaCatalog().schema_dir
