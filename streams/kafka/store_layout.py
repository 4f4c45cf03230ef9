"""The store's layout, fixed when its topics are created: the tag placement and the
partition counts. Keys move when any of them changes (a tag's table would be in one
partition and its deliveries in another), so a worker with other settings refuses to
start. The layout is the first record of ``<prefix>layout``, written by whoever comes
first (``dcb topics create`` or the first worker)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from confluent_kafka import KafkaError, TopicPartition

from streams.codec import AvroCodec
from streams.errors import KafkaUnavailableError, TopicLayoutMismatchError
from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.kafka.refusals import refusal
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import StoreLayout
from streams.settings import TopicSettings


def layout_of(settings: TopicSettings) -> StoreLayout:
    return StoreLayout(
        tag_placement="SERVICE" if settings.tag_placement == "service" else "TAG",
        partitions=settings.partitions,
        tag_partitions=settings.tag_partitions,
        created_at=datetime.now(UTC),
    )


def ensure_layout(
    brokers: Brokers, settings: TopicSettings, codec: AvroCodec, timeout_s: float = 30.0
) -> StoreLayout:
    """The layout the topics have (this one, written now, when they have none yet); raises
    :class:`TopicLayoutMismatchError` when it is not ``settings``'."""
    topic = topic_name(settings, TopicRole.LAYOUT)
    layout = _first(brokers, topic, codec, timeout_s)
    if layout is None:
        mine = layout_of(settings)
        producer = clients.producer(brokers)
        producer.produce(topic, key=b"layout", value=codec.encode(mine.schema_name, mine.to_avro()))
        if producer.flush(timeout_s):
            raise KafkaUnavailableError(f"the layout was not written to {topic}", topic=topic)
        layout = _first(brokers, topic, codec, timeout_s)
    assert layout is not None
    wanted = layout_of(settings)
    fields = ("tag_placement", "partitions", "tag_partitions")
    differ = {f: getattr(layout, f) for f in fields if getattr(layout, f) != getattr(wanted, f)}
    if differ:
        raise TopicLayoutMismatchError(
            f"the topics under {settings.prefix!r} were created with "
            + ", ".join(f"{f}={v}" for f, v in differ.items())
            + "; these settings say "
            + ", ".join(f"{f}={getattr(wanted, f)}" for f in differ)
            + " (a layout is fixed once the topics exist: use these topics' settings, "
            "or another topic prefix)",
            created=layout.model_dump(mode="json", include=set(fields)),
        )
    return layout


def _first(brokers: Brokers, topic: str, codec: AvroCodec, timeout_s: float) -> StoreLayout | None:
    consumer = clients.consumer(brokers, f"{topic}-layout", **{"enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                value = codec.decode(message.value() or b"", StoreLayout.schema_name).value
                return StoreLayout.from_avro(value)
            if error.code() == KafkaError._PARTITION_EOF:
                return None
            refused = refusal(error, f"reading {topic}")
            if refused is not None:
                raise refused
        raise KafkaUnavailableError(f"{topic} could not be read in {timeout_s} s", topic=topic)
    finally:
        consumer.close()
