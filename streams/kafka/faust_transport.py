"""faust's aiokafka transport, changed where exactly-once had a hole and latency was lost.

**A step's writes all land in the transaction that commits its offset.** faust commits
on a timer, at any await of an agent. Agents run each record as a step of
:class:`~streams.kafka.step_gate.StepGate`; a commit closes the gate *before* faust
reads the acknowledged offsets, so no step is half done in what it commits (closing it
later, as this module first did, let the step in progress put its outputs into the
transaction while its offset went into the next one). faust queues table changelog
writes in a buffer that a background task sends later; in ``exactly_once`` mode nothing
drains it before a commit, so a step's table write could miss the transaction that
commits the step's offset. Here a commit drains the buffer, takes the lock of each
transaction it commits, and only then reopens the gate: steps run while the broker
commits, and their sends to those transactions wait for the next one. The buffer holds
table writes for the commit and sends only the last write per key of the round
(:class:`DrainableBuffer`).

**What an agent leaves to the commit** goes in with it: right after closing the gate, a
commit runs the agents' hooks (:mod:`streams.kafka.commit_hooks`; the ledger's
certificates), whose writes join the transaction it is about to commit.

**A commit waits for its sends.** Agents do not wait for each broker acknowledgement
(a round trip per step capped the ledger at a few steps per second). aiokafka flushes
pending batches before EndTxn, but a batch that fails for good fails only its own
future: the transaction would still commit without it. So the producer keeps every
transactional send's future and, holding the transaction's lock (which sends also
take), waits for them before committing; a failed send raises and the commit never
happens. The transaction stays open, so it is marked: no later commit of it may go
through (it would commit the other writes without the lost one — a first version
forgot the failure once raised), and the watchdog ends the process so that the next
owner of the partition aborts it. Likewise after a step that raised half-way (the step gate
records it) or a table write the buffer could not hand to the producer: the open
transactions may hold part of a step, so none of them commits any more
(:meth:`DeliveryCheckedProducer.half_done`).

**A fetch that straddles a seek is not delivered.** faust fetches in a consumer
thread; a batch fetched there before a rebalance's seek can reach the event loop after
the seek and after the flow resumed. faust delivered it, moved its read offset past the
records the seek meant to re-read, then dropped those as already read, and its gap
logic committed their offsets though no agent ever saw them. A command skipped so was
never answered; a changelog record skipped so during recovery would leave the restored
table without a write whose outputs were committed. The consumer thread now stamps each fetch
and each seek on one clock, and the consumer discards from a batch exactly the
partitions seeked after it was fetched: the seek put their position back, so they are
fetched again. (Only those: a partition without a committed offset is not moved by
``seek_to_committed``, and discarding its records would lose them — a first version of
this fix did, and the two-worker test caught it.)

**Nothing is delivered while a seek to the committed offsets is on its way.** faust
resumes the stream partitions and then seeks them, with the flow running: records from
the old position were delivered while the seek waited for the broker, and again after
it. See :class:`CommitPathConsumer`.

**A restore reads the changelogs to their real end.** faust's ``exactly_once`` recovery
took each changelog's end from the consumer's cache of the last fetch, empty in a fresh
process: a restore that asked first restored nothing. The end is now asked of the broker,
once no transaction is open on the partition (see ``_highwaters``).

**One transaction per process**, fenced by the consumer group rather than by a
transactional id per source partition (:class:`CommitPathTransactions`,
:mod:`streams.kafka.group_fencing`): a transaction per partition cost its requests and
markers in every round, about ten per three-tag event.

**Latency.** aiokafka retries
CONCURRENT_TRANSACTIONS after 5 ms rather than 100 ms. Each change was measured with
``dcb bench commit``. The consumer asks the broker to hold an empty fetch for 50 ms
rather than faust's 1.5 s, which a ``read_committed`` fetch often waited out in full while
a transaction it needed committed (it had been reverted once: it made the stale-batch
skip above frequent). faust's livelock check runs every 10 s, not every 2.5 commit
intervals.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, cast

from aiokafka.errors import ProducerFenced
from faust.transport.consumer import RecordMap, TransactionManager
from faust.transport.drivers import aiokafka as driver
from faust.transport.producer import ProducerBuffer
from faust.types import TP, FutureMessage, RecordMetadata
from mode import Service

from streams.errors import TransactionLostWriteError
from streams.kafka.commit_hooks import CommitHook
from streams.kafka.commit_pacing import QUIET_S, pause_after_commit
from streams.kafka.group_fencing import GroupFencedProducer, GroupMetadata, wait_for_stable_offsets
from streams.kafka.settled_ends import settled_ends
from streams.kafka.step_gate import StepGate

WriteSlot = tuple[str, int | None, Any]  # changelog topic, partition, table key

INSTANCE_ID = "dcb_instance_id"  # the app's attributes, set by make_app
TRANSACTION_TIMEOUT_S = "dcb_transaction_timeout_s"
# A transaction that holds a partition's offsets ends within its timeout and the
# broker's next check for timed-out transactions.
STABLE_OFFSETS_TIMEOUT_S = 120.0
# A changelog partition's open transaction is a departed owner's: it ends within its
# timeout (under 10 s) and the broker's next check; faust gives up on the restore's
# ends after its broker request timeout (90 s).
SETTLED_ENDS_TIMEOUT_S = 60.0


def changelog_topics(app: Any) -> list[str]:
    """The changelog topic of each of the app's tables."""
    return [table.changelog_topic.get_topic_name() for table in app.tables.values()]


