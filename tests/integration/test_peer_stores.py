"""Each system of ``dcb bench peers`` keeps the DCB contract, on its real server."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.bench.peers.api import Event, PeerStore, PeerSystem
from streams.bench.peers.dcb_streams import DcbStreams
from streams.bench.peers.eventsourcing_pg import EventsourcingPostgres
from streams.bench.peers.umadb import UmaDb
from streams.kafka import clients
from streams.kafka.topic_admin import ensure_topics
from streams.kafka.topic_catalog import topic_specs
from streams.settings import DcbSettings, TopicSettings, WorkerSettings
from tests.peer_conformance import BlockingStore, PeerStoreContract


class TestEventsourcingPostgres(PeerStoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def system(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerSystem]:
        with EventsourcingPostgres(tmp_path_factory.mktemp("pg"), pool_size=2) as system:
            yield system


class TestUmaDb(PeerStoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def system(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerSystem]:
        with UmaDb(tmp_path_factory.mktemp("umadb")) as system:
            yield system


class TestDcbStreams(PeerStoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def system(
        cls, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[PeerSystem]:
        prefix = f"t{uuid.uuid4().hex[:10]}."
        folder = tmp_path_factory.mktemp("dcb")
        settings = DcbSettings(
            bootstrap_servers=bootstrap_servers,
            topics=TopicSettings(prefix=prefix, partitions=3, tag_partitions=3),
            worker=WorkerSettings(app_id=f"{prefix}worker"),
        )
        ensure_topics(clients.admin(bootstrap_servers), topic_specs(settings.topics))
        with DcbStreams(settings, folder / "worker.log") as system:
            yield system


class TestDcbStreamsCoroutines(TestDcbStreams):
    """The store the bench's coroutine writers use (an ``AsyncDcbClient``)."""

    @pytest.fixture
    def store(self, system: PeerSystem) -> Iterator[PeerStore]:
        store = BlockingStore(system)
        yield store
        store.close()


def test_umadb_says_which_server_ran_when_no_cargo_build_can_be_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.cargo/bin/cargo
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no cargo on PATH
    with UmaDb(tmp_path / "run", build_cache=tmp_path / "cache") as system:
        assert "PyPI wheel" in system.detail and "cargo is not installed" in system.detail
        store = system.store()
        assert store.append([Event("E", ("t:1",))]) == 1
