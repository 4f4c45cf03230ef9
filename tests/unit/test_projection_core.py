"""The projection core against an independent fold, with late events, untrustworthy
certificates and crashes at any point (restore from the last committed checkpoint).

The simulated log is what the runner reads: events of two services on one partition of
``dcb.events`` in an order that need not be SUID order (an event may commit late), and
certificates on ``dcb.certificates`` that are sound at the moment they are written (every
event at or below the prefix lies below the coverage offset), mixed with foreign,
not-ready, backwards and malformed ones.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.model.records import Certificate, CommittedEvent, EventData, PartitionOffset, QueryItem
from streams.model.suid import format_suid, ticks
from streams.projections.api import ProjectedEvent, Row, ServiceProjector, TagProjector
from streams.projections.certificates import Verdict
from streams.projections.checkpoint import Checkpoint
from streams.projections.core import ProjectionCore
from streams.projections.outcomes import Outcome, notify, observation

SERVICES = ("s1", "s2")
LINEAGE = {"s1": "lineage-1", "s2": "lineage-2"}
AT = datetime(2026, 1, 1, tzinfo=UTC)


def _roster(row: Row, event: ProjectedEvent) -> Row | None:
    if event.event_type == "CourseCancelled":
        return None
    return {"students": [*row.get("students", []), event.data["student"]]}


ROSTER = TagProjector(
    id="roster",
    query=(QueryItem(types=["StudentSubscribed", "CourseCancelled"]),),
    tag_prefix="course:",
    fold=_roster,
)


def _event(service: str, n: int, course: int, student: int, cancel: bool) -> CommittedEvent:
    kind = "CourseCancelled" if cancel else "StudentSubscribed"
    return CommittedEvent(
        service_id=service,
        suid=format_suid(ticks(AT) * 10**11 + n),
        allocator_lineage_id=LINEAGE[service],
        attempt_id=f"a{n}",
        event=EventData(
            event_id=f"e{n}",
            event_type=kind,
            payload=json.dumps({"student": f"st{student}"}),
            tags=[f"course:c{course}", f"student:st{student}"],
            timestamp=AT,
        ),
    )


def _certificate(service: str, prefix: str | None, end: int, **changes: object) -> Certificate:
    fields: dict[str, object] = {
        "certificate_version": 1,
        "authority": "test",
        "status": "READY",
        "allocator_lineage_id": LINEAGE[service],
        "service_id": service,
        "closed_prefix_suid": prefix,
        "unresolved_count": 0,
        "generated_at": AT,
        "coverage": [PartitionOffset(partition=0, offset=end)],
    }
    fields.update(changes)
    return Certificate(**fields)


def _sound_prefix(events: list[CommittedEvent], end: int, service: str) -> str | None:
    """The greatest SUID of ``service`` with every event at or below it before ``end``."""
    mine = sorted((e.suid, i) for i, e in enumerate(events) if e.service_id == service)
    prefix = None
    for suid, offset in mine:
        if offset >= end:
            break
        prefix = suid
    return prefix


def _oracle(events: list[CommittedEvent], through: dict[str, str | None]) -> dict[str, Row]:
    """Rows from a plain fold of every event at or below each service's applied point."""
    rows: dict[str, Row] = {}
    for e in sorted(events, key=lambda e: (e.service_id, e.suid)):
        upto = through.get(e.service_id)
        if upto is None or e.suid > upto:
            continue
        key = f"{e.service_id}/{e.event.tags[0]}"
        if e.event.event_type == "CourseCancelled":
            rows.pop(key, None)
        else:
            rows.setdefault(key, {"students": []})["students"].append(e.event.data["student"])
    return rows


@dataclass(frozen=True)
class Written:
    """A certificate on the topic, written once ``after_events`` events were."""

    after_events: int
    key: str
    certificate: Certificate | None  # None: bytes that do not decode
    sound: bool  # written by the service's ledger (the others must never be trusted)


