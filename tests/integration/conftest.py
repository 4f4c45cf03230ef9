"""Fixtures of the commit-path tests: the topics of a test's prefix and a running worker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.infra.postgres import LocalPostgres
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import ArchiveSettings, DcbSettings, ErasureSettings
from tests.integration.workers import WorkerProcess


@pytest.fixture(params=["service", "tag"])
def pipeline_settings(settings: DcbSettings, request: pytest.FixtureRequest) -> DcbSettings:
    """The topics of a test's prefix, with each tag placement: ``service`` (every commit
    one-phase) and ``tag`` (attempts spanning tag partitions commit in two phases)."""
    topics = settings.topics.model_copy(update={"tag_placement": request.param})
    placed = settings.model_copy(update={"topics": topics})
    ensure_topics(clients.admin(placed.resolved_bootstrap_servers), topic_specs(placed.topics))
    return placed


def running_worker(settings: DcbSettings, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker on ``settings`` for a fixture's length (a 3 s grace window)."""
    process = WorkerProcess(settings, tmp_path, "worker", grace_ms=3_000)
    yield process.start()
    process.stop()


@pytest.fixture
def worker(pipeline_settings: DcbSettings, tmp_path: Path) -> Iterator[WorkerProcess]:
    yield from running_worker(pipeline_settings, tmp_path)


def with_lifecycle(settings: DcbSettings, tmp_path: Path) -> DcbSettings:
    """``settings`` with an archive folder and a key file of the test's own and subjects
    named by ``user:`` tags (the log-lifecycle tests)."""
    return settings.model_copy(
        update={
            "archive": ArchiveSettings(dir=tmp_path / "archive"),
            "erasure": ErasureSettings(subject_prefix="user:", key_file=tmp_path / "keys.json"),
        }
    )


@pytest.fixture
def lifecycle_settings(settings: DcbSettings, tmp_path: Path) -> DcbSettings:
    """The topics of a test's prefix, with the log-lifecycle settings (``with_lifecycle``)."""
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    return with_lifecycle(settings, tmp_path)


@pytest.fixture
def lifecycle_worker(lifecycle_settings: DcbSettings, tmp_path: Path) -> Iterator[WorkerProcess]:
    yield from running_worker(lifecycle_settings, tmp_path)


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    """A real PostgreSQL server for a module's tests (the project's launcher)."""
    with LocalPostgres(Path(tmp_path_factory.mktemp("pg"))) as server:
        yield server


@pytest.fixture
def fresh_database(postgres: LocalPostgres) -> str:
    """The connection string of an empty database of the module's server."""
    database = f"t_{uuid.uuid4().hex[:12]}"
    postgres.query(f"CREATE DATABASE {database}")
    return postgres.dsn.replace("dbname=postgres", f"dbname={database}")
