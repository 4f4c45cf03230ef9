"""The issuance ledger, tag table and reconciler cores, rule by rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.errors import (
    CorruptLedgerError,
    CorruptTagTableError,
    DivergentReplayError,
    EmptyAttemptError,
    EvidenceMismatchError,
    InvalidConditionError,
    InvalidEventError,
    TagProtocolError,
    TooManyTagsError,
)
from streams.ledger.ledger import IssuanceLedger, Step, membership_digest
from streams.ledger.state import LedgerState, Target
from streams.model.digests import obligation_digest, sha256_hex
from streams.model.query import MAX_CONDITION_ITEMS
from streams.model.records import (
    AppendCondition,
    CommitAttempt,
    EventData,
    QueryItem,
    TagDelivery,
    TagResolution,
)
from streams.reconcile.decision import TargetOutcome, backoff_ms, plan_target
from streams.tags import one_phase
from streams.tags import store as tag_store
from streams.tags.table import TagTable, TagTableState
from tests.ledger_steps import merge

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GRACE = 1_000


def event(n: int, *tags: str, event_type: str = "Registered") -> EventData:
    return EventData(
        event_id=f"e{n}", event_type=event_type, payload="{}", tags=list(tags), timestamp=T0
    )


def attempt(
    name: str, *events: EventData, condition: AppendCondition | None = None, epoch: int = 0
) -> CommitAttempt:
    return CommitAttempt(
        attempt_id=name, writer_epoch=epoch, events=list(events), condition=condition
    )


def unique(tag: str, after: str | None = None) -> AppendCondition:
    return AppendCondition(fail_if_events_match=[QueryItem(tags=[tag])], after=after)


def new_ledger() -> IssuanceLedger:
    return IssuanceLedger(LedgerState(service_id="svc", allocator_lineage_id="L"), GRACE)


class Tags:
    """Tag tables that answer a batch of deliveries at once, as a tag partition's step does."""

    def __init__(self) -> None:
        self.tables: dict[str, TagTable] = {}

    def table(self, tag: str) -> TagTable:
        return self.tables.setdefault(tag, TagTable(TagTableState(service_id="svc", tag=tag)))

    def answer(self, deliveries: list[TagDelivery]) -> list[TagResolution]:
        answers: list[TagResolution] = []
        for indexes in one_phase.steps(deliveries):
            group = [deliveries[i] for i in indexes]
            if one_phase.is_one_phase(group[0]):
                answers += one_phase.decide_together([(self.table(d.tag), d) for d in group])
            else:
                answers.append(self.table(group[0].tag).handle(group[0]))
        return answers


def settle(ledger: IssuanceLedger, resolution: TagResolution, at: datetime = T0) -> Step:
    """Apply one answer, then publish what the prefix covers (a batch of one)."""
    return merge(ledger.apply_resolution(resolution, at), ledger.publish(at))


def run(ledger: IssuanceLedger, tags: Tags, step: Step) -> Step:
    """Feed a step's deliveries through the tags and the answers back, until quiet."""
    total = Step()
    pending = list(step.deliveries)
    while pending:
        answers = tags.answer(pending)
        pending = []
        for answer in answers:
            out = settle(ledger, answer)
            pending += out.deliveries
            merge(total, out)
    return total


def test_a_committed_attempt_is_published_answered_and_certified() -> None:
    ledger, tags = new_ledger(), Tags()
    step = ledger.register(attempt("a1", event(1, "user:bob", "org:x")), T0)
    assert [d.action for d in step.deliveries] == ["PREPARE", "PREPARE"]
    (allocation,) = step.allocations
    done = run(ledger, tags, step)
    (result,) = done.results
    assert result.outcome == "COMMITTED" and result.suids == [allocation.candidates[0].suid]
    assert [e.suid for e in done.events] == result.suids
    assert done.certificate is not None
    assert done.certificate.closed_prefix_suid == result.suids[0]
    assert done.certificate.unresolved_count == 0
    assert ledger.state.attempts == {}


