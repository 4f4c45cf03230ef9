"""The runner's endpoint on loopback: GET only, and a status for every kind of request."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from streams.projections.checkpoint import Checkpoint
from streams.projections.http import HealthServer
from streams.projections.lag import ProjectionLag, projection_lag
from streams.projections.metrics import RunnerMetrics


def _lag() -> ProjectionLag:
    return projection_lag(Checkpoint(projection_id="up"), {"s": ("1" * 30, 2)}, 0.0)


@pytest.fixture
def server() -> Iterator[HealthServer]:
    health = HealthServer({"up": _lag, "down": lambda: None}, RunnerMetrics(), "127.0.0.1", 0)
    yield health.start()
    health.stop()


def _call(server: HealthServer, path: str, method: str = "GET") -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/projections/up", 200),
        ("GET", "/projections", 200),
        ("GET", "/metrics", 200),
        ("GET", "/projections/down", 503),
        ("GET", "/projections/missing", 404),
        ("GET", "/projections/UPPER%20case", 400),
        ("GET", "/elsewhere", 404),
        ("POST", "/projections/up", 405),
        ("DELETE", "/metrics", 405),
        ("PUT", "/projections", 405),
    ],
)
def test_status(server: HealthServer, method: str, path: str, status: int) -> None:
    assert _call(server, path, method) == status
