"""The topics of DESIGN.md §3: names, partition counts, cleanup policies and record types.

Pure data derived from settings; :mod:`streams.kafka.topic_admin` creates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from aiokafka.partitioner import murmur2

from streams.model import records
from streams.settings import DcbSettings, TopicSettings


class TopicRole(StrEnum):
    """A logical topic; its value is the default name without the prefix."""

    COMMANDS = "commands"
    ALLOCATIONS = "allocations"
    TAG_DELIVERIES = "tag-deliveries"
    TAG_RESOLUTIONS = "tag-resolutions"
    EVENTS = "events"
    CERTIFICATES = "certificates"
    COMMIT_RESULTS = "commit-results"
    DEAD_LETTERS = "dead-letters"


RECORD_TYPES: dict[TopicRole, type[records.AvroRecord]] = {
    TopicRole.COMMANDS: records.Command,
    TopicRole.ALLOCATIONS: records.Allocation,
    TopicRole.TAG_DELIVERIES: records.TagDelivery,
    TopicRole.TAG_RESOLUTIONS: records.TagResolution,
    TopicRole.EVENTS: records.CommittedEvent,
    TopicRole.CERTIFICATES: records.Certificate,
    TopicRole.COMMIT_RESULTS: records.CommitResult,
    TopicRole.DEAD_LETTERS: records.DeadLetter,
}

_COMPACTED = {TopicRole.CERTIFICATES}


@dataclass(frozen=True)
class TopicLayout:
    """What :mod:`streams.kafka.topic_admin` creates and checks: a topic's shape."""

    name: str
    partitions: int
    replication_factor: int
    cleanup_policy: str

    def config(self) -> dict[str, str]:
        return {"cleanup.policy": self.cleanup_policy}


@dataclass(frozen=True)
class TopicSpec(TopicLayout):
    """One of the topics of DESIGN.md §3, with the record type it carries."""

    role: TopicRole

    @property
    def schema_name(self) -> str:
        return RECORD_TYPES[self.role].schema_name


def topic_specs(settings: TopicSettings) -> list[TopicSpec]:
    """One spec per topic; the ledger-side topics share one partition count (co-partitioning)."""

    def partitions(role: TopicRole) -> int:
        if role is TopicRole.TAG_DELIVERIES:
            return settings.tag_partitions
        if role is TopicRole.DEAD_LETTERS:
            return settings.dead_letter_partitions
        return settings.partitions

    return [
        TopicSpec(
            role=role,
            name=f"{settings.prefix}{role.value}",
            partitions=partitions(role),
            replication_factor=settings.replication_factor,
            cleanup_policy="compact" if role in _COMPACTED else "delete",
        )
        for role in TopicRole
    ]


def topic_name(settings: TopicSettings, role: TopicRole) -> str:
    return f"{settings.prefix}{role.value}"


def delivery_key(service_id: str, tag: str) -> str:
    """The key of a tag delivery: one tag's deliveries share a partition, in order."""
    return f"{service_id}\x1f{tag}"


def key_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as every producer here uses)
    gives ``key``: so a reader can follow one service's partition only."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def owned_prefixes(settings: DcbSettings) -> list[str]:
    """The name prefixes of every topic these settings make: the commit path's topics and
    the worker's table changelogs (a bench run deletes them by these)."""
    return [settings.topics.prefix, settings.worker.app_id]


def owned(name: str, prefixes: Sequence[str]) -> bool:
    return any(name.startswith(p) for p in prefixes)
