"""One projection without Kafka: records in, row changes and a checkpoint out.

The runner hands it every record it reads (events and certificates, with partition and
offset) and asks for a pass: the gate of each service releases what a trusted
certificate covers, the projector folds it into the rows, and the pass returns the rows
it changed with the checkpoint that goes with them. What the pass returns is only a
proposal until the runner has committed it; a crash before that loses nothing, because
the next process starts again from the last committed checkpoint and rows.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from streams.model.records import Certificate, CommittedEvent
from streams.model.suid import suid_ticks
from streams.projections.api import ProjectedEvent, Projector, Row
from streams.projections.certificates import Verdict
from streams.projections.checkpoint import Checkpoint, ServiceMark
from streams.projections.gate import ServiceGate
from streams.projections.safe_window import LagBound, indeterminate

_TICKS_PER = 10_000_000  # .NET ticks per second
_UNIX_EPOCH_TICKS = 621_355_968_000_000_000  # .NET ticks at 1970-01-01 UTC


@dataclass(frozen=True)
class Pass:
    changes: dict[str, Row | None]  # row id -> row, None: deleted
    applied: int
    gated: str | None
    make_checkpoint: Callable[[], Checkpoint]

    @cached_property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint that goes with the pass's rows: made when first asked for (a pass
        that commits nothing never pays for it), before the core's next pass."""
        return self.make_checkpoint()


class ProjectionCore:
    def __init__(
        self,
        projector: Projector,
        checkpoint: Checkpoint,
        rows: dict[str, Row],
        max_per_pass: int | None = None,
    ):
        self.projector = projector
        self.rows = rows
        self.applied = checkpoint.applied
        self.gates = {s: m.gate(s) for s, m in checkpoint.services.items()}
        self.events_read = dict(checkpoint.events_offsets)
        self.certificates_read = dict(checkpoint.certificates_offsets)
        self.lag = LagBound(checkpoint.lag_peak_s, checkpoint.lag_at)
        self.ignored: Counter[Verdict] = Counter()  # certificates not trusted, by reason
        self.head: dict[str, str] = {}  # per service, the greatest SUID read
        self.max_per_pass = max_per_pass  # events a pass applies at most (None: all)

    def _gate(self, service_id: str) -> ServiceGate:
        if (gate := self.gates.get(service_id)) is None:
            gate = self.gates[service_id] = ServiceGate(service_id)
        return gate

    def offer_event(self, record: CommittedEvent, partition: int, offset: int) -> None:
        self.events_read[partition] = max(self.events_read.get(partition, 0), offset + 1)
        service = record.service_id
        if record.suid > self.head.get(service, ""):
            self.head[service] = record.suid
        self._gate(service).offer_event(
            ProjectedEvent.of(record), record.allocator_lineage_id, partition, offset
        )

    def offer_certificate(
        self, record: Certificate | None, key_service: str, partition: int, offset: int
    ) -> Verdict:
        """``record`` is ``None`` when the bytes did not decode."""
        self.certificates_read[partition] = max(
            self.certificates_read.get(partition, 0), offset + 1
        )
        verdict = (
            Verdict.MALFORMED
            if record is None
            else self._gate(key_service).offer_certificate(record, key_service)
        )
        if verdict not in (Verdict.ACCEPTED, Verdict.UNCHANGED):
            self.ignored[verdict] += 1
        return verdict

    def note_end(self, events_read: dict[int, int]) -> None:
        """The events partitions have been read to these offsets (an end with no record)."""
        for p, offset in events_read.items():
            self.events_read[p] = max(self.events_read.get(p, 0), offset)

    def run_pass(self, now: float) -> Pass:
        """Apply what the gates release, unless the lag bound is past the ceiling."""
        changes: dict[str, Row | None] = {}
        new: set[str] = set()  # rows this pass created
        applied, reasons = 0, []
        if indeterminate(self.lag.bound(now)):
            return Pass({}, 0, "safe_window_ceiling_exceeded", self.checkpoint)
        for gate in self.gates.values():
            left = None if self.max_per_pass is None else max(self.max_per_pass - applied, 0)
            if left == 0:
                reasons.append("pass_limit")
                break
            release = gate.release(self.events_read, left)
            if release.gated:
                reasons.append(release.gated)
            for event in release.events:
                self._fold(event, changes, new)
            applied += len(release.events)
            if release.events and (t := gate.trusted) is not None:
                # How long the certificate's prefix SUID waited to be certified: the
                # certificate's own latency (not the age of the history a replay reads).
                issued = (suid_ticks(t.prefix) - _UNIX_EPOCH_TICKS) / _TICKS_PER
                self.lag.observe(max(0.0, t.generated_at - issued), t.generated_at)
        self.applied += applied
        for key in new:
            if changes[key] is None:  # created and deleted in this pass
                del changes[key]
        for key, row in changes.items():
            if row is not None:  # as it will read back from the row topic after a restart
                changes[key] = self.rows[key] = json.loads(json.dumps(row))
        return Pass(changes, applied, reasons[0] if reasons else None, self.checkpoint)

    def _fold(self, event: ProjectedEvent, changes: dict[str, Row | None], new: set[str]) -> None:
        p = self.projector
        if not p.matches(event):
            return
        for key in p.keys(event):
            row = self.rows.get(key)
            if row is None and key not in changes:
                new.add(key)  # no committed row: deleting it again publishes nothing
            after = p.apply(p.initial(key) if row is None else row, event)
            if after is None:
                self.rows.pop(key, None)
            else:
                self.rows[key] = after
            changes[key] = after

    def foreign_events(self) -> int:
        """Events read of another allocator lineage than their service's (dropped)."""
        return sum(g.foreign for g in self.gates.values())

    def checkpoint(self) -> Checkpoint:
        events_offsets = dict(self.events_read)
        for gate in self.gates.values():
            for p, first_waiting in gate.hold_from().items():
                events_offsets[p] = min(events_offsets.get(p, first_waiting), first_waiting)
        return Checkpoint(
            projection_id=self.projector.id,
            services={s: ServiceMark.of(g) for s, g in self.gates.items()},
            events_offsets=events_offsets,
            certificates_offsets=dict(self.certificates_read),
            applied=self.applied,
            rows=len(self.rows),
            lag_peak_s=self.lag.peak_s,
            lag_at=self.lag.at,
        )
