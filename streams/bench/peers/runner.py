"""The closed loop of the peer bench: writers running the course-subscription command.

Per system and writer count: successful appends, condition failures and "no" decisions
per second; p50 / p99 of each append call and of each whole command (read, decide,
append, and again after a condition failure) that ended in an append; the server
processes' CPU. Only what starts after the warm-up and ends inside the window counts.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from streams.bench.cpu import cpu_seconds
from streams.bench.peers.api import AsyncPeerStore, Condition, Event, PeerStore, PeerSystem, Query
from streams.bench.peers.workload import (
    Rounds,
    Verdict,
    Workload,
    append_condition,
    course_tag,
    decide,
    decision_query,
    round_definitions,
    student_tag,
    subscribed,
)
from streams.bench.stats import percentile
from streams.errors import AppendConditionFailed
from streams.sdk import steps

DEFINE_BATCH = 50  # CourseDefined events per append when a round opens

T = TypeVar("T")


class PeerScenario(BaseModel):
    system: str
    writers: int
    appends_per_s: float
    condition_failures_per_s: float
    no_per_s: float
    append_p50_ms: float
    append_p99_ms: float
    command_p50_ms: float
    command_p99_ms: float
    server_cpu_pct: float  # of one core
    errors: int
    rounds: int
    # this process: the writers, the workload's decisions and the system's client library
    client_cpu_pct: float = 0.0  # of one core


@dataclass
class _Tally:
    """One writer's counts inside the window (no locks: each writer has its own)."""

    appends: int = 0
    condition_failures: int = 0
    no: int = 0
    errors: int = 0
    append_ms: list[float] = field(default_factory=list)
    command_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Read:
    query: Query


@dataclass(frozen=True, slots=True)
class Append:
    events: list[Event]
    condition: Condition | None = None


Op = Read | Append
Steps = Generator[Op, Any, T]


def define_round(namespace: str, round_no: int, w: Workload) -> Steps[None]:
    events = round_definitions(f"{namespace}{round_no}", w)
    for i in range(0, len(events), DEFINE_BATCH):
        yield Append(events[i : i + DEFINE_BATCH])


def _command(
    rng: random.Random,
    rounds: Rounds,
    namespace: str,
    tally: _Tally,
    counted: Callable[[float, float], bool],
) -> Steps[None]:
    """One read-decide-append command, retried on a condition failure; its reads and
    appends are yielded, for a writer thread or coroutine to carry out
    (:func:`streams.sdk.steps.run`)."""
    w = rounds.workload
    round_id = f"{namespace}{rounds.current}"
    course = course_tag(round_id, rng.randrange(w.courses))
    student = student_tag(round_id, rng.randrange(w.students))
    query = decision_query(course, student)
    started = time.perf_counter()
    while True:
        events = yield Read(query)
        if decide(events, course, student, w) is not Verdict.YES:
            tally.no += counted(started, time.perf_counter())
            return
        t0 = time.perf_counter()
        try:
            yield Append([subscribed(course, student)], append_condition(events, query))
        except AppendConditionFailed:
            t1 = time.perf_counter()
            if counted(t0, t1):
                tally.condition_failures += 1
                tally.append_ms.append((t1 - t0) * 1000)
            continue
        t1 = time.perf_counter()
        if counted(t0, t1):
            tally.append_ms.append((t1 - t0) * 1000)
        if counted(started, t1):
            tally.appends += 1
            tally.command_ms.append((t1 - started) * 1000)
        if (next_round := rounds.record_subscription()) is not None:
            yield from define_round(namespace, next_round, w)
            rounds.opened(next_round)
        return


def _served_by(store: PeerStore) -> Callable[[Op], Any]:
    def serve(op: Op) -> Any:
        if isinstance(op, Read):
            return store.read(op.query)
        return store.append(op.events, op.condition)

    return serve


def _awaited_by(store: AsyncPeerStore) -> Callable[[Op], Awaitable[Any]]:
    async def serve(op: Op) -> Any:
        if isinstance(op, Read):
            return await store.read(op.query)
        return await store.append(op.events, op.condition)

    return serve


