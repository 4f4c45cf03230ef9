"""A restore's end is taken only once no transaction is open on the changelog partition
(``streams/kafka/settled_ends.py``), on the real broker."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from streams.errors import TransactionStillOpenError
from streams.kafka.settled_ends import READ_UNCOMMITTED, list_ends, settled_ends
from tests.integration.kafka_helpers import create_topic

pytestmark = pytest.mark.integration


def test_the_end_waits_for_an_open_transaction_to_commit_or_abort(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    changelog = f"{topic_prefix}changelog"
    create_topic(bootstrap_servers, changelog)
    tp = TopicPartition(changelog, 0)

    async def scenario() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers, transactional_id=f"settle-{uuid.uuid4()}"
        )
        reader = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers, isolation_level="read_committed"
        )
        await producer.start()
        await reader.start()
        client = reader._client
        try:
            async with producer.transaction():
                await producer.send_and_wait(changelog, b"committed")
            settled = await settled_ends(client, [tp], timeout_s=5)
            assert settled == await list_ends(client, [tp], READ_UNCOMMITTED)

            for end_it in (producer.commit_transaction, producer.abort_transaction):
                await producer.begin_transaction()
                await producer.send_and_wait(changelog, b"in an open transaction")
                with pytest.raises(TransactionStillOpenError, match="stayed open"):
                    await settled_ends(client, [tp], timeout_s=0.5)
                waiting = asyncio.ensure_future(settled_ends(client, [tp], timeout_s=10))
                await asyncio.sleep(0.3)
                assert not waiting.done()
                await end_it()
                ends = await waiting
                # Past the transaction's records and its marker: nothing left behind.
                assert ends[tp] > settled[tp] + 1
                assert ends == await list_ends(client, [tp], READ_UNCOMMITTED)
                settled = ends
        finally:
            await reader.stop()
            await producer.stop()

    asyncio.run(scenario())
