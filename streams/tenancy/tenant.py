"""A tenant's names, and what the broker must grant it: pure rules, no Kafka calls.

Everything a tenant's clients name lies under ``<name>.``: its topics (the commit path's,
the worker's changelogs, projections'), its consumer groups and its transactional ids.
One prefixed ACL per resource kind then grants exactly that and nothing of a neighbour,
because a name has no dot: ``acme.`` can never be a prefix of ``acme-eu.``'s names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from streams.kafka.connection import KafkaConnection
from streams.settings import TopicSettings, security_env
from streams.tenancy.exceptions import TenantNameError

NAME = re.compile(r"[a-z][a-z0-9-]{0,47}")
RESERVED = frozenset({"admin", "dcb"})  # the super user; the prefix of untenanted use


class Resource(StrEnum):
    """The kinds of Kafka resource a tenant's clients name."""

    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional_id"


@dataclass(frozen=True)
class Tenant:
    name: str

    @classmethod
    def named(cls, name: str) -> Tenant:
        if not NAME.fullmatch(name):
            raise TenantNameError(
                f"tenant name {name!r}: a lower-case letter, then up to 47 lower-case "
                "letters, digits or '-' (no dots: a name's prefix never covers another's)",
                name=name,
            )
        if name in RESERVED:
            raise TenantNameError(f"tenant name {name!r} is reserved", name=name)
        return cls(name)

    @property
    def prefix(self) -> str:
        return f"{self.name}."

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    @property
    def app_id(self) -> str:
        """The worker's group, transactional ids and changelogs: inside the prefix."""
        return f"{self.prefix}worker"

    def grants(self) -> list[tuple[Resource, str]]:
        """Every prefixed pattern the tenant's principal is allowed all operations on."""
        return [(kind, self.prefix) for kind in Resource]

    def topics(self, like: TopicSettings) -> TopicSettings:
        """The tenant's topic settings: ``like``'s sizes under the tenant's prefix."""
        return like.model_copy(update={"prefix": self.prefix})

    def client_env(self, kafka: KafkaConnection) -> dict[str, str]:
        """The ``DCB_*`` settings a tenant's SDK, worker and CLI run with."""
        return {
            **security_env(kafka),
            "DCB_TOPICS__PREFIX": self.prefix,
            "DCB_WORKER__APP_ID": self.app_id,
        }
