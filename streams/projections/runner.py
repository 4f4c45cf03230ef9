"""``dcb project``: the Kafka shell around :class:`~streams.projections.core.ProjectionCore`.

Each projection has its own consumer of ``dcb.events`` and ``dcb.certificates`` (every
partition, assigned: its positions are in its checkpoint, its group only names it) and its
own transactional producer; both are named ``<topic prefix>projection-<id>``.
A pass's changed rows (to the compacted ``<prefix>projection.<id>``, key = row id,
tombstone = deleted, in Kafka Connect's JSON: ``row_format``) and its checkpoint (to the compacted
``<prefix>projection-checkpoints``, key = projection id) go in one transaction, so rows
and checkpoint are committed together or not at all. A runner starting (or a rebuild)
with the same transactional id fences the one before and aborts what it left open; it
then reads rows and checkpoint to their committed end and reads on from the checkpoint's
offsets. Any failed transaction is handled the same way: the projection forgets what it
had not committed and restores.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from streams.archive import open_archive
from streams.archive.events import all_keys, archived_events
from streams.codec import codec_from_settings
from streams.erasure import open_key_store
from streams.erasure.opener import KeyLookup, open_event
from streams.errors import CodecError
from streams.kafka import clients
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicLayout, TopicRole, topic_name
from streams.model.records import Certificate, CommittedEvent
from streams.projections.api import Projector, ProjectorRegistry, Row
from streams.projections.checkpoint import Checkpoint
from streams.projections.core import Pass, ProjectionCore
from streams.projections.exceptions import (
    CorruptCheckpointError,
    HistoryTruncatedError,
    LogDroppedError,
    ProjectionFencedError,
    ProjectionResetError,
)
from streams.projections.http import HealthServer
from streams.projections.lag import ProjectionLag, projection_lag
from streams.projections.metrics import RunnerMetrics
from streams.projections.outcomes import Observation, Observer, notify, observation
from streams.projections.row_format import decode_key, decode_value, encode_key, encode_value
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings

log = logging.getLogger(__name__)

CRASH_POINTS = ("before-rows", "mid-rows", "before-checkpoint", "before-commit", "after-commit")
# An offset the log no longer has (retention deleted events not yet applied) is an error,
# never a silent jump to what is left.
_CONSUMER: dict[str, Any] = {
    "enable.partition.eof": True,
    "fetch.wait.max.ms": 10,  # a read_committed reader sees a commit on its next fetch
    "auto.offset.reset": "error",
}
REFENCE_WINDOW_S = 30.0  # fenced again this soon after a restore: another runner is live
FENCE_BACKOFF_S = 2.0  # a fencer (a rebuild) gets this long to finish before we fence it
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_PRODUCE_POLL_EVERY = 1_000  # delivery reports served while a big transaction is queued


def rows_topic(settings: DcbSettings, projection_id: str) -> str:
    return f"{settings.topics.prefix}projection.{projection_id}"


def _opened(record: CommittedEvent, lookup: KeyLookup) -> CommittedEvent:
    """``record`` with its payload opened (a sealed one: clear, or the shredded marker)."""
    event = open_event(record.event, lookup)
    return record if event is record.event else record.model_copy(update={"event": event})


def checkpoints_topic(settings: DcbSettings) -> str:
    return f"{settings.topics.prefix}projection-checkpoints"


def transactional_id(settings: DcbSettings, projection_id: str) -> str:
    """The runner's transactional id, and its consumer group: inside the topic prefix, so
    a tenant's prefixed ACLs cover them."""
    return f"{settings.topics.prefix}projection-{projection_id}"


def ensure_projection_topics(settings: DcbSettings, projection_ids: Sequence[str]) -> None:
    rf = settings.topics.replication_factor
    layouts = [TopicLayout(checkpoints_topic(settings), 1, rf, "compact")]
    layouts += [TopicLayout(rows_topic(settings, i), 1, rf, "compact") for i in projection_ids]
    ensure_topics(clients.admin(settings.kafka), layouts)


class CrashPoints:
    """``POINT@N`` (settings.projections.crash_at): SIGKILL at the N-th time at POINT."""

    def __init__(self, spec: str | None) -> None:
        self.point, self.left = None, 0
        if spec:
            point, _, n = spec.partition("@")
            if point not in CRASH_POINTS:
                raise ValueError(f"crash point {point!r} is not one of {', '.join(CRASH_POINTS)}")
            self.point, self.left = point, int(n or 1)

    def reach(self, point: str) -> None:
        if point == self.point:
            self.left -= 1
            if self.left <= 0:
                log.warning("crash point %s reached: killing this process", point)
                os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Restored:
    checkpoint: Checkpoint
    rows: dict[str, Row]
    checkpoints_end: TopicPartition  # where the checkpoints topic was read to


