"""The ``dcb`` entry point."""

from __future__ import annotations

import logging
import os

import typer

from streams.cli import (
    archive,
    bench,
    broker,
    connect,
    demo,
    demo_projections,
    erase,
    project,
    projections,
    store,
    tenants,
    topics,
    worker,
)

app = typer.Typer(
    help="dcb-streams: a Kafka-native event store with Dynamic Consistency Boundaries.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(broker.app, name="broker")
app.add_typer(topics.app, name="topics")
app.add_typer(bench.app, name="bench")
app.add_typer(project.app, name="project")
app.add_typer(connect.app, name="connect")
app.add_typer(projections.app, name="projections")
app.add_typer(demo.app, name="demo")
app.add_typer(archive.app, name="archive")
app.add_typer(tenants.app, name="tenants")
demo.app.command(name="projections")(demo_projections.projections)
app.command(name="worker")(worker.worker)
app.command(name="erase")(erase.erase)
for command in (store.append, store.read, store.certificate, store.reconcile):
    app.command()(command)


@app.callback()
def main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what happens (to stderr)."),
) -> None:
    """Configure logging once for every command."""
    level = logging.INFO if verbose else os.environ.get("DCB_LOG_LEVEL", "WARNING")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        # librdkafka warns about transient coordinator moves; users need only its errors.
        logging.getLogger("streams.librdkafka").setLevel(logging.ERROR)
