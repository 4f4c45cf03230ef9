"""``dcb demo``: what a new user runs first."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.codec import codec_from_settings
from streams.errors import BrokerAlreadyRunningError
from streams.infra.broker import EmbeddedBroker
from streams.kafka import clients
from streams.kafka.roundtrip import round_trip
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import TopicRole, topic_name, topic_specs
from streams.model.records import AppendCondition, Command, CommitAttempt, EventData, QueryItem
from streams.settings import DcbSettings


def _sample_command(service_id: str) -> Command:
    attempt_id = str(uuid.uuid4())
    now = datetime.now(UTC).replace(microsecond=0)
    return Command(
        service_id=service_id,
        command_id=attempt_id,
        issued_at=now,
        kind="COMMIT",
        commit=CommitAttempt(
            attempt_id=attempt_id,
            writer_epoch=1,
            events=[
                EventData(
                    event_id=str(uuid.uuid4()),
                    event_type="StudentSubscribed",
                    payload=json.dumps({"studentId": "s7", "courseId": "c1"}),
                    tags=["course:c1", "student:s7"],
                    timestamp=now,
                )
            ],
            condition=AppendCondition(
                fail_if_events_match=[
                    QueryItem(types=["StudentSubscribed"], tags=["course:c1"]),
                ],
            ),
        ),
    )


def demo(
    keep_broker: Annotated[
        bool, typer.Option(help="Leave the broker running when the demo started it.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Start the embedded broker, create the topics, and round-trip a command through Kafka."""
    settings = DcbSettings()
    broker = EmbeddedBroker(settings.broker)
    started_here = False
    with reported(as_json):
        if settings.bootstrap_servers is None:
            t0 = time.monotonic()
            with console.status("starting the embedded Kafka broker (first run fetches it)..."):
                try:
                    broker.start()
                    started_here = True
                except BrokerAlreadyRunningError:
                    pass
            if not as_json:
                how = (
                    f"started in {time.monotonic() - t0:.1f}s"
                    if started_here
                    else "already running"
                )
                console.print(f"broker at {broker.settings.bootstrap_servers}: {how}")
        bootstrap = settings.resolved_bootstrap_servers
        try:
            states = ensure_topics(clients.admin(bootstrap), topic_specs(settings.topics))
            command = _sample_command("demo-service")
            result = round_trip(
                bootstrap,
                codec_from_settings(settings),
                topic_name(settings.topics, TopicRole.COMMANDS),
                command.service_id,
                command,
            )
        finally:
            if started_here and not keep_broker:
                broker.stop()
    equal = result.decoded == command

    def text() -> None:
        table = Table("topic", "action", "partitions", "cleanup.policy", title="topics")
        for s in states:
            table.add_row(s.name, s.action, str(s.partitions), s.cleanup_policy)
        console.print(table)
        console.print(
            f"round trip: {command.schema_name} ({result.encoded_bytes} bytes, Avro "
            f"single-object encoding) -> {result.topic}[{result.partition}]@{result.offset} "
            f"-> read_committed -> decoded {'[green]equal[/]' if equal else '[red]DIFFERENT[/]'} "
            f"in {result.millis:.0f} ms"
        )

    emit(
        as_json,
        {
            "topics": [s.as_dict() for s in states],
            "roundTrip": {
                "topic": result.topic,
                "partition": result.partition,
                "offset": result.offset,
                "bytes": result.encoded_bytes,
                "equal": equal,
                "millis": round(result.millis, 1),
            },
        },
        text,
    )
    if not equal:
        raise typer.Exit(1)
