"""Opening the sealed payloads of events as readers meet them (SDK reads, projections)."""

from __future__ import annotations

from collections.abc import Callable

from streams.erasure.keys import KeyStore
from streams.erasure.sealing import open_payload
from streams.model.records import EventData


class KeyLookup:
    """Keys looked up at most once each for one batch of reading: a batch made after an
    erasure sees it. The store is asked for (``keys()``) only when a payload is sealed."""

    def __init__(self, keys: Callable[[], KeyStore]) -> None:
        self.keys = keys
        self._found: dict[str, bytes | None] = {}

    def __call__(self, subject: str) -> bytes | None:
        if subject not in self._found:
            self._found[subject] = self.keys().key_for_reading(subject)
        return self._found[subject]


def open_event(event: EventData, lookup: KeyLookup) -> EventData:
    """``event`` with its payload in the clear, or the shredded marker once erased; the
    same object when its payload is not sealed."""
    payload = open_payload(event.payload, event.event_id, lookup)
    return event if payload is event.payload else event.model_copy(update={"payload": payload})
