"""Partitions' end offsets (ListOffsets), asked again while leaders move.

A topic created a moment ago may have no leader yet (NOT_LEADER_OR_FOLLOWER), and after a
broker restart an admin client can keep asking with a leader epoch the broker has moved
past (FENCED_LEADER_EPOCH): both pass, so every reader of end offsets asks here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from streams.errors import KafkaUnavailableError
from streams.kafka import clients
from streams.kafka.connection import Brokers
from streams.kafka.refusals import refusal

RETRY_PAUSE_S = 0.2


class EndOffsets:
    """One admin client, replaced after a refusal, answering end-offset questions."""

    def __init__(self, brokers: Brokers) -> None:
        self.brokers = brokers
        self.admin = clients.admin(brokers)

    def latest(
        self,
        partitions: Iterable[tuple[str, int]],
        *,
        committed: bool,
        timeout_s: float = 30.0,
    ) -> dict[tuple[str, int], int]:
        """Each partition's end: the last stable offset if ``committed``, else the high
        watermark (records and transaction markers, open transactions included)."""
        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for topic, p in partitions}  # type: ignore[no-untyped-call]
        if not wanted:
            return {}
        isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        deadline = time.monotonic() + timeout_s
        while True:
            futures = self.admin.list_offsets(wanted, isolation_level=isolation, request_timeout=10)
            try:
                return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
            except KafkaException as exc:
                topics = sorted({tp.topic for tp in wanted})
                refused = refusal(exc, f"the end offsets of {', '.join(topics)}")
                if refused is not None:
                    raise refused from exc
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(
                        f"no end offsets for {', '.join(topics)}: {exc}", topics=topics
                    ) from exc
                self.admin = clients.admin(self.brokers)
                time.sleep(RETRY_PAUSE_S)
