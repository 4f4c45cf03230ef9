"""The bench's pure parts: percentiles, summaries, ratios, the plan and the closed loop."""

from __future__ import annotations

import json
import math
import os
import random
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.bench.commit import (
    BenchPlan,
    CommitBenchReport,
    bench_command,
    other_partitions,
    worker_cost,
)
from streams.bench.core import CommitPathCore, CoreCost, run_core
from streams.bench.cpu import CpuWindow
from streams.bench.floor import FloorResult, steps_per_event
from streams.bench.hops import breakdown
from streams.bench.load import closed_loop
from streams.bench.scale import Layout, ScalePlan, cost, layout_settings
from streams.bench.stats import Measurement, ScenarioResult, percentile, ratio_to_baseline
from streams.codec import codec_from_settings
from streams.settings import DcbSettings


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=200), st.floats(0.01, 100))
def test_percentile_is_a_sample_with_enough_at_or_below(samples: list[float], q: float) -> None:
    p = percentile(samples, q)
    assert p in samples
    at_or_below = sum(1 for x in samples if x <= p)
    assert at_or_below >= math.ceil(q / 100 * len(samples))
    assert sum(1 for x in samples if x < p) < math.ceil(q / 100 * len(samples))


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 50))


def result(system: str, writers: int, rate: float) -> ScenarioResult:
    m = Measurement(completed=int(rate * 10), failed=0, window_s=10, latencies_ms=[1.0, 3.0])
    return ScenarioResult.of(system, writers, 1, 1, m)


def report_of(raw: list[ScenarioResult], **fields: Any) -> CommitBenchReport:
    """A commit report around ``raw`` with nothing else measured but ``fields``."""
    return CommitBenchReport(
        started_at=datetime.now(UTC),
        machine={},
        settings={},
        plan=BenchPlan(),
        raw=raw,
        dcb=fields.pop("dcb", []),
        ratios={},
        hops=[],
        **fields,
    )


def test_ratio_compares_same_writer_counts() -> None:
    raw = [result("raw", 1, 100), result("raw", 8, 400)]
    assert ratio_to_baseline(result("dcb", 8, 100), raw) == 0.25
    assert ratio_to_baseline(result("dcb", 64, 100), raw) is None


def test_plan_runs_every_combination_once() -> None:
    plan = BenchPlan(writers=[1, 8], tags=[1, 3], services=[1, 100], warmup_s=1, measure_s=2)
    combos = list(plan.scenarios())
    assert len(combos) == len(set(combos)) == 8
    assert plan.traced() == [(8, 1, 1), (8, 3, 1)]
    # + the raw baseline per writer count + traces + one warm pass per system
    assert plan.seconds == (8 + 2 + 2) * 3 + 2 * plan.warm_pass_s + plan.floor_s
    assert BenchPlan(floor_steps=0).floor_s == 0
    assert BenchPlan(floor_outputs=1).floor_s * 2 == plan.floor_s  # no second pass


def test_a_one_tag_event_takes_three_steps_and_each_more_tag_four() -> None:
    assert [steps_per_event(tags) for tags in (1, 2, 3)] == [3, 9, 13]


def test_the_floor_caps_each_tag_count_beside_raw_at_the_most_writers() -> None:
    floor = FloorResult(steps=100, outputs_per_step=1, steps_per_s=2600, cpu_us_per_step=380)
    assert floor.events_per_s_ceiling(3) == 200
    report = report_of(
        [result("raw", 8, 1000), result("raw", 64, 5200)],
        floor=floor,
        dcb=[result("dcb", 64, 100).model_copy(update={"tags": tags}) for tags in (1, 3)],
    )
    summary = report.floor_summary()
    assert summary is not None
    assert "2600 steps/s, 380 us CPU per step" in summary
    assert "1 tag(s): 3 steps, 867/s, 17% of raw" in summary
    assert "3 tag(s): 13 steps, 200/s, 4% of raw" in summary
    assert "per further output" not in summary
    wide = FloorResult(steps=100, outputs_per_step=4, steps_per_s=1300, cpu_us_per_step=500)
    widened = report.model_copy(update={"floor_wide": wide}).floor_summary()
    assert widened is not None and widened.startswith(summary)
    assert "with 4 outputs per step 500 us CPU per step: 40 us per further output" in widened
    assert report.model_copy(update={"floor": None}).floor_summary() is None


