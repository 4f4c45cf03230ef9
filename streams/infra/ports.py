"""Free loopback ports for the servers this project starts (broker, PostgreSQL)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def restartable_port(host: str = "127.0.0.1") -> int:
    """A free port outside the kernel's ephemeral range, for a server that is stopped and
    started again on it: while it is down, a client reconnecting to it can otherwise be
    given that very port as its own source port (or connect to itself), and the server
    cannot bind it again."""
    low, high = 32768, 60999
    if _EPHEMERAL.exists():
        low, high = (int(n) for n in _EPHEMERAL.read_text().split())
    candidates = [p for p in range(10_000, 65_535) if not low <= p <= high]
    for port in random.sample(candidates, 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError("no free port outside the ephemeral range")
