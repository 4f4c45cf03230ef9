"""UUID version 7 (RFC 9562): a millisecond Unix timestamp, then random bits, so ids made
later sort later. New events and attempts get one; Python 3.11's ``uuid`` has no ``uuid7``.

The random bits come from the operating system's CSPRNG, read a few kilobytes at a time
per thread: ``os.urandom`` is a system call that lets go of the GIL, and in a client shared
by hundreds of writer threads each such call waits its turn to take it back (an id per
event and per attempt: 7% of such a client's Python time went to ``urandom``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_RANDOM_BYTES = 10  # 80 bits, 74 of them kept
_POOL_BYTES = _RANDOM_BYTES * 512


class _Pool(threading.local):
    def __init__(self) -> None:
        self.bytes = b""
        self.at = 0


_pool = _Pool()


def _fresh_pool() -> None:
    """A forked child must not draw the bits its parent already has."""
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_fresh_pool)


def _random_bits() -> int:
    pool = _pool
    if pool.at + _RANDOM_BYTES > len(pool.bytes):
        pool.bytes, pool.at = os.urandom(_POOL_BYTES), 0
    start = pool.at
    pool.at = start + _RANDOM_BYTES
    return int.from_bytes(pool.bytes[start : start + _RANDOM_BYTES], "big")


def uuid7(unix_ms: int | None = None) -> uuid.UUID:
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    random = _random_bits()
    value = (ms & (2**48 - 1)) << 80
    value |= 0x7 << 76  # version
    value |= (random >> 68 & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= random & (2**62 - 1)  # rand_b, 62 bits
    return uuid.UUID(int=value)
