"""The pause between commits: the interval when quiet, stretched by a slow commit, capped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.commit_pacing import pause_after_commit

seconds = st.floats(min_value=0, max_value=10, allow_nan=False)


@given(took=seconds, interval=seconds, longest=seconds)
def test_never_shorter_than_the_interval_nor_longer_than_the_cap(
    took: float, interval: float, longest: float
) -> None:
    pause = pause_after_commit(took, interval, longest)
    assert pause >= interval
    assert pause <= max(interval, longest)


@given(a=seconds, b=seconds)
def test_a_slower_commit_never_brings_the_next_one_sooner(a: float, b: float) -> None:
    slow, fast = max(a, b), min(a, b)
    assert pause_after_commit(slow, 0.02, 0.1) >= pause_after_commit(fast, 0.02, 0.1)


def test_quiet_load_keeps_the_interval_and_load_stretches_it() -> None:
    assert pause_after_commit(0.005, 0.02, 0.1) == 0.02
    assert pause_after_commit(0.06, 0.02, 0.1) == 0.06
    assert pause_after_commit(0.5, 0.02, 0.1) == 0.1