def test_certificate_coverage_is_where_the_published_events_end_and_never_moves_back() -> None:
    ledger, tags = new_ledger(), Tags()
    done = run(ledger, tags, ledger.register(attempt("a1", event(1, "user:bob")), T0))
    assert done.certificate is not None and done.certificate.coverage == []
    ledger.events_written(partition=2, end_offset=41)
    (covered,) = ledger.certificate(T0).coverage
    assert (covered.partition, covered.offset) == (2, 41)
    ledger.events_written(partition=2, end_offset=40)  # an older ack changes nothing
    assert ledger.certificate(T0).coverage[0].offset == 41


def test_replay_answers_the_same_and_divergent_replay_is_refused() -> None:
    ledger, tags = new_ledger(), Tags()
    first = ledger.register(attempt("a1", event(1, "user:bob")), T0)
    assert ledger.register(attempt("a1", event(1, "user:bob")), T0) == Step()  # in flight
    done = run(ledger, tags, first)
    replay = ledger.register(attempt("a1", event(1, "user:bob")), T0, done.completed[0])
    assert [(r.outcome, r.suids) for r in replay.results] == [
        (r.outcome, r.suids) for r in done.results
    ]
    with pytest.raises(DivergentReplayError) as info:
        ledger.register(attempt("a1", event(1, "user:alice")), T0, done.completed[0])
    assert info.value.code == "divergent_replay"


def test_a_rejecting_tag_fences_every_target_and_answers_at_once() -> None:
    ledger, tags = new_ledger(), Tags()
    run(ledger, tags, ledger.register(attempt("a1", event(1, "user:bob")), T0))
    step = ledger.register(
        attempt("a2", event(2, "user:bob", "org:x"), condition=unique("user:bob")), T0
    )
    done = run(ledger, tags, step)
    (result,) = done.results
    assert result.outcome == "REJECTED" and result.suids == []
    assert result.error is not None and result.error.code == "append_condition_failed"
    assert done.events == []
    assert ledger.state.unresolved == {}
    org = tags.tables["org:x"].state
    assert org.installed == [] and org.reservations == {} and len(org.tombstones) == 1


def test_a_stale_writer_epoch_is_refused_before_any_suid() -> None:
    ledger = new_ledger()
    ledger.register(attempt("a1", event(1, "t"), epoch=3), T0)
    watermark = ledger.state.watermark
    step = ledger.register(attempt("a2", event(2, "t"), epoch=2), T0)
    (result,) = step.results
    assert result.error is not None and result.error.code == "stale_fence"
    assert json.loads(result.error.details_json or "{}")["stale"] == 2
    assert step.deliveries == [] and ledger.state.watermark == watermark


def test_the_prefix_waits_below_a_hole_and_moves_when_it_resolves() -> None:
    ledger, tags = new_ledger(), Tags()
    early = ledger.register(attempt("a1", event(1, "x")), T0)
    late = ledger.register(attempt("a2", event(2, "y")), T0)
    done_late = run(ledger, tags, late)
    assert done_late.results == [] and done_late.events == [] and done_late.certificate is None
    assert ledger.state.closed_prefix is None  # a1's SUID is the hole: nothing below it
    done_early = run(ledger, tags, early)
    assert [r.attempt_id for r in done_early.results] == ["a1", "a2"]
    assert [e.attempt_id for e in done_early.events] == ["a1", "a2"]
    assert done_early.certificate is not None
    assert done_early.certificate.closed_prefix_suid == ledger.state.watermark


def test_evidence_that_does_not_match_the_envelope_is_refused() -> None:
    ledger, tags = new_ledger(), Tags()
    step = ledger.register(attempt("a1", event(1, "x", "y")), T0)
    vote, _ = tags.answer(step.deliveries)
    for forged in (
        vote.model_copy(update={"identity_digest": "0" * 64}),
        vote.model_copy(update={"tag": "not-a-member"}),
        vote.model_copy(update={"allocator_lineage_id": "other"}),
        vote.model_copy(update={"attempt_id": "unknown"}),
    ):
        with pytest.raises(EvidenceMismatchError) as info:
            ledger.apply_resolution(forged, T0)
        assert info.value.code == "evidence_mismatch"
    installed_early = vote.model_copy(
        update={"status": "INSTALLED_AND_COVERED", "obligation_digest": "d"}
    )
    with pytest.raises(EvidenceMismatchError):
        ledger.apply_resolution(installed_early, T0)  # no install decision yet


