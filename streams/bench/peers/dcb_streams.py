"""dcb-streams as a peer: the embedded broker and one ``dcb worker``, driven through the SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from streams.bench.hops import HopTracer
from streams.bench.peers.api import (
    AsyncPeerStore,
    Condition,
    Event,
    PeerStore,
    PeerSystem,
    Query,
    Sequenced,
)
from streams.cli.services import embedded_broker, running_worker
from streams.infra.broker import EmbeddedBroker
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.topic_admin import delete_topics_with_prefix
from streams.kafka.topic_catalog import owned_prefixes
from streams.model.records import AppendCondition, EventData, QueryItem
from streams.model.suid import format_suid, parse_suid
from streams.model.uuid7 import uuid7
from streams.sdk import AppendResult, AsyncDcbClient, DcbClient, ReadResult, SequencedEvent
from streams.settings import DcbSettings

SERVICE = "courses"


def _items(query: Query) -> list[QueryItem]:
    return [QueryItem(types=list(i.types), tags=list(i.tags)) for i in query.items]


def _suid(position: int | None) -> str | None:
    return None if position is None else format_suid(position)


def _sequenced(e: SequencedEvent) -> Sequenced:
    event = e.event
    return Sequenced(
        parse_suid(e.position), Event(event.event_type, tuple(event.tags), event.payload.encode())
    )


class _Converted:
    """The bench's form of each event read, made once per event: the SDK hands every read
    the events its index holds (no copy per read), so converting them again for every read
    was the adapter's cost, not the store's (7% of the client's time at 64 writers)."""

    def __init__(self) -> None:
        self._by_position: dict[str, Sequenced] = {}  # positions are unique in a service

    def of(self, e: SequencedEvent) -> Sequenced:
        found = self._by_position.get(e.position)
        if found is None:
            found = self._by_position[e.position] = _sequenced(e)
        return found


class _Adapted:
    """The bench's calls in the SDK's terms, for a blocking and an asyncio writer alike. A
    condition that names no position, on the query of this writer's last read, which
    found nothing, gets that read's head as its ``after``, as an application using the SDK
    would pass it: no event matched up to the head, so the condition means the same."""

    def __init__(self, system: DcbStreams) -> None:
        self.system = system
        self._nothing_until: tuple[Query, str | None] | None = None  # query, its read's head

    def _found(self, query: Query, after: int | None, found: ReadResult) -> list[Sequenced]:
        self._nothing_until = (query, found.head) if after is None and not found else None
        converted = self.system.converted
        return [converted.of(e) for e in found]

    def _attempt(
        self, events: Sequence[Event], condition: Condition | None
    ) -> tuple[list[EventData], AppendCondition | None]:
        now = datetime.now(UTC)
        data = [
            EventData(
                event_id=str(uuid7()),  # as the SDK's Event makes one
                event_type=e.type,
                tags=list(e.tags),
                payload=e.data.decode(),
                timestamp=now,
            )
            for e in events
        ]
        if condition is None:
            return data, None
        after = _suid(condition.after)
        if after is None and self._nothing_until and self._nothing_until[0] == condition.query:
            after = self._nothing_until[1]
        return data, AppendCondition(fail_if_events_match=_items(condition.query), after=after)

    def _appended(self, result: AppendResult, sent: datetime) -> int:
        if (tracer := self.system.tracer) is not None:
            tracer.sent(result.attempt_id, sent, datetime.now(UTC))
        return parse_suid(result.suids[-1])


class DcbStreamsStore(_Adapted, PeerStore):
    """A blocking writer's store (the bench's own reads, and the contract tests)."""

    def __init__(self, system: DcbStreams, client: DcbClient) -> None:
        super().__init__(system)
        self.client = client

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        return self._found(query, after, self.client.read(_items(query), after=_suid(after)))

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        sent = datetime.now(UTC)
        return self._appended(self.client.append(*self._attempt(events, condition)), sent)


class DcbStreamsAsyncStore(_Adapted, AsyncPeerStore):
    """A coroutine writer's store: the writers share one ``AsyncDcbClient``."""

    def __init__(self, system: DcbStreams, client: AsyncDcbClient) -> None:
        super().__init__(system)
        self.client = client

    async def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        found = await self.client.read(_items(query), after=_suid(after))
        return self._found(query, after, found)

    async def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        sent = datetime.now(UTC)
        return self._appended(await self.client.append(*self._attempt(events, condition)), sent)


class DcbStreams(PeerSystem):
    """One client shared by every writer, as an application would share it: writers are
    coroutines of one event loop sharing an ``AsyncDcbClient`` (``coroutines=False``: threads
    sharing a ``DcbClient``). The run's topics are deleted at ``stop``."""

    name = "dcb-streams"
    durability = (
        "Kafka defaults: acknowledged once in the broker's page cache (no fsync per "
        "commit; durability comes from replication, here 1 broker)"
    )

    def __init__(self, settings: DcbSettings, log: Path, coroutines: bool = True) -> None:
        self.settings = settings
        self.writes_in_asyncio = coroutines
        if not coroutines:
            self.name = f"{DcbStreams.name}-threads"
        self.log = log
        self._stack = ExitStack()
        self._worker: WorkerProcess | None = None
        self._client: DcbClient | None = None
        self._async: tuple[asyncio.AbstractEventLoop, AsyncDcbClient] | None = None
        self.tracer: HopTracer | None = None  # set while a scenario's hops are traced
        self.converted = _Converted()  # shared by the writers

    def start(self) -> None:
        self._stack.enter_context(embedded_broker(self.settings, keep=False, quiet=True))
        self._stack.callback(self._delete_topics)  # once the worker has stopped
        self._worker = self._stack.enter_context(running_worker(self.settings, self.log))
        self._client = self._stack.enter_context(
            DcbClient(service_id=SERVICE, settings=self.settings, timeout_s=60)
        )

    def store(self) -> PeerStore:
        assert self._client is not None, "start() first"
        return DcbStreamsStore(self, self._client)

    def async_store(self) -> AsyncPeerStore:
        """A store on the client of the running event loop, sharing the blocking client's
        producer, listener and index (one asyncio client serves one loop)."""
        assert self._client is not None, "start() first"
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._async = (loop, AsyncDcbClient.wrapping(self._client))
        return DcbStreamsAsyncStore(self, self._async[1])

    def worker_pid(self) -> int | None:
        """The processors' process (the ``dcb worker`` process's supervised child)."""
        if self._worker is None:
            return None
        return self._worker.child_pid()

    def server_pids(self) -> list[int]:
        pids = []
        broker = EmbeddedBroker(self.settings.broker).status()
        if broker.pid is not None:
            pids.append(broker.pid)
        if self._worker is not None and self._worker.proc is not None:
            pids.append(self._worker.proc.pid)
        return pids

    def _delete_topics(self) -> None:
        delete_topics_with_prefix(
            clients.admin(self.settings.kafka),
            owned_prefixes(self.settings),
        )

    def stop(self) -> None:
        self._stack.close()
