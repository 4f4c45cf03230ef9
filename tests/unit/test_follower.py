"""A reader of a followed topic returns only once the follower has folded past its target."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from streams.errors import NotAuthorizedError
from streams.sdk import follower as follower_module
from streams.sdk.follower import Follower, FollowerClosedError
from streams.sdk.tail import TailTimeoutError, TopicTail


class FakeTail:
    """A partition that gains records once ``grows`` is set, handed over ``batch`` at a
    time from the consumer's ``position``, as librdkafka's: a batch an error cuts short is
    gone from the consumer (its position is past it) until a wake seeks back to
    ``read_to``. Records what the follower asked of it."""

    topic = "dcb.events"

    def __init__(
        self, fail_at: tuple[int, ...] = (), batch: int = 1, error: Exception | None = None
    ) -> None:
        self.read_to = {0: 0}
        self.position = 0
        self.batch = batch
        self.grows = threading.Event()
        self.grows.set()
        self.fail_at = set(fail_at)  # offsets whose first delivery fails
        self.error = error or ConnectionError("broker out of reach")
        self.calls: list[str] = []
        self.folded: list[Any] = []

    def poll(self, handle: Callable[[Any], None], timeout_s: float) -> int:
        if not self.grows.wait(timeout_s):
            return 0
        time.sleep(0.001)
        start, self.position = self.position, self.position + self.batch
        for offset in range(start, start + self.batch):
            if offset in self.fail_at:
                self.fail_at.discard(offset)
                raise self.error
            handle(offset)
            self.read_to[0] = offset + 1
        return self.batch

    def wake(self) -> None:
        self.calls.append("wake")
        self.position = self.read_to[0]  # a seek to where it was read to

    def rest(self) -> None:
        self.calls.append("rest")


@contextmanager
def follower_of(tail: FakeTail) -> Iterator[Follower]:
    f = Follower(tail, lambda offset: tail.folded.append(offset), "test-follower")
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def tail() -> FakeTail:
    return FakeTail()


@pytest.fixture
def following(tail: FakeTail) -> Iterator[Follower]:
    with follower_of(tail) as f:
        yield f


def test_each_reader_returns_once_everything_below_its_ends_is_folded(
    tail: FakeTail, following: Follower
) -> None:
    seen: dict[int, tuple[int, int]] = {}

    def reader(target: int) -> None:
        following.wait_until(lambda: following.reached({0: target}), 10)
        seen[target] = (tail.read_to[0], len(tail.folded))

    threads = [threading.Thread(target=reader, args=(t,)) for t in (3, 40, 7, 25, 60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(seen) == [3, 7, 25, 40, 60]
    for target, (read_to, folded) in seen.items():
        assert read_to >= target and folded >= target, (target, read_to, folded)
    assert tail.folded == list(range(len(tail.folded)))  # in order, each once


def test_a_batch_cut_short_by_a_failure_comes_again_and_the_reader_is_served() -> None:
    """A failure mid-batch (a broker gone, a record that would not fold) leaves the
    consumer past the batch: the follower seeks back before it goes on, so nothing
    below a reader's ends is skipped, and the reader waits through the failure."""
    tail = FakeTail(fail_at=(4, 11), batch=3)
    with follower_of(tail) as f:
        f.wait_until(lambda: f.reached({0: 20}), 10)
        assert tail.folded[:20] == list(range(20))  # in order, none skipped, none twice
        assert tail.calls[:5] == ["wake", "rest", "wake", "rest", "wake"]


def test_a_refusal_fails_the_readers_waiting() -> None:
    tail = FakeTail(fail_at=(2,), error=NotAuthorizedError("the broker refused reading"))
    with follower_of(tail) as f, pytest.raises(NotAuthorizedError, match="refused"):
        f.wait_until(lambda: f.reached({0: 5}), 10)


def test_a_reader_timing_out_hears_of_the_last_failure() -> None:
    class Unreachable(FakeTail):
        def poll(self, handle: Callable[[Any], None], timeout_s: float) -> int:
            raise ConnectionError("broker out of reach")

    tail = Unreachable()
    with (
        follower_of(tail) as f,
        pytest.raises(TailTimeoutError, match="last failure: broker out of reach"),
    ):
        f.wait_until(lambda: f.reached({0: 1}), 0.3)


def test_closing_releases_the_readers_waiting_and_refuses_new_ones(
    tail: FakeTail, following: Follower
) -> None:
    tail.grows.clear()
    failures: list[BaseException] = []

    def reader() -> None:
        try:
            following.wait_until(lambda: following.reached({0: 1}), 10)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.05)
    following.close()
    thread.join(5)
    assert following.stopped
    assert [type(e) for e in failures] == [FollowerClosedError]
    with pytest.raises(FollowerClosedError):
        following.wait_until(lambda: following.reached({0: 1}), 10)