def test_a_single_target_attempt_is_decided_by_its_tag_in_one_phase() -> None:
    ledger, tags = new_ledger(), Tags()
    step = ledger.register(attempt("a1", event(1, "x")), T0)
    (prepare,) = step.deliveries
    assert prepare.action == "PREPARE" and prepare.one_phase
    assert step.allocations[0].one_phase
    (evidence,) = tags.answer(step.deliveries)
    assert evidence.status == "INSTALLED_AND_COVERED"  # no vote, no INSTALL round trip
    done = settle(ledger, evidence)
    assert [r.outcome for r in done.results] == ["COMMITTED"]
    assert [e.event.event_id for e in done.events] == ["e1"]
    two = ledger.register(attempt("a2", event(2, "x", "y")), T0)
    assert not any(d.one_phase for d in two.deliveries)  # x and y: partitions of their own
    guarded = ledger.register(attempt("a3", event(3, "x"), condition=unique("z")), T0)
    assert not any(d.one_phase for d in guarded.deliveries)  # z is a second target


def test_targets_in_one_partition_commit_in_one_phase_all_or_none() -> None:
    """The service placement: every tag in one partition, so every attempt is one-phase,
    several events and tags included; a refusal at one target fences every target."""
    state = LedgerState(service_id="svc", allocator_lineage_id="L")
    ledger, tags = IssuanceLedger(state, GRACE, lambda tag: 0), Tags()
    run(ledger, tags, ledger.register(attempt("a0", event(0, "course:c1")), T0))
    both = attempt("a1", event(1, "course:c2", "student:s1"), event(2, "student:s1"))
    ok = ledger.register(both, T0)
    assert all(d.one_phase for d in ok.deliveries) and len(ok.deliveries) == 3
    answers = tags.answer(ok.deliveries)
    assert {a.status for a in answers} == {"INSTALLED_AND_COVERED"}
    done = Step()
    for answer in answers:
        merge(done, settle(ledger, answer))
    assert [r.outcome for r in done.results] == ["COMMITTED"]
    assert len(done.events) == 2 and done.deliveries == []
    refused = ledger.register(
        attempt("a2", event(3, "course:c1", "student:s2"), condition=unique("course:c1")), T0
    )
    answers = tags.answer(refused.deliveries)
    assert {a.status for a in answers} == {"ABSENT_AND_IRREVOCABLY_FENCED"}
    assert {a.rejection.code for a in answers if a.rejection} == {"append_condition_failed"}
    first = settle(ledger, answers[0])  # answered at once, with the reason
    (result,) = first.results
    assert result.outcome == "REJECTED" and result.error is not None
    assert result.error.code == "append_condition_failed"
    rest = Step()
    for answer in answers[1:]:
        merge(rest, settle(ledger, answer))
    assert rest.results == [] and rest.events == []  # settled, never answered twice
    assert ledger.state.unresolved == {}
    assert tags.tables["student:s2"].state.installed == []
    assert len(tags.tables["student:s2"].state.tombstones) == 1


def test_past_the_grace_a_one_phase_attempt_takes_whatever_its_tag_decided() -> None:
    for installed_first in (True, False):
        ledger, tags = new_ledger(), Tags()
        step = ledger.register(attempt("a1", event(1, "x")), T0)
        early = tags.answer(step.deliveries) if installed_first else []
        late = T0 + timedelta(milliseconds=GRACE + 1)
        asked = ledger.reconcile(late)
        assert asked.results == []  # the ledger cannot fence alone: the tag may have installed
        (fence,) = asked.deliveries
        assert fence.action == "FENCE" and fence.fence_epoch is not None
        (evidence,) = tags.answer([fence])
        done = Step()
        for resolution in [*early, evidence]:
            done = settle(ledger, resolution, late) if not done.results else done
        (result,) = done.results
        if installed_first:
            assert result.outcome == "COMMITTED" and evidence.status == "INSTALLED_AND_COVERED"
        else:
            assert result.outcome == "REJECTED" and result.error is not None
            assert result.error.code == "reservation_expired"
            late_prepare = tags.answer(step.deliveries)  # the lost PREPARE, redelivered
            assert late_prepare[0].status == "ABSENT_AND_IRREVOCABLY_FENCED"


