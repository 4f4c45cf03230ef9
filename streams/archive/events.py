"""Archived history as committed events: what readers (the SDK, projections, audit, erase)
take from segments, and the archived services, a page at a time."""

from __future__ import annotations

from collections.abc import Iterator

from streams.archive.api import ArchiveStore, Segment, SegmentHeader
from streams.codec import AvroCodec
from streams.model.records import CommittedEvent

KEYS_PER_PAGE = 500


def segment_events(segment: Segment, codec: AvroCodec) -> Iterator[tuple[CommittedEvent, bytes]]:
    """A segment's events decoded, in order, each with its exact bytes."""
    for value in segment.records:
        yield CommittedEvent.from_bytes(codec, value), value


def archived_events(
    store: ArchiveStore, key: str, codec: AvroCodec, from_suid: str | None = None
) -> Iterator[tuple[SegmentHeader, CommittedEvent]]:
    """Each archived event of ``key`` in SUID order (the segments overlapping
    ``from_suid`` onwards), decoded, with its segment's header."""
    for segment in store.read(key, from_suid=from_suid):
        for event, _ in segment_events(segment, codec):
            yield segment.header, event


def all_keys(store: ArchiveStore) -> Iterator[str]:
    """Every archived service, in code-point order, a page at a time."""
    cursor = None
    while True:
        page = store.list_keys(cursor, KEYS_PER_PAGE)
        yield from page.keys
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
