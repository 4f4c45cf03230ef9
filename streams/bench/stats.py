"""What one benchmark scenario measured, and the summaries computed from it (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100); NaN when there are no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class Measurement(BaseModel):
    """Closed-loop results of one scenario: completions and latencies inside the window."""

    completed: int
    failed: int
    window_s: float
    latencies_ms: list[float]

    @property
    def per_second(self) -> float:
        return self.completed / self.window_s if self.window_s > 0 else 0.0


class ScenarioResult(BaseModel):
    system: str  # "dcb" or "raw"
    writers: int
    tags: int
    services: int
    events_per_s: float
    p50_ms: float
    p99_ms: float
    completed: int
    failed: int
    placement: str | None = None  # dcb's tag placement, when the bench varies it

    @property
    def key(self) -> str:
        key = f"w{self.writers}-t{self.tags}-s{self.services}"
        return key if self.placement is None else f"{key}-{self.placement}"

    @property
    def label(self) -> str:
        plural = "s" if self.tags > 1 else ""
        label = f"{self.system}, {self.tags} tag{plural}, {self.services} service(s)"
        return label if self.placement is None else f"{label}, {self.placement} placement"

    @classmethod
    def of(
        cls,
        system: str,
        writers: int,
        tags: int,
        services: int,
        m: Measurement,
        placement: str | None = None,
    ) -> ScenarioResult:
        return cls(
            system=system,
            writers=writers,
            tags=tags,
            services=services,
            placement=placement,
            events_per_s=round(m.per_second, 1),
            p50_ms=round(percentile(m.latencies_ms, 50), 1),
            p99_ms=round(percentile(m.latencies_ms, 99), 1),
            completed=m.completed,
            failed=m.failed,
        )


def ratio_to_baseline(dcb: ScenarioResult, raw: Sequence[ScenarioResult]) -> float | None:
    """dcb events/s over the raw baseline's at the same writer count."""
    same = [r for r in raw if r.writers == dcb.writers and r.events_per_s > 0]
    return round(dcb.events_per_s / same[0].events_per_s, 3) if same else None
