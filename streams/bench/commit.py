"""``dcb bench commit``: the commit path's throughput and latency beside raw Kafka's.

Every scenario is a closed loop of writers appending one event each time, without an
append condition, through the public SDK; the baseline sends the same encoded command
bytes through raw transactional produce -> consume at the same writer counts. Between
them, the transport floor (:mod:`streams.bench.floor`) relays the same bytes through
faust with no logic in its steps: the ceiling of a commit path of that many steps. Each
scenario's worker CPU per step, beside the floor's, tells how much the steps themselves
cost on top of the transport.
"""

from __future__ import annotations

import json
import os
import platform
import random
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from streams.bench.core import CoreCost, run_core
from streams.bench.cpu import CpuWindow
from streams.bench.floor import FloorResult, run_floor, steps_per_event
from streams.bench.hops import HopBreakdown, HopTracer
from streams.bench.load import Operation, closed_loop
from streams.bench.raw import TransactionalRoundTrip
from streams.bench.stats import ScenarioResult, ratio_to_baseline
from streams.codec import codec_from_settings
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicLayout, owned, owned_prefixes
from streams.model.records import Command, CommitAttempt, EventData
from streams.sdk import DcbClient
from streams.settings import DcbSettings

TAG_SPREAD = 1000  # distinct values per tag position: contention stays low, tags recur
# (writers, tags, services) whose hops are traced: one tag takes the one-phase path, three the
# two-phase one.
TRACED = ((8, 1, 1), (8, 3, 1))


class BenchPlan(BaseModel):
    writers: list[int] = Field(default_factory=lambda: [1, 8, 64])
    tags: list[int] = Field(default_factory=lambda: [1, 3])
    services: list[int] = Field(default_factory=lambda: [1, 100])
    warmup_s: float = 3.0
    measure_s: float = 10.0
    # Unmeasured, at the plan's largest load, before each system's scenarios: a fresh
    # broker JVM compiles for its first ~20 s of load (its JIT threads took half of its
    # CPU then, ~0.04 cores after), which slowed whichever scenarios came first.
    warm_pass_s: float = 20.0
    floor_steps: int = 20_000  # 0: no transport floor
    floor_outputs: int = Field(default=4, ge=1)  # a second floor pass with these; 1: none
    core_events: int = Field(default=3000, ge=0)  # run without Kafka (core.py); 0: none
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
        runs = len(list(self.scenarios())) + len(self.writers) + len(self.traced())
        return runs * (self.warmup_s + self.measure_s) + 2 * self.warm_pass_s + self.floor_s

    @property
    def floor_s(self) -> float:
        """About how long the floor takes: its worker's start, then ~2,000 steps/s; twice
        with a pass of more outputs per step."""
        once = 15 + self.floor_steps / 2000 if self.floor_steps else 0
        return once * (2 if self.floor_outputs > 1 else 1)


class WorkerCost(BaseModel):
    """The worker's CPU (all its processes and threads) over one scenario's window."""

    scenario: str  # ScenarioResult.key
    cores: float
    cpu_us_per_step: float | None  # None: nothing committed
    times_floor: float | None  # cpu_us_per_step over the floor's; None without a floor
    # The commit path's own code (core.py) per step over cpu_us_per_step; None without it.
    core_share: float | None = None


def worker_cost(
    result: ScenarioResult,
    cpu_s: float,
    measure_s: float,
    floor: FloorResult | None,
    core: CoreCost | None = None,
) -> WorkerCost:
    """``cpu_s`` spent by the worker while ``result`` was measured, per agent step."""
    steps = result.completed * steps_per_event(result.tags)
    per_step = round(cpu_s * 1e6 / steps, 1) if steps else None
    times = (
        round(per_step / floor.cpu_us_per_step, 1)
        if per_step is not None and floor is not None and floor.cpu_us_per_step > 0
        else None
    )
    share = round(core.us_per_step / per_step, 3) if core is not None and per_step else None
    return WorkerCost(
        scenario=result.key,
        cores=round(cpu_s / measure_s, 2),
        cpu_us_per_step=per_step,
        times_floor=times,
        core_share=share,
    )


class Ceiling(BaseModel):
    """What one worker core could commit if a step cost only the transport of the records
    it certainly sends (the floor's, per record) and its own code (core.py): no cost per
    commit round or fetch, which a live step at 64 writers shares with some 30 others
    rather than hundreds. An upper bound: every part of it is a part the worker pays."""

    tags: int
    steps_per_event: int
    records_per_step: float  # the certain ones (CoreCost.certain_records_per_step)
    us_per_step: float
    events_per_s: float
    of_raw: float | None  # over raw's events/s at the most writers