def _read_topic(
    settings: DcbSettings, topic: str, handle: Callable[[Message], None], key: bytes | None
) -> TopicPartition:
    """Every committed record of ``topic`` (of ``key``'s partition) to ``handle``; where
    it ended."""
    tail = TopicTail(settings.kafka, topic, key=key)
    try:
        tail.catch_up(handle, timeout_s=60)
        [(partition, end)] = tail.read_to.items()
        return TopicPartition(topic, partition, end)
    finally:
        tail.close()


def read_rows(settings: DcbSettings, projection_id: str) -> dict[str, Row]:
    rows: dict[str, Row] = {}

    def fold(message: Message) -> None:
        row_id = decode_key(message.key() or b"")
        value = message.value()
        if value is None:
            rows.pop(row_id, None)
        else:
            rows[row_id] = decode_value(value)

    _read_topic(settings, rows_topic(settings, projection_id), fold, None)
    return rows


def restore(settings: DcbSettings, projection_id: str) -> Restored:
    """The committed rows and checkpoint of ``projection_id`` (read after this process's
    producer fenced the one before, so nothing of it is still open)."""
    found: list[Checkpoint] = []
    key = projection_id.encode()

    def keep(message: Message) -> None:
        if message.key() != key:
            return
        value = message.value()
        if value is None:  # a deleted projection: start from nothing
            found.clear()
            return
        try:
            found[:] = [Checkpoint.model_validate_json(value)]
        except ValueError as exc:
            raise CorruptCheckpointError(
                f"checkpoint of {projection_id} does not parse: {exc}; "
                f"`dcb project rebuild {projection_id}` starts it again",
                projection_id=projection_id,
            ) from exc

    end = _read_topic(settings, checkpoints_topic(settings), keep, key)
    rows = read_rows(settings, projection_id)
    checkpoint = found[0] if found else Checkpoint(projection_id=projection_id)
    if checkpoint.rows != len(rows):
        raise CorruptCheckpointError(
            f"checkpoint of {projection_id} counts {checkpoint.rows} rows, its topic has "
            f"{len(rows)}; `dcb project rebuild {projection_id}` starts it again",
            projection_id=projection_id,
        )
    return Restored(checkpoint, rows, end)


