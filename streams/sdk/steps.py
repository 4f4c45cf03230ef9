"""The client's calls as steps that say what they wait for, served blocking or in asyncio.

An append validates, sends, waits for its answer, sends again after a silence, and may
read and send a repositioned attempt; a read asks for the ends, waits for the follower and
selects. That logic is written once, as a generator that yields each wait it needs
(:class:`Answered`, :class:`EndsAsked`, :class:`Folded`, :class:`Opened`) and is sent
back what it waited for, or has the wait's error thrown in. :class:`~streams.sdk.client.
DcbClient` serves the waits by blocking its thread (:func:`run`), and
:class:`~streams.sdk.client.AsyncDcbClient` by awaiting them (:func:`run_async`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from typing import Any, TypeVar

from streams.model.records import Command
from streams.sdk.event_index import SequencedEvent
from streams.sdk.follower import Follower

T = TypeVar("T")
W = TypeVar("W")


@dataclass(frozen=True, slots=True)
class Answered:
    """Send ``command`` and wait for the answer to ``attempt_id``: a ``CommitResult``."""

    command: Command
    attempt_id: str


@dataclass(frozen=True, slots=True)
class EndsAsked:
    """Wait for a request for the events' ends that started after this wait did."""


@dataclass(frozen=True, slots=True)
class Folded:
    """Wait until ``follower`` has folded far enough for ``done()``."""

    follower: Follower
    done: Callable[[], bool]


@dataclass(frozen=True, slots=True)
class Opened:
    """Open the sealed payloads of ``events``: the list, opened (may look up keys)."""

    events: list[SequencedEvent]


Wait = Answered | EndsAsked | Folded | Opened
Steps = Generator[Wait, Any, T]


def run(steps: Generator[W, Any, T], serve: Callable[[W], Any]) -> T:
    """Drive ``steps`` to their result, serving each wait they yield with ``serve``."""
    reply: Any = None
    error: BaseException | None = None
    with closing(steps):  # interrupted (or cancelled), the steps' own cleanup runs now
        while True:
            try:
                wait = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            try:
                reply, error = serve(wait), None
            except Exception as exc:
                reply, error = None, exc


async def run_async(steps: Generator[W, Any, T], serve: Callable[[W], Awaitable[Any]]) -> T:
    """:func:`run` awaiting ``serve``."""
    reply: Any = None
    error: BaseException | None = None
    with closing(steps):
        while True:
            try:
                wait = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            try:
                reply, error = await serve(wait), None
            except Exception as exc:
                reply, error = None, exc
