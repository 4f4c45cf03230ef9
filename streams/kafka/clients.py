"""confluent-kafka clients, configured in one place.

Nothing else in the project builds a librdkafka config: callers ask for a
producer, a transactional producer, a consumer or an admin client here and
pass only what is specific to them.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

# librdkafka's default retry backoff (100 ms) caps a transactional loop at ~20
# transactions/s on one broker; 5 ms lifts it about tenfold (MACHINE-FACTS.md).
_FAST_RETRY = {"retry.backoff.ms": 5}


# librdkafka's own log lines go through Python logging instead of raw stderr.
librdkafka_log = logging.getLogger("streams.librdkafka")


def _base(bootstrap_servers: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "client.id": "dcb-streams",
        "logger": librdkafka_log,
    }


def producer(bootstrap_servers: str, **overrides: Any) -> Producer:
    """An idempotent producer (acks=all), so retries never duplicate records."""
    conf = {
        **_base(bootstrap_servers),
        **_FAST_RETRY,
        "enable.idempotence": True,
        # Java's and aiokafka's partitioner, so a key lands where faust's producers put it.
        "partitioner": "murmur2_random",
        "acks": "all",
        "linger.ms": 1,
        **overrides,
    }
    return Producer(conf)


def transactional_producer(
    bootstrap_servers: str, transactional_id: str, **overrides: Any
) -> Producer:
    """A producer after ``init_transactions``; a newer one with the same id fences it."""
    prod = producer(
        bootstrap_servers,
        **{"transactional.id": transactional_id, "transaction.timeout.ms": 60_000, **overrides},
    )
    prod.init_transactions(30)
    return prod


def consumer(
    bootstrap_servers: str,
    group_id: str,
    *,
    read_committed: bool = True,
    auto_commit: bool = False,
    **overrides: Any,
) -> Consumer:
    """A classic-protocol group consumer; offsets are committed explicitly by default."""
    conf = {
        **_base(bootstrap_servers),
        **_FAST_RETRY,
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": auto_commit,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 1_000,
        **overrides,
    }
    return Consumer(conf)


def admin(bootstrap_servers: str, **overrides: Any) -> AdminClient:
    return AdminClient({**_base(bootstrap_servers), **_FAST_RETRY, **overrides})


def broker_answers(bootstrap_servers: str, timeout_s: float = 2.0) -> bool:
    """True when a broker at ``bootstrap_servers`` answers a metadata request."""
    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError:
        return False
    client = admin(bootstrap_servers, **{"socket.connection.setup.timeout.ms": 1000})
    try:
        metadata = client.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(metadata.brokers)
