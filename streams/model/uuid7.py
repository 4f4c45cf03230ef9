"""UUID version 7 (RFC 9562): a millisecond Unix timestamp, then random bits, so ids made
later sort later. New events get one; Python 3.11's ``uuid`` module has no ``uuid7``."""

from __future__ import annotations

import os
import time
import uuid


def uuid7(unix_ms: int | None = None) -> uuid.UUID:
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    random = int.from_bytes(os.urandom(10), "big")  # 80 bits, 74 of them kept
    value = (ms & (2**48 - 1)) << 80
    value |= 0x7 << 76  # version
    value |= (random >> 68 & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= random & (2**62 - 1)  # rand_b, 62 bits
    return uuid.UUID(int=value)
