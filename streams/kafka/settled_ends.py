"""Where a changelog restore must stop: a partition's end once no transaction is open on it.

A ``read_committed`` reader reads a partition up to its last stable offset (LSO), the
first record of the earliest transaction still open there; a restore that asks for the
end then stops at that record. When a committed record lies beyond it, the restored
table misses a write whose outputs were committed. Two ways that happens:

- **Markers land one partition at a time.** A transaction's commit markers are written
  per partition; when the ``__consumer_offsets`` marker lands first, the new owner of
  the partitions sees stable offsets (``group_fencing.wait_for_stable_offsets``) while a
  changelog partition still has the transaction open (milliseconds).
- **A dead worker's transaction** stays open until the broker times it out; a later
  owner's commits on the same partition come after its first record.

So the end of a restore is taken only once the partition's LSO equals its high
watermark, both read with ListOffsets. Nobody else writes an assigned changelog
partition, so an open transaction there is a departed owner's, which ends within its
timeout.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable
from typing import Any

from aiokafka.errors import KafkaError, LeaderNotAvailableError, for_code
from aiokafka.protocol.offset import OffsetRequest
from aiokafka.structs import TopicPartition

from streams.errors import TransactionStillOpenError

LATEST = -1  # ListOffsets timestamp: the end of the partition
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
SETTLE_POLL_S = 0.05


async def list_ends(
    client: Any, partitions: Iterable[TopicPartition], isolation_level: int
) -> dict[TopicPartition, int]:
    """The partitions' ends at ``isolation_level``: their high watermarks (0) or last
    stable offsets (1), one ListOffsets request (v2 or later) per partition leader."""
    by_leader: dict[int, dict[str, list[int]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for tp in partitions:
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader < 0:
            raise LeaderNotAvailableError(f"no leader for {tp}")  # retriable
        by_leader[leader][tp.topic].append(tp.partition)
    ends: dict[TopicPartition, int] = {}
    for leader, topics in by_leader.items():
        request = OffsetRequest(
            -1,
            isolation_level,
            [(topic, [(p, LATEST) for p in parts]) for topic, parts in topics.items()],
        )
        response = await client.send(leader, request)
        for topic, answers in response.topics:
            for partition, error_code, *_, offset in answers:
                if error_code:
                    raise for_code(error_code)(f"ListOffsets of {topic}[{partition}]")
                ends[TopicPartition(topic, partition)] = offset
    return ends


def open_transactions(
    committed: dict[TopicPartition, int], written: dict[TopicPartition, int]
) -> list[TopicPartition]:
    """The partitions whose last stable offset is short of their high watermark."""
    return sorted(tp for tp, end in written.items() if committed.get(tp, -1) < end)


async def settled_ends(
    client: Any, partitions: Iterable[TopicPartition], *, timeout_s: float
) -> dict[TopicPartition, int]:
    """The partitions' ends once no transaction is open on any of them.

    Runs on the loop of the aiokafka ``client``. Raises ``TransactionStillOpenError``
    when one stays open for ``timeout_s``.
    """
    tps = sorted(partitions)
    if not tps:
        return {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pending: list[TopicPartition] | str = []
    while loop.time() <= deadline:
        try:
            written = await list_ends(client, tps, READ_UNCOMMITTED)
            committed = await list_ends(client, tps, READ_COMMITTED)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            pending = repr(exc)
            client.force_metadata_update()  # a moved leader: ask the next one
        else:
            pending = open_transactions(committed, written)
            if not pending:
                return committed
        await asyncio.sleep(SETTLE_POLL_S)
    raise TransactionStillOpenError(
        f"a transaction stayed open on {pending} for {timeout_s:.0f} s",
    )
