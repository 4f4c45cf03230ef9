"""``dcb topics``: create the topics (docs/CONCEPTS.md, "Topics") and fix their layout."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.codec import codec_from_settings
from streams.kafka import clients
from streams.kafka.store_layout import ensure_layout
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import DcbSettings

app = typer.Typer(help="Create and inspect dcb-streams' topics.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


class Placement(StrEnum):
    service = "service"
    tag = "tag"


def settings_with(
    bootstrap_servers: str | None,
    prefix: str | None,
    partitions: int | None,
    tag_partitions: int | None,
    tag_placement: str | None = None,
) -> DcbSettings:
    settings = DcbSettings()
    updates = {
        k: v
        for k, v in {
            "prefix": prefix,
            "partitions": partitions,
            "tag_partitions": tag_partitions,
            "tag_placement": tag_placement,
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
    tag_placement: Annotated[
        Placement | None,
        typer.Option(
            help="service: a service's tags in one tag partition (every commit one-phase); "
            "tag: spread over them (two phases when an attempt spans partitions)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create every missing topic and fix the layout (partition counts, tag placement) the
    first time; existing ones are checked, never changed. Idempotent."""
    placement = tag_placement.value if tag_placement is not None else None
    settings = settings_with(bootstrap_servers, prefix, partitions, tag_partitions, placement)
    bootstrap = settings.kafka
    with reported(as_json):
        states = ensure_topics(clients.admin(bootstrap), topic_specs(settings.topics))
        layout = ensure_layout(bootstrap, settings.topics, codec_from_settings(settings))

    def table() -> None:
        out = Table("topic", "action", "partitions", "cleanup.policy")
        for s in states:
            out.add_row(s.name, s.action, str(s.partitions), s.cleanup_policy)
        console.print(out)
        console.print(f"tag placement: {layout.tag_placement.lower()}")

    emit(
        as_json,
        {
            "topics": [s.as_dict() for s in states],
            "layout": layout.model_dump(mode="json", by_alias=True, exclude={"created_at"}),
        },
        table,
    )
