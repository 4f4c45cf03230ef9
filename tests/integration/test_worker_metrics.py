"""A worker's /metrics, scraped while it commits: what it counted matches what it did."""

from __future__ import annotations

import time
from pathlib import Path

from streams.infra.ports import free_port
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.sdk import DcbClient, Event
from streams.settings import DcbSettings
from tests.integration.metrics import scrape
from tests.integration.oracle import committed_events
from tests.integration.workers import WorkerProcess


def test_the_worker_counts_its_commits_batches_and_certificates(
    settings: DcbSettings, tmp_path: Path
) -> None:
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    port = free_port()
    worker_settings = settings.worker.model_copy(update={"metrics_port": port})
    measured = settings.model_copy(update={"worker": worker_settings})
    worker = WorkerProcess(measured, tmp_path, "worker", grace_ms=3_000).start()
    try:
        with DcbClient(service_id="metered", settings=settings) as client:
            for n in range(12):
                client.append([Event("Counted", {"n": n}, [f"n:{n}"])])
        events = len(committed_events(settings))
        deadline = time.monotonic() + 30
        while (seen := scrape(port)).get('dcb_worker_unresolved{service="metered"}') != 0.0:
            assert time.monotonic() < deadline, seen
            time.sleep(0.3)
        assert seen["dcb_worker_events_committed_total"] == events == 12
        assert seen["dcb_worker_attempts_answered_total"] == 12
        assert seen["dcb_worker_round_records_count"] == seen["dcb_worker_rounds_total"] > 0
        assert seen["dcb_worker_round_records_sum"] == seen["dcb_worker_records_in_total"] >= 12
        assert seen["dcb_worker_round_seconds_count"] == seen["dcb_worker_rounds_total"]
        assert 0 <= seen['dcb_worker_certificate_prefix_age_seconds{service="metered"}'] < 60
        assert seen["dcb_worker_dead_letters_total"] == 0
    finally:
        worker.stop()