class CommitBenchReport(BaseModel):
    started_at: datetime
    machine: dict[str, str | int]
    settings: dict[str, str | int | float]
    plan: BenchPlan
    raw: list[ScenarioResult]
    floor: FloorResult | None = None
    floor_wide: FloorResult | None = None  # the floor with plan.floor_outputs per step
    core: list[CoreCost] = Field(default_factory=list)  # one per tag count
    dcb: list[ScenarioResult]
    ratios: dict[str, float | None]
    hops: list[HopBreakdown]
    worker: list[WorkerCost] = Field(default_factory=list)  # one per dcb scenario

    def busiest_raw(self) -> ScenarioResult | None:
        """Raw's scenario at the most writers: the one the targets compare with."""
        return max(self.raw, key=lambda r: r.writers, default=None)

    def per_further_record_us(self) -> float | None:
        """CPU a step spends on each record it sends beyond the floor's one (two floors)."""
        floor, wide = self.floor, self.floor_wide
        if floor is None or wide is None or wide.outputs_per_step <= floor.outputs_per_step:
            return None
        return (wide.cpu_us_per_step - floor.cpu_us_per_step) / (
            wide.outputs_per_step - floor.outputs_per_step
        )

    def floor_summary(self) -> str | None:
        """The floor's rate, and the ceiling it puts on each tag count beside raw's rate at
        the most writers."""
        floor = self.floor
        if floor is None:
            return None
        busiest = self.busiest_raw()
        parts = []
        for tags in sorted({r.tags for r in self.dcb}):
            ceiling = floor.events_per_s_ceiling(tags)
            share = f", {ceiling / busiest.events_per_s:.0%} of raw" if busiest else ""
            parts.append(f"{tags} tag(s): {steps_per_event(tags)} steps, {ceiling:.0f}/s{share}")
        summary = (
            f"transport floor (faust + exactly-once, one output per step, no logic): "
            f"{floor.steps_per_s:.0f} steps/s, {floor.cpu_us_per_step:.0f} us CPU per step; "
            f"ceiling per event with no logic at all: " + "; ".join(parts)
        )
        further, wide = self.per_further_record_us(), self.floor_wide
        if further is None or wide is None:
            return summary
        return (
            f"{summary}; with {wide.outputs_per_step} outputs per step "
            f"{wide.cpu_us_per_step:.0f} us CPU per step: {further:.0f} us per further output"
        )

    @computed_field  # type: ignore[prop-decorator]  # written to commit.json
    @property
    def ceilings(self) -> list[Ceiling]:
        """This design's ceiling per tag count on one worker core: each step at the floor's
        cost for the records it certainly sends plus the steps' own code, and nothing per
        commit round or fetch. Empty without both floors and the core costs."""
        floor, further = self.floor, self.per_further_record_us()
        if floor is None or further is None:
            return []
        busiest = self.busiest_raw()
        out = []
        for core in self.core:
            extra = max(core.certain_records_per_step - floor.outputs_per_step, 0.0)
            per_step = floor.cpu_us_per_step + extra * further + core.us_per_step
            steps = steps_per_event(core.tags)
            rate = 1e6 / (steps * per_step)
            out.append(
                Ceiling(
                    tags=core.tags,
                    steps_per_event=steps,
                    records_per_step=core.certain_records_per_step,
                    us_per_step=round(per_step, 1),
                    events_per_s=round(rate, 1),
                    of_raw=round(rate / busiest.events_per_s, 3) if busiest else None,
                )
            )
        return out


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
    return Command(
        service_id="bench",
        command_id=attempt.attempt_id,
        issued_at=datetime.now(UTC),
        kind="COMMIT",
        commit=attempt,
    )


def command_bytes(settings: DcbSettings, tags: int) -> bytes:
    """An encoded COMMIT command, as the SDK sends it: the raw baseline's payload."""
    command = bench_command(random.Random(0), tags)
    return codec_from_settings(settings).encode(command.schema_name, command.to_avro())


