"""``dcb bench peers``: the workload against each system in turn, checked, in one report.

Systems run one after another on the same machine; each is started fresh, driven at each
writer count on tags of that scenario's own, folded afterwards by the independent oracle,
and stopped. dcb-streams at 8 writers also gets a sampling profile of its worker and the
per-hop breakdown of its commits.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from streams.bench.commit import machine
from streams.bench.hops import HopBreakdown, HopTracer
from streams.bench.peers.api import PeerSystem
from streams.bench.peers.dcb_streams import DcbStreams
from streams.bench.peers.profile import ProfileSummary, start_recording, summarise
from streams.bench.peers.runner import PeerScenario, run_scenario
from streams.bench.peers.workload import Workload, violations
from streams.errors import PeerUnavailableError

DIAGNOSED_WRITERS = 8
PEER_WARM_PASS_S = 120.0


class PeerPlan(BaseModel):
    writers: list[int] = Field(default_factory=lambda: [1, 8, 64, 256])
    warmup_s: float = 5.0
    measure_s: float = 30.0
    # Per system, before its scenarios, at the most writers, not reported. Under this
    # workload a fresh broker JVM compiles for ~100 s: its C2 compiler thread took 35-38%
    # of a core in the first 30 s at 64 writers, 9-14% at 60 s, under 2% from 100 s on,
    # and the worker's transaction calls per round went from 23 ms to 8.5 ms meanwhile
    # (records taken per 30 s: 17.1k, 21.4k, 23.7k, then steady). A shorter pass measured
    # dcb-streams' first scenarios on a compiling broker. The other systems' caches fill.
    warm_pass_s: float = PEER_WARM_PASS_S

    def seconds(self, systems: int, diagnosed: bool = False) -> float:
        """The run's length; ``diagnosed``: with dcb-streams' extra diagnostic pass."""
        passes = systems * len(self.writers) + int(diagnosed and self.diagnoses)
        return passes * (self.warmup_s + self.measure_s) + systems * self.warm_pass_s

    @property
    def diagnoses(self) -> bool:
        return DIAGNOSED_WRITERS in self.writers


class SystemRun(BaseModel):
    name: str
    durability: str
    detail: str = ""
    available: bool
    reason: str | None = None
    events: int = 0  # in the whole log afterwards
    violations: list[str] = Field(default_factory=list)  # the oracle's findings (first 20)


class PeerBenchReport(BaseModel):
    started_at: datetime
    machine: dict[str, str | int]
    workload: dict[str, float]
    plan: PeerPlan
    systems: list[SystemRun]
    scenarios: list[PeerScenario]
    ratios: dict[str, dict[str, float | None]]  # dcb-streams / peer appends/s, per writers
    hops: HopBreakdown | None = None
    profile: ProfileSummary | None = None


def ratios(
    scenarios: list[PeerScenario], ours: str = DcbStreams.name
) -> dict[str, dict[str, float | None]]:
    """``{"w8": {"umadb": 0.1, ...}}``: our successful appends/s over each peer's."""
    table: dict[str, dict[str, float | None]] = {}
    mine = {s.writers: s.appends_per_s for s in scenarios if s.system == ours}
    for s in scenarios:
        if s.system == ours or s.writers not in mine:
            continue
        ratio = round(mine[s.writers] / s.appends_per_s, 3) if s.appends_per_s else None
        table.setdefault(f"w{s.writers}", {})[s.system] = ratio
    return table


class _Diagnostics:
    """The dcb-streams extras at one writer count: hop tracing and a worker profile.

    They run in a pass of their own after the measured ones: the tracer tails three
    topics beside the writers and py-spy samples the worker, which would slow the
    scenario they explain on a machine of two cores.
    """

    def __init__(self, system: DcbStreams, out: Path, plan: PeerPlan) -> None:
        self.system, self.out, self.plan = system, out, plan
        self.tracer = HopTracer(system.settings)
        system.tracer = self.tracer
        self.profile_file = out / f"peers-profile-{DIAGNOSED_WRITERS}w.speedscope.json"
        self._recorder: subprocess.Popen[bytes] | None = None

    def start_profile(self) -> None:
        """At the measured window's start: py-spy on the worker for the window's length."""
        if (pid := self.system.worker_pid()) is not None:
            self._recorder = start_recording(pid, self.plan.measure_s, self.profile_file)

    def finish(self) -> tuple[HopBreakdown, ProfileSummary | None]:
        self.system.tracer = None
        hops = self.tracer.breakdown(f"peers workload, {DIAGNOSED_WRITERS} writers")
        self.tracer.close()
        profile = None
        if self._recorder is not None:
            self._recorder.wait(60)
            if self.profile_file.exists():
                profile = summarise(self.profile_file)
        return hops, profile


def run_peers_bench(
    systems: list[PeerSystem],
    plan: PeerPlan,
    out: Path,
    tick: Callable[[float], None] = lambda _: None,
    workload: Workload | None = None,
) -> PeerBenchReport:
    w = workload or Workload()
    report = PeerBenchReport(
        started_at=datetime.now(UTC),
        machine=machine(),
        workload={k: float(v) for k, v in w.__dict__.items()},
        plan=plan,
        systems=[],
        scenarios=[],
        ratios={},
    )
    for system in systems:
        run = SystemRun(name=system.name, durability=system.durability, available=True)
        report.systems.append(run)
        try:
            system.start()
        except PeerUnavailableError as exc:
            run.available, run.reason = False, exc.message
            tick(len(plan.writers) * (plan.warmup_s + plan.measure_s) + plan.warm_pass_s)
            continue
        run.detail = system.detail
        try:
            if plan.warm_pass_s > 0:
                run_scenario(system, max(plan.writers), w, 0, plan.warm_pass_s, "warm-", tick)
            for writers in plan.writers:
                report.scenarios.append(
                    run_scenario(
                        system, writers, w, plan.warmup_s, plan.measure_s, f"w{writers}-", tick
                    )
                )
            if isinstance(system, DcbStreams) and system.writes_in_asyncio and plan.diagnoses:
                diag = _Diagnostics(system, out, plan)
                run_scenario(
                    system,
                    DIAGNOSED_WRITERS,
                    w,
                    plan.warmup_s,
                    plan.measure_s,
                    f"diag-w{DIAGNOSED_WRITERS}-",
                    tick,
                    diag.start_profile,
                )
                report.hops, report.profile = diag.finish()
            log = system.store().read_all()
            run.events = len(log)
            run.violations = violations(log, w)[:20]
        finally:
            system.stop()
    report.ratios = ratios(report.scenarios)
    return report
