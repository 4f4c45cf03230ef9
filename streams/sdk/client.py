"""``DcbClient``: the DCB API (append / read / certificate) over the commit-path topics.

``append`` validates locally (so bad input fails fast with its typed error), sends a
COMMIT command keyed by the service and waits for the attempt's answer on
``dcb.commit-results``; it returns only once the attempt is decided. When no answer comes
in time (a worker died mid-way, say), it sends the same attempt once more: the ledger
answers a known attempt id as it did the first time, with the same SUIDs, so the caller
gets an answer rather than an unknown outcome. A committed attempt is answered in the
same transaction that publishes its events, and a ``read`` after ``append`` waits until it
holds them (the broker makes a transaction readable partition by partition).
``read`` folds ``dcb.events`` (certified events only, in SUID order) into a local,
incrementally caught-up cache, and returns the head with the events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from pydantic import BaseModel

from streams import errors
from streams.archive import ArchiveStore, open_archive
from streams.archive.events import archived_events
from streams.codec import codec_from_settings
from streams.erasure import KeyStore, open_key_store
from streams.erasure.opener import KeyLookup, open_event
from streams.erasure.sealing import seal, sealed_subject, subject_of
from streams.errors import DcbError, KafkaUnavailableError
from streams.kafka import clients
from streams.kafka.connection import Brokers, connection
from streams.kafka.refusals import produce_confirmed, refusal
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.ledger.ledger import validate_attempt
from streams.model.query import guard_tags
from streams.model.records import (
    AppendCondition,
    Certificate,
    Command,
    CommitAttempt,
    CommitResult,
    CommittedEvent,
    ErrorInfo,
    EventData,
    QueryItem,
)
from streams.model.uuid7 import uuid7
from streams.reconcile.command import reconcile_command
from streams.sdk import steps
from streams.sdk.event_index import EventIndex, SequencedEvent
from streams.sdk.events import Event, ReadResult
from streams.sdk.follower import Follower
from streams.sdk.handover import Handover, LoopHandover, ThreadHandover, release_all
from streams.sdk.shared_catch_up import LoopSharedCatchUp, SharedCatchUp
from streams.sdk.tail import TailTimeoutError, TopicTail
from streams.settings import DcbSettings
from streams.subclasses import subclass_tree

log = logging.getLogger("streams.sdk")

REPORTS_EVERY_S = 0.1  # how often the listener serves the commands' failure reports
_REPOSITIONED = uuid.UUID("6f0b3c4e-8d2a-5b7e-9c1f-2a4d6e8f0b13")  # names derived attempt ids


class AppendResult(BaseModel):
    attempt_id: str
    suids: list[str]


def error_from(info: ErrorInfo) -> DcbError:
    """The typed error an answer names (a ``DcbError`` with that code when none has it)."""
    details = json.loads(info.details_json) if info.details_json else {}
    codes = {cls.code: cls for cls in reversed(subclass_tree(DcbError))}
    cls: type[DcbError] = codes.get(info.code) or type(
        "RemoteError", (DcbError,), {"code": info.code}
    )
    return cls(info.message, **details)


class _Answer:
    """One awaited answer, handed over once (:mod:`streams.sdk.handover`)."""

    __slots__ = ("_error", "_result", "done")

    def __init__(self, done: Handover) -> None:
        self.done = done
        self._result: CommitResult | None = None
        self._error: BaseException | None = None

    def settle(
        self,
        result: CommitResult | None = None,
        error: BaseException | None = None,
        released: list[Handover] | None = None,
    ) -> None:
        """Once only: the channel hands each answer to whoever takes it out of waiting;
        with ``released``, its handover joins those released together afterwards."""
        self._result, self._error = result, error
        if released is None:
            self.done.release()
        else:
            released.append(self.done)

    def outcome(self) -> CommitResult:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _unanswered(attempt_id: str, timeout_s: float) -> errors.AnswerTimeoutError:
    return errors.AnswerTimeoutError(
        f"no answer to attempt {attempt_id} within {timeout_s} s (is a worker running?)",
        attempt_id=attempt_id,
    )


class CommitChannel:
    """One producer of commands and one listener of answers, shared by a client's views.

    Every answer on ``dcb.commit-results`` passes the listener once, whichever service it
    belongs to, so many services cost one consumer (``DcbClient.for_service``).
    """

    def __init__(self, brokers: Brokers, settings: DcbSettings) -> None:
        self.settings = settings
        self.codec = codec_from_settings(settings)
        self._brokers = brokers
        # Reports of failed commands only. The listener serves them, and librdkafka takes
        # the GIL back for each report it hands to Python: with a report per command, in a
        # client shared by 256 writer threads, the listener waited its turn for the GIL
        # once per command before it read answers.
        self._producer = clients.producer(brokers, **{"delivery.report.only.error": True})
        self._confirming: Producer | None = None  # send_confirmed's: it needs every report
        self._waiting: dict[str, _Answer] = {}  # taken out by whoever settles it
        self._lock = threading.Lock()
        results = topic_name(settings.topics, TopicRole.COMMIT_RESULTS)
        # Fetched only while an answer is awaited: an idle client asks the broker nothing.
        # Answers come in committed transactions, and the broker answers a waiting
        # read_committed fetch as soon as a commit makes records readable: a long wait
        # costs no latency, it spares the broker empty fetches (~270/s at 64 writers with
        # 2 ms, ~25/s with 100 ms; append p50 at one writer 15 -> 13 ms, same run).
        self._results = TopicTail(
            brokers, results, from_end=True, on_demand=True, fetch_wait_ms=100
        )
        self._closed = threading.Event()
        self._awaited = threading.Event()  # some answer is awaited: the listener fetches
        self._listener = threading.Thread(target=self._listen, name="dcb-results", daemon=True)
        self._listener.start()

    def request(self, command: Command, attempt_id: str, timeout_s: float) -> CommitResult:
        """Send ``command`` and wait for the answer to ``attempt_id``."""
        done = ThreadHandover()
        answer = self._awaiting(attempt_id, done)
        try:
            self.send(command, self._reporter(attempt_id, answer))
            if not done.wait(timeout_s):
                raise _unanswered(attempt_id, timeout_s)
            return answer.outcome()
        finally:
            self._forget(attempt_id)

    async def request_async(
        self, command: Command, attempt_id: str, timeout_s: float
    ) -> CommitResult:
        """:meth:`request` for a coroutine: it waits in its event loop, not in a thread."""
        done = LoopHandover()
        answer = self._awaiting(attempt_id, done)
        try:
            self.send(command, self._reporter(attempt_id, answer))
            if not await done.wait(timeout_s):
                raise _unanswered(attempt_id, timeout_s)
            return answer.outcome()
        finally:
            self._forget(attempt_id)

    def _awaiting(self, attempt_id: str, done: Handover) -> _Answer:
        answer = _Answer(done)
        with self._lock:
            self._waiting[attempt_id] = answer
            self._awaited.set()
        return answer

    def _forget(self, attempt_id: str) -> None:
        with self._lock:
            self._waiting.pop(attempt_id, None)
            if not self._waiting:
                self._awaited.clear()

    def _reporter(
        self, attempt_id: str, answer: _Answer
    ) -> Callable[[KafkaError | None, Message], None]:
        """The delivery report that settles ``answer`` with why the command was not sent."""

        def failed(err: KafkaError | None, _message: Message) -> None:
            if err is not None and self._take(attempt_id, only=answer) is not None:
                refused = refusal(err, "sending the attempt")
                answer.settle(error=refused or KafkaUnavailableError(f"sending the attempt: {err}"))

        return failed

    def send(
        self,
        command: Command,
        delivered: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None:
        """Queue ``command`` (a model: it conforms to its schema); librdkafka sends what the
        writers queue together, and ``delivered`` hears of it if sending failed (the
        listener serves delivery reports: a ``poll`` here would let go of the GIL on every
        append)."""
        topic, key, value = self._record(command)
        self._producer.produce(topic, key=key, value=value, on_delivery=delivered)

    def send_confirmed(self, command: Command, what: str, timeout_s: float) -> None:
        """Send ``command`` and return once the broker has it (raising why it has not)."""
        topic, key, value = self._record(command)
        with self._lock:
            if self._confirming is None:
                self._confirming = clients.producer(self._brokers)
            producer = self._confirming
        produce_confirmed(producer, topic, key, value, what, timeout_s)

    def _record(self, command: Command) -> tuple[str, bytes, bytes]:
        value = self.codec.encode(command.schema_name, command.to_avro(), check=False)
        topic = topic_name(self.settings.topics, TopicRole.COMMANDS)
        return topic, command.service_id.encode(), value

    def _take(self, attempt_id: str, only: _Answer | None = None) -> _Answer | None:
        """The answer awaited for ``attempt_id`` (``only`` that one: a failed send must
        not settle the resend of its attempt), out of waiting: it is settled once."""
        with self._lock:
            waiting = self._waiting.get(attempt_id)
            if waiting is None or (only is not None and waiting is not only):
                return None
            return self._waiting.pop(attempt_id)

    def _listen(self) -> None:
        settled: list[Handover] = []  # the answers of one poll, handed over together

        def deliver(message: Message) -> None:
            decoded = self.codec.decode(message.value(), CommitResult.schema_name).value
            if (waiting := self._take(decoded["attemptId"])) is not None:
                waiting.settle(CommitResult.from_avro(decoded), released=settled)

        awake = False
        reports_due = 0.0
        while not self._closed.is_set():
            if time.monotonic() >= reports_due:  # failures only: a few times a second will do
                self._producer.poll(0)
                reports_due = time.monotonic() + REPORTS_EVERY_S
            if not self._awaited.is_set():
                if awake:
                    self._results.rest()
                    awake = False
                self._awaited.wait(0.2)
                continue
            if not awake:
                self._results.wake()
                awake = True
            try:
                self._results.poll(deliver, 0.2)
            finally:
                release_all(settled)
                settled.clear()

    def close(self) -> None:
        self._closed.set()
        self._listener.join(5)
        self._results.close()
        self._producer.flush(10)
        if self._confirming is not None:
            self._confirming.flush(10)


class DcbClient:
    def __init__(
        self,
        bootstrap_servers: Brokers | None = None,
        service_id: str = "default",
        *,
        settings: DcbSettings | None = None,
        writer_epoch: int = 0,
        timeout_s: float = 60.0,
        channel: CommitChannel | None = None,
        archive: ArchiveStore | None = None,
        keys: KeyStore | None = None,
    ) -> None:
        self.settings = settings or DcbSettings()
        # An address alone connects with the settings' credentials.
        kafka = self.settings.kafka
        self.bootstrap = connection(bootstrap_servers, like=kafka) if bootstrap_servers else kafka
        self.service_id = service_id
        self.writer_epoch = writer_epoch
        self.timeout_s = timeout_s
        self.codec = codec_from_settings(self.settings)
        self._owns_channel = channel is None
        self._channel = channel or CommitChannel(self.bootstrap, self.settings)
        self._events = EventIndex()
        # What the log dropped is read from the archive (the settings' one unless given).
        self._archive = archive
        self._archived_through: str | None = None  # what the index holds from the archive
        # Payloads of events with a subject tag are sealed under the subject's key.
        self._subject_prefix = self.settings.erasure.subject_prefix
        self._keys = keys
        self._certificate: Certificate | None = None
        self._appended_through: str | None = None  # the greatest SUID this client committed
        self._tails: dict[TopicRole, TopicTail] = {}
        self._tails_lock = threading.Lock()
        self._index_lock = threading.Lock()  # the caches, filled by one catch-up at a time
        # Reads ask for the events' ends together; one thread folds the events meanwhile.
        self._events_ends: dict[int, int] = {}
        self._events_ends_read = SharedCatchUp(self._ask_events_ends)
        self._follower: Follower | None = None
        self._certificates_read = SharedCatchUp(self._read_certificates)

    def for_service(self, service_id: str) -> DcbClient:
        """A client of another service sharing this one's producer and answer listener."""
        return DcbClient(
            self.bootstrap,
            service_id,
            settings=self.settings,
            writer_epoch=self.writer_epoch,
            timeout_s=self.timeout_s,
            channel=self._channel,
            archive=self._archive,
            keys=self._keys,
        )

    def _topic(self, role: TopicRole) -> str:
        return topic_name(self.settings.topics, role)

    # --- append ----------------------------------------------------------------------

    def append(
        self,
        events: Sequence[Event | EventData],
        condition: AppendCondition | None = None,
        *,
        attempt_id: str | None = None,
    ) -> AppendResult:
        """Commit ``events`` if no event matching ``condition`` came after its ``after``.

        ``attempt_id`` (default: a new UUID v7) makes the call idempotent: sending the same
        attempt again returns the first answer. Without an answer within ``timeout_s`` the
        attempt is sent once more; a second silence raises :class:`AnswerTimeoutError`.
        """
        return steps.run(self._appending(self._attempt(events, condition, attempt_id)), self._serve)

    def _attempt(
        self,
        events: Sequence[Event | EventData],
        condition: AppendCondition | None,
        attempt_id: str | None,
    ) -> CommitAttempt:
        """The attempt, valid (or the typed error) and sealed, before anything is sent."""
        return validate_attempt(
            CommitAttempt(
                attempt_id=attempt_id or str(uuid7()),
                writer_epoch=self.writer_epoch,
                events=[self._sealed(e.stored() if isinstance(e, Event) else e) for e in events],
                condition=condition,
            )
        )

    def _appending(self, attempt: CommitAttempt) -> steps.Steps[AppendResult]:
        # Each refusal names a trimmed table whose trim lies past the position so far, so
        # there are at most as many as the condition has guard tags.
        guards = len(guard_tags(attempt.condition)) if attempt.condition else 0
        for _ in range(guards):
            try:
                return (yield from self._committing(attempt))
            except errors.ConditionBelowArchiveError as exc:
                attempt = yield from self._repositioned(attempt, exc)
        return (yield from self._committing(attempt))

    def _committing(self, attempt: CommitAttempt) -> steps.Steps[AppendResult]:
        command = Command.of_commit(self.service_id, attempt)
        try:
            result = yield steps.Answered(command, attempt.attempt_id)
        except errors.AnswerTimeoutError:
            log.warning("no answer to attempt %s yet; sending it again", attempt.attempt_id)
            result = yield steps.Answered(command, attempt.attempt_id)
        if result.outcome == "COMMITTED":
            if result.suids:
                with self._index_lock:
                    newest = max(result.suids)
                    if self._appended_through is None or newest > self._appended_through:
                        self._appended_through = newest
            return AppendResult(attempt_id=attempt.attempt_id, suids=result.suids)
        raise error_from(result.error or ErrorInfo(code="rejected", message="rejected"))

    def _repositioned(
        self, attempt: CommitAttempt, refused: errors.ConditionBelowArchiveError
    ) -> steps.Steps[CommitAttempt]:
        """The attempt again, its condition positioned at what a tag table trimmed, once a
        read of the query over archive and log found no match after the old position (a
        match fails the append as the table would have). The new attempt id derives from
        the old one and the position, so sending the same attempt again (after a timeout,
        say) ends in the same attempt, answered as before: the attempt's own events, found
        by that read when it committed the first time, are no match."""
        condition = attempt.condition
        trimmed = refused.details.get("trimmedThrough")
        if condition is None or not isinstance(trimmed, str):
            raise refused
        found, head = yield from self._selecting(condition.fail_if_events_match, condition.after)
        own = {e.event_id for e in attempt.events}
        match = next((e for e in found if e.event.event_id not in own), None)
        if match is not None:
            raise errors.AppendConditionFailed(
                f"an event matching the condition exists after {condition.after} (read over "
                "the history archive and the log)",
                conflictingSuid=match.position,
            )
        if head is None or head < trimmed:
            raise refused  # the read did not reach the trimmed events: nothing is known
        return attempt.model_copy(
            update={
                "attempt_id": str(uuid.uuid5(_REPOSITIONED, f"{attempt.attempt_id}/{trimmed}")),
                "condition": condition.model_copy(update={"after": trimmed}),
            }
        )

    # --- read ------------------------------------------------------------------------

    def read(
        self, query: Sequence[QueryItem] = (), after: str | None = None, limit: int | None = None
    ) -> ReadResult:
        """Certified events matching ``query`` (every event when empty) after ``after``, in
        SUID order, at most ``limit``; with the head to use as ``after`` in a condition.
        Threads reading at once share the request for the ends, and one thread folds the
        events for all of them (:mod:`streams.sdk.follower`)."""
        return steps.run(self._reading(query, after, limit), self._serve)

    def _reading(
        self, query: Sequence[QueryItem], after: str | None, limit: int | None
    ) -> steps.Steps[ReadResult]:
        found, head = yield from self._selecting(query, after, limit)
        return ReadResult((yield steps.Opened(found)), head)

    def _selecting(
        self, query: Sequence[QueryItem], after: str | None, limit: int | None = None
    ) -> steps.Steps[tuple[list[SequencedEvent], str | None]]:
        """The matches and the head, caught up; payloads as stored (sealed ones unopened)."""
        with self._index_lock:
            mine = self._appended_through  # the appends answered before this call
        follower = self._events_follower()
        yield steps.EndsAsked()
        ends = self._events_ends  # asked for after this call (or later still)
        try:
            yield steps.Folded(follower, lambda: follower.reached(ends) and self._holds(mine))
        except TailTimeoutError as exc:
            raise TailTimeoutError(
                f"{self.service_id}: the events committed before this read (and up to {mine}, "
                f"committed by this client) were not readable within {self.timeout_s} s: {exc}",
                service_id=self.service_id,
            ) from exc
        with self._index_lock:
            return self._events.select(query, after, limit), self._events.head

    def _serve(self, wait: steps.Wait) -> Any:
        """A step's wait, served by blocking this thread."""
        if isinstance(wait, steps.Answered):
            return self._channel.request(wait.command, wait.attempt_id, self.timeout_s)
        if isinstance(wait, steps.EndsAsked):
            return self._events_ends_read.wait()
        if isinstance(wait, steps.Folded):
            return wait.follower.wait_until(wait.done, self.timeout_s)
        return self._opened(wait.events)

    def _holds(self, mine: str | None) -> bool:
        """Read-your-writes. A commit's answer and its events are in one transaction, but
        the broker writes its markers partition by partition: the answer can be readable
        a moment before the events partition's end moves past the event. So a read also
        waits until the index holds ``mine``, the newest SUID this client's appends had
        committed when the read was called; not what they commit meanwhile: with hundreds
        of threads appending through one client that target never stands still, and
        reads chased it (a fifth of a writer's time at 256 writers)."""
        if mine is None:
            return True
        with self._index_lock:
            head = self._events.head
        return head is not None and head >= mine

    def _events_follower(self) -> Follower:
        with self._tails_lock:
            if self._follower is None:
                tail = self._tail(TopicRole.EVENTS)
                self._follower = Follower(tail, self._fold, f"dcb-events-{self.service_id}")
            return self._follower

    def _ask_events_ends(self) -> None:
        """The events partition's end now, kept if it moved (ends only grow)."""
        with self._tails_lock:
            tail = self._tail(TopicRole.EVENTS)
        ends = tail.committed_ends()
        self._events_ends = {p: max(end, self._events_ends.get(p, 0)) for p, end in ends.items()}

    # --- sealed payloads (crypto-shredding) ------------------------------------------

    def _key_store(self) -> KeyStore:
        if self._keys is None:
            self._keys = open_key_store(self.settings)
        return self._keys

    def _sealed(self, event: EventData) -> EventData:
        """``event`` with its payload sealed under its subject's key (if it has one)."""
        if sealed_subject(event.payload) is not None:  # it would not open on this event
            raise errors.InvalidEventError(
                f"event {event.event_id}: its payload is in the sealed form; a payload is "
                "sealed by the client that appends it, not before",
                event_id=event.event_id,
            )
        if self._subject_prefix is None:
            return event
        subject = subject_of(event.tags, self._subject_prefix)
        if subject is None:
            return event
        key = self._key_store().key_for_writing(subject)
        return event.model_copy(
            update={"payload": seal(event.payload, subject, event.event_id, key)}
        )

    def _opened(self, events: list[SequencedEvent]) -> list[SequencedEvent]:
        """Sealed payloads opened, each subject's key looked up now: an erasure holds from
        the next read on (a shredded marker for the erased)."""
        lookup = KeyLookup(self._key_store)
        opened = []
        for e in events:
            event = open_event(e.event, lookup)
            opened.append(e if event is e.event else e.model_copy(update={"event": event}))
        return opened

    def certificate(self) -> Certificate | None:
        """The newest closed-prefix certificate of the service (``None`` before the first)."""
        self._certificates_read.wait()
        return self._latest_certificate()

    def _read_certificates(self) -> None:
        self._catch_up(TopicRole.CERTIFICATES, self._keep)

    def _latest_certificate(self) -> Certificate | None:
        with self._index_lock:
            return self._certificate

    def _catch_up(self, role: TopicRole, handle: Callable[[Message], None]) -> None:
        with self._tails_lock:
            tail = self._tail(role)
        tail.catch_up(handle)

    def _tail(self, role: TopicRole) -> TopicTail:
        """The tail of the service's partition of ``role``'s topic (under the tails lock)."""
        tail = self._tails.get(role)
        if tail is None:  # the service's partition only: its records are all there
            key = self.service_id.encode()
            truncated: Callable[[int], None] | None = None
            if role is TopicRole.EVENTS:  # history the log dropped is in the archive
                truncated = lambda _partition: self._load_archive()  # noqa: E731
            tail = TopicTail(
                self.bootstrap, self._topic(role), key=key, on_demand=True, on_truncated=truncated
            )
            self._tails[role] = tail
        return tail

    def _load_archive(self) -> None:
        """Index what the archive holds of this service beyond what is indexed, when the
        log turns out to have dropped records not yet read (the first read of a truncated
        log, too): ``dcb archive`` drops only what it has archived, after archiving it.
        A client of a log never truncated never opens the archive."""
        if self._archive is None:
            self._archive = open_archive(self.settings)
        archived = list(
            archived_events(self._archive, self.service_id, self.codec, self._archived_through)
        )
        with self._index_lock:
            head = self._events.head
            for header, record in archived:
                if head is None or record.suid > head:
                    self._events.add(SequencedEvent(position=record.suid, event=record.event))
                self._archived_through = header.through_suid

    def _fold(self, message: Message) -> None:
        # Only this service's events become models: the partition may hold other services'.
        record = self.codec.decode(message.value(), CommittedEvent.schema_name).value
        suid = record["suid"]
        archived = self._archived_through is not None and suid <= self._archived_through
        if record["serviceId"] == self.service_id and not archived:
            event = SequencedEvent(position=suid, event=EventData.from_avro(record["event"]))
            with self._index_lock:
                self._events.add(event)

    def _keep(self, message: Message) -> None:
        record = Certificate.from_bytes(self.codec, message.value())
        if record.service_id == self.service_id:
            with self._index_lock:
                self._certificate = record

    def reconcile(self, skip_grace: bool = False) -> None:
        """Ask the service's ledger for a reconcile pass (``skip_grace``: fence now); returns
        once the broker has the request, raises why it could not be sent otherwise."""
        command = reconcile_command(self.service_id, skip_grace, "sdk")
        self._channel.send_confirmed(command, "sending the reconcile request", self.timeout_s)

    def close(self) -> None:
        """Close the read tails, and the channel unless it is borrowed (``for_service``)."""
        with self._tails_lock:
            busy: object = None  # a tail still in use
            if self._follower is not None:
                self._follower.close()
                if not self._follower.stopped:  # still in a call: closing under it would crash
                    busy = self._follower.tail
                    log.warning("the events follower did not stop in time; its tail stays open")
            for tail in self._tails.values():
                if tail is not busy:
                    tail.close()
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> DcbClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncDcbClient:
    """The same API for asyncio code, waiting in the event loop: an append sends its command
    and awaits a future the answer listener sets; a read awaits the shared request for the
    ends (run in a thread: it blocks) and a future the follower sets. Hundreds of
    concurrent calls cost no thread each. Takes :class:`DcbClient`'s arguments; one client
    serves one event loop (it is made, used and closed in that loop)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._attach(DcbClient(*args, **kwargs))

    @classmethod
    def wrapping(cls, client: DcbClient) -> AsyncDcbClient:
        """An asyncio client sharing ``client``'s producer, listener, follower and index
        (closing it closes ``client``)."""
        view = cls.__new__(cls)
        view._attach(client)
        return view

    def _attach(self, client: DcbClient) -> None:
        """Through ``client``'s own shared catch-ups: one run at a time on its tails, for
        its threads and this loop's coroutines alike (two at once would share a consumer,
        and merge the ends out of order)."""
        self._client = client
        self._events_ends_read = LoopSharedCatchUp(client._events_ends_read.wait)
        self._certificates_read = LoopSharedCatchUp(client._certificates_read.wait)

    @property
    def service_id(self) -> str:
        return self._client.service_id

    def for_service(self, service_id: str) -> AsyncDcbClient:
        """A client of another service sharing this one's producer and answer listener."""
        return AsyncDcbClient.wrapping(self._client.for_service(service_id))

    async def append(
        self,
        events: Sequence[Event | EventData],
        condition: AppendCondition | None = None,
        *,
        attempt_id: str | None = None,
    ) -> AppendResult:
        """:meth:`DcbClient.append`."""
        client = self._client
        if client._subject_prefix is None:
            attempt = client._attempt(events, condition, attempt_id)
        else:  # sealing looks up the subject's key: a file or a database
            attempt = await asyncio.to_thread(client._attempt, events, condition, attempt_id)
        return await steps.run_async(client._appending(attempt), self._serve)

    async def read(
        self, query: Sequence[QueryItem] = (), after: str | None = None, limit: int | None = None
    ) -> ReadResult:
        """:meth:`DcbClient.read`."""
        return await steps.run_async(self._client._reading(query, after, limit), self._serve)

    async def _serve(self, wait: steps.Wait) -> Any:
        """A step's wait, awaited in the event loop (what blocks goes to a thread)."""
        client = self._client
        if isinstance(wait, steps.Answered):
            channel = client._channel
            return await channel.request_async(wait.command, wait.attempt_id, client.timeout_s)
        if isinstance(wait, steps.EndsAsked):
            return await self._events_ends_read.wait()
        if isinstance(wait, steps.Folded):
            return await wait.follower.wait_until_async(wait.done, client.timeout_s)
        if any(sealed_subject(e.event.payload) is not None for e in wait.events):
            return await asyncio.to_thread(client._opened, wait.events)  # keys looked up
        return wait.events

    async def certificate(self) -> Certificate | None:
        """:meth:`DcbClient.certificate`."""
        await self._certificates_read.wait()
        return self._client._latest_certificate()

    async def reconcile(self, skip_grace: bool = False) -> None:
        """:meth:`DcbClient.reconcile`."""
        await asyncio.to_thread(self._client.reconcile, skip_grace)

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

    async def __aenter__(self) -> AsyncDcbClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()
