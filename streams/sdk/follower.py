"""One thread follows a topic while a client reads; readers wait until it has read far enough.

A read must see what was committed before it was called: the topic's end offsets asked
for after the call (a ListOffsets request, shared by the readers that ask together), and
every record up to them. Caught up by the reader itself, each catch-up resumed the
consumer, sought, fetched, decoded and paused it again, and the readers that came
meanwhile waited for the next one: with hundreds of writer threads sharing a client,
each of those steps was a wait for the GIL.

Here one thread fetches and folds what the topic brings as it comes, while reads come
(it pauses the consumer after :data:`IDLE_S` without one, so an idle client asks the
broker nothing); a reader only asks for the ends and waits until the follower has read
past them. The follower checks the waiting readers after each
batch it takes, and releases those it has served: a thread waits on a lock of its own,
a coroutine on a future of its event loop (:mod:`streams.sdk.handover`).

When taking or folding records fails, the follower goes back to where it had folded to
(a batch cut by an error must come again) and tries again; a refusal (not authorized)
fails the readers waiting, anything else they hear of only if it outlasts their timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import Message

from streams.errors import DcbError, NotAuthorizedError
from streams.sdk.handover import Handover, LoopHandover, ThreadHandover, release_all
from streams.sdk.tail import TailTimeoutError

log = logging.getLogger(__name__)

IDLE_S = 1.0  # without a reader for this long, the follower stops fetching
POLL_S = 0.1

H = TypeVar("H", bound=Handover)


class Followed(Protocol):
    """What the follower needs of a tail (:class:`~streams.sdk.tail.TopicTail`)."""

    topic: str
    read_to: dict[int, int]  # per partition, the offset read up to

    def poll(self, handle: Callable[[Message], None], timeout_s: float) -> int: ...
    def wake(self) -> None: ...
    def rest(self) -> None: ...


class _Reader(Generic[H]):
    """A reader waiting for ``done()``; released once, with the follower's error if any
    (set before its release)."""

    __slots__ = ("done", "error", "released")

    def __init__(self, done: Callable[[], bool], released: H) -> None:
        self.done = done
        self.error: BaseException | None = None
        self.released = released


class FollowerClosedError(DcbError):
    """The client was closed while a read waited for its follower."""

    code = "client_closed"


class Follower:
    """Folds ``tail``'s records with ``handle`` in a thread of its own, while read."""

    def __init__(self, tail: Followed, handle: Callable[[Message], None], name: str) -> None:
        self.tail = tail
        self.handle = handle
        self._lock = threading.Lock()
        self._readers: list[_Reader[Any]] = []
        self._last_read = 0.0
        self._failure: BaseException | None = None  # the last, until a batch succeeds
        self._wanted = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=name, daemon=True)
        self._thread.start()

    def reached(self, ends: Mapping[int, int]) -> bool:
        """Whether every record below ``ends`` (partition -> offset) has been folded."""
        return all(self.tail.read_to[p] >= end for p, end in ends.items())

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        """Return once ``done()`` holds (checked after each batch the follower folds);
        raises a refusal, :class:`FollowerClosedError`, or :class:`TailTimeoutError` past
        ``timeout_s`` (with the follower's last failure, if any)."""
        reader = self._queued(done, ThreadHandover)
        if reader is not None:
            try:
                if not reader.released.wait(timeout_s):
                    self._give_up(reader, timeout_s)
                    reader.released.wait(timeout_s)  # released meanwhile: take what it was told
            except BaseException:  # interrupted: the follower need not serve it any more
                self._withdraw(reader)
                raise
            if reader.error is not None:
                raise reader.error

    async def wait_until_async(self, done: Callable[[], bool], timeout_s: float) -> None:
        """:meth:`wait_until` for a coroutine: it waits in its event loop, not in a thread."""
        reader = self._queued(done, LoopHandover)
        if reader is not None:
            try:
                if not await reader.released.wait(timeout_s):
                    self._give_up(reader, timeout_s)
                    await reader.released.wait(timeout_s)
            except BaseException:  # cancelled
                self._withdraw(reader)
                raise
            if reader.error is not None:
                raise reader.error

    def _queued(self, done: Callable[[], bool], handover: Callable[[], H]) -> _Reader[H] | None:
        """A reader queued for the follower to release, or None if ``done()`` holds."""
        with self._lock:
            self._last_read = time.monotonic()
        if done():  # folded already (the tail hands a record over before it counts it)
            return None
        reader = _Reader(done, handover())
        with self._lock:
            if self._closed.is_set():
                raise FollowerClosedError(f"reading {self.tail.topic}: the client is closed")
            self._readers.append(reader)
        if done() and self._withdraw(reader):  # served between the look and the queue
            return None
        self._wanted.set()
        return reader

    def _give_up(self, reader: _Reader[Any], timeout_s: float) -> None:
        """Raise the timeout, unless the follower released ``reader`` meanwhile."""
        if self._withdraw(reader):
            failure = self._failure
            why = f" (last failure: {failure})" if failure is not None else ""
            raise TailTimeoutError(
                f"could not catch up with {self.tail.topic} in {timeout_s} s{why}"
            )

    def _withdraw(self, reader: _Reader[Any]) -> bool:
        """Take ``reader`` out of the queue; False when the follower released it already."""
        with self._lock:
            if reader in self._readers:
                self._readers.remove(reader)
                return True
            return False

    def _follow(self) -> None:
        awake = False
        while not self._closed.is_set():
            with self._lock:
                idle = not self._readers and time.monotonic() - self._last_read > IDLE_S
                if idle:
                    self._wanted.clear()
            try:
                if idle:
                    if awake:
                        awake = False
                        self.tail.rest()
                    self._wanted.wait(POLL_S)
                    continue
                if not awake:
                    self.tail.wake()  # from where it was folded to: also after a failure
                    awake = True
                self.tail.poll(self.handle, POLL_S)
                self._failure = None
                self._release()
            except Exception as exc:
                self._failed(exc)
                awake = False  # what a failure cut short comes again after the next wake
                self._rest_quietly()
                self._closed.wait(POLL_S)

    def _failed(self, exc: Exception) -> None:
        log.warning("following %s: %s; trying again", self.tail.topic, exc)
        self._failure = exc
        if isinstance(exc, NotAuthorizedError):  # asking again changes nothing
            self._release(exc)
        else:
            self._release()

    def _rest_quietly(self) -> None:
        try:
            self.tail.rest()
        except Exception as exc:  # the next wake assigns the partitions afresh if it must
            log.warning("pausing %s: %s", self.tail.topic, exc)

    def _release(self, error: BaseException | None = None) -> None:
        """Release the readers served (all of them with ``error``)."""
        served: list[_Reader[Any]] = []
        waiting: list[_Reader[Any]] = []
        with self._lock:
            for reader in self._readers:
                (served if error is not None or reader.done() else waiting).append(reader)
            self._readers = waiting
        for reader in served:
            reader.error = error
        release_all(reader.released for reader in served)

    def close(self) -> None:
        """Stop the thread; readers still waiting raise :class:`FollowerClosedError`."""
        with self._lock:
            self._closed.set()
        self._wanted.set()
        self._thread.join(5)
        self._release(FollowerClosedError(f"reading {self.tail.topic}: the client is closed"))

    @property
    def stopped(self) -> bool:
        """The thread has ended: the tail is no longer in use."""
        return not self._thread.is_alive()
