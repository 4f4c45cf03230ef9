"""A sampling profile of a running process (py-spy), summarised by where its time goes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from pydantic import BaseModel


class Frame(BaseModel):
    function: str
    where: str
    self_pct: float
    total_pct: float


class ProfileSummary(BaseModel):
    file: str
    samples: int
    frames: list[Frame]  # the largest by self time, then this project's by total time


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def start_recording(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of ``pid`` for ``seconds`` into a speedscope file; None without py-spy."""
    program = py_spy()
    if program is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [program, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "50"]
    command += ["-f", "speedscope", "-o", str(out), "--nonblocking"]
    return subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


_RUNNERS = (  # event-loop and start-up plumbing: in every stack, telling nothing
    "asyncio/",
    "threading.py",
    "selectors.py",
    "runpy",
    "typer/",
    "mode/",
    "streams/cli/",
    "streams/worker.py",
    "streams/__main__.py",
)


def _short(file: str) -> str:
    for marker, prefix in (("site-packages/", ""), ("/streams/", "streams/"), ("/python3.11/", "")):
        if marker in file:
            return prefix + file.split(marker)[-1]
    return file


def summarise(path: Path, top: int = 12) -> ProfileSummary:
    """Self and total shares per function over every thread's samples: the ``top`` by self
    time, then the ``top`` by total time that are not event-loop or start-up plumbing."""
    doc = json.loads(path.read_text())
    frames = doc["shared"]["frames"]

    def key(i: int) -> tuple[str, str]:
        return frames[i]["name"], _short(frames[i].get("file", ""))

    self_w: Counter[tuple[str, str]] = Counter()
    total_w: Counter[tuple[str, str]] = Counter()
    total = 0.0
    for profile in doc["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            total += weight
            if stack:
                self_w[key(stack[-1])] += weight
            for k in {key(i) for i in stack}:
                total_w[k] += weight

    def frame(k: tuple[str, str]) -> Frame:
        share = 100 / total if total else 0.0
        return Frame(
            function=k[0],
            where=k[1],
            self_pct=round(self_w[k] * share, 1),
            total_pct=round(total_w[k] * share, 1),
        )

    by_self = [k for k, _ in self_w.most_common(top)]
    by_total = [k for k, _ in total_w.most_common() if not any(r in k[1] for r in _RUNNERS)]
    chosen = list(dict.fromkeys(by_self + by_total[:top]))
    samples = sum(len(p["samples"]) for p in doc["profiles"])
    return ProfileSummary(file=path.name, samples=samples, frames=[frame(k) for k in chosen])
