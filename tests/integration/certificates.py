"""An oracle over every certificate a run published, from dcb.events read independently."""

from __future__ import annotations

from collections import defaultdict

from streams.codec import AvroCodec, SchemaCatalog
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import Certificate, CommittedEvent
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import read_all


def check_every_certificate(settings: DcbSettings, services: set[str]) -> int:
    """Each service's certificates, in the order published: the prefix and the coverage never
    move back, and every committed event at or below a prefix lies below its coverage
    (read_committed, as projections read). Returns how many certificates were checked."""
    codec = AvroCodec(SchemaCatalog())
    bootstrap = settings.resolved_bootstrap_servers
    events: dict[str, list[tuple[str, int, int]]] = defaultdict(list)  # suid, partition, offset
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    for message in read_all(bootstrap, topic, expect_at_least=1):
        event = CommittedEvent.from_avro(
            codec.decode(message.value(), CommittedEvent.schema_name).value
        )
        where = (message.partition() or 0, message.offset() or 0)
        events[event.service_id].append((event.suid, *where))
    certificates: dict[str, list[Certificate]] = defaultdict(list)
    topic = topic_name(settings.topics, TopicRole.CERTIFICATES)
    for message in read_all(bootstrap, topic, expect_at_least=len(services)):
        certificate = Certificate.from_avro(
            codec.decode(message.value(), Certificate.schema_name).value
        )
        certificates[certificate.service_id].append(certificate)
    checked = 0
    for service in services:
        prefix, end = "", 0
        for certificate in certificates[service]:
            assert (certificate.closed_prefix_suid or "") >= prefix, "the prefix moved back"
            prefix = certificate.closed_prefix_suid or ""
            covered = {c.partition: c.offset for c in certificate.coverage}
            for suid, partition, offset in events[service]:
                if suid <= prefix:
                    assert offset < covered.get(partition, 0), (service, suid, certificate)
            offset_now = max(covered.values(), default=0)
            assert offset_now >= end, "the coverage moved back"
            end = offset_now
            checked += 1
        assert certificates[service], f"no certificate for {service}"
    return checked
