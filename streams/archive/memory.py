"""The archive in memory: the reference backend (tests, and the model of the others)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from streams.archive.api import ArchiveStore, KeyPage, Segment, SegmentHeader
from streams.archive.rules import (
    canonical_bytes,
    check_unchanged,
    classify_append,
    verified,
)


class MemoryArchive(ArchiveStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Per key, its headers and each segment's canonical bytes (as a backend stores them).
        self._keys: dict[str, list[tuple[SegmentHeader, bytes]]] = {}

    def _append(self, key: str, segment: Segment) -> None:
        with self._lock:
            held = self._keys.get(key, [])
            if classify_append(key, [h for h, _ in held], segment.header) == "append":
                self._keys[key] = [*held, (segment.header, canonical_bytes(segment.records))]

    def _headers(self, key: str) -> list[SegmentHeader]:
        with self._lock:
            return [h for h, _ in self._keys.get(key, [])]

    def _read(
        self, key: str, from_suid: str | None = None, through_suid: str | None = None
    ) -> list[Segment]:
        with self._lock:
            held = list(self._keys.get(key, []))
        return [
            Segment(header=h, records=tuple(verified(key, h, body)))
            for h, body in held
            if h.overlaps(from_suid, through_suid)
        ]

    def _list_keys(self, cursor: str | None = None, limit: int = 100) -> KeyPage:
        with self._lock:
            keys = sorted(k for k, held in self._keys.items() if held)
        after = [k for k in keys if cursor is None or k > cursor]
        page = after[:limit]
        return KeyPage(keys=page, next_cursor=page[-1] if len(after) > limit else None)

    def _replace_all(
        self, key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
    ) -> None:
        with self._lock:
            held = self._keys.get(key, [])
            check_unchanged(key, [h for h, _ in held], expected)
            self._keys[key] = [(s.header, canonical_bytes(s.records)) for s in segments]

    def _delete_key(self, key: str) -> None:
        with self._lock:
            self._keys.pop(key, None)