def test_duplicate_evidence_is_harmless_and_a_corrupt_count_is_detected() -> None:
    ledger, tags = new_ledger(), Tags()
    step = ledger.register(attempt("a1", event(1, "x")), T0)
    (terminal,) = tags.answer(step.deliveries)  # one target: installed at once
    assert settle(ledger, terminal).results
    assert settle(ledger, terminal) == Step()  # late echo at or below the prefix
    ledger.register(attempt("a2", event(2, "x")), T0)
    ledger.state.unresolved_count += 1
    with pytest.raises(CorruptLedgerError) as info:
        ledger.compute_prefix()
    assert info.value.code == "corrupt_ledger"


def test_bad_attempts_are_refused_whole() -> None:
    ledger = new_ledger()
    bad = [
        (attempt("a"), EmptyAttemptError),
        (attempt("b", event(1, *[f"t{i}" for i in range(33)])), TooManyTagsError),
        (
            attempt("c", event(1, "t").model_copy(update={"payload": "{not json"})),
            InvalidEventError,
        ),
        (attempt("d", event(1, "t"), event(1, "u")), InvalidEventError),
        (
            attempt(
                "e",
                event(1, "t"),
                condition=AppendCondition(fail_if_events_match=[QueryItem(types=["X"])]),
            ),
            InvalidConditionError,
        ),
        (
            attempt(
                "f",
                event(1, "t"),
                condition=AppendCondition(
                    fail_if_events_match=[QueryItem(tags=["t"])] * (MAX_CONDITION_ITEMS + 1)
                ),
            ),
            InvalidConditionError,
        ),
    ]
    for request, error in bad:
        with pytest.raises(error):
            ledger.register(request, T0)
    assert ledger.state == new_ledger().state  # nothing partially written


def test_the_reconciler_fences_a_never_contacted_target_only_after_the_grace() -> None:
    ledger, tags = new_ledger(), Tags()
    lost = ledger.register(attempt("a1", event(1, "x", "y")), T0)  # deliveries never sent
    assert ledger.reconcile(T0 + timedelta(milliseconds=GRACE - 1)) == Step()
    step = ledger.reconcile(T0 + timedelta(milliseconds=GRACE))
    assert {d.action for d in step.deliveries} == {"FENCE"}
    (result,) = step.results
    assert result.error is not None and result.error.code == "reservation_expired"
    run(ledger, tags, step)
    assert ledger.state.unresolved == {}
    # the lost PREPAREs arrive late: the tombstones refuse them
    late = tags.answer(lost.deliveries)
    assert {r.status for r in late} == {"ABSENT_AND_IRREVOCABLY_FENCED"}
    assert all(t.state.installed == [] for t in tags.tables.values())


def test_the_reconciler_resends_a_decision_nobody_answered_with_backoff() -> None:
    ledger, tags = new_ledger(), Tags()
    step = ledger.register(attempt("a1", event(1, "x", "y")), T0)
    votes = tags.answer(step.deliveries)
    ledger.apply_resolution(votes[0], T0)
    install = ledger.apply_resolution(votes[1], T0)  # the INSTALLs are lost
    assert [d.action for d in install.deliveries] == ["INSTALL", "INSTALL"]
    assert ledger.reconcile(T0 + timedelta(milliseconds=GRACE - 1)).deliveries == []
    again = ledger.reconcile(T0 + timedelta(milliseconds=GRACE))
    assert [d.action for d in again.deliveries] == ["INSTALL", "INSTALL"]
    assert ledger.state.recovery_due_ms is not None
    assert run(ledger, tags, again).results[0].outcome == "COMMITTED"


