"""The peer bench's pure parts: the decision, the oracle, the rounds, and the reference store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.bench.peers.api import Event, PeerSystem, Sequenced
from streams.bench.peers.bench import PeerBenchReport, PeerPlan, SystemRun, ratios
from streams.bench.peers.report import cpu_per_command, markdown, write_plot
from streams.bench.peers.runner import PeerScenario, run_scenario
from streams.bench.peers.workload import (
    COURSE_DEFINED,
    Rounds,
    Verdict,
    Workload,
    append_condition,
    course_defined,
    decide,
    decision_query,
    subscribed,
    violations,
)
from tests.peer_conformance import MemorySystem, PeerStoreContract

SMALL = Workload(courses=3, capacity=2, students=4, student_limit=2)


class TestMemoryReference(PeerStoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def system(cls) -> PeerSystem:
        return MemorySystem()


def _log(events: list[Event]) -> list[Sequenced]:
    return [Sequenced(i + 1, e) for i, e in enumerate(events)]


pairs = st.tuples(st.integers(0, SMALL.courses - 1), st.integers(0, SMALL.students - 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(pairs, max_size=40), st.sets(st.integers(0, SMALL.courses - 1)))
def test_appending_only_on_yes_never_breaks_a_rule(
    wanted: list[tuple[int, int]], defined: set[int]
) -> None:
    """Folding decisions one by one keeps every rule the oracle checks."""
    log = [course_defined(f"course:r-{c}", SMALL.capacity) for c in sorted(defined)]
    for c, s in wanted:
        course, student = f"course:r-{c}", f"student:r-{s}"
        query = decision_query(course, student)
        seen = [e for e in _log(log) if query.matches(e.event)]
        verdict = decide(seen, course, student, SMALL)
        if verdict is Verdict.YES:
            log.append(subscribed(course, student))
        elif verdict is Verdict.COURSE_UNDEFINED:
            assert c not in defined
    assert violations(_log(log), SMALL) == []


def test_the_oracle_names_each_broken_rule() -> None:
    course, student = "course:r-0", "student:r-0"
    full = [course_defined(course, 1), subscribed(course, student), subscribed(course, student)]
    found = violations(_log(full), SMALL.__class__(capacity=1, student_limit=1))
    assert any("holds 2 > 1" in f and course in f for f in found)
    assert any("holds 2 > 1" in f and student in f for f in found)
    assert any("subscribed 2 times" in f for f in found)
    assert any("undefined" in f for f in violations(_log([subscribed(course, student)]), SMALL))
    backwards = [Sequenced(2, course_defined(course, 1)), Sequenced(1, course_defined(course, 1))]
    assert any("does not follow" in f for f in violations(backwards, SMALL))


def test_decisions_say_why_not() -> None:
    c, s = "course:r-0", "student:r-0"
    q = decision_query(c, s)
    log = _log([course_defined(c, 2), subscribed(c, "student:r-1"), subscribed(c, "student:r-2")])
    assert decide(log, c, s, SMALL) is Verdict.COURSE_FULL
    assert decide([], c, s, SMALL) is Verdict.COURSE_UNDEFINED
    assert decide(_log([course_defined(c, 2), subscribed(c, s)]), c, s, SMALL) is (
        Verdict.ALREADY_SUBSCRIBED
    )
    other = [subscribed(f"course:r-{i}", s) for i in (1, 2)]
    assert decide(_log([course_defined(c, 2), *other]), c, s, SMALL) is Verdict.STUDENT_AT_LIMIT
    assert q.matches(Event(COURSE_DEFINED, (c,)))
    assert append_condition(_log([course_defined(c, 2)]), q).after == 1
    assert append_condition([], q).after is None


def test_one_writer_opens_each_round() -> None:
    rounds = Rounds(Workload(courses=1, capacity=5, round_fill=0.4))  # quota 2
    assert rounds.record_subscription() is None
    assert rounds.record_subscription() == 1
    assert rounds.record_subscription() is None  # the round is being opened
    rounds.opened(1)
    assert rounds.current == 1
    assert [rounds.record_subscription(), rounds.record_subscription()] == [None, 2]


@pytest.mark.parametrize("coroutines", [False, True], ids=["threads", "coroutines"])
def test_the_runner_against_the_reference_store_keeps_every_rule(coroutines: bool) -> None:
    system = MemorySystem(coroutines)
    w = Workload(courses=4, capacity=3, students=6, student_limit=2, round_fill=0.5)
    result = run_scenario(system, 4, w, warmup_s=0.1, measure_s=0.6, namespace="t")
    assert result.appends_per_s > 0 and result.errors == 0
    assert result.rounds > 1  # quotas of 6 seats fill quickly
    assert violations(system.store().read_all(), w) == []


def _scenario(system: str, writers: int, rate: float) -> PeerScenario:
    return PeerScenario(
        system=system,
        writers=writers,
        appends_per_s=rate,
        condition_failures_per_s=0,
        no_per_s=0,
        append_p50_ms=1,
        append_p99_ms=2,
        command_p50_ms=3,
        command_p99_ms=4,
        server_cpu_pct=50,
        errors=0,
        rounds=1,
        client_cpu_pct=30,
    )


def test_cpu_per_command_adds_servers_and_client_over_every_command() -> None:
    row = _scenario("umadb", 8, 600).model_copy(update={"no_per_s": 200})
    assert cpu_per_command(row) == pytest.approx(1.0)  # 0.8 of a core over 800 commands/s
    assert cpu_per_command(row.model_copy(update={"client_cpu_pct": 0})) == 0  # unmeasured


def test_ratios_divide_ours_by_each_peer_at_the_same_writer_count() -> None:
    rows = [
        _scenario("dcb-streams", 8, 30),
        _scenario("umadb", 8, 600),
        _scenario("umadb", 64, 900),  # no dcb-streams row at 64: no ratio
        _scenario("eventsourcing-postgres", 8, 0),
    ]
    assert ratios(rows) == {"w8": {"umadb": 0.05, "eventsourcing-postgres": None}}


def test_the_report_states_durability_and_the_oracle_and_plots(tmp_path: Path) -> None:
    report = PeerBenchReport(
        started_at=datetime.now(UTC),
        machine={"cpus": 2, "platform": "test", "python": "3.11"},
        workload={},
        plan=PeerPlan(writers=[8]),
        systems=[
            SystemRun(name="umadb", durability="fsync", available=True, events=5),
            SystemRun(name="x", durability="?", available=False, reason="not installed"),
        ],
        scenarios=[_scenario("umadb", 8, 600)],
        ratios={},
    )
    text = markdown(report)
    assert "| umadb | 8 | 600 |" in text
    assert "| 50% | 30% | 1.33 | 0 |" in text  # 0.8 of a core over 600 commands/s
    assert "all rules hold" in text and "not run: not installed" in text
    assert write_plot(report, tmp_path).stat().st_size > 0


def test_the_diagnostic_pass_is_planned_only_when_its_writer_count_is() -> None:
    plan = PeerPlan(writers=[1, 8], warmup_s=1, measure_s=2, warm_pass_s=5)
    assert plan.seconds(3) == 3 * 2 * 3 + 3 * 5  # + a warm pass per system
    assert plan.seconds(3, diagnosed=True) == (3 * 2 + 1) * 3 + 3 * 5
    no_diagnosis = PeerPlan(writers=[1, 64], warmup_s=1, measure_s=2, warm_pass_s=0)
    assert no_diagnosis.seconds(1, diagnosed=True) == 6
