"""A commit waits for the step in progress, drains the table-write buffer and waits for
every send of its transaction.

The aiokafka transaction producers and faust's buffer are replaced by recorders: this is
the rule alone, with no broker. The integration tests prove the path on a real one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.kafka.faust_transport import DeliveryCheckedProducer


class RecordingTransactionProducer:
    def __init__(self, log: list[str], tid: str) -> None:
        self.log, self.tid = log, tid

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        self.log.append(f"{self.tid}:offsets")

    async def commit_transaction(self) -> None:
        self.log.append(f"{self.tid}:commit")

    async def begin_transaction(self) -> None:
        self.log.append(f"{self.tid}:begin")


class SlowBuffer:
    """A table write still queued when the commit starts; sent 10 ms later."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def drain(self) -> None:
        await asyncio.sleep(0.01)
        self.log.append("table write sent")


def producer_with(tids: list[str]) -> tuple[DeliveryCheckedProducer, list[str]]:
    log: list[str] = []
    producer = DeliveryCheckedProducer.__new__(DeliveryCheckedProducer)
    producer.__dict__.update(
        _transaction_producers={t: RecordingTransactionProducer(log, t) for t in tids},
        _trn_locks={t: asyncio.Lock() for t in tids},
        pending_sends={},
        drainable=SlowBuffer(log),
        step_lock=asyncio.Lock(),
    )
    return producer, log


def test_commit_drains_table_writes_and_waits_for_sends_first() -> None:
    async def scenario() -> list[str]:
        producer, log = producer_with(["a"])
        sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        producer.pending_sends["a"] = [sent]
        commit = asyncio.create_task(producer.commit_transactions({"a": {}}, "g"))
        await asyncio.sleep(0.05)
        assert log == ["table write sent"]  # drained, then waiting for the send
        sent.set_result(None)
        await commit
        return log

    assert asyncio.run(scenario()) == ["table write sent", "a:offsets", "a:commit", "a:begin"]


def test_a_failed_send_stops_its_transaction_commit_only() -> None:
    async def scenario() -> list[str]:
        producer, log = producer_with(["bad", "good"])
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failed.set_exception(RuntimeError("record too large"))
        producer.pending_sends["bad"] = [failed]
        with pytest.raises(RuntimeError, match="too large"):
            await producer.commit_transactions({"bad": {}, "good": {}}, "g")
        return log

    log = asyncio.run(scenario())
    assert not any(entry.startswith("bad:") for entry in log)
    assert log[-3:] == ["good:offsets", "good:commit", "good:begin"]


def test_a_commit_waits_for_the_step_in_progress() -> None:
    async def scenario() -> list[str]:
        producer, log = producer_with(["a"])
        async with producer.step_lock:  # an agent in the middle of a record
            commit = asyncio.create_task(producer.commit_transactions({"a": {}}, "g"))
            await asyncio.sleep(0.05)
            log.append("step done")
        await commit
        return log

    assert asyncio.run(scenario()) == [
        "step done",
        "table write sent",
        "a:offsets",
        "a:commit",
        "a:begin",
    ]
