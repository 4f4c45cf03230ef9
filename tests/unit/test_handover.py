"""The handover of an answer from one of the client's threads to whoever awaits it: a
blocking thread or a coroutine, the same rules for both."""

from __future__ import annotations

import asyncio
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from streams.errors import KafkaUnavailableError
from streams.model.records import CommitResult
from streams.sdk.client import _Answer
from streams.sdk.handover import Handover, LoopHandover, ThreadHandover, release_all


def result() -> CommitResult:
    return CommitResult(
        service_id="s",
        attempt_id="a",
        outcome="COMMITTED",
        suids=["1"],
        decided_at=datetime.now(UTC),
    )


class HandoverCase(ABC):
    """Each waiter kind runs every test: ``waited`` makes a handover, calls ``before`` with
    it (in the waiter's thread), then waits ``timeout_s`` twice and says what each saw."""

    @abstractmethod
    def waited(self, timeout_s: float, before: Callable[[Handover], None]) -> tuple[bool, bool]: ...

    def test_released_from_another_thread_while_waiting(self) -> None:
        started = time.monotonic()
        first, again = self.waited(5, lambda h: threading.Timer(0.05, h.release).start())
        assert first and again  # and it stays released
        assert time.monotonic() - started < 2

    def test_released_before_the_wait(self) -> None:
        assert self.waited(0.01, lambda h: h.release()) == (True, True)

    def test_no_release_in_time_is_a_timeout(self) -> None:
        started = time.monotonic()
        assert self.waited(0.1, lambda _: None) == (False, False)
        assert time.monotonic() - started >= 0.2

    def test_released_together_with_others_from_another_thread(self) -> None:
        others = [ThreadHandover() for _ in range(3)]

        def together(h: Handover) -> None:
            threading.Timer(0.05, release_all, ([*others, h],)).start()

        assert self.waited(5, together) == (True, True)
        assert all(other.wait(1) for other in others)

    def test_an_answer_hands_over_its_result_or_its_error(self) -> None:
        expected = result()
        answers: list[_Answer] = []

        def settle(h: Handover) -> None:
            answers.append(_Answer(h))
            answers[0].settle(result=expected)

        assert self.waited(1, settle) == (True, True)
        assert answers[0].outcome() is expected

        failed: list[_Answer] = []

        def fail(h: Handover) -> None:
            failed.append(_Answer(h))
            failed[0].settle(error=KafkaUnavailableError("sending the attempt: broker down"))

        assert self.waited(1, fail) == (True, True)
        with pytest.raises(KafkaUnavailableError, match="broker down"):
            failed[0].outcome()


class TestThreadHandover(HandoverCase):
    def waited(self, timeout_s: float, before: Callable[[Handover], None]) -> tuple[bool, bool]:
        handover = ThreadHandover()
        before(handover)
        return handover.wait(timeout_s), handover.wait(timeout_s)


class TestLoopHandover(HandoverCase):
    def waited(self, timeout_s: float, before: Callable[[Handover], None]) -> tuple[bool, bool]:
        async def main() -> tuple[bool, bool]:
            handover = LoopHandover()
            before(handover)
            return await handover.wait(timeout_s), await handover.wait(timeout_s)

        return asyncio.run(main())

    def test_a_release_after_the_loop_closed_is_no_error(self) -> None:
        async def made() -> LoopHandover:
            return LoopHandover()

        handover = asyncio.run(made())
        handover.release()  # the follower closing after its reader's loop ended

    def test_released_together_they_wake_their_loop_once(self) -> None:
        """One self-pipe write for a poll's answers, not one per answer."""

        async def main() -> tuple[list[bool], int]:
            loop = asyncio.get_running_loop()
            wakes = 0
            wake = loop.call_soon_threadsafe

            def counted(*args: object) -> asyncio.Handle:
                nonlocal wakes
                wakes += 1
                return wake(*args)  # type: ignore[arg-type]

            loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
            handovers = [LoopHandover() for _ in range(50)]
            threading.Thread(target=release_all, args=(handovers,)).start()
            return [await h.wait(5) for h in handovers], wakes

        released, wakes = asyncio.run(main())
        assert all(released)
        assert wakes == 1
