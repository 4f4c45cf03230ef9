"""Kafka's exactly-once v2 (KIP-447) for aiokafka: one transaction per process, fenced
by the consumer group rather than by a transactional id per source partition.

With a transactional id per source partition (exactly-once v1, faust's way) the next
owner of a partition fences the last one by starting a producer with the same id; every
source partition then pays its own transaction in every commit round — its own produce
requests, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, and commit markers — which is
where most of the broker's and the worker's time went (``dcb bench scale``). One id per
process needs the other fence of KIP-447, which aiokafka 0.14 does not speak:

- **TxnOffsetCommit v3** carries the group generation and member id the offsets were
  consumed under. A process that lost its partitions in a rebalance (a zombie) is
  answered ILLEGAL_GENERATION, so its transaction cannot commit their offsets and must
  abort. aiokafka sends v0, which the group coordinator accepts from anyone.
- **OffsetFetch v7 with require_stable**: the new owner of a partition waits until no
  transaction holds offsets for it that are not yet committed or aborted (a zombie's
  commit accepted just before the rebalance), before it restores tables or reads
  the committed offsets (:func:`wait_for_stable_offsets`).

A commit under a reset generation (aiokafka forgets it when the coordinator says the
member is unknown) would be accepted unfenced, so it is refused here.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from aiokafka import AIOKafkaProducer
from aiokafka.client import CoordinationType
from aiokafka.errors import KafkaError
from aiokafka.producer.sender import Sender, TxnOffsetCommitHandler
from aiokafka.producer.transaction_manager import TransactionState
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)
from aiokafka.structs import TopicPartition

from streams.errors import GroupFencedError

ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88
FENCING_ERRORS = {
    ILLEGAL_GENERATION: "illegal generation",
    UNKNOWN_MEMBER_ID: "unknown member id",
    FENCED_INSTANCE_ID: "fenced instance id",
}
# Coordinator moves or loads: the request is sent again after a back-off.
RETRIABLE_GROUP_ERRORS = {
    7: "request timed out",
    14: "coordinator loading",
    15: "coordinator not available",
    16: "not coordinator",
}
STABLE_POLL_S = 0.05


@dataclass(frozen=True)
class GroupMetadata:
    """Who consumed the offsets a transaction commits: the group, and the generation and
    member id the coordinator gave this process when it assigned their partitions."""

    group_id: str
    generation_id: int
    member_id: str

    def checked(self) -> GroupMetadata:
        """This metadata, if it can fence: a reset generation commits unfenced."""
        if self.generation_id < 0 or not self.member_id:
            raise GroupFencedError(
                f"not a member of group {self.group_id!r} (generation {self.generation_id}):"
                " its offsets are not this process's to commit"
            )
        return self


def _tagged(*fields: tuple[str, Any]) -> CompactArray:
    return CompactArray(*fields, ("tags", TaggedFields))


class TxnOffsetCommitResponse_v3(Response):  # type: ignore[misc]
    API_KEY = 28
    API_VERSION = 3
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "errors",
            _tagged(
                ("topic", CompactString("utf-8")),
                ("partition_errors", _tagged(("partition", Int32), ("error_code", Int16))),
            ),
        ),
        ("tags", TaggedFields),
    )


class TxnOffsetCommitRequest_v3(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 28
    API_VERSION = 3
    RESPONSE_TYPE = TxnOffsetCommitResponse_v3
    SCHEMA = Schema(
        ("transactional_id", CompactString("utf-8")),
        ("group_id", CompactString("utf-8")),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("generation_id", Int32),
        ("member_id", CompactString("utf-8")),
        ("group_instance_id", CompactString("utf-8")),
        (
            "topics",
            _tagged(
                ("topic", CompactString("utf-8")),
                (
                    "partitions",
                    _tagged(
                        ("partition", Int32),
                        ("offset", Int64),
                        ("leader_epoch", Int32),
                        ("metadata", CompactString("utf-8")),
                    ),
                ),
            ),
        ),
        ("tags", TaggedFields),
    )


class FencedTxnOffsetCommitRequest(Request[TxnOffsetCommitRequest_v3]):  # type: ignore[misc]
    """TxnOffsetCommit at v3 only: a broker without it must not get an unfenced v0."""

    API_KEY = 28

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, Any],
    ) -> None:
        self._fields = (transactional_id, group.group_id, producer_id, producer_epoch)
        self._group = group
        by_topic: dict[str, list[tuple[Any, ...]]] = collections.defaultdict(list)
        for tp, committed in sorted(offsets.items()):
            by_topic[tp.topic].append((tp.partition, committed.offset, -1, committed.metadata, {}))
        self._topics: list[tuple[Any, ...]] = [
            (topic, parts, {}) for topic, parts in by_topic.items()
        ]

    def build(
        self, request_struct_class: type[TxnOffsetCommitRequest_v3]
    ) -> TxnOffsetCommitRequest_v3:
        group = self._group
        return request_struct_class(
            *self._fields, group.generation_id, group.member_id, None, self._topics, {}
        )


class FencedTxnOffsetCommitHandler(TxnOffsetCommitHandler):  # type: ignore[misc]
    """aiokafka's handler, sending v3; being fenced by the group aborts the transaction."""

    def __init__(self, sender: Any, offsets: Mapping[TopicPartition, Any], group: GroupMetadata):
        super().__init__(sender, offsets, group.group_id)
        self._group = group

    def create_request(self) -> FencedTxnOffsetCommitRequest:
        txn_manager = self._sender._txn_manager
        return FencedTxnOffsetCommitRequest(
            txn_manager.transactional_id,
            txn_manager.producer_id,
            txn_manager.producer_epoch,
            self._group,
            self._offsets,
        )

    def handle_response(self, resp: Any) -> float | None:
        for topic, partitions, _ in resp.errors:
            for partition, error_code, _ in partitions:
                if error_code in FENCING_ERRORS:
                    reason = f"{FENCING_ERRORS[error_code]} ({self._group})"
                    fail_offsets(
                        self._sender._txn_manager,
                        GroupFencedError(f"offsets of {topic}[{partition}] refused: {reason}"),
                    )
                    return None
        as_v0 = _V0Answer([(t, [(p, e) for p, e, _ in parts]) for t, parts, _ in resp.errors])
        return cast(float | None, super().handle_response(as_v0))


