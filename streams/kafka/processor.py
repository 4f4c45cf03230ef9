"""What a processor of the commit path is: its side of the runtime's contract.

A processor reads co-partitioned source topics (``roles``) and keeps changelog-backed
tables partitioned like them (``table_names``). The runtime (:mod:`streams.kafka.runtime`)
gives it the partitions it owns, their tables restored; hands it each owned partition's
ready records as one batch (``step``); and commits whatever the round's steps sent and
wrote, with the input offsets, in one transaction (:mod:`streams.kafka.checkpoint`).
A record, or one item of a batch record, that cannot be decoded or validated goes to
the dead-letter topic with its reason, in the same transaction, and the step goes on.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import ClassVar

import pydantic
from confluent_kafka import Message

from streams.codec import AvroCodec
from streams.errors import CodecError, DcbError, InvalidRecordError
from streams.kafka.changelog import Rows, Table, changelog_topic
from streams.kafka.checkpoint import Round
from streams.kafka.topic_catalog import RECORD_TYPES, TopicRole, topic_name
from streams.model.records import AvroRecord, DeadLetter, ErrorInfo
from streams.settings import DcbSettings

log = logging.getLogger("streams.worker")


class Processor(ABC):
    name: ClassVar[str]
    roles: ClassVar[tuple[TopicRole, ...]]
    table_names: ClassVar[tuple[str, ...]]
    # Topics it writes whose settled end (same partition number) it needs on a takeover.
    end_roles: ClassVar[tuple[TopicRole, ...]] = ()

    def __init__(self, settings: DcbSettings, codec: AvroCodec) -> None:
        self.settings = settings
        self.codec = codec
        self.changelog = changelog_topic(settings.worker.app_id, self.name)
        self.tables = {name: Table(self.changelog, name) for name in self.table_names}

    @property
    @abstractmethod
    def partitions(self) -> int:
        """How many partitions each of its source topics and tables has."""

    @abstractmethod
    def step(self, partition: int, messages: Sequence[Message], out: Round) -> None:
        """Handle one partition's batch, in order; send and write through ``out``."""

    @abstractmethod
    def tick(self, now_ms: int, out: Round) -> None:
        """Run what is due by the clock (called about once a second)."""

    @abstractmethod
    def carry(self, out: Round) -> None:
        """Send, with this round's steps, what the round whose commit has just settled
        left due (it is called once per round, between that settling and this round's
        commit)."""

    @abstractmethod
    def due(self) -> bool:
        """Whether :meth:`carry` has something to send (the next round then starts now)."""

    def assign(
        self, partition: int, rows: Rows, ends: Mapping[str, int], offsets: Mapping[str, int]
    ) -> None:
        """Take ``partition`` over with the rows restored from its changelog partition, the
        settled ends of its ``end_roles`` topics' partitions of that number and the
        committed offsets of its sources' (by topic; -1: none committed)."""
        for table in self.tables.values():
            table.load(partition, rows)

    def revoke(self, partition: int) -> None:
        """Forget ``partition``: another process (or a fresh one) restores it."""
        for table in self.tables.values():
            table.drop(partition)

    def topic(self, role: TopicRole) -> str:
        return topic_name(self.settings.topics, role)

    def records(
        self, messages: Sequence[Message], out: Round
    ) -> Iterator[tuple[Message, AvroRecord]]:
        """Each message with its record; one that cannot be decoded goes to the dead letters."""
        for message in messages:
            try:
                yield message, self.decode(message)
            except CodecError as exc:
                self.dead_letter(out, message, exc)

    def decode(self, message: Message) -> AvroRecord:
        """The record of ``message``, checked against its topic's schema and model."""
        cls = RECORD_TYPES[self.role_of(message)]
        decoded = self.codec.decode(message.value() or b"", cls.schema_name)
        try:
            return cls.from_avro(decoded.value)
        except pydantic.ValidationError as exc:
            raise InvalidRecordError(
                f"{cls.schema_name} breaks its model: {exc.errors()[0]['msg']}",
                schema=cls.schema_name,
            ) from exc

    def role_of(self, message: Message) -> TopicRole:
        topic = message.topic()
        return next(role for role in self.roles if self.topic(role) == topic)

    def dead_letter(
        self,
        out: Round,
        message: Message,
        exc: DcbError,
        service_id: str | None = None,
        item_index: int | None = None,
    ) -> None:
        where = f"{message.topic()}[{message.partition()}]@{message.offset()}"
        if item_index is not None:
            where += f" item {item_index}"
        log.warning("%s: dead letter from %s: %s %s", self.name, where, exc.code, exc.message)
        letter = DeadLetter(
            service_id=service_id,
            source_topic=message.topic() or "",
            source_partition=message.partition() or 0,
            source_offset=message.offset() or 0,
            source_key=message.key(),
            source_value=message.value(),
            item_index=item_index,
            processor=self.name,
            error=ErrorInfo.of(exc),
            failed_at=datetime.now(UTC),
        )
        key = (message.key() or b"").decode(errors="replace")
        out.send(self.topic(TopicRole.DEAD_LETTERS), key, letter)
