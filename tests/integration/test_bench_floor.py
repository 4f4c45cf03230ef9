"""The transport floor of ``dcb bench commit`` relays its backlog exactly once, in the
transactions of the worker's transport, before it reports a rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.bench.floor import floor_topics, run_floor
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import read_all

pytestmark = pytest.mark.integration


def test_the_floor_relays_every_record_once_and_measures_its_steps(
    bootstrap_servers: str, topic_prefix: str, tmp_path: Path
) -> None:
    settings = DcbSettings(
        bootstrap_servers=bootstrap_servers,
        topics={"prefix": topic_prefix, "partitions": 3},
        worker={"app_id": f"{topic_prefix}worker"},
    )
    result = run_floor(settings, 300, b"relayed", tmp_path / "floor.log")
    assert (result.steps, result.outputs_per_step) == (300, 1)
    assert result.steps_per_s > 0 and result.cpu_us_per_step > 0
    _, out_topic = floor_topics(settings)
    assert out_topic == f"{topic_prefix}bench-floor-out"
    out = read_all(bootstrap_servers, out_topic, expect_at_least=300)
    assert [m.value() for m in out] == [b"relayed"] * 300
    keys = {m.key() for m in out}
    assert keys == {str(i).encode() for i in range(100)}
