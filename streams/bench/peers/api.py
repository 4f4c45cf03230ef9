"""What the peer bench needs of a DCB event store, and the value types it speaks.

Each system the bench compares implements :class:`PeerSystem` (start a server, hand out
clients, name its server processes for CPU accounting, stop) and :class:`PeerStore`
(the DCB read and conditional append, plus a whole-log read for the oracle). Positions
are integers here whatever the system calls them, so one fold checks every log.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType


@dataclass(frozen=True)
class Event:
    """``data`` is UTF-8 JSON text, which every system stores as it is given (dcb-streams
    keeps payloads as JSON): a read hands it back without parsing it, as an application
    would until it needs it."""

    type: str
    tags: tuple[str, ...]
    data: bytes = b"{}"


@dataclass(frozen=True)
class QueryItem:
    """Matches an event whose type is in ``types`` (any when empty) carrying all ``tags``."""

    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def matches(self, event: Event) -> bool:
        return (not self.types or event.type in self.types) and set(self.tags) <= set(event.tags)


@dataclass(frozen=True)
class Query:
    items: tuple[QueryItem, ...] = ()

    def matches(self, event: Event) -> bool:
        return not self.items or any(item.matches(event) for item in self.items)


@dataclass(frozen=True)
class Condition:
    """Fail the append if an event matching ``query`` exists after ``after``."""

    query: Query
    after: int | None = None


@dataclass(frozen=True)
class Sequenced:
    position: int
    event: Event


class PeerStore(ABC):
    """One client of a running system; each bench writer thread has its own."""

    @abstractmethod
    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        """Events matching ``query`` after ``after``, in position order."""

    @abstractmethod
    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        """Append atomically; the position of the last event.

        Raises :class:`streams.errors.AppendConditionFailed` when the condition fails.
        """

    def read_all(self) -> list[Sequenced]:
        """The whole log in position order (for the oracle fold)."""
        return self.read(Query())

    def close(self) -> None:  # noqa: B027 - most clients need nothing
        """Release the client's connections."""


class AsyncPeerStore(ABC):
    """:class:`PeerStore` for a writer that is a coroutine, made in the writers' event loop."""

    @abstractmethod
    async def read(self, query: Query, after: int | None = None) -> list[Sequenced]: ...

    @abstractmethod
    async def append(self, events: Sequence[Event], condition: Condition | None = None) -> int: ...

    async def close(self) -> None:  # noqa: B027 - most clients need nothing
        """Release the client's connections."""


class PeerSystem(ABC):
    """A system under test: started by the bench, measured, stopped."""

    name: str
    durability: str  # what an acknowledged append survives, stated next to the numbers
    detail: str = ""  # which build or version ran, when that can differ
    # Writers as coroutines of one event loop (each with an :meth:`async_store`), for a
    # client native to asyncio; else threads (each with a :meth:`store`).
    writes_in_asyncio: bool = False

    def async_store(self) -> AsyncPeerStore:
        """A new client for a coroutine writer, made in the writers' event loop."""
        raise NotImplementedError(f"{self.name}'s writers are threads")

    @abstractmethod
    def start(self) -> None:
        """Start the server(s); raises :class:`streams.errors.PeerUnavailableError`."""

    @abstractmethod
    def store(self) -> PeerStore:
        """A new client."""

    @abstractmethod
    def server_pids(self) -> list[int]:
        """The processes whose CPU time counts as the system's server CPU."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what :meth:`start` started."""

    def __enter__(self) -> PeerSystem:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
