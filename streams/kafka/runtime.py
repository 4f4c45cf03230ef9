"""The processors' runtime: one consumer group member, one transaction per round.

A round takes what the owned partitions have ready (at most ``max_batch_records``
records, without waiting for more once the first has come), hands each partition's
records to its processor as one batch, runs what is due by the clock, and commits it
all in one transaction (:mod:`streams.kafka.checkpoint`). Then the next round takes
what arrived meanwhile: the busier the worker, the bigger its rounds (group commit).

Rounds overlap by one: a round's records are sent at its end, and its offsets and
commit, which only wait for the broker, go on in a thread while the next round is taken
and stepped; that round then waits for it (*settles* it) before sending its own. A
step sees the state of the rounds before it, committed or not: if one is not, the
process exits (below), so no later round commits either. What needs a round committed
waits for it: certificates are sent by the round after (``carry``), and a partition
is given up only once the commit in flight has settled.

Partitions come and go with the consumer group (eager rebalancing, range assignment,
so the co-partitioned topics of a processor are assigned together). When a partition is
assigned, the runtime first fetches its committed offsets, which waits while a
transaction still holds them (``require_stable``), then restores the processor's tables
from their changelogs (:mod:`streams.kafka.changelog`), then starts reading at those
offsets. Rebalance callbacks only run between rounds, inside ``poll``.

A worker that cannot go on says why and exits with
:data:`~streams.infra.supervisor.EXIT_RESTART`: an aborted round (its in-memory state
holds what the round did), a fenced producer, a round or a takeover that makes no
progress within the stall timeout (:mod:`streams.kafka.watchdog`). Its supervisor starts
a fresh process, which restores what was committed. An idle worker whose broker is gone
waits for it (librdkafka reconnects) and logs why it waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence

from confluent_kafka import OFFSET_BEGINNING, KafkaException, Message, TopicPartition

from streams.codec import AvroCodec
from streams.errors import WorkerStalledError
from streams.infra.supervisor import EXIT_RESTART
from streams.kafka import changelog, clients
from streams.kafka.checkpoint import (
    Checkpoint,
    Committing,
    Output,
    ProducerFencedError,
    Round,
    RoundAbortedError,
)
from streams.kafka.end_offsets import EndOffsets
from streams.kafka.processor import Processor
from streams.kafka.watchdog import Watchdog
from streams.kafka.worker_metrics import WorkerMetrics
from streams.settings import SESSION_TIMEOUT_S, DcbSettings

log = logging.getLogger("streams.worker")
READY = "worker ready"
TICK_S = 1.0
# How long what a round left due waits for the next round's work before it goes alone. A
# writer's next command comes ~25 ms after its answer at one writer: at 20 ms a commit's
# certificate took a transaction of its own 6 times in 10 (1.6 transactions per commit,
# 1.0 at 50 ms); an idle store's last certificate comes 50 ms after its commit.
CARRY_LINGER_S = 0.05


class Runtime:
    def __init__(
        self, settings: DcbSettings, processors: Sequence[Processor], codec: AvroCodec
    ) -> None:
        worker = settings.worker
        self.settings = settings
        self.codec = codec
        self.processors = list(processors)
        self.by_topic = {p.topic(role): p for p in self.processors for role in p.roles}
        bootstrap = settings.kafka
        instance = worker.instance_id or "solo"
        # Rounds take turns on these (kafka/checkpoint.py); a restart with the same ids
        # aborts what either left open, at once.
        producers = [
            clients.transactional_producer(
                bootstrap,
                transactional_id,
                **{"transaction.timeout.ms": int(worker.transaction_timeout_s * 1000)},
            )
            for transactional_id in transactional_ids(worker.app_id, instance)
        ]
        self.consumer = clients.group_consumer(bootstrap, worker.app_id)
        tables = [t for p in self.processors for t in p.tables.values()]
        self.checkpoint = Checkpoint(
            producers, self.consumer, tables, worker.stall_timeout_s, SESSION_TIMEOUT_S / 2
        )
        self.positions: dict[tuple[str, int], int] = {}  # the next offset, per owned partition
        self.owned: dict[Processor, set[int]] = {p: set() for p in self.processors}
        self.stop = threading.Event()
        self.rounds = 0
        self._report = Report(worker.report_interval_s)
        self.metrics: WorkerMetrics | None = None
        if worker.metrics_port is not None:
            self.metrics = WorkerMetrics(settings, codec)
            self.metrics.serve(worker.metrics_host, worker.metrics_port)
        self._ready = False
        self._failure: BaseException | None = None  # raised inside a rebalance callback
        self._rebalances = 0
        self._next_tick = time.monotonic() + TICK_S
        # Every wait below is bounded by the stall timeout; this catches those that are not.
        self.watchdog = Watchdog(worker.stall_timeout_s + 5, self._exit_for_restart)
        self._commit_limit_s = worker.transaction_timeout_s + 5
        self._committing: tuple[Committing, int, list[Output], float] | None = None

    # --- the loop ---------------------------------------------------------------

    def run(self) -> None:
        """Run rounds until :attr:`stop` is set; exit the process when it cannot go on."""
        self.consumer.subscribe(
            sorted(self.by_topic),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self.watchdog.start()
        try:
            while not self.stop.is_set():
                self.round()
            self._settle()
        except (RoundAbortedError, ProducerFencedError, WorkerStalledError) as exc:
            self._exit_for_restart(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug: the state may hold half a step; start afresh
            log.exception("the round failed")
            self._exit_for_restart(f"{type(exc).__name__}: {exc}")
        self.close()

    def round(self) -> None:
        wait = max(self._next_tick - time.monotonic(), 0.0)
        if self._committing is not None or any(p.due() for p in self.processors):
            # What a round left due (certificates, the commit in flight to settle) rides
            # with the next round's work, or goes alone when none comes soon: a round
            # costs the broker a transaction.
            wait = min(wait, CARRY_LINGER_S)
        messages = self._take(wait)
        started = time.monotonic()
        if self._failure is not None:
            raise WorkerStalledError(f"taking partitions over failed: {self._failure}")
        with self.watchdog.watching("a round"):
            self._step_and_commit(messages, started)

    def _step_and_commit(self, messages: list[Message], started: float) -> None:
        batches: dict[tuple[Processor, int], list[Message]] = {}
        for message in messages:
            processor = self.by_topic[message.topic() or ""]
            batches.setdefault((processor, message.partition() or 0), []).append(message)
        out = Round(self.codec)
        for (processor, partition), batch in batches.items():
            processor.step(partition, batch, out)
        if time.monotonic() >= self._next_tick:
            self._next_tick = time.monotonic() + TICK_S
            if self.positions:  # a round commits offsets (for fencing): it needs one
                now_ms = int(time.time() * 1000)
                for processor in self.processors:
                    processor.tick(now_ms, out)
        # The wait for the round before is the broker's, not a stall of this process:
        # it does not count towards the limit a round has (``Checkpoint.begin``).
        started += self._settle()
        for processor in self.processors:
            processor.carry(out)
        if not messages and out.empty and not self._has_writes():
            return
        moved: dict[tuple[str, int], int] = {}
        for message in messages:
            moved[message.topic() or "", message.partition() or 0] = (message.offset() or 0) + 1
        self.positions.update(moved)
        # The offsets that moved; a round that moved none (a timer's, a certificate's) still
        # sends one: the offsets carry the group generation that fences a zombie.
        carried = moved or dict([next(iter(self.positions.items()))])
        offsets = [TopicPartition(t, p, o) for (t, p), o in carried.items()]
        committing = self.checkpoint.begin(out, offsets, started)
        self._committing = (committing, len(messages), out.outputs, started)

    def _settle(self) -> float:
        """Wait for the commit in flight, if one is: the round before is committed after.
        The seconds it waited."""
        if self._committing is None:
            return 0.0
        committing, taken, outputs, started = self._committing
        self._committing = None
        waiting = time.monotonic()
        # Past its transaction's timeout the broker aborts it: a commit still waiting then
        # is waiting on nothing (librdkafka may not notice: kafka/watchdog.py).
        with self.watchdog.watching("a commit", self._commit_limit_s):
            committing.settle()
        waited = time.monotonic() - waiting
        self.rounds += 1
        self._report.add(taken, len(outputs), self.checkpoint.spent)
        if self.metrics is not None and committing.committed_at is not None:
            self.metrics.round(taken, outputs, started, committing.committed_at)
        return waited

    def _take(self, timeout_s: float) -> list[Message]:
        """What is ready: wait for the first record, then take the rest without waiting."""
        first = self.consumer.poll(timeout_s)
        if first is None:
            return []
        limit = self.settings.worker.max_batch_records
        rebalances = self._rebalances
        rest = self.consumer.consume(limit - 1, 0) if limit > 1 else []
        # A rebalance served by consume() discards what was fetched before it, except the
        # record poll() already returned: its partition may be gone, or start over.
        taken = rest if self._rebalances != rebalances else [first, *rest]
        messages = []
        for message in taken:
            error = message.error()
            if error is None:
                messages.append(message)
            elif error.fatal():
                raise WorkerStalledError(f"the consumer failed: {error}")
            else:  # librdkafka reconnects by itself; a broker out of reach is said here
                log.warning("consumer: %s", error)
        return messages

    def _has_writes(self) -> bool:
        return any(t.has_writes for p in self.processors for t in p.tables.values())

    # --- partitions coming and going ----------------------------------------------

    def _on_assign(self, consumer: object, partitions: list[TopicPartition]) -> None:
        try:
            with self.watchdog.watching("taking partitions over"):
                self._take_over(partitions)
        except BaseException as exc:  # raised out of poll() it would lose its reason
            log.exception("taking partitions over failed")
            self._failure = exc
            self.consumer.assign(partitions)  # nothing is stepped: the loop exits first

    def _take_over(self, partitions: list[TopicPartition]) -> None:
        self._settle()
        self._rebalances += 1
        started = time.monotonic()
        committed = self._committed(partitions, started + self.settings.worker.stall_timeout_s)
        owned: dict[Processor, set[int]] = {p: set() for p in self.processors}
        for tp in partitions:
            owned[self.by_topic[tp.topic]].add(tp.partition)
        wanted = [
            (processor.changelog, partition)
            for processor, parts in owned.items()
            for partition in sorted(parts)
        ]
        bootstrap = self.settings.kafka
        stall_s = self.settings.worker.stall_timeout_s
        rows = changelog.restore(
            bootstrap,
            f"{self.settings.worker.app_id}-restore",
            wanted,
            stall_s,
            self.watchdog.progress,
        )
        ends = changelog.settled_ends(
            EndOffsets(bootstrap),
            [
                (processor.topic(role), partition)
                for processor, parts in owned.items()
                for role in processor.end_roles
                for partition in parts
            ],
            time.monotonic() + stall_s,
        )
        for processor, parts in owned.items():
            for partition in parts:
                processor.assign(
                    partition,
                    rows[processor.changelog, partition],
                    {t: end for (t, p), end in ends.items() if p == partition},
                    {
                        tp.topic: tp.offset
                        for tp in committed
                        if tp.partition == partition and self.by_topic[tp.topic] is processor
                    },
                )
        self.owned = owned
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
        self.consumer.assign(
            [
                TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                )
                for tp in committed
            ]
        )
        restored = sum(len(r) for r in rows.values())
        log.info(
            "assigned %s; restored %d rows in %.1f s",
            describe(partitions) or "nothing",
            restored,
            time.monotonic() - started,
        )
        if not self._ready:
            self._ready = True
            log.info(READY)

    def _committed(self, partitions: list[TopicPartition], deadline: float) -> list[TopicPartition]:
        """The committed offsets, once no transaction holds them (``require_stable``)."""
        while True:
            try:
                committed = list(self.consumer.committed(partitions, timeout=5))
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise WorkerStalledError(f"no stable committed offsets: {exc}") from exc
                log.info("committed offsets not stable yet (%s); waiting", exc.args[0])
                continue
            failed = [tp for tp in committed if tp.error is not None]
            if failed:  # not "none committed": an error, which must not read as the start
                raise WorkerStalledError(
                    f"committed offsets of {describe(failed)}: {failed[0].error}"
                )
            return committed

    def _on_revoke(self, consumer: object, partitions: list[TopicPartition]) -> None:
        self._settle()  # what was taken from them is committed before they go
        self._forget(partitions)
        self.consumer.unassign()

    def _on_lost(self, consumer: object, partitions: list[TopicPartition]) -> None:
        log.warning("partitions lost (this member was fenced out of the group)")
        self._settle()  # fenced, the commit in flight fails: the process starts afresh
        self._forget(partitions)
        self.consumer.unassign()

    def _forget(self, partitions: list[TopicPartition]) -> None:
        self._rebalances += 1
        for processor, parts in self.owned.items():
            for partition in parts:
                processor.revoke(partition)
        self.owned = {p: set() for p in self.processors}
        self.positions = {}
        if partitions:
            log.info("revoked %s", describe(partitions))

    # --- ending -------------------------------------------------------------------

    def close(self) -> None:
        """Leave the group at once, so the partitions move now rather than after the
        session timeout (bounded: the broker may be gone). On the way out for a restart
        its revocation may settle beside a round still running: the process ends anyway."""
        closer = threading.Thread(target=self.consumer.close, daemon=True)
        closer.start()
        closer.join(5)

    def _exit_for_restart(self, why: str) -> None:
        log.error("%s; exiting so that a fresh process resumes from what was committed", why)
        self.close()
        logging.shutdown()
        os._exit(EXIT_RESTART)


class Report:
    """What the worker did lately, logged every ``interval_s`` while it works: rounds,
    records, and where a round's time went (its commit's phases, the rest: the steps)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.since = time.monotonic()
        self.rounds = self.taken = self.sent = 0
        self.spent_before: dict[str, float] = {}

    def add(self, taken: int, sent: int, spent: dict[str, float]) -> None:
        self.rounds += 1
        self.taken += taken
        self.sent += sent
        elapsed = time.monotonic() - self.since
        if elapsed < self.interval_s:
            return
        per_round = {
            phase: (total - self.spent_before.get(phase, 0.0)) * 1000 / self.rounds
            for phase, total in spent.items()
        }
        log.info(
            "%d rounds in %.0f s: %d records in, %d out (%.1f in per round); ms per round: %s",
            self.rounds,
            elapsed,
            self.taken,
            self.sent,
            self.taken / self.rounds,
            ", ".join(f"{phase} {ms:.1f}" for phase, ms in per_round.items()),
        )
        self.since, self.rounds, self.taken, self.sent = time.monotonic(), 0, 0, 0
        self.spent_before = dict(spent)


def transactional_ids(app_id: str, instance: str) -> tuple[str, str]:
    """A worker's two transactional ids (its rounds take turns on them). The first is the
    one a worker had before, so a worker of that version restarted as this one still has
    its open transaction aborted at once."""
    return f"{app_id}-{instance}", f"{app_id}-{instance}#2"


def describe(partitions: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}{sorted(p)}" for t, p in sorted(by_topic.items()))
