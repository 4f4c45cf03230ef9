"""Formatting the embedded broker's storage with the real Kafka storage tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.infra.broker import EmbeddedBroker
from streams.infra.ports import free_port
from streams.settings import BrokerSettings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("cluster_id", ["-AbCdEfGhIjKlMnOpQrStUv", "_AbCdEfGhIjKlMnOpQrStUv"])
def test_any_cluster_id_formats_and_a_second_format_keeps_it(
    tmp_path: Path, cluster_id: str
) -> None:
    """A random id starts with "-" once in 64; the tool must not read it as an option."""
    broker = EmbeddedBroker(
        BrokerSettings(port=free_port(), controller_port=free_port(), data_dir=tmp_path / "k")
    )
    broker.fetch()
    assert broker.format_storage(cluster_id) == cluster_id
    assert broker.format_storage() == cluster_id, "a formatted folder keeps its cluster id"
