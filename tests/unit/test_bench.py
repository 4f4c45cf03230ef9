"""The bench's pure parts: percentiles, summaries, ratios, the plan and the closed loop."""

from __future__ import annotations

import json
import math
import os
import random
import time
from datetime import UTC, datetime
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.bench.commit import (
    BenchPlan,
    CommitBenchReport,
    HopBatches,
    ScenarioBatches,
    Window,
    bench_command,
    other_partitions,
    placement_settings,
    worker_cost,
)
from streams.bench.core import CommitPathCore, run_core
from streams.bench.cpu import CpuWindow
from streams.bench.hops import MARKS, PATHS, breakdown
from streams.bench.load import closed_loop
from streams.bench.scale import Layout, ScalePlan, cost, layout_settings
from streams.bench.stats import Measurement, ScenarioResult, percentile, ratio_to_baseline
from streams.codec import codec_from_settings
from streams.kafka.topic_catalog import owned, owned_prefixes
from streams.model.records import TagDelivery, TagResolution
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


def test_the_report_holds_each_scenarios_cost_and_batches_and_nothing_of_the_floor() -> None:
    dcb = result("dcb", 64, 100).model_copy(update={"placement": "service"})
    report = CommitBenchReport(
        started_at=datetime.now(UTC),
        machine={},
        settings={},
        plan=BenchPlan(),
        raw=[result("raw", 8, 1000), result("raw", 64, 5200)],
        dcb=[dcb],
        worker=[worker_cost(dcb, cpu_s=9.0, measure_s=10)],
        batches=[ScenarioBatches(scenario=dcb.key, hops=[HopBatches.of("allocations", [4, 8])])],
    )
    busiest = report.busiest_raw()
    assert busiest is not None and busiest.writers == 64
    written = json.loads(report.model_dump_json())
    assert written["worker"][0] == {"scenario": dcb.key, "cores": 0.9, "cpu_us_per_event": 9000}
    assert written["batches"][0]["hops"][0] == {
        "hop": "allocations",
        "records": 2,
        "p50": 4,
        "p90": 8,
        "max": 8,
    }
    assert written["dcb"][0]["placement"] == "service"
    assert {"floor", "floor_wide", "ceilings"}.isdisjoint(written)


def test_ratio_compares_same_writer_counts() -> None:
    raw = [result("raw", 1, 100), result("raw", 8, 400)]
    assert ratio_to_baseline(result("dcb", 8, 100), raw) == 0.25
    assert ratio_to_baseline(result("dcb", 64, 100), raw) is None


def test_plan_runs_every_combination_once_per_placement() -> None:
    plan = BenchPlan(writers=[1, 8], tags=[1, 3], services=[1, 100], warmup_s=1, measure_s=2)
    combos = list(plan.scenarios())
    assert len(combos) == len(set(combos)) == 8
    assert plan.placements == ["service", "tag"]
    assert plan.traced() == [(8, 1, 1), (8, 3, 1)]
    # per placement its scenarios and traces, + the raw baseline per writer count; a warm
    # pass for raw and for each placement
    assert plan.seconds == (2 * (8 + 2) + 2) * 3 + 3 * plan.warm_pass_s
    one = plan.model_copy(update={"placements": ["tag"]})
    assert one.seconds == (8 + 2 + 2) * 3 + 2 * plan.warm_pass_s


def test_a_dcb_result_is_keyed_and_labelled_by_its_placement() -> None:
    m = Measurement(completed=10, failed=0, window_s=1, latencies_ms=[1.0])
    placed = ScenarioResult.of("dcb", 64, 1, 1, m, "service")
    assert placed.key == "w64-t1-s1-service"
    assert placed.label == "dcb, 1 tag, 1 service(s), service placement"
    assert result("raw", 64, 10).key == "w64-t1-s1"  # the baseline has none


