"""``dcb project``: run the registered projections; ``dcb project rebuild``: replay one."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import typer

from streams.cli.output import console, emit, reported
from streams.projections.api import load_registry
from streams.settings import DcbSettings

app = typer.Typer(
    help="Fold dcb.events into read models, gated on closed-prefix certificates: run every "
    "projection of --app until stopped, or rebuild one.",
    no_args_is_help=False,
)

AppSpec = Annotated[
    str | None,
    typer.Option(
        "--app",
        "-a",
        help="The projector registry, as module:attribute (e.g. shop.views:registry).",
    ),
]
Bootstrap = Annotated[str | None, typer.Option("--bootstrap-servers", "-b", help="Kafka address.")]


def _settings(bootstrap_servers: str | None) -> DcbSettings:
    settings = DcbSettings()
    if bootstrap_servers:
        settings = settings.model_copy(update={"bootstrap_servers": bootstrap_servers})
    return settings


@app.callback(invoke_without_command=True)
def project(
    ctx: typer.Context,
    app_spec: AppSpec = None,
    bootstrap_servers: Bootstrap = None,
) -> None:
    """Run every projection of the registry until stopped (SIGINT / SIGTERM). Each applies
    a service's events in SUID order, only up to the newest certificate it trusts, and
    commits its rows with its checkpoint in one Kafka transaction."""
    if ctx.invoked_subcommand is not None:
        return
    from streams.projections.runner import run_projections

    with reported(False):
        if app_spec is None:
            raise typer.BadParameter("--app module:attribute is required", param_hint="--app")
        registry = load_registry(app_spec)
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        logging.getLogger("streams.projections").setLevel(logging.INFO)
        settings = _settings(bootstrap_servers)
        http = f"http://{settings.projections.http_host}:{settings.projections.http_port}"
        console.print(
            f"projecting {', '.join(registry.ids())}; lag at {http}/projections, metrics at "
            f"{http}/metrics (stop with Ctrl-C)",
            style="dim",
        )
        run_projections(registry, settings, stop)


@app.command()
def rebuild(
    projection_id: Annotated[str, typer.Argument(help="The projection to start again.")],
    app_spec: AppSpec = None,
    bootstrap_servers: Bootstrap = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Delete a projection's rows and reset its checkpoint in one transaction; its runner
    (fenced by this) replays it from the beginning of history."""
    from streams.projections.runner import rebuild as reset

    with reported(as_json):
        if app_spec is not None:
            load_registry(app_spec).get(projection_id)  # unknown_projection when absent
        deleted = reset(_settings(bootstrap_servers), projection_id)
        emit(
            as_json,
            {"projection": projection_id, "rowsDeleted": deleted},
            lambda: console.print(
                f"{projection_id}: {deleted} rows deleted, checkpoint reset; "
                "its runner replays it from the beginning"
            ),
        )