class DrainableBuffer(ProducerBuffer):
    """faust's table-write buffer: holds the table writes of a commit round, the last
    one per key, for the commit, and can tell when everything put in has been sent.

    A transaction's writes become visible together, so of two writes to one table key in
    one transaction a restore only ever reads the last. A busy ledger writes its
    service's header at every step (several per round) and an attempt's row twice (in
    flight, then deleted), often within one round. Writes superseded in the round are
    never sent; their futures settle with the write that replaced them. The commit sends
    the held writes before it closes the step gate (:meth:`CommitPathConsumer.force_commit`)
    and drains what the last steps wrote once it is closed. Sending only a key's repeated
    writes late gave no gain; sending all of them under the closed gate cost latency.
    """

    sending = 0
    failed: BaseException | None = None  # a table write that never reached its transaction
    _changelogs: frozenset[str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.held: dict[WriteSlot, FutureMessage] = {}

    def put(self, fut: FutureMessage) -> None:
        slot = self._slot(fut)
        if slot is None:
            super().put(fut)
            return
        replaced = self.held.pop(slot, None)
        if replaced is not None:
            fut.add_done_callback(functools.partial(_settle_like, replaced))
        self.held[slot] = fut

    def _slot(self, fut: FutureMessage) -> WriteSlot | None:
        """Where a write lands, when it is a table write held for the commit."""
        app = self.app
        if app is None or not app.in_transaction:
            return None  # nothing drains before a commit outside exactly-once
        if self._changelogs is None:
            self._changelogs = frozenset(changelog_topics(app))
        message = fut.message
        topic = message.channel.get_topic_name()
        if topic not in self._changelogs or not isinstance(message.key, str | bytes):
            return None
        return topic, message.partition, message.key

    async def _send_pending(self, fut: FutureMessage) -> None:
        self.sending += 1
        try:
            await super()._send_pending(fut)
        except BaseException as exc:
            self.failed = self.failed or exc
            raise
        finally:
            self.sending -= 1

    async def send_held(self) -> None:
        held, self.held = self.held, {}
        for fut in held.values():
            with contextlib.suppress(Exception):  # kept in ``failed``; drain raises it
                await self._send_pending(fut)

    async def flush(self) -> None:
        """Send the held writes too (at a revocation: into the transactions it aborts)."""
        await super().flush()
        await self.send_held()

    async def drain(self) -> None:
        """Send everything put in so far; raise if a write failed."""
        await self.send_held()
        while True:
            self.message_sent.clear()
            if self.failed is not None:
                raise TransactionLostWriteError(f"a table write was never sent: {self.failed!r}")
            if not self.pending.qsize() and not self.sending:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.message_sent.wait(), timeout=0.05)


def _settle_like(replaced: FutureMessage, replacing: asyncio.Future[Any]) -> None:
    if replaced.done():
        return
    if replacing.cancelled():
        replaced.cancel()
    elif (exc := replacing.exception()) is not None:
        replaced.set_exception(exc)
    else:
        replaced.set_result(replacing.result())


def table_partitions(
    source: TP, group_for_topic: Callable[[str], int], changelogs: Iterable[str]
) -> list[TP]:
    """The changelog partitions a step of ``source`` writes its tables to: a table's
    changelog is partitioned like its source, so it is in the source's topic group."""
    group = group_for_topic(source.topic)
    return [TP(topic, source.partition) for topic in changelogs if group_for_topic(topic) == group]