class ProjectionRunner:
    """One projection, polled by :meth:`poll` (one thread at a time)."""

    def __init__(
        self,
        projector: Projector,
        settings: DcbSettings,
        observers: Sequence[Observer] = (),
        metrics: RunnerMetrics | None = None,
    ) -> None:
        self.projector = projector
        self.metrics = metrics or RunnerMetrics()
        self.available = False  # restored, and the last poll did not fail
        self._lock = threading.Lock()  # the core: polled by one thread, read by the endpoint
        self.settings = settings
        self._keys = open_key_store(settings)  # sealed payloads are opened for the folds
        self.observers = [*observers, self.metrics.observe]
        self.codec = codec_from_settings(settings)
        self.crash = CrashPoints(settings.projections.crash_at)
        self.bootstrap = settings.kafka
        self.events_topic = topic_name(settings.topics, TopicRole.EVENTS)
        self.certificates_topic = topic_name(settings.topics, TopicRole.CERTIFICATES)
        self.checkpoints_topic = checkpoints_topic(settings)
        self._writer = ""  # this runner's mark on the checkpoints it writes
        self._failures = 0  # polls failed in a row
        self._noted_at = 0.0
        self._foreign_seen = 0
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._restored_at = 0.0
        self._committed: Checkpoint | None = None
        self._committed_at = 0.0
        self.core = self._open()

    def _open(self) -> ProjectionCore:
        """Fence the runner before, restore what it committed, read on from there."""
        self.close()
        self._producer = clients.transactional_producer(
            self.bootstrap, transactional_id(self.settings, self.projector.id)
        )
        restored = restore(self.settings, self.projector.id)
        checkpoint, rows = restored.checkpoint, restored.rows
        self._committed, self._committed_at = checkpoint, time.monotonic()
        self._writer = uuid.uuid4().hex
        self._restored_at = time.monotonic()
        consumer = clients.consumer(
            self.bootstrap,
            transactional_id(self.settings, self.projector.id),
            **_CONSUMER,
        )
        core = ProjectionCore(
            self.projector, checkpoint, rows, self.settings.projections.max_apply_per_pass
        )
        # The checkpoints too: one written by another (a rebuild) means start again.
        assignment = [restored.checkpoints_end]
        try:
            topic = self.events_topic
            for p, at in self._events_starts(core, consumer, checkpoint.events_offsets).items():
                assignment.append(TopicPartition(topic, p, at))
            topic = self.certificates_topic
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            offsets = checkpoint.certificates_offsets
            assignment += [
                TopicPartition(topic, p, offsets.get(p, OFFSET_BEGINNING)) for p in partitions
            ]
            consumer.assign(assignment)
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer
        log.info(
            "projection %s restored: %d rows, %d events applied, reading on from %s",
            self.projector.id,
            len(rows),
            checkpoint.applied,
            checkpoint.events_offsets or "the beginning",
        )
        return core

    def _events_starts(
        self, core: ProjectionCore, consumer: Consumer, offsets: dict[int, int]
    ) -> dict[int, int]:
        """Where each ``dcb.events`` partition is read from: the checkpoint's offset, or,
        when the log has dropped records below it (``dcb archive``), the log start, once
        the archive's events of that partition's services are offered to the core. They
        are certified history (the archive takes nothing above a trusted prefix), so the
        gate releases them in SUID order like any other; offered again after a restart,
        the gate drops what it applied already."""
        topic = self.events_topic
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        lows = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
            for p in partitions
        }
        dropped = {p: low for p, low in lows.items() if offsets.get(p, 0) < low}
        if dropped:
            self._offer_archived(core, dropped, len(partitions))
        return {p: max(offsets.get(p, 0), low) for p, low in lows.items()}

    def _offer_archived(
        self, core: ProjectionCore, dropped: dict[int, int], partitions: int
    ) -> None:
        """Offer the archived events of each partition in ``dropped`` (partition: log start)
        as if read just below the log start."""
        store = open_archive(self.settings)
        services: defaultdict[int, list[str]] = defaultdict(list)
        for key in all_keys(store):  # listed once for every partition
            services[key_partition(key.encode(), partitions)].append(key)
        lookup = KeyLookup(lambda: self._keys)
        for partition, low in dropped.items():
            if not services[partition]:
                raise HistoryTruncatedError(
                    f"projection {self.projector.id}: {self.events_topic}[{partition}] dropped "
                    f"the records below offset {low} and the archive holds no history of that "
                    "partition's services (dropped by retention before dcb archive took them?)",
                    projection_id=self.projector.id,
                    partition=partition,
                )
            offered = 0
            for service in services[partition]:
                for _, record in archived_events(store, service, self.codec):
                    core.offer_event(_opened(record, lookup), partition, low - 1)
                    offered += 1
            log.info(
                "projection %s: %s[%d] starts at offset %d; %d archived events of %d "
                "service(s) offered from the archive",
                self.projector.id,
                self.events_topic,
                partition,
                low,
                offered,
                len(services[partition]),
            )

    def poll(self, timeout_s: float = 0.2) -> Observation:
        """Read what is there, run one pass, commit it; the poll's one outcome."""
        at = time.time()
        try:
            with self._lock:
                self._read(timeout_s)
                done = self.core.run_pass(at)
            self._commit_if_due(done)
            seen = observation(self.projector.id, at, done.applied, done.gated)
            self.available, self._failures = True, 0
            self._note(at)
        except HistoryTruncatedError:
            raise
        except Exception as exc:
            seen = observation(self.projector.id, at, 0, None, exc)
            self.available = False
            self._recover(exc)
        notify(self.observers, seen)
        return seen

    def _note(self, at: float) -> None:
        """Now and then: the lag gauges, and a warning for events of a foreign lineage."""
        if at - self._noted_at < 1.0:
            return
        self._noted_at = at
        if (lag := self.lag()) is not None:
            self.metrics.lagging(lag)
        if (foreign := self.core.foreign_events()) > self._foreign_seen:
            self._foreign_seen = foreign
            log.warning(
                "projection %s dropped %d events of another allocator lineage than their "
                "service's first events (a re-created service? rebuild the projection)",
                self.projector.id,
                foreign,
            )

    def _read(self, timeout_s: float) -> None:
        assert self._consumer is not None
        limit = self.settings.projections.max_batch_records
        batch = clients.take_ready(self._consumer, limit, timeout_s)
        lookup = KeyLookup(lambda: self._keys)  # keys as they are now: an erasure holds
        for message in batch:
            topic, partition = message.topic(), message.partition() or 0
            offset = message.offset() or 0
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if topic == self.events_topic:
                        self.core.note_end({partition: offset})
                elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                    raise LogDroppedError(
                        f"projection {self.projector.id}: {topic}[{partition}] dropped records "
                        f"it has still to read ({error.str()}); restoring from the checkpoint "
                        "reads them from the archive",
                        projection_id=self.projector.id,
                    )
                elif error.fatal():
                    raise KafkaException(error)
                else:  # transient (a broker moving, a connection dropped): librdkafka retries
                    log.warning("projection %s: %s", self.projector.id, error.str())
                continue
            if topic == self.checkpoints_topic:
                self._check_owner(message)
            elif topic == self.events_topic:
                record = CommittedEvent.from_bytes(self.codec, message.value())
                self.core.offer_event(_opened(record, lookup), partition, offset)
            else:
                self._certificate(message, partition, offset)

    def _check_owner(self, message: Message) -> None:
        if message.key() != self.projector.id.encode():
            return
        value = message.value()
        writer = None if value is None else json.loads(value).get("writer")
        if writer != self._writer:
            raise ProjectionResetError(
                f"projection {self.projector.id}: a checkpoint by another writer (a rebuild?)",
                projection_id=self.projector.id,
            )

    def _certificate(self, message: Message, partition: int, offset: int) -> None:
        key_service = (message.key() or b"").decode(errors="replace")
        record: Certificate | None
        try:
            value = self.codec.decode(message.value(), Certificate.schema_name).value
            record = Certificate.from_avro(value)
        except (CodecError, ValueError):
            record = None
        verdict = self.core.offer_certificate(record, key_service, partition, offset)
        if record is None or verdict.value not in ("accepted", "unchanged"):
            self.metrics.ignored_certificate(self.projector.id, verdict.value)
            log.warning(
                "projection %s ignores the certificate at %s[%d]@%d (service %r): %s",
                self.projector.id,
                self.certificates_topic,
                partition,
                offset,
                key_service,
                verdict.value,
            )

    def _commit_if_due(self, done: Pass) -> None:
        if not done.applied:
            waited = time.monotonic() - self._committed_at
            if waited < self.settings.projections.checkpoint_interval_s:
                return
            if done.checkpoint == self._committed:
                return
        self._commit(done)

    def _commit(self, done: Pass) -> None:
        producer = self._producer
        assert producer is not None
        started = time.monotonic()
        self.crash.reach("before-rows")
        producer.begin_transaction()
        rows = rows_topic(self.settings, self.projector.id)
        for n, (row_id, row) in enumerate(done.changes.items()):
            value = None if row is None else encode_value(row)
            producer.produce(rows, key=encode_key(row_id), value=value)
            if n % _PRODUCE_POLL_EVERY == 0:
                producer.poll(0)
            if n == 0 and len(done.changes) > 1:
                producer.flush(10)  # on the broker, uncommitted, when the crash comes
                self.crash.reach("mid-rows")
        self.crash.reach("before-checkpoint")
        producer.produce(
            checkpoints_topic(self.settings),
            key=self.projector.id.encode(),
            value=done.checkpoint.model_copy(update={"writer": self._writer})
            .model_dump_json()
            .encode(),
        )
        self.crash.reach("before-commit")
        producer.commit_transaction(30)
        self.crash.reach("after-commit")
        self._committed, self._committed_at = done.checkpoint, time.monotonic()
        self.metrics.committed(self.projector.id, self._committed_at - started, len(done.changes))

    def _recover(self, exc: Exception) -> None:
        """Forget what was not committed: fence, restore, read on from the checkpoint.
        Fenced, it first lets the fencer (a rebuild) finish; fenced again soon after a
        restore, another runner of the projection is live, and this one stops. Failing
        again and again, it backs off (a record it cannot handle fails every time)."""
        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        fenced = isinstance(error, KafkaError) and error.code() in _FENCED
        if fenced and time.monotonic() - self._restored_at < REFENCE_WINDOW_S:
            # Kafka's fencing names no token; this runner's own is the one it wrote with.
            raise ProjectionFencedError.of(
                f"projection {self.projector.id} (fenced again within "
                f"{REFENCE_WINDOW_S:.0f} s of taking over: another runner of it is live)",
                self._writer,
                None,
            ) from exc
        self._failures += 1
        pause = FENCE_BACKOFF_S if fenced else min(0.25 * 2**self._failures, 30.0)
        log.warning(
            "projection %s: %s; restoring from its checkpoint in %.1f s",
            self.projector.id,
            exc,
            pause,
        )
        time.sleep(pause)
        try:
            core = self._open()
            with self._lock:
                self.core = core
            self.available = True
        except HistoryTruncatedError:
            raise  # history nowhere to be read: restoring again cannot help
        except Exception:
            log.exception("projection %s could not restore; trying again", self.projector.id)

    def lag(self) -> ProjectionLag | None:
        """Where the projection stands, from what this runner has read (``None`` while its
        storage is unavailable). Events behind: read and waiting for a certificate."""
        if not self.available:
            return None
        with self._lock:
            core = self.core
            checkpoint = core.checkpoint()
            heads = {
                s: (core.head.get(s) or g.applied_through, len(g.waiting))
                for s, g in core.gates.items()
            }
        return projection_lag(checkpoint, heads, time.time())

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._producer = None


