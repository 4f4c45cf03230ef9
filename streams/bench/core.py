"""The commit path's own code per event, without Kafka: the real processors, in process.

The worker's CPU per event (``commit.py``) is the processors' work plus the Kafka
clients', and a run on two shared cores varies by 10 to 15 per cent, so it cannot tell a
change of the processors' code from noise. Here :class:`LedgerProcessor` and
:class:`TagProcessor` run as the runtime drives them, minus Kafka: COMMIT commands go in
as messages, a round's records on the tag topics come back as the next round's batches,
its events are "delivered" when the next round settles it (so that round's certificates
name where they end), its table writes taken, until every command is answered and
certified. Commands go in
batches of a given size: a round of one command
against a round of many shows what batching saves per event. It also counts the records
a round sends per event: outputs, and changelog writes (the last per key, as a commit
sends them).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

from confluent_kafka import Message
from pydantic import BaseModel

from streams.codec import AvroCodec
from streams.kafka.checkpoint import Delivered, Round
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, ledger_partition, topic_name
from streams.ledger.processor import LedgerProcessor
from streams.model.records import Command, CommitResult
from streams.settings import DcbSettings
from streams.tags.processor import TagProcessor


class CoreCost(BaseModel):
    placement: str  # the tag placement
    tags: int
    batch: int  # commands per round into the ledger
    events: int
    cpu_us_per_event: float
    outputs_per_event: float  # records on the commit path's topics
    writes_per_event: float  # changelog records (a key's last write per round)


class CommitPathCore:
    """Both processors owning every partition, stepped round by round as the runtime
    steps them; the rounds' records on the tag topics routed back to them."""

    def __init__(self, settings: DcbSettings, codec: AvroCodec) -> None:
        self.codec = codec
        self.tags = TagProcessor(settings, codec)
        self.ledger = LedgerProcessor(settings, codec, self.tags)
        ends = {
            topic_name(settings.topics, role): 0
            for role in (TopicRole.EVENTS, TopicRole.TAG_DELIVERIES)
        }
        for processor in (self.ledger, self.tags):
            offsets = {processor.topic(role): -1 for role in processor.roles}
            for partition in range(processor.partitions):
                processor.assign(partition, {}, ends, offsets)
        topics = settings.topics
        self._offsets: dict[tuple[str, int], int] = defaultdict(int)  # the next, per partition
        self._readers = {
            topic_name(topics, TopicRole.TAG_DELIVERIES): self.tags,
            topic_name(topics, TopicRole.TAG_RESOLUTIONS): self.ledger,
        }
        self._commands = topic_name(topics, TopicRole.COMMANDS)
        self._results = topic_name(topics, TopicRole.COMMIT_RESULTS)
        self._dead_letters = topic_name(topics, TopicRole.DEAD_LETTERS)
        self._topics = topics
        self.outputs = 0
        self.writes = 0
        self.answers: list[bytes] = []  # the commit results, encoded
        # The last round's records that someone hears the offset of: acknowledged when
        # the next round settles it, after that round's steps (as the runtime overlaps).
        self._unsettled: list[tuple[Delivered, int, int]] = []

    def _partition_of(self, service_id: str) -> int:
        return ledger_partition(service_id, self._topics)

    def _offset(self, topic: str, partition: int) -> int:
        offset = self._offsets[topic, partition]
        self._offsets[topic, partition] = offset + 1
        return offset

    def _message(self, topic: str, partition: int, key: bytes | None, value: bytes) -> Message:
        """A real ``confluent_kafka.Message``, as the consumer hands them to the runtime."""
        offset = self._offset(topic, partition)
        return Message(topic=topic, partition=partition, offset=offset, key=key, value=value)

    def commit(self, commands: Sequence[tuple[str, bytes]]) -> None:
        """``commands`` (service id, encoded COMMIT command) through every round they take."""
        pending: dict[tuple[Processor, int], list[Message]] = defaultdict(list)
        for service_id, value in commands:
            partition = self._partition_of(service_id)
            message = self._message(self._commands, partition, service_id.encode(), value)
            pending[self.ledger, partition].append(message)
        while pending or self.ledger.due():
            pending = self._round(pending)

    def _round(
        self, batches: dict[tuple[Processor, int], list[Message]]
    ) -> dict[tuple[Processor, int], list[Message]]:
        """One round: each partition's batch stepped; the round before settled (its events
        and batches acknowledged) and what it left due sent (certificates); the writes
        taken; its records on the tag topics are the next round's batches."""
        out = Round(self.codec)
        for (processor, partition), batch in batches.items():
            processor.step(partition, batch, out)
        for delivered, partition, offset in self._unsettled:
            delivered(partition, offset)
        self.ledger.carry(out)
        self.tags.carry(out)
        for processor in (self.ledger, self.tags):
            for table in processor.tables.values():
                self.writes += len(table.take_writes())
        self.outputs += len(out.outputs)
        self._unsettled = []
        following: dict[tuple[Processor, int], list[Message]] = defaultdict(list)
        for output in out.outputs:
            assert output.value is not None
            if output.topic == self._dead_letters:
                raise RuntimeError("a record of the commit path was dead-lettered")
            key = (output.key or b"").decode()
            to = self._partition_of(key) if output.partition is None else output.partition
            offset = self._offset(output.topic, to)
            if output.delivered is not None:  # an event (its service's last), a batch
                self._unsettled.append((output.delivered, to, offset))
            if output.topic == self._results:
                self.answers.append(output.value)
            elif (reader := self._readers.get(output.topic)) is not None:
                message = Message(
                    topic=output.topic, partition=to, offset=offset, value=output.value
                )
                following[reader, to].append(message)
        return following


def run_core(
    settings: DcbSettings, codec: AvroCodec, commands: Sequence[Command], tags: int, batch: int
) -> CoreCost:
    """CPU per committed event of the processors' code over ``commands`` (COMMIT commands
    of one event of ``tags`` tags each, no condition), ``batch`` at a time."""
    encoded = [(c.service_id, codec.encode(c.schema_name, c.to_avro())) for c in commands]
    core = CommitPathCore(settings, codec)
    started = time.process_time()
    for first in range(0, len(encoded), batch):
        core.commit(encoded[first : first + batch])
    spent = time.process_time() - started
    results = [CommitResult.from_avro(codec.decode(a, None).value) for a in core.answers]
    committed = sum(1 for r in results if r.outcome == "COMMITTED")
    events = len(commands)
    if committed != events:
        raise RuntimeError(f"{committed} of {events} commands committed ({len(results)} answered)")
    return CoreCost(
        placement=settings.topics.tag_placement,
        tags=tags,
        batch=batch,
        events=events,
        cpu_us_per_event=round(spent * 1e6 / events, 1),
        outputs_per_event=round(core.outputs / events, 2),
        writes_per_event=round(core.writes / events, 2),
    )
