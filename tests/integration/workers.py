"""`dcb worker` as separate OS processes, with the topics of one test's prefix."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from streams.settings import DcbSettings

DCB = Path(sys.executable).parent / "dcb"


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
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class WorkerProcess(ChildProcess):
    """``dcb worker`` with the settings of one test."""

    def __init__(
        self,
        settings: DcbSettings,
        workdir: Path,
        name: str,
        grace_ms: int,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.settings, self.workdir, self.name = settings, workdir, name
        self.grace_ms = grace_ms
        self.env = env or {}

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}-{self.runs}.log"

    def start(self, wait: bool = True) -> WorkerProcess:
        self.runs += 1
        topics = self.settings.topics
        env = {
            **os.environ,
            "DCB_BOOTSTRAP_SERVERS": self.settings.resolved_bootstrap_servers,
            "DCB_TOPICS__PREFIX": topics.prefix,
            "DCB_TOPICS__PARTITIONS": str(topics.partitions),
            "DCB_TOPICS__TAG_PARTITIONS": str(topics.tag_partitions),
            "DCB_WORKER__APP_ID": f"{topics.prefix}worker",
            "DCB_WORKER__DATA_DIR": str(self.workdir / f"{self.name}-data"),
            "DCB_WORKER__GRACE_MS": str(self.grace_ms),
            **self.env,
        }
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(DCB), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        if wait:
            self.wait_for("Worker]: Ready", 90)
        return self

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log.read_text(errors="replace"):
            assert self.proc is not None and self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, f"no {text!r} in time\n{self.tail()}"
            time.sleep(0.2)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]
