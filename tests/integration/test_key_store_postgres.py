"""The key store conformance suite on PostgreSQL (a real server, the project's launcher)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.erasure import KeyStore
from streams.erasure.postgres import PostgresKeyStore
from tests.key_store_conformance import KeyStoreConformance

pytestmark = pytest.mark.integration


class TestPostgresKeyStore(KeyStoreConformance):
    @pytest.fixture
    def keys(self, fresh_database: str) -> Iterator[KeyStore]:
        yield PostgresKeyStore(fresh_database)
