"""Create dcb-streams' topics idempotently, and check existing ones against their specs."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from streams.errors import TopicAdminError, TopicConfigMismatchError
from streams.kafka.refusals import refusal
from streams.kafka.topic_catalog import TopicLayout, owned

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicState:
    """What a topic looks like on the broker after ``ensure_topics``."""

    name: str
    action: Literal["created", "exists"]
    partitions: int
    cleanup_policy: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "action": self.action,
            "partitions": self.partitions,
            "cleanupPolicy": self.cleanup_policy,
        }


def _create_missing(client: AdminClient, specs: Sequence[TopicLayout]) -> set[str]:
    existing = set(client.list_topics(timeout=15).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return set()
    futures = client.create_topics(
        [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                config=s.config(),
            )
            for s in missing
        ],
        operation_timeout=30,
    )
    created: set[str] = set()
    for name, future in futures.items():
        try:
            future.result()
            created.add(name)
            log.info("created topic %s", name)
        except KafkaException as exc:
            err = exc.args[0]
            # Another process created it between our list and create: that is fine.
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                refused = refusal(err, f"creating topic {name}")
                raise refused or TopicAdminError(
                    f"creating topic {name} failed: {err.str()}"
                ) from None
    return created


def _cleanup_policies(
    client: AdminClient, names: Sequence[str], timeout_s: float
) -> dict[str, str]:
    """Each topic's cleanup policy; a just-created topic may be unknown for a moment."""
    deadline = time.monotonic() + timeout_s
    policies: dict[str, str] = {}
    while True:
        pending = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names if n not in policies]
        if not pending:
            return policies
        for resource, future in client.describe_configs(pending).items():
            try:
                policies[resource.name] = future.result()["cleanup.policy"].value
            except KafkaException as exc:
                retriable = exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                if not retriable or time.monotonic() > deadline:
                    raise TopicAdminError(
                        f"describing topic {resource.name} failed: {exc.args[0].str()}"
                    ) from None
        time.sleep(0.1)


def _partition_counts(
    client: AdminClient, specs: Sequence[TopicLayout], timeout_s: float
) -> dict[str, int]:
    """Partition counts once metadata shows every topic (creation propagates asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        topics = client.list_topics(timeout=15).topics
        visible = {
            s.name: len(topics[s.name].partitions)
            for s in specs
            if s.name in topics and topics[s.name].error is None and topics[s.name].partitions
        }
        if len(visible) == len(specs) or time.monotonic() > deadline:
            missing = [s.name for s in specs if s.name not in visible]
            if missing:
                raise TopicAdminError(f"topics not visible in metadata: {', '.join(missing)}")
            return visible
        time.sleep(0.1)


def ensure_topics(
    client: AdminClient, specs: Sequence[TopicLayout], timeout_s: float = 30.0
) -> list[TopicState]:
    """Create every missing topic; return each topic's state as the broker now reports it.

    Raises :class:`TopicConfigMismatchError` when an existing topic has another
    partition count or cleanup policy than its spec (nothing is changed then).
    """
    created = _create_missing(client, specs)
    counts = _partition_counts(client, specs, timeout_s)
    policies = _cleanup_policies(client, [s.name for s in specs], timeout_s)
    states: list[TopicState] = []
    mismatches: list[dict[str, object]] = []
    for spec in specs:
        partitions = counts[spec.name]
        policy = policies[spec.name]
        states.append(
            TopicState(
                spec.name, "created" if spec.name in created else "exists", partitions, policy
            )
        )
        if partitions != spec.partitions or policy != spec.cleanup_policy:
            mismatches.append(
                {
                    "topic": spec.name,
                    "partitions": partitions,
                    "expectedPartitions": spec.partitions,
                    "cleanupPolicy": policy,
                    "expectedCleanupPolicy": spec.cleanup_policy,
                }
            )
    if mismatches:
        raise TopicConfigMismatchError(
            f"{len(mismatches)} existing topic(s) differ from their spec", mismatches=mismatches
        )
    return states


def delete_topics_with_prefix(
    client: AdminClient, prefixes: Sequence[str], timeout_s: float = 30.0
) -> list[str]:
    """Delete every topic whose name starts with one of ``prefixes`` (a bench's own topics)."""
    names = [name for name in client.list_topics(timeout=timeout_s).topics if owned(name, prefixes)]
    if names:
        for future in client.delete_topics(names, operation_timeout=timeout_s).values():
            future.result()
    return names