def test_a_reader_not_served_in_time_gets_a_timeout_and_leaves_the_queue(
    tail: FakeTail, following: Follower
) -> None:
    tail.grows.clear()
    with pytest.raises(TailTimeoutError):
        following.wait_until(lambda: following.reached({0: 1}), 0.2)
    assert not following._readers


def test_an_idle_follower_stops_fetching_and_a_reader_starts_it_again(
    tail: FakeTail, following: Follower, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower_module, "IDLE_S", 0.05)
    following.wait_until(lambda: following.reached({0: 2}), 10)
    deadline = time.monotonic() + 5
    while "rest" not in tail.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tail.calls == ["wake", "rest"]
    resting_at = tail.read_to[0]
    time.sleep(0.3)
    assert tail.read_to[0] == resting_at  # rests: polls no more
    following.wait_until(lambda: following.reached({0: resting_at + 3}), 10)
    assert tail.calls[:3] == ["wake", "rest", "wake"]


def test_a_reader_whose_ends_are_folded_already_does_not_wait_for_the_next_batch(
    tail: FakeTail, following: Follower
) -> None:
    following.wait_until(lambda: following.reached({0: 3}), 10)
    tail.grows.clear()  # nothing more comes: the follower's next poll waits its whole time
    time.sleep(0.02)  # and it is waiting now
    following.wait_until(lambda: following.reached({0: 3}), 0.05)  # shorter than that


class _Record:
    """What ``TopicTail`` reads of a consumed message."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


def test_a_tail_counts_a_record_read_only_once_it_is_handled() -> None:
    """A reader thread that sees ``read_to`` past a record must find it folded (the
    follower's readers look without waiting for its next batch)."""
    tail = TopicTail.__new__(TopicTail)  # no consumer: only the bookkeeping of a record
    tail.topic, tail.read_to, tail.on_truncated = "dcb.events", {0: 5}, None
    seen_at_handling: list[int] = []
    tail._take(_Record(5), lambda _m: seen_at_handling.append(tail.read_to[0]))  # type: ignore[arg-type]
    assert seen_at_handling == [5] and tail.read_to[0] == 6


# --- coroutines waiting (AsyncDcbClient) ------------------------------------------------


def test_coroutine_readers_return_once_everything_below_their_ends_is_folded(
    tail: FakeTail, following: Follower
) -> None:
    seen: dict[int, int] = {}

    async def reader(target: int) -> None:
        await following.wait_until_async(lambda: following.reached({0: target}), 10)
        seen[target] = len(tail.folded)

    async def main() -> None:
        await asyncio.gather(*(reader(t) for t in (3, 40, 7, 25, 60)))

    asyncio.run(main())
    assert sorted(seen) == [3, 7, 25, 40, 60]
    assert all(folded >= target for target, folded in seen.items()), seen


def test_a_coroutine_not_served_in_time_gets_a_timeout_and_leaves_the_queue(
    tail: FakeTail, following: Follower
) -> None:
    tail.grows.clear()
    with pytest.raises(TailTimeoutError):
        asyncio.run(following.wait_until_async(lambda: following.reached({0: 1}), 0.2))
    assert not following._readers


def test_a_refusal_and_closing_reach_the_coroutines_waiting(
    tail: FakeTail, following: Follower
) -> None:
    refused = FakeTail(fail_at=(2,), error=NotAuthorizedError("the broker refused reading"))
    with follower_of(refused) as f, pytest.raises(NotAuthorizedError, match="refused"):
        asyncio.run(f.wait_until_async(lambda: f.reached({0: 5}), 10))

    tail.grows.clear()

    async def closed_while_waiting() -> None:
        waiting = asyncio.create_task(
            following.wait_until_async(lambda: following.reached({0: 1}), 10)
        )
        await asyncio.sleep(0.05)
        await asyncio.to_thread(following.close)
        await waiting

    with pytest.raises(FollowerClosedError):
        asyncio.run(closed_while_waiting())


def test_a_cancelled_coroutine_leaves_the_queue(tail: FakeTail, following: Follower) -> None:
    tail.grows.clear()

    async def cancelled() -> None:
        waiting = asyncio.create_task(
            following.wait_until_async(lambda: following.reached({0: 1}), 10)
        )
        await asyncio.sleep(0.05)
        assert following._readers  # queued
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(cancelled())
    assert not following._readers
