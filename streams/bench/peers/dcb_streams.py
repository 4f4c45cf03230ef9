"""dcb-streams as a peer: the embedded broker and one ``dcb worker``, driven through the SDK."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from streams.bench.hops import HopTracer
from streams.bench.peers.api import Condition, Event, PeerStore, PeerSystem, Query, Sequenced
from streams.cli.services import embedded_broker, running_worker
from streams.infra.broker import EmbeddedBroker
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.topic_admin import delete_topics_with_prefix
from streams.kafka.topic_catalog import owned_prefixes
from streams.model.records import AppendCondition, EventData, QueryItem
from streams.model.suid import format_suid, parse_suid
from streams.model.uuid7 import uuid7
from streams.sdk import DcbClient, SequencedEvent
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


class DcbStreamsStore(PeerStore):
    """One writer's store. A condition that names no position, on the query of this
    writer's last read, which found nothing, gets that read's head as its ``after``, as
    an application using the SDK would pass it: no event matched up to the head, so the
    condition means the same."""

    def __init__(self, system: DcbStreams, client: DcbClient) -> None:
        self.system = system
        self.client = client
        self._nothing_until: tuple[Query, str | None] | None = None  # query, its read's head

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        found = self.client.read(_items(query), after=_suid(after))
        self._nothing_until = (query, found.head) if after is None and not found else None
        converted = self.system.converted
        return [converted.of(e) for e in found]

    def _after(self, condition: Condition) -> str | None:
        if condition.after is not None:
            return _suid(condition.after)
        if self._nothing_until is not None and self._nothing_until[0] == condition.query:
            return self._nothing_until[1]
        return None

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
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
        guard = (
            None
            if condition is None
            else AppendCondition(
                fail_if_events_match=_items(condition.query), after=self._after(condition)
            )
        )
        sent = datetime.now(UTC)
        result = self.client.append(data, guard)
        if (tracer := self.system.tracer) is not None:
            tracer.sent(result.attempt_id, sent, datetime.now(UTC))
        return parse_suid(result.suids[-1])


class DcbStreams(PeerSystem):
    """One client shared by every writer, as an application would share it; the run's
    topics are deleted at ``stop``."""

    name = "dcb-streams"
    durability = (
        "Kafka defaults: acknowledged once in the broker's page cache (no fsync per "
        "commit; durability comes from replication, here 1 broker)"
    )

    def __init__(self, settings: DcbSettings, log: Path) -> None:
        self.settings = settings
        self.log = log
        self._stack = ExitStack()
        self._worker: WorkerProcess | None = None
        self._client: DcbClient | None = None
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
