"""Following a whole topic from the beginning, catching up to its committed end on demand."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from streams.errors import DcbError, KafkaUnavailableError
from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.kafka.end_offsets import EndOffsets
from streams.kafka.partitioner import key_partition
from streams.kafka.refusals import refusal, unreachable

_BATCH = 500  # records taken per call at most


class TailTimeoutError(DcbError):
    """The topic's committed end could not be reached in time (an open transaction?)."""

    code = "read_timeout"


class TopicTail:
    """A group-less ``read_committed`` consumer over one topic: every partition, or only
    the one a ``key`` lands in.

    A transaction ends in a marker the consumer never hands out: past the last record it
    learns it is at the end only from the next fetch, which the broker holds for
    ``fetch.wait.max.ms`` when nothing new comes. That wait is on every catch-up, so it is
    short by default (2 ms; a tail that only hands records out, never asks for the end,
    may wait longer: ``fetch_wait_ms``); to keep such a tail from asking the broker 500
    times a second while idle, an ``on_demand`` tail is paused except while it is wanted
    (:meth:`wake`, :meth:`rest`; :meth:`catch_up` wakes it for itself)."""

    def __init__(
        self,
        brokers: Brokers,
        topic: str,
        *,
        from_end: bool = False,
        key: bytes | None = None,
        on_demand: bool = False,
        start: Mapping[int, int] | None = None,
        fetch_wait_ms: int = 2,
        on_truncated: Callable[[int], None] | None = None,
    ) -> None:
        # EOF events say where the committed end is (past the last marker).
        overrides: dict[str, Any] = {
            "enable.partition.eof": True,
            "fetch.wait.max.ms": fetch_wait_ms,
        }
        # A log that dropped records not yet read says so (instead of jumping silently):
        # ``on_truncated(partition)`` is called, then reading goes on from the log start.
        self.on_truncated = on_truncated
        if on_truncated is not None:
            overrides["auto.offset.reset"] = "error"
        self.consumer = clients.consumer(brokers, group_id=f"{topic}-reader", **overrides)
        try:
            described = self.consumer.list_topics(topic, timeout=10).topics[topic]
        except KafkaException as exc:
            self.consumer.close()
            raise unreachable(brokers, exc, f"reading {topic}") from exc
        refused = refusal(described.error, f"reading {topic}")
        if refused is not None:
            self.consumer.close()
            raise refused
        partitions = sorted(described.partitions)
        if key is not None:
            partitions = [key_partition(key, len(partitions))]
        self.topic = topic
        self.partitions = partitions
        self.end_offsets = EndOffsets(brokers)
        # How far each partition has been read (records, transaction markers and all).
        self.read_to = {p: (start or {}).get(p, 0) for p in partitions}
        if from_end:  # pin the start now, so nothing produced after this call is missed
            self.read_to = self.committed_ends()
        self.on_demand = on_demand
        # An on-demand tail is assigned at its first wake: a partition assigned, paused,
        # then resumed and sought to the offset it was assigned at waited ~1 s for its
        # first fetch (a fresh client's first read of 5,000 events: 1.0 s, not 0.03 s).
        self._assigned = not on_demand
        if self._assigned:
            self._assign()

    def _assign(self) -> None:
        self.consumer.assign(
            [TopicPartition(self.topic, p, self._position(p)) for p in self.partitions]
        )

    def _position(self, partition: int) -> int:
        """Where to read ``partition`` from: where it was read to; at the start, offset 0
        itself when a dropped prefix must be noticed (``OFFSET_BEGINNING`` would move to
        the log start without a word), else wherever the log starts."""
        offset = self.read_to[partition]
        return offset if offset or self.on_truncated is not None else OFFSET_BEGINNING

    def _all(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in self.partitions]

    def wake(self) -> None:
        """Fetch again, from where it was read to (an on-demand tail). Only the thread that
        polls the tail calls this: a seek from another thread while one polled hung here."""
        if not self.on_demand:
            return
        if not self._assigned:
            self._assign()
            self._assigned = True
            return
        self.consumer.resume(self._all())
        # A resumed partition may wait a second for its next fetch; a seek starts one.
        try:
            for partition in self.read_to:
                self.consumer.seek(TopicPartition(self.topic, partition, self._position(partition)))
        except KafkaException:
            # A partition assigned at an offset the log has since dropped accepts no seek
            # (librdkafka: erroneous state): assigned afresh (a pause outlives that), it
            # fetches and says so.
            self._assign()
            self.consumer.resume(self._all())

    def rest(self) -> None:
        """Stop fetching until :meth:`wake` (an on-demand tail)."""
        if self.on_demand and self._assigned:
            self.consumer.pause(self._all())

    def committed_ends(self) -> dict[int, int]:
        """The committed end (last stable offset) of every partition."""
        ends = self.end_offsets.latest(((self.topic, p) for p in self.partitions), committed=True)
        return {p: end for (_, p), end in ends.items()}

    def poll(self, handle: Callable[[Message], None], timeout_s: float) -> int:
        """Hand ``handle`` what is ready, waiting up to ``timeout_s`` for a first record;
        how many records it got. One call takes a batch: each call into librdkafka lets
        go of the GIL, and a thread of a busy process (a client shared by hundreds of
        writer threads) waits its turn to take it back, so a record per call lagged."""
        handled = 0
        for message in clients.take_ready(self.consumer, _BATCH, timeout_s):
            outcome = self._take(message, handle)
            if outcome is None:  # the consumer was assigned afresh: the rest comes again
                break
            handled += outcome
        return handled

    def _take(self, message: Message, handle: Callable[[Message], None]) -> int | None:
        error = message.error()
        partition, offset = message.partition() or 0, message.offset() or 0
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self.read_to[partition] = max(self.read_to[partition], offset)
                return 0
            if error.code() == KafkaError._AUTO_OFFSET_RESET and self.on_truncated is not None:
                self._resume_at_log_start(partition)
                return None
            refused = refusal(error, f"reading {self.topic}")
            if refused is not None:
                raise refused
            raise DcbError(f"reading {self.topic}: {error}")
        handle(message)  # first: a reader that sees ``read_to`` past it sees it handled
        self.read_to[partition] = max(self.read_to[partition], offset + 1)
        return 1

    def _resume_at_log_start(self, partition: int) -> None:
        assert self.on_truncated is not None
        try:
            start, _ = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=10
            )
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"the log start of {self.topic}[{partition}]: {exc}", topic=self.topic
            ) from exc
        self.on_truncated(partition)
        self.read_to[partition] = max(self.read_to[partition], start)
        # After the reset error the partition accepts no seek: assign everything afresh.
        self._assign()

    def catch_up(self, handle: Callable[[Message], None], timeout_s: float = 30.0) -> None:
        """Hand every committed record up to the end offsets seen now to ``handle``."""
        ends = self.committed_ends()
        deadline = time.monotonic() + timeout_s

        def reached() -> bool:
            return all(self.read_to[p] >= end for p, end in ends.items())

        if reached():
            return
        self.wake()
        try:
            while not reached():
                if time.monotonic() > deadline:
                    raise TailTimeoutError(f"could not catch up with {self.topic} in {timeout_s} s")
                self.poll(handle, 0.2)
        finally:
            self.rest()

    def close(self) -> None:
        self.consumer.close()
