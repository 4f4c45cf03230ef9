"""A closed-loop load: N writer threads, each issuing its next operation when the last returns.

Only operations that start after the warm-up and end inside the measured window count,
so start-up and the tail of the run do not blur the rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from streams.bench.stats import Measurement

Operation = Callable[[int, int], None]  # (writer, sequence number) -> None; raises on failure


def closed_loop(
    writers: int,
    operation: Operation,
    warmup_s: float,
    measure_s: float,
    tick: Callable[[float], None] = lambda _: None,
    on_window: Callable[[bool], None] | None = None,
) -> Measurement:
    """Run ``operation`` from ``writers`` threads for ``warmup_s + measure_s`` seconds.

    ``tick`` gets the seconds elapsed since the last call (for a progress bar);
    ``on_window`` is called with True as the measured window opens and False as it
    closes (to sample what the window cost, e.g. CPU).
    """
    start = time.perf_counter()
    window = (start + warmup_s, start + warmup_s + measure_s)
    latencies: list[list[float]] = [[] for _ in range(writers)]
    failures = [0] * writers

    def writer(w: int) -> None:
        seq = 0
        while (t0 := time.perf_counter()) < window[1]:
            try:
                operation(w, seq)
                ok = True
            except Exception:
                ok = False
            t1 = time.perf_counter()
            seq += 1
            if t0 >= window[0] and t1 <= window[1]:
                if ok:
                    latencies[w].append((t1 - t0) * 1000)
                else:
                    failures[w] += 1

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
    for thread in threads:
        thread.start()
    edges = list(window) if on_window is not None else []

    def cross(now: float) -> None:
        while edges and now >= edges[0] and on_window is not None:
            edges.pop(0)
            on_window(bool(edges))

    last = start
    while any(t.is_alive() for t in threads):
        time.sleep(min([0.25] + [max(0.0, edge - time.perf_counter()) for edge in edges[:1]]))
        now = time.perf_counter()
        cross(now)
        tick(now - last)
        last = now
    cross(float("inf"))
    samples = [x for per_writer in latencies for x in per_writer]
    return Measurement(
        completed=len(samples), failed=sum(failures), window_s=measure_s, latencies_ms=samples
    )
