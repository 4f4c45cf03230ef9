"""``dcb broker start|stop|status`` on its own ports and data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.infra.ports import free_port
from streams.kafka import clients
from tests.integration.cli import CliResult, dcb

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


def _said(result: CliResult, data_dir: Path) -> str:
    """What a failed assertion shows: the command's output and the broker log's tail."""
    log = data_dir / "logs" / "server.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no broker log)"
    return f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}\n{tail}"


def test_start_twice_says_so_and_stop_ends_exactly_that_broker(tmp_path: Path) -> None:
    port, data_dir = free_port(), tmp_path / "broker"
    env = {
        "DCB_BROKER__PORT": str(port),
        "DCB_BROKER__CONTROLLER_PORT": str(free_port()),
        "DCB_BROKER__DATA_DIR": str(data_dir),
    }
    try:
        started = dcb("broker", "start", "--json", env=env)
        assert started.exit_code == 0, _said(started, data_dir)
        info = started.json
        assert info["running"] and info["bootstrapServers"] == f"127.0.0.1:{port}"
        assert clients.broker_answers(info["bootstrapServers"])

        again = dcb("broker", "start", "--json", env=env)
        assert again.exit_code == 1, _said(again, data_dir)
        assert again.json["error"]["code"] == "broker_already_running"
        assert again.json["error"]["details"]["pid"] == info["pid"]
        assert _java_brokers_for(data_dir) == 1

        human = dcb("broker", "start", env=env)
        assert human.exit_code == 1 and "already running" in human.stderr, _said(human, data_dir)

        status = dcb("broker", "status", "--json", env=env)
        assert status.exit_code == 0 and status.json["pid"] == info["pid"], _said(status, data_dir)
        assert Path(status.json["logFile"]).stat().st_size > 0, "the broker logs to its file"
    finally:
        stopped = dcb("broker", "stop", "--json", env=env)
    assert stopped.exit_code == 0 and stopped.json == {"stopped": True}, _said(stopped, data_dir)
    assert _java_brokers_for(data_dir) == 0, _said(stopped, data_dir)
    assert not clients.broker_answers(f"127.0.0.1:{port}", timeout_s=1)

    after = dcb("broker", "status", "--json", env=env)
    assert after.exit_code == 3 and after.json["running"] is False, _said(after, data_dir)
    assert dcb("broker", "stop", "--json", env=env).json == {"stopped": False}
