"""The tag table of one (service, tag): the functional core of the tag processor.

PREPARE checks the attempt's append condition (the items guarded at this tag) against
installed events after the condition's position and against other attempts' pending
reservations (a pending event that would match blocks, conservatively), checks the
writer epoch, then reserves. INSTALL turns the reservation into a visible event;
FENCE drops it and leaves a tombstone that answers every later delivery for that
SUID. Every answer is idempotent: a redelivered record gets the same answer. A
delivery also says how far the ledger has settled the service (its closed prefix: at
or below it every target is installed or fenced, at every tag); there a SUID the table
does not hold installed was fenced (or was a check-only target: it leaves no trace), so
its tombstone goes, and so would a reservation (a contended tag, whose refused attempts
each left a tombstone, would otherwise grow its header without end). A
one-phase attempt's targets are decided together, across tables, by
:mod:`streams.tags.partition`.
"""

from __future__ import annotations

import json
import sys
from bisect import insort
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from streams.errors import ConditionBelowArchiveError, StaleFenceError, TagProtocolError
from streams.model.digests import obligation_digest
from streams.model.query import item_matches, items_guarded_at
from streams.model.records import ErrorInfo, QueryItem, TagDelivery, TagResolution

ResolutionStatus = Literal[
    "PREPARED", "REJECTED", "INSTALLED_AND_COVERED", "ABSENT_AND_IRREVOCABLY_FENCED"
]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class InstalledEvent:
    """An event installed at the tag. A tag table keeps every one until a trim drops the
    archived ones (conditions are checked against them), so they are slotted, with their
    type and tags interned however they are made (pydantic calls ``__post_init__`` too):
    ~290 bytes each beside their id strings, against ~1,290 as a pydantic model."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    suid: str
    attempt_id: str
    event_id: str
    event_type: str
    tags: tuple[str, ...]
    obligation_digest: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "event_type", sys.intern(self.event_type))
        object.__setattr__(self, "tags", tuple(sys.intern(tag) for tag in self.tags))


@dataclass(frozen=True, slots=True)
class Reservation(InstalledEvent):
    """A prepared candidate; ``check_only`` when the tag guards a condition but the event
    does not carry it (it reserves the check, not a place in the tag)."""

    check_only: bool

    def installed(self) -> InstalledEvent:
        return InstalledEvent(
            suid=self.suid,
            attempt_id=self.attempt_id,
            event_id=self.event_id,
            event_type=self.event_type,
            tags=self.tags,
            obligation_digest=self.obligation_digest,
        )


INSTALLED_ROW: TypeAdapter[InstalledEvent] = TypeAdapter(InstalledEvent)


class TagTableState(_Row):
    service_id: str
    tag: str
    writer_epoch: int = 0
    head: str | None = None
    installed: list[InstalledEvent] = Field(default_factory=list)
    reservations: dict[str, Reservation] = Field(default_factory=dict)
    tombstones: dict[str, int] = Field(default_factory=dict)
    # The newest SUID of the installed events dropped because they are archived (TRIM),
    # and how many were dropped from the front of ``installed`` (store order) so far;
    # the greatest SUID a TRIM named (tombstones at or below it are dropped too).
    trimmed_through: str | None = None
    installed_offset: int = 0
    archived_through: str | None = None
    # The greatest closed prefix a delivery carried: at or below it, what is not
    # installed is fenced (its tombstone is dropped).
    settled_through: str | None = None


class TagTable:
    def __init__(self, state: TagTableState) -> None:
        self.state = state
        # Every delivery asks whether its SUID is installed; searching the list cost a
        # busy tag (an invoice sequence) a pass over its whole history per delivery.
        self._installed_by_suid = {e.suid: e for e in state.installed}
        # Conditions look back from the newest SUID to their position. Two-phase installs
        # can come out of SUID order (an attempt's other tag answered later), so the
        # installed list (kept in the order its rows were stored) is not that order.
        self._by_position = sorted(state.installed, key=_suid)

    def handle(self, delivery: TagDelivery) -> TagResolution:
        """A two-phase delivery: vote on a PREPARE, or carry out the ledger's decision."""
        answer = self.terminal_answer(delivery)
        if answer is not None:
            return answer
        if delivery.action == "PREPARE":
            return self.prepare(delivery)
        if delivery.action == "FENCE":
            return self.fence(delivery, delivery.fence_epoch or 0)
        return self.install(delivery)

    def terminal_answer(self, delivery: TagDelivery) -> TagResolution | None:
        """The evidence again, when the target is installed or fenced already (first
        taking in how far the delivery says the ledger has settled)."""
        s = self.state
        self._settle(delivery.settled_through)
        if delivery.suid in s.tombstones:
            return self._answer(delivery, "ABSENT_AND_IRREVOCABLY_FENCED")
        installed = self._installed_by_suid.get(delivery.suid)
        if installed is not None:
            return self._answer(
                delivery, "INSTALLED_AND_COVERED", digest=installed.obligation_digest
            )
        if s.archived_through is not None and delivery.suid <= s.archived_through:
            # A trim comes after its SUIDs are certified: every attempt at or below it was
            # decided, and its deliveries were stepped before the trim's.
            raise TagProtocolError(
                f"a {delivery.action} of {delivery.suid} at {s.tag}, at or below what the "
                f"table trimmed ({s.archived_through}): its attempt was decided before",
                suid=delivery.suid,
                tag=s.tag,
            )
        if s.settled_through is not None and delivery.suid <= s.settled_through:
            # Settled and not installed here: fenced (its tombstone was dropped), fenced
            # before this table heard of it, or a check-only target. The ledger has every
            # target there terminal already, so it ignores the answer.
            return self._answer(delivery, "ABSENT_AND_IRREVOCABLY_FENCED")
        return None

    def _settle(self, through: str | None) -> None:
        s = self.state
        if through is None or (s.settled_through is not None and through <= s.settled_through):
            return
        s.settled_through = through
        _drop_through(s.tombstones, through)
        _drop_through(s.reservations, through)  # only a late PREPARE could leave one

    def trim(self, through: str) -> range:
        """Drop the installed events at or below ``through`` (archived), from the front of
        the store order while they are: an event installed out of SUID order stays until
        those before it go (it is still checked, so nothing is lost). Conditions whose
        position lies below the newest dropped SUID are refused from now on. Tombstones
        at or below ``through`` go too: no delivery of theirs can come any more. The
        store indexes of the dropped rows."""
        s = self.state
        s.archived_through = max(s.archived_through or through, through)
        _drop_through(s.tombstones, through)
        dropped = 0
        while dropped < len(s.installed) and s.installed[dropped].suid <= through:
            dropped += 1
        if not dropped:
            return range(s.installed_offset, s.installed_offset)
        gone = s.installed[:dropped]
        del s.installed[:dropped]
        for event in gone:
            del self._installed_by_suid[event.suid]
        suids = {event.suid for event in gone}
        self._by_position = [e for e in self._by_position if e.suid not in suids]
        newest = max(suids)
        s.trimmed_through = max(s.trimmed_through or newest, newest)
        first = s.installed_offset
        s.installed_offset += dropped
        return range(first, s.installed_offset)

    def fence(
        self,
        delivery: TagDelivery,
        epoch: int,
        rejection: ErrorInfo | None = None,
    ) -> TagResolution:
        """Drop the reservation and leave a tombstone: the target can never install."""
        s = self.state
        s.reservations.pop(delivery.suid, None)
        s.tombstones[delivery.suid] = epoch
        return self._answer(delivery, "ABSENT_AND_IRREVOCABLY_FENCED", rejection=rejection)

    def install(self, delivery: TagDelivery) -> TagResolution:
        s = self.state
        reservation = s.reservations.pop(delivery.suid, None)
        if reservation is None:
            raise TagProtocolError(
                f"INSTALL of {delivery.suid} at {s.tag} without a reservation",
                suid=delivery.suid,
                tag=s.tag,
            )
        if not reservation.check_only:
            event = reservation.installed()
            s.installed.append(event)
            self._installed_by_suid[event.suid] = event
            insort(self._by_position, event, key=_suid)
            s.head = max(s.head or reservation.suid, reservation.suid)
        return self._answer(delivery, "INSTALLED_AND_COVERED", digest=reservation.obligation_digest)

    def prepare(self, delivery: TagDelivery, digest: str | None = None) -> TagResolution:
        """Check the condition and the writer epoch; reserve and vote PREPARED, or REJECTED.
        ``digest``: the event's obligation digest, when the caller has it already."""
        refusal = self.reserve(delivery, digest)
        if refusal is None:
            return self._answer(delivery, "PREPARED")
        return self._answer(delivery, "REJECTED", rejection=refusal)

    def reserve(self, delivery: TagDelivery, digest: str | None = None) -> ErrorInfo | None:
        """:meth:`prepare`'s vote without its answer: ``None`` when the target is reserved
        (now or before), else why it was refused. A one-phase step answers only with the
        outcome, so its votes need no answer of their own."""
        s = self.state
        if delivery.suid in s.reservations:
            return None
        if delivery.writer_epoch < s.writer_epoch:
            stale = StaleFenceError.of(
                f"tag {s.tag} (writer epoch)", delivery.writer_epoch, s.writer_epoch
            )
            return ErrorInfo.of(stale)
        event = delivery.event
        if event is None:
            return _refusal("invalid_delivery", "PREPARE without its event", {})
        conflict = self._conflict(delivery)
        if conflict is not None:
            pending = conflict.suid in s.reservations
            return _refusal(
                "append_condition_failed",
                f"an event matching the condition {'is pending' if pending else 'exists'} "
                f"at tag {s.tag}",
                {"tag": s.tag, "conflictingSuid": conflict.suid, "pending": pending},
            )
        if self._below_trim(delivery):
            return _refusal(
                ConditionBelowArchiveError.code,
                f"the condition's position lies below what tag {s.tag} dropped (archived "
                f"through {s.trimmed_through}); read the query again and retry",
                {"tag": s.tag, "trimmedThrough": s.trimmed_through},
            )
        s.writer_epoch = delivery.writer_epoch
        s.reservations[delivery.suid] = Reservation(
            suid=delivery.suid,
            attempt_id=delivery.attempt_id,
            event_id=event.event_id,
            event_type=event.event_type,
            tags=tuple(event.tags),
            obligation_digest=digest or obligation_digest(event),
            check_only=s.tag not in event.tags,
        )
        return None

    def _below_trim(self, delivery: TagDelivery) -> bool:
        """Whether the condition guarded here looks back past what this table dropped."""
        trimmed, condition = self.state.trimmed_through, delivery.condition
        if trimmed is None or condition is None:
            return False
        if not items_guarded_at(condition, self.state.tag):
            return False
        return condition.after is None or condition.after < trimmed

    def _conflict(self, delivery: TagDelivery) -> InstalledEvent | None:
        condition = delivery.condition
        if condition is None:
            return None
        items = items_guarded_at(condition, self.state.tag)
        if not items:
            return None

        def hit(event: InstalledEvent) -> bool:
            return any(_matches(item, event) for item in items)

        after = condition.after
        for installed in reversed(self._by_position):
            if after is not None and installed.suid <= after:
                break
            if hit(installed):
                return installed
        for reservation in self.state.reservations.values():
            if (
                reservation.attempt_id != delivery.attempt_id
                and not reservation.check_only
                and hit(reservation)
            ):
                return reservation
        return None

    def _answer(
        self,
        delivery: TagDelivery,
        status: ResolutionStatus,
        digest: str | None = None,
        rejection: ErrorInfo | None = None,
    ) -> TagResolution:
        return TagResolution(
            **delivery.target_fields(),
            status=status,
            obligation_digest=digest,
            tombstone_epoch=self.state.tombstones.get(delivery.suid),
            rejection=rejection,
        )


def _refusal(code: str, message: str, details: dict[str, object]) -> ErrorInfo:
    return ErrorInfo(code=code, message=message, details_json=json.dumps(details))


def _drop_through(by_suid: dict[str, Any], through: str) -> None:
    """Delete the entries keyed by a SUID at or below ``through``."""
    for suid in [suid for suid in by_suid if suid <= through]:
        del by_suid[suid]


def _suid(event: InstalledEvent) -> str:
    return event.suid


def _matches(item: QueryItem, event: InstalledEvent) -> bool:
    return item_matches(item, event.event_type, event.tags)
