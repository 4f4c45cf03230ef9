"""Creating a tenant on a secure broker, as its super user: login, ACLs, topics."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from streams.errors import KafkaUnavailableError
from streams.kafka import clients
from streams.kafka.connection import KafkaConnection, Mechanism
from streams.kafka.refusals import refusal
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import TopicSettings
from streams.tenancy.tenant import Resource, Tenant

log = logging.getLogger(__name__)

_KINDS = {
    Resource.TOPIC: ResourceType.TOPIC,
    Resource.GROUP: ResourceType.GROUP,
    Resource.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
}
TENANT_MECHANISM: Mechanism = "SCRAM-SHA-512"  # whatever the admin logs in with
SCRAM_ITERATIONS = 8192
LOGIN_WAIT_S = 30.0


def create_tenant(
    admin: KafkaConnection, tenant: Tenant, password: str, topics: TopicSettings
) -> KafkaConnection:
    """Set the tenant's login, grant its prefix, create its topics; return its connection
    once the broker accepts the login. Run again, it sets the password anew (a rotation)
    and changes nothing else."""
    client = clients.admin(admin)
    login = UserScramCredentialUpsertion(
        tenant.name,
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
        password.encode(),
    )
    _wait_all(client.alter_user_scram_credentials([login]), f"setting {tenant.name}'s login")
    bindings = [
        AclBinding(
            _KINDS[kind],
            pattern,
            ResourcePatternType.PREFIXED,
            tenant.principal,
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        for kind, pattern in tenant.grants()
    ]
    _wait_all(client.create_acls(bindings), f"granting {tenant.principal} {tenant.prefix}*")
    ensure_topics(client, topic_specs(tenant.topics(topics)))
    own = KafkaConnection(
        admin.bootstrap_servers, admin.protocol, TENANT_MECHANISM, tenant.name, password
    )
    _wait_for_login(own)
    log.info("tenant %s: login, ACLs on %s* and topics ready", tenant.name, tenant.prefix)
    return own


def _wait_all(futures: dict, what: str) -> None:  # type: ignore[type-arg]
    for future in futures.values():
        try:
            future.result()
        except KafkaException as exc:
            refused = refusal(exc, what)
            raise refused or KafkaUnavailableError(f"{what}: {exc}") from exc


def _wait_for_login(kafka: KafkaConnection) -> None:
    """Until the broker accepts the new login (its credential travels through the
    metadata log first)."""
    deadline = time.monotonic() + LOGIN_WAIT_S
    while True:
        client = clients.admin(kafka, **{"socket.connection.setup.timeout.ms": 2000})
        try:
            client.list_topics(timeout=5)
            return
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"the broker did not accept {kafka.username}'s login: {exc}"
                ) from exc
            time.sleep(0.5)
