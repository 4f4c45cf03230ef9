"""A projection's lag read from Kafka, without its runner: its last checkpoint, and
``dcb.events`` from the checkpoint's offsets to the committed end."""

from __future__ import annotations

import time
from collections import defaultdict

from confluent_kafka import Message

from streams.codec import codec_from_settings
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import CommittedEvent
from streams.projections.checkpoint import Checkpoint
from streams.projections.lag import ProjectionLag, projection_lag
from streams.projections.runner import checkpoints_topic
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings


def checkpoints(settings: DcbSettings) -> dict[str, Checkpoint]:
    """The last checkpoint of every projection (a rebuilt one's fresh one included)."""
    found: dict[str, Checkpoint] = {}

    def keep(message: Message) -> None:
        value = message.value()
        if value is not None:
            checkpoint = Checkpoint.model_validate_json(value)
            found[checkpoint.projection_id] = checkpoint

    tail = TopicTail(settings.kafka, checkpoints_topic(settings))
    try:
        tail.catch_up(keep)
    finally:
        tail.close()
    return found


def read_lag(settings: DcbSettings, checkpoint: Checkpoint) -> ProjectionLag:
    codec = codec_from_settings(settings)
    through = {s: m.applied_through for s, m in checkpoint.services.items()}
    heads: dict[str, str] = {s: t for s, t in through.items() if t is not None}
    behind: defaultdict[str, int] = defaultdict(int)

    def count(message: Message) -> None:
        record = CommittedEvent.from_avro(
            codec.decode(message.value(), CommittedEvent.schema_name).value
        )
        s = record.service_id
        heads[s] = max(heads.get(s, ""), record.suid)
        if record.suid > (through.get(s) or ""):
            behind[s] += 1

    events = topic_name(settings.topics, TopicRole.EVENTS)
    tail = TopicTail(settings.kafka, events, start=checkpoint.events_offsets)
    try:
        tail.catch_up(count)
    finally:
        tail.close()
    services = set(heads) | set(behind)
    return projection_lag(checkpoint, {s: (heads.get(s), behind[s]) for s in services}, time.time())
