"""The last resort against a call that never returns.

librdkafka can block in a transactional call past its own timeout: when the group
coordinator goes away while ``send_offsets_to_transaction`` looks it up, the call waits
until some other broker changes state (confluentinc/librdkafka#5456, #5511), which on a
single broker restarted under load was never; the worker then hung without a word. The
runtime says what it is doing; when one thing lasts past the limit without progress,
this thread logs what it was and ends the process, for its supervisor to start it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Watchdog:
    def __init__(self, limit_s: float, on_stuck: Callable[[str], None]) -> None:
        self.limit_s = limit_s  # unless a watch says otherwise
        self._on_stuck = on_stuck
        self._what: str | None = None
        self._limit = limit_s
        self._since = 0.0
        self._thread = threading.Thread(target=self._watch, name="dcb-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @contextmanager
    def watching(self, what: str, limit_s: float | None = None) -> Iterator[None]:
        """Watch ``what`` (nested: the inner watch until it ends, then the outer again)."""
        outer = self._what, self._limit, self._since
        self._what, self._limit, self._since = what, limit_s or self.limit_s, time.monotonic()
        try:
            yield
        finally:
            self._what, self._limit, self._since = outer

    def progress(self) -> None:
        """What is being watched moved on: its time starts again."""
        self._since = time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            what, limit = self._what, self._limit
            if what is not None and time.monotonic() - self._since > limit:
                self._on_stuck(f"{what} made no progress for {limit:.0f} s")
                return
