"""CPU seconds a set of server processes (and their descendants) have used, from /proc."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # the fields after "(comm)"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system time of ``pids`` and every live descendant, in seconds."""
    tree = _children()
    seen: set[int] = set()
    todo = list(pids)
    ticks = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if (fields := _stat(pid)) is not None:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        todo += tree.get(pid, [])
    return ticks / _TICKS


class CpuWindow:
    """CPU seconds of named process groups between a window's opening and closing."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self._opened: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def __call__(self, opened: bool) -> None:
        now = {name: cpu_seconds(pids) for name, pids in self.groups.items()}
        if opened:
            self._opened = now
        else:
            self.spent = {name: now[name] - self._opened.get(name, now[name]) for name in now}
