"""confluent-kafka clients, configured in one place.

Nothing else in the project builds a librdkafka config: callers ask for a
producer, a transactional producer, a consumer or an admin client here and
pass only what is specific to them.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from streams.kafka.connection import Brokers, connection

# librdkafka's default retry backoff (100 ms) caps a transactional loop at ~20
# transactions/s on one broker; 5 ms lifts it about tenfold.
_FAST_RETRY = {"retry.backoff.ms": 5}
# A worker's batch records and dead letters may exceed Kafka's 1 MB default (the topics
# allow them: topic_catalog.MAX_MESSAGE_BYTES).
_WORKER_MESSAGE_MAX_BYTES = 8 * 1024 * 1024 + 64 * 1024


# librdkafka's own log lines go through Python logging instead of raw stderr.
librdkafka_log = logging.getLogger("streams.librdkafka")


def _base(brokers: Brokers) -> dict[str, Any]:
    return {
        **connection(brokers).config(),
        "client.id": "dcb-streams",
        "logger": librdkafka_log,
    }


def producer(brokers: Brokers, **overrides: Any) -> Producer:
    """An idempotent producer (acks=all), so retries never duplicate records."""
    conf = {
        **_base(brokers),
        **_FAST_RETRY,
        "enable.idempotence": True,
        # Java's partitioner, so a reader finds a key's partition (kafka/partitioner.py).
        "partitioner": "murmur2_random",
        "acks": "all",
        "linger.ms": 1,
        **overrides,
    }
    return Producer(conf)


def transactional_producer(brokers: Brokers, transactional_id: str, **overrides: Any) -> Producer:
    """A producer after ``init_transactions``; a newer one with the same id fences it (and
    aborts what an earlier one left open, at once)."""
    prod = producer(
        brokers,
        **{
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "message.max.bytes": _WORKER_MESSAGE_MAX_BYTES,
            **overrides,
        },
    )
    prod.init_transactions(30)
    return prod


def consumer(
    brokers: Brokers,
    group_id: str,
    *,
    read_committed: bool = True,
    auto_commit: bool = False,
    **overrides: Any,
) -> Consumer:
    """A classic-protocol group consumer; offsets are committed explicitly by default."""
    conf = {
        **_base(brokers),
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


def group_consumer(brokers: Brokers, group_id: str, **overrides: Any) -> Consumer:
    """The runtime's member of the worker group: eager rebalancing with range assignment,
    so a processor's co-partitioned topics (same partition count) are assigned together;
    offsets are committed only inside transactions."""
    return consumer(
        brokers,
        group_id,
        **{
            "partition.assignment.strategy": "range",
            # The broker answers a fetch as soon as records arrive; this only bounds how
            # often an idle worker asks.
            "fetch.wait.max.ms": 100,
            **overrides,
        },
    )


def take_ready(consumer: Consumer, limit: int, timeout_s: float) -> list[Message]:
    """Wait up to ``timeout_s`` for a first record, then take what else is ready (at most
    ``limit`` in all) without waiting: ``consume(n, t)`` alone waits for all ``n``."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(limit - 1, 0)] if limit > 1 else [first]


def admin(brokers: Brokers, **overrides: Any) -> AdminClient:
    return AdminClient({**_base(brokers), **_FAST_RETRY, **overrides})


def broker_answers(brokers: Brokers, timeout_s: float = 2.0) -> bool:
    """True when a broker at ``brokers`` answers a metadata request."""
    host, _, port = connection(brokers).bootstrap_servers.split(",")[0].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError:
        return False
    client = admin(brokers, **{"socket.connection.setup.timeout.ms": 1000})
    try:
        metadata = client.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(metadata.brokers)
