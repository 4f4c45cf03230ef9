"""The in-process objects behind the table headers this process last wrote.

Rebuilding a ledger or a tag table from its table rows on every step (JSON → validated
models) was the agents' largest cost under load. An object is reused only while the
table still holds the very header object written with it, so a changelog restore or a
rebalance (new objects) always rebuilds, and a step that fails never leaves one behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LiveStates(Generic[T]):
    def __init__(self, headers: Mapping[str, Any]) -> None:
        self._headers = headers
        self._live: dict[str, tuple[object, T]] = {}

    def take(self, key: str) -> T | None:
        """The object kept for ``key`` while its header is unchanged; it is no longer kept."""
        cached = self._live.pop(key, None)
        header = self._headers.get(key)
        if cached is None or header is None or cached[0] is not header:
            return None
        return cached[1]

    def keep(self, key: str, value: T) -> None:
        """Keep ``value`` beside the header the table now holds for ``key``."""
        self._live[key] = (self._headers.get(key), value)
