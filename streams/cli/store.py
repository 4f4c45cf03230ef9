"""``dcb append / read / certificate / reconcile``: the SDK from the shell, JSON in and out."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pydantic
import typer
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.errors import InvalidEventError, ValidationError
from streams.model.records import AppendCondition, EventData, QueryItem
from streams.sdk import DcbClient
from streams.settings import DcbSettings

Service = Annotated[str, typer.Option("--service", "-s", help="The service (event store).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Bootstrap = Annotated[str | None, typer.Option("--bootstrap-servers", "-b", help="Kafka address.")]


def _client(service: str, bootstrap_servers: str | None) -> DcbClient:
    settings = DcbSettings()
    if bootstrap_servers:
        settings = settings.model_copy(update={"bootstrap_servers": bootstrap_servers})
    return DcbClient(service_id=service, settings=settings)


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{what} is not JSON: {exc}") from exc


def _model(cls: type[pydantic.BaseModel], value: Any, what: str) -> Any:
    try:
        return cls.model_validate(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValidationError(f"{what}: {where}: {first['msg']}", errors=len(exc.errors())) from exc


def parse_events(text: str) -> list[EventData]:
    """A JSON array of events; ``eventId`` and ``timestamp`` default, a payload may be an object."""
    raw = _json(text, "the events")
    if not isinstance(raw, list):
        raise InvalidEventError("the events must be a JSON array")
    now = datetime.now(UTC)
    events = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidEventError(f"event {index} is not a JSON object", index=index)
        payload = item.get("payload", {})
        event = {
            "eventId": str(uuid.uuid4()),
            "timestamp": now,
            **item,
            "payload": payload if isinstance(payload, str) else json.dumps(payload),
        }
        events.append(_model(EventData, event, f"event {index}"))
    return events


def parse_query(text: str) -> list[QueryItem]:
    raw = _json(text, "the query")
    items = raw if isinstance(raw, list) else [raw]
    return [_model(QueryItem, item, f"query item {i}") for i, item in enumerate(items)]


def append(
    service: Service,
    events: Annotated[str, typer.Option("--events", "-e", help="A JSON file of events, or -.")],
    condition: Annotated[
        str | None,
        typer.Option(help='{"failIfEventsMatch": [{"types": [...], "tags": [...]}], "after": S}'),
    ] = None,
    bootstrap_servers: Bootstrap = None,
    as_json: JsonOpt = False,
) -> None:
    """Append events on a DCB condition. Exit 0 committed, 3 condition failed, 2 bad input."""
    with reported(as_json):
        text = sys.stdin.read() if events == "-" else Path(events).read_text()
        parsed = parse_events(text)
        guard = (
            None
            if condition is None
            else _model(AppendCondition, _json(condition, "the condition"), "the condition")
        )
        with _client(service, bootstrap_servers) as client:
            result = client.append(parsed, guard)
    emit(
        as_json,
        {"attemptId": result.attempt_id, "suids": result.suids},
        lambda: console.print(f"committed {len(result.suids)} event(s): {', '.join(result.suids)}"),
    )


def read(
    service: Service,
    query: Annotated[
        str, typer.Option(help='[{"types": [...], "tags": [...]}]; [] reads every event.')
    ] = "[]",
    after: Annotated[str | None, typer.Option(help="Only events after this SUID.")] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many events.")] = None,
    bootstrap_servers: Bootstrap = None,
    as_json: JsonOpt = False,
) -> None:
    """Read the certified events matching a query, in SUID order."""
    with reported(as_json):
        items = parse_query(query)
        with _client(service, bootstrap_servers) as client:
            found = client.read(items, after, limit)

    def text() -> None:
        table = Table("position", "type", "tags", "payload")
        for e in found:
            table.add_row(e.position, e.event.event_type, " ".join(e.event.tags), e.event.payload)
        console.print(table)

    emit(as_json, [{"position": e.position, **e.event.to_avro()} for e in found], text)


def certificate(
    service: Service, bootstrap_servers: Bootstrap = None, as_json: JsonOpt = False
) -> None:
    """The newest closed-prefix certificate of a service."""
    with reported(as_json), _client(service, bootstrap_servers) as client:
        cert = client.certificate()
    data = cert.to_avro() if cert else None
    emit(as_json, data, lambda: console.print_json(json.dumps(data, default=str)))


def reconcile(
    service: Service,
    now: Annotated[bool, typer.Option("--now", help="Skip the grace window: fence now.")] = False,
    bootstrap_servers: Bootstrap = None,
    as_json: JsonOpt = False,
) -> None:
    """Ask the service's ledger for a reconcile pass."""
    with reported(as_json), _client(service, bootstrap_servers) as client:
        client.reconcile(skip_grace=now)
    emit(as_json, {"requested": True, "skipGrace": now}, lambda: console.print("requested"))