def fail_offsets(txn_manager: Any, exc: BaseException) -> None:
    """Fail the transaction's offset commit; the transaction may then only abort.

    Not aiokafka's ``error_transaction``: it forgets the partitions the transaction
    wrote to, and an abort of a transaction without partitions never reaches the
    broker: the writes stayed in the open transaction, and the producer's next commit
    made them visible (seen in ``test_group_fencing.py``).
    """
    _, _, pending = txn_manager._pending_txn_offsets.popleft()
    pending.set_exception(exc)
    txn_manager._transition_to(TransactionState.ABORTABLE_ERROR)
    waiter = txn_manager._transaction_waiter
    waiter.set_exception(exc)
    waiter.exception()  # raised to a commit; not logged as never retrieved


@dataclass
class _V0Answer:
    """A v3 answer in the shape aiokafka's v0 handler reads."""

    errors: list[tuple[str, list[tuple[int, int]]]]


class _GroupKey(str):
    """The group id as aiokafka checks it and sends it in AddOffsetsToTxn, carrying the
    generation and member id on to the TxnOffsetCommit."""

    group: GroupMetadata

    def __new__(cls, group: GroupMetadata) -> _GroupKey:
        key = super().__new__(cls, group.group_id)
        key.group = group
        return key


class GroupFencedSender(Sender):  # type: ignore[misc]
    async def _do_txn_offset_commit(self, offsets: Any, group_id: Any) -> None:
        if not offsets:
            return
        if not isinstance(group_id, _GroupKey):  # never an unfenced commit
            fail_offsets(
                self._txn_manager,
                GroupFencedError("offsets commit in a transaction only with group metadata"),
            )
            return
        node_id = await self._find_coordinator(CoordinationType.GROUP, str(group_id))
        await FencedTxnOffsetCommitHandler(self, offsets, group_id.group).do(node_id)


