"""One round, one transaction: what the steps sent, what they wrote, and the input offsets.

This module alone commits: a round's outputs, its tables' changelog writes (the last
per key) and the offsets its input moved go into one Kafka transaction, committed with
the consumer group's metadata (KIP-447). A process that lost its partitions (a zombie:
its group generation is stale) has its offsets refused, so its transaction can only
abort; that is why every transaction carries offsets, also a round that took no input
(a timer's, a certificate's: it sends one partition's unchanged offset).

A round's records are produced in the caller's thread (:meth:`Checkpoint.begin`); its
offsets and commit, which only wait for the broker, go on in a thread of their own
(:class:`Committing`) while the runtime steps the next round, which settles it first.

Rounds take turns on two transactional producers. A producer's commit returns once the
broker has decided it, and its markers are written after; until they are, the broker
refuses that producer's next transaction (``CONCURRENT_TRANSACTIONS``: librdkafka backs
off and asks again). Back to back on one producer, 12-31% of the worker's rounds at 8
writers waited so (docs/ARCHITECTURE.md, "Rounds"); the other producer's last
transaction ended a round earlier. The order stays: a round begins only once the round
before is committed, so its records follow that round's on every partition (its markers
may come after them: readers skip markers).

Errors follow librdkafka's classes: a retriable one is retried until the stall timeout,
one that requires an abort aborts the round (:class:`RoundAbortedError`), and a fatal
one (a newer producer took the transactional id) is :class:`ProducerFencedError`. The
runtime answers all of them by exiting for a restart: the process's state holds what
the aborted round did, and a fresh process restores what was committed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from streams.codec import AvroCodec
from streams.errors import WorkerStalledError
from streams.kafka.changelog import Table
from streams.model.records import AvroRecord

log = logging.getLogger("streams.worker")
T = TypeVar("T")

# A batch record is split until each piece is at most this (unless one item is bigger).
MAX_RECORD_BYTES = 1024 * 1024
Delivered = Callable[[int, int], None]  # partition, offset of a record the broker has


def group_member(metadata: object) -> tuple[int, str] | None:
    """The generation and member id in librdkafka's consumer group metadata (its own
    serialised form: ``CGMDv2:``, the generation as a little-endian int32, the group id
    and the member id NUL-terminated), or ``None`` when it is not that form."""
    if not isinstance(metadata, bytes) or not metadata.startswith(b"CGMDv2:"):
        return None
    generation = int.from_bytes(metadata[7:11], "little", signed=True)
    parts = metadata[11:].split(b"\x00")
    if len(parts) < 2:
        return None
    return generation, parts[1].decode(errors="replace")


PHASES = ("produce", "offsets", "commit")


class RoundAbortedError(Exception):
    """The round's transaction was aborted; nothing of it is visible."""


class ProducerFencedError(Exception):
    """A newer producer took this process's transactional id; it must stop at once."""


@dataclass
class Output:
    topic: str
    key: bytes | None
    value: bytes | None  # None: a tombstone
    partition: int | None = None  # None: the key's partition
    delivered: Delivered | None = None


@dataclass
class Round:
    """What the steps of one round send."""

    codec: AvroCodec
    outputs: list[Output] = field(default_factory=list)

    def send(
        self,
        topic: str,
        key: str | None,
        record: AvroRecord,
        partition: int | None = None,
        delivered: Delivered | None = None,
    ) -> None:
        value = self.codec.encode(record.schema_name, record.to_avro(), check=False)
        encoded_key = None if key is None else key.encode()
        self.outputs.append(Output(topic, encoded_key, value, partition, delivered))

    def send_batch(
        self,
        topic: str,
        partition: int,
        make: Callable[[list[Any]], AvroRecord],
        groups: Sequence[Sequence[Any]],
        delivered: Delivered | None = None,
    ) -> None:
        """``make`` of every group's items as one record; when that would be larger than
        :data:`MAX_RECORD_BYTES`, several records in order, split between groups only (a
        group's items must reach their reader in one record)."""
        record = make([item for group in groups for item in group])
        value = self.codec.encode(record.schema_name, record.to_avro(), check=False)
        if len(value) > MAX_RECORD_BYTES and len(groups) > 1:
            half = len(groups) // 2
            self.send_batch(topic, partition, make, groups[:half], delivered)
            self.send_batch(topic, partition, make, groups[half:], delivered)
            return
        self.outputs.append(Output(topic, None, value, partition, delivered))

    @property
    def empty(self) -> bool:
        return not self.outputs


