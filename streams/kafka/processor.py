"""What every faust agent of the commit path shares: decoding, dead letters, transactional output.

An agent decodes each record with :meth:`Processor.decode`; a record that cannot be
decoded or validated goes to the dead-letter topic with its reason (in the same
transaction as the source offset) and the agent goes on. Outputs go through
:func:`send_in_transaction`, so a step's records and its table writes commit or
abort together.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import faust
import pydantic
from faust.streams import _current_event
from faust.types import EventT, RecordMetadata

from streams.codec import AvroCodec
from streams.errors import DcbError, InvalidRecordError
from streams.kafka.faust_app import send_in_transaction
from streams.kafka.faust_transport import commit_path_producer
from streams.kafka.topic_catalog import RECORD_TYPES, TopicRole, topic_name
from streams.model.records import AvroRecord, DeadLetter, ErrorInfo
from streams.settings import DcbSettings

log = logging.getLogger("streams.worker")


class Processor:
    def __init__(self, app: faust.App, settings: DcbSettings, codec: AvroCodec) -> None:
        self.app = app
        self.settings = settings
        self.codec = codec
        self.roles = {self.topic(role): role for role in TopicRole}

    def decode(self, source: EventT[Any]) -> AvroRecord:
        """The record of ``source``, checked against its topic's schema and model."""
        role = self.roles[source.message.topic]
        cls = RECORD_TYPES[role]
        decoded = self.codec.decode(source.message.value, cls.schema_name)
        try:
            return cls.from_avro(decoded.value)
        except pydantic.ValidationError as exc:
            raise InvalidRecordError(
                f"{cls.schema_name} breaks its model: {exc.errors()[0]['msg']}",
                schema=cls.schema_name,
            ) from exc

    def step(self) -> AbstractAsyncContextManager[None]:
        """Run one record as a step: no commit can cut it in two (``step_gate``)."""
        return commit_path_producer(self.app).gate.step()

    @staticmethod
    @contextmanager
    def tables_of(source: EventT[Any]) -> Iterator[None]:
        """Table writes made outside an agent's iteration (a commit hook) go to the
        changelog partitions of ``source``'s: faust takes them from the current event."""
        token = _current_event.set(weakref.ref(source))
        try:
            yield
        finally:
            _current_event.reset(token)

    def topic(self, role: TopicRole) -> str:
        return topic_name(self.settings.topics, role)

    def source(self, *roles: TopicRole) -> Any:
        return self.app.topic(
            *(self.topic(r) for r in roles),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
        )

    async def publish(
        self, source: EventT[Any], records: Iterable[tuple[TopicRole, str, AvroRecord]]
    ) -> list[asyncio.Future[RecordMetadata]]:
        """Send records (role, key, record), in order, inside the source partition's transaction.

        Nothing waits for broker acknowledgements here (the transaction's commit does);
        a caller that needs an offset awaits the returned future.
        """
        sent = []
        for role, key, record in records:
            value = self.codec.encode(record.schema_name, record.to_avro(), check=False)
            topic = self.topic(role)
            sent.append(await send_in_transaction(self.app, source, topic, key.encode(), value))
        return sent

    async def dead_letter(
        self, source: EventT[Any], processor: str, exc: DcbError, service_id: str | None = None
    ) -> None:
        message = source.message
        log.warning(
            "%s: dead letter from %s[%d]@%d: %s %s",
            processor,
            message.topic,
            message.partition,
            message.offset,
            exc.code,
            exc.message,
        )
        letter = DeadLetter(
            service_id=service_id,
            source_topic=message.topic,
            source_partition=message.partition,
            source_offset=message.offset,
            source_key=message.key,
            source_value=message.value,
            processor=processor,
            error=ErrorInfo.of(exc),
            failed_at=datetime.now(UTC),
        )
        key = (message.key or b"").decode(errors="replace")
        await self.publish(source, [(TopicRole.DEAD_LETTERS, key, letter)])