def test_each_placement_gets_topics_and_a_worker_group_of_its_own() -> None:
    base = DcbSettings(topics={"prefix": "dcb-bench-ab12."}, worker={"app_id": "dcb-bench-w"})
    service, tag = placement_settings(base, "service"), placement_settings(base, "tag")
    assert (service.topics.tag_placement, tag.topics.tag_placement) == ("service", "tag")
    assert service.topics.prefix != tag.topics.prefix
    assert service.worker.app_id != tag.worker.app_id
    for placed in (service, tag):  # the run's cleanup deletes them with its own
        assert all(owned(p, owned_prefixes(base)) for p in owned_prefixes(placed))
        assert placed.topics.partitions == base.topics.partitions


def test_worker_cost_is_cpu_per_committed_event() -> None:
    three_tags = result("dcb", 8, 50).model_copy(update={"tags": 3, "placement": "tag"})
    cost = worker_cost(three_tags, cpu_s=8.125, measure_s=10)  # 500 events
    assert (cost.scenario, cost.cores) == ("w8-t3-s1-tag", 0.81)
    assert cost.cpu_us_per_event == 16250.0
    idle = worker_cost(result("dcb", 1, 0), cpu_s=0.5, measure_s=10)
    assert (idle.cores, idle.cpu_us_per_event) == (0.05, None)


def test_batch_sizes_are_items_per_record_or_nothing() -> None:
    sizes = HopBatches.of("tag-deliveries", [1, 2, 3, 10, 2])
    assert (sizes.records, sizes.p50, sizes.p90, sizes.max) == (5, 2, 10, 10)
    empty = HopBatches.of("allocations", [])
    assert (empty.records, empty.p50, empty.p90, empty.max) == (0, None, None, None)


def test_a_window_notes_its_wall_clock_ends_and_the_cpu_spent() -> None:
    window = Window([os.getpid()])
    before = time.time() * 1000
    window(True)
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:
        pass
    window(False)
    assert before <= window.opened_ms < window.closed_ms <= time.time() * 1000
    assert window.cpu.spent["worker"] >= 0.05


def _placed(placement: str, in_round: bool = True) -> DcbSettings:
    base = DcbSettings()
    return base.model_copy(
        update={
            "topics": base.topics.model_copy(update={"tag_placement": placement}),
            "worker": base.worker.model_copy(update={"one_phase_in_round": in_round}),
        }
    )


@pytest.mark.parametrize(("placement", "tags"), [("service", 1), ("service", 3), ("tag", 3)])
def test_the_core_bench_commits_every_command_through_the_real_processors(
    placement: str, tags: int
) -> None:
    """Certified, answered, and installed at each of their tags, as through the worker."""
    settings = _placed(placement)
    codec = codec_from_settings(settings)
    rng = random.Random(1)
    commands = [bench_command(rng, tags) for _ in range(5)]
    core = CommitPathCore(settings, codec)
    core.commit([(c.service_id, codec.encode(c.schema_name, c.to_avro())) for c in commands])
    assert len(core.answers) == 5
    (ledgers,) = [ledgers for ledgers in core.ledger.ledgers.values() if ledgers]
    state = ledgers["bench"].state
    assert state.attempts == {} and state.closed_prefix == state.watermark is not None
    installed = {
        (table.state.tag, e.event_id)
        for live in core.tags.live.values()
        for table, _ in live.values()
        for e in table.state.installed
    }
    for command in commands:
        assert command.commit is not None
        (event,) = command.commit.events
        assert {(tag, event.event_id) for tag in event.tags} <= installed


