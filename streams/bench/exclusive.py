"""One benchmark at a time on a machine: runs share its broker and its cores.

Two runs at once measure each other, and the first to end stopped the embedded broker
the other was using, whose writers then waited for it for ever. A run holds an exclusive
lock on a file in the cache folder, which the operating system lets go of however the
run ends; a second run is refused at once, naming the first.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.errors import BenchBusyError

LOCK_FILE = "bench.lock"


@contextmanager
def exclusive(cache_dir: Path, what: str) -> Iterator[None]:
    """Hold the machine's benchmark lock for the block, as ``what``; or raise
    :class:`BenchBusyError` naming the run that holds it."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / LOCK_FILE).open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another benchmark"
            raise BenchBusyError(
                f"{holder} is running on this machine; benchmarks run one at a time (they "
                "would share the broker and the cores, and measure each other)",
                holder=holder,
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{what} (pid {os.getpid()})")
        lock.flush()
        yield