def process_transactional_id(app: Any) -> str:
    """The one transactional id of this process (exactly-once v2: see ``group_fencing``)."""
    return f"{app.conf.id}-{getattr(app, INSTANCE_ID)}"


def group_metadata(consumer: Any) -> GroupMetadata:
    """The generation and member id under which the faust consumer holds its partitions."""
    coordinator = consumer._thread._ensure_consumer()._coordinator
    return GroupMetadata(coordinator.group_id, coordinator.generation, coordinator.member_id)


class DeliveryCheckedProducer(driver.Producer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        buffer = DrainableBuffer(loop=self.loop, beacon=self.beacon)
        buffer.app = self.app
        self.buffer = buffer
        self.drainable = buffer
        self.pending_sends: dict[str, list[asyncio.Future[RecordMetadata]]] = {}
        self.gate = StepGate()
        self.lost_writes: set[str] = set()  # transactions that must never commit
        self.commit_hooks: list[CommitHook] = []
        self._table_tps: dict[TP, list[TP]] = {}

    def _settings_default(self) -> Mapping[str, Any]:
        return {**super()._settings_default(), "retry_backoff_ms": 5}

    @property
    def _producer_type(self) -> type[GroupFencedProducer]:
        return GroupFencedProducer

    def _settings_extra(self) -> Mapping[str, Any]:
        # A process killed with a transaction open leaves it to the broker's timeout (its
        # successor has another transactional id): read_committed readers wait that long.
        timeout_s = getattr(self.app, TRANSACTION_TIMEOUT_S, 60.0)
        return {**super()._settings_extra(), "transaction_timeout_ms": int(timeout_s * 1000)}

    def dead_transactions(self) -> list[str]:
        """Transactional ids this process must not go on with: a producer that hit a fatal
        error, or an open transaction that lost a write (only a fresh process aborts it)."""
        if self.half_done() is not None:
            return sorted(self._transaction_producers)
        fatal = [
            tid
            for tid, producer in self._transaction_producers.items()
            if producer._txn_manager is not None and producer._txn_manager.is_fatal_error()
        ]
        return sorted({*fatal, *self.lost_writes})

    def half_done(self) -> BaseException | None:
        """A step that failed half-way, or a table write that never reached its transaction:
        the open transactions may hold part of a step, so none of them may commit."""
        return self.gate.broken or self.drainable.failed

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> Awaitable[RecordMetadata]:
        sent = await super().send(
            topic, key, value, partition, timestamp, headers, transactional_id=transactional_id
        )
        if transactional_id:
            # Kept before yielding to the loop, so no commit can run in between.
            future = asyncio.ensure_future(sent)
            self.pending_sends.setdefault(transactional_id, []).append(future)
            return future
        return sent

    def add_table_partitions(self, transactional_id: str, source: TP) -> None:
        """Add the changelog partitions of ``source``'s tables to the transaction along
        with the step's first outputs.

        Its table writes go out at the commit (:class:`DrainableBuffer`), so their
        partitions would be added to the transaction then: one more AddPartitionsToTxn
        round trip, and the coordinator's log write, in every commit. Paired runs (a
        transaction per source partition then): +5% events/s at 8 and 64 writers.
        """
        manager = self._transaction_producers[transactional_id]._txn_manager
        if manager is None or not manager.is_in_transaction():
            return
        tps = self._table_tps.get(source)
        if tps is None:
            assignor = self.app.assignor
            tps = table_partitions(source, assignor.group_for_topic, changelog_topics(self.app))
            self._table_tps[source] = tps
        for tp in tps:
            manager.maybe_add_partition_to_txn(tp)

    async def run_commit_hooks(self) -> None:
        """Under the closed gate, before a commit: the agents' hooks (:mod:`commit_hooks`).
        A hook that fails may have written part of what it owed: nothing commits any more."""
        try:
            for hook in self.commit_hooks:
                await hook.before_commit()
        except BaseException as exc:
            self.gate.broken = self.gate.broken or exc
            raise

    async def abort_open_transactions(self) -> list[str]:
        """Abort every transaction that holds writes (at revocation; see
        :class:`CommitPathTransactions`); the transactional ids aborted."""
        for hook in self.commit_hooks:
            hook.discard()
        aborted = []
        for tid, producer in sorted(self._transaction_producers.items()):
            manager = producer._txn_manager
            if manager is None or not manager.is_in_transaction():
                continue
            if manager.is_empty_transaction():
                continue  # begun, nothing sent: nothing to take back
            async with self._trn_locks.setdefault(tid, asyncio.Lock()):
                self.pending_sends.pop(tid, None)
                await producer.abort_transaction()
            aborted.append(tid)
        return aborted

    async def commit_transactions(
        self,
        tid_to_offset_map: Mapping[str, Mapping[TP, int]],
        group_id: Any,
        start_new_transaction: bool = True,
    ) -> None:
        """Commit each transaction with its offsets, concurrently; ``group_id`` is the
        :class:`GroupMetadata` that fences them.

        Called with the gate closed (:meth:`CommitPathConsumer.force_commit`); reopens it
        once every write of the committed steps is queued in its transaction and the
        transactions are locked against the next steps' sends.
        """
        held: list[asyncio.Lock] = []
        try:
            if (failure := self.half_done()) is not None:
                raise TransactionLostWriteError(
                    f"a step or a table write failed half-way ({failure!r}); nothing commits"
                )
            await self.drainable.drain()
            for tid in sorted(tid_to_offset_map):
                lock = self._trn_locks.setdefault(tid, asyncio.Lock())
                await lock.acquire()
                held.append(lock)
            self.gate.reopen()
            outcomes = await asyncio.gather(
                *(
                    self._commit_one(tid, offsets, group_id, start_new_transaction)
                    for tid, offsets in tid_to_offset_map.items()
                ),
                return_exceptions=True,  # no lock is released while a commit still runs
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        finally:
            self.gate.reopen()
            for lock in held:
                lock.release()

    async def _commit_one(
        self,
        transactional_id: str,
        offsets: Mapping[TP, int],
        group_id: Any,
        start_new_transaction: bool,
    ) -> None:
        producer = self._transaction_producers.get(transactional_id)
        if producer is None:
            self.log.warning("Commit invoked for unknown transaction %s", transactional_id)
            return
        if transactional_id in self.lost_writes:
            raise TransactionLostWriteError(
                f"transaction {transactional_id} lost a write; it must not commit",
                transactional_id=transactional_id,
            )
        sends = self.pending_sends.pop(transactional_id, [])
        try:
            await asyncio.gather(*sends)  # the first failed send raises: no commit
        except BaseException:
            # The transaction stays open with the other writes: no later commit of it
            # may go through (it would commit them without this one).
            self.lost_writes.add(transactional_id)
            raise
        await producer.send_offsets_to_transaction(offsets, group_id)
        await producer.commit_transaction()
        if start_new_transaction:
            await producer.begin_transaction()


def commit_path_producer(app: Any) -> DeliveryCheckedProducer:
    """The app's producer, which agents, sends and commits of the commit path rely on."""
    producer = app.producer
    if not isinstance(producer, DeliveryCheckedProducer):
        raise RuntimeError("the commit path needs the app of make_app (its checked producer)")
    return producer


FETCH_MAX_WAIT_MS = 50
LIVELOCK_CHECK_S = 10.0
COMMIT_MAX_INTERVAL = "dcb_commit_max_interval_s"  # the app's attribute, set by make_app


def moves(committed: int | None) -> bool:
    """Whether a seek to this committed offset moves the partition (aiokafka leaves a
    partition without one where it is)."""
    return bool(committed and committed > 0)


class StampedRecords(dict[TP, list[Any]]):
    """A fetched batch, and when its consumer thread got it on the thread's seek clock."""

    stamp: int


def fresh_records(records: StampedRecords, seeked_at: Mapping[TP, int]) -> StampedRecords:
    """The partitions of ``records`` not seeked since the batch was fetched."""
    fresh = StampedRecords(
        (tp, batch) for tp, batch in records.items() if seeked_at.get(tp, -1) < records.stamp
    )
    fresh.stamp = records.stamp
    return fresh


class CommitPathConsumerThread(driver.AIOKafkaConsumerThread):
    """The aiokafka consumer's thread: short fetch waits; fetches and seeks on one clock.

    A fetch is stamped the moment aiokafka hands its records over, and a seek the moment
    it moves a position (no await in between either way), so the consumer can tell
    which records a later seek made stale, and only those.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = itertools.count()
        self.seeked_at: dict[TP, int] = {}

    def _mark_seeked(self, tps: Iterable[TP]) -> None:
        stamp = next(self.clock)
        for tp in tps:
            self.seeked_at[tp] = stamp

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read by the fetcher made at start
        return consumer

    async def _highwaters(self, partitions: list[TP]) -> Mapping[TP, int]:
        """The partitions' committed ends, as the broker says, once no transaction is
        open on them (:mod:`streams.kafka.settled_ends`).

        faust's ``exactly_once`` recovery reads the consumer's cached last stable offset
        instead, which a fresh process has only once a fetch has answered for that
        partition: a restore that asked first saw every changelog as empty and started
        from empty tables (seen after a broker restart). faust then waits out two 5 s
        timeouts when a changelog ends in a transaction marker, as it always does.
        """
        client = self._ensure_consumer()._client
        ends = await settled_ends(client, partitions, timeout_s=SETTLED_ENDS_TIMEOUT_S)
        return cast(Mapping[TP, int], ends)

    async def _fetch_records(
        self,
        consumer: Any,
        active_partitions: set[TP],
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> StampedRecords:
        fetched = await super()._fetch_records(
            consumer, active_partitions, timeout=timeout, max_records=max_records
        )
        records = StampedRecords(fetched)
        records.stamp = next(self.clock)
        return records

    async def seek_to_committed(self) -> Mapping[TP, int]:
        return cast(
            Mapping[TP, int],
            await self.call_thread(self._seek_to_committed, self._ensure_consumer()),
        )

    async def _seek_to_committed(self, consumer: Any) -> dict[TP, int | None]:
        """aiokafka's ``seek_to_committed``, its seeks made at one instant and stamped."""
        committed = {tp: await consumer.committed(tp) for tp in consumer.assignment()}
        moved = [tp for tp, offset in committed.items() if moves(offset)]
        for tp in moved:  # aiokafka leaves a partition without a committed offset alone
            consumer.seek(tp, committed[tp])
        self._mark_seeked(moved)
        return committed

    async def _seek_wait(self, consumer: Any, partitions: Mapping[TP, int]) -> None:
        self._mark_seeked(partitions)  # faust seeks them all before its first await
        await super()._seek_wait(consumer, partitions)

    def seek(self, partition: TP, offset: int) -> None:
        super().seek(partition, offset)
        self._mark_seeked([partition])


class CommitPathConsumer(driver.Consumer):
    """faust's aiokafka consumer: whole-step commits; no records fetched from before a seek,
    and none delivered while a seek to the committed offsets is on its way.

    faust resumes the stream partitions, then seeks them to their committed offsets, with
    the flow already running: records fetched from the old position were delivered while
    the seek waited for the broker, then fetched and delivered again from the committed
    offset. faust counted the second delivery's acknowledgements against the first's and
    never committed that partition again, so its open transaction hit the broker's
    timeout; a command delivered twice was registered by the first step, whose writes
    were lost, and ignored as known by the second (seen in two-worker runs). Records
    that arrive during the seek are held back, and the partitions the seek left where
    they were are put back to the first record held, to fetch it again.
    """

    _thread: CommitPathConsumerThread
    _held_from: dict[TP, int] | None = None  # while seeking: the first record held, per tp

    async def seek_to_committed(self) -> Mapping[TP, int]:
        outermost = self._held_from is None
        if outermost:
            self._held_from = {}
        try:
            committed: Mapping[TP, int] = await super().seek_to_committed()
        finally:
            if outermost:
                held, self._held_from = self._held_from or {}, None
        if not outermost:
            return committed
        assigned = self.assignment()
        for tp, offset in held.items():
            if not moves(committed.get(tp)) and tp in assigned:
                self._thread.seek(tp, offset)
        if held:
            self.log.info("held back records of %d partition(s) during a seek", len(held))
        return committed

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        async for tp, message in super().getmany(timeout):
            if self._held_from is not None:
                self._held_from.setdefault(tp, message.offset)
                continue
            yield tp, message

    @Service.task
    async def _commit_handler(self) -> None:
        """faust's commit timer: the next commit starts once the agents have gone quiet
        after a step, at the latest a pause after the last one ended (``commit_pacing``)."""
        interval = self.commit_interval
        longest = getattr(self.app, COMMIT_MAX_INTERVAL, interval)
        gate = commit_path_producer(self.app).gate
        await self.sleep(interval)
        while not self.should_stop:
            started = time.monotonic()
            await self.commit()
            pause = pause_after_commit(time.monotonic() - started, interval, longest)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.quiet(gate.started_at_close, QUIET_S), pause)

    @Service.task
    async def _commit_livelock_detector(self) -> None:
        """faust's check that no partition stalls, every ``LIVELOCK_CHECK_S``.

        faust runs it every 2.5 commit intervals (50 ms here), and each check yields to
        the loop once per assigned partition: 3% of the worker's main thread at 64
        writers, for a warning.
        """
        interval = max(self.commit_interval * 2.5, LIVELOCK_CHECK_S)
        await self.sleep(interval)
        async for _ in self.itertimer(interval, name="livelock"):
            if not self.app.rebalancing:
                await self.verify_all_partitions_active()

    def _new_consumer_thread(self) -> CommitPathConsumerThread:
        return CommitPathConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        producer = commit_path_producer(self.app)
        # The round's held table writes go out while steps still run; the drain under
        # the closed gate then sends only what the last steps wrote.
        await producer.drainable.send_held()
        gate = producer.gate
        await gate.close()  # before faust reads the acknowledged offsets
        try:
            await producer.run_commit_hooks()
            committed: bool = await super().force_commit(
                topics, start_new_transaction=start_new_transaction
            )
            return committed
        finally:
            gate.reopen()  # when nothing was committed; a commit reopened it earlier

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> RecordMap:
        records = await super()._getmany(active_partitions, timeout)
        if not isinstance(records, StampedRecords):
            return records  # nothing fetched (flow stopped)
        fresh = fresh_records(records, self._thread.seeked_at)
        stale = sum(len(batch) for tp, batch in records.items() if tp not in fresh)
        if stale:
            self.log.info("discarded %d records fetched before a seek; fetching them again", stale)
        return fresh


class CommitPathTransactions(TransactionManager):
    """faust's transaction manager: one transaction per process, fenced by the consumer
    group (:mod:`streams.kafka.group_fencing`); aborting at revocation what its last commit
    left open.

    faust opens a transaction per source partition. Every one of them paid its own
    requests and markers in every commit round, about ten per three-tag event at the
    defaults. Here every step of the process writes into one transaction, committed with
    the offsets of all its partitions under the group generation that assigned them; a
    new owner of a partition first waits until no transaction still holds its offsets.

    At an eager rebalance faust drops every partition's acknowledgements *before* its last
    commit, so the steps done since the commit before are not committed: they run again
    from the committed offsets once the partitions come back. faust kept their writes in
    the open transaction, beside the writes of the second run (with other SUIDs: a
    ledger step issues new ones). It is aborted here, and the in-memory tables, which
    hold the aborted steps' changes, are emptied: the restore that follows every
    assignment rebuilds them from the changelogs.
    """

    @property
    def transactional_id(self) -> str:
        return process_transactional_id(self.app)

    def _tps_to_transactional_ids(self, tps: set[TP]) -> set[str]:
        return {self.transactional_id} if self._tps_to_active_tpgs(tps) else set()

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> Awaitable[RecordMetadata]:
        p = self.consumer.key_partition(topic, key, partition)
        tid = self.transactional_id if p is not None else None
        return await self.producer.send(
            topic, key, value, p, timestamp, headers, transactional_id=tid
        )

    async def commit(self, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        if not offsets:
            return True
        try:
            await commit_path_producer(self.app).commit_transactions(
                {self.transactional_id: offsets},
                group_metadata(self.consumer),
                start_new_transaction=start_new_transaction,
            )
        except ProducerFenced as fenced:
            self.log.warning("producer fenced: %r", fenced)
            await self.app.crash(fenced)
        return True

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP]
    ) -> None:
        await super().on_rebalance(assigned, revoked, newly_assigned)
        if not assigned:
            return
        thread = cast(CommitPathConsumer, self.consumer)._thread
        requests = await thread.call_thread(
            wait_for_stable_offsets,
            thread._ensure_consumer(),
            assigned,
            timeout_s=STABLE_OFFSETS_TIMEOUT_S,
        )
        if requests > 1:
            self.log.info("waited for an open transaction holding offsets (%d requests)", requests)

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        await super().on_partitions_revoked(revoked)  # flushes: every send has its answer
        aborted = await commit_path_producer(self.app).abort_open_transactions()
        if aborted:
            for table in self.app.tables.values():
                table.data._clear()  # the memory store of make_app
            self.log.info(
                "aborted the transaction faust's last commit left open; the tables are "
                "restored from their changelogs",
            )


class CommitPathTransport(driver.Transport):
    Consumer: ClassVar[Any] = CommitPathConsumer
    Producer: ClassVar[Any] = DeliveryCheckedProducer
    TransactionManager: ClassVar[Any] = CommitPathTransactions
