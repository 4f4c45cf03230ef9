"""The topics (docs/CONCEPTS.md): names, partition counts, cleanup policies, record types,
and where a record of a service or a tag goes (the tag placement).

Pure data derived from settings; :mod:`streams.kafka.topic_admin` creates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from streams.kafka.partitioner import key_partition
from streams.model import records
from streams.settings import DcbSettings, TopicSettings

# Batch records carry many attempts' items (an event each at most, chunked at ~1 MiB), and
# a dead letter carries its source record: topics allow records above Kafka's 1 MB default.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


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
    LAYOUT = "layout"


RECORD_TYPES: dict[TopicRole, type[records.AvroRecord]] = {
    TopicRole.COMMANDS: records.Command,
    TopicRole.ALLOCATIONS: records.AllocationBatch,
    TopicRole.TAG_DELIVERIES: records.TagDeliveryBatch,
    TopicRole.TAG_RESOLUTIONS: records.TagResolutionBatch,
    TopicRole.EVENTS: records.CommittedEvent,
    TopicRole.CERTIFICATES: records.Certificate,
    TopicRole.COMMIT_RESULTS: records.CommitResult,
    TopicRole.DEAD_LETTERS: records.DeadLetter,
    TopicRole.LAYOUT: records.StoreLayout,
}

_COMPACTED = {TopicRole.CERTIFICATES}
# Kept until removed on purpose: the history (a broker's default retention, 7 days, would
# delete events no archive holds; `dcb archive` is how the hot log gets shorter) and the
# layout (it lives as long as the topics).
_KEPT = {TopicRole.EVENTS, TopicRole.LAYOUT}


@dataclass(frozen=True)
class TopicLayout:
    """What :mod:`streams.kafka.topic_admin` creates and checks: a topic's shape."""

    name: str
    partitions: int
    replication_factor: int
    cleanup_policy: str

    retention_ms: int | None = None  # None: the broker's default

    def config(self) -> dict[str, str]:
        config = {
            "cleanup.policy": self.cleanup_policy,
            "max.message.bytes": str(MAX_MESSAGE_BYTES),
        }
        if self.retention_ms is not None:
            config["retention.ms"] = str(self.retention_ms)
        return config


@dataclass(frozen=True, kw_only=True)
class TopicSpec(TopicLayout):
    """One of the topics, with the record type it carries."""

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
        if role is TopicRole.LAYOUT:
            return 1
        return settings.partitions

    return [
        TopicSpec(
            role=role,
            name=f"{settings.prefix}{role.value}",
            partitions=partitions(role),
            replication_factor=settings.replication_factor,
            cleanup_policy="compact" if role in _COMPACTED else "delete",
            retention_ms=-1 if role in _KEPT else None,
        )
        for role in TopicRole
    ]


def topic_name(settings: TopicSettings, role: TopicRole) -> str:
    return f"{settings.prefix}{role.value}"


def changelog_layout(topic: str, partitions: int, replication_factor: int) -> TopicLayout:
    """The compacted topic that keeps a processor table, partitioned like its sources."""
    return TopicLayout(topic, partitions, replication_factor, "compact")


def table_key(service_id: str, tag: str) -> str:
    """The key of one tag's table: a service's tag, one string."""
    return f"{service_id}\x1f{tag}"


def ledger_partition(service_id: str, settings: TopicSettings) -> int:
    """The partition of a service's commands, resolutions, events, certificates."""
    return key_partition(service_id.encode(), settings.partitions)


def tag_partition(service_id: str, tag: str, settings: TopicSettings) -> int:
    """The tag partition of a service's tag: by service or by tag (the tag placement)."""
    key = service_id if settings.tag_placement == "service" else table_key(service_id, tag)
    return key_partition(key.encode(), settings.tag_partitions)


def service_tag_partitions(service_id: str, settings: TopicSettings) -> Sequence[int]:
    """Every tag partition a service's tables may lie in: its own under the service
    placement, any under the tag placement."""
    if settings.tag_placement == "service":
        return (tag_partition(service_id, "", settings),)
    return range(settings.tag_partitions)


def owned_prefixes(settings: DcbSettings) -> list[str]:
    """The name prefixes of every topic these settings make: the commit path's topics and
    the worker's table changelogs (a bench run deletes them by these)."""
    return [settings.topics.prefix, settings.worker.app_id]


def owned(name: str, prefixes: Sequence[str]) -> bool:
    return any(name.startswith(p) for p in prefixes)