@st.composite
def histories(
    draw: st.DrawFn,
) -> tuple[list[CommittedEvent], list[Written]]:
    n = draw(st.integers(1, 30))
    events = [
        _event(
            draw(st.sampled_from(SERVICES)),
            i,
            draw(st.integers(0, 2)),
            draw(st.integers(0, 4)),
            draw(st.integers(0, 9)) == 0,
        )
        for i in range(n)
    ]
    # Late commits: swap some neighbours, so the log is not in SUID order.
    for _ in range(draw(st.integers(0, n))):
        i = draw(st.integers(0, n - 1))
        j = min(n - 1, i + draw(st.integers(1, 3)))
        events[i], events[j] = events[j], events[i]
    certificates: list[Written] = []
    for end in sorted(draw(st.lists(st.integers(0, n), max_size=12))):
        service = draw(st.sampled_from(SERVICES))
        prefix = _sound_prefix(events, end, service)
        kind = draw(
            st.sampled_from(["good"] * 4 + ["foreign", "lineage", "unready", "bad", "junk"])
        )
        if kind == "good":
            cert = _certificate(service, prefix, end)
        elif kind == "foreign":  # a certificate of s2 under s1's key, and vice versa
            other = SERVICES[1 - SERVICES.index(service)]
            cert = _certificate(other, format_suid(10**29), n)
        elif kind == "lineage":
            cert = _certificate(service, format_suid(10**29), n, allocator_lineage_id="other")
        elif kind == "unready":
            cert = _certificate(service, format_suid(10**29), n, status="UNRECONCILED")
        elif kind == "bad":
            cert = _certificate(service, "not-a-suid", n)
        else:
            cert = None  # bytes that do not decode
        certificates.append(Written(end, service, cert, kind == "good"))
    return events, certificates


@settings(max_examples=200, deadline=None)
@given(histories(), st.data())
def test_rows_equal_the_fold_up_to_the_trusted_prefix_across_crashes(
    history: tuple[list[CommittedEvent], list[Written]],
    data: st.DataObject,
) -> None:
    events, certificates = history
    committed: tuple[Checkpoint, dict[str, Row]] = (Checkpoint(projection_id="roster"), {})
    limit = data.draw(st.sampled_from([None, 1, 3]), label="events per pass")
    core = ProjectionCore(ROSTER, *copy.deepcopy(committed), max_per_pass=limit)
    trusted: dict[str, str] = {}  # the greatest sound prefix offered per service
    e_at = c_at = 0
    while e_at < len(events) or c_at < len(certificates):
        # Read in log order per topic; a certificate is readable once it is written.
        can_cert = c_at < len(certificates) and certificates[c_at].after_events <= e_at
        if can_cert and (e_at == len(events) or data.draw(st.booleans())):
            w = certificates[c_at]
            core.offer_certificate(w.certificate, w.key, 0, c_at)
            if w.sound and w.certificate is not None and w.certificate.closed_prefix_suid:
                trusted[w.key] = max(trusted.get(w.key, ""), w.certificate.closed_prefix_suid)
            c_at += 1
        elif e_at < len(events):
            core.offer_event(events[e_at], 0, e_at)
            e_at += 1
        step = data.draw(st.sampled_from(["read", "pass", "pass+commit", "crash"]))
        if step.startswith("pass"):
            done = core.run_pass(AT.timestamp())
            through = {s: m.applied_through for s, m in done.checkpoint.services.items()}
            for service, point in through.items():
                assert point is None or point <= trusted.get(service, "")
            assert core.rows == _oracle(events, through)
            if step == "pass+commit":
                committed = copy.deepcopy((done.checkpoint, core.rows))
        elif step == "crash":
            checkpoint, rows = copy.deepcopy(committed)
            core = ProjectionCore(ROSTER, checkpoint, rows, max_per_pass=limit)
            e_at = checkpoint.events_offsets.get(0, 0)
            c_at = checkpoint.certificates_offsets.get(0, 0)
    # Everything read and certified: the rows are the fold of the whole trusted history
    # (a pass limit takes as many passes as it takes).
    while core.run_pass(AT.timestamp()).applied:
        pass
    assert core.rows == _oracle(events, {s: trusted.get(s) for s in SERVICES})


def test_an_untrusted_certificate_never_moves_anything() -> None:
    e = _event("s1", 1, 0, 0, False)
    core = ProjectionCore(ROSTER, Checkpoint(projection_id="roster"), {})
    core.offer_event(e, 0, 0)
    for n, (key, cert) in enumerate(
        [
            ("s2", _certificate("s1", e.suid, 1)),  # read under another service's key
            ("s1", _certificate("s1", e.suid, 1, status="UNRECONCILED")),
            ("s1", _certificate("s1", e.suid, 1, certificate_version=2)),
            (
                "s1",
                _certificate("s1", e.suid, 1, coverage=[PartitionOffset(partition=0, offset=-1)]),
            ),
            ("s1", None),
        ]
    ):
        assert core.offer_certificate(cert, key, 0, n) is not Verdict.ACCEPTED
        done = core.run_pass(AT.timestamp())
        assert done.applied == 0 and core.rows == {}
    assert core.offer_certificate(_certificate("s1", e.suid, 1), "s1", 0, 9) is Verdict.ACCEPTED
    assert core.run_pass(AT.timestamp()).applied == 1
    # Once a lineage is trusted, another one is foreign, and a lower prefix is backwards.
    other = _certificate("s1", format_suid(10**29), 1, allocator_lineage_id="x")
    assert core.offer_certificate(other, "s1", 0, 10) is Verdict.FOREIGN_LINEAGE
    lower = _certificate("s1", format_suid(1), 1)
    assert core.offer_certificate(lower, "s1", 0, 11) is Verdict.BACKWARDS
    assert core.ignored[Verdict.BACKWARDS] == 1


