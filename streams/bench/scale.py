"""``dcb bench scale``: how the commit path's cost grows with workers and partitions.

DESIGN §8: services spread over partitions, processors over consumer-group members, tags
over tag partitions. ``dcb bench commit`` varies writers, tags, services and the tag
placement on one worker; this bench varies the layout, under the settings' placement
(``DCB_TOPICS__TAG_PLACEMENT``, the service placement by default). Each layout (worker
processes x partitions x tag partitions) gets topics of its own and fresh workers in one
consumer group, a warm pass at the largest load (the group settles, a second worker's
partitions are restored), then one measured closed loop per writer count. Cost is
reported as CPU: the broker's and each worker's, in cores over the measured window, and
in CPU milliseconds per committed event.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from streams.bench.commit import appends, machine, running_workers
from streams.bench.cpu import CpuWindow
from streams.bench.load import closed_loop
from streams.bench.stats import ScenarioResult
from streams.infra.broker import EmbeddedBroker
from streams.kafka import clients
from streams.kafka.topic_admin import delete_topics_with_prefix
from streams.kafka.topic_catalog import owned_prefixes
from streams.sdk import DcbClient
from streams.settings import DcbSettings


class Layout(BaseModel):
    """Worker processes in one group, and the partition counts of the topics they share."""

    workers: int = Field(ge=1)
    partitions: int = Field(ge=1)  # the per-service topics: commands, resolutions, events...
    tag_partitions: int = Field(ge=1)

    @classmethod
    def parse(cls, text: str) -> Layout:
        """``WORKERSxPARTITIONSxTAG_PARTITIONS``, e.g. ``2x6x12``."""
        parts = text.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"a layout is WORKERSxPARTITIONSxTAG_PARTITIONS, got {text!r}")
        workers, partitions, tag_partitions = (int(p) for p in parts)
        return cls(workers=workers, partitions=partitions, tag_partitions=tag_partitions)

    @property
    def name(self) -> str:
        return f"w{self.workers}-p{self.partitions}-tp{self.tag_partitions}"

    @property
    def label(self) -> str:
        return (
            f"{self.workers} worker(s), {self.partitions} partition(s), "
            f"{self.tag_partitions} tag partition(s)"
        )


DEFAULT_LAYOUTS = ("1x6x12", "1x6x1", "1x1x1", "2x6x12", "2x6x1")  # the first: the defaults


class ScalePlan(BaseModel):
    layouts: list[Layout] = Field(
        default_factory=lambda: [Layout.parse(text) for text in DEFAULT_LAYOUTS]
    )
    writers: list[int] = Field(default_factory=lambda: [8, 64])
    tags: int = 3
    services: int = 100
    warmup_s: float = 3.0
    measure_s: float = 10.0
    warm_pass_s: float = 20.0

    @property
    def seconds(self) -> float:
        per_layout = self.warm_pass_s + len(self.writers) * (self.warmup_s + self.measure_s)
        return len(self.layouts) * per_layout


class LayoutResult(BaseModel):
    layout: Layout
    result: ScenarioResult
    broker_cores: float
    worker_cores: list[float]  # one per worker process: a 0 means it got no partitions
    cpu_ms_per_event: float | None


class ScaleBenchReport(BaseModel):
    started_at: datetime
    machine: dict[str, str | int]
    tag_placement: str
    plan: ScalePlan
    results: list[LayoutResult]


def layout_settings(base: DcbSettings, layout: Layout) -> DcbSettings:
    """``base`` with topics and a consumer group of this layout's own."""
    topics = base.topics.model_copy(
        update={
            "prefix": f"{base.topics.prefix}{layout.name}.",
            "partitions": layout.partitions,
            "tag_partitions": layout.tag_partitions,
        }
    )
    worker = base.worker.model_copy(update={"app_id": f"{base.worker.app_id}-{layout.name}"})
    return base.model_copy(update={"topics": topics, "worker": worker})


def cost(
    layout: Layout, result: ScenarioResult, cpu_s: dict[str, float], measure_s: float
) -> LayoutResult:
    """The layout's result with its CPU as cores and as milliseconds per committed event."""
    worker_cores = [
        round(cpu_s.get(f"worker-{i}", 0.0) / measure_s, 2) for i in range(layout.workers)
    ]
    total_s = sum(cpu_s.values())
    return LayoutResult(
        layout=layout,
        result=result,
        broker_cores=round(cpu_s.get("broker", 0.0) / measure_s, 2),
        worker_cores=worker_cores,
        cpu_ms_per_event=round(total_s * 1000 / result.completed, 2) if result.completed else None,
    )


def run_layout(
    base: DcbSettings,
    layout: Layout,
    plan: ScalePlan,
    logs: Path,
    tick: Callable[[float], None],
) -> list[LayoutResult]:
    """Every writer count of ``plan`` on one layout, then its topics are deleted. Each
    worker logs to ``logs/scale-<layout>-<n>.log``, overwritten by the next run."""
    settings = layout_settings(base, layout)
    worker_logs = [logs / f"scale-{layout.name}-{i}.log" for i in range(layout.workers)]
    broker_pid = EmbeddedBroker(settings.broker).status().pid
    results = []
    try:
        with (
            running_workers(settings, worker_logs) as pids,
            DcbClient(service_id="scale-0", settings=settings, timeout_s=60) as root,
        ):
            views = [root] + [root.for_service(f"scale-{i}") for i in range(1, plan.services)]
            busiest = max(plan.writers)
            warm = appends(views, busiest, plan.tags, plan.services, None)
            closed_loop(busiest, warm, plan.warm_pass_s, 0, tick)
            groups = {f"worker-{i}": [pid] for i, pid in enumerate(pids)}
            if broker_pid is not None and base.bootstrap_servers is None:
                groups["broker"] = [broker_pid]
            for writers in plan.writers:
                window = CpuWindow(groups)
                operation = appends(views, writers, plan.tags, plan.services, None)
                m = closed_loop(writers, operation, plan.warmup_s, plan.measure_s, tick, window)
                scenario = ScenarioResult.of("dcb", writers, plan.tags, plan.services, m)
                results.append(cost(layout, scenario, window.spent, plan.measure_s))
    finally:
        admin = clients.admin(settings.kafka)
        delete_topics_with_prefix(admin, owned_prefixes(settings))
    return results


def run_scale_bench(
    settings: DcbSettings, plan: ScalePlan, logs: Path, tick: Callable[[float], None]
) -> ScaleBenchReport:
    """Every layout of ``plan``, each on topics under ``settings``' prefix."""
    started = datetime.now(UTC)
    results = []
    for layout in plan.layouts:
        results += run_layout(settings, layout, plan, logs, tick)
    return ScaleBenchReport(
        started_at=started,
        machine=machine(),
        tag_placement=settings.topics.tag_placement,
        plan=plan,
        results=results,
    )
