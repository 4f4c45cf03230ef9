"""The DCB names a program writes with: ``Event``, ``Query``, and what ``read`` returns.

``Event(type, data, tags)`` is all an event needs: its id (a UUID v7, so later ids sort
later) and its timestamp are filled in. ``data`` is JSON text (``str`` or UTF-8
``bytes``) or any object ``json.dumps`` takes; text that is not JSON is kept as a JSON
string. A ``Query`` is a sequence of ``QueryItem``s (none: every event), usable wherever
a list of them is, an ``AppendCondition`` included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.model.records import EventData, QueryItem
from streams.model.uuid7 import uuid7
from streams.sdk.event_index import SequencedEvent


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def json_text(data: Any) -> str:
    """``data`` as the JSON text of a payload. Text is kept when it is JSON (RFC 8259:
    Python's ``json`` also reads ``NaN`` and ``Infinity``, which are not), else it becomes
    a JSON string."""
    if isinstance(data, bytes):
        data = data.decode()
    if isinstance(data, str):
        try:
            json.loads(data, parse_constant=_not_json)
        except ValueError:
            return json.dumps(data)
        return data
    return json.dumps(data)


@dataclass(frozen=True)
class Event:
    type: str
    data: Any = None
    tags: Iterable[str] = ()
    id: str = field(default_factory=lambda: str(uuid7()))
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    causation_id: str | None = None
    correlation_id: str | None = None
    executed_user: str | None = None

    def stored(self) -> EventData:
        """The event as it is sent and stored (its data as JSON text)."""
        return EventData(
            event_id=self.id,
            event_type=self.type,
            payload=json_text(self.data),
            tags=list(self.tags),
            timestamp=self.timestamp,
            causation_id=self.causation_id,
            correlation_id=self.correlation_id,
            executed_user=self.executed_user,
        )


class Query(tuple[QueryItem, ...]):
    """Events matching any of its items; a query without items matches every event."""

    def __new__(cls, items: Iterable[QueryItem] = ()) -> Query:
        return super().__new__(cls, items)

    @classmethod
    def all(cls) -> Query:
        return cls()

    @classmethod
    def of(cls, *, types: Iterable[str] = (), tags: Iterable[str] = ()) -> Query:
        """A query of one item: events of one of ``types`` carrying every one of ``tags``."""
        return cls([QueryItem(types=list(types), tags=list(tags))])


class ReadResult(list[SequencedEvent]):
    """The events a read found, in position order, and the ``head``: the position of the
    service's last event the read saw, matching or not. Appending with ``after=head`` in
    the condition fails if a matching event came after the read (optimistic locking)."""

    def __init__(self, events: Iterable[SequencedEvent], head: str | None) -> None:
        super().__init__(events)
        self.head = head
