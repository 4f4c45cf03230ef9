"""The allocator / issuance-ledger processor: the thin shell around :class:`IssuanceLedger`.

It reads ``dcb.commands`` and ``dcb.tag-resolutions`` (co-partitioned by serviceId), so
each service's ledger lives in one partition and its steps run one at a time. A step
takes a partition's batch: every command, and every item of every resolution batch, in
order, against the services' ledgers; then each ledger the batch touched publishes what
its closed prefix now covers, once. It sends one allocation record for the batch and one
delivery record per tag partition it addresses, the committed events (one record each,
in SUID order), one answer per decided attempt, and one certificate per service whose
prefix moved. A certificate's coverage is where the service's events end on
``dcb.events``, which only the broker's acknowledgements tell: the certificate goes in
the round after, once this round's commit has settled (:meth:`LedgerProcessor.carry`).

Tables: ``ledgers`` (a header per service), ``inflight`` (an attempt in flight per row),
``attempts`` (the answer of each finished attempt, for replays); :mod:`streams.ledger.store`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby

from confluent_kafka import Message

from streams.codec import AvroCodec
from streams.errors import DcbError, LedgerError
from streams.kafka.changelog import Rows
from streams.kafka.checkpoint import Round
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, service_tag_partitions, tag_partition
from streams.ledger import store
from streams.ledger.ledger import IssuanceLedger, Step
from streams.ledger.state import CompletedAttempt, LedgerState
from streams.model import table_rows
from streams.model.records import (
    Allocation,
    AllocationBatch,
    Certificate,
    Command,
    CommitResult,
    CommittedEvent,
    ErrorInfo,
    TagDelivery,
    TagDeliveryBatch,
    TagResolutionBatch,
)
from streams.settings import DcbSettings
from streams.tags import one_phase
from streams.tags.processor import TagProcessor

FAULT_TAG_PREFIX = "fault:"


@dataclass
class _Touched:
    """A ledger the batch changed: the attempts it may have changed (``None``: any) and
    the attempts in flight before its first change (to delete those that left)."""

    ledger: IssuanceLedger
    before: set[str]
    attempts: set[str] | None = field(default_factory=set)


@dataclass
class _Batch:
    """Everything one step sends, gathered per destination."""

    touched: dict[str, _Touched] = field(default_factory=dict)
    allocations: list[Allocation] = field(default_factory=list)
    deliveries: dict[int, list[TagDelivery]] = field(default_factory=dict)  # tag partition
    events: list[CommittedEvent] = field(default_factory=list)
    results: list[CommitResult] = field(default_factory=list)
    completed: dict[str, list[CompletedAttempt]] = field(default_factory=dict)
    certificates: list[Certificate] = field(default_factory=list)


class LedgerProcessor(Processor):
    name = "ledger"
    roles = (TopicRole.COMMANDS, TopicRole.TAG_RESOLUTIONS)
    table_names = ("ledgers", "inflight", "attempts")
    end_roles = (TopicRole.EVENTS,)

    def __init__(
        self, settings: DcbSettings, codec: AvroCodec, tags: TagProcessor | None = None
    ) -> None:
        super().__init__(settings, codec)
        # The tag processor of this process: it decides one-phase attempts in this round
        # when it can (``_decide_here``); without it, deliveries always go by the topic.
        self.tags = tags if settings.worker.one_phase_in_round else None
        self.ledgers: dict[int, dict[str, IssuanceLedger]] = {}
        # Per partition and service, the certificate of a prefix that moved, as its step
        # left it: first those of the rounds since the last carry, then (``_certifying``)
        # those of the round the last carry handed to its commit. Their coverage is where
        # the service's events end (partition, next offset) as the broker acknowledged
        # them (``_ends``), known only once that round committed.
        self._drafts: dict[int, dict[str, Certificate]] = {}
        self._certifying: dict[int, dict[str, Certificate]] = {}
        self._ends: dict[str, tuple[int, int]] = {}
        worker = self.settings.worker
        self._reconcile_every_ms = int(worker.reconcile_interval_s * 1000)
        self._next_reconcile_ms = 0
        self._lose_deliveries = worker.fault_injection == "after-allocation-before-delivery"

    @property
    def partitions(self) -> int:
        return self.settings.topics.partitions

    def _partition_of(self, service_id: str) -> Callable[[str], int]:
        topics = self.settings.topics
        return lambda tag: tag_partition(service_id, tag, topics)

    def assign(
        self, partition: int, rows: Rows, ends: Mapping[str, int], offsets: Mapping[str, int]
    ) -> None:
        super().assign(partition, rows, ends, offsets)
        headers, inflight = self.tables["ledgers"], self.tables["inflight"]
        ledgers = self.ledgers[partition] = {}
        self._drafts[partition] = {}
        uncertified = self._certifying[partition] = {}
        events_end = ends[self.topic(TopicRole.EVENTS)]
        now = datetime.now(UTC)
        for service_id, header in headers.items(partition):
            state = store.restore(header, lambda key: inflight.get(partition, key))
            ledger = ledgers[service_id] = self._ledger(state)
            if state.closed_prefix != state.certified_prefix:
                # The process that moved the prefix died before certifying it; every
                # committed event of the partition lies below its settled end.
                ledger.events_written(partition, events_end)
                uncertified[service_id] = ledger.certificate(now)

    def revoke(self, partition: int) -> None:
        super().revoke(partition)
        self.ledgers.pop(partition, None)
        for drafts in (self._drafts, self._certifying):
            for service_id in drafts.pop(partition, {}):
                self._ends.pop(service_id, None)

    def _ledger(self, state: LedgerState) -> IssuanceLedger:
        return IssuanceLedger(
            state, self.settings.worker.grace_ms, self._partition_of(state.service_id)
        )

    def _load(self, partition: int, service_id: str, batch: _Batch) -> _Touched:
        touched = batch.touched.get(service_id)
        if touched is None:
            ledgers = self.ledgers[partition]
            ledger = ledgers.get(service_id)
            if ledger is None:
                state = LedgerState(service_id=service_id, allocator_lineage_id=str(uuid.uuid4()))
                ledger = ledgers[service_id] = self._ledger(state)
            touched = batch.touched[service_id] = _Touched(ledger, set(ledger.state.attempts))
        return touched

    # --- a step -----------------------------------------------------------------------

    def step(self, partition: int, messages: Sequence[Message], out: Round) -> None:
        now = datetime.now(UTC)
        batch = _Batch()
        for message, record in self.records(messages, out):
            if isinstance(record, Command):
                self._command(partition, message, record, batch, out, now)
            else:
                assert isinstance(record, TagResolutionBatch)
                for index, item in enumerate(record.items):
                    touched = self._load(partition, item.service_id, batch)
                    try:
                        step = touched.ledger.apply_resolution(item, now)
                    except DcbError as exc:
                        self.dead_letter(out, message, exc, item.service_id, index)
                        continue
                    if touched.attempts is not None:
                        touched.attempts.add(item.attempt_id)
                    self._absorb(touched.ledger, step, batch)
        self._finish(partition, batch, out, now)

    def _command(
        self,
        partition: int,
        message: Message,
        command: Command,
        batch: _Batch,
        out: Round,
        now: datetime,
    ) -> None:
        touched = self._load(partition, command.service_id, batch)
        try:
            if command.kind == "RECONCILE":
                skip = command.reconcile is not None and command.reconcile.skip_grace
                step = touched.ledger.reconcile(now, skip_grace=skip)
                touched.attempts = None
            elif command.kind == "TRIM":
                if command.trim is None:
                    raise LedgerError("a TRIM command without its request")
                step = touched.ledger.trim(command.trim.through, command.command_id)
            else:
                attempt = command.commit
                if attempt is None:
                    raise LedgerError("a COMMIT command without its attempt")
                key = store.attempt_key(command.service_id, attempt.attempt_id)
                done = self.tables["attempts"].get(partition, key)
                previous = CompletedAttempt.model_validate_json(done) if done else None
                step = touched.ledger.register(attempt, now, previous)
                if touched.attempts is not None:
                    touched.attempts.add(attempt.attempt_id)
        except DcbError as exc:
            self.dead_letter(out, message, exc, command.service_id)
            if command.commit is not None:
                answer = CommitResult.rejected(
                    command.service_id, command.commit.attempt_id, ErrorInfo.of(exc), now
                )
                batch.results.append(answer)
            return
        self._absorb(touched.ledger, step, batch)

    def _absorb(self, ledger: IssuanceLedger, step: Step, batch: _Batch) -> None:
        service_id = ledger.state.service_id
        batch.allocations += step.allocations
        topics = self.settings.topics
        for delivery in step.deliveries:
            every = (  # a TRIM is for every table of the service
                service_tag_partitions(service_id, topics)
                if delivery.action == "TRIM"
                else (tag_partition(service_id, delivery.tag, topics),)
            )
            for to in every:
                batch.deliveries.setdefault(to, []).append(delivery)
        batch.events += step.events
        batch.results += step.results
        batch.completed.setdefault(service_id, []).extend(step.completed)
        if step.certificate is not None:
            batch.certificates.append(step.certificate)

    def _finish(self, partition: int, batch: _Batch, out: Round, now: datetime) -> None:
        self._decide_here(partition, batch, now)
        for service_id, touched in batch.touched.items():
            self._absorb(touched.ledger, touched.ledger.publish(now), batch)
            self._store(partition, service_id, touched)
        self._send(partition, batch, out, now)

    def _decide_here(self, partition: int, batch: _Batch, now: datetime) -> None:
        """Have the tag processor of this process decide the batch's one-phase attempts now
        where it can, and take their evidence at once: the commit then takes one round,
        not three. It can when this process owns every ledger partition (so it alone
        sends deliveries) and the tag partition has stepped every delivery sent to it (so
        the attempts are decided in the order a topic would deliver them)."""
        if self.tags is None or len(self.ledgers) < self.partitions:
            return
        for to in sorted(batch.deliveries):
            items = batch.deliveries[to]
            if not all(one_phase.is_one_phase(d) for d in items) or self._losing(items):
                continue
            if not self.tags.can_decide_here(to):
                continue
            try:
                answers = self.tags.decide_here(to, items)
            except DcbError:
                continue  # by the topic then: the tag step dead-letters what it cannot take
            del batch.deliveries[to]
            for answer in answers:
                touched = self._load(partition, answer.service_id, batch)
                self._absorb(touched.ledger, touched.ledger.apply_resolution(answer, now), batch)

    def _losing(self, items: list[TagDelivery]) -> bool:
        """Tests only (fault injection): whether these deliveries are to be lost."""
        return self._lose_deliveries and any(
            d.action == "PREPARE" and d.tag.startswith(FAULT_TAG_PREFIX) for d in items
        )

    def _store(self, partition: int, service_id: str, touched: _Touched) -> None:
        headers, inflight = self.tables["ledgers"], self.tables["inflight"]
        writes = store.writes_for(touched.ledger.state, touched.attempts, touched.before)
        for key, row in writes.attempts.items():
            inflight.put(partition, key, row)
        for key in writes.removed:
            inflight.delete(partition, key)
        headers.put(partition, service_id, writes.header)

    def _send(self, partition: int, batch: _Batch, out: Round, now: datetime) -> None:
        if batch.allocations:
            out.send_batch(
                self.topic(TopicRole.ALLOCATIONS),
                partition,
                lambda items: AllocationBatch(
                    source_partition=partition, allocated_at=now, allocations=items
                ),
                [[allocation] for allocation in batch.allocations],
            )
        deliveries = self.topic(TopicRole.TAG_DELIVERIES)
        for to, items in sorted(batch.deliveries.items()):
            if self._losing(items):
                continue  # tests only: as if the worker died before sending this record
            # An attempt's items stay in one record: a one-phase attempt is decided whole.
            groups = [list(g) for _, g in groupby(items, lambda d: (d.service_id, d.attempt_id))]
            # The tag partition decides nothing in a ledger's round until it has stepped this.
            landed = self.tags.sending(to) if self.tags is not None else None
            out.send_batch(
                deliveries,
                to,
                lambda chunk: TagDeliveryBatch(
                    source_partition=partition, sent_at=now, items=chunk
                ),
                groups,
                landed,
            )
        attempts = self.tables["attempts"]
        for service_id, done in batch.completed.items():
            for attempt in done:
                key = store.attempt_key(service_id, attempt.attempt_id)
                attempts.put(partition, key, table_rows.dump(attempt))
        events = self.topic(TopicRole.EVENTS)
        # A service's events go to one partition in order: its last one's offset is where
        # they end (one acknowledgement in Python per service, not one per event).
        last = {event.service_id: index for index, event in enumerate(batch.events)}
        for index, event in enumerate(batch.events):
            ends = last[event.service_id] == index
            out.send(
                events,
                event.service_id,
                event,
                delivered=self._delivered(event.service_id) if ends else None,
            )
        results = self.topic(TopicRole.COMMIT_RESULTS)
        for result in batch.results:  # in the ledger's partition: one more in its transaction
            out.send(results, result.attempt_id, result, partition)
        self._drafts[partition].update((c.service_id, c) for c in batch.certificates)

    def _delivered(self, service_id: str) -> Callable[[int, int], None]:
        def note(partition: int, offset: int) -> None:
            self._ends[service_id] = max(
                self._ends.get(service_id, (0, 0)), (partition, offset + 1)
            )

        return note

    # --- certificates, a round late -----------------------------------------------------

    def due(self) -> bool:
        return any(self._drafts.values()) or any(self._certifying.values())

    def carry(self, out: Round) -> None:
        """The certificates of the round whose commit has just settled: the prefix its
        steps moved, covered by where the broker says its events end. The rounds stepped
        since go to the next commit, and are certified once it has settled (their
        steps' prefixes, not one moved meanwhile by a round still uncommitted)."""
        now = datetime.now(UTC)
        headers, certificates = self.tables["ledgers"], self.topic(TopicRole.CERTIFICATES)
        for partition, drafts in self._certifying.items():
            for service_id, draft in sorted(drafts.items()):
                ledger = self.ledgers[partition][service_id]
                if (end := self._ends.pop(service_id, None)) is not None:
                    ledger.events_written(*end)
                ledger.state.certified_prefix = draft.closed_prefix_suid
                headers.put(partition, service_id, store.header_row(ledger.state))
                certificate = draft.model_copy(
                    update={"generated_at": now, "coverage": ledger.coverage()}
                )
                out.send(certificates, service_id, certificate)
        self._certifying, self._drafts = self._drafts, {p: {} for p in self._drafts}

    # --- the reconciler's clock ------------------------------------------------------------

    def tick(self, now_ms: int, out: Round) -> None:
        """A reconcile pass for every owned ledger whose recovery is due."""
        if now_ms < self._next_reconcile_ms:
            return
        self._next_reconcile_ms = now_ms + self._reconcile_every_ms
        now = datetime.fromtimestamp(now_ms / 1000, UTC)
        for partition, ledgers in self.ledgers.items():
            batch = _Batch()
            for service_id, ledger in ledgers.items():
                due = ledger.state.recovery_due_ms
                if due is not None and due <= now_ms:
                    touched = self._load(partition, service_id, batch)
                    touched.attempts = None
                    self._absorb(ledger, ledger.reconcile(now), batch)
            if batch.touched:
                self._finish(partition, batch, out, now)