class Committing:
    """A round's transaction once its records are sent. The offsets and the commit only
    wait for the broker: they run in a thread of their own while the next round is taken
    and stepped, and :meth:`settle` waits for them, raises what they raised and hands the
    broker's acknowledgements to their ``delivered`` calls (in the caller's thread, so the
    processors' state is only ever touched by one thread)."""

    def __init__(self, checkpoint: Checkpoint, producer: Producer) -> None:
        self.checkpoint = checkpoint
        self.producer = producer  # the round's: its transaction is this producer's
        self.failed: list[str] = []
        self.acknowledged: list[tuple[Delivered, int, int]] = []
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.committed_at: float | None = None  # monotonic; None until committed

    def report(self, delivered: Delivered) -> Callable[[KafkaError | None, Message], None]:
        """The delivery report of a record whose offset ``delivered`` hears at settling."""

        def report(err: KafkaError | None, message: Message) -> None:
            if err is not None:
                self.failed.append(f"{message.topic()}[{message.partition()}]: {err}")
            else:
                self.acknowledged.append(
                    (delivered, message.partition() or 0, message.offset() or 0)
                )

        return report

    def start(self, offsets: list[TopicPartition], metadata: object) -> None:
        self._thread = threading.Thread(
            target=self._finish, args=(offsets, metadata), name="dcb-commit", daemon=True
        )
        self._thread.start()

    def _finish(self, offsets: list[TopicPartition], metadata: object) -> None:
        try:
            self.checkpoint.finish(offsets, metadata, self)
            self.committed_at = time.monotonic()
        except BaseException as exc:  # raised by settle(), in the round's thread
            self._error = exc

    def settle(self) -> None:
        """Wait for the commit; raise what it raised, else run the acknowledgements."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        for delivered, partition, offset in self.acknowledged:
            delivered(partition, offset)


class Checkpoint:
    """Commits rounds through transactional producers in turn, fenced by the consumer group."""

    def __init__(
        self,
        producers: Sequence[Producer],
        consumer: Consumer,
        tables: Sequence[Table],
        stall_timeout_s: float,
        fenced_after_s: float,
    ) -> None:
        if not producers:
            raise ValueError("a checkpoint commits through at least one producer")
        self.producers = list(producers)
        self._turn = 0  # the producer of the next round, by index
        self.consumer = consumer
        self.tables = tables
        self.stall_timeout_s = stall_timeout_s
        self.fenced_after_s = fenced_after_s
        # Seconds spent per phase of a commit, summed over rounds: where a round's time goes.
        self.spent: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    def commit(
        self, out: Round, offsets: list[TopicPartition], started_at: float | None = None
    ) -> None:
        """:meth:`begin` and settle: the round committed when this returns."""
        self.begin(out, offsets, started_at).settle()

    def begin(
        self, out: Round, offsets: list[TopicPartition], started_at: float | None = None
    ) -> Committing:
        """Send the round (its records and its tables' writes, taken now) and commit it
        with ``offsets`` in a thread; what that raises, :meth:`Committing.settle` raises:
        :class:`RoundAbortedError` (aborted, nothing visible), :class:`ProducerFencedError`
        or :class:`~streams.errors.WorkerStalledError`. A round that began (its records
        were taken) more than ``fenced_after_s`` ago is aborted instead."""
        if not offsets:
            raise ValueError("a round commits the offsets of its partitions: it has none")
        producer = self.producers[self._turn]
        self._turn = (self._turn + 1) % len(self.producers)
        committing = Committing(self, producer)
        clock = time.perf_counter()
        self._call(producer, "begin the transaction", producer.begin_transaction)
        for output in out.outputs:
            self._produce_one(output, committing)
        for table in self.tables:
            for (partition, key), row in table.take_writes().items():
                self._produce_one(Output(table.topic, key.encode(), row, partition), committing)
        self._spent("produce", clock)
        if started_at is not None and time.monotonic() - started_at > self.fenced_after_s:
            # The process stalled mid-round (a long pause, SIGSTOP): the group may have
            # moved its partitions meanwhile, and the metadata librdkafka then hands out
            # (generation -1, no member id) is one the coordinator does not check.
            self._abort(producer, f"the round took {time.monotonic() - started_at:.1f} s")
        metadata = self.consumer.consumer_group_metadata()
        member = group_member(metadata)
        if member is not None and (member[0] < 0 or not member[1]):
            # Kafka takes transactional offsets from "no generation, no member" unchecked
            # (the pre-KIP-447 form); librdkafka hands that out once it left the group.
            self._abort(
                producer, f"this process is no member of the group (generation {member[0]})"
            )
        committing.start(offsets, metadata)
        return committing

    def finish(
        self, offsets: list[TopicPartition], metadata: object, committing: Committing
    ) -> None:
        """Commit the offsets with the group's ``metadata`` (the generation the round was
        taken in, which fences a zombie), then the transaction."""
        producer = committing.producer
        clock = time.perf_counter()
        self._call(
            producer,
            "commit the offsets",
            producer.send_offsets_to_transaction,
            offsets,
            metadata,
            self.stall_timeout_s,
        )
        clock = self._spent("offsets", clock)
        # The commit waits for every record's acknowledgement, then ends the transaction;
        # a record that failed fails it (librdkafka), and the reports say which.
        self._call(producer, "commit", producer.commit_transaction, self.stall_timeout_s)
        self._spent("commit", clock)
        if committing.failed:  # librdkafka fails the commit first; this is a second line
            raise WorkerStalledError(f"committed with failed records: {committing.failed[0]}")

    def _spent(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self.spent[phase] += now - since
        return now

    def _produce_one(self, output: Output, committing: Committing) -> None:
        # Reports only where someone hears the offset: each one is a call into Python from
        # the commit's thread (a failure fails the commit anyway).
        kwargs: dict[str, Any] = {"key": output.key, "value": output.value}
        if output.delivered is not None:
            kwargs["on_delivery"] = committing.report(output.delivered)
        if output.partition is not None:
            kwargs["partition"] = output.partition
        deadline = time.monotonic() + self.stall_timeout_s
        while True:
            try:
                committing.producer.produce(output.topic, **kwargs)
                return
            except BufferError:  # the local queue is full: let it drain
                if time.monotonic() > deadline:
                    raise WorkerStalledError("the producer's queue stayed full") from None
                committing.producer.poll(0.05)
            except KafkaException as exc:
                self._abort(committing.producer, f"producing to {output.topic}: {exc.args[0]}")

    def _call(self, producer: Producer, what: str, fn: Callable[..., T], *args: Any) -> T:
        deadline = time.monotonic() + self.stall_timeout_s
        while True:
            try:
                return fn(*args)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.fatal():
                    raise ProducerFencedError(f"{what}: {err}") from exc
                if err.txn_requires_abort():
                    self._abort(producer, f"{what}: {err}")
                if not err.retriable() or time.monotonic() > deadline:
                    raise WorkerStalledError(f"{what}: {err}") from exc
                log.warning("%s: %s; retrying", what, err)
                time.sleep(0.1)

    def _abort(self, producer: Producer, why: str) -> None:
        log.warning("aborting the round: %s", why)
        try:
            producer.abort_transaction(self.stall_timeout_s)
        except KafkaException as exc:
            log.warning("the abort failed too (%s); the broker will abort it", exc.args[0])
        raise RoundAbortedError(why)
