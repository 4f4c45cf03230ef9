"""Writing a file so that after a crash it is the old one or the new one, whole."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_folder(folder: Path) -> None:
    """Make a folder's entries (a file renamed or made in it) survive a power loss."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folder_durably(folder: Path) -> None:
    """``mkdir -p`` whose new entries are on disk before this returns."""
    missing = []
    at = folder
    while not at.exists():
        missing.append(at)
        at = at.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        fsync_folder(new.parent)


def write_durably(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``data`` at ``path`` whole or not at all, on disk before this returns: written
    beside it, fsynced, renamed over it, and the rename fsynced in the folder."""
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    fsync_folder(path.parent)
