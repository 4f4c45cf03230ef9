"""Certificates while rounds overlap: the runtime steps a round before the commit of the
round before it has settled, so a certificate must cover the prefix of the round that
committed, with where that round's events end, never a prefix moved since."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from confluent_kafka import Message

from streams.codec import codec_from_settings
from streams.kafka.checkpoint import Output, Round
from streams.kafka.topic_catalog import TopicRole, ledger_partition, topic_name
from streams.ledger.processor import LedgerProcessor
from streams.model.records import Certificate, Command, CommitAttempt, CommittedEvent, EventData
from streams.settings import DcbSettings
from streams.tags.processor import TagProcessor

SERVICE = "s"
SETTINGS = DcbSettings()
CODEC = codec_from_settings(SETTINGS)
TOPICS = SETTINGS.topics
PARTITION = ledger_partition(SERVICE, TOPICS)


def command(offset: int, tag: str) -> Message:
    event = EventData(
        event_id=str(uuid.uuid4()),
        event_type="E",
        payload="{}",
        tags=[tag],
        timestamp=datetime.now(UTC),
    )
    attempt = CommitAttempt(attempt_id=str(uuid.uuid4()), writer_epoch=0, events=[event])
    record = Command.of_commit(SERVICE, attempt)
    value = CODEC.encode(record.schema_name, record.to_avro())
    return Message(
        topic=topic_name(TOPICS, TopicRole.COMMANDS),
        partition=PARTITION,
        offset=offset,
        key=SERVICE.encode(),
        value=value,
    )


def ledger() -> LedgerProcessor:
    tags = TagProcessor(SETTINGS, CODEC)
    processor = LedgerProcessor(SETTINGS, CODEC, tags)
    ends = {topic_name(TOPICS, r): 0 for r in (TopicRole.EVENTS, TopicRole.TAG_DELIVERIES)}
    for p in (processor, tags):
        offsets = {p.topic(role): -1 for role in p.roles}
        for partition in range(p.partitions):
            p.assign(partition, {}, ends, offsets)
    return processor


class EventsTopic:
    """dcb.events: a committed round's events land at the end of their partition."""

    def __init__(self) -> None:
        self.end = 0

    def commit(self, out: Round) -> None:
        for output in self.events(out):
            if output.delivered is not None:
                output.delivered(0, self.end)
            self.end += 1

    @staticmethod
    def events(out: Round) -> list[Output]:
        return [o for o in out.outputs if o.topic == topic_name(TOPICS, TopicRole.EVENTS)]


def suids(out: Round) -> list[str]:
    return [CommittedEvent.from_bytes(CODEC, o.value).suid for o in EventsTopic.events(out)]


def certificates(out: Round) -> list[Certificate]:
    topic = topic_name(TOPICS, TopicRole.CERTIFICATES)
    return [Certificate.from_bytes(CODEC, o.value) for o in out.outputs if o.topic == topic]


def test_a_certificate_covers_the_settled_round_not_the_one_stepped_since() -> None:
    processor, topic = ledger(), EventsTopic()
    first = Round(CODEC)
    processor.step(PARTITION, [command(0, "a"), command(1, "b")], first)
    processor.carry(first)  # the round before settled: nothing of it to certify
    assert certificates(first) == []
    first_suids = suids(first)
    assert len(first_suids) == 2

    second = Round(CODEC)  # stepped while the first round's commit is in flight
    processor.step(PARTITION, [command(2, "c")], second)
    assert processor.due()
    topic.commit(first)  # now it settles: its events are acknowledged
    processor.carry(second)
    [certificate] = certificates(second)
    assert certificate.closed_prefix_suid == max(first_suids)
    assert [(c.partition, c.offset) for c in certificate.coverage] == [(0, 2)]
    assert certificate.closed_prefix_suid < suids(second)[0]

    third = Round(CODEC)
    topic.commit(second)
    processor.carry(third)
    [later] = certificates(third)
    assert later.closed_prefix_suid == suids(second)[0]
    assert [(c.partition, c.offset) for c in later.coverage] == [(0, 3)]
    assert not processor.due()
