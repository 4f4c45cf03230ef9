"""Steps run together; a commit waits for the running ones and holds new ones back."""

from __future__ import annotations

import asyncio

import pytest

from streams.kafka.step_gate import StepGate


async def logged_step(gate: StepGate, log: list[str], name: str, seconds: float) -> None:
    async with gate.step():
        log.append(f"{name} in")
        await asyncio.sleep(seconds)
        log.append(f"{name} out")


def test_a_close_waits_for_running_steps_and_holds_new_ones_until_reopened() -> None:
    async def scenario() -> list[str]:
        gate, log = StepGate(), []

        async def step(name: str, seconds: float) -> None:
            await logged_step(gate, log, name, seconds)

        first = asyncio.create_task(step("a", 0.02))
        second = asyncio.create_task(step("b", 0.01))
        await asyncio.sleep(0)
        await gate.close()
        log.append("closed")
        late = asyncio.create_task(step("c", 0))
        await asyncio.sleep(0.01)
        log.append("reopen")
        gate.reopen()
        await asyncio.gather(first, second, late)
        return log

    assert asyncio.run(scenario()) == [
        "a in",
        "b in",  # steps run together
        "b out",
        "a out",
        "closed",  # only once both left
        "reopen",
        "c in",  # held back while closed
        "c out",
    ]


def test_one_commit_at_a_time_and_a_cancelled_close_reopens() -> None:
    async def scenario() -> bool:
        gate = StepGate()
        entered = asyncio.Event()

        async def step() -> None:
            async with gate.step():
                entered.set()
                await asyncio.sleep(1)

        running = asyncio.create_task(step())
        await entered.wait()
        closing = asyncio.create_task(gate.close())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already closed"):
            await gate.close()
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        running.cancel()
        return gate.closed

    assert asyncio.run(scenario()) is False


def test_a_step_that_raises_leaves_the_gate_broken() -> None:
    async def scenario() -> StepGate:
        gate = StepGate()
        async with gate.step():
            pass
        assert gate.broken is None
        with pytest.raises(ValueError):
            async with gate.step():
                raise ValueError("half-way")
        return gate

    broken = asyncio.run(scenario()).broken
    assert isinstance(broken, ValueError)


def test_quiet_waits_for_a_step_after_the_mark_and_then_for_no_step_at_all() -> None:
    async def scenario() -> list[str]:
        gate, log = StepGate(), []

        async def step(name: str, seconds: float) -> None:
            await logged_step(gate, log, name, seconds)

        await step("before", 0)
        await gate.close()  # the commit takes "before" in
        gate.reopen()
        with pytest.raises(TimeoutError):  # no step since: nothing to commit early
            await asyncio.wait_for(gate.quiet(gate.started_at_close, 0.001), 0.02)

        async def steps() -> None:
            await step("a", 0.01)
            await asyncio.sleep(0.005)  # within the quiet window: not quiet yet
            await step("b", 0.01)

        running = asyncio.create_task(steps())
        await gate.quiet(gate.started_at_close, 0.02)
        log.append("quiet")
        await running
        return log

    assert asyncio.run(scenario()) == [
        "before in",
        "before out",
        "a in",
        "a out",
        "b in",
        "b out",
        "quiet",  # only after the last step, not in the gap between a and b
    ]
