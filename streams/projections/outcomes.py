"""How each poll of a projection ended, and who hears of it.

Every poll ends in exactly one outcome. Observers (health, metrics, logs) only listen:
one that fails is logged and never changes what the runner decided or does next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    NEVER_INVOKED = "never-invoked"
    INVOKED_AND_THREW = "invoked-and-threw"
    INVOKED_BUT_NO_WORK = "invoked-but-no-work"
    EXPLICITLY_GATED = "explicitly-gated"
    ADVANCED = "advanced"


REASON_LIMIT = 256


@dataclass(frozen=True)
class Observation:
    projection_id: str
    attempted_at: float  # epoch seconds
    outcome: Outcome
    reason: str | None = None
    advanced: int = 0  # events applied by this poll


def observation(
    projection_id: str,
    attempted_at: float,
    advanced: int,
    gated: str | None,
    error: BaseException | None = None,
) -> Observation:
    """The one outcome of a poll that applied ``advanced`` events, was held back for
    ``gated`` (a reason) or raised ``error``."""
    if error is not None:
        reason = f"{type(error).__name__}: {error}"
        if len(reason) > REASON_LIMIT:
            reason = reason[: REASON_LIMIT - 3] + "..."
        return Observation(projection_id, attempted_at, Outcome.INVOKED_AND_THREW, reason)
    if advanced:
        return Observation(projection_id, attempted_at, Outcome.ADVANCED, None, advanced)
    if gated is not None:
        return Observation(projection_id, attempted_at, Outcome.EXPLICITLY_GATED, gated)
    return Observation(projection_id, attempted_at, Outcome.INVOKED_BUT_NO_WORK)


Observer = Callable[[Observation], None]


def notify(observers: Iterable[Observer], seen: Observation) -> None:
    for observer in observers:
        try:
            observer(seen)
        except Exception:
            log.warning("projection observer %r failed on %s", observer, seen, exc_info=True)
