"""One-shot handovers from the client's threads to whoever waits: a thread or a coroutine.

The answer listener, the events follower and the catch-ups run in threads of their own,
and a caller waits for what they hand over. A blocking caller waits on a lock of its
own, released once: the cheapest handover there is (a ``concurrent.futures.Future``
builds, waits on and notifies a ``Condition``, a fifth of a client's Python time with 64
writer threads sharing it). A coroutine awaits a future of its event loop, which the
thread sets through ``call_soon_threadsafe``: hundreds of concurrent calls through
:class:`~streams.sdk.client.AsyncDcbClient` wait in one thread, not in one thread each.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable
from typing import Protocol


class Handover(Protocol):
    """Released once, from any thread."""

    def release(self) -> None: ...


class ThreadHandover:
    """Waited for by a blocking thread."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def wait(self, timeout_s: float) -> bool:
        """Whether it was released within ``timeout_s``; once released, it stays so."""
        if self._lock.acquire(timeout=timeout_s):
            self._lock.release()
            return True
        return False


class LoopHandover:
    """Awaited by a coroutine of the event loop running where it is made."""

    __slots__ = ("_future", "_loop")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[None] = self._loop.create_future()

    def release(self) -> None:
        # a loop closed meanwhile has nobody left waiting
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    @staticmethod
    def _set_all(handovers: list[LoopHandover]) -> None:
        for handover in handovers:
            handover._set()

    async def wait(self, timeout_s: float) -> bool:
        """Whether it was released within ``timeout_s``; once released, it stays so."""
        if not self._future.done():
            await asyncio.wait((self._future,), timeout=timeout_s)
        return self._future.done()


def release_all(handovers: Iterable[Handover]) -> None:
    """Release each of ``handovers``; those of one event loop with one wake-up of it, not
    one each: every ``call_soon_threadsafe`` writes to the loop's self-pipe (4% of a
    client's time with 256 coroutines appending, a write per answer)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[LoopHandover]] = {}
    for handover in handovers:
        if isinstance(handover, LoopHandover):
            by_loop.setdefault(handover._loop, []).append(handover)
        else:
            handover.release()
    for loop, batch in by_loop.items():
        with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody is left waiting
            loop.call_soon_threadsafe(LoopHandover._set_all, batch)
