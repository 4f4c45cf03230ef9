"""Run the installed ``dcb`` command as a user would, and parse its ``--json`` output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DCB = Path(sys.executable).parent / "dcb"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def dcb(*args: str, env: dict[str, str] | None = None, timeout_s: float = 180) -> CliResult:
    proc = subprocess.run(
        [str(DCB), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout_s,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)
