"""The commit protocol in memory: ledger and tag partitions exchanging batches in any order.

Hypothesis drives concurrent writers of the DCB course-subscription example (two tags per
event, sometimes a second event per attempt), of unique user names (one tag) and of
writers on an older epoch, through one ledger and the tag partitions of a placement
(every tag in one partition: every commit one-phase; or tags spread over three: the
two-phase path for attempts that span them). Steps take batches; deliveries are
redelivered, lost, held back and handed on late; a step may crash before its commit (its
outputs vanish, its processor restarts from what was stored, its inputs come again); the
reconciler runs. An independent fold over the published events then checks the
invariants: capacity and student limits never exceeded (DCB consistency), every event
in all its tags or none (atomic), each attempt answered once, SUIDs and certificates
monotone, nothing left unresolved once the reconciler has run. Processors keep their
state only as they store it: after every committed step the stored rows must join back
into the live state.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_event
from hypothesis import strategies as st

from streams.errors import DcbError
from streams.ledger.ledger import IssuanceLedger, Step
from streams.ledger.state import CompletedAttempt, LedgerState
from streams.ledger.store import restore, writes_for
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
from streams.tags import one_phase
from streams.tags import store as tag_store
from streams.tags.table import TagTable, TagTableState
from tests.ledger_steps import merge

CAPACITY = 2
STUDENT_LIMIT = 2
COURSES = ["c1", "c2", "c3"]
STUDENTS = ["s1", "s2", "s3", "s4"]
NAMES = ["ann", "bob"]
GRACE_MS = 1_000
CURRENT_EPOCH = 1

PLACEMENTS: dict[str, Callable[[str], int]] = {
    "service": lambda tag: 0,
    "tag": lambda tag: sum(tag.encode()) % 3,
}


def tag_answers(
    tables: Callable[[TagDelivery], TagTable], items: Sequence[TagDelivery]
) -> list[TagResolution]:
    """A tag partition's step over ``items`` (a one-phase attempt's PREPAREs together); an
    item the protocol refuses is dead-lettered (left out), as the processor does."""
    answers: list[TagResolution] = []
    for indexes in one_phase.steps(items):
        group = [items[i] for i in indexes]
        try:
            if one_phase.is_one_phase(group[0]):
                answers += one_phase.decide_together([(tables(d), d) for d in group])
            else:
                answers.append(tables(group[0]).handle(group[0]))
        except DcbError:
            continue
    return answers


class Pipeline:
    """The processors' cores wired by in-memory queues instead of topics."""

    def __init__(self, placement: str, batch: int) -> None:
        self.partition_of = PLACEMENTS[placement]
        self.batch = batch
        self.clock = datetime(2026, 12, 3, tzinfo=UTC)
        self.ledger = self._ledger(LedgerState(service_id="svc", allocator_lineage_id="lin-1"))
        self.header: bytes | None = None  # the ledger's stored rows
        self.inflight: dict[str, bytes] = {}
        self.completed: dict[str, CompletedAttempt] = {}
        self.inbox: deque[CommitAttempt | TagResolution] = deque()  # commands + resolutions
        # per tag partition, its records: one per ledger step, the items of its batch
        self.deliveries: dict[int, deque[list[TagDelivery]]] = defaultdict(deque)
        self.held: list[tuple[int, list[TagDelivery]]] = []  # held back, to come late
        self.tables: dict[str, TagTable] = {}  # live tag tables
        self.tag_headers: dict[str, bytes] = {}  # their stored rows
        self.installed_rows: dict[str, bytes] = {}
        self.results: dict[str, list[CommitResult]] = defaultdict(list)
        self.events: list[CommittedEvent] = []
        self.certificates: list[Certificate] = []
        self.allocated: list[str] = []
        self.trace: list[tuple[datetime, LedgerInput]] = []  # every committed ledger input
        self.epochs: dict[str, int] = {}  # attempt -> its writer epoch, as allocated
        self.allocated_epochs: list[tuple[str, int]] = []

    def _ledger(self, state: LedgerState) -> IssuanceLedger:
        return IssuanceLedger(state, grace_ms=GRACE_MS, partition_of=self.partition_of)

    def tick(self, ms: int = 1) -> datetime:
        self.clock += timedelta(milliseconds=ms)
        return self.clock

    # --- the ledger -------------------------------------------------------------------

    def ledger_step(self, run: Callable[[IssuanceLedger, datetime], Step], crash: bool) -> None:
        """One ledger step: ``run`` (the batch), publish, store; or crash before the commit."""
        now = self.tick()
        before = set(self.ledger.state.attempts)
        step = run(self.ledger, now)
        published = self.ledger.publish(now)
        if crash:  # nothing of the step is visible; the ledger restarts from its rows
            self.ledger = self._ledger(self._restored())
            return
        for part in (step, published):
            self.absorb(part)
        writes = writes_for(self.ledger.state, None, before)
        self.inflight.update(writes.attempts)
        for key in writes.removed:
            del self.inflight[key]
        self.header = writes.header
        assert self._restored().model_dump() == self.ledger.state.model_dump()

    def _restored(self) -> LedgerState:
        if self.header is None:
            return LedgerState(service_id="svc", allocator_lineage_id="lin-1")
        return restore(self.header, self.inflight.get)

    def ledger_batch(self, crash: bool = False) -> None:
        inputs = [self.inbox[i] for i in range(min(self.batch, len(self.inbox)))]

        def run(ledger: IssuanceLedger, now: datetime) -> Step:
            total = Step()
            for item in inputs:
                merge(total, ledger_input(ledger, item, now, self.completed))
                if not crash:
                    self.trace.append((now, item))
            return total

        self.ledger_step(run, crash)
        if not crash:
            for _ in inputs:
                self.inbox.popleft()

    def reconcile(self, skip_grace: bool) -> None:
        self.tick(GRACE_MS // 2)
        mark = Reconcile(skip_grace)

        def run(ledger: IssuanceLedger, now: datetime) -> Step:
            self.trace.append((now, mark))
            return ledger_input(ledger, mark, now, self.completed)

        self.ledger_step(run, crash=False)

    def absorb(self, step: Step) -> None:
        for allocation in step.allocations:
            self.allocated += [c.suid for c in allocation.candidates]
            self.epochs[allocation.attempt_id] = allocation.writer_epoch
            self.allocated_epochs += [
                (c.suid, allocation.writer_epoch) for c in allocation.candidates
            ]
        records: dict[int, list[TagDelivery]] = {}
        for delivery in step.deliveries:
            records.setdefault(self.partition_of(delivery.tag), []).append(delivery)
        for partition, items in records.items():
            self.deliveries[partition].append(items)
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

    # --- the tag partitions -----------------------------------------------------------

    def stored_table(self, tag: str) -> TagTable:
        header = self.tag_headers.get(tag)
        if header is None:
            return TagTable(TagTableState(service_id="svc", tag=tag))
        return TagTable(tag_store.restore(tag, header, self.installed_rows.get))

    def table(self, delivery: TagDelivery) -> TagTable:
        if delivery.tag not in self.tables:
            self.tables[delivery.tag] = self.stored_table(delivery.tag)
        return self.tables[delivery.tag]

    def tag_batch(self, partition: int, redeliver: bool = False, crash: bool = False) -> None:
        queue = self.deliveries[partition]
        records = [queue[i] for i in range(min(self.batch, len(queue)))]
        answers = tag_answers(self.table, [item for record in records for item in record])
        if crash:  # the partition restarts from its stored rows; the records come again
            self.tables = {}
            return
        if not redeliver:
            for _ in records:
                queue.popleft()
        self.inbox.extend(answers)
        for tag, table in self.tables.items():
            stored = tag_store.rows_stored(self.tag_headers.get(tag))
            writes = tag_store.writes_for(table.state, tag, stored)
            self.installed_rows.update(writes.installed)
            self.tag_headers[tag] = writes.header
            assert tag_store.restore(tag, writes.header, self.installed_rows.get) == table.state
        self.tables = {}  # the next step sees only what joins back from storage

    def busy(self) -> list[int]:
        return sorted(p for p, queue in self.deliveries.items() if queue)

    def drain(self) -> None:
        for _ in range(60):
            for partition, delivery in self.held:
                self.deliveries[partition].append(delivery)
            self.held = []
            while self.busy() or self.inbox:
                for partition in self.busy():
                    self.tag_batch(partition)
                while self.inbox:
                    self.ledger_batch()
            if not self.ledger.state.attempts:
                return
            self.reconcile(skip_grace=True)
        raise AssertionError("the pipeline did not settle")


@dataclass(frozen=True)
class Reconcile:
    skip_grace: bool


LedgerInput = CommitAttempt | TagResolution | Reconcile


def ledger_input(
    ledger: IssuanceLedger,
    item: LedgerInput,
    now: datetime,
    completed: dict[str, CompletedAttempt],
) -> Step:
    """One input of a ledger step, as the processor runs it (a refused one: dead-lettered)."""
    try:
        if isinstance(item, CommitAttempt):
            return ledger.register(item, now, completed.get(item.attempt_id))
        if isinstance(item, Reconcile):
            return ledger.reconcile(now, item.skip_grace)
        return ledger.apply_resolution(item, now)
    except DcbError:
        return Step()


class Writer:
    """One student's subscription command: read the certified events, decide, append."""

    ids = itertools.count()

    def __init__(self, student: str, course: str, epoch: int = CURRENT_EPOCH) -> None:
        self.student, self.course, self.epoch = student, course, epoch
        self.attempt: CommitAttempt | None = None
        self.done = False

    def read_decide_append(self, pipe: Pipeline, note: bool) -> CommitAttempt | None:
        query = [
            QueryItem(types=["StudentSubscribed"], tags=[f"course:{self.course}"]),
            QueryItem(types=["StudentSubscribed"], tags=[f"student:{self.student}"]),
        ]
        seen = [e for e in pipe.events if any(set(q.tags) <= set(e.event.tags) for q in query)]
        seen = [e for e in seen if e.event.event_type == "StudentSubscribed"]
        in_course = sum(f"course:{self.course}" in e.event.tags for e in seen)
        of_student = sum(f"student:{self.student}" in e.event.tags for e in seen)
        mine = {f"course:{self.course}", f"student:{self.student}"}
        already = any(mine <= set(e.event.tags) for e in seen)
        if in_course >= CAPACITY or of_student >= STUDENT_LIMIT or already:
            self.done = True
            return None
        body = {"student": self.student, "course": self.course}
        events = [self.event(pipe, "StudentSubscribed", body, sorted(mine))]
        if note:  # a second event in the same attempt: all of it commits, or none
            events.append(self.event(pipe, "NoteTaken", body, [f"student:{self.student}"]))
        return self.append(pipe, events, query)

    def event(self, pipe: Pipeline, kind: str, body: dict[str, str], tags: list[str]) -> EventData:
        n = next(self.ids)
        return EventData(
            event_id=f"ev-{n}", event_type=kind, payload=json.dumps(body), tags=tags,
            timestamp=pipe.clock,
        )  # fmt: skip

    def append(self, pipe: Pipeline, events: list[EventData], query: Any) -> CommitAttempt:
        """``events``, guarded by ``query`` after the newest certificate this writer read."""
        after = pipe.certificates[-1].closed_prefix_suid if pipe.certificates else None
        self.attempt = CommitAttempt(
            attempt_id=f"attempt-{next(self.ids)}",
            writer_epoch=self.epoch,
            events=events,
            condition=AppendCondition(fail_if_events_match=query, after=after),
        )
        return self.attempt

    def answered(self, pipe: Pipeline) -> None:
        if self.attempt is None or not pipe.results.get(self.attempt.attempt_id):
            return
        result = pipe.results[self.attempt.attempt_id][0]
        stale = result.error is not None and result.error.code == "stale_fence"
        self.attempt = None
        self.done = result.outcome == "COMMITTED" or stale


class NameClaim(Writer):
    """A single-tag attempt (one target: one phase whatever the placement)."""

    def __init__(self, name: str) -> None:
        super().__init__(student="", course="")
        self.name = name

    def read_decide_append(self, pipe: Pipeline, note: bool) -> CommitAttempt | None:
        tag = f"username:{self.name}"
        if any(tag in e.event.tags for e in pipe.events):
            self.done = True
            return None
        event = self.event(pipe, "NameClaimed", {"name": self.name}, [tag])
        return self.append(pipe, [event], [QueryItem(tags=[tag])])


def drive(
    pipe: Pipeline, writers: list[Writer], script: list[tuple[str, int]]
) -> list[CommitAttempt]:
    """Run ``script``, then let every writer go on until it is done; the attempts sent."""
    notes = {id(w): i % 3 == 0 for i, w in enumerate(writers)}
    submitted: list[CommitAttempt] = []

    def submit(writer: Writer) -> None:
        attempt = writer.read_decide_append(pipe, notes[id(writer)])
        if attempt is not None:
            submitted.append(attempt)
            pipe.inbox.append(attempt)

    for action, pick in script:
        for writer in writers:
            writer.answered(pipe)
        idle = [w for w in writers if not w.done and w.attempt is None]
        busy = pipe.busy()
        partition = busy[pick % len(busy)] if busy else None
        if action == "write" and idle:
            submit(idle[pick % len(idle)])
        elif action in ("ledger", "crash-ledger") and pipe.inbox:
            pipe.ledger_batch(crash=action == "crash-ledger")
        elif action in ("tags", "redeliver", "crash-tags") and partition is not None:
            pipe.tag_batch(partition, action == "redeliver", action == "crash-tags")
        elif action == "lose" and partition is not None:
            pipe.deliveries[partition].popleft()
        elif action == "hold" and partition is not None:
            pipe.held.append((partition, pipe.deliveries[partition].popleft()))
        elif action == "late" and pipe.held:
            partition, record = pipe.held.pop(pick % len(pipe.held))
            pipe.deliveries[partition].append(record)
        elif action == "reconcile":
            pipe.reconcile(skip_grace=pick % 4 == 0)
    for _ in range(40):  # then every writer goes on concurrently until it is done
        pipe.drain()
        for writer in writers:
            writer.answered(pipe)
        idle = [w for w in writers if not w.done and w.attempt is None]
        if not idle:
            break
        for writer in idle:
            submit(writer)
    return submitted


ACTIONS = [
    "write", "ledger", "tags", "redeliver", "lose", "hold", "late", "crash-ledger",
    "crash-tags", "reconcile",
]  # fmt: skip
actions = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 1000)), max_size=300)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(PLACEMENTS)),
    st.integers(1, 4),
    st.lists(
        st.tuples(st.sampled_from(STUDENTS), st.sampled_from(COURSES), st.booleans()),
        min_size=1,
        max_size=10,
    ),
    st.lists(st.sampled_from(NAMES), max_size=4),
    actions,
)
def test_concurrent_subscriptions_keep_every_invariant(
    placement: str,
    batch: int,
    wishes: list[tuple[str, str, bool]],
    claims: list[str],
    script: list[tuple[str, int]],
) -> None:
    pipe = Pipeline(placement, batch)
    writers: list[Writer] = [
        Writer(student, course, epoch=0 if stale else CURRENT_EPOCH)
        for student, course, stale in wishes
    ]
    writers += [NameClaim(name) for name in claims]
    submitted = drive(pipe, writers, script)
    assert all(w.done for w in writers)
    if submitted:  # a replayed attempt is answered the same way, with the same SUIDs
        again = submitted[len(submitted) // 2]
        first = pipe.results[again.attempt_id][0]
        pipe.inbox.append(again)
        pipe.drain()
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
            assert len(result.suids) == len(attempt.events)
        else:
            assert attempt.attempt_id not in published
            assert result.error is not None and result.error.code
    # Fenced means fenced: once the ledger issued SUIDs to the current epoch, an older
    # epoch got none, so no event of an older epoch lies above the first of them.
    first_current = min(
        (suid for suid, epoch in pipe.allocated_epochs if epoch == CURRENT_EPOCH), default=None
    )
    for event in pipe.events:
        if pipe.epochs[event.attempt_id] < CURRENT_EPOCH and first_current is not None:
            assert event.suid < first_current
    # Settled: nothing unresolved, the prefix reached the watermark.
    assert state.unresolved == {} and state.unresolved_count == 0
    assert state.closed_prefix == state.watermark
    # Atomic: a committed event is installed in every tag it carries; a fenced one in none.
    tables = {tag: pipe.stored_table(tag) for tag in pipe.tag_headers}
    installed = {(tag, e.suid) for tag, t in tables.items() for e in t.state.installed}
    committed = {e.suid for e in pipe.events}
    for event in pipe.events:
        assert all((tag, event.suid) in installed for tag in event.event.tags)
    assert {suid for _, suid in installed} == committed
    # Nothing holds a tag once settled: a late delivery of a settled, fenced target (its
    # tombstone dropped once a later delivery said the prefix passed it) reserved nothing.
    assert all(t.state.reservations == {} for t in tables.values())
    note_event(f"tombstones kept={min(sum(len(t.state.tombstones) for t in tables.values()), 3)}")
    # Consistent: an independent fold over the published log.
    per_course: Counter[str] = Counter()
    per_student: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    names: Counter[str] = Counter()
    for event in pipe.events:
        body = json.loads(event.event.payload)
        if event.event.event_type == "NameClaimed":
            names[body["name"]] += 1
        elif event.event.event_type == "StudentSubscribed":
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


def replay(
    trace: list[tuple[datetime, LedgerInput]], placement: str, per_input: bool
) -> tuple[LedgerState, list[CommittedEvent], set[tuple[str, str, tuple[str, ...], str]]]:
    """The ledger inputs of a run again, through a fresh ledger: all in one batch, or one
    batch per input (publish after each)."""
    ledger = IssuanceLedger(
        LedgerState(service_id="svc", allocator_lineage_id="lin-1"), GRACE_MS,
        PLACEMENTS[placement],
    )  # fmt: skip
    completed: dict[str, CompletedAttempt] = {}
    events: list[CommittedEvent] = []
    answers: set[tuple[str, str, tuple[str, ...], str]] = set()

    def publish(now: datetime, step: Step) -> None:
        merge(step, ledger.publish(now))
        events.extend(step.events)
        completed.update({done.attempt_id: done for done in step.completed})
        for r in step.results:
            answers.add((r.attempt_id, r.outcome, tuple(r.suids), r.error.code if r.error else ""))

    total = Step()
    for now, item in trace:
        step = ledger_input(ledger, item, now, completed)
        if per_input:
            publish(now, step)
        else:
            merge(total, step)
    if not per_input and trace:
        publish(trace[-1][0], total)
    return ledger.state, events, answers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(PLACEMENTS)),
    st.lists(
        st.tuples(st.sampled_from(STUDENTS), st.sampled_from(COURSES), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    actions,
)
def test_a_ledger_batch_comes_out_as_its_inputs_one_at_a_time(
    placement: str, wishes: list[tuple[str, str, bool]], script: list[tuple[str, int]]
) -> None:
    """Invariant 8 at the ledger: the inputs of a run in one batch give the same state, the
    same events in the same order and the same answers as one batch per input."""
    pipe = Pipeline(placement, batch=3)
    writers = [Writer(student, course) for student, course, _ in wishes]
    drive(pipe, writers, script)
    one_state, one_events, one_answers = replay(pipe.trace, placement, per_input=False)
    each_state, each_events, each_answers = replay(pipe.trace, placement, per_input=True)
    assert one_state.model_dump() == each_state.model_dump()
    assert [e.suid for e in one_events] == [e.suid for e in each_events]
    assert one_events == each_events
    assert one_answers == each_answers
    note_event(f"inputs={min(len(pipe.trace) // 10 * 10, 50)}")
