"""Child processes of the integration tests: the relay base and ``dcb worker`` per test."""

from __future__ import annotations

import subprocess
from pathlib import Path

from streams.infra import worker_process
from streams.infra.processes import terminate
from streams.settings import DcbSettings


class ChildProcess:
    """A worker in its own OS process, so a test can SIGKILL it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def wait_exit(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        terminate(self.proc, 30)


class WorkerProcess(worker_process.WorkerProcess):
    """``dcb worker`` on one test's topics, app id and data folder; a new log per start."""

    def __init__(
        self,
        settings: DcbSettings,
        workdir: Path,
        name: str,
        grace_ms: int,
        env: dict[str, str] | None = None,
    ) -> None:
        worker = settings.worker.model_copy(
            update={
                "app_id": f"{settings.topics.prefix}worker",
                "data_dir": workdir / f"{name}-data",
                "grace_ms": grace_ms,
            }
        )
        own = settings.model_copy(update={"worker": worker})
        super().__init__(own, workdir / f"{name}-0.log", env)
        self.workdir, self.name, self.runs = workdir, name, 0

    def start(self, wait: bool = True, timeout_s: float = 90) -> WorkerProcess:
        self.runs += 1
        self.log = self.workdir / f"{self.name}-{self.runs}.log"
        super().start(wait, timeout_s)
        return self