def test_plan_target_outcomes() -> None:
    assert plan_target(Target(status="installed"), "install", 0, GRACE, False).outcome == (
        TargetOutcome.TERMINAL
    )
    assert plan_target(Target(), None, 0, GRACE, False).outcome == TargetOutcome.NEVER_CONTACTED
    assert plan_target(Target(status="prepared"), None, 0, GRACE, False).fence
    waiting = plan_target(Target(last_sent_ms=0), "install", 10, GRACE, False)
    assert waiting.outcome == TargetOutcome.NOT_TERMINAL_YET and not waiting.resend
    stuck = plan_target(Target(last_sent_ms=0, sends=2), "fence", 2 * GRACE, GRACE, False)
    assert stuck.outcome == TargetOutcome.UNREACHABLE and stuck.resend
    assert [backoff_ms(n, GRACE) for n in (1, 2, 3, 4, 5, 9)] == [
        GRACE,
        2 * GRACE,
        4 * GRACE,
        8 * GRACE,
        8 * GRACE,
        8 * GRACE,
    ]


# --- the tag table ------------------------------------------------------------------


def delivery(action: str, suid: str, tag: str = "t", **extra: object) -> TagDelivery:
    fields: dict[str, object] = {
        "service_id": "svc",
        "tag": tag,
        "allocator_lineage_id": "L",
        "attempt_id": f"a-{suid}",
        "suid": suid,
        "event_id": f"e-{suid}",
        "identity_digest": "d",
        "action": action,
        "writer_epoch": 0,
    }
    fields.update(extra)
    return TagDelivery(**fields)


def suid(n: int) -> str:
    return f"{n:030d}"


def test_tag_table_checks_conditions_after_their_position_and_pending_reservations() -> None:
    table = TagTable(TagTableState(service_id="svc", tag="t"))
    ev = event(1, "t")
    assert table.handle(delivery("PREPARE", suid(1), event=ev)).status == "PREPARED"
    guarded: dict[str, Any] = {"event": event(2, "t"), "condition": unique("t")}
    pending = table.handle(delivery("PREPARE", suid(2), **guarded))
    assert pending.status == "REJECTED" and pending.rejection is not None
    assert json.loads(pending.rejection.details_json or "{}")["pending"] is True
    assert table.handle(delivery("INSTALL", suid(1))).status == "INSTALLED_AND_COVERED"
    assert table.state.head == suid(1)
    after_it: dict[str, Any] = {"event": event(3, "t"), "condition": unique("t", after=suid(1))}
    assert table.handle(delivery("PREPARE", suid(3), **after_it)).status == "PREPARED"
    before_it: dict[str, Any] = {"event": event(4, "t"), "condition": unique("t", after=suid(0))}
    assert table.handle(delivery("PREPARE", suid(4), **before_it)).status == "REJECTED"


def test_a_condition_sees_events_installed_out_of_suid_order() -> None:
    """Two-phase installs follow the ledger's decisions, not the SUIDs: the later SUID can
    install first. A condition after the earlier one must still see the later one."""
    table = TagTable(TagTableState(service_id="svc", tag="t"))
    for n in (1, 2):
        assert table.handle(delivery("PREPARE", suid(n), event=event(n, "t"))).status == "PREPARED"
    table.handle(delivery("INSTALL", suid(2)))
    table.handle(delivery("INSTALL", suid(1)))
    assert [e.suid for e in table.state.installed] == [suid(2), suid(1)]
    check: dict[str, Any] = {"event": event(3, "t"), "condition": unique("t", after=suid(1))}
    refused = table.handle(delivery("PREPARE", suid(3), **check))
    assert refused.status == "REJECTED" and refused.rejection is not None
    assert json.loads(refused.rejection.details_json or "{}")["conflictingSuid"] == suid(2)
    restored = TagTable(TagTableState.model_validate(table.state.model_dump()))
    assert restored.handle(delivery("PREPARE", suid(4), **check)).status == "REJECTED"


