"""``dcb broker start|stop|status`` on its own ports and data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.infra.ports import free_port
from streams.kafka import clients
from tests.integration.cli import dcb

pytestmark = pytest.mark.integration


def _java_brokers_for(data_dir: Path) -> int:
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            parts = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kafka.Kafka" in parts and any(str(data_dir).encode() in p for p in parts):
            count += 1
    return count


def test_start_twice_says_so_and_stop_ends_exactly_that_broker(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "DCB_BROKER__PORT": str(port),
        "DCB_BROKER__CONTROLLER_PORT": str(free_port()),
        "DCB_BROKER__DATA_DIR": str(tmp_path / "broker"),
    }
    try:
        started = dcb("broker", "start", "--json", env=env)
        assert started.exit_code == 0, started.stderr + started.stdout
        info = started.json
        assert info["running"] and info["bootstrapServers"] == f"127.0.0.1:{port}"
        assert clients.broker_answers(info["bootstrapServers"])

        again = dcb("broker", "start", "--json", env=env)
        assert again.exit_code == 1
        assert again.json["error"]["code"] == "broker_already_running"
        assert again.json["error"]["details"]["pid"] == info["pid"]
        assert _java_brokers_for(tmp_path / "broker") == 1

        human = dcb("broker", "start", env=env)
        assert human.exit_code == 1 and "already running" in human.stderr

        status = dcb("broker", "status", "--json", env=env)
        assert status.exit_code == 0 and status.json["pid"] == info["pid"]
        assert Path(status.json["logFile"]).stat().st_size > 0, "the broker logs to its file"
    finally:
        stopped = dcb("broker", "stop", "--json", env=env)
    assert stopped.exit_code == 0 and stopped.json == {"stopped": True}
    assert _java_brokers_for(tmp_path / "broker") == 0
    assert not clients.broker_answers(f"127.0.0.1:{port}", timeout_s=1)

    after = dcb("broker", "status", "--json", env=env)
    assert after.exit_code == 3 and after.json["running"] is False
    assert dcb("broker", "stop", "--json", env=env).json == {"stopped": False}
