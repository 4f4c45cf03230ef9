"""Where a commit's time goes: each hop's share, from the record timestamps on each topic.

A record's timestamp is taken when its processor produces it, before its round's
transaction commits, so each hop below includes the previous round's commit, the next
consumer's fetch and the next round's processing. A batch record's items share its
timestamp.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from datetime import datetime

from confluent_kafka import Message
from pydantic import BaseModel

from streams.bench.stats import percentile
from streams.codec import codec_from_settings
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import CommitResult, TagDeliveryBatch, TagResolutionBatch
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings

# The marks of one commit in order, per path; each hop runs from one mark to the next. A
# mark is a record about the attempt: its PREPAREs, the tags' votes (PREPARED or
# REJECTED), the ledger's decision (INSTALL or FENCE), the tags' evidence (installed, or
# absent and fenced), its answer; "sent" and "received" are the SDK call's ends. A
# one-phase attempt whose tag partition is in the ledger's process is decided in the
# ledger's round: no delivery, no evidence on the topics ("in-round").
PATHS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "two-phase": (
        ("sent", "PREPARE", "vote", "decision", "evidence", "answered", "received"),
        (
            "SDK -> ledger: command in, PREPAREs out",
            "ledger commit -> tags: PREPAREs checked, votes out",
            "tags commit -> ledger: votes in, decision out",
            "ledger commit -> tags: decision carried out, evidence out",
            "tags commit -> ledger: evidence in, events + answer out",
            "ledger commit -> SDK: answer read",
        ),
    ),
    "in-round": (
        ("sent", "answered", "received"),
        (
            "SDK -> ledger: command in, decided by its tag partition in the same round, "
            "events + answer out",
            "ledger commit -> SDK: answer read",
        ),
    ),
    "one-phase": (
        ("sent", "PREPARE", "evidence", "answered", "received"),
        (
            "SDK -> ledger: command in, one-phase PREPAREs out",
            "ledger commit -> tag partition: checked and installed together, evidence out",
            "tag commit -> ledger: evidence in, events + answer out",
            "ledger commit -> SDK: answer read",
        ),
    ),
}
MARKS = {
    "PREPARE": "PREPARE",
    "INSTALL": "decision",
    "FENCE": "decision",
    "PREPARED": "vote",
    "REJECTED": "vote",
    "INSTALLED_AND_COVERED": "evidence",
    "ABSENT_AND_IRREVOCABLY_FENCED": "evidence",
}


class Hop(BaseModel):
    name: str
    p50_ms: float
    p99_ms: float


class HopBreakdown(BaseModel):
    scenario: str
    path: str
    attempts: int
    hops: list[Hop]


def breakdown(marks: list[dict[str, float]], scenario: str) -> HopBreakdown:
    """The hops of the path most attempts took (attempts with marks of neither are left out)."""
    complete = {
        path: [m for m in marks if set(m) == set(order)] for path, (order, _) in PATHS.items()
    }
    path = max(complete, key=lambda p: len(complete[p]))
    order, names = PATHS[path]
    spans = [[m[b] - m[a] for m in complete[path]] for a, b in itertools.pairwise(order)]
    return HopBreakdown(
        scenario=scenario,
        path=path,
        attempts=len(complete[path]),
        hops=[
            Hop(name=name, p50_ms=percentile(s, 50), p99_ms=percentile(s, 99))
            for name, s in zip(names, spans, strict=True)
        ],
    )


class HopTracer:
    """Follows deliveries, resolutions and answers; the bench reports each attempt's ends."""

    def __init__(self, settings: DcbSettings) -> None:
        self.codec = codec_from_settings(settings)
        bootstrap = settings.kafka
        self.marks: dict[str, dict[str, float]] = defaultdict(dict)
        self._lock = threading.Lock()
        # A hop's ends are the records' own timestamps, so the tails need not hurry: a
        # long fetch wait (the broker answers as soon as records come) keeps three tails
        # from asking the broker 500 times a second each beside the scenario they explain.
        self._tails = [
            (
                TopicTail(
                    bootstrap, topic_name(settings.topics, role), from_end=True, fetch_wait_ms=500
                ),
                role,
            )
            for role in (
                TopicRole.TAG_DELIVERIES,
                TopicRole.TAG_RESOLUTIONS,
                TopicRole.COMMIT_RESULTS,
            )
        ]
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._follow, args=(tail, role), daemon=True)
            for tail, role in self._tails
        ]
        for thread in self._threads:
            thread.start()

    def _mark(self, attempt_id: str, mark: str, at_ms: float) -> None:
        """Keep the latest time of a mark: the slowest tag decides when a hop ends."""
        with self._lock:
            marks = self.marks[attempt_id]
            marks[mark] = max(marks.get(mark, 0.0), at_ms)

    def _follow(self, tail: TopicTail, role: TopicRole) -> None:
        def record(message: Message) -> None:
            _, at_ms = message.timestamp()
            decoded = self.codec.decode(message.value(), None).value
            if role is TopicRole.TAG_DELIVERIES:
                for delivery in TagDeliveryBatch.from_avro(decoded).items:
                    if delivery.action != "TRIM":  # archived history: no attempt's hop
                        self._mark(delivery.attempt_id, MARKS[delivery.action], at_ms)
            elif role is TopicRole.TAG_RESOLUTIONS:
                for resolution in TagResolutionBatch.from_avro(decoded).items:
                    self._mark(resolution.attempt_id, MARKS[resolution.status], at_ms)
            else:
                self._mark(CommitResult.from_avro(decoded).attempt_id, "answered", at_ms)

        while not self._closed.is_set():
            tail.poll(record, 0.1)

    def sent(self, attempt_id: str, sent: datetime, received: datetime) -> None:
        self._mark(attempt_id, "sent", sent.timestamp() * 1000)
        self._mark(attempt_id, "received", received.timestamp() * 1000)

    def breakdown(self, scenario: str) -> HopBreakdown:
        with self._lock:
            marks = list(self.marks.values())
        return breakdown(marks, scenario)

    def close(self) -> None:
        self._closed.set()
        for thread in self._threads:
            thread.join(5)
        for tail, _ in self._tails:
            tail.close()