def core_costs(settings: DcbSettings, plan: BenchPlan) -> list[CoreCost]:
    """The commit path's own code per event, for each tag count of the plan (no Kafka)."""
    codec, rng = codec_from_settings(settings), random.Random(0)
    costs = []
    for tags in plan.tags:
        commands = [bench_command(rng, tags, plan.tag_spread) for _ in range(plan.core_events)]
        encoded = [codec.encode(c.schema_name, c.to_avro()) for c in commands]
        run_core(codec, tags, encoded[: len(encoded) // 10])  # unmeasured: warms the caches
        costs.append(run_core(codec, tags, encoded))
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
    topics = clients.admin(settings.resolved_bootstrap_servers).list_topics(timeout=15).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


def run_raw(
    settings: DcbSettings, plan: BenchPlan, tick: Callable[[float], None]
) -> list[ScenarioResult]:
    bootstrap = settings.resolved_bootstrap_servers
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


def _dcb_scenario(
    views: list[DcbClient],
    writers: int,
    tags: int,
    services: int,
    plan: BenchPlan,
    tick: Callable[[float], None],
    tracer: HopTracer | None,
    window: CpuWindow | None = None,
) -> ScenarioResult:
    operation = appends(views, writers, tags, services, tracer, plan.tag_spread)
    measured = closed_loop(writers, operation, plan.warmup_s, plan.measure_s, tick, window)
    return ScenarioResult.of("dcb", writers, tags, services, measured)


def run_dcb(
    settings: DcbSettings,
    plan: BenchPlan,
    tick: Callable[[float], None],
    worker_pids: list[int],
    floor: FloorResult | None,
    core: dict[int, CoreCost],
) -> tuple[list[ScenarioResult], list[HopBreakdown], list[WorkerCost]]:
    """Every scenario of ``plan`` through the SDK, with the CPU of the worker processes
    ``worker_pids`` (none: not measured), then a pass per traced scenario.

    Tracing tails three topics in this process, beside the writers: its passes are not
    the measured ones, so it cannot slow the scenarios it explains.
    """
    results: list[ScenarioResult] = []
    costs: list[WorkerCost] = []
    hops: list[HopBreakdown] = []
    run_id = uuid.uuid4().hex[:6]
    with DcbClient(service_id=f"bench-{run_id}-0", settings=settings, timeout_s=60) as root:
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
            window = CpuWindow({"worker": worker_pids}) if worker_pids else None
            result = _dcb_scenario(views, writers, tags, services, plan, tick, None, window)
            results.append(result)
            if window is not None:
                spent = window.spent.get("worker", 0.0)
                costs.append(worker_cost(result, spent, plan.measure_s, floor, core.get(tags)))
        for writers, tags, services in plan.traced():
            tracer = HopTracer(settings)
            try:
                _dcb_scenario(views, writers, tags, services, plan, tick, tracer)
            finally:
                label = f"{writers} writers, {tags} tag(s), {services} service(s)"
                hops.append(tracer.breakdown(label))
                tracer.close()
    return results, hops, costs


def run_commit_bench(
    settings: DcbSettings,
    plan: BenchPlan,
    tick: Callable[[float], None],
    floor_log: Path,
    worker_pids: list[int] | None = None,
) -> CommitBenchReport:
    started = datetime.now(UTC)
    others = other_partitions(broker_partitions(settings), owned_prefixes(settings))
    raw = run_raw(settings, plan, tick)
    floor = floor_wide = None
    if plan.floor_steps:
        value = command_bytes(settings, max(plan.tags))
        floor = run_floor(settings, plan.floor_steps, value, floor_log)
        if plan.floor_outputs > 1:
            wide_log = floor_log.with_name(f"{floor_log.stem}-{plan.floor_outputs}-outputs.log")
            floor_wide = run_floor(
                settings, plan.floor_steps, value, wide_log, outputs=plan.floor_outputs
            )
        tick(plan.floor_s)
    core = core_costs(settings, plan) if plan.core_events else []
    by_tags = {cost.tags: cost for cost in core}
    dcb, hops, worker = run_dcb(settings, plan, tick, worker_pids or [], floor, by_tags)
    ratios = {r.key: ratio_to_baseline(r, raw) for r in dcb}
    return CommitBenchReport(
        started_at=started,
        machine=machine(),
        settings={
            "commit_interval_s": settings.worker.commit_interval_s,
            "commit_max_interval_s": settings.worker.commit_max_interval_s,
            "partitions": settings.topics.partitions,
            "tag_partitions": settings.topics.tag_partitions,
            "broker_other_partitions": others,
        },
        plan=plan,
        raw=raw,
        floor=floor,
        floor_wide=floor_wide,
        core=core,
        dcb=dcb,
        ratios=ratios,
        hops=hops,
        worker=worker,
    )
