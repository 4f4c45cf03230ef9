"""Faults that provably land while work is in flight, and the proof that they did.

A worker writes in one transaction per round. ``kill_in_flight`` watches the topics it
writes until one has records on the broker that no transaction has committed yet (the
last stable offset below the high watermark), then SIGKILLs the worker at once. The
records of that window belong to the killed round; ``aborted`` then shows they exist
(``read_uncommitted``) and stay invisible (``read_committed``) — or that the round
committed between the look and the kill, and the test must try again.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

from streams.kafka import clients
from streams.kafka.end_offsets import EndOffsets
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.settings import DcbSettings
from tests.integration.workers import WorkerProcess

WATCHED = (TopicRole.ALLOCATIONS, TopicRole.TAG_DELIVERIES, TopicRole.TAG_RESOLUTIONS)


@dataclass(frozen=True)
class Window:
    """Records of a transaction that was open when it was looked at."""

    topic: str
    partition: int
    start: int  # the last stable offset then
    end: int  # the high watermark then


def open_window(offsets: EndOffsets, partitions: list[tuple[str, int]]) -> Window | None:
    stable = offsets.latest(partitions, committed=True)
    written = offsets.latest(partitions, committed=False)
    for (topic, partition), start in sorted(stable.items()):
        end = written[topic, partition]
        if start < end:
            return Window(topic, partition, start, end)
    return None


def kill_in_flight(
    worker: WorkerProcess, settings: DcbSettings, timeout_s: float = 60
) -> tuple[float, Window]:
    """SIGKILL ``worker`` while a round of it is open; when (monotonic), and what was open."""
    bootstrap = settings.resolved_bootstrap_servers
    admin, offsets = clients.admin(bootstrap), EndOffsets(bootstrap)
    partitions = []
    for role in WATCHED:
        topic = topic_name(settings.topics, role)
        count = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
        partitions += [(topic, p) for p in range(count)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        window = open_window(offsets, partitions)
        if window is not None:
            worker.kill()
            return time.monotonic(), window
    raise AssertionError("no open transaction seen: is the worker busy?")


def aborted(settings: DcbSettings, window: Window, timeout_s: float = 60) -> bool:
    """Whether the window's records are on the broker but were never committed (once the
    broker has ended their transaction)."""
    seen: dict[bool, int] = {}
    for committed in (False, True):
        consumer = clients.consumer(
            settings.resolved_bootstrap_servers,
            f"faults-{uuid.uuid4()}",
            read_committed=committed,
            **{"enable.partition.eof": True},
        )
        consumer.assign([TopicPartition(window.topic, window.partition, window.start)])
        count, deadline = 0, time.monotonic() + timeout_s
        try:
            while True:
                assert time.monotonic() < deadline, f"{window} never ended"
                message = consumer.poll(0.5)
                if message is None:
                    continue
                offset = message.offset() or 0
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    if offset >= window.end:
                        break
                    continue
                if offset >= window.end:
                    break
                count += 1
        finally:
            consumer.close()
        seen[committed] = count
    assert seen[False] > 0, f"no records in {window}"
    return seen[True] == 0