def test_the_design_ceiling_prices_each_record_a_step_sends_and_its_own_code() -> None:
    floor = FloorResult(steps=100, outputs_per_step=1, steps_per_s=4000, cpu_us_per_step=250)
    wide = FloorResult(steps=100, outputs_per_step=4, steps_per_s=3000, cpu_us_per_step=310)
    core = [
        CoreCost(
            tags=1,
            events=10,
            us_per_event=300,
            us_per_step=100,
            records_per_step=4.0,
            certain_records_per_step=3.0,  # only these are priced
        ),
        CoreCost(
            tags=3,
            events=10,
            us_per_event=780,
            us_per_step=60,
            records_per_step=3.0,
            certain_records_per_step=0.5,
        ),
    ]
    report = report_of(
        [result("raw", 8, 1000), result("raw", 64, 4000)], floor=floor, floor_wide=wide, core=core
    )
    assert report.per_further_record_us() == 20  # (310 - 250) us over 3 more outputs
    one, three = report.ceilings
    # 250 + 2 further certain records x 20 + 100 of own code = 390 us, 3 steps: 1,170 us
    assert (one.tags, one.steps_per_event, one.us_per_step) == (1, 3, 390.0)
    assert (one.events_per_s, one.of_raw) == (854.7, 0.214)  # beside raw at 64 writers
    # fewer records than the floor's one are not a saving: 250 + 60 = 310 us, 13 steps
    assert (three.us_per_step, three.events_per_s) == (310.0, 248.1)
    assert json.loads(report.model_dump_json())["ceilings"][0]["events_per_s"] == 854.7
    assert report.model_copy(update={"floor_wide": None}).ceilings == []
    assert report.model_copy(update={"raw": []}).ceilings[0].of_raw is None


def test_worker_cost_is_cpu_per_agent_step_beside_the_floor() -> None:
    floor = FloorResult(steps=100, outputs_per_step=1, steps_per_s=2600, cpu_us_per_step=250)
    three_tags = result("dcb", 8, 50).model_copy(update={"tags": 3})  # 500 events, 13 steps each
    cost = worker_cost(three_tags, cpu_s=8.125, measure_s=10, floor=floor)
    assert (cost.scenario, cost.cores) == ("w8-t3-s1", 0.81)
    assert cost.cpu_us_per_step == 1250.0  # 8.125 s over 6,500 steps
    assert cost.times_floor == 5.0
    one_tag = worker_cost(result("dcb", 64, 200), cpu_s=6.0, measure_s=10, floor=None)
    assert (one_tag.cpu_us_per_step, one_tag.times_floor) == (1000.0, None)  # 2,000 x 3 steps
    idle = worker_cost(result("dcb", 1, 0), cpu_s=0.5, measure_s=10, floor=floor)
    assert (idle.cpu_us_per_step, idle.times_floor) == (None, None)
    core = CoreCost(
        tags=3,
        events=10,
        us_per_event=1300,
        us_per_step=100,
        records_per_step=3,
        certain_records_per_step=1.6,
    )
    shared = worker_cost(three_tags, cpu_s=8.125, measure_s=10, floor=floor, core=core)
    assert shared.core_share == 0.08  # 100 of 1,250 us per step
    assert worker_cost(result("dcb", 1, 0), cpu_s=0.5, measure_s=10, floor=None, core=core) == idle


@pytest.mark.parametrize("tags", [1, 3])
def test_the_core_bench_runs_every_step_of_the_commit_path(tags: int) -> None:
    """Its commands are committed whole, as through the worker: certified, answered, and
    installed at each of their tags."""
    codec = codec_from_settings(DcbSettings())
    rng = random.Random(1)
    commands = [bench_command(rng, tags) for _ in range(5)]
    core = CommitPathCore(codec)
    for command in commands:
        core.commit(codec.encode(command.schema_name, command.to_avro()))
    state = core.ledger.state
    assert state.attempts == {} and state.closed_prefix == state.watermark is not None
    for command in commands:
        assert command.commit is not None
        (event,) = command.commit.events
        for tag in event.tags:
            assert event.event_id in [e.event_id for e in core.tables[tag].state.installed]
    cost = run_core(codec, tags, [codec.encode(c.schema_name, c.to_avro()) for c in commands])
    assert cost.events == 5
    # One tag: the command (attempt row, header, allocation, delivery), the tag (header,
    # installed row, evidence), the evidence (attempt row removed, header, completed row,
    # event, answer): 12 records over 3 steps, 9 without the headers. Three tags: 39 over
    # 13 steps; 21 without the headers and the attempt row's rewrites by the votes and
    # the evidence.
    assert cost.records_per_step == {1: 4.0, 3: 3.0}[tags]
    assert cost.certain_records_per_step == {1: 3.0, 3: round(21 / 13, 3)}[tags]
    assert cost.us_per_step * steps_per_event(tags) == pytest.approx(cost.us_per_event, rel=1e-3)


def test_only_planned_scenarios_get_a_traced_pass() -> None:
    plan = BenchPlan(writers=[8, 64], tags=[1], services=[100])
    assert plan.traced() == []
    assert BenchPlan(writers=[8], tags=[1, 3], services=[1]).traced() == [(8, 1, 1), (8, 3, 1)]