@pytest.mark.parametrize(("placement", "tags"), [("service", 1), ("service", 3), ("tag", 1)])
def test_a_one_phase_commit_by_the_topics_sends_six_records_and_batches_share_them(
    placement: str, tags: int
) -> None:
    """Alone, an event's commit sends an allocation, a delivery, a resolution, the event,
    the answer and a certificate, and writes the ledger's header and the attempt's row,
    each tag's header and installed row, then the header again, the row's tombstone and
    the finished attempt, and the header once more with the certificate (a round later).
    A round of many shares the headers and the batch records."""
    settings = _placed(placement, in_round=False)
    codec = codec_from_settings(settings)
    rng = random.Random(2)
    commands = [bench_command(rng, tags) for _ in range(128)]
    alone, batched = (run_core(settings, codec, commands, tags, n) for n in (1, 64))
    assert (alone.placement, alone.tags, alone.batch, alone.events) == (placement, tags, 1, 128)
    assert alone.outputs_per_event == 6
    assert alone.writes_per_event == 2 + 2 * tags + 4
    assert batched.batch == 64
    assert batched.outputs_per_event < 3  # the events and answers, a few batch records
    assert batched.writes_per_event < alone.writes_per_event


@pytest.mark.parametrize(("placement", "tags"), [("service", 1), ("service", 3), ("tag", 1)])
def test_a_one_phase_commit_decided_in_the_ledgers_round_sends_four_records(
    placement: str, tags: int
) -> None:
    """With its tag partition in the same process, a one-phase attempt is decided in the
    ledger's round: no delivery, no resolution; the attempt is registered and finished in
    that round, so its row is never written, only the finished attempt."""
    settings = _placed(placement)
    codec = codec_from_settings(settings)
    commands = [bench_command(random.Random(2), tags) for _ in range(128)]
    alone, batched = (run_core(settings, codec, commands, tags, n) for n in (1, 64))
    assert alone.outputs_per_event == 4  # allocation, event, answer, certificate
    assert alone.writes_per_event == 1 + 1 + 2 * tags + 1
    assert batched.outputs_per_event < 2.1 and batched.writes_per_event < alone.writes_per_event
    by_topics = run_core(_placed(placement, in_round=False), codec, commands, tags, 64)
    assert batched.outputs_per_event < by_topics.outputs_per_event


def test_a_two_phase_commit_sends_more_records_than_a_one_phase_one() -> None:
    settings, codec = _placed("tag"), codec_from_settings(DcbSettings())
    commands = [bench_command(random.Random(3), 3) for _ in range(20)]
    cost = run_core(settings, codec, commands, 3, 1)
    assert cost.outputs_per_event > 6  # a vote per tag and the decision's round trip


def test_a_command_the_processors_refuse_fails_the_core_bench() -> None:
    settings = _placed("service")
    codec = codec_from_settings(settings)
    command = bench_command(random.Random(5), 1)
    assert command.commit is not None
    empty = command.model_copy(update={"commit": command.commit.model_copy(update={"events": []})})
    with pytest.raises(RuntimeError, match="dead-lettered"):
        run_core(settings, codec, [empty], 1, 1)


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
    one: dict[str, float] = {
        "sent": 0,
        "PREPARE": 10,
        "evidence": 40,
        "answered": 70,
        "received": 75,
    }
    two = {**one, "vote": 20, "decision": 30}
    unfinished: dict[str, float] = {"sent": 0, "PREPARE": 10}
    mostly_one = breakdown([one, one, two, unfinished], "8 writers")
    assert (mostly_one.path, mostly_one.attempts) == ("one-phase", 2)
    assert [h.p50_ms for h in mostly_one.hops] == [10, 30, 30, 5]
    mostly_two = breakdown([two, two, one], "8 writers")
    assert (mostly_two.path, [h.p50_ms for h in mostly_two.hops]) == (
        "two-phase",
        [10, 10, 10, 10, 30, 5],
    )


def test_every_delivery_action_and_resolution_status_is_a_mark_of_a_path() -> None:
    actions = get_args(TagDelivery.model_fields["action"].annotation)
    statuses = get_args(TagResolution.model_fields["status"].annotation)
    assert set(MARKS) == {*actions, *statuses} - {"TRIM"}  # a TRIM is no attempt's
    on_paths = {mark for order, _ in PATHS.values() for mark in order}
    assert set(MARKS.values()) <= on_paths


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
