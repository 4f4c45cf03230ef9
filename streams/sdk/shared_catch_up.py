"""Concurrent readers of one client share catch-ups, as concurrent appends share rounds.

A read must see everything committed before it was called, so it needs a catch-up to
the topic's end offsets asked for *after* the call: one ListOffsets request and the
records up to those ends. Many threads reading through one client would each pay that
in turn; here the first reader runs a catch-up and the readers that arrive meanwhile
wait for the next one, which starts after all of them and serves them all at once.

Each waiting reader sleeps on a lock of its own, released by the run that serves it (or
that hands it the next run). Waiting on one shared ``Condition`` cost more than the
catch-ups: ``notify_all`` woke every reader to queue for the condition's lock in turn.
A run that fails fails its runner; the readers it was for wait for the next, which one
of them runs. A reader interrupted while waiting leaves without stranding the others.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class _Waiter:
    """One reader waiting: told once whether it was served or must run the next catch-up
    (for ``batch``, the readers that came before that run)."""

    __slots__ = ("_told", "batch", "served")

    def __init__(self) -> None:
        self._told = threading.Lock()
        self._told.acquire()
        self.served = False
        self.batch: list[_Waiter] = []

    def tell(self, *, served: bool, batch: list[_Waiter] | None = None) -> None:
        self.served, self.batch = served, batch or []
        self._told.release()

    def wait(self) -> None:
        self._told.acquire()


class SharedCatchUp:
    """``wait()`` returns once a run of ``catch_up`` that started after the call has
    finished; one thread runs it at a time, for every caller waiting."""

    def __init__(self, catch_up: Callable[[], None]) -> None:
        self._catch_up = catch_up
        self._lock = threading.Lock()
        self._running = False
        self._queue: list[_Waiter] = []  # came while a run went on: the next run's

    def wait(self) -> None:
        waiter: _Waiter | None = None
        with self._lock:
            if self._running:
                waiter = _Waiter()
                self._queue.append(waiter)
            else:
                self._running = True
        batch: list[_Waiter] = []
        if waiter is not None:
            try:
                waiter.wait()
            except BaseException:  # KeyboardInterrupt: leave, but not with the next run
                self._withdraw(waiter)
                raise
            if waiter.served:
                return
            batch = waiter.batch  # this caller runs, for them too: they came before it
        with self._lock:  # and for those that came since
            batch += self._queue
            self._queue = []
        served = False
        try:
            self._catch_up()  # a failure is this caller's; a waiter runs it again
            served = True
        finally:
            self._hand_over(batch, served)

    def _hand_over(self, batch: list[_Waiter], served: bool) -> None:
        """Release the run's readers, and hand the next run to the first reader waiting
        (with the rest as its batch), or stop."""
        with self._lock:
            waiting = self._queue if served else batch + self._queue
            self._queue = []
            self._running = bool(waiting)
        if waiting:  # first, so the next run starts while the served wake up
            waiting[0].tell(served=False, batch=waiting[1:])
        if served:
            for reader in batch:
                reader.tell(served=True)

    def _withdraw(self, waiter: _Waiter) -> None:
        """Take an interrupted reader out of the queue or, once it was moved on, wait for
        what it is told and hand on the run it may have been given."""
        with self._lock:
            if waiter in self._queue:
                self._queue.remove(waiter)
                return
        waiter.wait()  # moved under the lock: its word is on the way
        if not waiter.served:
            self._hand_over(waiter.batch, served=False)


class LoopSharedCatchUp:
    """:class:`SharedCatchUp` for the coroutines of one event loop: ``await wait()``
    returns once a run of ``catch_up`` that started after the call has finished. The run
    blocks, so it goes to a thread, one at a time, for every coroutine waiting; those that
    come meanwhile wait for the next. As with threads, a run that fails fails one of the
    coroutines it was for, and the others wait for the next run."""

    def __init__(self, catch_up: Callable[[], None]) -> None:
        self._catch_up = catch_up
        self._queue: list[asyncio.Future[None]] = []  # waiting for the next run
        self._runner: asyncio.Task[None] | None = None

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        served = loop.create_future()
        self._queue.append(served)
        runner = self._runner
        if runner is None or runner.done() or runner.get_loop() is not loop:
            self._runner = loop.create_task(self._run())
        await served

    async def _run(self) -> None:
        batch: list[asyncio.Future[None]] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    await asyncio.to_thread(self._catch_up)
                except Exception as exc:
                    waiting = [w for w in batch if not w.done()]  # not cancelled
                    if waiting:
                        waiting[0].set_exception(exc)
                        self._queue[:0] = waiting[1:]  # they asked before the next run
                else:
                    for waiter in batch:
                        if not waiter.done():
                            waiter.set_result(None)
                batch = []
        except BaseException:  # the runner cancelled: nobody is left waiting for ever
            for waiter in batch + self._queue:
                waiter.cancel()
            self._queue = []
            raise
