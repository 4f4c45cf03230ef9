"""Concurrent readers of one client share catch-ups, as concurrent appends share rounds.

A read must see everything committed before it was called, so it needs a catch-up to
the topic's end offsets asked for *after* the call: one ListOffsets request and the
records up to those ends. Many threads reading through one client would each pay that
in turn; here the first reader runs a catch-up and the readers that arrive meanwhile
wait for the next one, which starts after all of them and serves them all at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SharedCatchUp:
    """``wait()`` returns once a run of ``catch_up`` that started after the call has
    finished; one thread runs it at a time, for every caller waiting."""

    def __init__(self, catch_up: Callable[[], None]) -> None:
        self._catch_up = catch_up
        self._changed = threading.Condition()
        self._asked = 0  # callers so far, numbered
        self._served = 0  # every caller up to this number has had its catch-up
        self._running = False

    def wait(self) -> None:
        with self._changed:
            self._asked += 1
            ticket = self._asked
            while self._served < ticket:
                if self._running:
                    self._changed.wait()
                    continue
                self._running, covers = True, self._asked  # they all came before this run
                self._changed.release()
                served = False
                try:
                    self._catch_up()  # a failure is this caller's; a waiter runs it again
                    served = True
                finally:
                    self._changed.acquire()
                    self._running = False
                    if served:
                        self._served = max(self._served, covers)
                    self._changed.notify_all()
