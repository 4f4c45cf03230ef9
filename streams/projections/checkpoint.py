"""A projection's checkpoint: what it trusts and has applied per service, and where to
read on. Written with the rows it covers in one Kafka transaction (``runner``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from streams.projections.certificates import Trusted
from streams.projections.gate import ServiceGate

CHECKPOINT_VERSION = 1


class ServiceMark(BaseModel):
    lineage: str | None = None
    trusted: Trusted | None = None
    applied_through: str | None = None
    unconfirmed: dict[str, Trusted] = Field(default_factory=dict)

    @classmethod
    def of(cls, gate: ServiceGate) -> ServiceMark:
        return cls(
            lineage=gate.lineage,
            trusted=gate.trusted,
            applied_through=gate.applied_through,
            unconfirmed=dict(gate.unconfirmed),
        )

    def gate(self, service_id: str) -> ServiceGate:
        return ServiceGate(
            service_id,
            self.trusted,
            self.applied_through,
            self.lineage,
            unconfirmed=dict(self.unconfirmed),
        )


class Checkpoint(BaseModel):
    version: int = CHECKPOINT_VERSION
    projection_id: str
    services: dict[str, ServiceMark] = Field(default_factory=dict)
    # Next offsets to read: events from the first one not applied yet, per partition.
    events_offsets: dict[int, int] = Field(default_factory=dict)
    certificates_offsets: dict[int, int] = Field(default_factory=dict)
    applied: int = 0  # events applied since the projection (re)started from nothing
    rows: int = 0
    writer: str = ""  # the runner instance that wrote it (another one's means: restore)
    lag_peak_s: float = 0.0  # the SafeWindow lag bound's last peak, and when (epoch s)
    lag_at: float | None = None
