"""``dcb connect``: the embedded Kafka Connect worker and the projections' sinks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from streams.cli.output import console, emit, reported
from streams.infra.connect import ConnectStatus, EmbeddedConnect
from streams.settings import DcbSettings

app = typer.Typer(
    help="Run Kafka Connect with the Debezium JDBC sink, and land projections in PostgreSQL."
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _status_dict(status: ConnectStatus) -> dict[str, object]:
    return {
        "running": status.running,
        "pid": status.pid,
        "url": status.url,
        "logFile": str(status.log_file),
    }


@app.command()
def start(as_json: JsonOpt = False) -> None:
    """Start the Connect worker (fetching Connect and the sink plugin first if needed) and
    wait until it offers the JDBC sink."""
    connect = EmbeddedConnect(DcbSettings())
    with reported(as_json):
        started = time.monotonic()
        with console.status("starting Kafka Connect..."):
            status = connect.start()
        took = time.monotonic() - started
    emit(
        as_json,
        {**_status_dict(status), "seconds": round(took, 2)},
        lambda: console.print(f"Kafka Connect ready in {took:.1f}s at [bold]{status.url}[/]"),
    )


@app.command()
def stop(as_json: JsonOpt = False) -> None:
    """Stop the Connect worker this data folder's pid file names (and nothing else)."""
    with reported(as_json):
        stopped = EmbeddedConnect(DcbSettings()).stop()
    emit(
        as_json,
        {"stopped": stopped},
        lambda: console.print("Kafka Connect stopped" if stopped else "none was running"),
    )


@app.command()
def status(as_json: JsonOpt = False) -> None:
    """Say whether the Connect worker runs, and its connectors. Exit 3 when it does not."""
    connect = EmbeddedConnect(DcbSettings())
    current = connect.status()
    with reported(as_json):
        names = connect.connectors() if current.running else []
    emit(
        as_json,
        {**_status_dict(current), "connectors": names},
        lambda: console.print(
            current.describe() + (f"; connectors: {', '.join(names)}" if names else "")
        ),
    )
    if not current.running:
        raise typer.Exit(3)


@app.command()
def deploy(
    projection: Annotated[str, typer.Option("--projection", "-p", help="The projection id.")],
    config: Annotated[
        Path | None,
        typer.Option(help="Connector template (default: connectors/projection-postgres.json)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Post the projection's sink to Connect and wait until its task runs."""
    from streams.projections.sink import TEMPLATE, connector_name, sink_config

    settings = DcbSettings()
    with reported(as_json):
        name = connector_name(projection)
        state = EmbeddedConnect(settings).deploy(
            name, sink_config(settings, projection, config or TEMPLATE)
        )
    emit(
        as_json,
        {"connector": name, "state": state},
        lambda: console.print(f"{name}: RUNNING, into {settings.connect.jdbc_url}"),
    )