def test_tag_table_refuses_stale_epochs_and_honours_tombstones_forever() -> None:
    table = TagTable(TagTableState(service_id="svc", tag="t"))
    assert table.handle(delivery("PREPARE", suid(1), event=event(1, "t"), writer_epoch=5))
    stale = table.handle(delivery("PREPARE", suid(2), event=event(2, "t"), writer_epoch=4))
    assert stale.rejection is not None and stale.rejection.code == "stale_fence"
    assert json.loads(stale.rejection.details_json or "{}") == {
        "fenced": "tag t (writer epoch)",
        "stale": 4,
        "current": 5,
    }
    fenced = table.handle(delivery("FENCE", suid(1), fence_epoch=7))
    assert (fenced.status, fenced.tombstone_epoch) == ("ABSENT_AND_IRREVOCABLY_FENCED", 7)
    for action in ("PREPARE", "INSTALL", "FENCE"):
        again = table.handle(delivery(action, suid(1), event=event(1, "t"), writer_epoch=9))
        assert again.status == "ABSENT_AND_IRREVOCABLY_FENCED"
    assert table.state.installed == []
    with pytest.raises(TagProtocolError):
        table.handle(delivery("INSTALL", suid(3)))


def test_a_settled_fenced_target_keeps_no_tombstone_and_is_still_refused() -> None:
    """Past the closed prefix a later delivery carries, what is not installed is fenced:
    the tombstone goes, and a late PREPARE, INSTALL or FENCE of it is answered fenced,
    reserving and installing nothing (also after a restore)."""
    table = TagTable(TagTableState(service_id="svc", tag="t"))
    assert table.handle(delivery("PREPARE", suid(1), event=event(1, "t"))).status == "PREPARED"
    assert table.handle(delivery("INSTALL", suid(1))).status == "INSTALLED_AND_COVERED"
    assert table.handle(delivery("FENCE", suid(2), fence_epoch=3)).tombstone_epoch == 3
    assert table.handle(delivery("FENCE", suid(4), fence_epoch=3)).tombstone_epoch == 3
    # a reservation the prefix will pass: only a late PREPARE could leave one there
    assert table.handle(delivery("PREPARE", suid(3), event=event(3, "x"))).status == "PREPARED"
    later = delivery("PREPARE", suid(5), event=event(5, "t"), settled_through=suid(3))
    assert table.handle(later).status == "PREPARED"
    assert list(table.state.tombstones) == [suid(4)]  # above the prefix: kept
    assert list(table.state.reservations) == [suid(5)]
    writes = tag_store.writes_for(table.state, "t", 0)
    restored = TagTable(tag_store.restore("t", writes.header, writes.installed.get))
    for late in (table, restored):
        for action in ("PREPARE", "INSTALL", "FENCE"):
            again = late.handle(delivery(action, suid(2), event=event(2, "t")))
            assert again.status == "ABSENT_AND_IRREVOCABLY_FENCED"
        assert suid(2) not in late.state.reservations
        assert late.handle(delivery("INSTALL", suid(1))).status == "INSTALLED_AND_COVERED"
    assert [e.suid for e in table.state.installed] == [suid(1)]


def test_late_deliveries_of_a_settled_candidate_change_nothing_while_its_attempt_is_open() -> None:
    """Two-phase: the prefix passes an attempt's first candidate (its event's tag and a
    check-only guard tag installed) while its second waits for its INSTALL. Late PREPAREs
    and INSTALLs of the first, after a later delivery told both tables the prefix, are
    answered without reserving and without changing the ledger; then the attempt commits."""
    ledger, tags = new_ledger(), Tags()
    first = ledger.register(attempt("m", event(1, "a"), event(2, "b"), condition=unique("g")), T0)
    decided: list[TagDelivery] = []
    for answer in tags.answer(first.deliveries):
        decided += settle(ledger, answer).deliveries
    installs = {d.tag: d for d in decided}
    assert sorted(installs) == ["a", "b", "g"] and {d.action for d in decided} == {"INSTALL"}
    held = installs.pop("b")
    for answer in tags.answer(list(installs.values())):
        assert settle(ledger, answer).results == []
    settled = installs["a"].suid
    assert ledger.state.closed_prefix == settled < held.suid
    later = ledger.register(attempt("n", event(3, "a", "g")), T0)
    assert {d.settled_through for d in later.deliveries} == {settled}
    for answer in tags.answer(later.deliveries):  # votes only: n waits for its decision
        assert answer.status == "PREPARED"
    before = ledger.state.model_dump()
    late = [d for d in (*first.deliveries, *installs.values()) if d.suid == settled]
    assert sorted(d.tag for d in late) == ["a", "a", "g", "g"]
    for answer in tags.answer(late):
        assert answer.status in ("INSTALLED_AND_COVERED", "ABSENT_AND_IRREVOCABLY_FENCED")
        assert settle(ledger, answer) == Step()
    assert ledger.state.model_dump() == before
    assert settled not in tags.table("g").state.reservations
    assert settled not in tags.table("a").state.reservations
    done = run(ledger, tags, Step(deliveries=[held]))
    (result,) = done.results
    assert (result.attempt_id, result.outcome) == ("m", "COMMITTED")
    assert [e.event_id for e in tags.table("a").state.installed] == ["e1"]


