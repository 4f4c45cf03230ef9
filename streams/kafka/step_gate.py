"""The gate between agents' steps and the commits of their transactions.

A commit must not cut a step in two: a step whose outputs entered transaction T while
its source offset went into T+1 would be replayed after a crash between the two, and
write its outputs again. So a commit *closes* the gate: no new step starts, and the
commit waits for the running ones. It holds the gate only while it fixes what it
commits (the offsets, the queued table writes, the transaction locks), not while the
broker commits: steps run meanwhile, and a step's send to a transaction being committed
waits for its lock, so it lands in the next transaction with the step's offset.

Steps of different agents run together (they touch different partitions and tables);
a waiting commit holds new steps back, so a busy agent cannot starve it. The gate
counts the steps, so that the commit timer can start a commit as soon as the agents
have gone quiet after one (:meth:`StepGate.quiet`). A step that raises leaves the gate
*broken*: part of its outputs may sit in the open transactions, so the producer commits
nothing more and the watchdog ends the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class StepGate:
    def __init__(self) -> None:
        self.broken: BaseException | None = None  # a step that failed half-way
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()
        self.started = 0  # steps started so far
        self.started_at_close = 0  # how many of them the last close took in
        self._ended = asyncio.Event()  # set each time the last running step ends

    @asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        while not self._open.is_set():
            await self._open.wait()
        self._running += 1
        self.started += 1
        self._idle.clear()
        try:
            yield
        except BaseException as exc:
            # Part of its outputs may be in the open transactions: none may commit now.
            self.broken = self.broken or exc
            raise
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()
                self._ended.set()

    async def quiet(self, since: int, quiet_s: float) -> None:
        """Return once a step has started after the ``since``-th and then no step has run
        for ``quiet_s``: what those steps wrote is ready to commit, and nothing is under
        way that the commit would wait for."""
        while True:
            if self.started > since and not self._running:
                seen = self.started
                await asyncio.sleep(quiet_s)
                if self.started == seen and not self._running:
                    return
                continue
            self._ended.clear()
            await self._ended.wait()

    async def close(self) -> None:
        """Hold new steps back and wait for the running ones (one commit at a time)."""
        if not self._open.is_set():
            raise RuntimeError("the step gate is already closed: one commit at a time")
        self._open.clear()
        self.started_at_close = self.started
        try:
            await self._idle.wait()
        except BaseException:
            self._open.set()
            raise

    def reopen(self) -> None:
        self._open.set()

    @property
    def closed(self) -> bool:
        return not self._open.is_set()
