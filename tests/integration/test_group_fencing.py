"""Exactly-once v2 on the real broker: offsets commit in a transaction only under the
group generation that assigned their partitions, and a new owner waits out a transaction
still holding them (``streams/kafka/group_fencing.py``)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streams.errors import GroupFencedError
from streams.kafka.group_fencing import (
    GroupFencedProducer,
    GroupMetadata,
    wait_for_stable_offsets,
)
from tests.integration.kafka_helpers import create_topic, read_all

pytestmark = pytest.mark.integration


async def _member(bootstrap: str, group: str, topic: str) -> AIOKafkaConsumer:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    await consumer.start()
    await _settled(consumer, after_generation=0)
    return consumer


async def _settled(consumer: AIOKafkaConsumer, *, after_generation: int) -> None:
    """Wait until the member has joined a generation later than ``after_generation`` and
    has its assignment (with one partition, one of two members gets none)."""
    coordinator = consumer._coordinator
    for _ in range(200):
        subscription = consumer._subscription.subscription
        if (
            coordinator.generation > after_generation
            and subscription is not None
            and not coordinator.need_rejoin(subscription)
        ):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the member did not settle in a new generation")


def _metadata(consumer: AIOKafkaConsumer) -> GroupMetadata:
    coordinator = consumer._coordinator
    return GroupMetadata(coordinator.group_id, coordinator.generation, coordinator.member_id)


async def _producer(bootstrap: str) -> GroupFencedProducer:
    producer = GroupFencedProducer(
        bootstrap_servers=bootstrap, transactional_id=f"fencing-{uuid.uuid4()}"
    )
    await producer.start()
    return producer


async def _commit_step(
    producer: GroupFencedProducer,
    out: str,
    value: bytes,
    tp: TopicPartition,
    offset: int,
    group: GroupMetadata,
) -> None:
    await producer.begin_transaction()
    await producer.send_and_wait(out, value)
    await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(offset, "")}, group)
    await producer.commit_transaction()


@dataclass(frozen=True)
class Topics:
    """A source topic of one partition read by ``group``, and an output topic."""

    source: str
    out: str
    group: str
    tp: TopicPartition


@pytest.fixture
def topics(bootstrap_servers: str, topic_prefix: str) -> Topics:
    source = f"{topic_prefix}in"
    create_topic(bootstrap_servers, source)
    create_topic(bootstrap_servers, f"{topic_prefix}out")
    return Topics(source, f"{topic_prefix}out", f"{topic_prefix}group", TopicPartition(source, 0))


def test_a_stale_generation_cannot_commit_offsets_and_its_outputs_stay_invisible(
    bootstrap_servers: str, topics: Topics
) -> None:
    source, out, group, tp = topics.source, topics.out, topics.group, topics.tp

    async def scenario() -> None:
        first = await _member(bootstrap_servers, group, source)
        stale = _metadata(first)
        producer = await _producer(bootstrap_servers)
        try:
            await _commit_step(producer, out, b"in generation", tp, 5, stale)
            # A second member joins: the first rejoins in a new generation, and what
            # the producer knew of the first one's is stale (a zombie's view).
            second = await _member(bootstrap_servers, group, source)
            try:
                await _settled(first, after_generation=stale.generation_id)
                fresh = _metadata(second)
                assert fresh.generation_id > stale.generation_id
                await wait_for_stable_offsets(second, [tp], timeout_s=5)
                assert await second.committed(tp) == 5
                with pytest.raises(GroupFencedError, match="illegal generation"):
                    await _commit_step(producer, out, b"zombie", tp, 9, stale)
                await producer.abort_transaction()
                await first.stop()  # gone from the group: its member id is unknown now
                await _settled(second, after_generation=fresh.generation_id)
                with pytest.raises(GroupFencedError, match="unknown member id"):
                    await _commit_step(producer, out, b"zombie", tp, 9, stale)
                await producer.abort_transaction()
                assert await second.committed(tp) == 5
                # The same producer commits again under the group's generation.
                await _commit_step(producer, out, b"new generation", tp, 7, _metadata(second))
                # EndTxn is answered before the markers are written: wait for them.
                await wait_for_stable_offsets(second, [tp], timeout_s=5)
                assert await second.committed(tp) == 7
            finally:
                await second.stop()
        finally:
            await producer.stop()

    asyncio.run(scenario())
    values = [m.value() for m in read_all(bootstrap_servers, out, expect_at_least=2, settle_s=1)]
    assert values == [b"in generation", b"new generation"]


def test_a_reset_generation_is_refused_before_anything_is_sent() -> None:
    for generation, member in [(-1, ""), (-1, "m"), (3, "")]:
        with pytest.raises(GroupFencedError, match="not a member"):
            GroupMetadata("g", generation, member).checked()


def test_the_new_owner_waits_until_no_transaction_holds_its_offsets(
    bootstrap_servers: str, topics: Topics
) -> None:
    source, out, group, tp = topics.source, topics.out, topics.group, topics.tp

    async def scenario() -> None:
        member = await _member(bootstrap_servers, group, source)
        producer = await _producer(bootstrap_servers)
        try:
            assert await wait_for_stable_offsets(member, [tp], timeout_s=5) == 1
            await producer.begin_transaction()
            await producer.send_and_wait(out, b"pending")
            await producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(3, "")}, _metadata(member)
            )
            with pytest.raises(GroupFencedError, match="open transaction"):
                await wait_for_stable_offsets(member, [tp], timeout_s=0.5)
            waiting = asyncio.ensure_future(wait_for_stable_offsets(member, [tp], timeout_s=10))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await producer.commit_transaction()
            assert await waiting > 1  # it kept asking while the transaction was open
            assert await member.committed(tp) == 3
        finally:
            await producer.stop()
            await member.stop()

    asyncio.run(scenario())
