"""The archive against Kafka: archive a service's certified history, drop what the log no
longer needs, read archive and log as one history, and audit the two together."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Message, TopicPartition

from streams.archive.api import ArchiveStore, Segment, SegmentHeader
from streams.archive.events import segment_events
from streams.archive.exceptions import ArchiveAuditError
from streams.archive.plan import (
    LogRecord,
    archived_through,
    merged_history,
    plan_segments,
    truncation_offset,
)
from streams.archive.rules import check_incarnation
from streams.archive.trim import request_trim
from streams.codec import codec_from_settings
from streams.errors import KafkaUnavailableError
from streams.kafka import clients
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import Certificate, CommittedEvent
from streams.model.suid import parse_suid
from streams.projections.certificates import Verdict, judge
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings

log = logging.getLogger("streams.archive")
CRASH_AFTER_APPEND = "after-append"  # DCB_ARCHIVE__CRASH_AT: tests of the retry


@dataclass(frozen=True)
class Partition:
    """One partition of ``dcb.events`` read whole: its records, and its bounds."""

    number: int
    records: list[LogRecord]
    low: int  # the log start offset (what the broker still holds)
    end: int  # the committed end


@dataclass(frozen=True)
class ArchiveReport:
    service: str
    through: str
    segments: int
    events: int
    partition: int
    truncated_below: int  # the partition's log start offset after the run
    dropped: int  # records the log dropped in this run
    held_back_by: str | None  # why the log keeps more: the service or projection in the way
    trim_requested: bool = False  # the tag tables were asked to drop what is archived


@dataclass(frozen=True)
class AuditReport:
    service: str
    segments: int
    archived_events: int
    log_events: int  # the service's events the log still holds above the archive
    overlap_checked: int  # archived events the log still holds, compared byte for byte


def read_partition(settings: DcbSettings, service: str) -> Partition:
    """Every committed event of the ``dcb.events`` partition ``service`` hashes to."""
    codec = codec_from_settings(settings)
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    records: list[LogRecord] = []

    def keep(message: Message) -> None:
        value = message.value() or b""
        event = CommittedEvent.from_bytes(codec, value)
        records.append(
            LogRecord(
                message.offset() or 0,
                event.service_id,
                event.suid,
                event.allocator_lineage_id,
                value,
            )
        )

    tail = TopicTail(settings.kafka, topic, key=service.encode())
    try:
        tail.catch_up(keep)
        number = tail.partitions[0]
        low, _ = tail.consumer.get_watermark_offsets(TopicPartition(topic, number), timeout=10)
        return Partition(number, records, low, tail.read_to[number])
    finally:
        tail.close()


def newest_certificate(settings: DcbSettings, service: str) -> Certificate | None:
    codec = codec_from_settings(settings)
    newest: list[Certificate] = []

    def keep(message: Message) -> None:
        cert = Certificate.from_bytes(codec, message.value())
        if cert.service_id == service:
            newest[:] = [cert]

    topic = topic_name(settings.topics, TopicRole.CERTIFICATES)
    tail = TopicTail(settings.kafka, topic, key=service.encode())
    try:
        tail.catch_up(keep)
    finally:
        tail.close()
    return newest[0] if newest else None


def certified_prefix(
    certificate: Certificate | None, service: str, lineage: str | None, partition: Partition
) -> str | None:
    """The prefix of a certificate a projection would trust, of this history, whose
    coverage the partition was read past: every event at or below the prefix was read."""
    if certificate is None or judge(certificate, service, None, None) is not Verdict.ACCEPTED:
        return None
    if lineage is not None:
        check_incarnation(service, lineage, certificate.allocator_lineage_id)
    covered = {c.partition: c.offset for c in certificate.coverage}
    if partition.end < covered.get(partition.number, 0):
        return None  # cannot happen when the certificate was read first; never guessed
    return certificate.closed_prefix_suid


def projections_keep_from(settings: DcbSettings, partition: int) -> tuple[int | None, str | None]:
    """The least offset of ``partition`` a projection has yet to read, and which one."""
    from streams.projections.lag_reader import checkpoints
    from streams.projections.runner import checkpoints_topic

    admin = clients.admin(settings.kafka)
    if checkpoints_topic(settings) not in admin.list_topics(timeout=10).topics:
        return None, None
    least: tuple[int | None, str | None] = (None, None)
    for projection, checkpoint in checkpoints(settings).items():
        offset = checkpoint.events_offsets.get(partition, 0)
        if least[0] is None or offset < least[0]:
            least = (offset, f"projection {projection}")
    return least


def archive_service(
    settings: DcbSettings,
    store: ArchiveStore,
    service: str,
    through: str,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ArchiveReport:
    """Archive ``service``'s events up to ``through`` (a certified SUID), then drop the
    prefix of its ``dcb.events`` partition that every service there has archived and
    every projection has read. Run again after a crash, it appends nothing new and
    drops what the crashed run did not."""
    parse_suid(through)
    # The certificate first, the log after it: every event at or below its prefix lies
    # below its coverage, so the read (to the end, later) holds all of them.
    certificate = newest_certificate(settings, service)
    partition = read_partition(settings, service)
    held = store.headers(service)
    lineage = held[0].incarnation if held else None
    lineage = lineage or next(
        (r.lineage for r in partition.records if r.service_id == service), None
    )
    certified = certified_prefix(certificate, service, lineage, partition)
    segments = plan_segments(
        service, partition.records, held, through, certified, settings.archive.segment_records
    )
    for done, segment in enumerate(segments, 1):
        store.append(service, segment)
        progress(done, len(segments))
    if settings.archive.crash_at == CRASH_AFTER_APPEND:
        log.error("crash point %s: exiting before the log is truncated", CRASH_AFTER_APPEND)
        os._exit(70)
    archived_now = archived_through(store.headers(service))
    neighbours = {r.service_id for r in partition.records} - {service}
    archived = {s: archived_through(store.headers(s)) for s in neighbours}
    archived[service] = archived_now
    cut = truncation_offset(partition.records, archived, partition.end)
    blocker = next((r.service_id for r in partition.records if r.offset == cut), None)
    keep_from, projection = projections_keep_from(settings, partition.number)
    if keep_from is not None and keep_from < cut:  # never past what a projection must read
        cut, blocker = keep_from, projection
    if cut > partition.low:
        _delete_records(settings, partition.number, cut)
    dropped = sum(1 for r in partition.records if r.offset < cut)
    if archived_now is not None:  # the tables drop it too, whatever the log keeps
        request_trim(settings, service, min(archived_now, through))
    return ArchiveReport(
        service=service,
        through=through,
        segments=len(segments),
        events=sum(s.header.count for s in segments),
        partition=partition.number,
        truncated_below=max(cut, partition.low),
        dropped=dropped,
        held_back_by=blocker if cut < partition.end else None,
        trim_requested=archived_now is not None,
    )


def _delete_records(settings: DcbSettings, partition: int, before: int) -> None:
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    admin = clients.admin(settings.kafka)
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        try:
            future.result(30)
        except Exception as exc:
            raise KafkaUnavailableError(
                f"dropping {topic}[{partition}] below {before}: {exc}", topic=topic
            ) from exc
    log.info("%s[%d]: records below offset %d dropped", topic, partition, before)


def _archived(
    settings: DcbSettings, segments: list[Segment]
) -> list[tuple[SegmentHeader, LogRecord]]:
    """Each archived event decoded, with its segment's header (offset -1: not in the log)."""
    codec = codec_from_settings(settings)
    return [
        (segment.header, LogRecord(-1, e.service_id, e.suid, e.allocator_lineage_id, value))
        for segment in segments
        for e, value in segment_events(segment, codec)
    ]


