"""The SDK's read index answers every query as testing each event read would."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from streams.model.query import query_matches
from streams.model.records import EventData, QueryItem
from streams.sdk.event_index import EventIndex, SequencedEvent

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TYPES = ("Defined", "Subscribed", "Left")
TAGS = ("course:c1", "course:c2", "student:s1", "student:s2")

positions = st.integers(1, 40).map(lambda n: f"{n:030d}")
events = st.lists(
    st.tuples(
        positions, st.sampled_from(TYPES), st.lists(st.sampled_from(TAGS), max_size=3, unique=True)
    ),
    max_size=40,
)
items = st.builds(
    QueryItem,
    types=st.lists(st.sampled_from(TYPES), max_size=2),
    tags=st.lists(st.sampled_from(TAGS), max_size=2),
)


def sequenced(n: int, position: str, event_type: str, tags: list[str]) -> SequencedEvent:
    data = EventData(event_id=f"e{n}", event_type=event_type, payload="{}", tags=tags, timestamp=T0)
    return SequencedEvent(position=position, event=data)


def scan(
    read: list[SequencedEvent], query: list[QueryItem], after: str | None, limit: int | None
) -> list[SequencedEvent]:
    """The oracle: every event read, tested one by one (what ``read`` did before the index)."""
    out = [
        e
        for e in read
        if (after is None or e.position > after)
        and query_matches(query, e.event.event_type, e.event.tags)
    ]
    return out if limit is None else out[:limit]


@given(
    events,
    st.lists(items, max_size=3),
    st.none() | positions,
    st.none() | st.integers(0, 5),
    st.booleans(),
)
def test_a_read_through_the_index_is_the_scan_of_every_event(
    rows: list[tuple[str, str, list[str]]],
    query: list[QueryItem],
    after: str | None,
    limit: int | None,
    in_order: bool,
) -> None:
    """In SUID order (as ``dcb.events`` holds them) and in any order, repeats included."""
    if in_order:
        rows = sorted({row[0]: row for row in rows}.values())  # one event per SUID
    read = [sequenced(n, *row) for n, row in enumerate(rows)]
    index = EventIndex()
    for event in read:
        index.add(event)
    assert len(index) == len(read)
    assert index.select(query, after, limit) == scan(read, query, after, limit)


def test_reads_by_a_rare_tag_and_after_a_position_in_a_long_history() -> None:
    index = EventIndex()
    for n in range(1, 10_001):
        tag = "hot" if n % 1000 else "rare"
        index.add(sequenced(n, f"{n:030d}", "Defined", [tag, "everywhere"]))
    item = QueryItem(types=[], tags=["rare", "everywhere"])
    assert [e.event.event_id for e in index.select([item])] == [
        f"e{n}" for n in range(1000, 10_001, 1000)
    ]
    tail = index.select([QueryItem(types=[], tags=["hot"])], after=f"{9_998:030d}")
    assert [e.position for e in tail] == [f"{9_999:030d}"]
