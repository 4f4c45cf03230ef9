"""The DCB course-subscription workload and the oracle that checks a run's log (pure).

A writer picks a (course, student) pair, reads the events that decide it, and appends
``StudentSubscribed`` under the condition "nothing matching that query after what I
read". Courses and students are tagged per round (a round id is the
scenario's namespace and the round's number): once the round's seats are 80% taken,
fresh tags start the next round, so a long run never runs dry of "yes" decisions.

The oracle (:func:`violations`) re-derives every rule from the log alone, independently
of :func:`decide`.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from streams.bench.peers.api import Condition, Event, Query, QueryItem, Sequenced

COURSE_DEFINED = "CourseDefined"
STUDENT_SUBSCRIBED = "StudentSubscribed"


@dataclass(frozen=True)
class Workload:
    courses: int = 200
    capacity: int = 30
    students: int = 2000
    student_limit: int = 5
    round_fill: float = 0.8

    @property
    def round_quota(self) -> int:
        """Subscriptions after which the next round starts."""
        return int(self.courses * self.capacity * self.round_fill)


def course_tag(round_id: str, course: int) -> str:
    return f"course:{round_id}-{course}"


def student_tag(round_id: str, student: int) -> str:
    return f"student:{round_id}-{student}"


def course_defined(tag: str, capacity: int) -> Event:
    return Event(COURSE_DEFINED, (tag,), json.dumps({"capacity": capacity}).encode())


def subscribed(course: str, student: str) -> Event:
    return Event(STUDENT_SUBSCRIBED, (course, student), b"{}")


def decision_query(course: str, student: str) -> Query:
    return Query(
        (
            QueryItem((COURSE_DEFINED, STUDENT_SUBSCRIBED), (course,)),
            QueryItem((STUDENT_SUBSCRIBED,), (student,)),
        )
    )


class Verdict(StrEnum):
    YES = "yes"
    COURSE_UNDEFINED = "course_undefined"
    COURSE_FULL = "course_full"
    STUDENT_AT_LIMIT = "student_at_limit"
    ALREADY_SUBSCRIBED = "already_subscribed"


def decide(events: Iterable[Sequenced], course: str, student: str, w: Workload) -> Verdict:
    """May ``student`` subscribe to ``course``, given the events of :func:`decision_query`?"""
    defined = False
    seats = taken = 0
    for e in events:
        if e.event.type == COURSE_DEFINED and course in e.event.tags:
            defined = True
        elif e.event.type == STUDENT_SUBSCRIBED:
            seats += course in e.event.tags
            taken += student in e.event.tags
            if course in e.event.tags and student in e.event.tags:
                return Verdict.ALREADY_SUBSCRIBED
    if not defined:
        return Verdict.COURSE_UNDEFINED
    if seats >= w.capacity:
        return Verdict.COURSE_FULL
    if taken >= w.student_limit:
        return Verdict.STUDENT_AT_LIMIT
    return Verdict.YES


def append_condition(
    events: Sequence[Sequenced], query: Query, after: int | None = None
) -> Condition:
    """Fail if anything matching ``query`` lands after the last event the decision saw."""
    last = events[-1].position if events else after
    return Condition(query, last)


class Rounds:
    """Which round writers draw from; the writer that fills a round defines the next one."""

    def __init__(self, w: Workload) -> None:
        self.workload = w
        self.current = 0
        self._subscribed = 0
        self._lock = threading.Lock()
        self._opening = False

    def record_subscription(self) -> int | None:
        """Count one subscription; the next round's number when this caller must open it."""
        with self._lock:
            self._subscribed += 1
            if self._opening or self._subscribed < self.workload.round_quota:
                return None
            self._opening = True
            return self.current + 1

    def opened(self, round_no: int) -> None:
        with self._lock:
            self.current, self._subscribed, self._opening = round_no, 0, False


def round_definitions(round_id: str, w: Workload) -> list[Event]:
    return [course_defined(course_tag(round_id, c), w.capacity) for c in range(w.courses)]


def violations(log: Sequence[Sequenced], w: Workload) -> list[str]:
    """Every broken rule in a whole log: the bench's independent oracle."""
    found: list[str] = []
    for before, after in itertools.pairwise(log):
        if after.position <= before.position:
            found.append(f"position {after.position} does not follow {before.position}")
    defined: set[str] = set()
    per_course: Counter[str] = Counter()
    per_student: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for entry in log:
        tags = entry.event.tags
        if entry.event.type == COURSE_DEFINED:
            defined.update(t for t in tags if t.startswith("course:"))
            continue
        course = next((t for t in tags if t.startswith("course:")), None)
        student = next((t for t in tags if t.startswith("student:")), None)
        if course is None or student is None:
            found.append(f"subscription at {entry.position} lacks a course or student tag")
            continue
        if course not in defined:
            found.append(f"subscription at {entry.position} to undefined {course}")
        per_course[course] += 1
        per_student[student] += 1
        pairs[(course, student)] += 1
    found += [f"{c} holds {n} > {w.capacity}" for c, n in per_course.items() if n > w.capacity]
    found += [
        f"{s} holds {n} > {w.student_limit}" for s, n in per_student.items() if n > w.student_limit
    ]
    found += [f"{c} / {s} subscribed {n} times" for (c, s), n in pairs.items() if n > 1]
    return found
