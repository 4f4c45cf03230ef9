"""How far behind a projection is: per service, the SUID it has applied through, the
newest SUID on ``dcb.events``, and the events between; with the SafeWindow lag bound."""

from __future__ import annotations

from pydantic import BaseModel

from streams.projections.checkpoint import Checkpoint
from streams.projections.safe_window import LagBound, indeterminate, safe_window_s


class ServiceLag(BaseModel):
    service_id: str
    checkpoint_suid: str | None
    head_suid: str | None
    events_behind: int


class ProjectionLag(BaseModel):
    projection_id: str
    applied: int
    events_behind: int
    lag_bound_s: float
    safe_window_s: float
    indeterminate: bool
    services: list[ServiceLag]


def projection_lag(
    checkpoint: Checkpoint, heads: dict[str, tuple[str | None, int]], now: float
) -> ProjectionLag:
    """``heads``: per service, the newest SUID seen and how many events lie above the
    checkpoint's applied point."""
    services = sorted(set(heads) | set(checkpoint.services))
    rows = [
        ServiceLag(
            service_id=s,
            checkpoint_suid=(m.applied_through if (m := checkpoint.services.get(s)) else None),
            head_suid=heads.get(s, (None, 0))[0],
            events_behind=heads.get(s, (None, 0))[1],
        )
        for s in services
    ]
    bound = LagBound(checkpoint.lag_peak_s, checkpoint.lag_at).bound(now)
    return ProjectionLag(
        projection_id=checkpoint.projection_id,
        applied=checkpoint.applied,
        events_behind=sum(r.events_behind for r in rows),
        lag_bound_s=round(bound, 3),
        safe_window_s=round(safe_window_s(bound), 3),
        indeterminate=indeterminate(bound),
        services=rows,
    )
