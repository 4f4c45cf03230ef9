"""``dcb bench projections``: the price of the gate, and how soon a commit is readable.

- **throughput**: the same stream (hand-written ``CommittedEvent`` records of one service
  with a certificate every ``per_certificate`` events, as the ledger writes them) read
  twice: by an ungated consumer that decodes and folds each event (the course rosters) and
  commits its offsets as it goes, and by the gated runner (certificates judged, events held
  to the prefix, rows and checkpoint in one transaction per pass). Events/s of each and
  their ratio: the price of safety.
- **latency**: ``writers`` clients append through a real worker while the runner projects
  and a Kafka Connect worker sinks the totals into PostgreSQL. For every committed event:
  from ``append`` returning to the first committed totals row (read_committed) whose
  ``last_position`` covers it (commit → applied), and to the first time PostgreSQL's row
  covers it (commit → row in PostgreSQL).
"""

from __future__ import annotations

import bisect
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from pydantic import BaseModel

from streams.bench.commit import machine
from streams.bench.stats import percentile
from streams.codec import codec_from_settings
from streams.demo.courses import new_event
from streams.demo.projections import course_rosters, subscription_totals
from streams.errors import DcbError
from streams.infra.connect import EmbeddedConnect
from streams.infra.ports import free_port
from streams.infra.postgres import LocalPostgres
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicRole, topic_name, topic_specs
from streams.model.records import Certificate, CommittedEvent, EventData, PartitionOffset
from streams.model.suid import format_suid, ticks
from streams.projections.api import ProjectedEvent, ProjectorRegistry, Row
from streams.projections.row_format import decode_key, decode_value
from streams.projections.runner import (
    ProjectionRunner,
    ensure_projection_topics,
    rows_topic,
    run_projections,
)
from streams.projections.sink import connector_name, sink_config, table_name
from streams.sdk import DcbClient
from streams.settings import DcbSettings

SERVICE = "bench"
PASS_TIMEOUT_S = 600.0


class BenchError(DcbError):
    code = "bench_failed"


def _subscribed(student: str, course: str) -> EventData:
    return new_event(
        "StudentSubscribed",
        {"student": student, "course": course},
        f"course:{course}",
        f"student:{student}",
    )


class ProjectionPlan(BaseModel):
    events: int = 20_000
    per_certificate: int = 100
    writers: int = 8
    measure_s: float = 20.0

    @property
    def seconds(self) -> float:
        return self.measure_s + 30.0  # the throughput passes, roughly


class Throughput(BaseModel):
    events: int
    ungated_events_per_s: float
    gated_events_per_s: float
    ratio: float


class Latency(BaseModel):
    commits: int
    commit_to_applied_p50_ms: float
    commit_to_applied_p99_ms: float
    commit_to_postgres_p50_ms: float
    commit_to_postgres_p99_ms: float


class ProjectionBenchReport(BaseModel):
    machine: dict[str, str | int]
    plan: ProjectionPlan
    throughput: Throughput
    latency: Latency


def run_projection_bench(
    settings: DcbSettings, plan: ProjectionPlan, scratch: Path, tick: Callable[[float], None]
) -> ProjectionBenchReport:
    ensure_topics(clients.admin(settings.kafka), topic_specs(settings.topics))
    ensure_projection_topics(settings, [course_rosters.id, subscription_totals.id])
    started = time.monotonic()
    throughput = _throughput(settings, plan)
    tick(time.monotonic() - started)
    latency = _latency(settings, plan, scratch, tick)
    return ProjectionBenchReport(
        machine=machine(), plan=plan, throughput=throughput, latency=latency
    )


# --- throughput ------------------------------------------------------------------------


