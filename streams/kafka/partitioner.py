"""Kafka's default partitioner for keyed records (murmur2), so a reader can find a key's
partition without a producer: every producer here uses it (librdkafka's
``murmur2_random``, as the Java client does)."""

from __future__ import annotations

from functools import lru_cache

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash of ``data`` as Kafka computes it (unsigned)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


@lru_cache(maxsize=4096)
def key_partition(key: bytes, partitions: int) -> int:
    """The partition a record with ``key`` lands in among ``partitions``. Remembered: a
    worker asks it for every record it routes, mostly for the same few keys (a service's,
    under the service placement), and murmur2 in Python is a few µs a key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
