"""``dcb worker``: run the stream processors (ledger, tags, reconciler) until stopped."""

from __future__ import annotations

from typing import Annotated

import typer

from streams.settings import DcbSettings


def worker(
    bootstrap_servers: Annotated[
        str | None, typer.Option("--bootstrap-servers", "-b", help="Kafka address.")
    ] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l", help="faust log level.")] = "info",
) -> None:
    """Run every commit-path agent in this process; more processes share the partitions."""
    from streams.worker import run_worker

    settings = DcbSettings()
    if bootstrap_servers:
        settings = settings.model_copy(update={"bootstrap_servers": bootstrap_servers})
    run_worker(settings, loglevel)
