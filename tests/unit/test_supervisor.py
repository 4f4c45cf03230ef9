"""The worker supervisor: a child that ends on its own starts again, unless it was a usage
error; and the child never outlives its supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streams.infra.supervisor import EXIT_RESTART, EXIT_USAGE, should_restart, supervise


def test_which_exits_restart() -> None:
    assert should_restart(EXIT_RESTART)
    assert should_restart(-signal.SIGKILL)
    assert should_restart(1)  # a worker that crashed
    assert should_restart(0)  # a worker never ends by itself
    assert not should_restart(EXIT_USAGE)


def child(script: str) -> list[str]:
    return [sys.executable, "-c", script]


def test_a_child_that_ends_on_its_own_runs_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = (
        f"import pathlib, sys; p = pathlib.Path({str(runs)!r}); "
        "n = len(p.read_text()) if p.exists() else 0; p.write_text('x' * (n + 1)); "
        f"sys.exit([{EXIT_RESTART}, 1, 0, {EXIT_USAGE}][n])"
    )
    assert supervise(child(script), backoff_s=0.01) == EXIT_USAGE
    assert runs.read_text() == "xxxx"


def test_a_usage_error_is_not_restarted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = f"import pathlib, sys; pathlib.Path({str(runs)!r}).open('a').write('x'); sys.exit(2)"
    assert supervise(child(script), backoff_s=0.01) == 2
    assert runs.read_text() == "x"


def supervised_child(
    tmp_path: Path, child_body: str, **supervise_kwargs: float
) -> tuple[subprocess.Popen[bytes], Path]:
    """A supervisor process over a child that writes its pid to a file, runs
    ``child_body`` and sleeps; returned once the file is written."""
    pid_file = tmp_path / "child.pid"
    child = tmp_path / "child.py"
    child.write_text(
        f"import os, pathlib, signal, time\n{child_body}\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\ntime.sleep(60)\n"
    )
    program = (
        "import sys\nfrom streams.infra.supervisor import supervise\n"
        f"sys.exit(supervise([sys.executable, {str(child)!r}], **{supervise_kwargs!r}) & 0xFF)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", program])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return parent, pid_file


def test_the_child_dies_with_a_killed_supervisor(tmp_path: Path) -> None:
    parent, pid_file = supervised_child(tmp_path, "")
    child_pid = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return  # gone
        # a zombie is gone too: reaped by init, it no longer runs
        state = Path(f"/proc/{child_pid}/stat").read_text().split()[2]
        if state == "Z":
            return
        assert time.monotonic() < deadline, "the child outlived its supervisor"
        time.sleep(0.05)


def test_a_child_that_ignores_sigterm_is_killed_after_the_deadline(tmp_path: Path) -> None:
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    parent, _ = supervised_child(tmp_path, ignore, stop_deadline_s=0.5)
    started = time.monotonic()
    parent.terminate()
    assert parent.wait(20) == (-signal.SIGKILL) & 0xFF  # the child was killed, and said so
    assert time.monotonic() - started < 10
