"""Run the installed ``dcb`` command as a user would, and parse its ``--json`` output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.infra.worker_process import worker_env
from streams.settings import DcbSettings

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


def lifecycle_env(settings: DcbSettings) -> dict[str, str]:
    """What makes a ``dcb`` child see ``settings``' topics, archive and key file."""
    return {
        **worker_env(settings),
        "DCB_ARCHIVE__DIR": str(settings.archive.dir),
        "DCB_ERASURE__SUBJECT_PREFIX": settings.erasure.subject_prefix or "",
        "DCB_ERASURE__KEY_FILE": str(settings.erasure.key_file),
    }
