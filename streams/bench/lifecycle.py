"""The log lifecycle on a real broker and worker: reading across the archive boundary,
and what sealing a subject's payloads adds to an append.

- Two services with histories of the same size on different partitions, one all in the
  hot log, the other with its older half archived and cut from the log; each read by
  fresh clients (a first read catches up from nothing), the two alternating, the median
  of a few reads each.
- One writer appending one event at a time, two tags each, with and without a subject
  tag (sealed under the subject's key; ten subjects, so keys are mostly known already),
  the two kinds interleaved so that drift on a noisy machine falls on both alike.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from statistics import median

from pydantic import BaseModel

from streams.archive import open_archive
from streams.archive.history import archive_service
from streams.bench.stats import percentile
from streams.demo.courses import new_event
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.sdk import DcbClient
from streams.settings import DcbSettings

SUBJECT_PREFIX = "user:"
BATCH = 100  # events per append while the history is written
READS = 3  # fresh-client reads of each history
SUBJECTS = 10


class LifecyclePlan(BaseModel):
    events: int = 5_000  # of the service read across the boundary
    appends: int = 200  # of each kind in the sealing run


class BoundaryRead(BaseModel):
    events: int
    archived: int  # of them, read from the archive in the second read
    hot_log_s: float  # a fresh client's first read, all of it in the log
    across_s: float  # the same read, the archived part from the archive
    hot_log_events_per_s: float
    across_events_per_s: float


class SealedAppends(BaseModel):
    appends: int  # of each kind
    plain_p50_ms: float
    sealed_p50_ms: float
    plain_p99_ms: float
    sealed_p99_ms: float


class LifecycleResult(BaseModel):
    boundary: BoundaryRead
    appends: SealedAppends


def _first_read_s(settings: DcbSettings, service: str, expect: int) -> float:
    with DcbClient(service_id=service, settings=settings) as client:
        t0 = time.perf_counter()
        found = len(client.read())
        took = time.perf_counter() - t0
    assert found == expect, f"read {found} events of {expect}"
    return took


def _history(settings: DcbSettings, service: str, events: int) -> str:
    """``events`` events of ``service``; the position of the middle one."""
    with DcbClient(service_id=service, settings=settings) as client:
        for n in range(0, events, BATCH):
            size = min(BATCH, events - n)
            batch = [new_event("Noted", {"n": str(n + i)}, f"note:{n + i}") for i in range(size)]
            client.append(batch)
        return client.read()[events // 2 - 1].position


def _apart(settings: DcbSettings) -> tuple[str, str]:
    """Two services whose events go to different partitions of ``dcb.events``."""
    first = f"hot-{uuid.uuid4().hex[:6]}"
    while True:
        other = f"cut-{uuid.uuid4().hex[:6]}"
        partitions = settings.topics.partitions
        if key_partition(other.encode(), partitions) != key_partition(first.encode(), partitions):
            return first, other


def _boundary(settings: DcbSettings, plan: LifecyclePlan) -> BoundaryRead:
    hot_service, cut_service = _apart(settings)
    _history(settings, hot_service, plan.events)
    middle = _history(settings, cut_service, plan.events)
    report = archive_service(settings, open_archive(settings), cut_service, middle)
    assert report.dropped > 0, f"the log was not cut: {report.held_back_by}"
    reads: dict[str, list[float]] = {hot_service: [], cut_service: []}
    for _ in range(READS):
        for service, took in reads.items():
            took.append(_first_read_s(settings, service, plan.events))
    hot, across = median(reads[hot_service]), median(reads[cut_service])
    archived = plan.events // 2
    return BoundaryRead(
        events=plan.events,
        archived=archived,
        hot_log_s=round(hot, 3),
        across_s=round(across, 3),
        hot_log_events_per_s=round(plan.events / hot),
        across_events_per_s=round(plan.events / across),
    )


def _appends(settings: DcbSettings, plan: LifecyclePlan) -> SealedAppends:
    latencies: dict[bool, list[float]] = {False: [], True: []}
    with DcbClient(service_id=f"seal-{uuid.uuid4().hex[:6]}", settings=settings) as client:
        for n in range(plan.appends):
            for sealed in (n % 2 == 0, n % 2 == 1):  # both kinds, in alternating order
                who = f"{SUBJECT_PREFIX if sealed else 'student:'}{n % SUBJECTS}"
                event = new_event("Subscribed", {"name": "x" * 120}, f"course:c{n % 10}", who)
                t0 = time.perf_counter()
                client.append([event])
                latencies[sealed].append((time.perf_counter() - t0) * 1000)
    return SealedAppends(
        appends=plan.appends,
        plain_p50_ms=round(percentile(latencies[False], 50), 2),
        sealed_p50_ms=round(percentile(latencies[True], 50), 2),
        plain_p99_ms=round(percentile(latencies[False], 99), 2),
        sealed_p99_ms=round(percentile(latencies[True], 99), 2),
    )


def run_lifecycle_bench(
    base: DcbSettings, plan: LifecyclePlan, scratch: Path, tick: Callable[[str], None]
) -> LifecycleResult:
    archive = base.archive.model_copy(update={"dir": scratch / "archive"})
    erasure = base.erasure.model_copy(
        update={"subject_prefix": SUBJECT_PREFIX, "key_file": scratch / "keys.json"}
    )
    settings = base.model_copy(update={"archive": archive, "erasure": erasure})
    ensure_topics(clients.admin(settings.kafka), topic_specs(settings.topics))
    worker = WorkerProcess(settings, scratch / "lifecycle-worker.log")
    worker.start()
    try:
        tick("reading across the archive boundary")
        boundary = _boundary(settings, plan)
        tick("appends with and without a subject tag")
        return LifecycleResult(boundary=boundary, appends=_appends(settings, plan))
    finally:
        worker.stop()