def test_refused_attempts_on_a_contended_tag_leave_a_bounded_header() -> None:
    """Each refused one-phase attempt fences its target; the prefix the next deliveries
    carry lets the table drop those tombstones, so its header stops growing."""
    ledger, tags = new_ledger(), Tags()
    run(ledger, tags, ledger.register(attempt("first", event(0, "name:ann")), T0))
    for n in range(1, 200):
        taken = ledger.register(
            attempt(f"a{n}", event(n, "name:ann"), condition=unique("name:ann")), T0
        )
        done = run(ledger, tags, taken)
        merge(done, ledger.publish(T0))
        assert done.results[0].outcome == "REJECTED"
    assert len(tags.tables["name:ann"].state.tombstones) <= 1
    header = tag_store.writes_for(tags.tables["name:ann"].state, "name:ann", 1).header
    assert len(header) < 1_000


def test_a_guard_tag_the_event_does_not_carry_is_checked_but_never_installed() -> None:
    ledger, tags = new_ledger(), Tags()
    run(ledger, tags, ledger.register(attempt("a1", event(1, "course:c1")), T0))
    step = ledger.register(attempt("a2", event(2, "student:s1"), condition=unique("course:c1")), T0)
    assert sorted(d.tag for d in step.deliveries) == ["course:c1", "student:s1"]
    done = run(ledger, tags, step)
    assert done.results[0].error is not None
    assert done.results[0].error.code == "append_condition_failed"
    ok = ledger.register(
        attempt(
            "a3", event(3, "student:s1"), condition=unique("course:c1", ledger.state.watermark)
        ),
        T0,
    )
    assert run(ledger, tags, ok).results[0].outcome == "COMMITTED"
    assert [e.event_id for e in tags.tables["course:c1"].state.installed] == ["e1"]


def test_a_tag_step_stores_its_header_and_only_the_event_it_installed() -> None:
    """A busy tag's step costs the same at its 5th event as at its 500th: the whole table
    per step outgrew Kafka's record size after a few thousand events."""
    table, rows, key = TagTable(TagTableState(service_id="svc", tag="t")), {}, "svc\x1ft"
    headers: list[bytes] = []
    for n in range(1, 501):
        ev = event(n, "t")
        for action in ("PREPARE", "INSTALL"):
            before = len(table.state.installed)
            table.handle(delivery(action, suid(n), event=ev))
            writes = tag_store.writes_for(table.state, key, before)
            assert len(writes.installed) == (action == "INSTALL")
            rows.update(writes.installed)
            headers.append(writes.header)
    assert len(headers[-1]) <= len(headers[9]) + 2  # digits of the count
    restored = tag_store.restore(key, headers[-1], rows.get)
    assert restored == table.state and len(restored.installed) == 500
    again = TagTable(restored)  # redeliveries after a restore get the same answers
    for n in (1, 250, 500):
        answer = again.handle(delivery("INSTALL", suid(n)))
        digest = table.state.installed[n - 1].obligation_digest
        assert (answer.status, answer.obligation_digest) == ("INSTALLED_AND_COVERED", digest)
    del rows[tag_store.installed_key(key, 250)]
    with pytest.raises(CorruptTagTableError) as lost:
        tag_store.restore(key, headers[-1], rows.get)
    assert lost.value.code == "corrupt_tag_table"


