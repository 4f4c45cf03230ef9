"""The events a client has read, indexed by tag and by type, so a read costs what it matches.

``DcbClient.read`` used to test every event of the service read so far against the
query: the DCB loop (read what a decision rests on, append under that query) slowed as
the service's history grew. Events keep the order they were read in from ``dcb.events``
(SUID order), and a read returns them in that order, repeats included: the tests'
oracles read through the client and must see the log as it is.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain

from pydantic import BaseModel

from streams.model.query import item_matches
from streams.model.records import EventData, QueryItem


class SequencedEvent(BaseModel):
    position: str
    event: EventData


class EventIndex:
    def __init__(self) -> None:
        self._events: list[SequencedEvent] = []
        self._ascending = True  # positions strictly increase so far: ``after`` can bisect
        self._by_tag: defaultdict[str, list[int]] = defaultdict(list)
        self._by_type: defaultdict[str, list[int]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self._events)

    @property
    def head(self) -> str | None:
        """The greatest position read so far."""
        if not self._events:
            return None
        if self._ascending:
            return self._events[-1].position
        return max(e.position for e in self._events)

    def add(self, event: SequencedEvent) -> None:
        index = len(self._events)
        if self._events and event.position <= self._events[-1].position:
            self._ascending = False
        self._events.append(event)
        for tag in set(event.event.tags):
            self._by_tag[tag].append(index)
        self._by_type[event.event.event_type].append(index)

    def select(
        self, query: Sequence[QueryItem], after: str | None = None, limit: int | None = None
    ) -> list[SequencedEvent]:
        """The events matching ``query`` (every event when empty) above ``after``, as read."""
        first = bisect_right(self._events, after, key=_position) if after and self._ascending else 0
        hits: Iterable[int]
        if not query or any(not item.types and not item.tags for item in query):
            hits = range(first, len(self._events))
        else:
            hits = sorted(set(chain.from_iterable(self._hits(item, first) for item in query)))
        out = [
            self._events[i]
            for i in hits
            if after is None or self._events[i].position > after  # unordered positions
        ]
        return out if limit is None else out[:limit]

    def _hits(self, item: QueryItem, first: int) -> Iterable[int]:
        """Indexes from ``first`` on of the events ``item`` matches (it has a type or a tag)."""
        if not item.tags:
            return chain.from_iterable(_from(self._by_type.get(t, []), first) for t in item.types)
        shortest = min((self._by_tag.get(t, []) for t in item.tags), key=len)
        return (
            i
            for i in _from(shortest, first)
            if item_matches(item, self._events[i].event.event_type, self._events[i].event.tags)
        )


def _position(event: SequencedEvent) -> str:
    return event.position


def _from(indexes: list[int], first: int) -> list[int]:
    return indexes[bisect_left(indexes, first) :] if first else indexes
