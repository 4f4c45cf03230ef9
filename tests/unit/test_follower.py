"""A reader of a followed topic returns only once the follower has folded past its target."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streams.sdk import follower as follower_module
from streams.sdk.follower import Follower
from streams.sdk.tail import TailTimeoutError


class FakeTail:
    """A partition that gains a record per poll once ``grows`` is set; records what the
    follower asked of it."""

    topic = "dcb.events"

    def __init__(self, fail_polls: int = 0) -> None:
        self.read_to = {0: 0}
        self.grows = threading.Event()
        self.grows.set()
        self.fail_polls = fail_polls
        self.calls: list[str] = []
        self.folded: list[Any] = []

    def poll(self, handle: Callable[[Any], None], timeout_s: float) -> int:
        if self.fail_polls > 0:
            self.fail_polls -= 1
            raise ConnectionError("broker out of reach")
        if not self.grows.wait(timeout_s):
            return 0
        time.sleep(0.001)
        offset = self.read_to[0]
        handle(offset)
        self.read_to[0] = offset + 1
        return 1

    def wake(self) -> None:
        self.calls.append("wake")

    def rest(self) -> None:
        self.calls.append("rest")


@pytest.fixture
def tail() -> FakeTail:
    return FakeTail()


@pytest.fixture
def following(tail: FakeTail) -> Iterator[Follower]:
    f = Follower(tail, lambda offset: tail.folded.append(offset), "test-follower")
    yield f
    f.close()


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


def test_a_reader_is_told_why_the_follower_failed_and_the_next_is_served() -> None:
    tail = FakeTail(fail_polls=1)
    tail.grows.clear()  # nothing comes until the first reader has heard of the failure
    f = Follower(tail, lambda offset: None, "failing")
    try:
        with pytest.raises(ConnectionError, match="out of reach"):
            f.wait_until(lambda: f.reached({0: 1}), 10)
        tail.grows.set()
        f.wait_until(lambda: f.reached({0: 5}), 10)
        assert tail.read_to[0] >= 5
    finally:
        f.close()


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
