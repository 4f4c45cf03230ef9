"""The tag processor agent: the thin faust shell around :class:`TagTable`.

Reads ``dcb.tag-deliveries`` (keyed serviceId + tag, so one tag's deliveries are
ordered in one partition), keeps one tag table per (service, tag) in the
``tag-tables`` table and answers each delivery on ``dcb.tag-resolutions`` (keyed
serviceId, back to the service's ledger partition) in the same transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from faust.types import EventT

from streams.errors import DcbError
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, delivery_key
from streams.model.records import TagDelivery
from streams.tags.table import TagTable, TagTableState

NAME = "tags"


def register(proc: Processor) -> Any:
    app = proc.app
    tables = app.Table("tag-tables", default=None, partitions=proc.settings.topics.tag_partitions)

    async def handle(event: EventT[Any]) -> None:
        try:
            delivery = proc.decode(event)
            assert isinstance(delivery, TagDelivery)
            key = delivery_key(delivery.service_id, delivery.tag)
            raw = tables.get(key)
            state = (
                TagTableState.model_validate(raw)
                if raw is not None
                else TagTableState(service_id=delivery.service_id, tag=delivery.tag)
            )
            table = TagTable(state)
            answer = table.handle(delivery, datetime.now(UTC))
        except DcbError as exc:  # codec errors included
            await proc.dead_letter(event, NAME, exc)
            return
        tables[key] = table.state.model_dump(mode="json")
        await proc.publish(event, [(TopicRole.TAG_RESOLUTIONS, delivery.service_id, answer)])

    @app.agent(proc.source(TopicRole.TAG_DELIVERIES), name=NAME)
    async def tag_agent(stream: Any) -> None:
        event: EventT[Any]
        async for event in stream.events():
            async with proc.step():
                await handle(event)

    return tables
