"""A broker restart in the middle of a sustained load: nothing acknowledged is lost or doubled.

Runs on a broker of its own (the launcher's), so restarting it disturbs no other test.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from streams.errors import ReservationExpiredError
from streams.infra.broker import EmbeddedBroker
from streams.kafka import clients
from streams.kafka.faust_app import free_port
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.sdk import DcbClient
from streams.settings import BrokerSettings, DcbSettings, TopicSettings
from tests.integration.test_commit_path import registered
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def test_broker_restart_under_load_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    broker = EmbeddedBroker(
        BrokerSettings(port=free_port(), controller_port=free_port(), data_dir=tmp_path / "kafka")
    )
    broker.start()
    bootstrap = broker.settings.bootstrap_servers
    settings = DcbSettings(
        bootstrap_servers=bootstrap,
        topics=TopicSettings(prefix="r.", partitions=2, tag_partitions=2),
    )
    ensure_topics(clients.admin(bootstrap), topic_specs(settings.topics))
    worker = WorkerProcess(settings, tmp_path, "worker", grace_ms=5_000).start()
    acknowledged: list[tuple[str, str]] = []
    fenced: list[str] = []  # a stall longer than the grace window fences, and says so
    lock = threading.Lock()
    per_writer = 10
    client = DcbClient(service_id="restart", settings=settings, timeout_s=180)
    try:

        def writer(n: int) -> None:
            for i in range(per_writer):
                event = registered(f"r{n}-{i}", f"writer:{n}")
                try:
                    result = client.append([event])
                except ReservationExpiredError:
                    with lock:
                        fenced.append(event.event_id)
                    continue
                with lock:
                    acknowledged.append((event.event_id, result.suids[0]))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        while len(acknowledged) < 8:  # then restart in the middle of the load
            threading.Event().wait(0.1)
        broker.stop()
        at_restart = len(acknowledged)
        broker.start()
        for thread in threads:
            thread.join(400)
        log = client.read()
    finally:
        client.close()
        worker.stop()
        broker.stop()
    assert at_restart < 4 * per_writer, "the load ended before the restart; nothing was tested"
    assert len(acknowledged) + len(fenced) == 4 * per_writer, worker.tail()
    assert len(acknowledged) > at_restart  # the pipeline came back and committed again
    assert sorted(acknowledged, key=lambda a: a[1]) == [(e.event.event_id, e.position) for e in log]
    positions = [e.position for e in log]
    assert positions == sorted(set(positions))