def test_events_wait_for_the_coverage_to_be_read() -> None:
    first, second = _event("s1", 1, 0, 0, False), _event("s1", 2, 0, 1, False)
    core = ProjectionCore(ROSTER, Checkpoint(projection_id="roster"), {})
    core.offer_event(second, 0, 0)  # the later SUID committed first
    core.offer_certificate(_certificate("s1", second.suid, 2), "s1", 0, 0)
    done = core.run_pass(AT.timestamp())
    assert (done.applied, done.gated) == (0, "coverage_not_read")
    # The checkpoint keeps the waiting event's offset: a restart reads it again.
    assert done.checkpoint.events_offsets == {0: 0}
    core.offer_event(first, 0, 1)
    done = core.run_pass(AT.timestamp())
    assert done.applied == 2
    assert core.rows == {"s1/course:c0": {"students": ["st0", "st1"]}}


def test_a_pass_past_the_safe_window_ceiling_advances_nothing() -> None:
    e = _event("s1", 1, 0, 0, False)
    e = e.model_copy(update={"suid": format_suid(10**20)})  # issued in year 1, certified in 2026
    core = ProjectionCore(ROSTER, Checkpoint(projection_id="roster"), {})
    core.offer_event(e, 0, 0)
    core.offer_certificate(_certificate("s1", e.suid, 1), "s1", 0, 0)
    assert core.run_pass(AT.timestamp()).applied == 1  # certified: applied, and observed
    late = _event("s1", 2, 0, 1, False)
    assert late.suid > e.suid
    core.offer_event(late, 0, 1)
    core.offer_certificate(_certificate("s1", late.suid, 2), "s1", 0, 1)
    done = core.run_pass(AT.timestamp())
    assert (done.applied, done.gated) == (0, "safe_window_ceiling_exceeded")
    # The bound decays with wall time; far enough on, the pass goes through.
    assert core.run_pass(AT.timestamp() + 86_400 * 365 * 3000).applied == 1


def test_a_service_projector_and_tombstones() -> None:
    count = ServiceProjector(
        id="count",
        query=(QueryItem(types=["StudentSubscribed"]),),
        fold=lambda row, e: {"n": row.get("n", 0) + 1},
    )
    events = [_event("s1", 1, 0, 0, False), _event("s1", 2, 0, 1, True)]
    for projector, expected in ((count, {"s1": {"n": 1}}), (ROSTER, {})):
        core = ProjectionCore(projector, Checkpoint(projection_id=projector.id), {})
        for i, e in enumerate(events):
            core.offer_event(e, 0, i)
        core.offer_certificate(_certificate("s1", events[-1].suid, 2), "s1", 0, 0)
        done = core.run_pass(AT.timestamp())
        assert core.rows == expected
        if projector is ROSTER:
            # Created and deleted in one pass: nothing to publish (a sink never saw it).
            assert done.changes == {}
    # Deleted in a later pass than the one that created it: a tombstone for the sink.
    core = ProjectionCore(ROSTER, Checkpoint(projection_id="roster"), {})
    for i, e in enumerate(events):
        core.offer_event(e, 0, i)
        core.offer_certificate(_certificate("s1", e.suid, i + 1), "s1", 0, i)
        done = core.run_pass(AT.timestamp())
    assert done.changes == {"s1/course:c0": None}


def test_every_poll_has_one_outcome_and_a_failing_observer_changes_nothing() -> None:
    assert observation("p", 0, 3, None).outcome is Outcome.ADVANCED
    assert observation("p", 0, 0, "coverage_not_read").outcome is Outcome.EXPLICITLY_GATED
    assert observation("p", 0, 0, None).outcome is Outcome.INVOKED_BUT_NO_WORK
    threw = observation("p", 0, 0, None, RuntimeError("x" * 500))
    assert threw.outcome is Outcome.INVOKED_AND_THREW and len(threw.reason or "") == 256
    heard: list[object] = []

    def broken(_: object) -> None:
        raise RuntimeError("observer down")

    notify([broken, heard.append], threw)
    assert heard == [threw]
