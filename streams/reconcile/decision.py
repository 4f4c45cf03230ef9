"""The reconciler's decision for one target, from what the ledger knows of it.

A target is *terminal* (nothing to do), or its attempt is *undecided* past the grace
window (never contacted, or reserved but never decided: the ledger fences the whole
attempt), or decided but *not terminal yet* (the tag has not answered; look again
when the back-off ends), or *unreachable* (no answer within the back-off: resend
the decision and back off further, up to a ceiling).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streams.ledger.state import TERMINAL, Decision, Target

MAX_BACKOFF_FACTOR = 8


class TargetOutcome(StrEnum):
    TERMINAL = "terminal"
    NEVER_CONTACTED = "never-contacted"
    ABSENT_BUT_UNFENCED = "absent-but-unfenced"
    NOT_TERMINAL_YET = "not-terminal-yet"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class TargetAction:
    outcome: TargetOutcome
    resend: bool = False
    fence: bool = False
    look_again_at_ms: int | None = None


def backoff_ms(sends: int, grace_ms: int) -> int:
    factor: int = 2 ** max(sends - 1, 0)
    return grace_ms * min(factor, MAX_BACKOFF_FACTOR)


def plan_target(
    target: Target, decision: Decision | None, now_ms: int, grace_ms: int, skip_grace: bool
) -> TargetAction:
    if target.status in TERMINAL:
        return TargetAction(TargetOutcome.TERMINAL)
    if decision is None:
        outcome = (
            TargetOutcome.NEVER_CONTACTED
            if target.status == "pending"
            else TargetOutcome.ABSENT_BUT_UNFENCED
        )
        return TargetAction(outcome, fence=True)
    retry_at = target.last_sent_ms + backoff_ms(target.sends, grace_ms)
    if now_ms < retry_at and not skip_grace:
        return TargetAction(TargetOutcome.NOT_TERMINAL_YET, look_again_at_ms=retry_at)
    return TargetAction(
        TargetOutcome.UNREACHABLE,
        resend=True,
        look_again_at_ms=now_ms + backoff_ms(target.sends + 1, grace_ms),
    )
