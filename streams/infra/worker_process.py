"""``dcb worker`` as a child OS process: what the demo, the bench and the tests start.

A separate process, not a thread: crash tests need something they can SIGKILL, and a
worker exits by itself when it cannot go on (its supervisor starts it again).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streams.errors import WorkerStartError
from streams.infra.processes import terminate
from streams.kafka.runtime import READY
from streams.settings import DcbSettings, security_env


def worker_env(settings: DcbSettings) -> dict[str, str]:
    """The environment that makes a child worker see exactly ``settings``' topics and app."""
    topics, worker = settings.topics, settings.worker
    return {
        **security_env(settings.kafka),
        "DCB_TOPICS__PREFIX": topics.prefix,
        "DCB_TOPICS__PARTITIONS": str(topics.partitions),
        "DCB_TOPICS__TAG_PARTITIONS": str(topics.tag_partitions),
        "DCB_TOPICS__TAG_PLACEMENT": topics.tag_placement,
        "DCB_WORKER__APP_ID": worker.app_id,
        "DCB_WORKER__GRACE_MS": str(worker.grace_ms),
        "DCB_WORKER__MAX_BATCH_RECORDS": str(worker.max_batch_records),
        "DCB_WORKER__STALL_TIMEOUT_S": str(worker.stall_timeout_s),
        "DCB_WORKER__ONE_PHASE_IN_ROUND": str(worker.one_phase_in_round).lower(),
        **({"DCB_WORKER__METRICS_PORT": str(worker.metrics_port)} if worker.metrics_port else {}),
    }


class WorkerProcess:
    """One ``dcb worker`` child, logging to ``log``; ``start`` waits for its Ready line."""

    def __init__(
        self, settings: DcbSettings, log: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.log = log
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True, timeout_s: float = 180) -> WorkerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **worker_env(self.settings), **self.extra_env}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams", "worker"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if wait:
            self.wait_for(READY, timeout_s)
        return self

    def wait_for(self, text: str, timeout_s: float) -> None:
        """Block until ``text`` is in the log; raise if the worker dies or time runs out."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log.read_text(errors="replace"):
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise WorkerStartError(
                    f"no {text!r} from the worker; its log: {self.log}", output=self.tail()
                )
            time.sleep(0.2)

    def child_pid(self) -> int | None:
        """The process running the processors: the supervised child of ``dcb worker``."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        pid = self.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        found = children.read_text().split() if children.exists() else []
        return int(found[0]) if found else None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the crash the exactly-once tests recover from. The processors' child
        first, so that it dies at once, not one signal hop later via the supervisor."""
        if self.proc is not None:
            child = self.child_pid()
            if child is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        terminate(self.proc, 30)

    def __enter__(self) -> WorkerProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
