"""How every command reports: JSON with ``--json``, readable text otherwise; errors structured."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from streams.errors import AppendConditionFailed, DcbError, ValidationError

console = Console()
err_console = Console(stderr=True)

EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_CONDITION_FAILED = 3


def exit_code_for(error: DcbError) -> int:
    """2 for bad input, 3 for a failed append condition, 1 for anything else."""
    if isinstance(error, ValidationError):
        return EXIT_BAD_INPUT
    if isinstance(error, AppendConditionFailed):
        return EXIT_CONDITION_FAILED
    return EXIT_ERROR


def emit(as_json: bool, data: Any, text: Callable[[], None]) -> None:
    """Print ``data`` as JSON, or call ``text`` to print it for a person."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        text()


def fail(as_json: bool, error: DcbError, exit_code: int = EXIT_ERROR) -> NoReturn:
    if as_json:
        sys.stdout.write(json.dumps({"error": error.to_dict()}, default=str) + "\n")
    else:
        err_console.print(f"[bold red]error[/] {escape(f'[{error.code}]')} {escape(error.message)}")
        for key, value in error.details.items():
            if key != "output":
                err_console.print(f"  {key}: {value}", markup=False)
        if "output" in error.details:
            err_console.print(str(error.details["output"]), markup=False)
    raise typer.Exit(exit_code)


@contextmanager
def reported(as_json: bool) -> Iterator[None]:
    """Turn any :class:`DcbError` into a structured message and a non-zero exit, not a trace."""
    try:
        yield
    except DcbError as exc:
        fail(as_json, exc, exit_code_for(exc))
