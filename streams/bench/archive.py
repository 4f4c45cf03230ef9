"""``dcb bench archive``: what the history archive and sealing cost, side by side.

Per backend (a local directory, PostgreSQL on the project's launcher), the same segments
(records the size of a small committed event): appended one after another, read whole,
and read by ranges of one segment. Sealing: AES-GCM seal and open of one payload, per
event, beside the JSON encoding every append pays anyway.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from streams.archive import ArchiveStore, DirectoryArchive, Segment
from streams.archive.postgres import PostgresArchive
from streams.bench.lifecycle import LifecycleResult
from streams.bench.stats import percentile
from streams.erasure.sealing import new_key, open_payload, seal
from streams.infra.postgres import LocalPostgres
from streams.model.suid import format_suid

RECORD_BYTES = 300  # about one committed course event, encoded


class ArchivePlan(BaseModel):
    segments: int = 40
    records_per_segment: int = 1_000
    ranged_reads: int = 40
    seal_events: int = 20_000

    @property
    def megabytes(self) -> float:
        return self.segments * self.records_per_segment * RECORD_BYTES / 1e6


class BackendResult(BaseModel):
    backend: str
    append_mb_per_s: float
    read_all_mb_per_s: float
    ranged_read_mb_per_s: float  # one segment's range at a time
    append_p50_ms: float  # per segment of records_per_segment records


class SealingResult(BaseModel):
    payload_bytes: int
    seal_us: float  # per event, p50 over the run's batches
    open_us: float
    json_dumps_us: float  # what encoding the payload as JSON costs, for scale


class ArchiveBenchReport(BaseModel):
    plan: ArchivePlan
    machine: dict[str, str | int]
    backends: list[BackendResult]
    sealing: SealingResult
    lifecycle: LifecycleResult | None = None  # on the broker: boundary reads, sealed appends


def _segments(plan: ArchivePlan) -> list[Segment]:
    out = []
    for n in range(plan.segments):
        first = n * plan.records_per_segment + 1
        records = [os.urandom(RECORD_BYTES) for _ in range(plan.records_per_segment)]
        last = first + plan.records_per_segment - 1
        out.append(Segment.of(format_suid(first), format_suid(last), records, "bench"))
    return out


def _backend(
    name: str, store: ArchiveStore, plan: ArchivePlan, segments: list[Segment]
) -> BackendResult:
    key = f"bench-{uuid.uuid4().hex[:8]}"
    per_segment = []
    started = time.perf_counter()
    for segment in segments:
        t0 = time.perf_counter()
        store.append(key, segment)
        per_segment.append((time.perf_counter() - t0) * 1000)
    appended = time.perf_counter() - started
    t0 = time.perf_counter()
    assert len(store.read(key)) == len(segments)
    read_all = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n in range(plan.ranged_reads):
        h = segments[n % len(segments)].header
        assert len(store.read(key, h.from_suid, h.through_suid)) == 1
    ranged = time.perf_counter() - t0
    segment_mb = plan.megabytes / plan.segments
    return BackendResult(
        backend=name,
        append_mb_per_s=round(plan.megabytes / appended, 1),
        read_all_mb_per_s=round(plan.megabytes / read_all, 1),
        ranged_read_mb_per_s=round(segment_mb * plan.ranged_reads / ranged, 1),
        append_p50_ms=round(percentile(per_segment, 50), 2),
    )


def _per_event_us(events: int, run: Callable[[int], object]) -> float:
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(events // 5):
            run(i)
        batches.append((time.perf_counter() - t0) * 1e6 / (events // 5))
    return round(percentile(batches, 50), 2)


def _sealing(plan: ArchivePlan) -> SealingResult:
    key = new_key()
    payload = json.dumps({"course": "c1", "student": "s1", "name": "x" * 120})
    sealed = seal(payload, "user:1", "event-1", key)
    return SealingResult(
        payload_bytes=len(payload),
        seal_us=_per_event_us(plan.seal_events, lambda i: seal(payload, "user:1", f"e{i}", key)),
        open_us=_per_event_us(
            plan.seal_events, lambda i: open_payload(sealed, "event-1", lambda _s: key)
        ),
        json_dumps_us=_per_event_us(
            plan.seal_events, lambda i: json.dumps({"course": "c1", "n": i, "name": "x" * 120})
        ),
    )


def run_archive_bench(
    plan: ArchivePlan, scratch: Path, machine: dict[str, str | int], tick: Callable[[str], None]
) -> ArchiveBenchReport:
    segments = _segments(plan)
    results = []
    tick("local directory")
    results.append(_backend("directory", DirectoryArchive(scratch / "archive"), plan, segments))
    tick("PostgreSQL")
    with LocalPostgres(scratch / "pg") as server:
        results.append(_backend("postgres", PostgresArchive(server.dsn), plan, segments))
    tick("sealing")
    return ArchiveBenchReport(plan=plan, machine=machine, backends=results, sealing=_sealing(plan))