def rebuild(settings: DcbSettings, projection_id: str, attempts: int = 3) -> int:
    """Start ``projection_id`` again from the beginning of history: in one transaction,
    delete its rows and reset its checkpoint (a corrupt checkpoint included). The
    transactional id fences a runner of it that is live; that runner waits a moment,
    restores the empty state and replays. Returns the rows deleted."""
    ensure_projection_topics(settings, [projection_id])
    for attempt in range(1, attempts + 1):
        try:
            return _reset(settings, projection_id)
        except KafkaException as exc:
            if attempt == attempts or exc.args[0].code() not in _FENCED:
                raise
            log.warning("rebuild of %s fenced by its runner; trying again", projection_id)
    raise AssertionError("unreachable")


def _reset(settings: DcbSettings, projection_id: str) -> int:
    producer = clients.transactional_producer(
        settings.kafka, transactional_id(settings, projection_id)
    )
    rows = read_rows(settings, projection_id)
    producer.begin_transaction()
    for n, row_id in enumerate(rows):
        producer.produce(rows_topic(settings, projection_id), key=encode_key(row_id), value=None)
        if n % _PRODUCE_POLL_EVERY == 0:
            producer.poll(0)
    fresh = Checkpoint(projection_id=projection_id)
    producer.produce(
        checkpoints_topic(settings),
        key=projection_id.encode(),
        value=fresh.model_dump_json().encode(),
    )
    producer.commit_transaction(30)
    log.info("projection %s reset: %d rows deleted", projection_id, len(rows))
    return len(rows)


