"""`dcb demo` end to end: broker, worker process, concurrent students, the rules held."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.infra.ports import free_port
from tests.integration.cli import dcb

pytestmark = pytest.mark.integration


def _env(bootstrap_servers: str, topic_prefix: str, **more: str) -> dict[str, str]:
    """A demo child on the test's broker, topics and worker group, plus ``more``."""
    return {
        "DCB_BOOTSTRAP_SERVERS": bootstrap_servers,
        "DCB_TOPICS__PREFIX": topic_prefix,
        "DCB_WORKER__APP_ID": f"{topic_prefix}worker",
        **more,
    }


def test_demo_fills_the_courses_and_refuses_the_rest(
    bootstrap_servers: str, topic_prefix: str, tmp_path: Path
) -> None:
    env = _env(
        bootstrap_servers,
        topic_prefix,
        DCB_WORKER__DATA_DIR=str(tmp_path / "worker"),
        DCB_BROKER__CACHE_DIR=str(tmp_path),
    )
    args = ["--students", "8", "--courses", "2", "--capacity", "3", "--limit", "1"]
    result = dcb("demo", "--json", *args, "--writers", "4", env=env, timeout_s=300)
    assert result.exit_code == 0, result.stderr[-3000:]
    report = result.json
    assert report["rulesHeld"] is True
    assert report["seats"] == {
        "c1": {"taken": 3, "capacity": 3},
        "c2": {"taken": 3, "capacity": 3},
    }
    assert report["subscriptions"] == 6
    reasons = {r["reason"] for r in report["refused"]}
    assert reasons <= {"course c1 is full (3/3)", "course c2 is full (3/3)"} | {
        f"s{n} already has 1 courses (limit 1)" for n in range(1, 9)
    }
    assert len(report["refused"]) == 16 - 6
    assert report["certificate"]["closedPrefixSuid"] is not None
    # The final certificate: the refused attempts' other tags are fenced too.
    assert report["certificate"]["unresolvedCount"] == 0


def test_demo_projections_lands_the_rosters_in_postgres(
    bootstrap_servers: str, topic_prefix: str, tmp_path: Path
) -> None:
    env = _env(
        bootstrap_servers,
        topic_prefix,
        DCB_CONNECT__PORT=str(free_port()),
        DCB_CONNECT__DATA_DIR=str(tmp_path / "connect"),
        DCB_CONNECT__GROUP_ID=f"{topic_prefix}connect",
    )
    args = ["--students", "12", "--courses", "3", "--capacity", "3", "--limit", "1"]
    result = dcb("demo", "projections", "--json", *args, "--writers", "4", env=env, timeout_s=400)
    assert result.exit_code == 0, result.stderr[-3000:]
    report = result.json
    assert report["postgresEqualsLog"] is True
    rows = report["rowsInPostgres"]
    assert sorted(rows) == ["c1", "c2", "c3"]
    assert sum(len(students) for students in rows.values()) == report["subscriptions"] == 9
    assert report["lag"]["events_behind"] == 0
