"""Course subscriptions: courses with a capacity, students with a limit of courses.

Each subscription is one DCB command: read the events of the course and of the student,
decide, and append ``StudentSubscribed`` tagged with both, on the condition that no event
matching what was read has appeared since. A condition failure means another student got
there first: read again and decide again.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streams.errors import AppendConditionFailed, ReservationExpiredError
from streams.model.records import AppendCondition, EventData, QueryItem
from streams.sdk import DcbClient, SequencedEvent

MAX_RETRIES = 20


def new_event(event_type: str, body: dict[str, str], *tags: str) -> EventData:
    return EventData(
        event_id=str(uuid.uuid4()),
        event_type=event_type,
        payload=json.dumps(body, sort_keys=True),
        tags=list(tags),
        timestamp=datetime.now(UTC),
    )


@dataclass
class Outcome:
    student: str
    course: str
    subscribed: bool
    reason: str
    retries: int
    position: str | None = None


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def committed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.subscribed]

    @property
    def refused(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.subscribed]


def decision_query(student: str, course: str) -> list[QueryItem]:
    return [
        QueryItem(types=["CourseDefined", "StudentSubscribed"], tags=[f"course:{course}"]),
        QueryItem(types=["StudentSubscribed"], tags=[f"student:{student}"]),
    ]


def decide(
    student: str, course: str, seen: list[SequencedEvent], capacity_of: dict[str, int], limit: int
) -> str | None:
    """Why the subscription is refused, or ``None`` when it may go ahead."""
    bodies = [(e.event.event_type, json.loads(e.event.payload)) for e in seen]
    if not any(t == "CourseDefined" and b["course"] == course for t, b in bodies):
        return f"course {course} does not exist"
    subs = [b for t, b in bodies if t == "StudentSubscribed"]
    in_course = sum(b["course"] == course for b in subs)
    if any(b["course"] == course and b["student"] == student for b in subs):
        return f"{student} is already in {course}"
    if in_course >= capacity_of[course]:
        return f"course {course} is full ({in_course}/{capacity_of[course]})"
    of_student = sum(b["student"] == student for b in subs)
    if of_student >= limit:
        return f"{student} already has {of_student} courses (limit {limit})"
    return None


def subscribe(
    client: DcbClient, student: str, course: str, capacity_of: dict[str, int], limit: int
) -> Outcome:
    for retries in range(MAX_RETRIES):
        query = decision_query(student, course)
        seen = client.read(query)
        refusal = decide(student, course, seen, capacity_of, limit)
        if refusal is not None:
            return Outcome(student, course, False, refusal, retries)
        event = new_event(
            "StudentSubscribed",
            {"student": student, "course": course},
            f"course:{course}",
            f"student:{student}",
        )
        after = seen[-1].position if seen else None
        try:
            result = client.append(
                [event], AppendCondition(fail_if_events_match=query, after=after)
            )
        except (AppendConditionFailed, ReservationExpiredError):
            continue  # someone got there first, or the attempt was fenced: decide again
        return Outcome(student, course, True, "subscribed", retries, result.suids[0])
    return Outcome(student, course, False, "gave up after repeated conflicts", MAX_RETRIES)


def define_courses(client: DcbClient, capacity_of: dict[str, int]) -> None:
    for course, capacity in capacity_of.items():
        body = {"course": course, "capacity": str(capacity)}
        for attempt in range(MAX_RETRIES):
            try:
                client.append([new_event("CourseDefined", body, f"course:{course}")])
                break
            except ReservationExpiredError:  # fenced while the worker was still starting
                if attempt == MAX_RETRIES - 1:
                    raise


def run_subscriptions(
    client: DcbClient,
    wishes: list[tuple[str, str]],
    capacity_of: dict[str, int],
    limit: int,
    writers: int,
    progress: Callable[[Outcome], None],
) -> Report:
    report = Report()
    lock = threading.Lock()

    def one(wish: tuple[str, str]) -> None:
        outcome = subscribe(client, wish[0], wish[1], capacity_of, limit)
        with lock:
            report.outcomes.append(outcome)
        progress(outcome)

    with ThreadPoolExecutor(max_workers=writers) as pool:
        list(pool.map(one, wishes))
    return report


def fold(events: list[SequencedEvent]) -> tuple[Counter[str], Counter[str]]:
    """Seats taken per course and courses per student, from the whole log."""
    per_course: Counter[str] = Counter()
    per_student: Counter[str] = Counter()
    for e in events:
        if e.event.event_type == "StudentSubscribed":
            body = json.loads(e.event.payload)
            per_course[body["course"]] += 1
            per_student[body["student"]] += 1
    return per_course, per_student
