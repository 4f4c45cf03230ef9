"""Run a child process and start it again when it fails: how ``dcb worker`` runs.

A worker that cannot go on (an aborted round, a fenced producer, a call to Kafka that
makes no progress: ``streams/kafka/runtime.py``) exits with :data:`EXIT_RESTART`. A
worker never ends by itself otherwise, so whenever the child ends without being asked
to, a fresh process is started (with back-off): its fresh producer aborts the open
transaction and it resumes from the committed offsets — the recovery a SIGKILL gets.
Only a usage error (exit 2, such as topics of another layout) is final. The child dies
with its supervisor (Linux ``PR_SET_PDEATHSIG``), so killing the supervisor never leaves
a worker behind.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

EXIT_RESTART = 75  # EX_TEMPFAIL: the child asks to be started again
EXIT_USAGE = 2  # bad options or settings: starting again would fail again
MAX_BACKOFF_S = 30.0
STEADY_S = 60.0  # a child that ran this long resets the back-off
log = logging.getLogger("streams.supervisor")


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _kill_if_running(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        log.warning("worker did not stop in time; killing it")
        child.kill()


def should_restart(exit_code: int) -> bool:
    """Whether a child that ended on its own is started again: all but a usage error."""
    return exit_code != EXIT_USAGE


def supervise(argv: Sequence[str], backoff_s: float = 1.0, stop_deadline_s: float = 30.0) -> int:
    """Run ``argv`` until it exits for good; SIGTERM and SIGINT are passed on to it.

    A child still running ``stop_deadline_s`` after that is killed: a shutdown can hang
    on a broker that is gone, and a stop must not.
    """
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)
            timer = threading.Timer(stop_deadline_s, _kill_if_running, args=(child,))
            timer.daemon = True
            timer.start()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    restarts, delay = 0, backoff_s
    while True:
        started = time.monotonic()
        child = subprocess.Popen(list(argv), preexec_fn=_die_with_parent)
        code = child.wait()
        if stopping or not should_restart(code):
            return code
        restarts += 1
        delay = backoff_s if time.monotonic() - started > STEADY_S else delay
        log.warning("worker exited with %s; starting it again in %.1f s", code, delay)
        print(f"[supervisor] worker exited with {code}; restart {restarts}", flush=True)
        time.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF_S)
