"""Fixtures of the commit-path tests: the topics of a test's prefix and a running worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import DcbSettings
from tests.integration.workers import WorkerProcess


@pytest.fixture
def pipeline_settings(settings: DcbSettings) -> DcbSettings:
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    return settings


@pytest.fixture
def worker(pipeline_settings: DcbSettings, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(pipeline_settings, tmp_path, "worker", grace_ms=3_000)
    yield process.start()
    process.stop()
