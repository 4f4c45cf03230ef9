"""``dcb worker``: run the stream processors (ledger, tags, reconciler) until stopped."""

from __future__ import annotations

import os
import sys
import uuid
from typing import Annotated

import typer

from streams.infra.supervisor import supervise
from streams.settings import DcbSettings

INSTANCE_ID_ENV = "DCB_WORKER__INSTANCE_ID"


def worker(
    bootstrap_servers: Annotated[
        str | None, typer.Option("--bootstrap-servers", "-b", help="Kafka address.")
    ] = None,
    loglevel: Annotated[str, typer.Option("--loglevel", "-l", help="Log level.")] = "info",
    restart: Annotated[
        bool,
        typer.Option(
            help="Run the processors in a child process and start it again when it exits "
            "because it cannot go on (an aborted round, the broker out of reach past the "
            "stall timeout); --no-restart runs them in this one."
        ),
    ] = True,
) -> None:
    """Run the commit path's processors; more worker processes share the partitions."""
    if restart:
        # Restarts keep the transactional id: each aborts what the last left open, at once.
        if DcbSettings().worker.instance_id is None:
            os.environ[INSTANCE_ID_ENV] = uuid.uuid4().hex
        argv = [sys.executable, "-m", "streams", "worker", "--no-restart", "-l", loglevel]
        if bootstrap_servers:
            argv += ["--bootstrap-servers", bootstrap_servers]
        raise typer.Exit(supervise(argv))
    from streams.worker import run_worker

    settings = DcbSettings()
    if bootstrap_servers:
        settings = settings.model_copy(update={"bootstrap_servers": bootstrap_servers})
    run_worker(settings, loglevel)