def _write_stream(settings: DcbSettings, plan: ProjectionPlan) -> None:
    """The events and certificates a ledger would write for ``plan.events`` commits."""
    codec = codec_from_settings(settings)
    producer = clients.producer(settings.kafka, **{"linger.ms": 20})
    events = topic_name(settings.topics, TopicRole.EVENTS)
    certificates = topic_name(settings.topics, TopicRole.CERTIFICATES)
    first = ticks(datetime.now(UTC)) * 10**11
    lineage = str(uuid.uuid4())
    partition = key_partition(SERVICE.encode(), settings.topics.partitions)
    for n in range(plan.events):
        suid = format_suid(first + n)
        record = CommittedEvent(
            service_id=SERVICE,
            suid=suid,
            allocator_lineage_id=lineage,
            attempt_id=f"a{n}",
            event=_subscribed(f"s{n % 997}", f"c{n % 50}"),
        )
        producer.produce(
            events, key=SERVICE.encode(), value=codec.encode(record.schema_name, record.to_avro())
        )
        if (n + 1) % plan.per_certificate == 0 or n + 1 == plan.events:
            producer.flush(30)  # the coverage is where the events end
            cert = Certificate(
                certificate_version=1,
                authority="bench",
                status="READY",
                allocator_lineage_id=lineage,
                service_id=SERVICE,
                closed_prefix_suid=suid,
                unresolved_count=0,
                generated_at=datetime.now(UTC),
                coverage=[PartitionOffset(partition=partition, offset=n + 1)],
            )
            value = codec.encode(cert.schema_name, cert.to_avro())
            producer.produce(certificates, key=SERVICE.encode(), value=value)
    producer.flush(30)


def _ungated(settings: DcbSettings, total: int) -> float:
    """Events/s of a consumer that folds every event as it reads it, no gate."""
    codec = codec_from_settings(settings)
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    consumer = clients.consumer(settings.kafka, f"{settings.topics.prefix}ungated-{uuid.uuid4()}")
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    rows: dict[str, Row] = {}
    seen, t0, began = 0, None, time.monotonic()
    try:
        while seen < total:
            if time.monotonic() - began > PASS_TIMEOUT_S:
                raise BenchError(f"the ungated consumer read {seen} of {total} events")
            batch = clients.take_ready(consumer, 500, 1.0)
            if batch and t0 is None:
                t0 = time.monotonic()  # from the first record in hand: no start-up
            for message in batch:
                if message.error():
                    continue
                seen += 1
                if seen % 1000 == 0:  # offsets as it reads: what a naive consumer does
                    consumer.commit(asynchronous=True)
                record = CommittedEvent.from_avro(
                    codec.decode(message.value(), CommittedEvent.schema_name).value
                )
                event = ProjectedEvent.of(record)
                if not course_rosters.matches(event):
                    continue
                for key in course_rosters.keys(event):
                    row = rows.get(key) or course_rosters.initial(key)
                    rows[key] = course_rosters.apply(row, event) or {}
        assert t0 is not None
        return seen / (time.monotonic() - t0)
    finally:
        consumer.close()


def _gated(settings: DcbSettings, total: int) -> float:
    runner = ProjectionRunner(course_rosters, settings)
    t0, began = None, time.monotonic()
    try:
        while runner.core.applied < total:
            if time.monotonic() - began > PASS_TIMEOUT_S:
                raise BenchError(f"the gated runner applied {runner.core.applied} of {total}")
            before = time.monotonic()
            runner.poll(timeout_s=0.005)  # short waits: the clock starts near the first record
            if t0 is None and runner.core.events_read:
                t0 = before
        assert t0 is not None
        return total / (time.monotonic() - t0)
    finally:
        runner.close()


def _throughput(settings: DcbSettings, plan: ProjectionPlan) -> Throughput:
    _write_stream(settings, plan)
    ungated = _ungated(settings, plan.events)
    gated = _gated(settings, plan.events)
    return Throughput(
        events=plan.events,
        ungated_events_per_s=round(ungated, 1),
        gated_events_per_s=round(gated, 1),
        ratio=round(gated / ungated, 3),
    )


# --- latency -----------------------------------------------------------------------------


class _Covered:
    """When each ``last_position`` of the totals row was first seen, in order."""

    def __init__(self) -> None:
        self.positions: list[str] = []
        self.times: list[float] = []
        self.lock = threading.Lock()

    def saw(self, position: str, at: float) -> None:
        with self.lock:
            if not self.positions or position > self.positions[-1]:
                self.positions.append(position)
                self.times.append(at)

    def when(self, suid: str) -> float | None:
        """When a position at or above ``suid`` was first seen."""
        with self.lock:
            i = bisect.bisect_left(self.positions, suid)
            return self.times[i] if i < len(self.times) else None