def run_scenario(
    system: PeerSystem,
    writers: int,
    w: Workload,
    warmup_s: float,
    measure_s: float,
    namespace: str,
    tick: Callable[[float], None] = lambda _: None,
    on_window: Callable[[], None] | None = None,
) -> PeerScenario:
    """``writers`` writers on tags of their own ``namespace``: threads, each with its own
    client, or coroutines of one event loop (in a thread) when the system's client is
    native to asyncio (:meth:`PeerSystem.async_store`)."""
    rounds = Rounds(w)
    definer = system.store()
    try:
        steps.run(define_round(namespace, 0, w), _served_by(definer))
    finally:
        definer.close()
    start = time.perf_counter()
    window = (start + warmup_s, start + warmup_s + measure_s)
    tallies = [_Tally() for _ in range(writers)]

    def counted(t0: float, t1: float) -> bool:
        return t0 >= window[0] and t1 <= window[1]

    def command(i: int, rng: random.Random) -> Steps[None]:
        return _command(rng, rounds, namespace, tallies[i], counted)

    def writer(i: int, store: PeerStore) -> None:
        rng = random.Random(f"{namespace}{i}")
        serve = _served_by(store)
        while time.perf_counter() < window[1]:
            try:
                steps.run(command(i, rng), serve)
            except Exception:
                tallies[i].errors += 1
                time.sleep(0.05)
        store.close()

    async def coroutine_writer(i: int, store: AsyncPeerStore) -> None:
        rng = random.Random(f"{namespace}{i}")
        serve = _awaited_by(store)
        while time.perf_counter() < window[1]:
            try:
                await steps.run_async(command(i, rng), serve)
            except Exception:
                tallies[i].errors += 1
                await asyncio.sleep(0.05)
        await store.close()

    failed: list[BaseException] = []  # what stopped the coroutine writers' loop, if anything

    def coroutine_writers() -> None:
        async def main() -> None:
            stores = [system.async_store() for _ in range(writers)]
            await asyncio.gather(*(coroutine_writer(i, s) for i, s in enumerate(stores)))

        try:
            asyncio.run(main())
        except BaseException as exc:
            failed.append(exc)

    if system.writes_in_asyncio:
        threads = [threading.Thread(target=coroutine_writers, daemon=True)]
    else:
        threads = [
            threading.Thread(target=writer, args=(i, system.store()), daemon=True)
            for i in range(writers)
        ]
    for thread in threads:
        thread.start()
    cpu, client_cpu = _sample_cpu(system, window, tick, on_window)
    for thread in threads:
        thread.join(120)
    if failed:
        raise failed[0]
    assert not any(t.is_alive() for t in threads), "writers still running 120 s after the window"

    def rate(counts: list[int]) -> float:
        return round(sum(counts) / measure_s, 1)

    appends = [x for t in tallies for x in t.append_ms]
    commands = [x for t in tallies for x in t.command_ms]
    return PeerScenario(
        system=system.name,
        writers=writers,
        appends_per_s=rate([t.appends for t in tallies]),
        condition_failures_per_s=rate([t.condition_failures for t in tallies]),
        no_per_s=rate([t.no for t in tallies]),
        append_p50_ms=round(percentile(appends, 50), 1),
        append_p99_ms=round(percentile(appends, 99), 1),
        command_p50_ms=round(percentile(commands, 50), 1),
        command_p99_ms=round(percentile(commands, 99), 1),
        server_cpu_pct=round(cpu / measure_s * 100, 1),
        client_cpu_pct=round(client_cpu / measure_s * 100, 1),
        errors=sum(t.errors for t in tallies),
        rounds=rounds.current + 1,
    )


def _sample_cpu(
    system: PeerSystem,
    window: tuple[float, float],
    tick: Callable[[float], None],
    on_window: Callable[[], None] | None,
) -> tuple[float, float]:
    """Server and client (this process's) CPU seconds spent inside the window, ticking
    the progress bar meanwhile; ``on_window`` is called as the window opens."""
    before: float | None = None
    client_before = time.process_time()
    last = time.perf_counter()
    while (now := time.perf_counter()) < window[1]:
        if before is None and now >= window[0]:
            before = cpu_seconds(system.server_pids())
            client_before = time.process_time()
            if on_window is not None:
                on_window()
        time.sleep(min(0.25, max(0.0, window[1] - now)))
        tick(time.perf_counter() - last)
        last = time.perf_counter()
    server = cpu_seconds(system.server_pids()) - (before or 0.0)
    return server, time.process_time() - client_before
