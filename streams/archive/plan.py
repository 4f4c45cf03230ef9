"""What an archive run does, decided from what the log and the archive hold (pure).

``dcb archive --service S --through X`` moves S's events with SUIDs up to X into
segments, then lets ``dcb.events`` drop a prefix. A partition of ``dcb.events`` holds the
events of every service whose id hashes there, so it can drop records only below the
first one that is not yet archived, whichever service it belongs to, and never past what
a projection still has to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from streams.archive.api import Segment, SegmentHeader
from streams.archive.exceptions import ArchiveNotCertifiedError
from streams.archive.rules import check_incarnation


@dataclass(frozen=True)
class LogRecord:
    """One committed event as ``dcb.events`` holds it: where, whose, and its bytes."""

    offset: int
    service_id: str
    suid: str
    lineage: str  # the allocator lineage: the incarnation of the service's history
    value: bytes


def archived_through(headers: Sequence[SegmentHeader]) -> str | None:
    return headers[-1].through_suid if headers else None


def plan_segments(
    service: str,
    log: Iterable[LogRecord],
    held: Sequence[SegmentHeader],
    through: str,
    certified: str | None,
    max_records: int,
) -> list[Segment]:
    """The segments that bring ``service``'s archive up to ``through``: its records above
    what is archived, in log order (which is SUID order for one service), at most
    ``max_records`` a segment; the last segment ends at ``through`` itself, so the next
    run starts after it. ``through`` must be at or below the certified prefix: no event at
    or below it can commit any more."""
    if certified is None or through > certified:
        raise ArchiveNotCertifiedError(
            f"{service}: {through} is above the certified prefix ({certified or 'none yet'}); "
            "only certified history can be archived",
            service=service,
            through=through,
            certified=certified,
        )
    start = archived_through(held)
    if start is not None and through <= start:
        return []  # archived already: a retry after a crash, say
    chosen = [
        r
        for r in log
        if r.service_id == service and r.suid <= through and (start is None or r.suid > start)
    ]
    if not chosen:
        return []
    incarnation = held[0].incarnation if held else chosen[0].lineage
    for record in chosen:
        check_incarnation(service, incarnation, record.lineage)
    chunks = [chosen[i : i + max_records] for i in range(0, len(chosen), max_records)]
    return [
        Segment.of(
            chunk[0].suid,
            through if last else chunk[-1].suid,
            [r.value for r in chunk],
            incarnation,
        )
        for last, chunk in ((i == len(chunks) - 1, c) for i, c in enumerate(chunks))
    ]


def truncation_offset(
    log: Iterable[LogRecord], archived: Mapping[str, str | None], end: int
) -> int:
    """The offset below which one partition may drop records: the first record (in
    offset order) whose service's archive does not cover its SUID, else ``end``."""
    for record in log:
        through = archived.get(record.service_id)
        if through is None or record.suid > through:
            return record.offset
    return end


def merged_history(
    archived: Sequence[LogRecord],
    archived_to: str | None,
    log: Iterable[LogRecord],
    service: str,
) -> list[LogRecord]:
    """A service's whole history in SUID order: the archive's events, then the log's
    above what the archive covers (the log may still hold archived events)."""
    above = [
        r for r in log if r.service_id == service and (archived_to is None or r.suid > archived_to)
    ]
    return [*archived, *above]
