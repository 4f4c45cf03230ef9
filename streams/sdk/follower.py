"""One thread follows a topic while a client reads; readers wait until it has read far enough.

A read must see what was committed before it was called: the topic's end offsets asked
for after the call (a ListOffsets request, shared by the readers that ask together), and
every record up to them. Caught up by the reader itself, each catch-up resumed the
consumer, sought, fetched, decoded and paused it again, and the readers that came
meanwhile waited for the next one: with hundreds of writer threads sharing a client,
each of those steps was a wait for the GIL, and a read took three catch-ups' time.

Here one thread fetches and folds what the topic brings as it comes, while reads come
(it pauses the consumer after :data:`IDLE_S` without one, so an idle client asks the
broker nothing); a reader only asks for the ends and waits, on a lock of its own, until
the follower has read past them. The follower checks the waiting readers after each
batch it takes, and releases those it has served.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from confluent_kafka import Message

from streams.sdk.tail import TailTimeoutError

IDLE_S = 1.0  # without a reader for this long, the follower stops fetching
POLL_S = 0.1


class Followed(Protocol):
    """What the follower needs of a tail (:class:`~streams.sdk.tail.TopicTail`)."""

    topic: str
    read_to: dict[int, int]  # per partition, the offset read up to

    def poll(self, handle: Callable[[Message], None], timeout_s: float) -> int: ...
    def wake(self) -> None: ...
    def rest(self) -> None: ...


class _Reader:
    """A reader waiting for ``done()``; released once, with the follower's error if any."""

    __slots__ = ("_released", "done", "error")

    def __init__(self, done: Callable[[], bool]) -> None:
        self.done = done
        self.error: BaseException | None = None
        self._released = threading.Lock()
        self._released.acquire()

    def release(self, error: BaseException | None = None) -> None:
        self.error = error
        self._released.release()

    def wait(self, timeout_s: float) -> bool:
        return self._released.acquire(timeout=timeout_s)


class Follower:
    """Folds ``tail``'s records with ``handle`` in a thread of its own, while read."""

    def __init__(self, tail: Followed, handle: Callable[[Message], None], name: str) -> None:
        self.tail = tail
        self.handle = handle
        self._lock = threading.Lock()
        self._readers: list[_Reader] = []
        self._last_read = 0.0
        self._wanted = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=name, daemon=True)
        self._thread.start()

    def reached(self, ends: Mapping[int, int]) -> bool:
        """Whether every record below ``ends`` (partition -> offset) has been folded."""
        return all(self.tail.read_to[p] >= end for p, end in ends.items())

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        """Return once ``done()`` holds after a batch the follower folded (checked in the
        follower's thread, so it sees the fold complete); raises why the follower failed,
        or :class:`TailTimeoutError` past ``timeout_s``."""
        with self._lock:
            self._last_read = time.monotonic()
        if done():  # folded already (the tail hands a record over before it counts it)
            return
        reader = _Reader(done)
        with self._lock:
            self._readers.append(reader)
        self._wanted.set()
        if not reader.wait(timeout_s):
            with self._lock:
                if reader in self._readers:
                    self._readers.remove(reader)
                    raise TailTimeoutError(
                        f"could not catch up with {self.tail.topic} in {timeout_s} s"
                    )
            reader.wait(timeout_s)  # released meanwhile: take what it was told
        if reader.error is not None:
            raise reader.error

    def _follow(self) -> None:
        awake = False
        while not self._closed.is_set():
            with self._lock:
                idle = not self._readers and time.monotonic() - self._last_read > IDLE_S
                if idle:
                    self._wanted.clear()
            if idle:
                if awake:
                    self.tail.rest()
                    awake = False
                self._wanted.wait(POLL_S)
                continue
            if not awake:
                self.tail.wake()
                awake = True
            error: BaseException | None = None
            try:
                self.tail.poll(self.handle, POLL_S)
            except Exception as exc:  # every reader waiting hears why; the next tries again
                error = exc
            self._release(error)
            if error is not None:
                time.sleep(POLL_S)

    def _release(self, error: BaseException | None) -> None:
        served: list[_Reader] = []
        waiting: list[_Reader] = []
        with self._lock:
            for reader in self._readers:
                (served if error is not None or reader.done() else waiting).append(reader)
            self._readers = waiting
        for reader in served:
            reader.release(error)

    def close(self) -> None:
        self._closed.set()
        self._wanted.set()
        self._thread.join(5)
