"""A commit waits for the step in progress, drains the table-write buffer and waits for
every send of its transaction; a fetch that straddles a seek delivers nothing of the
partitions seeked; nothing is delivered while a seek waits for the broker.

The aiokafka transaction producers, faust's buffer and its consumer thread are replaced
by recorders: this is
the rule alone, with no broker. The integration tests prove the path on a real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import NotLeaderForPartitionError
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as driver
from faust.types import TP
from pydantic import ValidationError

from streams.errors import GroupFencedError, TransactionLostWriteError, TransactionStillOpenError
from streams.kafka.faust_app import make_app
from streams.kafka.faust_transport import (
    CommitPathConsumer,
    CommitPathConsumerThread,
    CommitPathTransactions,
    DeliveryCheckedProducer,
    DrainableBuffer,
    fresh_records,
    table_partitions,
)
from streams.kafka.group_fencing import GroupFencedProducer, GroupMetadata
from streams.kafka.settled_ends import open_transactions, settled_ends
from streams.kafka.step_gate import StepGate
from streams.settings import WorkerSettings


class RecordingTransactionProducer:
    def __init__(self, log: list[str], tid: str) -> None:
        self.log, self.tid = log, tid

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        self.log.append(f"{self.tid}:offsets")

    async def commit_transaction(self) -> None:
        await asyncio.sleep(0.02)  # a broker round trip
        self.log.append(f"{self.tid}:commit")

    async def begin_transaction(self) -> None:
        self.log.append(f"{self.tid}:begin")


class SlowBuffer:
    """A table write still queued when the commit starts; sent 10 ms later."""

    failed = None

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def send_held(self) -> None:
        """Nothing held: the writes are all still queued."""

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
        gate=StepGate(),
        lost_writes=set(),
        commit_hooks=[],
    )
    return producer, log


class RecordingHook:
    """A commit hook that notes when it runs and whether the gate was closed then."""

    def __init__(self, log: list[str], gate: StepGate, fails: bool = False) -> None:
        self.log, self.gate, self.fails = log, gate, fails

    async def before_commit(self) -> None:
        self.log.append(f"hook ran, gate {'closed' if self.gate.closed else 'open'}")
        if self.fails:
            raise RuntimeError("a send the hook awaited failed")

    def discard(self) -> None:
        self.log.append("hook discarded")


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


def test_a_transaction_that_lost_a_write_never_commits_later() -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        producer, log = producer_with(["a"])
        producer.__dict__["_transaction_producers"]["a"]._txn_manager = None
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failed.set_exception(RuntimeError("broker gone"))
        producer.pending_sends["a"] = [failed]
        with pytest.raises(RuntimeError, match="broker gone"):
            await producer.commit_transactions({"a": {}}, "g")
        good: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        good.set_result(None)
        producer.pending_sends["a"] = [good]  # the process went on: a later step's send
        with pytest.raises(TransactionLostWriteError) as info:
            await producer.commit_transactions({"a": {}}, "g")
        assert info.value.code == "transaction_lost_write"
        return log, producer.dead_transactions()

    log, dead = asyncio.run(scenario())
    assert not any(entry.startswith("a:") for entry in log)  # never committed
    assert dead == ["a"]  # and the watchdog ends the process


def test_nothing_commits_after_a_step_failed_half_way() -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        producer, log = producer_with(["a", "b"])
        for tid in ("a", "b"):
            producer.__dict__["_transaction_producers"][tid]._txn_manager = None
        with pytest.raises(RuntimeError):
            async with producer.gate.step():
                raise RuntimeError("Can't send messages while not in transaction")
        with pytest.raises(TransactionLostWriteError):
            await producer.commit_transactions({"a": {}, "b": {}}, "g")
        return log, producer.dead_transactions()

    log, dead = asyncio.run(scenario())
    assert log == [] and dead == ["a", "b"]


def test_a_table_write_that_never_reached_its_transaction_stops_the_commit() -> None:
    async def refuse(fut: Any, wait: bool) -> None:
        raise RuntimeError("Can't send messages while not in transaction")

    async def scenario() -> None:
        buffer = DrainableBuffer.__new__(DrainableBuffer)
        buffer.__dict__.update(pending=asyncio.Queue(), message_sent=asyncio.Event(), held={})
        channel = SimpleNamespace(publish_message=refuse)
        write = SimpleNamespace(message=SimpleNamespace(channel=channel))
        with pytest.raises(RuntimeError):
            await buffer._send_pending(write)  # type: ignore[arg-type]
        with pytest.raises(TransactionLostWriteError):
            await buffer.drain()

    asyncio.run(scenario())


class PublishingChannel:
    """A topic as the buffer sees it: publishing records the write and settles it."""

    def __init__(self, name: str, published: list[tuple[str, Any, Any]]) -> None:
        self.name, self.published = name, published

    def get_topic_name(self) -> str:
        return self.name

    async def publish_message(self, fut: Any, wait: bool) -> None:
        self.published.append((self.name, fut.message.key, fut.message.value))
        fut.set_result(f"offset {len(self.published) - 1}")


def buffer_for(changelogs: list[str]) -> DrainableBuffer:
    tables = [
        SimpleNamespace(changelog_topic=SimpleNamespace(get_topic_name=lambda n=n: n))
        for n in changelogs
    ]
    buffer = DrainableBuffer.__new__(DrainableBuffer)
    buffer.__dict__.update(
        pending=asyncio.Queue(),
        message_sent=asyncio.Event(),
        held={},
        app=SimpleNamespace(
            in_transaction=True,
            tables={i: t for i, t in enumerate(tables)},
            conf=SimpleNamespace(producer_threaded=False),
        ),
    )
    return buffer


def table_write(channel: PublishingChannel, key: str, value: Any, partition: int = 0) -> Any:
    message = SimpleNamespace(channel=channel, key=key, value=value, partition=partition)
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.message = message  # type: ignore[attr-defined]
    return future


def test_a_commit_sends_the_last_write_per_table_key_and_settles_the_replaced() -> None:
    async def scenario() -> tuple[list[tuple[str, Any, Any]], list[Any]]:
        published: list[tuple[str, Any, Any]] = []
        ledgers = PublishingChannel("ledgers-changelog", published)
        buffer = buffer_for(["ledgers-changelog"])
        writes = [
            table_write(ledgers, "svc", 1),
            table_write(ledgers, "svc", 2, partition=3),  # another partition: its own row
            table_write(ledgers, "svc", 3),
            table_write(ledgers, "other", None),
        ]
        for write in writes:
            buffer.put(write)
        assert published == []  # held for the commit
        await asyncio.wait_for(buffer.drain(), timeout=1)
        return published, [w.result() for w in writes]

    published, results = asyncio.run(scenario())
    assert published == [
        ("ledgers-changelog", "svc", 2),
        ("ledgers-changelog", "svc", 3),
        ("ledgers-changelog", "other", None),
    ]
    assert results == ["offset 1", "offset 0", "offset 1", "offset 2"]


def test_a_write_to_another_topic_is_not_held() -> None:
    async def scenario() -> tuple[int, list[tuple[str, Any, Any]]]:
        published: list[tuple[str, Any, Any]] = []
        buffer = buffer_for(["ledgers-changelog"])
        buffer.put(table_write(PublishingChannel("events", published), "svc", 1))
        buffer.put(table_write(PublishingChannel("ledgers-changelog", published), "svc", 2))
        queued = buffer.pending.qsize()
        await buffer.send_held()  # as a commit does before it closes the gate
        return queued, published

    queued, published = asyncio.run(scenario())
    assert queued == 1  # faust's queue, sent by its background task as before
    assert published == [("ledgers-changelog", "svc", 2)]


def test_a_step_writes_the_tables_of_its_source_topic_group_and_partition() -> None:
    groups = {
        "commands": 0,
        "resolutions": 0,
        "deliveries": 1,
        "my-app-ledgers-changelog": 0,
        "my-app-tag-tables-changelog": 1,
    }
    changelogs = ["my-app-ledgers-changelog", "my-app-tag-tables-changelog"]
    expected_ledger = [TP("my-app-ledgers-changelog", 4)]
    assert table_partitions(TP("commands", 4), groups.__getitem__, changelogs) == expected_ledger
    assert table_partitions(TP("resolutions", 4), groups.__getitem__, changelogs) == expected_ledger
    assert table_partitions(TP("deliveries", 11), groups.__getitem__, changelogs) == [
        TP("my-app-tag-tables-changelog", 11)
    ]


class RecordingTxnManager:
    def __init__(self, in_transaction: bool) -> None:
        self.in_transaction = in_transaction
        self.added: list[Any] = []

    def is_in_transaction(self) -> bool:
        return self.in_transaction

    def maybe_add_partition_to_txn(self, tp: Any) -> None:
        self.added.append(tp)


def producer_with_tables(
    open_txn: RecordingTxnManager, no_txn: RecordingTxnManager
) -> DeliveryCheckedProducer:
    """A producer of an app with two tables, transaction ``app-0-2`` open, ``app-1-2`` not."""
    changelogs = {"app-ledgers-changelog": 0, "app-tags-changelog": 1}
    groups = {**changelogs, "commands": 0, "deliveries": 1}
    app = SimpleNamespace(
        tables={
            n: SimpleNamespace(changelog_topic=SimpleNamespace(get_topic_name=lambda n=n: n))
            for n in changelogs
        },
        assignor=SimpleNamespace(group_for_topic=groups.__getitem__),
    )
    producer = DeliveryCheckedProducer.__new__(DeliveryCheckedProducer)
    producer.__dict__.update(
        app=app,
        _table_tps={},
        pending_sends={},
        _transaction_producers={
            "app-0-2": SimpleNamespace(_txn_manager=open_txn),
            "app-1-2": SimpleNamespace(_txn_manager=no_txn),
        },
    )
    return producer


def test_table_partitions_are_added_to_an_open_transaction_only() -> None:
    open_txn, no_txn = RecordingTxnManager(True), RecordingTxnManager(False)
    producer = producer_with_tables(open_txn, no_txn)
    producer.add_table_partitions("app-0-2", TP("commands", 2))
    producer.add_table_partitions("app-0-2", TP("deliveries", 5))
    producer.add_table_partitions("app-1-2", TP("commands", 2))
    assert open_txn.added == [TP("app-ledgers-changelog", 2), TP("app-tags-changelog", 5)]
    assert no_txn.added == []


def test_a_transactional_send_is_kept_for_the_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def faust_send(*args: Any, **kwargs: Any) -> asyncio.Future[str]:
        sent: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        sent.set_result("metadata")
        return sent

    monkeypatch.setattr(driver.Producer, "send", faust_send)
    open_txn, no_txn = RecordingTxnManager(True), RecordingTxnManager(False)
    producer = producer_with_tables(open_txn, no_txn)

    async def scenario() -> None:
        await producer.send("out", b"k", b"v", None, None, None, transactional_id="app-0-2")
        await producer.send("out", b"k", b"v", None, None, None)  # outside any transaction

    asyncio.run(scenario())
    assert list(producer.pending_sends) == ["app-0-2"]  # the commit waits for it
    assert len(producer.pending_sends["app-0-2"]) == 1


def test_steps_run_while_the_broker_commits_and_send_into_the_next_transaction() -> None:
    async def scenario() -> list[str]:
        producer, log = producer_with(["a"])
        await producer.gate.close()  # as the consumer's force_commit does
        commit = asyncio.create_task(producer.commit_transactions({"a": {}}, "g"))

        async def step() -> None:
            async with producer.gate.step():
                log.append("step ran")
                async with producer._trn_locks["a"]:  # faust's send takes it
                    log.append("step sent")

        stepping = asyncio.create_task(step())
        await asyncio.gather(commit, stepping)
        return log

    log = asyncio.run(scenario())
    assert log.index("table write sent") < log.index("step ran")  # the gate held it back
    assert log.index("step ran") < log.index("a:commit")  # ran during the broker's commit
    assert log.index("a:begin") < log.index("step sent")  # and sent into the next one


def test_a_failed_commit_reopens_the_gate_and_releases_every_transaction() -> None:
    async def scenario() -> StepGate:
        producer, _ = producer_with(["bad", "good"])
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failed.set_exception(RuntimeError("fenced"))
        producer.pending_sends["bad"] = [failed]
        await producer.gate.close()
        with pytest.raises(RuntimeError, match="fenced"):
            await producer.commit_transactions({"bad": {}, "good": {}}, "g")
        assert not any(lock.locked() for lock in producer._trn_locks.values())
        return producer.gate

    assert not asyncio.run(scenario()).closed


def consumer_of(
    producer: DeliveryCheckedProducer, log: list[str], monkeypatch: pytest.MonkeyPatch
) -> CommitPathConsumer:
    """A consumer of ``producer``'s app whose faust commit only notes that it read offsets."""

    async def faust_force_commit(self: Any, topics: Any, start_new_transaction: bool) -> bool:
        log.append("offsets read")
        return True

    monkeypatch.setattr(driver.Consumer, "force_commit", faust_force_commit)
    consumer = CommitPathConsumer.__new__(CommitPathConsumer)
    consumer.__dict__["app"] = SimpleNamespace(producer=producer)
    return consumer


