"""After archiving: the TRIM command that lets a service's tag tables drop what is archived.

The ledger checks the SUID against the certified prefix and passes it to every tag
partition the service's tables may lie in; a table then refuses conditions positioned
below what it dropped (``condition_below_archive``), which ``DcbClient.append`` answers by
reading the query over archive and log. Sent after the archive append, like the
truncation: a crash in between leaves the tables whole, and the next run asks again.
"""

from __future__ import annotations

from streams.codec import codec_from_settings
from streams.kafka import clients
from streams.kafka.refusals import produce_confirmed
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import Command, TrimRequest
from streams.settings import DcbSettings


def trim_command(service_id: str, through: str, requested_by: str) -> Command:
    return Command.of_request(service_id, TrimRequest(through=through, requested_by=requested_by))


def request_trim(settings: DcbSettings, service_id: str, through: str) -> None:
    """Send the TRIM command and wait until the broker has it (idempotent: a table that
    dropped through ``through`` already drops nothing more)."""
    command = trim_command(service_id, through, "dcb archive")
    value = codec_from_settings(settings).encode(command.schema_name, command.to_avro())
    producer = clients.producer(settings.kafka)
    topic = topic_name(settings.topics, TopicRole.COMMANDS)
    what = f"sending the TRIM command for {service_id}"
    produce_confirmed(producer, topic, service_id.encode(), value, what, 30)
