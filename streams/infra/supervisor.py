"""Run a child process and start it again when it fails: how ``dcb worker`` runs faust.

aiokafka turns some broker losses (a connection closed during a coordinator lookup) into
a fatal error of a transactional producer, and a faust app with a dead transactional
producer cannot go on. The worker then exits with :data:`EXIT_RESTART`; a fresh process
makes fresh producers, which abort the open transactions and resume from the committed
offsets — the recovery a SIGKILL gets. The child dies with its supervisor (Linux
``PR_SET_PDEATHSIG``), so killing the supervisor never leaves a worker behind.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

EXIT_RESTART = 75  # EX_TEMPFAIL: the child asks to be started again
log = logging.getLogger("streams.supervisor")


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def should_restart(exit_code: int) -> bool:
    """Restart after a requested restart or a crash by signal, not after a clean exit or a
    usage error (which would fail again)."""
    return exit_code == EXIT_RESTART or exit_code < 0


def supervise(argv: Sequence[str], backoff_s: float = 1.0) -> int:
    """Run ``argv`` until it exits for good; SIGTERM and SIGINT are passed on to it."""
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    restarts = 0
    while True:
        child = subprocess.Popen(list(argv), preexec_fn=_die_with_parent)
        code = child.wait()
        if stopping or not should_restart(code):
            return code
        restarts += 1
        log.warning("worker exited with %s; starting it again (restart %d)", code, restarts)
        print(f"[supervisor] worker exited with {code}; restart {restarts}", flush=True)
        time.sleep(backoff_s)