def test_installed_events_are_slotted_and_share_their_type_and_tag_strings() -> None:
    """A tag table keeps every event it installed for as long as it lives."""
    table, key = TagTable(TagTableState(service_id="svc", tag="course:c1")), "svc\x1fcourse:c1"
    rows: dict[str, bytes] = {}
    for n in (1, 2):
        tag, kind = "".join(["course:", "c1"]), "".join(["Student", "Subscribed"])  # new str
        ev = event(n, tag, event_type=kind)
        table.handle(delivery("PREPARE", suid(n), tag=tag, event=ev))
        table.handle(delivery("INSTALL", suid(n), tag=tag))
        writes = tag_store.writes_for(table.state, key, n - 1)
        rows.update(writes.installed)
    restored = tag_store.restore(key, writes.header, rows.get)
    assert restored == table.state
    for first, second in (table.state.installed, restored.installed):
        assert not hasattr(first, "__dict__")
        assert first.tags[0] is second.tags[0] and first.event_type is second.event_type


def test_a_whole_tag_table_of_the_earlier_layout_restores_whole_then_is_stored_in_rows() -> None:
    table, key = TagTable(TagTableState(service_id="svc", tag="t")), "svc\x1ft"
    for n in (1, 2):
        table.handle(delivery("PREPARE", suid(n), event=event(n, "t")))
        table.handle(delivery("INSTALL", suid(n)))
    legacy = table.state.model_dump_json().encode()  # how tag-tables held it before
    restored = TagTable(tag_store.restore(key, legacy, lambda _row: None))
    assert restored.state == table.state
    guarded: dict[str, Any] = {"event": event(3, "t"), "condition": unique("t", after=suid(1))}
    assert restored.handle(delivery("PREPARE", suid(3), **guarded)).status == "REJECTED"
    writes = tag_store.writes_for(restored.state, key, tag_store.rows_stored(legacy))
    assert sorted(writes.installed) == [tag_store.installed_key(key, i) for i in (0, 1)]
    assert tag_store.restore(key, writes.header, writes.installed.get) == restored.state


def test_one_phase_targets_carry_their_own_events_obligation_digest() -> None:
    """Each target of a one-phase attempt carries its own event's obligation digest, never
    another event's (the ledger takes each digest once and hands it to all its targets)."""
    ledger = IssuanceLedger(
        LedgerState(service_id="svc", allocator_lineage_id="L"), GRACE, lambda _tag: 0
    )
    first = event(1, "org:b", "user:a")  # canonical (sorted) tags, as the ledger keeps them
    second = event(2, "org:b", "team:c", event_type="Moved")
    step = ledger.register(attempt("a1", first, second), T0)
    assert all(d.one_phase for d in step.deliveries)
    (allocation,) = step.allocations
    by_suid = {c.suid: (first, second)[c.index] for c in allocation.candidates}
    answers = Tags().answer(step.deliveries)
    assert len(answers) == 4 and {a.status for a in answers} == {"INSTALLED_AND_COVERED"}
    for answer in answers:
        assert answer.obligation_digest == obligation_digest(by_suid[answer.suid])


@given(
    payload=st.sampled_from(["{}", '{"a":1}', '"x"', "[1, 2]"]),
    tags=st.lists(st.text(min_size=1, max_size=8), max_size=4),
    extras=st.lists(st.none() | st.text(max_size=8), min_size=3, max_size=3),
    condition=st.none() | st.builds(unique, st.text(min_size=1, max_size=8)),
)
def test_membership_digest_is_the_digest_of_the_events_json_dump(
    payload: str, tags: list[str], extras: list[str | None], condition: AppendCondition | None
) -> None:
    """Digests stored by earlier versions (over pydantic's JSON dump) must still match."""
    causation, correlation, user = extras
    e = event(1, *tags).model_copy(
        update={
            "payload": payload,
            "causation_id": causation,
            "correlation_id": correlation,
            "executed_user": user,
        }
    )
    a = attempt("a1", e, event(2), condition=condition)
    dumped = {
        "events": [x.model_dump(mode="json", exclude={"timestamp"}) for x in a.events],
        "condition": None if condition is None else condition.to_avro(),
    }
    assert membership_digest(a) == sha256_hex(dumped)
