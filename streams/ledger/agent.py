"""The allocator / issuance-ledger agent: the thin faust shell around :class:`IssuanceLedger`.

One agent reads ``dcb.commands`` and ``dcb.tag-resolutions`` (co-partitioned by
serviceId), so each service's ledger steps run one at a time in its partition.
Each step loads the service's ledger from the ``ledgers`` table, runs the pure core,
stores the state and publishes the step's records — all in the source partition's
transaction. A service whose closed prefix moved gets its certificate once per commit
round, from :class:`CertificatesDue`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faust.types import EventT, RecordMetadata

from streams.errors import CodecError, DcbError, LedgerError
from streams.kafka.faust_transport import commit_path_producer
from streams.kafka.live_state import LiveStates
from streams.kafka.processor import Processor
from streams.kafka.topic_catalog import TopicRole, delivery_key
from streams.ledger import store
from streams.ledger.ledger import IssuanceLedger, Step
from streams.ledger.state import CompletedAttempt, LedgerState
from streams.model import table_rows
from streams.model.records import AvroRecord, Command, CommitResult, ErrorInfo, TagResolution

NAME = "ledger"
FAULT_TAG_PREFIX = "fault:"


@dataclass
class Due:
    source: EventT[Any]  # a record of the service's partition, stepped in this round
    events_end: asyncio.Future[RecordMetadata] | None  # the last event sent in the round


class CertificatesDue:
    """The services whose closed prefix moved in this commit round: a
    :class:`~streams.kafka.commit_hooks.CommitHook` that certifies each once, at the commit.

    A certificate's coverage is where the service's events end on ``dcb.events``, known
    from the broker's answer to their produce. The step used to wait for that answer
    (the ledger agent does nothing else meanwhile); at the commit it has mostly come,
    and a round's steps of one service make one certificate, not one each.
    """

    def __init__(self, certify: Callable[[str, Due], Awaitable[None]]) -> None:
        self._certify = certify
        self._due: dict[str, Due] = {}

    def add(
        self,
        service_id: str,
        source: EventT[Any],
        events_end: asyncio.Future[RecordMetadata] | None,
    ) -> None:
        earlier = self._due.get(service_id)
        if events_end is None and earlier is not None:
            events_end = earlier.events_end
        self._due[service_id] = Due(source, events_end)

    async def before_commit(self) -> None:
        due, self._due = self._due, {}
        for service_id, what in due.items():
            await self._certify(service_id, what)

    def discard(self) -> None:
        self._due.clear()


def register(proc: Processor) -> Any:
    app, grace_ms = proc.app, proc.settings.worker.grace_ms
    fault = proc.settings.worker.fault_injection
    partitions = proc.settings.topics.partitions
    ledgers = app.Table("ledgers", default=None, partitions=partitions, value_type=bytes)
    inflight = app.Table("inflight", default=None, partitions=partitions, value_type=bytes)
    completed = app.Table("attempts", default=None, partitions=partitions, value_type=bytes)

    live: LiveStates[IssuanceLedger] = LiveStates(ledgers)

    def load(service_id: str) -> IssuanceLedger:
        cached = live.take(service_id)
        if cached is not None:
            return cached
        header = ledgers.get(service_id)
        state = (
            store.restore(header, inflight.get)
            if header is not None
            else LedgerState(service_id=service_id, allocator_lineage_id=str(uuid.uuid4()))
        )
        return IssuanceLedger(state, grace_ms)

    def save(ledger: IssuanceLedger, record: AvroRecord, before: set[str]) -> None:
        service_id = ledger.state.service_id
        writes = store.writes_for(ledger.state, store.touched_by(record), before)
        for key, attempt in writes.attempts.items():
            inflight[key] = attempt
        for key in writes.removed:
            inflight.pop(key, None)
        ledgers[service_id] = writes.header
        live.keep(service_id, ledger)

    def outputs(step: Step, service_id: str) -> list[tuple[TopicRole, str, AvroRecord]]:
        out: list[tuple[TopicRole, str, AvroRecord]] = []
        out += [(TopicRole.ALLOCATIONS, service_id, a) for a in step.allocations]
        lose = fault == "after-allocation-before-delivery" and bool(step.allocations)
        out += [
            (TopicRole.TAG_DELIVERIES, delivery_key(service_id, d.tag), d)
            for d in step.deliveries
            if not (lose and d.tag.startswith(FAULT_TAG_PREFIX))
        ]
        out += [(TopicRole.COMMIT_RESULTS, r.attempt_id, r) for r in step.results]
        return out

    def rejected(command: Command, exc: DcbError) -> CommitResult:
        assert command.commit is not None
        return CommitResult.rejected(
            command.service_id, command.commit.attempt_id, ErrorInfo.of(exc), datetime.now(UTC)
        )

    def run(ledger: IssuanceLedger, record: AvroRecord, now: datetime) -> Step:
        if isinstance(record, TagResolution):
            return ledger.apply_resolution(record, now)
        assert isinstance(record, Command)
        if record.kind == "RECONCILE":
            skip = record.reconcile is not None and record.reconcile.skip_grace
            return ledger.reconcile(now, skip_grace=skip)
        if record.commit is None:
            raise LedgerError("a COMMIT command without its attempt")
        done = completed.get(store.attempt_key(record.service_id, record.commit.attempt_id))
        previous = CompletedAttempt.model_validate_json(done) if done is not None else None
        return ledger.register(record.commit, now, previous)

    async def handle(event: EventT[Any]) -> None:
        try:
            record = proc.decode(event)
        except CodecError as exc:
            await proc.dead_letter(event, NAME, exc)
            return
        service_id = record.service_id  # type: ignore[attr-defined]
        ledger = load(service_id)
        before = set(ledger.state.attempts)
        try:
            step = run(ledger, record, datetime.now(UTC))
        except DcbError as exc:
            await proc.dead_letter(event, NAME, exc, service_id)
            if isinstance(record, Command) and record.commit is not None:
                answer = rejected(record, exc)
                await proc.publish(event, [(TopicRole.COMMIT_RESULTS, answer.attempt_id, answer)])
            return
        if step.events:
            events = [(TopicRole.EVENTS, service_id, e) for e in step.events]
            due.add(service_id, event, (await proc.publish(event, events))[-1])
        elif step.certificate is not None:
            due.add(service_id, event, None)
        save(ledger, record, before)
        for done_attempt in step.completed:
            completed[store.attempt_key(service_id, done_attempt.attempt_id)] = table_rows.dump(
                done_attempt
            )
        await proc.publish(event, outputs(step, service_id))

    async def certify(service_id: str, what: Due) -> None:
        ledger = load(service_id)
        if what.events_end is not None:
            last = await what.events_end
            ledger.events_written(last.partition, last.offset + 1)
        with proc.tables_of(what.source):
            ledgers[service_id] = store.header_row(ledger.state)
        live.keep(service_id, ledger)
        certificate = ledger.certificate(datetime.now(UTC))
        await proc.publish(what.source, [(TopicRole.CERTIFICATES, service_id, certificate)])

    due = CertificatesDue(certify)
    commit_path_producer(app).commit_hooks.append(due)

    @app.agent(proc.source(TopicRole.COMMANDS, TopicRole.TAG_RESOLUTIONS), name=NAME)
    async def ledger_agent(stream: Any) -> None:
        event: EventT[Any]
        async for event in stream.events():
            async with proc.step():
                await handle(event)

    return ledgers
