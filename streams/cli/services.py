"""The services a self-contained command (``demo``, ``bench``) starts for itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.cli.output import console
from streams.errors import BrokerAlreadyRunningError
from streams.infra.broker import EmbeddedBroker
from streams.infra.worker_process import WorkerProcess
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import DcbSettings


@contextmanager
def embedded_broker(settings: DcbSettings, keep: bool, quiet: bool) -> Iterator[None]:
    """The embedded broker, unless DCB_BOOTSTRAP_SERVERS points elsewhere; stopped after."""
    if settings.bootstrap_servers is not None:
        yield
        return
    broker = EmbeddedBroker(settings.broker)
    started = False
    t0 = time.monotonic()
    with console.status("starting the embedded Kafka broker (the first run fetches it)..."):
        try:
            broker.start()
            started = True
        except BrokerAlreadyRunningError:
            pass
    if not quiet:
        how = f"started in {time.monotonic() - t0:.1f}s" if started else "already running"
        console.print(f"broker at {broker.settings.bootstrap_servers}: {how}")
    try:
        yield
    finally:
        if started and not keep:
            broker.stop()


@contextmanager
def running_worker(settings: DcbSettings, log: Path) -> Iterator[WorkerProcess]:
    """The commit-path topics and one ``dcb worker`` child, ready, for the block's length."""
    ensure_topics(clients.admin(settings.kafka), topic_specs(settings.topics))
    worker = WorkerProcess(settings, log)
    with console.status("starting a worker (dcb worker)..."):
        worker.start()
    with worker:
        yield worker
