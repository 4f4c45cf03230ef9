"""``dcb bench scale``: how the commit path's cost grows with workers and tag partitions.

DESIGN §8: services spread over partitions, processors over consumer-group members, tags
over tag partitions. ``dcb bench commit`` varies writers, tags and services on one worker;
this bench varies the layout. Each layout (worker processes x tag partitions) gets topics
of its own and fresh workers in one consumer group, a warm pass at the largest load (the
group settles, a second worker's partitions are restored), then one measured closed loop
per writer count. Cost is reported as CPU: the broker's and each worker's, in cores over
the measured window, and in CPU milliseconds per committed event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from streams.bench.commit import appends, machine
from streams.bench.load import closed_loop
from streams.bench.peers.cpu import cpu_seconds
from streams.bench.stats import ScenarioResult
from streams.infra.broker import EmbeddedBroker
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.topic_admin import delete_topics_with_prefix, ensure_topics
from streams.kafka.topic_catalog import owned_prefixes, topic_specs
from streams.sdk import DcbClient
from streams.settings import DcbSettings


class ScalePlan(BaseModel):
    workers: list[int] = Field(default_factory=lambda: [1, 2])
    tag_partitions: list[int] = Field(default_factory=lambda: [1, 12])
    writers: list[int] = Field(default_factory=lambda: [8, 64])
    tags: int = 3
    services: int = 100
    warmup_s: float = 3.0
    measure_s: float = 10.0
    warm_pass_s: float = 20.0

    def layouts(self) -> Iterator[tuple[int, int]]:
        """(workers, tag partitions), every combination once."""
        for workers in self.workers:
            for tag_partitions in self.tag_partitions:
                yield workers, tag_partitions

    @property
    def seconds(self) -> float:
        per_layout = self.warm_pass_s + len(self.writers) * (self.warmup_s + self.measure_s)
        return len(list(self.layouts())) * per_layout


class LayoutResult(BaseModel):
    workers: int
    tag_partitions: int
    result: ScenarioResult
    broker_cores: float
    worker_cores: list[float]  # one per worker process: a 0 means it got no partitions
    cpu_ms_per_event: float | None


class ScaleBenchReport(BaseModel):
    started_at: datetime
    machine: dict[str, str | int]
    plan: ScalePlan
    results: list[LayoutResult]


def layout_name(workers: int, tag_partitions: int) -> str:
    return f"w{workers}-tp{tag_partitions}"


def layout_settings(base: DcbSettings, workers: int, tag_partitions: int) -> DcbSettings:
    """``base`` with topics and a consumer group of this layout's own."""
    name = layout_name(workers, tag_partitions)
    topics = base.topics.model_copy(
        update={"prefix": f"{base.topics.prefix}{name}.", "tag_partitions": tag_partitions}
    )
    worker = base.worker.model_copy(update={"app_id": f"{base.worker.app_id}-{name}"})
    return base.model_copy(update={"topics": topics, "worker": worker})


class CpuWindow:
    """CPU seconds of named process groups between a window's opening and closing."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self._opened: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def __call__(self, opened: bool) -> None:
        now = {name: cpu_seconds(pids) for name, pids in self.groups.items()}
        if opened:
            self._opened = now
        else:
            self.spent = {name: now[name] - self._opened.get(name, now[name]) for name in now}


def cost(
    workers: int,
    tag_partitions: int,
    result: ScenarioResult,
    cpu_s: dict[str, float],
    measure_s: float,
) -> LayoutResult:
    """The layout's result with its CPU as cores and as milliseconds per committed event."""
    worker_cores = [round(cpu_s.get(f"worker-{i}", 0.0) / measure_s, 2) for i in range(workers)]
    total_s = sum(cpu_s.values())
    return LayoutResult(
        workers=workers,
        tag_partitions=tag_partitions,
        result=result,
        broker_cores=round(cpu_s.get("broker", 0.0) / measure_s, 2),
        worker_cores=worker_cores,
        cpu_ms_per_event=round(total_s * 1000 / result.completed, 2) if result.completed else None,
    )


@contextmanager
def _workers(settings: DcbSettings, count: int, scratch: Path, logs: Path) -> Iterator[list[int]]:
    """``count`` workers in one group on ``settings``' topics; yields their pids.

    Each logs to ``logs/scale-<layout>-<n>.log``, overwritten by the next run."""
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    name = layout_name(count, settings.topics.tag_partitions)
    with ExitStack() as stack:
        pids = []
        for i in range(count):
            own = settings.worker.model_copy(update={"data_dir": scratch / f"{name}-{i}"})
            worker = WorkerProcess(
                settings.model_copy(update={"worker": own}), logs / f"scale-{name}-{i}.log"
            )
            stack.enter_context(worker)
            assert worker.proc is not None
            pids.append(worker.proc.pid)
        yield pids


def run_layout(
    base: DcbSettings,
    workers: int,
    tag_partitions: int,
    plan: ScalePlan,
    paths: tuple[Path, Path],
    tick: Callable[[float], None],
) -> list[LayoutResult]:
    """Every writer count of ``plan`` on one layout, then its topics are deleted."""
    settings = layout_settings(base, workers, tag_partitions)
    scratch, logs = paths
    broker_pid = EmbeddedBroker(settings.broker).status().pid
    results = []
    try:
        with (
            _workers(settings, workers, scratch, logs) as pids,
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
                results.append(
                    cost(workers, tag_partitions, scenario, window.spent, plan.measure_s)
                )
    finally:
        admin = clients.admin(settings.resolved_bootstrap_servers)
        delete_topics_with_prefix(admin, owned_prefixes(settings))
    return results


def run_scale_bench(
    settings: DcbSettings,
    plan: ScalePlan,
    scratch: Path,
    logs: Path,
    tick: Callable[[float], None],
) -> ScaleBenchReport:
    """Every layout of ``plan``, each on topics under ``settings``' prefix."""
    started = datetime.now(UTC)
    results = []
    for workers, tag_partitions in plan.layouts():
        results += run_layout(settings, workers, tag_partitions, plan, (scratch, logs), tick)
    return ScaleBenchReport(started_at=started, machine=machine(), plan=plan, results=results)
