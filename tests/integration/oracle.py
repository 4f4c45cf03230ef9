"""The crash tests' oracle: it reads around the product, and folds independently.

``read_to_end`` is a raw ``read_committed`` consumer that reads every partition of a
topic up to the high watermark it had when asked (waiting while a transaction is still
open there), not the SDK's read and not a quiet timer. ``check_subscriptions`` folds
what ``dcb.events`` holds against what the writers were told.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition

from streams.codec import AvroCodec, SchemaCatalog
from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.kafka.end_offsets import EndOffsets
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import CommittedEvent
from streams.settings import DcbSettings
from tests.integration.load import CAPACITY, LIMIT, Subscriptions


def read_to_end(
    bootstrap: Brokers,
    topic: str,
    *,
    read_committed: bool = True,
    stable: bool = False,
    timeout_s: float = 90,
) -> list[Message]:
    """Every record of ``topic`` below the high watermarks of now, in offset order per
    partition (``read_committed``: once every transaction there has ended). ``stable``:
    below the last stable offsets of now instead, so no transaction is cut in two (below
    a high watermark a transaction still producing has only some of its records)."""
    consumer = clients.consumer(
        bootstrap,
        f"{topic}-oracle-{uuid.uuid4()}",  # under the topic's prefix: a tenant's ACLs allow it
        read_committed=read_committed,
        **{"enable.partition.eof": True},
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        high = EndOffsets(bootstrap).latest(((topic, p) for p in partitions), committed=stable)
        ends = {p: end for (_, p), end in high.items()}
        todo = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while todo:
            assert time.monotonic() < deadline, f"{topic}: partitions {todo} never reached"
            message = consumer.poll(0.5)
            if message is None:
                continue
            partition, offset = message.partition() or 0, message.offset() or 0
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                if offset >= ends[partition]:
                    todo.discard(partition)
                continue
            if offset < ends[partition]:
                out.append(message)
            if offset + 1 >= ends[partition]:
                todo.discard(partition)
        return out
    finally:
        consumer.close()


@dataclass(frozen=True)
class Logged:
    service: str
    suid: str
    event_id: str
    event_type: str
    body: dict[str, str]
    partition: int
    offset: int


def committed_events(settings: DcbSettings) -> list[Logged]:
    """Every event on ``dcb.events``, decoded with a codec of its own."""
    codec = AvroCodec(SchemaCatalog())
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    out = []
    for message in read_to_end(settings.kafka, topic):
        record = CommittedEvent.from_avro(
            codec.decode(message.value() or b"", CommittedEvent.schema_name).value
        )
        out.append(
            Logged(
                record.service_id,
                record.suid,
                record.event.event_id,
                record.event.event_type,
                json.loads(record.event.payload),
                message.partition() or 0,
                message.offset() or 0,
            )
        )
    return out


def check_subscriptions(log: list[Logged], *loads: Subscriptions) -> None:
    """The log is exactly the commits acknowledged to the writers of ``loads``, each once,
    positions increasing per service in log order, no course over its capacity, no
    student over the limit."""
    appends = [a for load in loads for a in load.appends]
    assert not [a for a in appends if a.outcome == "unanswered"], "attempts unanswered"
    assert not [a for a in appends if a.outcome == "pending"], "appends still running"
    by_service: dict[str, list[Logged]] = defaultdict(list)
    for entry in sorted(log, key=lambda e: (e.partition, e.offset)):
        by_service[entry.service].append(entry)
    for service, entries in by_service.items():
        positions = [e.suid for e in entries]
        assert positions == sorted(set(positions)), f"{service}: positions out of order"
    logged = Counter(e.event_id for e in log)
    assert max(logged.values(), default=1) == 1, "an event committed twice"
    acknowledged = {
        event_id: (a.service, suid)
        for load in loads
        for a in load.committed()
        for event_id, suid in zip(a.event_ids, a.suids, strict=True)
    }
    assert {e.event_id: (e.service, e.suid) for e in log} == acknowledged
    for service, entries in by_service.items():
        seats: Counter[str] = Counter()
        courses: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        for e in entries:
            if e.event_type == "StudentSubscribed":
                seats[e.body["course"]] += 1
                courses[e.body["student"]] += 1
                pairs[e.body["student"], e.body["course"]] += 1
        assert max(seats.values(), default=0) <= CAPACITY, (service, seats)
        assert max(courses.values(), default=0) <= LIMIT, (service, courses)
        assert max(pairs.values(), default=0) <= 1, (service, pairs)


def dead_letters(settings: DcbSettings) -> list[Message]:
    topic = topic_name(settings.topics, TopicRole.DEAD_LETTERS)
    return read_to_end(settings.kafka, topic)
