"""The tag processor agent: the thin faust shell around :class:`TagTable`.

Reads ``dcb.tag-deliveries`` (keyed serviceId + tag, so one tag's deliveries are
ordered in one partition), keeps one tag table per (service, tag) — its header in
``tag-tables``, its installed events in ``tag-installed`` (:mod:`streams.tags.store`) —
and answers each delivery on ``dcb.tag-resolutions`` (keyed
serviceId, back to the service's ledger partition) in the same transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from faust.types import EventT

from streams.errors import DcbError
from streams.kafka.live_state import LiveStates
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, delivery_key
from streams.model.records import TagDelivery
from streams.tags import store
from streams.tags.table import TagTable, TagTableState

NAME = "tags"


def register(proc: Processor) -> Any:
    app, partitions = proc.app, proc.settings.topics.tag_partitions
    headers = app.Table("tag-tables", default=None, partitions=partitions, value_type=bytes)
    installed = app.Table("tag-installed", default=None, partitions=partitions, value_type=bytes)
    live: LiveStates[TagTable] = LiveStates(headers)

    def load(key: str, delivery: TagDelivery) -> tuple[TagTable, int]:
        """The table of ``key`` and how many of its installed events are stored."""
        cached = live.take(key)
        if cached is not None:
            return cached, len(cached.state.installed)  # its last step stored them all
        header = headers.get(key)
        if header is None:
            return TagTable(TagTableState(service_id=delivery.service_id, tag=delivery.tag)), 0
        return TagTable(store.restore(key, header, installed.get)), store.rows_stored(header)

    async def handle(event: EventT[Any]) -> None:
        try:
            delivery = proc.decode(event)
            assert isinstance(delivery, TagDelivery)
            key = delivery_key(delivery.service_id, delivery.tag)
            table, before = load(key, delivery)
            answer = table.handle(delivery, datetime.now(UTC))
        except DcbError as exc:  # codec errors included
            await proc.dead_letter(event, NAME, exc)
            return
        writes = store.writes_for(table.state, key, before)
        for row_key, row in writes.installed.items():
            installed[row_key] = row
        headers[key] = writes.header
        live.keep(key, table)
        await proc.publish(event, [(TopicRole.TAG_RESOLUTIONS, delivery.service_id, answer)])

    @app.agent(proc.source(TopicRole.TAG_DELIVERIES), name=NAME)
    async def tag_agent(stream: Any) -> None:
        event: EventT[Any]
        async for event in stream.events():
            async with proc.step():
                await handle(event)

    return headers
