"""``dcb tenants``: tenants a secure broker enforces (a topic prefix, a login, ACLs)."""

from __future__ import annotations

import secrets
from contextlib import nullcontext
from typing import Annotated

import typer

from streams.cli.output import console, emit, reported
from streams.infra.broker import EmbeddedBroker
from streams.kafka.connection import KafkaConnection
from streams.settings import DcbSettings
from streams.tenancy.admin import create_tenant
from streams.tenancy.exceptions import NoAdminLoginError
from streams.tenancy.tenant import Tenant

app = typer.Typer(help="Tenants enforced by the broker: a topic prefix, a login, ACLs.")


def admin_login(settings: DcbSettings) -> KafkaConnection:
    """The settings' login when they give one, else the embedded secure broker's admin."""
    if settings.security.username and settings.security.protocol != "PLAINTEXT":
        return settings.kafka
    broker = EmbeddedBroker(settings.broker)
    if settings.bootstrap_servers in (None, settings.broker.bootstrap_servers) and broker.secure:
        return broker.admin_connection()
    raise NoAdminLoginError(
        "creating a tenant needs the broker's super user over SASL: give its login "
        "(DCB_SECURITY__PROTOCOL=SASL_PLAINTEXT or SASL_SSL, __USERNAME, __PASSWORD), "
        "or run the embedded broker with `dcb broker start --secure`",
        bootstrap_servers=settings.resolved_bootstrap_servers,
    )


@app.command()
def create(
    name: Annotated[
        str, typer.Argument(help="The tenant: its prefix <name>., principal User:<name>.")
    ],
    password: Annotated[
        str | None,
        typer.Option("--password", help="The tenant's password; default: a new random one."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create a tenant: its SCRAM login, ACLs on <name>.* (topics, groups, transactional
    ids) and its topics; print the settings its SDK, worker and CLI run with. Run again,
    it sets a new password and changes nothing else."""
    with reported(as_json):
        settings = DcbSettings()
        tenant = Tenant.named(name)
        with nullcontext() if as_json else console.status(f"creating tenant {name}..."):
            own = create_tenant(
                admin_login(settings),
                tenant,
                password or secrets.token_urlsafe(18),
                settings.topics,
            )
        env = tenant.client_env(own)
    emit(
        as_json,
        {"tenant": name, "prefix": tenant.prefix, "principal": tenant.principal, "settings": env},
        lambda: console.print(
            f"tenant {name}: topics {tenant.prefix}*, principal {tenant.principal}\n"
            + "\n".join(f"{k}={v}" for k, v in env.items()),
            highlight=False,
        ),
    )
