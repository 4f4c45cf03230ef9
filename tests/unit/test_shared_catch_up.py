"""Readers sharing catch-ups still each get one that started after they asked."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable

import pytest

from streams.sdk import shared_catch_up
from streams.sdk.shared_catch_up import LoopSharedCatchUp, SharedCatchUp


class Recorder:
    """A catch-up that takes a while and records when each run started and ended."""

    def __init__(self, takes_s: float = 0.01, fail_first: int = 0) -> None:
        self.takes_s = takes_s
        self.fail_first = fail_first
        self.runs: list[tuple[int, int]] = []  # (start tick, end tick)
        self.ticks = itertools.count()
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0

    def tick(self) -> int:
        with self.lock:
            return next(self.ticks)

    def __call__(self) -> None:
        start = self.tick()
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.takes_s)
        with self.lock:
            self.running -= 1
            failing = self.fail_first > 0
            self.fail_first -= 1
        if failing:
            raise ConnectionError("broker out of reach")
        self.runs.append((start, self.tick()))


class Interrupted(BaseException):
    """Not an ``Exception``, as ``KeyboardInterrupt`` is not."""


def read_concurrently(
    shared: SharedCatchUp, recorder: Recorder, readers: int
) -> tuple[list[tuple[int, int]], list[BaseException]]:
    calls: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    def reader() -> None:
        for _ in range(5):
            asked = recorder.tick()
            try:
                shared.wait()
            except (ConnectionError, Interrupted) as exc:
                failures.append(exc)
                continue
            calls.append((asked, recorder.tick()))

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(readers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "readers still waiting: a hang"
    return calls, failures


def served_after_asking(calls: list[tuple[int, int]], recorder: Recorder) -> bool:
    return all(
        any(asked < start and end < returned for start, end in recorder.runs)
        for asked, returned in calls
    )


@pytest.mark.parametrize("readers", [1, 2, 16, 64])
def test_every_read_waits_for_a_catch_up_that_started_after_it_asked(readers: int) -> None:
    recorder = Recorder()
    calls, failures = read_concurrently(SharedCatchUp(recorder), recorder, readers)
    assert not failures and len(calls) == readers * 5
    assert served_after_asking(calls, recorder), (
        "a read returned on a catch-up that began before it was called"
    )
    assert recorder.most_at_once == 1


def test_concurrent_readers_share_catch_ups() -> None:
    recorder = Recorder(takes_s=0.02)
    calls, _ = read_concurrently(SharedCatchUp(recorder), recorder, 16)
    assert len(calls) == 80
    assert len(recorder.runs) < 40  # one each would be 80


def test_a_failed_catch_up_fails_its_runner_and_the_others_run_their_own() -> None:
    recorder = Recorder(fail_first=1)
    calls, failures = read_concurrently(SharedCatchUp(recorder), recorder, 8)
    assert len(failures) == 1 and len(calls) == 39
    assert served_after_asking(calls, recorder)


def test_a_run_failing_for_the_readers_handed_to_it_hands_them_on() -> None:
    """The second run is handed the readers that came during the first; it fails (with a
    ``BaseException``), so they are not served by it, and one of them runs again."""
    recorder, runs = Recorder(), itertools.count()

    def catch_up() -> None:
        if next(runs) == 1:
            time.sleep(recorder.takes_s)
            raise Interrupted
        recorder()

    calls, failures = read_concurrently(SharedCatchUp(catch_up), recorder, 8)
    assert len(failures) == 1 and len(calls) == 39
    assert served_after_asking(calls, recorder)


def test_a_reader_interrupted_while_waiting_leaves_and_strands_nobody(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B queues behind A's run and is interrupted; C queues after B. The run A ends would
    go to B, first in the queue: it must go to C."""
    real_wait = shared_catch_up._Waiter.wait
    waits = itertools.count()

    def first_interrupted(waiter: shared_catch_up._Waiter) -> None:
        if next(waits) == 0:
            raise Interrupted
        real_wait(waiter)

    monkeypatch.setattr(shared_catch_up._Waiter, "wait", first_interrupted)
    recorder = Recorder(takes_s=0.2)
    shared = SharedCatchUp(recorder)
    outcome: dict[str, str] = {}

    def read(name: str) -> None:
        try:
            shared.wait()
            outcome[name] = "served"
        except Interrupted:
            outcome[name] = "interrupted"

    threads = {name: threading.Thread(target=read, args=(name,), daemon=True) for name in "ABC"}
    for name in "ABC":
        threads[name].start()
        time.sleep(0.05)  # A runs; B, then C, queue behind it
    for thread in threads.values():
        thread.join(5)
    assert outcome == {"A": "served", "B": "interrupted", "C": "served"}
    assert len(recorder.runs) == 2 and recorder.most_at_once == 1


# --- coroutines of one event loop (AsyncDcbClient) -------------------------------------


def read_in_loop(
    shared_of: Callable[[], LoopSharedCatchUp], recorder: Recorder, readers: int
) -> tuple[list[tuple[int, int]], list[BaseException]]:
    """``readers`` coroutines each reading 5 times through one loop's shared catch-up."""
    calls: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    async def reader(shared: LoopSharedCatchUp) -> None:
        for _ in range(5):
            asked = recorder.tick()
            try:
                await shared.wait()
            except ConnectionError as exc:
                failures.append(exc)
                continue
            calls.append((asked, recorder.tick()))

    async def main() -> None:
        shared = shared_of()
        await asyncio.wait_for(asyncio.gather(*(reader(shared) for _ in range(readers))), 30)

    asyncio.run(main())
    return calls, failures


@pytest.mark.parametrize("readers", [1, 2, 16, 64])
def test_every_coroutine_read_waits_for_a_catch_up_that_started_after_it_asked(
    readers: int,
) -> None:
    recorder = Recorder(takes_s=0.005)
    calls, failures = read_in_loop(lambda: LoopSharedCatchUp(recorder), recorder, readers)
    assert not failures and len(calls) == readers * 5
    assert served_after_asking(calls, recorder), (
        "a read returned on a catch-up that began before it was called"
    )
    assert recorder.most_at_once == 1
    if readers >= 16:
        assert len(recorder.runs) < readers * 5 / 2  # shared, not one each


def test_a_failed_catch_up_fails_one_coroutine_and_the_others_wait_for_the_next_run() -> None:
    recorder = Recorder(fail_first=1)
    calls, failures = read_in_loop(lambda: LoopSharedCatchUp(recorder), recorder, 8)
    assert len(failures) == 1 and len(calls) == 39
    assert served_after_asking(calls, recorder)


def test_a_cancelled_coroutine_strands_nobody() -> None:
    recorder = Recorder(takes_s=0.1)

    async def main() -> list[bool]:
        shared = LoopSharedCatchUp(recorder)
        first = asyncio.create_task(shared.wait())
        await asyncio.sleep(0.02)  # the first run goes on: these two wait for the next
        cancelled, served = asyncio.create_task(shared.wait()), asyncio.create_task(shared.wait())
        await asyncio.sleep(0.02)
        cancelled.cancel()
        await asyncio.wait_for(asyncio.gather(first, served), 5)
        return [t.cancelled() for t in (first, cancelled, served)]

    assert asyncio.run(main()) == [False, True, False]
    assert len(recorder.runs) == 2 and recorder.most_at_once == 1
