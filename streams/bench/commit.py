"""``dcb bench commit``: the commit path's throughput, latency and cost beside raw Kafka's.

Every scenario is a closed loop of writers appending one event each time, without an
append condition, through the public SDK; the baseline sends the same encoded command
bytes through raw transactional produce -> consume at the same writer counts. The dcb
scenarios run once per tag placement, each on topics and a worker of its own: under the
service placement every commit is one-phase; under the tag placement a service's tags
spread over the tag partitions, and an attempt spanning several commits in two phases.

Per scenario, the worker's CPU per committed event, and how many items each hop's batch
records carried: a round takes whatever is ready, so its batches say how much the
runtime's group commit had to share. Beside them, the processors' own code without Kafka
(:mod:`streams.bench.core`) at a round of one command and of many.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from confluent_kafka import Message
from pydantic import BaseModel, Field

from streams.bench.core import CoreCost, run_core
from streams.bench.cpu import CpuWindow
from streams.bench.hops import HopBreakdown, HopTracer
from streams.bench.load import Operation, closed_loop
from streams.bench.raw import TransactionalRoundTrip
from streams.bench.stats import ScenarioResult, percentile, ratio_to_baseline
from streams.codec import codec_from_settings
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import (
    TopicLayout,
    TopicRole,
    owned,
    owned_prefixes,
    topic_name,
    topic_specs,
)
from streams.model.records import Command, CommitAttempt, EventData
from streams.sdk import DcbClient
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings

TAG_SPREAD = 1000  # distinct values per tag position: contention stays low, tags recur
# (writers, tags, services) whose hops are traced, under each placement: one tag is
# one-phase under both; three are one-phase under the service placement, two-phase under
# the tag placement.
TRACED = ((8, 1, 1), (8, 3, 1))
Placement = Literal["service", "tag"]
PLACEMENTS: tuple[Placement, ...] = ("service", "tag")
# The batch records of the commit path, and the Avro field holding their items.
BATCHED = {
    TopicRole.ALLOCATIONS: "allocations",
    TopicRole.TAG_DELIVERIES: "items",
    TopicRole.TAG_RESOLUTIONS: "items",
}


class BenchPlan(BaseModel):
    writers: list[int] = Field(default_factory=lambda: [1, 8, 64])
    tags: list[int] = Field(default_factory=lambda: [1, 3])
    services: list[int] = Field(default_factory=lambda: [1, 100])
    placements: list[Placement] = Field(default_factory=lambda: list(PLACEMENTS))
    warmup_s: float = 3.0
    measure_s: float = 10.0
    # Unmeasured, at the plan's largest load, before each system's scenarios: a fresh
    # broker JVM compiles for its first ~20 s of load (its JIT threads took half of its
    # CPU then, ~0.04 cores after), which slowed whichever scenarios came first.
    warm_pass_s: float = 20.0
    core_events: int = Field(default=3000, ge=0)  # run without Kafka (core.py); 0: none
    core_batches: list[int] = Field(default_factory=lambda: [1, 64])  # commands per round
    # Distinct values per tag position; 1: every event at the same tags (one busy tag per
    # position, whose history grows through the run: an invoice sequence).
    tag_spread: int = Field(default=TAG_SPREAD, ge=1)

    def scenarios(self) -> Iterator[tuple[int, int, int]]:
        for services in self.services:
            for tags in self.tags:
                for writers in self.writers:
                    yield writers, tags, services

    def traced(self) -> list[tuple[int, int, int]]:
        """The scenarios whose hops get a pass of their own: those of ``TRACED`` in the plan."""
        planned = set(self.scenarios())
        return [scenario for scenario in TRACED if scenario in planned]

    @property
    def seconds(self) -> float:
        """About how long the measured parts take (not the workers' starts, not the core)."""
        per_placement = len(list(self.scenarios())) + len(self.traced())
        runs = len(self.placements) * per_placement + len(self.writers)
        warm_passes = 1 + len(self.placements)
        return runs * (self.warmup_s + self.measure_s) + warm_passes * self.warm_pass_s


class WorkerCost(BaseModel):
    """The worker's CPU (all its processes and threads) over one scenario's window."""

    scenario: str  # ScenarioResult.key
    cores: float
    cpu_us_per_event: float | None  # None: nothing committed


def worker_cost(result: ScenarioResult, cpu_s: float, measure_s: float) -> WorkerCost:
    """``cpu_s`` spent by the worker while ``result`` was measured, per committed event."""
    per_event = round(cpu_s * 1e6 / result.completed, 1) if result.completed else None
    return WorkerCost(
        scenario=result.key, cores=round(cpu_s / measure_s, 2), cpu_us_per_event=per_event
    )


class HopBatches(BaseModel):
    """Items per record on one hop's topic during a scenario's measured window."""

    hop: str  # the topic's role: allocations, tag-deliveries, tag-resolutions
    records: int
    p50: float | None  # None: no record
    p90: float | None
    max: int | None

    @classmethod
    def of(cls, hop: str, items: list[int]) -> HopBatches:
        if not items:
            return cls(hop=hop, records=0, p50=None, p90=None, max=None)
        return cls(
            hop=hop,
            records=len(items),
            p50=percentile(items, 50),
            p90=percentile(items, 90),
            max=max(items),
        )


class ScenarioBatches(BaseModel):
    scenario: str  # ScenarioResult.key
    hops: list[HopBatches]


class CommitBenchReport(BaseModel):
    started_at: datetime
    machine: dict[str, str | int]
    settings: dict[str, str | int | float]
    plan: BenchPlan
    raw: list[ScenarioResult]
    core: list[CoreCost] = Field(default_factory=list)  # per placement, tag count, batch
    dcb: list[ScenarioResult] = Field(default_factory=list)
    ratios: dict[str, float | None] = Field(default_factory=dict)
    hops: list[HopBreakdown] = Field(default_factory=list)
    worker: list[WorkerCost] = Field(default_factory=list)  # one per dcb scenario
    batches: list[ScenarioBatches] = Field(default_factory=list)  # one per dcb scenario

    def busiest_raw(self) -> ScenarioResult | None:
        """Raw's scenario at the most writers: the one the targets compare with."""
        return max(self.raw, key=lambda r: r.writers, default=None)


def bench_event(rng: random.Random, tags: int, spread: int = TAG_SPREAD) -> EventData:
    return EventData(
        event_id=str(uuid.uuid4()),
        event_type="BenchEvent",
        payload=json.dumps({"n": rng.randrange(1 << 30), "note": "x" * 64}),
        tags=[f"t{i}:{rng.randrange(spread)}" for i in range(tags)],
        timestamp=datetime.now(UTC),
    )


def bench_command(rng: random.Random, tags: int, spread: int = TAG_SPREAD) -> Command:
    """A COMMIT command of one event, as the bench's writers send them."""
    attempt = CommitAttempt(
        attempt_id=str(uuid.uuid4()), writer_epoch=0, events=[bench_event(rng, tags, spread)]
    )
    return Command.of_commit("bench", attempt)


def command_bytes(settings: DcbSettings, tags: int) -> bytes:
    """An encoded COMMIT command, as the SDK sends it: the raw baseline's payload."""
    command = bench_command(random.Random(0), tags)
    return codec_from_settings(settings).encode(command.schema_name, command.to_avro())


def placement_settings(base: DcbSettings, placement: Placement) -> DcbSettings:
    """``base`` with this tag placement, on topics and a worker group of its own."""
    topics = base.topics.model_copy(
        update={"prefix": f"{base.topics.prefix}{placement}.", "tag_placement": placement}
    )
    worker = base.worker.model_copy(update={"app_id": f"{base.worker.app_id}-{placement}"})
    return base.model_copy(update={"topics": topics, "worker": worker})


def core_costs(settings: DcbSettings, plan: BenchPlan) -> list[CoreCost]:
    """The processors' own code per event, for each placement, tag count and batch size of
    the plan (one service, no Kafka)."""
    codec, rng = codec_from_settings(settings), random.Random(0)
    costs = []
    for placement in plan.placements:
        placed = placement_settings(settings, placement)
        for tags in plan.tags:
            commands = [bench_command(rng, tags, plan.tag_spread) for _ in range(plan.core_events)]
            warm = commands[: max(len(commands) // 10, 1)]  # unmeasured: warms the caches
            run_core(placed, codec, warm, tags, max(plan.core_batches))
            costs += [run_core(placed, codec, commands, tags, b) for b in plan.core_batches]
    return costs


def machine() -> dict[str, str | int]:
    return {
        "cpus": os.cpu_count() or 0,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }


def other_partitions(partitions: dict[str, int], own_prefixes: list[str]) -> int:
    """Partitions on the broker that are not this run's.

    A broker cluttered with other topics measures lower: one that had kept ~12,000
    partitions of earlier ad-hoc runs used 0.7-1.2 cores at 64 writers and took
    90 s to start. The report states the count so a run can be judged.
    """
    return sum(n for name, n in partitions.items() if not owned(name, own_prefixes))


def broker_partitions(settings: DcbSettings) -> dict[str, int]:
    topics = clients.admin(settings.kafka).list_topics(timeout=15).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


@contextmanager
def running_workers(settings: DcbSettings, logs: Sequence[Path]) -> Iterator[list[int]]:
    """The commit-path topics of ``settings`` and one ready ``dcb worker`` per log, in one
    group; yields their pids (CPU is counted with descendants: the supervised child)."""
    ensure_topics(clients.admin(settings.kafka), topic_specs(settings.topics))
    with ExitStack() as stack:
        workers = [stack.enter_context(WorkerProcess(settings, log)) for log in logs]
        yield [worker.proc.pid for worker in workers if worker.proc is not None]


def run_raw(
    settings: DcbSettings, plan: BenchPlan, tick: Callable[[float], None]
) -> list[ScenarioResult]:
    bootstrap = settings.kafka
    topic = f"{settings.topics.prefix}bench-raw"
    spec = TopicLayout(topic, settings.topics.partitions, 1, "delete")
    ensure_topics(clients.admin(bootstrap), [spec])
    value = command_bytes(settings, max(plan.tags))
    loop = TransactionalRoundTrip(bootstrap, topic)
    try:
        closed_loop(max(plan.writers), lambda _w, _s: loop.send(value), plan.warm_pass_s, 0, tick)
        return [
            ScenarioResult.of(
                "raw",
                writers,
                max(plan.tags),
                1,
                closed_loop(
                    writers, lambda _w, _s: loop.send(value), plan.warmup_s, plan.measure_s, tick
                ),
            )
            for writers in plan.writers
        ]
    finally:
        loop.close()


def appends(
    views: list[DcbClient],
    writers: int,
    tags: int,
    services: int,
    tracer: HopTracer | None,
    spread: int = TAG_SPREAD,
) -> Operation:
    """Each writer's next append: one event of ``tags`` tags, services taken in turn."""
    rngs = [random.Random(w) for w in range(writers)]

    def append(w: int, seq: int) -> None:
        client = views[(w * 7919 + seq) % services]
        sent = datetime.now(UTC)
        result = client.append([bench_event(rngs[w], tags, spread)])
        if tracer is not None:
            tracer.sent(result.attempt_id, sent, datetime.now(UTC))

    return append


class Window:
    """A scenario's measured window: its wall-clock ends in ms (as record timestamps) and
    the worker's CPU over it."""

    def __init__(self, worker_pids: list[int]) -> None:
        self.cpu = CpuWindow({"worker": worker_pids})
        self.opened_ms = self.closed_ms = 0.0

    def __call__(self, opened: bool) -> None:
        self.cpu(opened)
        if opened:
            self.opened_ms = time.time() * 1000
        else:
            self.closed_ms = time.time() * 1000


def _items_per_record(
    settings: DcbSettings, role: TopicRole, windows: dict[str, Window]
) -> dict[str, list[int]]:
    """Items per record of ``role``'s topic, per scenario whose window holds the record's
    timestamp; the topic read from its beginning (read_committed)."""
    codec, field = codec_from_settings(settings), BATCHED[role]
    found: dict[str, list[int]] = {key: [] for key in windows}

    def count(message: Message) -> None:
        _, at_ms = message.timestamp()
        for key, window in windows.items():
            if window.opened_ms <= at_ms <= window.closed_ms:
                found[key].append(len(codec.decode(message.value() or b"", None).value[field]))
                return

    tail = TopicTail(settings.kafka, topic_name(settings.topics, role))
    try:
        tail.catch_up(count, timeout_s=120)
    finally:
        tail.close()
    return found


def batch_sizes(settings: DcbSettings, windows: dict[str, Window]) -> list[ScenarioBatches]:
    """Each scenario's items per record on the three batched hops."""
    per_role = {role: _items_per_record(settings, role, windows) for role in BATCHED}
    return [
        ScenarioBatches(
            scenario=key,
            hops=[HopBatches.of(role.value, per_role[role][key]) for role in BATCHED],
        )
        for key in windows
    ]


def run_placement(
    report: CommitBenchReport,
    settings: DcbSettings,
    tick: Callable[[float], None],
    logs: Path,
) -> None:
    """Every scenario of the report's plan on ``settings``' topics and a worker of their
    own, then a pass per traced scenario; then what each hop's records carried.

    Tracing tails three topics in this process, beside the writers: its passes are not
    the measured ones, so it cannot slow the scenarios it explains.
    """
    plan, placement = report.plan, settings.topics.tag_placement
    run_id = uuid.uuid4().hex[:6]
    windows: dict[str, Window] = {}
    with (
        running_workers(settings, [logs / f"commit-worker-{placement}.log"]) as pids,
        DcbClient(service_id=f"bench-{run_id}-0", settings=settings, timeout_s=60) as root,
    ):
        services = max(plan.services)
        views = [root] + [root.for_service(f"bench-{run_id}-{i}") for i in range(1, services)]
        busiest = max(plan.writers)
        closed_loop(
            busiest,
            appends(views, busiest, max(plan.tags), services, None, plan.tag_spread),
            plan.warm_pass_s,
            0,
            tick,
        )
        for writers, tags, services in plan.scenarios():
            window = Window(pids)
            operation = appends(views, writers, tags, services, None, plan.tag_spread)
            measured = closed_loop(writers, operation, plan.warmup_s, plan.measure_s, tick, window)
            result = ScenarioResult.of("dcb", writers, tags, services, measured, placement)
            report.dcb.append(result)
            spent = window.cpu.spent.get("worker", 0.0)
            report.worker.append(worker_cost(result, spent, plan.measure_s))
            windows[result.key] = window
        for writers, tags, services in plan.traced():
            tracer = HopTracer(settings)
            try:
                operation = appends(views, writers, tags, services, tracer, plan.tag_spread)
                closed_loop(writers, operation, plan.warmup_s, plan.measure_s, tick)
            finally:
                label = f"{writers} writers, {tags} tag(s), {services} service(s), {placement}"
                report.hops.append(tracer.breakdown(label))
                tracer.close()
    report.batches += batch_sizes(settings, windows)


def run_commit_bench(
    settings: DcbSettings, plan: BenchPlan, tick: Callable[[float], None], logs: Path
) -> CommitBenchReport:
    """Raw's scenarios, the core's, then each placement's; workers log to ``logs``."""
    started = datetime.now(UTC)
    others = other_partitions(broker_partitions(settings), owned_prefixes(settings))
    raw = run_raw(settings, plan, tick)
    report = CommitBenchReport(
        started_at=started,
        machine=machine(),
        settings={
            "partitions": settings.topics.partitions,
            "tag_partitions": settings.topics.tag_partitions,
            "tag_placement": ",".join(plan.placements),
            "max_batch_records": settings.worker.max_batch_records,
            "broker_other_partitions": others,
        },
        plan=plan,
        raw=raw,
        core=core_costs(settings, plan) if plan.core_events else [],
    )
    for placement in plan.placements:
        run_placement(report, placement_settings(settings, placement), tick, logs)
    report.ratios = {r.key: ratio_to_baseline(r, raw) for r in report.dcb}
    return report
