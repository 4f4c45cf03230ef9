"""Stopping a child process: SIGTERM, and SIGKILL when it does not exit in time."""

from __future__ import annotations

import subprocess


def terminate(proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """Stop ``proc`` if it still runs; killed (and reaped) after ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
