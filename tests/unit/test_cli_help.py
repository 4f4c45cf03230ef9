"""Every ``dcb`` command answers ``--help``."""

from __future__ import annotations

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from streams.cli.main import app


def _paths(command: object, path: list[str]) -> list[list[str]]:
    """Every command and group under ``command``, as the words that call it."""
    found = [path]
    if isinstance(command, TyperGroup):
        for name, sub in sorted(command.commands.items()):
            found += _paths(sub, [*path, name])
    return found


COMMANDS = _paths(typer.main.get_command(app), [])


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "dcb")
def test_help(args: list[str]) -> None:
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_bench_peers_refuses_an_unknown_system() -> None:
    result = CliRunner().invoke(app, ["bench", "peers", "--systems", "dcb-streams,mongo"])
    assert result.exit_code == 2
    assert "mongo" in result.output
