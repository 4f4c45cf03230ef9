"""The archive conformance suite on PostgreSQL (a real server, the project's launcher)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.archive import ArchiveStore
from streams.archive.postgres import PostgresArchive
from tests.archive_conformance import ArchiveConformance

pytestmark = pytest.mark.integration


class TestPostgresArchive(ArchiveConformance):
    @pytest.fixture
    def store(self, fresh_database: str) -> Iterator[ArchiveStore]:
        yield PostgresArchive(fresh_database)  # an empty store per test

    def tamper(self, store: ArchiveStore, key: str, index: int, body: bytes) -> None:
        assert isinstance(store, PostgresArchive)
        import psycopg

        header = store.headers(key)[index]
        with psycopg.connect(store.dsn) as conn:
            conn.execute(
                "UPDATE dcb_archive_segments SET body = %s WHERE key = %s AND from_suid = %s",
                (body, key, header.from_suid),
            )
