"""A broker restart in the middle of a sustained load: nothing acknowledged is lost or doubled.

Runs on a broker of its own (the launcher's), so restarting it disturbs no other test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.infra.broker import EmbeddedBroker
from streams.infra.ports import free_port
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.sdk import DcbClient
from streams.settings import BrokerSettings, DcbSettings, TopicSettings
from tests.integration.load import Writers
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
    client = DcbClient(service_id="restart", settings=settings, timeout_s=180)
    try:
        load = Writers([client], writers=4, per_writer=10)
        at_restart = load.wait_for(8)  # then restart in the middle of the load
        broker.stop()
        broker.start()
        load.join(400)
        log = client.read()
    finally:
        client.close()
        worker.stop()
        broker.stop()
    assert at_restart < load.total, "the load ended before the restart; nothing was tested"
    assert load.count > at_restart, worker.tail()  # the pipeline came back and committed again
    load.check_log("restart", [(e.event.event_id, e.position) for e in log])