def _watch_rows(settings: DcbSettings, service: str, seen: _Covered, stop: threading.Event) -> None:
    topic = rows_topic(settings, subscription_totals.id)
    fast: dict[str, Any] = {"fetch.wait.max.ms": 5}
    consumer = clients.consumer(
        settings.kafka, f"{settings.topics.prefix}watch-{uuid.uuid4()}", **fast
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        while not stop.is_set():
            for message in clients.take_ready(consumer, 100, 0.05):
                if message.error() or message.value() is None:
                    continue
                if decode_key(message.key() or b"") == service:
                    row = decode_value(message.value() or b"")
                    seen.saw(str(row["last_position"]), time.monotonic())
    finally:
        consumer.close()


def _watch_postgres(
    postgres: LocalPostgres, service: str, seen: _Covered, stop: threading.Event
) -> None:
    import psycopg  # a bench dependency (eventsourcing[postgres])

    table = table_name(subscription_totals.id)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        while not stop.is_set():
            try:
                found = conn.execute(
                    f'SELECT last_position FROM "{table}" WHERE row_id = %s', (service,)
                ).fetchone()
            except psycopg.errors.UndefinedTable:
                found = None
            if found is not None:
                seen.saw(str(found[0]), time.monotonic())
            time.sleep(0.005)


def _latency(
    settings: DcbSettings, plan: ProjectionPlan, scratch: Path, tick: Callable[[float], None]
) -> Latency:
    service = f"lat-{uuid.uuid4().hex[:6]}"
    applied, landed = _Covered(), _Covered()
    commits: list[tuple[str, float]] = []
    stop, writers_stop = threading.Event(), threading.Event()
    settings.projections.http_port = free_port()
    with LocalPostgres(Path(tempfile.mkdtemp(dir=scratch))) as postgres:
        settings.connect.port = free_port()
        settings.connect.data_dir = scratch / "connect"
        settings.connect.group_id = f"{settings.topics.prefix}connect"
        settings.connect.jdbc_url = f"jdbc:postgresql://127.0.0.1:{postgres.port}/postgres"
        connect = EmbeddedConnect(settings)
        worker = WorkerProcess(settings, scratch / "worker.log")
        registry = ProjectorRegistry([subscription_totals])
        threads = [
            threading.Thread(target=run_projections, args=(registry, settings, stop)),
            threading.Thread(target=_watch_rows, args=(settings, service, applied, stop)),
            threading.Thread(target=_watch_postgres, args=(postgres, service, landed, stop)),
        ]
        try:
            connect.start()
            worker.start()
            connect.deploy(
                connector_name(subscription_totals.id),
                sink_config(settings, subscription_totals.id),
            )
            for thread in threads:
                thread.start()
            with DcbClient(service_id=service, settings=settings) as client:

                def write(n: int) -> None:
                    i = 0
                    while not writers_stop.is_set():
                        i += 1
                        result = client.append([_subscribed(f"w{n}-{i}", f"c{i % 20}")])
                        commits.append((result.suids[-1], time.monotonic()))

                writers = [threading.Thread(target=write, args=(n,)) for n in range(plan.writers)]
                for thread in writers:
                    thread.start()
                end = time.monotonic() + plan.measure_s
                while (now := time.monotonic()) < end:
                    time.sleep(min(1.0, end - now))
                    tick(1.0)
                writers_stop.set()
                for thread in writers:
                    thread.join(60)
            if not commits:
                raise BenchError("no append committed during the latency run")
            last = max(suid for suid, _ in commits)
            deadline = time.monotonic() + 60
            while (applied.when(last) is None or landed.when(last) is None) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.1)
        finally:
            stop.set()
            for thread in threads:
                if thread.ident is not None:
                    thread.join(30)
            worker.stop()
            connect.stop()
    to_applied = [t - c for s, c in commits if (t := applied.when(s)) is not None]
    to_landed = [t - c for s, c in commits if (t := landed.when(s)) is not None]
    return Latency(
        commits=len(commits),
        commit_to_applied_p50_ms=round(percentile(to_applied, 50) * 1000, 1),
        commit_to_applied_p99_ms=round(percentile(to_applied, 99) * 1000, 1),
        commit_to_postgres_p50_ms=round(percentile(to_landed, 50) * 1000, 1),
        commit_to_postgres_p99_ms=round(percentile(to_landed, 99) * 1000, 1),
    )
