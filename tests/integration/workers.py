"""``dcb worker`` child processes of the integration tests, one log file per start."""

from __future__ import annotations

from pathlib import Path

from streams.infra import worker_process
from streams.settings import DcbSettings

# A stuck worker exits this soon in the tests, for its supervisor to start it again.
STALL_TIMEOUT_S = 15.0


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
                "grace_ms": grace_ms,
                "stall_timeout_s": STALL_TIMEOUT_S,
            }
        )
        own = settings.model_copy(update={"worker": worker})
        super().__init__(own, workdir / f"{name}-0.log", env)
        self.workdir, self.name, self.runs = workdir, name, 0

    def wait_exit(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def start(self, wait: bool = True, timeout_s: float = 90) -> WorkerProcess:
        self.runs += 1
        self.log = self.workdir / f"{self.name}-{self.runs}.log"
        super().start(wait, timeout_s)
        return self
