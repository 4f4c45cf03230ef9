"""Every ``dcb`` command answers ``--help``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from streams.cli.main import app

COMMANDS = [
    [],
    ["broker"],
    ["broker", "start"],
    ["broker", "stop"],
    ["broker", "status"],
    ["broker", "fetch"],
    ["topics"],
    ["topics", "create"],
    ["demo"],
    ["worker"],
    ["append"],
    ["read"],
    ["certificate"],
    ["reconcile"],
    ["bench"],
    ["bench", "commit"],
    ["bench", "peers"],
    ["bench", "scale"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "dcb")
def test_help(args: list[str]) -> None:
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_bench_peers_refuses_an_unknown_system() -> None:
    result = CliRunner().invoke(app, ["bench", "peers", "--systems", "dcb-streams,mongo"])
    assert result.exit_code == 2
    assert "mongo" in result.output
