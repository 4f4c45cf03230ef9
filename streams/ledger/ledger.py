"""The issuance ledger of one service: the functional core of the allocator.

Each operation mutates ``state`` and returns a :class:`Step`: the records the shell
must publish in the same Kafka transaction as the new state. No I/O happens here.

An attempt is decided as a whole: every target of every candidate votes PREPARED
and the ledger decides *install*, or one target votes REJECTED (or the grace window
passes undecided) and the ledger decides *fence*. A decision is final, so a
candidate is never installed in one tag and fenced in another.

An attempt whose targets all lie in one tag partition skips the vote (one-phase
commit): that partition checks, reserves and installs them together when every check
passes, or fences them all, and the ledger takes the decision from its terminal
evidence. Past the grace window the ledger cannot fence such an attempt by itself (the
partition may have installed it already); it asks the partition to fence and adopts
whichever evidence comes back.

Operations only settle candidates; :meth:`IssuanceLedger.publish`, called once per batch
(or after each operation: the outcome is the same), moves the closed prefix, publishes
the committed events it now covers in SUID order and answers the attempts it covers.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from streams.errors import (
    AttemptTooLargeError,
    CorruptLedgerError,
    DivergentReplayError,
    EmptyAttemptError,
    EvidenceMismatchError,
    InvalidEventError,
    ReservationExpiredError,
    StaleFenceError,
    TrimRefusedError,
)
from streams.ledger.closed_prefix import closed_prefix
from streams.ledger.state import (
    AttemptState,
    Candidate,
    CompletedAttempt,
    Envelope,
    LedgerState,
    Target,
)
from streams.model.digests import sha256_hex
from streams.model.query import canonical_condition, guard_tags
from streams.model.records import (
    AllocatedCandidate,
    Allocation,
    Certificate,
    CommitAttempt,
    CommitResult,
    CommittedEvent,
    ErrorInfo,
    EventData,
    PartitionOffset,
    TagDelivery,
    TagResolution,
)
from streams.model.suid import issue_suids, parse_suid
from streams.model.tags import canonical_tags
from streams.reconcile.decision import backoff_ms, plan_target

MAX_EVENTS_PER_ATTEMPT = 256
DEFAULT_GRACE_MS = 10_000
DeliveryAction = Literal["PREPARE", "INSTALL", "FENCE"]


@dataclass
class Step:
    """What one ledger operation asks the shell to publish, in one transaction."""

    allocations: list[Allocation] = field(default_factory=list)
    deliveries: list[TagDelivery] = field(default_factory=list)
    events: list[CommittedEvent] = field(default_factory=list)
    results: list[CommitResult] = field(default_factory=list)
    completed: list[CompletedAttempt] = field(default_factory=list)
    certificate: Certificate | None = None


def _expired() -> ErrorInfo:
    return ErrorInfo.of(
        ReservationExpiredError(
            "the attempt was not decided within the grace window and was fenced"
        )
    )


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def validate_attempt(attempt: CommitAttempt) -> CommitAttempt:
    """The attempt with canonical tags and condition, or the typed error for the first fault."""
    if not attempt.events:
        raise EmptyAttemptError("a commit attempt needs at least one event")
    if len(attempt.events) > MAX_EVENTS_PER_ATTEMPT:
        raise AttemptTooLargeError(
            f"{len(attempt.events)} events exceed the bound of {MAX_EVENTS_PER_ATTEMPT}",
            count=len(attempt.events),
        )
    events = []
    for index, event in enumerate(attempt.events):
        if not event.event_type.strip() or not event.event_id.strip():
            raise InvalidEventError(f"event {index}: blank event type or id", index=index)
        try:
            json.loads(event.payload)
        except ValueError as exc:
            raise InvalidEventError(
                f"event {index}: payload is not JSON ({exc})", index=index
            ) from exc
        tags = list(canonical_tags(event.tags))
        events.append(event if tags == event.tags else event.model_copy(update={"tags": tags}))
    if len({e.event_id for e in events}) != len(events):
        raise InvalidEventError("event ids repeat within the attempt")
    condition = None if attempt.condition is None else canonical_condition(attempt.condition)
    # Copied only when something changed: the SDK validates every append before sending
    # and the ledger again on registration, mostly attempts already canonical.
    if condition is attempt.condition and all(
        e is given for e, given in zip(events, attempt.events, strict=True)
    ):
        return attempt
    return attempt.model_copy(update={"events": events, "condition": condition})


# An event's fields but its timestamp, by their Python names; all are text, lists of
# text or None, so reading them is what pydantic's JSON dump gives, at 0.4 of its cost.
_MEMBER_FIELDS = tuple(name for name in EventData.model_fields if name != "timestamp")


def membership_digest(attempt: CommitAttempt) -> str:
    """What an attempt id stands for: its events and condition (not its writer epoch)."""
    return sha256_hex(
        {
            "events": [{name: getattr(e, name) for name in _MEMBER_FIELDS} for e in attempt.events],
            "condition": None if attempt.condition is None else attempt.condition.to_avro(),
        }
    )


def _own_partition(tag: str) -> Hashable:
    return tag


class IssuanceLedger:
    """``partition_of`` names a tag's tag partition (the placement); by default every tag is
    a partition of its own, so only an attempt with a single target is one-phase."""

    def __init__(
        self,
        state: LedgerState,
        grace_ms: int = DEFAULT_GRACE_MS,
        partition_of: Callable[[str], Hashable] = _own_partition,
    ) -> None:
        self.state = state
        self.grace_ms = grace_ms
        self.partition_of = partition_of

    # --- registration ---------------------------------------------------------------

    def register(
        self,
        attempt: CommitAttempt,
        now: datetime,
        completed: CompletedAttempt | None = None,
    ) -> Step:
        """Allocate SUIDs for a new attempt, or answer a replay the same way as before.

        Raises the validation error of a malformed attempt (nothing is registered) and
        :class:`DivergentReplayError` when a known attempt id arrives with other events.
        """
        s = self.state
        attempt = validate_attempt(attempt)
        digest = membership_digest(attempt)
        known = s.attempts.get(attempt.attempt_id)
        if known is not None or completed is not None:
            previous = known.membership_digest if known else completed.membership_digest  # type: ignore[union-attr]
            if previous != digest:
                raise DivergentReplayError(
                    f"attempt {attempt.attempt_id} was registered with other events",
                    attempt_id=attempt.attempt_id,
                )
            if completed is not None:
                return Step(results=[self._completed_result(completed, now)])
            return Step()
        if attempt.writer_epoch < s.writer_epoch:
            stale = StaleFenceError.of(
                f"service {s.service_id} (writer epoch)", attempt.writer_epoch, s.writer_epoch
            )
            done = CompletedAttempt(
                attempt_id=attempt.attempt_id,
                membership_digest=digest,
                outcome="REJECTED",
                suids=[],
                error=ErrorInfo.of(stale),
            )
            return Step(results=[self._completed_result(done, now)], completed=[done])
        s.writer_epoch = attempt.writer_epoch
        now_ms = _ms(now)
        suids = issue_suids(s.watermark, now, len(attempt.events))
        guards = guard_tags(attempt.condition) if attempt.condition else set()
        guards -= {tag for event in attempt.events for tag in event.tags}
        candidates = []
        for index, (event, suid) in enumerate(zip(attempt.events, suids, strict=True)):
            targets = tuple(sorted(set(event.tags) | (guards if index == 0 else set())))
            identity = {
                "serviceId": s.service_id,
                "allocatorLineageId": s.allocator_lineage_id,
                "attemptId": attempt.attempt_id,
                "index": index,
                "eventId": event.event_id,
                "suid": suid,
                "targetTags": list(targets),
                "writerEpoch": attempt.writer_epoch,
            }
            envelope = Envelope(
                service_id=s.service_id,
                allocator_lineage_id=s.allocator_lineage_id,
                attempt_id=attempt.attempt_id,
                index=index,
                event_id=event.event_id,
                suid=suid,
                target_tags=targets,
                writer_epoch=attempt.writer_epoch,
                identity_digest=sha256_hex(identity),
                issued_at_ms=now_ms,
            )
            targets_state = {tag: Target(last_sent_ms=now_ms) for tag in targets}
            candidates.append(Candidate(envelope=envelope, event=event, targets=targets_state))
            s.issued.append(suid)
            s.unresolved[suid] = (attempt.attempt_id, index)
            s.unresolved_count += 1
        s.watermark = suids[-1]
        state = AttemptState(
            attempt_id=attempt.attempt_id,
            membership_digest=digest,
            writer_epoch=attempt.writer_epoch,
            condition=attempt.condition,
            candidates=candidates,
            issued_at_ms=now_ms,
            one_phase=len({self.partition_of(t) for c in candidates for t in c.targets}) == 1,
        )
        s.attempts[attempt.attempt_id] = state
        due = now_ms + self.grace_ms
        if s.recovery_due_ms is None or s.recovery_due_ms > due:
            s.recovery_due_ms = due
        allocation = Allocation(
            service_id=s.service_id,
            allocator_lineage_id=s.allocator_lineage_id,
            attempt_id=attempt.attempt_id,
            writer_epoch=attempt.writer_epoch,
            one_phase=state.one_phase,
            candidates=[
                AllocatedCandidate(
                    index=c.envelope.index,
                    event_id=c.envelope.event_id,
                    suid=c.envelope.suid,
                    tags=list(c.envelope.target_tags),
                    identity_digest=c.envelope.identity_digest,
                )
                for c in candidates
            ],
        )
        deliveries = [
            self._delivery(state, c, tag, "PREPARE") for c in candidates for tag in c.targets
        ]
        return Step(allocations=[allocation], deliveries=deliveries)

    # --- votes and evidence -----------------------------------------------------------

    def apply_resolution(self, resolution: TagResolution, now: datetime) -> Step:
        """Apply a vote or terminal evidence from a tag; duplicates and late echoes are no-ops."""
        s = self.state
        attempt = s.attempts.get(resolution.attempt_id)
        if attempt is None:
            if s.closed_prefix is not None and resolution.suid <= s.closed_prefix:
                return Step()
            raise EvidenceMismatchError(
                f"no envelope for attempt {resolution.attempt_id} / {resolution.suid}",
                attempt_id=resolution.attempt_id,
                suid=resolution.suid,
            )
        candidate = self._matching_candidate(attempt, resolution)
        target = candidate.targets[resolution.tag]
        step = Step()
        if resolution.status in ("PREPARED", "REJECTED"):
            if target.status == "pending":
                target.status = "prepared" if resolution.status == "PREPARED" else "rejected"
                if resolution.status == "REJECTED" and attempt.rejection is None:
                    attempt.rejection = resolution.rejection or ErrorInfo(
                        code="rejected", message=f"tag {resolution.tag} rejected the attempt"
                    )
            self._decide(attempt, now, step)
            return step
        if target.status in ("installed", "fenced"):
            return step
        installed = resolution.status == "INSTALLED_AND_COVERED"
        adopting = attempt.one_phase and attempt.decision is None
        decision = ("install" if installed else "fence") if adopting else attempt.decision
        consistent = (
            decision == "install" and bool(resolution.obligation_digest)
            if installed
            else decision != "install" and resolution.tombstone_epoch is not None
        )
        if not consistent:
            raise EvidenceMismatchError(
                f"{resolution.status} evidence contradicts the decision ({attempt.decision}) "
                "or lacks its obligation digest / tombstone epoch",
                attempt_id=attempt.attempt_id,
                tag=resolution.tag,
            )
        if adopting:
            self._adopt(attempt, installed, resolution.rejection, now, step)
        target.status = "installed" if installed else "fenced"
        target.obligation_digest = resolution.obligation_digest
        target.tombstone_epoch = resolution.tombstone_epoch
        if candidate.resolved:
            self._settle(candidate)
        return step

    @staticmethod
    def _matching_candidate(attempt: AttemptState, resolution: TagResolution) -> Candidate:
        for candidate in attempt.candidates:
            envelope = candidate.envelope
            if envelope.suid != resolution.suid:
                continue
            if (
                envelope.service_id == resolution.service_id
                and envelope.allocator_lineage_id == resolution.allocator_lineage_id
                and envelope.event_id == resolution.event_id
                and envelope.identity_digest == resolution.identity_digest
                and resolution.tag in envelope.target_tags
            ):
                return candidate
        raise EvidenceMismatchError(
            "resolution evidence does not match the immutable envelope",
            attempt_id=resolution.attempt_id,
            suid=resolution.suid,
            tag=resolution.tag,
        )

    def _decide(self, attempt: AttemptState, now: datetime, step: Step) -> None:
        if attempt.decision is not None:
            return
        statuses = [t.status for c in attempt.candidates for t in c.targets.values()]
        if "rejected" in statuses:
            self._fence(attempt, now, step)
        elif all(status == "prepared" for status in statuses):
            attempt.decision = "install"
            step.deliveries.extend(self._decision_deliveries(attempt, now))

    def _adopt(
        self,
        attempt: AttemptState,
        installed: bool,
        rejection: ErrorInfo | None,
        now: datetime,
        step: Step,
    ) -> None:
        """Take a one-phase attempt's decision from its partition's terminal evidence; a
        fenced one is answered at once, as a rejected vote is."""
        attempt.decision = "install" if installed else "fence"
        if installed:
            return
        if attempt.rejection is None:
            attempt.rejection = rejection or _expired()
        attempt.answered = True
        step.results.append(
            CommitResult.rejected(self.state.service_id, attempt.attempt_id, attempt.rejection, now)
        )

    def _fence(self, attempt: AttemptState, now: datetime, step: Step) -> None:
        self.state.fence_epoch += 1
        attempt.decision = "fence"
        attempt.fence_epoch = self.state.fence_epoch
        if attempt.rejection is None:
            attempt.rejection = _expired()
        step.deliveries.extend(self._decision_deliveries(attempt, now))
        attempt.answered = True
        step.results.append(
            CommitResult.rejected(self.state.service_id, attempt.attempt_id, attempt.rejection, now)
        )

    def _ask_to_fence(self, attempt: AttemptState, now: datetime, step: Step) -> None:
        """Past the grace, a one-phase attempt's tag is asked to fence; it answers either way."""
        self.state.fence_epoch += 1
        attempt.fence_epoch = self.state.fence_epoch
        step.deliveries.extend(self._decision_deliveries(attempt, now, "FENCE"))

    def _decision_deliveries(
        self, attempt: AttemptState, now: datetime, action: DeliveryAction | None = None
    ) -> list[TagDelivery]:
        action = action or ("INSTALL" if attempt.decision == "install" else "FENCE")
        out = []
        for candidate in attempt.candidates:
            for tag, target in candidate.targets.items():
                if target.status not in ("installed", "fenced"):
                    target.sends, target.last_sent_ms = 1, _ms(now)
                    out.append(self._delivery(attempt, candidate, tag, action))
        return out

    def _delivery(
        self,
        attempt: AttemptState,
        candidate: Candidate,
        tag: str,
        action: DeliveryAction,
    ) -> TagDelivery:
        e = candidate.envelope
        return TagDelivery(
            service_id=e.service_id,
            tag=tag,
            allocator_lineage_id=e.allocator_lineage_id,
            attempt_id=e.attempt_id,
            suid=e.suid,
            event_id=e.event_id,
            identity_digest=e.identity_digest,
            action=action,
            writer_epoch=e.writer_epoch,
            fence_epoch=attempt.fence_epoch if action == "FENCE" else None,
            condition=attempt.condition if action == "PREPARE" else None,
            event=candidate.event if action == "PREPARE" else None,
            one_phase=attempt.one_phase and action == "PREPARE",
            settled_through=self.state.closed_prefix,
        )

    # --- settling, the prefix, answers --------------------------------------------------

    def _settle(self, candidate: Candidate) -> None:
        s = self.state
        suid = candidate.envelope.suid
        if s.unresolved.pop(suid, None) is None:
            return
        if s.unresolved_count <= 0:
            raise CorruptLedgerError("unresolved count would go below zero", suid=suid)
        s.unresolved_count -= 1

    def publish(self, now: datetime) -> Step:
        """Move the closed prefix over what settled; publish and answer what it now covers,
        with a certificate when it moved."""
        s = self.state
        step = Step()
        before = s.closed_prefix
        after = self.compute_prefix()
        if after == before:
            return step
        s.closed_prefix = after
        assert after is not None
        s.issued = s.issued[bisect_left(s.issued, after) :]
        self._publish_covered(after, now, step)
        step.certificate = self.certificate(now)
        return step

    def compute_prefix(self) -> str | None:
        s = self.state
        if s.unresolved_count != len(s.unresolved):
            raise CorruptLedgerError(
                f"unresolved count {s.unresolved_count} disagrees with the index "
                f"({len(s.unresolved)} entries)",
                count=s.unresolved_count,
                indexed=len(s.unresolved),
            )
        least = min(s.unresolved) if s.unresolved else None
        return closed_prefix(s.issued, least, s.watermark, s.closed_prefix)

    def _publish_covered(self, after: str, now: datetime, step: Step) -> None:
        """Publish what the prefix now covers in SUID order; answer attempts it fully covers."""
        s = self.state
        covered = []
        for attempt in list(s.attempts.values()):
            suids = [c.envelope.suid for c in attempt.candidates]
            if max(suids) > after:
                continue
            covered.append(attempt)
            del s.attempts[attempt.attempt_id]
        for attempt in sorted(covered, key=lambda a: a.candidates[0].envelope.suid):
            if attempt.decision == "install":
                step.events.extend(
                    CommittedEvent(
                        service_id=s.service_id,
                        suid=c.envelope.suid,
                        allocator_lineage_id=s.allocator_lineage_id,
                        attempt_id=attempt.attempt_id,
                        event=c.event,
                    )
                    for c in attempt.candidates
                )
            done = CompletedAttempt(
                attempt_id=attempt.attempt_id,
                membership_digest=attempt.membership_digest,
                outcome="COMMITTED" if attempt.decision == "install" else "REJECTED",
                suids=[c.envelope.suid for c in attempt.candidates]
                if attempt.decision == "install"
                else [],
                error=attempt.rejection if attempt.decision != "install" else None,
            )
            step.completed.append(done)
            if not attempt.answered:
                step.results.append(self._completed_result(done, now))

    def _completed_result(self, done: CompletedAttempt, now: datetime) -> CommitResult:
        return CommitResult(
            service_id=self.state.service_id,
            attempt_id=done.attempt_id,
            outcome=done.outcome,
            suids=done.suids,
            error=done.error,
            decided_at=now,
        )

    def certificate(self, now: datetime) -> Certificate:
        s = self.state
        return Certificate(
            certificate_version=1,
            authority="allocator-transaction",
            status="READY",
            allocator_lineage_id=s.allocator_lineage_id,
            service_id=s.service_id,
            closed_prefix_suid=s.closed_prefix,
            unresolved_count=s.unresolved_count,
            generated_at=now,
            coverage=self.coverage(),
        )

    def coverage(self) -> list[PartitionOffset]:
        """The dcb.events offsets below which every certified event of the service lies."""
        s = self.state
        if s.events_partition is None or s.events_end_offset is None:
            return []
        return [PartitionOffset(partition=s.events_partition, offset=s.events_end_offset)]

    def events_written(self, partition: int, end_offset: int) -> None:
        """Note where the events published so far end (known only after the broker's ack)."""
        s = self.state
        if s.events_partition == partition and (s.events_end_offset or 0) >= end_offset:
            return
        s.events_partition, s.events_end_offset = partition, end_offset

    # --- archived history ---------------------------------------------------------------

    def trim(self, through: str, request_id: str) -> Step:
        """Ask the service's tag tables to drop their installed events up to ``through``,
        which ``dcb archive`` has archived. Only certified history: above the certified
        prefix an event could still commit, and a table must still check against it."""
        s = self.state
        parse_suid(through)
        if s.certified_prefix is None or through > s.certified_prefix:
            raise TrimRefusedError(
                f"{s.service_id}: {through} is above the certified prefix "
                f"({s.certified_prefix or 'none yet'}); only archived, certified history "
                "can be trimmed",
                service_id=s.service_id,
                through=through,
                certified=s.certified_prefix,
            )
        trim = TagDelivery(
            service_id=s.service_id,
            tag="",  # every tag of the service (the shell sends it to each tag partition)
            allocator_lineage_id=s.allocator_lineage_id,
            attempt_id=request_id,
            suid=through,
            event_id="",
            identity_digest="",
            action="TRIM",
            writer_epoch=s.writer_epoch,
        )
        return Step(deliveries=[trim])

    # --- recovery --------------------------------------------------------------------

    def reconcile(self, now: datetime, skip_grace: bool = False) -> Step:
        """One reconciler pass: fence what is undecided past the grace, resend what is stuck."""
        s = self.state
        now_ms = _ms(now)
        step = Step()
        next_due: int | None = None
        for attempt in list(s.attempts.values()):
            due = attempt.issued_at_ms + self.grace_ms
            asked = attempt.fence_epoch is not None  # a one-phase attempt asked to fence
            if attempt.decision is None and not asked and (skip_grace or due <= now_ms):
                if attempt.one_phase:
                    self._ask_to_fence(attempt, now, step)
                    retry = now_ms + backoff_ms(1, self.grace_ms)
                    next_due = min(next_due or retry, retry)
                else:
                    self._fence(attempt, now, step)
                continue
            decision = attempt.decision or ("fence" if attempt.fence_epoch is not None else None)
            for candidate in attempt.candidates:
                for tag, target in candidate.targets.items():
                    action = plan_target(target, decision, now_ms, self.grace_ms, skip_grace)
                    if action.resend:
                        target.sends += 1
                        target.last_sent_ms = now_ms
                        kind: DeliveryAction = "INSTALL" if decision == "install" else "FENCE"
                        step.deliveries.append(self._delivery(attempt, candidate, tag, kind))
                    if action.look_again_at_ms is not None:
                        next_due = min(next_due or action.look_again_at_ms, action.look_again_at_ms)
            if decision is None:
                next_due = min(next_due or due, due)
        s.recovery_due_ms = next_due
        return step