class GroupFencedProducer(AIOKafkaProducer):  # type: ignore[misc]
    """A transactional producer whose offsets commit only under the group's generation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sender.__class__ = GroupFencedSender  # made by the base; not started yet

    async def send_offsets_to_transaction(self, offsets: Any, group_id: Any) -> None:
        if not isinstance(group_id, GroupMetadata):
            raise GroupFencedError("a transaction commits offsets only with GroupMetadata")
        await super().send_offsets_to_transaction(offsets, _GroupKey(group_id.checked()))


class OffsetFetchResponse_v7(Response):  # type: ignore[misc]
    API_KEY = 9
    API_VERSION = 7
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "topics",
            _tagged(
                ("topic", CompactString("utf-8")),
                (
                    "partitions",
                    _tagged(
                        ("partition", Int32),
                        ("offset", Int64),
                        ("leader_epoch", Int32),
                        ("metadata", CompactString("utf-8")),
                        ("error_code", Int16),
                    ),
                ),
            ),
        ),
        ("error_code", Int16),
        ("tags", TaggedFields),
    )


class OffsetFetchRequest_v7(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 9
    API_VERSION = 7
    RESPONSE_TYPE = OffsetFetchResponse_v7
    SCHEMA = Schema(
        ("group_id", CompactString("utf-8")),
        ("topics", _tagged(("topic", CompactString("utf-8")), ("partitions", CompactArray(Int32)))),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


class StableOffsetFetchRequest(Request[OffsetFetchRequest_v7]):  # type: ignore[misc]
    API_KEY = 9

    def __init__(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = collections.defaultdict(list)
        for tp in sorted(partitions):
            by_topic[tp.topic].append(tp.partition)
        self._group_id = group_id
        self._topics: list[tuple[Any, ...]] = [
            (topic, parts, {}) for topic, parts in by_topic.items()
        ]

    def build(self, request_struct_class: type[OffsetFetchRequest_v7]) -> OffsetFetchRequest_v7:
        return request_struct_class(self._group_id, self._topics, True, {})


def unstable_partitions(resp: Any) -> tuple[list[TopicPartition], str | None]:
    """The partitions a v7 answer says still have offsets in an open transaction, and a
    retriable error of the whole answer, if any; other errors raise."""
    if resp.error_code in RETRIABLE_GROUP_ERRORS:
        return [], RETRIABLE_GROUP_ERRORS[resp.error_code]
    if resp.error_code:
        raise GroupFencedError(f"OffsetFetch failed with error code {resp.error_code}")
    unstable = []
    for topic, partitions, _ in resp.topics:
        for partition, _offset, _epoch, _metadata, error_code, _ in partitions:
            if error_code == UNSTABLE_OFFSET_COMMIT:
                unstable.append(TopicPartition(topic, partition))
            elif error_code in RETRIABLE_GROUP_ERRORS:
                return [], RETRIABLE_GROUP_ERRORS[error_code]
            elif error_code:
                raise GroupFencedError(
                    f"OffsetFetch of {topic}[{partition}] failed with error code {error_code}"
                )
    return unstable, None


async def wait_for_stable_offsets(
    consumer: Any, partitions: Iterable[TopicPartition], *, timeout_s: float
) -> int:
    """Wait until no transaction holds uncommitted offsets of ``partitions`` for the
    consumer's group; the number of requests it took. Runs on the consumer's loop.

    A zombie's transaction whose offsets the coordinator took before the rebalance may
    still commit; what it wrote to the tables' changelogs and the offsets it commits
    must be read by the new owner, so the new owner starts only once it has ended.
    """
    tps = sorted(partitions)
    if not tps:
        return 0
    coordinator = consumer._coordinator
    request = StableOffsetFetchRequest(coordinator.group_id, tps)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    attempt = 0
    while True:
        attempt += 1
        await coordinator.ensure_coordinator_known()
        try:
            resp = await coordinator._send_req(request)
            unstable, retriable = unstable_partitions(resp)
        except KafkaError as exc:
            if not exc.retriable:
                raise
            unstable, retriable = [], repr(exc)
        if not unstable and retriable is None:
            return attempt
        if retriable == "not coordinator":
            coordinator.coordinator_dead()
        if loop.time() > deadline:
            raise GroupFencedError(
                f"offsets of {unstable or tps} stayed in an open transaction "
                f"for {timeout_s:.0f} s ({retriable or 'unstable'})"
            )
        await asyncio.sleep(STABLE_POLL_S)
