"""One-phase attempts decided in the ledger's round keep the order a topic would give:
a tag partition decides nothing there while a delivery record sent to it is unstepped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from confluent_kafka import Message

from streams.codec import codec_from_settings
from streams.kafka.checkpoint import Round
from streams.kafka.topic_catalog import TopicRole, tag_partition, topic_name
from streams.ledger.processor import LedgerProcessor
from streams.model.records import Command, CommitAttempt, EventData
from streams.settings import DcbSettings, TopicSettings
from streams.tags.processor import TagProcessor

SERVICE = "s"
SETTINGS = DcbSettings(topics=TopicSettings(partitions=1, tag_partitions=4, tag_placement="tag"))
CODEC = codec_from_settings(SETTINGS)
DELIVERIES = topic_name(SETTINGS.topics, TopicRole.TAG_DELIVERIES)


def where(tag: str) -> int:
    return tag_partition(SERVICE, tag, SETTINGS.topics)


def tags_apart() -> tuple[str, str, str]:
    """Two tags in different tag partitions and a third in the first one's."""
    tags = [f"t{i}" for i in range(100)]
    first = tags[0]
    other = next(t for t in tags if where(t) != where(first))
    same = next(t for t in tags[1:] if where(t) == where(first))
    return first, other, same


def command(offset: int, *tags: str) -> Message:
    event = EventData(
        event_id=str(uuid.uuid4()),
        event_type="E",
        payload="{}",
        tags=list(tags),
        timestamp=datetime.now(UTC),
    )
    attempt = CommitAttempt(attempt_id=str(uuid.uuid4()), writer_epoch=0, events=[event])
    record = Command.of_commit(SERVICE, attempt)
    value = CODEC.encode(record.schema_name, record.to_avro())
    topic = topic_name(SETTINGS.topics, TopicRole.COMMANDS)
    return Message(topic=topic, partition=0, offset=offset, key=SERVICE.encode(), value=value)


def processors() -> tuple[LedgerProcessor, TagProcessor]:
    tags = TagProcessor(SETTINGS, CODEC)
    ledger = LedgerProcessor(SETTINGS, CODEC, tags)
    ends = {topic_name(SETTINGS.topics, r): 0 for r in (TopicRole.EVENTS, TopicRole.TAG_DELIVERIES)}
    for processor in (ledger, tags):
        offsets = {processor.topic(role): -1 for role in processor.roles}
        for partition in range(processor.partitions):
            processor.assign(partition, {}, ends, offsets)
    return ledger, tags


def deliveries_to(out: Round) -> list[int]:
    return [o.partition for o in out.outputs if o.topic == DELIVERIES and o.partition is not None]


class DeliveryTopic:
    """The tag-deliveries topic: a round's records land at the ends of their partitions."""

    def __init__(self) -> None:
        self.ends: dict[int, int] = {}

    def land(self, out: Round) -> list[Message]:
        """The round committed: its delivery records are on the topic; here they are."""
        landed = []
        for output in out.outputs:
            if output.topic != DELIVERIES:
                continue
            assert output.partition is not None
            offset = self.ends.get(output.partition, 0)
            self.ends[output.partition] = offset + 1
            if output.delivered is not None:
                output.delivered(output.partition, offset)
            landed.append(
                Message(
                    topic=DELIVERIES, partition=output.partition, offset=offset, value=output.value
                )
            )
        return landed


def test_a_one_phase_attempt_is_decided_in_the_round_when_nothing_is_pending() -> None:
    ledger, _ = processors()
    first, _, _ = tags_apart()
    out = Round(CODEC)
    ledger.step(0, [command(0, first)], out)
    assert deliveries_to(out) == []


def test_nothing_is_decided_in_the_round_before_a_delivery_sent_there_is_stepped() -> None:
    ledger, tags = processors()
    topic = DeliveryTopic()
    first, other, same = tags_apart()
    two_phase = Round(CODEC)
    ledger.step(0, [command(0, first, other)], two_phase)  # by the topic: two partitions
    assert sorted(deliveries_to(two_phase)) == sorted([where(first), where(other)])
    sent = topic.land(two_phase)

    behind = Round(CODEC)
    ledger.step(0, [command(1, same)], behind)
    assert deliveries_to(behind) == [where(first)], "decided before the PREPARE sent earlier"
    sent += topic.land(behind)

    for message in sent:  # the tag steps take both records, in order
        tags.step(message.partition() or 0, [message], Round(CODEC))
    caught_up = Round(CODEC)
    ledger.step(0, [command(2, same)], caught_up)
    assert deliveries_to(caught_up) == [], "the partition stepped everything sent to it"


def test_an_earlier_rounds_record_landing_leaves_a_later_rounds_record_unsent() -> None:
    """Rounds overlap: the runtime steps a round before the commit of the one before has
    settled, so a record of that earlier round lands after a later round sent its own."""
    ledger, tags = processors()
    topic = DeliveryTopic()
    first, other, same = tags_apart()
    one = Round(CODEC)
    ledger.step(0, [command(0, first, other)], one)
    two = Round(CODEC)  # stepped while round one's commit is in flight
    ledger.step(0, [command(1, first, other)], two)
    for message in topic.land(one):
        tags.step(message.partition() or 0, [message], Round(CODEC))
    behind = Round(CODEC)
    ledger.step(0, [command(2, same)], behind)
    assert deliveries_to(behind) == [where(first)], "decided before round two's record"
    for message in topic.land(two) + topic.land(behind):
        tags.step(message.partition() or 0, [message], Round(CODEC))
    caught_up = Round(CODEC)
    ledger.step(0, [command(3, same)], caught_up)
    assert deliveries_to(caught_up) == []
