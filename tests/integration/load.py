"""The conditional workload of the crash tests: concurrent course subscriptions, tracked.

Writers run the DCB course example the way an application does (read the course's and
the student's events, decide, append under the condition, read again after a conflict),
over one or several services. Every append is recorded with its attempt id and when it
was sent and answered, so a test can show that the fault it injected landed while work
was in flight, and an oracle can compare the log with what was acknowledged.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from streams.errors import AnswerTimeoutError, AppendConditionFailed, ReservationExpiredError
from streams.model.records import AppendCondition, EventData, QueryItem
from streams.sdk import DcbClient, Query

CAPACITY = 5  # seats per course
DECISION_TIMEOUT_S = 90.0  # one writer's retries of one subscription, at most
LIMIT = 3  # courses per student


def registered(name: str, *extra_tags: str) -> EventData:
    return EventData(
        event_id=str(uuid.uuid4()),
        event_type="UserRegistered",
        payload=f'{{"name": "{name}"}}',
        tags=[f"username:{name}", *extra_tags],
        timestamp=datetime.now(UTC),
    )


def subscription(student: str, course: str) -> EventData:
    return EventData(
        event_id=str(uuid.uuid4()),
        event_type="StudentSubscribed",
        payload=json.dumps({"student": student, "course": course}),
        tags=[f"course:{course}", f"student:{student}"],
        timestamp=datetime.now(UTC),
    )


@dataclass
class Append:
    """One append call: its attempt, when it was sent and answered, and how."""

    service: str
    attempt_id: str
    event_ids: list[str]
    sent: float
    answered: float | None = None
    outcome: str = "pending"  # committed / conflict / fenced / unanswered
    suids: tuple[str, ...] = ()


class Roster:
    """An endless supply of names (courses, students) of which writers pick among the first
    ``window`` that still have room in a service: the contention of a small workload that
    never runs out of work, however fast commits go."""

    def __init__(self, prefix: str, window: int) -> None:
        self.prefix, self.window = prefix, window
        self._full: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def pick(self, service: str, rng: random.Random) -> str:
        with self._lock:
            full = self._full.setdefault(service, set())
            candidates: list[int] = []
            n = 0
            while len(candidates) < self.window:
                if n not in full:
                    candidates.append(n)
                n += 1
        return f"{self.prefix}{rng.choice(candidates)}"

    def filled(self, service: str, name: str) -> None:
        with self._lock:
            self._full.setdefault(service, set()).add(int(name.removeprefix(self.prefix)))


class Subscriptions:
    """``writers`` threads, each subscribing students to courses until it has made
    ``per_writer`` decisions or is told to :meth:`stop`, over the ``clients``' services
    (each its own courses). Writers pick among ``courses`` open courses and ``students``
    students with room: full ones give way to new ones, so the work never runs out.
    Loads over one service that must not meet each other's seats take distinct ``names``
    (a prefix of their course and student names)."""

    def __init__(
        self,
        clients: Sequence[DcbClient],
        writers: int,
        per_writer: int = 10_000,
        courses: int = 10,
        students: int = 40,
        seed: int = 7,
        names: str = "",
    ) -> None:
        self.clients = list(clients)
        self.courses = Roster(f"{names}c", courses)
        self.students = Roster(f"{names}s", students)
        self.appends: list[Append] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._write, args=(n, per_writer, seed), daemon=True)
            for n in range(writers)
        ]
        for thread in self._threads:
            thread.start()

    def _append(self, client: DcbClient, events: list[EventData], after: str | None) -> Append:
        query = self._query(events[0])
        record = Append(client.service_id, str(uuid.uuid4()), [e.event_id for e in events], 0)
        with self._lock:
            self.appends.append(record)
        record.sent = time.monotonic()
        try:
            condition = AppendCondition(fail_if_events_match=query, after=after)
            result = client.append(events, condition, attempt_id=record.attempt_id)
            record.outcome, record.suids = "committed", tuple(result.suids)
        except AppendConditionFailed:
            record.outcome = "conflict"
        except ReservationExpiredError:
            record.outcome = "fenced"
        except AnswerTimeoutError:
            record.outcome = "unanswered"
        record.answered = time.monotonic()
        return record

    @staticmethod
    def _query(event: EventData) -> Query:
        """The events the decision rests on: the course's and the student's subscriptions."""
        return Query(QueryItem(types=["StudentSubscribed"], tags=[tag]) for tag in event.tags)

    def _write(self, n: int, per_writer: int, seed: int) -> None:
        rng = random.Random(seed * 1000 + n)
        try:
            for _ in range(per_writer):
                if self._stop.is_set():
                    return
                client = rng.choice(self.clients)
                service = client.service_id
                student = self.students.pick(service, rng)
                course = self.courses.pick(service, rng)
                self._subscribe(client, student, course)
        except BaseException as exc:  # surfaced by check(): a writer must not die quietly
            self.errors.append(exc)
            raise

    def _subscribe(self, client: DcbClient, student: str, course: str) -> None:
        """Read, decide, append; again after a conflict, backing off: while partitions
        move (a worker joins or dies) a reservation of an attempt in flight can refuse
        the same tags for up to the grace window, and fifty quick tries can all meet it."""
        event = subscription(student, course)
        deadline = time.monotonic() + DECISION_TIMEOUT_S
        for attempt in itertools.count(1):
            if time.monotonic() > deadline:
                break
            seen = client.read(self._query(event))
            bodies = [json.loads(e.event.payload) for e in seen]
            in_course = sum(b["course"] == course for b in bodies)
            of_student = sum(b["student"] == student for b in bodies)
            mine = any(b == {"student": student, "course": course} for b in bodies)
            if in_course >= CAPACITY:
                self.courses.filled(client.service_id, course)
            if of_student >= LIMIT:
                self.students.filled(client.service_id, student)
            if mine or in_course >= CAPACITY or of_student >= LIMIT:
                return
            record = self._append(client, [subscription(student, course)], seen.head)
            if record.outcome in ("committed", "unanswered"):
                return
            time.sleep(min(0.01 * attempt, 0.5))
        raise AssertionError(f"{student} never got an answer for {course}")

    # --- what the tests look at ----------------------------------------------------

    def committed(self) -> list[Append]:
        with self._lock:
            return [a for a in self.appends if a.outcome == "committed"]

    def outcomes(self) -> dict[str, int]:
        """How many appends ended each way: what an assertion on them should print."""
        with self._lock:
            return dict(collections.Counter(a.outcome for a in self.appends))

    def wait_for(self, committed: int, timeout_s: float = 120) -> int:
        deadline = time.monotonic() + timeout_s
        while (n := len(self.committed())) < committed:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"only {n} of {committed} committed"
            time.sleep(0.1)
        return n

    def stop(self) -> None:
        """No writer starts another decision; those under way finish."""
        self._stop.set()

    def join(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        assert not any(t.is_alive() for t in self._threads), "writers still running"
        assert not self.errors, self.errors

    def wait_in_flight(
        self, where: Callable[[Append], bool] = lambda _: True, timeout_s: float = 30
    ) -> None:
        """Block until an append ``where`` holds is sent and not yet answered. Writers that
        share a client read and append in step (their reads share catch-ups, their answers
        rounds), so an instant with nothing in flight is common: a fault meant to land
        mid-flight goes right after this. A fault that stops one worker should wait for
        an append that worker owns: one the other worker holds can be answered while the
        fault is still being dealt."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if any(a.answered is None and where(a) for a in self.appends):
                    return
            assert time.monotonic() < deadline, "no append in flight"
            time.sleep(0.001)

    def answered_across(self, moment: float) -> list[Append]:
        """Appends sent before ``moment`` and answered after it: work in flight across it."""
        with self._lock:
            return [
                a
                for a in self.appends
                if a.sent < moment and a.answered is not None and a.answered > moment
            ]

    def committed_after(self, moment: float) -> list[Append]:
        return [a for a in self.committed() if a.answered is not None and a.answered > moment]
