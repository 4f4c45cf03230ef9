"""A Java server the project started (the broker, Kafka Connect): its command line, its
pid file, and stopping exactly that process.

``stop`` and ``kill`` signal the pid recorded at start only while ``/proc/<pid>/cmdline``
still names the server's main class and config file: pids get reused.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def log4j2_properties(log_file: Path, levels: dict[str, str]) -> str:
    """A log4j2 config sending everything to ``log_file``; ``levels``: logger -> level."""
    lines = [
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = file",
        f"appender.file.fileName = {log_file}",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.file.ref = file",
    ]
    for n, (logger, level) in enumerate(levels.items()):
        lines += [f"logger.l{n}.name = {logger}", f"logger.l{n}.level = {level}"]
    return "\n".join(lines) + "\n"


def java_command(
    classpath: str, heap: str, log4j_config: Path, main_class: str, *args: str
) -> list[str]:
    return [
        "java",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_config}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


class RecordedProcess:
    def __init__(self, pid_file: Path, main_class: str, config_file: Path) -> None:
        self.pid_file = pid_file
        self.main_class = main_class
        self.config_file = config_file

    def record(self, pid: int) -> None:
        self.pid_file.write_text(f"{pid}\n")

    def pid(self) -> int | None:
        """The recorded pid, while that process is still the server."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if self.is_ours(pid) else None

    def is_ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return self.main_class.encode() in cmdline and str(self.config_file).encode() in cmdline

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout_s``; False when none was running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.is_ours(pid):
            _reap(pid)
            time.sleep(0.1)
        if self.is_ours(pid):
            self.kill()
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL (crash tests), leaving the server's files as a crash would."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while self.is_ours(pid):
            _reap(pid)
            time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)


def _reap(pid: int) -> None:
    """Collect the exit status when the server is our own child, so it leaves no zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
