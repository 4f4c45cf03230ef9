"""The archive conformance suite on PostgreSQL (a real server, the project's launcher)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.archive import ArchiveStore
from streams.archive.postgres import PostgresArchive
from streams.infra.postgres import LocalPostgres
from tests.archive_conformance import ArchiveConformance

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    with LocalPostgres(Path(tmp_path_factory.mktemp("pg"))) as server:
        yield server


class TestPostgresArchive(ArchiveConformance):
    @pytest.fixture
    def store(self, postgres: LocalPostgres) -> Iterator[ArchiveStore]:
        database = f"archive_{uuid.uuid4().hex[:12]}"  # an empty store per test
        postgres.query(f"CREATE DATABASE {database}")
        yield PostgresArchive(postgres.dsn.replace("dbname=postgres", f"dbname={database}"))

    def tamper(self, store: ArchiveStore, key: str, index: int, body: bytes) -> None:
        assert isinstance(store, PostgresArchive)
        import psycopg

        header = store.headers(key)[index]
        with psycopg.connect(store.dsn) as conn:
            conn.execute(
                "UPDATE dcb_archive_segments SET body = %s WHERE key = %s AND from_suid = %s",
                (body, key, header.from_suid),
            )
