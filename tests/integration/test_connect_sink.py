"""Projections land in PostgreSQL through a real Kafka Connect worker running the
Debezium JDBC sink: the table equals the projection's committed rows and the independent
fold of the log, deleted rows are deleted, and a Connect worker killed mid-load loses
nothing."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from streams.infra.connect import EmbeddedConnect
from streams.infra.ports import free_port
from streams.infra.postgres import LocalPostgres
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.projections.runner import ensure_projection_topics
from streams.projections.sink import connector_name, sink_config, table_name
from streams.sdk import DcbClient
from streams.settings import ConnectSettings, DcbSettings
from tests.integration.load import CAPACITY, Subscriptions
from tests.integration.oracle import committed_events
from tests.integration.test_projections import (
    ROSTERS,
    Runner,
    committed_rows,
    fold_rosters,
    wait_caught_up,
)
from tests.integration.workers import WorkerProcess

APP = "tests.integration.projection_app:registry"
OPEN = "open-courses"


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[LocalPostgres]:
    with LocalPostgres(tmp_path / "pg") as server:
        yield server


@pytest.fixture
def sink_settings(settings: DcbSettings, postgres: LocalPostgres, tmp_path: Path) -> DcbSettings:
    connect = ConnectSettings(
        port=free_port(),
        data_dir=tmp_path / "connect",
        group_id=f"{settings.topics.prefix}connect",
        jdbc_url=f"jdbc:postgresql://127.0.0.1:{postgres.port}/postgres",
    )
    return settings.model_copy(update={"connect": connect})


def table(postgres: LocalPostgres, projection_id: str) -> dict[str, dict[str, Any]]:
    """The sink's table, row id -> the other columns (JSON columns parsed)."""
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table_name(projection_id),)).fetchone()
        if exists is None or exists[0] is None:
            return {}
        cursor = conn.execute(f'SELECT * FROM "{table_name(projection_id)}"')
        names = [c.name for c in cursor.description or []]
        out = {}
        for record in cursor.fetchall():
            row = dict(zip(names, record, strict=True))
            row_id = row.pop("row_id")
            out[row_id] = {
                k: json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v
                for k, v in row.items()
                if v is not None
            }
        return out


def wait_landed(postgres: LocalPostgres, settings: DcbSettings, projection_id: str) -> None:
    deadline = time.monotonic() + 120
    while (landed := table(postgres, projection_id)) != (
        rows := committed_rows(settings, projection_id)
    ):
        assert time.monotonic() < deadline, (
            f"{len(landed)} rows in the table, {len(rows)} on the topic"
        )
        time.sleep(0.5)


def test_projections_land_in_postgres_through_connect_and_survive_its_crash(
    sink_settings: DcbSettings, postgres: LocalPostgres, tmp_path: Path
) -> None:
    settings = sink_settings
    ensure_topics(clients.admin(settings.resolved_bootstrap_servers), topic_specs(settings.topics))
    ensure_projection_topics(settings, [ROSTERS, OPEN])
    connect = EmbeddedConnect(settings)
    connect.start()
    worker = WorkerProcess(settings, tmp_path, "worker", grace_ms=3_000).start()
    runner = Runner(settings, tmp_path, APP).start()
    client = DcbClient(service_id=f"s{uuid.uuid4().hex[:6]}", settings=settings)
    load = Subscriptions([client], writers=3, courses=4)
    try:
        for projection_id in (ROSTERS, OPEN):
            state = connect.deploy(
                connector_name(projection_id), sink_config(settings, projection_id)
            )
            assert state["tasks"][0]["state"] == "RUNNING"
        load.wait_for(30)
        # Connect dies mid-load (kill -9) and comes back: the connectors resume from
        # their committed offsets (their configs are in Connect's config topic).
        connect.kill()
        killed_at = len(load.committed())
        load.wait_for(killed_at + 20)
        connect.start()
        load.wait_for(len(load.committed()) + 10)
        load.stop()
        load.join(60)
        wait_caught_up(settings, runner)
        wait_caught_up(settings, runner, projection_id=OPEN)
        for projection_id in (ROSTERS, OPEN):
            wait_landed(postgres, settings, projection_id)
        log = committed_events(settings)
        newest = {e.service: e.suid for e in log}
        rosters = table(postgres, ROSTERS)
        assert rosters == fold_rosters(log, dict(newest))
        # Full courses were deleted from the open ones, in the table too.
        seats = Counter(f"{e.service}/course:{e.body['course']}" for e in log)
        assert table(postgres, OPEN) == {
            row_id: {"course": row_id.split(":")[-1], "seats_taken": n}
            for row_id, n in seats.items()
            if n < CAPACITY
        }
        assert any(n >= CAPACITY for n in seats.values()), "no course filled: nothing deleted"
    finally:
        load.stop()
        runner.stop()
        client.close()
        worker.stop()
        connect.stop()
