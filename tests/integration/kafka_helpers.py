"""Small real-broker helpers for the integration tests (produce, read everything, topics)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import KafkaException, Message, TopicPartition
from confluent_kafka.admin import NewTopic

from streams.kafka import clients
from streams.kafka.end_offsets import EndOffsets


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    admin = clients.admin(bootstrap)  # must outlive the futures
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
    )
    for future in futures.values():
        future.result()


def produce_all(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> None:
    producer = clients.producer(bootstrap)
    errors: list[object] = []
    for key, value in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0, "records were not delivered"
    assert not errors, errors


def records_on(bootstrap: str, topic: str) -> int:
    """How many records (and transaction markers) a topic holds: its high watermarks."""
    partitions = clients.admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions
    high = EndOffsets(bootstrap).latest(((topic, p) for p in partitions), committed=False)
    return sum(high.values())


def read_all(
    bootstrap: str,
    topic: str,
    *,
    expect_at_least: int,
    read_committed: bool = True,
    timeout_s: float = 60.0,
    settle_s: float = 2.0,
) -> list[Message]:
    """Every record of ``topic`` from the beginning: waits for ``expect_at_least``, then
    keeps reading until nothing new arrives for ``settle_s`` (so duplicates show up)."""
    consumer = clients.consumer(bootstrap, f"reader-{uuid.uuid4()}", read_committed=read_committed)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(out) >= expect_at_least and time.monotonic() - last_new > settle_s:
                    break
                continue
            if msg.error():
                raise KafkaException(msg.error())
            out.append(msg)
            last_new = time.monotonic()
        return out
    finally:
        consumer.close()
