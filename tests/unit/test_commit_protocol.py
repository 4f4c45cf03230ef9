"""The commit protocol in memory: ledger and tag tables exchanging records in any order.

Hypothesis drives concurrent writers of the DCB course-subscription example (two tags per
event) and of unique user names (one tag: the one-phase path) through
one ledger and one tag table per tag, interleaving deliveries per tag (FIFO per tag,
as a Kafka partition is), redelivering and losing records, and running the reconciler.
An independent fold over the published events then checks the invariants: capacity and
student limits never exceeded (DCB consistency), every event in all its tags or none
(atomic), each attempt answered once, SUIDs and certificates monotone, nothing left
unresolved once the reconciler has run. After every ledger step the state is stored as
the agent stores it (header + the attempts the step touched) and must join back whole;
after every tag step likewise (header + the events it installed).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st

from streams.ledger.ledger import IssuanceLedger, Step
from streams.ledger.state import CompletedAttempt, LedgerState
from streams.ledger.store import restore, touched_by, writes_for
from streams.model.records import (
    AppendCondition,
    Certificate,
    CommitAttempt,
    CommitResult,
    CommittedEvent,
    EventData,
    QueryItem,
    TagDelivery,
    TagResolution,
)
from streams.tags import store as tag_store
from streams.tags.table import TagTable, TagTableState

CAPACITY = 2
STUDENT_LIMIT = 2
COURSES = ["c1", "c2", "c3"]
STUDENTS = ["s1", "s2", "s3", "s4"]
NAMES = ["ann", "bob"]
GRACE_MS = 1_000


class Pipeline:
    """The processors' cores wired by in-memory queues instead of topics."""

    def __init__(self) -> None:
        self.clock = datetime(2026, 12, 3, tzinfo=UTC)
        self.ledger = IssuanceLedger(
            LedgerState(service_id="svc", allocator_lineage_id="lineage-1"), grace_ms=GRACE_MS
        )
        self.tags: dict[str, TagTable] = {}
        self.deliveries: dict[str, deque[TagDelivery]] = defaultdict(deque)
        self.resolutions: deque[TagResolution] = deque()
        self.results: dict[str, list[CommitResult]] = defaultdict(list)
        self.completed: dict[str, CompletedAttempt] = {}
        self.events: list[CommittedEvent] = []
        self.certificates: list[Certificate] = []
        self.allocated: list[str] = []
        self.inflight: dict[str, dict[str, Any]] = {}  # the shell's per-attempt table
        self.installed_rows: dict[str, dict[str, Any]] = {}  # the shell's per-event table

    def tick(self, ms: int = 1) -> datetime:
        self.clock += timedelta(milliseconds=ms)
        return self.clock

    def absorb(self, step: Step) -> None:
        for allocation in step.allocations:
            self.allocated += [c.suid for c in allocation.candidates]
        for delivery in step.deliveries:
            self.deliveries[delivery.tag].append(delivery)
        prefix = step.certificate.closed_prefix_suid if step.certificate else None
        for event in step.events:
            assert prefix is not None and event.suid <= prefix
            assert not self.events or self.events[-1].suid < event.suid
            self.events.append(event)
        for result in step.results:
            self.results[result.attempt_id].append(result)
        for done in step.completed:
            self.completed[done.attempt_id] = done
        if step.certificate is not None:
            last = self.certificates[-1].closed_prefix_suid if self.certificates else None
            assert prefix is not None and (last is None or prefix > last)
            self.certificates.append(step.certificate)
        state = self.ledger.state
        assert state.unresolved_count == len(state.unresolved)

    def persisted(self, touched: set[str] | None, run: Callable[[], Step]) -> None:
        """Run a ledger step, store it as the agent does, and join the tables back."""
        before = set(self.ledger.state.attempts)
        step = run()
        writes = writes_for(self.ledger.state, touched, before)
        self.inflight.update(writes.attempts)
        for key in writes.removed:
            del self.inflight[key]
        restored = restore(writes.header, self.inflight.get)
        assert restored.model_dump() == self.ledger.state.model_dump()
        self.absorb(step)

    def submit(self, attempt: CommitAttempt) -> None:
        done = self.completed.get(attempt.attempt_id)
        self.persisted(
            {attempt.attempt_id}, lambda: self.ledger.register(attempt, self.tick(), done)
        )

    def deliver(self, tag: str, redeliver: bool = False) -> None:
        queue = self.deliveries[tag]
        delivery = queue[0] if redeliver else queue.popleft()
        table = self.tags.setdefault(tag, TagTable(TagTableState(service_id="svc", tag=tag)))
        before = len(table.state.installed)
        self.resolutions.append(table.handle(delivery, self.tick()))
        # Stored as the agent stores it (header + the rows it appended), and the next
        # delivery at this tag sees only what joins back from storage.
        writes = tag_store.writes_for(table.state, tag, before)
        self.installed_rows.update(writes.installed)
        restored = tag_store.restore(tag, writes.header, self.installed_rows.get)
        assert restored == table.state
        self.tags[tag] = TagTable(restored)

    def resolve(self) -> None:
        resolution = self.resolutions.popleft()
        self.persisted(
            touched_by(resolution), lambda: self.ledger.apply_resolution(resolution, self.tick())
        )

    def reconcile(self, skip_grace: bool) -> None:
        self.persisted(None, lambda: self.ledger.reconcile(self.tick(GRACE_MS // 2), skip_grace))

    def busy_tags(self) -> list[str]:
        return sorted(tag for tag, queue in self.deliveries.items() if queue)

    def drain(self) -> None:
        for _ in range(50):
            while self.busy_tags() or self.resolutions:
                for tag in self.busy_tags():
                    self.deliver(tag)
                while self.resolutions:
                    self.resolve()
            if not self.ledger.state.attempts:
                return
            self.reconcile(skip_grace=True)
        raise AssertionError("the pipeline did not settle")


class Writer:
    """One student's subscription command: read the certified events, decide, append."""

    ids = itertools.count()

    def __init__(self, student: str, course: str) -> None:
        self.student, self.course = student, course
        self.attempt: CommitAttempt | None = None
        self.done = False

    def read_decide_append(self, pipe: Pipeline) -> CommitAttempt | None:
        query = [
            QueryItem(types=["StudentSubscribed"], tags=[f"course:{self.course}"]),
            QueryItem(types=["StudentSubscribed"], tags=[f"student:{self.student}"]),
        ]
        seen = [e for e in pipe.events if any(set(q.tags) <= set(e.event.tags) for q in query)]
        in_course = sum(f"course:{self.course}" in e.event.tags for e in seen)
        of_student = sum(f"student:{self.student}" in e.event.tags for e in seen)
        mine = {f"course:{self.course}", f"student:{self.student}"}
        already = any(mine <= set(e.event.tags) for e in seen)
        if in_course >= CAPACITY or of_student >= STUDENT_LIMIT or already:
            self.done = True
            return None
        body = {"student": self.student, "course": self.course}
        return self.append(pipe, "StudentSubscribed", body, sorted(mine), query)

    def append(
        self, pipe: Pipeline, kind: str, body: dict[str, str], tags: list[str], query: Any
    ) -> CommitAttempt:
        """One event, guarded by ``query`` after the newest certificate this writer read."""
        n = next(self.ids)
        event = EventData(
            event_id=f"ev-{n}",
            event_type=kind,
            payload=json.dumps(body),
            tags=tags,
            timestamp=pipe.clock,
        )
        after = pipe.certificates[-1].closed_prefix_suid if pipe.certificates else None
        self.attempt = CommitAttempt(
            attempt_id=f"attempt-{n}",
            writer_epoch=0,
            events=[event],
            condition=AppendCondition(fail_if_events_match=query, after=after),
        )
        return self.attempt

    def answered(self, pipe: Pipeline) -> None:
        if self.attempt is None or not pipe.results.get(self.attempt.attempt_id):
            return
        result = pipe.results[self.attempt.attempt_id][0]
        retry = result.outcome == "REJECTED"
        self.attempt = None
        self.done = not retry


class NameClaim(Writer):
    """A single-tag attempt (one target: the tag decides alone, in one phase)."""

    def __init__(self, name: str) -> None:
        super().__init__(student="", course="")
        self.name = name

    def read_decide_append(self, pipe: Pipeline) -> CommitAttempt | None:
        tag = f"username:{self.name}"
        if any(tag in e.event.tags for e in pipe.events):
            self.done = True
            return None
        return self.append(pipe, "NameClaimed", {"name": self.name}, [tag], [QueryItem(tags=[tag])])


actions = st.lists(
    st.tuples(
        st.sampled_from(["write", "deliver", "redeliver", "lose", "resolve", "reconcile"]),
        st.integers(0, 1000),
    ),
    max_size=400,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(STUDENTS), st.sampled_from(COURSES)), min_size=1, max_size=10
    ),
    st.lists(st.sampled_from(NAMES), max_size=4),
    actions,
)
def test_concurrent_subscriptions_keep_every_invariant(
    wishes: list[tuple[str, str]], claims: list[str], script: list[tuple[str, int]]
) -> None:
    pipe = Pipeline()
    writers = [Writer(student, course) for student, course in wishes]
    writers += [NameClaim(name) for name in claims]
    submitted: list[CommitAttempt] = []
    for action, pick in script:
        for writer in writers:
            writer.answered(pipe)
        idle = [w for w in writers if not w.done and w.attempt is None]
        tags = pipe.busy_tags()
        if action == "write" and idle:
            attempt = idle[pick % len(idle)].read_decide_append(pipe)
            if attempt is not None:
                submitted.append(attempt)
                pipe.submit(attempt)
        elif action in ("deliver", "redeliver") and tags:
            pipe.deliver(tags[pick % len(tags)], redeliver=action == "redeliver")
        elif action == "lose" and tags:
            pipe.deliveries[tags[pick % len(tags)]].popleft()
        elif action == "resolve" and pipe.resolutions:
            pipe.resolve()
        elif action == "reconcile":
            pipe.reconcile(skip_grace=pick % 4 == 0)
    for _ in range(30):  # then every writer goes on concurrently until it is done
        pipe.drain()
        for writer in writers:
            writer.answered(pipe)
        idle = [w for w in writers if not w.done and w.attempt is None]
        if not idle:
            break
        for writer in idle:
            attempt = writer.read_decide_append(pipe)
            if attempt is not None:
                submitted.append(attempt)
                pipe.submit(attempt)
    assert all(w.done for w in writers)
    if submitted:  # a replayed attempt is answered the same way, with the same SUIDs
        again = submitted[len(submitted) // 2]
        first = pipe.results[again.attempt_id][0]
        pipe.submit(again)
        replay = pipe.results[again.attempt_id][-1]
        assert (replay.outcome, replay.suids) == (first.outcome, first.suids)
        del pipe.results[again.attempt_id][-1]
    check_invariants(pipe, submitted)


def check_invariants(pipe: Pipeline, submitted: list[CommitAttempt]) -> None:
    state = pipe.ledger.state
    # Ordered: SUIDs strictly increase in allocation order.
    assert pipe.allocated == sorted(set(pipe.allocated))
    # Every attempt answered exactly once; committed SUIDs are exactly its published events.
    published: dict[str, list[str]] = defaultdict(list)
    for event in pipe.events:
        published[event.attempt_id].append(event.suid)
    for attempt in submitted:
        (result,) = pipe.results[attempt.attempt_id]
        if result.outcome == "COMMITTED":
            assert published[attempt.attempt_id] == result.suids
        else:
            assert attempt.attempt_id not in published
            assert result.error is not None and result.error.code
    # Settled: nothing unresolved, the prefix reached the watermark.
    assert state.unresolved == {} and state.unresolved_count == 0
    assert state.closed_prefix == state.watermark
    # Atomic: a committed event is installed in every tag it carries; a fenced one in none.
    installed = {(tag, e.suid) for tag, t in pipe.tags.items() for e in t.state.installed}
    committed = {e.suid for e in pipe.events}
    for event in pipe.events:
        assert all((tag, event.suid) in installed for tag in event.event.tags)
    assert {suid for _, suid in installed} == committed
    # Consistent: an independent fold over the published log.
    per_course: Counter[str] = Counter()
    per_student: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    names: Counter[str] = Counter()
    for event in pipe.events:
        body = json.loads(event.event.payload)
        if event.event.event_type == "NameClaimed":
            names[body["name"]] += 1
            continue
        per_course[body["course"]] += 1
        per_student[body["student"]] += 1
        pairs[body["student"], body["course"]] += 1
    assert max(per_course.values(), default=0) <= CAPACITY
    assert max(per_student.values(), default=0) <= STUDENT_LIMIT
    assert max(pairs.values(), default=0) <= 1
    assert max(names.values(), default=0) <= 1  # no name claimed twice (one-phase attempts)
    outcomes = Counter(pipe.results[a.attempt_id][0].outcome for a in submitted)
    note_event(f"committed={min(outcomes['COMMITTED'], 5)}")
    note_event(f"rejected={min(outcomes['REJECTED'], 5)}")
    # Certificates: monotone (checked as they came) and the last one covers every event.
    if pipe.events:
        assert pipe.certificates[-1].closed_prefix_suid is not None
        assert all(e.suid <= pipe.certificates[-1].closed_prefix_suid for e in pipe.events)
