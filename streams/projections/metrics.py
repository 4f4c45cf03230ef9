"""Prometheus metrics of a projection runner, served at ``/metrics`` (``http.py``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streams.projections.lag import ProjectionLag
from streams.projections.outcomes import Observation


class RunnerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.polls = Counter(
            "dcb_projection_polls", "Polls, by outcome.", ["projection", "outcome"], registry=r
        )
        self.applied = Counter(
            "dcb_projection_events_applied", "Events applied.", ["projection"], registry=r
        )
        self.commit_seconds = Histogram(
            "dcb_projection_commit_seconds",
            "Time to commit a pass's rows and checkpoint (one transaction).",
            ["projection"],
            registry=r,
            buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
        )
        self.rows_written = Histogram(
            "dcb_projection_rows_per_commit",
            "Rows written (tombstones included) per commit.",
            ["projection"],
            registry=r,
            buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
        )
        self.behind = Gauge(
            "dcb_projection_events_behind",
            "Events read and not applied yet (waiting for a certificate).",
            ["projection"],
            registry=r,
        )
        self.lag_bound = Gauge(
            "dcb_projection_lag_bound_seconds", "SafeWindow lag bound.", ["projection"], registry=r
        )
        self.ignored = Counter(
            "dcb_projection_certificates_ignored",
            "Certificates not trusted, by reason.",
            ["projection", "reason"],
            registry=r,
        )

    def observe(self, seen: Observation) -> None:
        """An outcome observer (``outcomes.notify``)."""
        self.polls.labels(seen.projection_id, seen.outcome.value).inc()
        if seen.advanced:
            self.applied.labels(seen.projection_id).inc(seen.advanced)

    def committed(self, projection_id: str, seconds: float, rows: int) -> None:
        self.commit_seconds.labels(projection_id).observe(seconds)
        self.rows_written.labels(projection_id).observe(rows)

    def lagging(self, lag: ProjectionLag) -> None:
        self.behind.labels(lag.projection_id).set(lag.events_behind)
        self.lag_bound.labels(lag.projection_id).set(lag.lag_bound_s)

    def ignored_certificate(self, projection_id: str, reason: str) -> None:
        self.ignored.labels(projection_id, reason).inc()
