"""eventsourcing's DCB recorder on PostgreSQL (``postgres_tt``), on a server the bench starts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streams.bench.peers.api import Condition, Event, PeerStore, PeerSystem, Query, Sequenced
from streams.errors import AppendConditionFailed, PeerUnavailableError
from streams.infra.postgres import LocalPostgres

try:
    from eventsourcing.dcb import api as es
    from eventsourcing.dcb.postgres_tt import PostgresDCBRecorderTT
    from eventsourcing.persistence import IntegrityError
    from eventsourcing.postgres import PostgresDatastore
except ImportError:  # an optional extra
    es = None  # type: ignore[assignment]

# The server refuses connections past its default max_connections, 100 (3 reserved): the
# pool, and as many again in overflow, stays under it; more writers wait for a connection.
MAX_POOL = 45


def _query(query: Query) -> Any:
    return es.DCBQuery(
        items=[es.DCBQueryItem(types=list(i.types), tags=list(i.tags)) for i in query.items]
    )


class EventsourcingStore(PeerStore):
    """A thin adapter; the recorder's connection pool is shared by the writers."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        return [
            Sequenced(e.position, Event(e.event.type, tuple(e.event.tags), bytes(e.event.data)))
            for e in self.recorder.read(_query(query), after=after)
        ]

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        guard = (
            None
            if condition is None
            else es.DCBAppendCondition(
                fail_if_events_match=_query(condition.query), after=condition.after
            )
        )
        try:
            position: int = self.recorder.append(
                [es.DCBEvent(type=e.type, data=e.data, tags=list(e.tags)) for e in events], guard
            )
        except IntegrityError as exc:
            raise AppendConditionFailed("the append condition failed") from exc
        return position


class EventsourcingPostgres(PeerSystem):
    name = "eventsourcing-postgres"
    durability = "PostgreSQL defaults: fsync and synchronous_commit on (WAL flushed per commit)"

    def __init__(self, folder: Path, pool_size: int) -> None:
        self.server = LocalPostgres(folder)
        self.pool_size = min(pool_size, MAX_POOL)
        self._datastore: Any = None
        self._recorder: Any = None

    def start(self) -> None:
        if es is None:
            raise PeerUnavailableError(
                "eventsourcing is not installed: pip install -e '.[bench]'", peer=self.name
            )
        self.server.start()
        self._datastore = PostgresDatastore(
            dbname="postgres",
            host="127.0.0.1",
            port=self.server.port,
            user=self.server.user,
            password="",
            pool_size=self.pool_size,
            max_overflow=self.pool_size,
        )
        self._recorder = PostgresDCBRecorderTT(self._datastore)
        self._recorder.create_table()

    def store(self) -> PeerStore:
        assert self._recorder is not None, "start() first"
        return EventsourcingStore(self._recorder)

    def server_pids(self) -> list[int]:
        pid = self.server.pid()
        return [] if pid is None else [pid]

    def stop(self) -> None:
        if self._datastore is not None:
            self._datastore.close()
        self.server.stop()