def run_projections(
    registry: ProjectorRegistry,
    settings: DcbSettings,
    stop: threading.Event,
    observers: Sequence[Observer] = (),
) -> None:
    """Run every registered projection until ``stop``: at most
    ``settings.projections.max_concurrent`` poll at the same time, in turn (a pool whose
    queue is first come, first served; each projection queues its next poll when its last
    one is done, so none starves); lag and ``/metrics`` served over HTTP. A projection
    fenced by another live runner stops this process (exit ``stale_fence``)."""
    ensure_projection_topics(settings, registry.ids())
    metrics = RunnerMetrics()
    runners: dict[str, ProjectionRunner] = {}

    def lag_of(projection_id: str) -> ProjectionLag | None:
        runner = runners.get(projection_id)
        return None if runner is None else runner.lag()

    def start(projector: Projector) -> None:
        runners[projector.id] = ProjectionRunner(projector, settings, observers, metrics)

    config = settings.projections
    health = HealthServer(
        {i: partial(lag_of, i) for i in registry.ids()},
        metrics,
        config.http_host,
        config.http_port,
    ).start()
    pool = ThreadPoolExecutor(config.max_concurrent, thread_name_prefix="projection")
    in_flight: dict[str, Future[object]] = {p.id: pool.submit(start, p) for p in registry}
    try:
        while not stop.is_set():
            for projection_id, future in list(in_flight.items()):
                if future.done():
                    future.result()  # a projection that cannot go on stops them all
                    in_flight[projection_id] = pool.submit(runners[projection_id].poll)
            wait(in_flight.values(), timeout=0.1, return_when=FIRST_COMPLETED)
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        for runner in runners.values():
            runner.close()
        health.stop()