def test_closed_loop_counts_only_the_window() -> None:
    calls: list[float] = []

    def op(writer: int, seq: int) -> None:
        calls.append(time.perf_counter())
        time.sleep(0.01)
        if writer == 1 and seq % 2:
            raise RuntimeError("every other call of writer 1 fails")

    edges: list[tuple[bool, float]] = []
    start = time.perf_counter()
    m = closed_loop(
        2,
        op,
        warmup_s=0.2,
        measure_s=0.5,
        on_window=lambda o: edges.append((o, time.perf_counter())),
    )
    assert [opened for opened, _ in edges] == [True, False]
    assert edges[0][1] - start == pytest.approx(0.2, abs=0.05)
    assert edges[1][1] - start == pytest.approx(0.7, abs=0.05)
    assert m.window_s == 0.5
    assert 0 < m.completed < len(calls)  # warm-up calls are not counted
    assert m.failed > 0
    assert all(x >= 10 for x in m.latencies_ms)
    assert m.per_second == pytest.approx(m.completed / 0.5)


def test_hop_breakdown_follows_the_path_most_attempts_took() -> None:
    one = {"sent": 0, "PREPARE": 10, "INSTALLED_AND_COVERED": 40, "answered": 70, "received": 75}
    two = {**one, "PREPARED": 20, "INSTALL": 30}
    unfinished = {"sent": 0, "PREPARE": 10}
    mostly_one = breakdown([one, one, two, unfinished], "8 writers")
    assert (mostly_one.path, mostly_one.attempts) == ("one-phase", 2)
    assert [h.p50_ms for h in mostly_one.hops] == [10, 30, 30, 5]
    mostly_two = breakdown([two, two, one], "8 writers")
    assert (mostly_two.path, [h.p50_ms for h in mostly_two.hops]) == (
        "two-phase",
        [10, 10, 10, 10, 30, 5],
    )


def test_the_report_counts_the_partitions_of_other_topics_only() -> None:
    on_broker = {
        "dcb-bench-ab12.commands": 6,
        "dcb-bench-ab12-worker-ledgers-changelog": 6,
        "dcb-bench-ff00.commands": 6,  # an earlier run's leftovers
        "__consumer_offsets": 50,
    }
    assert other_partitions(on_broker, ["dcb-bench-ab12.", "dcb-bench-ab12-worker"]) == 56


def test_scale_plan_runs_each_layout_with_a_warm_pass() -> None:
    plan = ScalePlan(writers=[8, 64], warmup_s=1)
    assert plan.layouts[0].name == "w1-p6-tp12"  # the defaults first
    assert len({layout.name for layout in plan.layouts}) == len(plan.layouts)
    assert plan.seconds == len(plan.layouts) * (plan.warm_pass_s + 2 * (1 + plan.measure_s))


@pytest.mark.parametrize("text", ["2x6", "1x6x12x3", "axbxc", "0x6x12", "1x0x1", ""])
def test_a_bad_layout_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Layout.parse(text)


def test_a_layout_gets_topics_and_a_group_of_its_own() -> None:
    base = DcbSettings()
    one, other = Layout.parse("1x6x12"), Layout.parse("2X1x1")
    assert (other.workers, other.partitions, other.tag_partitions) == (2, 1, 1)
    a, b = layout_settings(base, one), layout_settings(base, other)
    assert (a.topics.partitions, a.topics.tag_partitions) == (6, 12)
    assert (b.topics.partitions, b.topics.tag_partitions) == (1, 1)
    assert a.topics.prefix.startswith(base.topics.prefix)
    assert a.topics.prefix != b.topics.prefix
    assert a.worker.app_id != b.worker.app_id


def test_layout_cost_counts_every_process_against_the_committed_events() -> None:
    scenario = ScenarioResult(
        system="dcb",
        writers=8,
        tags=3,
        services=100,
        events_per_s=20.0,
        p50_ms=1,
        p99_ms=2,
        completed=200,
        failed=0,
    )
    two, one = Layout.parse("2x6x12"), Layout.parse("1x6x12")
    cpu_s = {"broker": 6.0, "worker-0": 5.0, "worker-1": 3.0}
    r = cost(two, scenario, cpu_s, measure_s=10)
    assert r.broker_cores == 0.6
    assert r.worker_cores == [0.5, 0.3]
    assert r.cpu_ms_per_event == 70.0  # 14 CPU seconds over 200 events
    idle = scenario.model_copy(update={"completed": 0})
    assert cost(one, idle, {"worker-0": 1.0}, 10).cpu_ms_per_event is None
    assert cost(two, scenario, {"worker-0": 1.0}, 10).worker_cores == [0.1, 0.0]


def test_cpu_window_spends_what_the_window_used() -> None:
    window = CpuWindow({"me": [os.getpid()]})
    window(True)
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    window(False)
    assert window.spent["me"] >= 0.15
