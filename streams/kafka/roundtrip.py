"""Write one record transactionally and read it back committed: the smallest end-to-end check."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from streams.codec import AvroCodec
from streams.errors import InfraError
from streams.kafka import clients
from streams.model.records import AvroRecord


@dataclass(frozen=True)
class RoundTrip:
    topic: str
    partition: int
    offset: int
    encoded_bytes: int
    decoded: AvroRecord
    millis: float


def round_trip(
    bootstrap_servers: str, codec: AvroCodec, topic: str, key: str, record: AvroRecord
) -> RoundTrip:
    """Produce ``record`` in a committed transaction, consume it ``read_committed``, decode it."""
    started = time.monotonic()
    value = codec.encode(record.schema_name, record.to_avro())
    producer = clients.transactional_producer(bootstrap_servers, f"dcb-roundtrip-{uuid.uuid4()}")
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    producer.begin_transaction()
    producer.produce(topic, key=key.encode(), value=value, on_delivery=on_delivery)
    producer.commit_transaction(30)
    if not delivered:
        raise InfraError(f"the record was not delivered to {topic}")
    partition, offset = delivered[0]
    consumer = clients.consumer(bootstrap_servers, f"dcb-roundtrip-{uuid.uuid4()}")
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            decoded = codec.decode(msg.value(), expected=record.schema_name)
            return RoundTrip(
                topic,
                partition,
                offset,
                len(value),
                type(record).from_avro(decoded.value),
                (time.monotonic() - started) * 1000,
            )
    finally:
        consumer.close()
    raise InfraError(f"the committed record at {topic}[{partition}]@{offset} was not read back")
