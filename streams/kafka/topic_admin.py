"""Create dcb-streams' topics idempotently, and check existing ones against their specs."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from streams.errors import TopicAdminError, TopicConfigMismatchError
from streams.kafka.topic_catalog import TopicSpec

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


def _create_missing(client: AdminClient, specs: Sequence[TopicSpec]) -> set[str]:
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
                raise TopicAdminError(f"creating topic {name} failed: {err.str()}") from None
    return created


def _cleanup_policies(client: AdminClient, names: Sequence[str]) -> dict[str, str]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    policies: dict[str, str] = {}
    for resource, future in client.describe_configs(resources).items():
        entries = future.result()
        policies[resource.name] = entries["cleanup.policy"].value
    return policies


def ensure_topics(client: AdminClient, specs: Sequence[TopicSpec]) -> list[TopicState]:
    """Create every missing topic; return each topic's state as the broker now reports it.

    Raises :class:`TopicConfigMismatchError` when an existing topic has another
    partition count or cleanup policy than its spec (nothing is changed then).
    """
    created = _create_missing(client, specs)
    metadata = client.list_topics(timeout=15).topics
    policies = _cleanup_policies(client, [s.name for s in specs])
    states: list[TopicState] = []
    mismatches: list[dict[str, object]] = []
    for spec in specs:
        partitions = len(metadata[spec.name].partitions)
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
