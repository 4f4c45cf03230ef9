"""The gate: a projection applies a service's events in SUID order, only up to the prefix
of the newest certificate it trusts, and only once it has read ``dcb.events`` up to that
certificate's coverage (so no event at or below the prefix can still be unread).

Events read above the prefix wait here; the runner's checkpoint keeps the offset of the
first one, so a restart reads them again. An event at or below what was applied already
(a re-read after a restart) is dropped: SUIDs are unique, so that is exact.

The allocator lineage a service's certificates must carry is the one its events carry
(pinned by the first event read): a certificate alone cannot vouch for itself, or a
stray one of another lineage read first would be trusted. Certificates read before any
event are kept per lineage until an event says which one is the service's.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

from streams.model.records import Certificate
from streams.projections.api import ProjectedEvent
from streams.projections.certificates import Trusted, Verdict, judge, trusted_from


@dataclass(frozen=True)
class Waiting:
    """An event read but not applied yet, with where it was read."""

    position: str
    partition: int
    offset: int
    event: ProjectedEvent


@dataclass(frozen=True)
class Release:
    """What one pass of the gate lets through, or why it let nothing through."""

    events: list[ProjectedEvent]
    gated: str | None = None  # the reason events wait, when some do


@dataclass
class ServiceGate:
    service_id: str
    trusted: Trusted | None = None  # the newest certificate of the service's lineage
    applied_through: str | None = None  # every event at or below it has been applied
    lineage: str | None = None  # the allocator lineage of the service's events
    waiting: list[Waiting] = field(default_factory=list)
    unconfirmed: dict[str, Trusted] = field(default_factory=dict)  # lineage unknown yet
    foreign: int = 0  # events read of another lineage than the service's (dropped)

    def offer_certificate(self, certificate: Certificate, key_service: str) -> Verdict:
        if self.lineage is None:
            lineage = certificate.allocator_lineage_id
            verdict = judge(certificate, key_service, self.unconfirmed.get(lineage), None)
            if verdict is Verdict.ACCEPTED:
                self.unconfirmed[lineage] = trusted_from(certificate)
            return verdict
        verdict = judge(certificate, key_service, self.trusted, self.lineage)
        if verdict is Verdict.ACCEPTED:
            self.trusted = trusted_from(certificate)
        return verdict

    def offer_event(self, event: ProjectedEvent, lineage: str, partition: int, offset: int) -> bool:
        """Keep ``event`` until a certificate covers it; ``False`` when it was applied
        already, is waiting already, or is of another lineage than the service's."""
        if self.lineage is None:
            self.lineage = lineage
            self.trusted = self.unconfirmed.get(lineage)
            self.unconfirmed.clear()
        if lineage != self.lineage:
            self.foreign += 1
            return False
        if self.applied_through is not None and event.position <= self.applied_through:
            return False
        at = bisect.bisect_left(self.waiting, event.position, key=_position)
        if at < len(self.waiting) and self.waiting[at].position == event.position:
            return False
        self.waiting.insert(at, Waiting(event.position, partition, offset, event))
        return True

    def release(self, read_to: Mapping[int, int], limit: int | None = None) -> Release:
        """The waiting events the trusted certificate covers, in SUID order, once every
        partition of its coverage has been read to its offset (``read_to``: the next offset
        to read per partition); at most ``limit`` of them (a catch-up over a long history
        goes in bounded passes: every event up to the last one released is in hand, so
        that one is an exact applied point)."""
        t = self.trusted
        if t is None:
            return Release([], "no_certificate" if self.waiting else None)
        if self.applied_through is not None and t.prefix <= self.applied_through:
            return Release([], "awaiting_certificate" if self.waiting else None)
        if any(read_to.get(p, 0) < end for p, end in t.coverage.items()):
            return Release([], "coverage_not_read")
        cut = bisect.bisect_right(self.waiting, t.prefix, key=_position)
        if limit is not None and cut > limit:
            cut = limit
            self.applied_through = self.waiting[cut - 1].position
        else:
            self.applied_through = t.prefix
        released, self.waiting = self.waiting[:cut], self.waiting[cut:]
        return Release(
            [w.event for w in released], "awaiting_certificate" if self.waiting else None
        )

    def hold_from(self) -> dict[int, int]:
        """Per partition, the offset of the first event still waiting."""
        out: dict[int, int] = {}
        for w in self.waiting:
            out[w.partition] = min(out.get(w.partition, w.offset), w.offset)
        return out


def _position(waiting: Waiting) -> str:
    return waiting.position