def history(settings: DcbSettings, store: ArchiveStore, service: str) -> list[LogRecord]:
    """``service``'s committed events as the log wrote them, archive and log as one, in
    SUID order (the log's copies of archived events left out)."""
    segments = store.read(service)
    archived = [record for _, record in _archived(settings, segments)]
    through = archived_through([s.header for s in segments])
    return merged_history(archived, through, read_partition(settings, service).records, service)


def audit(settings: DcbSettings, store: ArchiveStore, service: str) -> AuditReport:
    """What can be proven from archive and log alone: every segment's digest holds
    (reading checks it), each archived event is the service's and lies inside its
    segment's bounds, the archived events the log still holds are the same bytes, and
    archive then log ascend strictly in SUID order, with nothing twice."""
    segments = store.read(service)
    archived = _archived(settings, segments)
    for header, record in archived:
        if record.service_id != service or not (
            header.from_suid <= record.suid <= header.through_suid
        ):
            raise ArchiveAuditError(
                f"{service}: archived event {record.suid} of {record.service_id!r} does not "
                f"belong in segment {header.describe()}",
                service=service,
            )
    through = archived_through([s.header for s in segments])
    mine = [r for r in read_partition(settings, service).records if r.service_id == service]
    whole = merged_history([r for _, r in archived], through, mine, service)
    for before, after in itertools.pairwise(whole):
        if after.suid <= before.suid:
            raise ArchiveAuditError(
                f"{service}: {after.suid} follows {before.suid}: archive and log overlap or "
                "are out of order",
                service=service,
            )
    by_suid = {r.suid: r.value for _, r in archived}
    overlap = [r for r in mine if through is not None and r.suid <= through]
    for record in overlap:
        if by_suid.get(record.suid) != record.value:
            raise ArchiveAuditError(
                f"{service}: the log's event {record.suid} (offset {record.offset}) is "
                "not what the archive holds for it",
                service=service,
            )
    return AuditReport(
        service=service,
        segments=len(segments),
        archived_events=len(archived),
        log_events=len(mine) - len(overlap),
        overlap_checked=len(overlap),
    )
