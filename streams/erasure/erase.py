"""``dcb erase``: destroy a subject's key, and count what that made unreadable."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Message

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
    unreadable_events: int  # events the hot log (dcb.events) holds sealed under the subject
    services: list[str]  # the services those events belong to


def erase(settings: DcbSettings, keys: KeyStore, subject: str) -> ErasureReport:
    """Destroy ``subject``'s key first, then read ``dcb.events`` to the committed end
    and count its sealed events there (archived ones are not counted): every copy of them
    (log, archive, read models built from them afresh) is ciphertext no key opens now."""
    destroyed = keys.destroy(subject)
    codec = codec_from_settings(settings)
    count = 0
    services: set[str] = set()

    def tally(message: Message) -> None:
        nonlocal count
        record = CommittedEvent.from_avro(
            codec.decode(message.value(), CommittedEvent.schema_name).value
        )
        if sealed_subject(record.event.payload) == subject:
            count += 1
            services.add(record.service_id)

    tail = TopicTail(settings.kafka, topic_name(settings.topics, TopicRole.EVENTS))
    try:
        tail.catch_up(tally)
    finally:
        tail.close()
    return ErasureReport(subject, destroyed, count, sorted(services))
