"""``dcb erase``: destroy a subject's key, and count what that made unreadable."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Message

from streams.archive import ArchiveStore, open_archive
from streams.archive.events import all_keys, archived_events
from streams.codec import codec_from_settings
from streams.erasure.keys import KeyStore
from streams.erasure.sealing import sealed_subject
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import CommittedEvent
from streams.sdk.tail import TopicTail
from streams.settings import DcbSettings


@dataclass(frozen=True)
class ErasureReport:
    subject: str
    key_destroyed: bool  # False: erased before (or never written): erasure is idempotent
    unreadable_events: int  # the subject's sealed events, in the hot log or the archive
    archived_events: int  # of them, those the archive holds (the log may hold them too)
    services: list[str]  # the services those events belong to


def erase(
    settings: DcbSettings, keys: KeyStore, subject: str, archive: ArchiveStore | None = None
) -> ErasureReport:
    """Destroy ``subject``'s key first, then count its sealed events in ``dcb.events`` (to
    the committed end) and in the archive (``archive``, default the settings' one), each
    event once: every copy of them (log, archive, read models built from them afresh) is
    ciphertext no key opens now."""
    destroyed = keys.destroy(subject)
    codec = codec_from_settings(settings)
    found: set[tuple[str, str]] = set()  # (service, SUID)

    def tally(record: CommittedEvent) -> bool:
        if sealed_subject(record.event.payload) != subject:
            return False
        found.add((record.service_id, record.suid))
        return True

    def tally_message(message: Message) -> None:
        tally(CommittedEvent.from_bytes(codec, message.value()))

    tail = TopicTail(settings.kafka, topic_name(settings.topics, TopicRole.EVENTS))
    try:
        tail.catch_up(tally_message)
    finally:
        tail.close()
    store = archive or open_archive(settings)
    archived = sum(
        tally(record) for key in all_keys(store) for _, record in archived_events(store, key, codec)
    )
    return ErasureReport(
        subject, destroyed, len(found), archived, sorted({service for service, _ in found})
    )
