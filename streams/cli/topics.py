"""``dcb topics``: create and list the topics of DESIGN.md §3."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import DcbSettings

app = typer.Typer(help="Create and inspect dcb-streams' topics.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def settings_with(
    bootstrap_servers: str | None,
    prefix: str | None,
    partitions: int | None,
    tag_partitions: int | None,
) -> DcbSettings:
    settings = DcbSettings()
    updates = {
        k: v
        for k, v in {
            "prefix": prefix,
            "partitions": partitions,
            "tag_partitions": tag_partitions,
        }.items()
        if v is not None
    }
    topics = settings.topics.model_copy(update=updates)
    return settings.model_copy(
        update={
            "topics": topics,
            "bootstrap_servers": bootstrap_servers or settings.bootstrap_servers,
        }
    )


@app.command()
def create(
    bootstrap_servers: Annotated[
        str | None, typer.Option("--bootstrap-servers", "-b", help="Kafka address.")
    ] = None,
    prefix: Annotated[str | None, typer.Option(help="Topic name prefix (default 'dcb.').")] = None,
    partitions: Annotated[
        int | None, typer.Option(help="Partitions of the per-service topics.")
    ] = None,
    tag_partitions: Annotated[
        int | None, typer.Option(help="Partitions of dcb.tag-deliveries.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create every missing topic; existing ones are checked, never changed. Idempotent."""
    settings = settings_with(bootstrap_servers, prefix, partitions, tag_partitions)
    with reported(as_json):
        states = ensure_topics(
            clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics)
        )

    def table() -> None:
        out = Table("topic", "action", "partitions", "cleanup.policy")
        for s in states:
            out.add_row(s.name, s.action, str(s.partitions), s.cleanup_policy)
        console.print(out)

    emit(as_json, {"topics": [s.as_dict() for s in states]}, table)