def test_a_commit_closes_the_gate_before_faust_reads_the_acknowledged_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []

    async def scenario() -> bool:
        producer, _ = producer_with([])
        producer.commit_hooks.append(RecordingHook(log, producer.gate))
        consumer = consumer_of(producer, log, monkeypatch)

        async def step() -> None:
            async with producer.gate.step():
                await asyncio.sleep(0.02)
                log.append("step done")

        stepping = asyncio.create_task(step())
        await asyncio.sleep(0)
        await consumer.force_commit()
        await stepping
        return producer.gate.closed

    assert asyncio.run(scenario()) is False  # reopened after a commit with nothing to do
    assert log == ["step done", "hook ran, gate closed", "offsets read"]


def test_a_failed_commit_hook_commits_nothing_any_more(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []

    async def scenario() -> DeliveryCheckedProducer:
        producer, _ = producer_with(["a"])
        producer.commit_hooks.append(RecordingHook(log, producer.gate, fails=True))
        consumer = consumer_of(producer, log, monkeypatch)
        with pytest.raises(RuntimeError, match="hook awaited failed"):
            await consumer.force_commit()
        with pytest.raises(TransactionLostWriteError):
            await producer.commit_transactions({"a": {}}, "g")
        return producer

    producer = asyncio.run(scenario())
    assert log == ["hook ran, gate closed"]  # faust never read offsets to commit
    assert producer.half_done() is not None and not producer.gate.closed


class FakeAiokafka:
    """aiokafka's consumer as the consumer thread sees it: a fetch the test completes."""

    def __init__(self, batch: dict[Any, list[int]], committed: dict[Any, int | None]) -> None:
        self.batch, self.committed_offsets = batch, committed
        self.release = asyncio.Event()
        self.seeks: list[tuple[Any, int]] = []
        self._closed = False
        self._fetcher = self
        self._subscriptions = SimpleNamespace(fetch_context=contextlib.nullcontext)

    async def fetched_records(self, partitions: Any, timeout: Any, max_records: Any) -> Any:
        await self.release.wait()
        return dict(self.batch)

    async def committed(self, tp: Any) -> int | None:
        await asyncio.sleep(0)
        return self.committed_offsets[tp]

    def assignment(self) -> set[Any]:
        return set(self.committed_offsets)

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def position(self, tp: Any) -> int:
        return 0


A, B = TP("commands", 0), TP("commands", 1)
BATCH = {A: [10, 11], B: [20]}


def thread_for(kafka: FakeAiokafka) -> CommitPathConsumerThread:
    thread = CommitPathConsumerThread.__new__(CommitPathConsumerThread)
    thread.__dict__.update(
        consumer=SimpleNamespace(flow_active=True, _read_offset={}),
        app=SimpleNamespace(conf=SimpleNamespace(broker_request_timeout=1.0)),
        log=SimpleNamespace(dev=lambda *args: None),
        clock=itertools.count(),
        seeked_at={},
    )
    return thread


def fetch_then(kafka: FakeAiokafka, after_fetch: Any, before_fetch: Any = None) -> Any:
    """What the consumer delivers of a fetch, seeks happening before or after it returns."""

    async def scenario() -> Any:
        thread = thread_for(kafka)
        fetch = asyncio.create_task(thread._fetch_records(kafka, {A, B}))
        await asyncio.sleep(0)
        if before_fetch:
            await before_fetch(thread)
        kafka.release.set()
        records = await fetch
        if after_fetch:
            await after_fetch(thread)  # the batch is on its way to the event loop
        return dict(fresh_records(records, thread.seeked_at))

    return asyncio.run(scenario())


def test_a_partition_seeked_after_its_fetch_is_not_delivered_one_left_alone_is() -> None:
    kafka = FakeAiokafka(BATCH, committed={A: 5, B: None})

    async def rebalance_seek(thread: CommitPathConsumerThread) -> None:
        await thread._seek_to_committed(kafka)

    assert fetch_then(kafka, rebalance_seek) == {B: [20]}  # B had no offset: not moved
    assert kafka.seeks == [(A, 5)]


def test_a_recovery_seek_after_the_fetch_discards_the_partitions_it_names() -> None:
    kafka = FakeAiokafka(BATCH, committed={A: 5, B: 7})

    async def recovery_seek(thread: CommitPathConsumerThread) -> None:
        await thread._seek_wait(kafka, {B: 3})

    assert fetch_then(kafka, recovery_seek) == {A: [10, 11]}


def test_a_seek_before_the_fetch_returned_leaves_the_batch_whole() -> None:
    kafka = FakeAiokafka(BATCH, committed={A: 5, B: 7})

    async def rebalance_seek(thread: CommitPathConsumerThread) -> None:
        await thread._seek_to_committed(kafka)

    assert fetch_then(kafka, None, before_fetch=rebalance_seek) == BATCH


class ListOffsetsBroker:
    """A broker's ListOffsets answers: a transaction is open on ``A`` (records 50-55 not
    yet committed) for the first ``open_for`` requests at read_committed."""

    def __init__(self, open_for: int, moved_leader: bool = False) -> None:
        self.open_for = open_for
        self.moved_leader = moved_leader
        self.metadata_updates = 0
        self.cluster = SimpleNamespace(leader_for_partition=lambda tp: 1)

    def force_metadata_update(self) -> None:
        self.metadata_updates += 1

    async def send(self, node: int, request: Any) -> Any:
        if self.moved_leader:
            self.moved_leader = False
            raise NotLeaderForPartitionError()
        committed = request._isolation_level == 1
        if committed:
            self.open_for -= 1
        ends = {A: 50 if committed and self.open_for >= 0 else 56, B: 56}
        topics = [("commands", [(tp.partition, 0, -1, end) for tp, end in ends.items()])]
        return SimpleNamespace(topics=topics)


def test_recovery_asks_the_broker_where_a_changelog_ends_once_no_transaction_is_open() -> None:
    """A fresh process has no cached last stable offset; and a restore that stopped at an
    open transaction's first record would miss what was committed beyond it."""
    broker = ListOffsetsBroker(open_for=2)
    thread = thread_for(FakeAiokafka({}, {}))
    fresh = SimpleNamespace(_client=broker, last_stable_offset=lambda tp: None)
    thread.__dict__.update(_consumer=fresh, consumer=SimpleNamespace(in_transaction=True))
    assert asyncio.run(thread._highwaters([A, B])) == {A: 56, B: 56}
    assert broker.open_for == -1  # asked again until the transaction had ended


def test_a_moved_leader_is_asked_again_after_a_metadata_update() -> None:
    broker = ListOffsetsBroker(open_for=0, moved_leader=True)
    assert asyncio.run(settled_ends(broker, [A, B], timeout_s=5)) == {A: 56, B: 56}
    assert broker.metadata_updates == 1


def test_a_transaction_left_open_is_reported_by_code() -> None:
    broker = ListOffsetsBroker(open_for=10**6)
    with pytest.raises(TransactionStillOpenError, match="stayed open") as raised:
        asyncio.run(settled_ends(broker, [A, B], timeout_s=0.1))
    assert raised.value.code == "transaction_still_open"


def test_open_transactions_are_where_the_committed_end_is_short() -> None:
    assert open_transactions({A: 5, B: 7}, {A: 5, B: 9}) == [B]
    assert open_transactions({}, {A: 0}) == [A]
    assert open_transactions({A: 3}, {A: 3}) == []


class SeekingThread:
    """The consumer thread as the consumer sees it during a seek: the broker answers late."""

    def __init__(self, committed: dict[Any, int | None]) -> None:
        self.committed, self.answer = committed, asyncio.Event()
        self.seeks: list[tuple[Any, int]] = []

    async def seek_to_committed(self) -> dict[Any, int | None]:
        await self.answer.wait()  # the OffsetFetch round trip
        return self.committed

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


def test_records_arriving_during_a_seek_are_held_and_refetched_where_the_seek_did_not_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches: list[list[tuple[Any, int]]] = []

    async def faust_getmany(self: Any, timeout: float) -> Any:
        for tp, offset in batches.pop(0):
            yield tp, SimpleNamespace(offset=offset)

    monkeypatch.setattr(faust_consumer.Consumer, "getmany", faust_getmany)

    async def scenario() -> tuple[list[tuple[Any, int]], list[tuple[Any, int]]]:
        thread = SeekingThread(committed={A: 5, B: None})  # B has no committed offset
        consumer = CommitPathConsumer.__new__(CommitPathConsumer)
        consumer.__dict__.update(_thread=thread, log=SimpleNamespace(info=lambda *a: None))
        consumer.__dict__["assignment"] = lambda: {A, B}
        delivered: list[tuple[Any, int]] = []

        async def fetch(batch: list[tuple[Any, int]]) -> None:
            batches.append(batch)
            async for tp, message in consumer.getmany(1.0):
                delivered.append((tp, message.offset))

        seek = asyncio.create_task(consumer.seek_to_committed())
        await asyncio.sleep(0)
        await fetch([(A, 10), (A, 11), (B, 20), (B, 21)])  # from the old positions
        thread.answer.set()
        await seek
        await fetch([(A, 5), (B, 20)])  # from where the seek (A) and the rewind (B) put them
        return delivered, thread.seeks

    delivered, seeks = asyncio.run(scenario())
    assert delivered == [(A, 5), (B, 20)]  # nothing twice, nothing skipped
    assert seeks == [(B, 20)]  # A was moved by the seek itself


class TxnState:
    def __init__(self, in_transaction: bool, empty: bool) -> None:
        self.in_transaction, self.empty = in_transaction, empty

    def is_in_transaction(self) -> bool:
        return self.in_transaction

    def is_empty_transaction(self) -> bool:
        return self.empty


def test_revocation_aborts_exactly_the_transactions_that_hold_writes() -> None:
    producer, log = producer_with(["written", "begun", "committed"])
    states = {
        "written": TxnState(in_transaction=True, empty=False),
        "begun": TxnState(in_transaction=True, empty=True),  # nothing to take back
        "committed": TxnState(in_transaction=False, empty=True),  # faust's last commit
    }
    for tid, txn in producer._transaction_producers.items():
        txn._txn_manager = states[tid]

        async def abort(tid: str = tid) -> None:
            log.append(f"{tid}:abort")

        txn.abort_transaction = abort

    producer.commit_hooks = [RecordingHook(log, StepGate())]

    async def revoke() -> list[str]:
        producer.pending_sends["written"] = [asyncio.get_running_loop().create_future()]
        return await producer.abort_open_transactions()

    assert asyncio.run(revoke()) == ["written"]
    assert log == ["hook discarded", "written:abort"]  # what it was owed is aborted too
    assert "written" not in producer.pending_sends  # the next commit waits for none of them


class RecordingCommitProducer(DeliveryCheckedProducer):
    def __init__(self) -> None:  # no faust service: only what commit() reaches
        self.commits: list[tuple[Any, Any, bool]] = []

    async def commit_transactions(
        self, tid_to_offset_map: Any, group_id: Any, start_new_transaction: bool = True
    ) -> None:
        self.commits.append((tid_to_offset_map, group_id, start_new_transaction))


def one_transaction_manager(generation: int) -> tuple[CommitPathTransactions, Any]:
    """faust's transaction manager of app ``app`` (instance ``i1``) over a consumer whose
    coordinator is in ``generation``; topic ``standby`` is a standby replica."""
    producer = RecordingCommitProducer()
    coordinator = SimpleNamespace(group_id="app", generation=generation, member_id="m-1")
    aiokafka_consumer = SimpleNamespace(_coordinator=coordinator)
    consumer = SimpleNamespace(_thread=SimpleNamespace(_ensure_consumer=lambda: aiokafka_consumer))
    app = SimpleNamespace(
        conf=SimpleNamespace(id="app"),
        producer=producer,
        assignor=SimpleNamespace(
            group_for_topic=lambda topic: 0 if topic == "commands" else 1,
            is_standby=lambda tp: tp.topic == "standby",
        ),
        dcb_instance_id="i1",
    )
    manager = CommitPathTransactions.__new__(CommitPathTransactions)
    manager.__dict__.update(app=app, consumer=consumer, producer=producer)
    return manager, producer


def test_every_partition_of_the_process_commits_in_its_one_transaction() -> None:
    manager, producer = one_transaction_manager(generation=7)
    tps = {TP("commands", 0), TP("commands", 5), TP("deliveries", 11)}
    assert manager._tps_to_transactional_ids(tps) == {"app-i1"}
    assert manager._tps_to_transactional_ids({TP("standby", 1)}) == set()
    offsets = {tp: 3 for tp in tps}
    assert asyncio.run(manager.commit(offsets))
    assert producer.commits == [
        ({"app-i1": offsets}, GroupMetadata("app", 7, "m-1"), True)  # fenced by the group
    ]
    assert asyncio.run(manager.commit({}))
    assert len(producer.commits) == 1  # nothing to commit: no transaction round


def test_a_reset_generation_never_commits_offsets_unfenced() -> None:
    async def scenario() -> None:
        producer = GroupFencedProducer(bootstrap_servers="127.0.0.1:1", transactional_id="t")
        with pytest.raises(GroupFencedError, match="GroupMetadata"):
            await producer.send_offsets_to_transaction({}, "app")  # a bare group id: v0
        with pytest.raises(GroupFencedError, match="not a member"):
            await producer.send_offsets_to_transaction({}, GroupMetadata("app", -1, ""))

    asyncio.run(scenario())


def test_a_dead_workers_transaction_must_time_out_before_its_partitions_move(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="shorter than the session timeout"):
        make_app("app", "127.0.0.1:1", tmp_path, transaction_timeout_s=10.0)
    with pytest.raises(ValidationError):
        WorkerSettings(transaction_timeout_s=10.0)
