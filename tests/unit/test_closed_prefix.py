"""The closed prefix against a brute-force oracle over every issued SUID."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.ledger.closed_prefix import closed_prefix
from streams.model.suid import format_suid


def oracle(issued: list[str], unresolved: set[str], floor: str | None) -> str | None:
    """The greatest of issued and floor with everything at or below it settled."""
    best = None
    for suid in sorted(set(issued) | ({floor} if floor else set())):
        if any(u <= suid for u in unresolved):
            break
        best = suid
    return best


@given(
    st.sets(st.integers(1, 10**6), min_size=0, max_size=40),
    st.data(),
)
def test_prefix_is_the_greatest_settled_suid(numbers: set[int], data: st.DataObject) -> None:
    issued = [format_suid(n) for n in sorted(numbers)]
    unresolved = set(data.draw(st.sets(st.sampled_from(issued)))) if issued else set()
    settled = [s for s in issued if s < min(unresolved)] if unresolved else issued
    floor = data.draw(st.none() | st.sampled_from(settled)) if settled else None
    pruned = [s for s in issued if floor is None or s >= floor]  # what the ledger keeps
    watermark = issued[-1] if issued else None
    got = closed_prefix(pruned, min(unresolved) if unresolved else None, watermark, floor)
    assert got == oracle(issued, unresolved, floor)
    if got is not None:
        assert all(u > got for u in unresolved)  # exclusive: never the hole itself


def test_prefix_stops_just_below_the_hole_and_moves_when_it_resolves() -> None:
    a, b, c = (format_suid(n) for n in (10, 11, 12))
    assert closed_prefix([a, b, c], b, c, None) == a
    assert closed_prefix([a, b, c], None, c, a) == c
    assert closed_prefix([a, b, c], a, c, None) is None
    assert closed_prefix([], None, None, None) is None
