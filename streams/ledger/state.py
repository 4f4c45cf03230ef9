"""The ledger's durable state: plain pydantic models, stored as JSON in a changelog-backed table."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from streams.model.records import AppendCondition, ErrorInfo, EventData

TargetStatus = Literal["pending", "prepared", "rejected", "installed", "fenced"]
TERMINAL: frozenset[str] = frozenset({"installed", "fenced"})
Decision = Literal["install", "fence"]


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Envelope(_State):
    """The immutable issuance record of one candidate; evidence is checked against it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    service_id: str
    allocator_lineage_id: str
    attempt_id: str
    index: int
    event_id: str
    suid: str
    target_tags: tuple[str, ...]
    writer_epoch: int
    identity_digest: str
    issued_at_ms: int


class Target(_State):
    """One (candidate, tag) pair: its vote, then its terminal status, and the sends so far."""

    status: TargetStatus = "pending"
    obligation_digest: str | None = None
    tombstone_epoch: int | None = None
    sends: int = 1
    last_sent_ms: int = 0


class Candidate(_State):
    envelope: Envelope
    event: EventData
    targets: dict[str, Target]

    @property
    def resolved(self) -> bool:
        return all(t.status in TERMINAL for t in self.targets.values())


class AttemptState(_State):
    """An attempt in flight: until its candidates are settled and at or below the prefix."""

    attempt_id: str
    membership_digest: str
    writer_epoch: int
    condition: AppendCondition | None
    candidates: list[Candidate]
    issued_at_ms: int
    decision: Decision | None = None
    # One target in all: its tag decides alone (one-phase commit); the ledger learns the
    # decision from the tag's terminal evidence, and past the grace only asks to fence.
    one_phase: bool = False
    fence_epoch: int | None = None
    rejection: ErrorInfo | None = None
    answered: bool = False


class CompletedAttempt(_State):
    """What stays of an attempt once answered and certified: enough to answer a replay."""

    attempt_id: str
    membership_digest: str
    outcome: Literal["COMMITTED", "REJECTED"]
    suids: list[str]
    error: ErrorInfo | None = None


class LedgerState(_State):
    service_id: str
    allocator_lineage_id: str
    watermark: str | None = None
    closed_prefix: str | None = None
    writer_epoch: int = 0
    fence_epoch: int = 0
    attempts: dict[str, AttemptState] = Field(default_factory=dict)
    issued: list[str] = Field(default_factory=list)
    unresolved: dict[str, tuple[str, int]] = Field(default_factory=dict)
    unresolved_count: int = 0
    recovery_due_ms: int | None = None
    # Where this service's committed events end on dcb.events (partition, next offset):
    # the certificate's coverage. Set by the shell once the broker has the events.
    events_partition: int | None = None
    events_end_offset: int | None = None
    # The prefix of the last certificate published: behind closed_prefix until the shell
    # certifies (in the round after the events, once the broker has told where they end).
    certified_prefix: str | None = None
