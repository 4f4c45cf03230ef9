"""SUIDs and canonical tag sets and attempts: the bounds, the order, the typed errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.errors import InvalidSuidError, TagSetEmptyError, TagTooLongError, TooManyTagsError
from streams.ledger.ledger import validate_attempt
from streams.model.query import MAX_CONDITION_ITEMS
from streams.model.records import AppendCondition, CommitAttempt, EventData, QueryItem
from streams.model.suid import format_suid, issue_suids, parse_suid, suid_ticks, ticks
from streams.model.tags import MAX_TAG_LENGTH, MAX_TAGS, canonical_tags

_NOW = datetime(2026, 1, 1, tzinfo=UTC)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def test_ticks_match_dotnet() -> None:
    # DateTime(2000, 1, 1, 0, 0, 0, DateTimeKind.Utc).Ticks in .NET
    assert ticks(datetime(2000, 1, 1, tzinfo=UTC)) == 630_822_816_000_000_000
    assert ticks(datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=UTC)) == 630_822_816_000_000_010


@given(st.lists(st.tuples(instants, st.integers(1, 20)), min_size=1, max_size=30))
def test_issued_suids_strictly_increase_whatever_the_clock_does(
    steps: list[tuple[datetime, int]],
) -> None:
    watermark = None
    issued: list[str] = []
    for now, count in steps:
        batch = issue_suids(watermark, now, count)
        assert len(batch) == count
        assert all(len(s) == 30 and s.isdigit() for s in batch)
        issued += batch
        watermark = batch[-1]
    assert issued == sorted(issued)
    assert len(set(issued)) == len(issued)
    assert [int(s) for s in issued] == sorted(int(s) for s in issued)


@given(instants)
def test_a_suid_starts_at_its_issue_tick(now: datetime) -> None:
    (suid,) = issue_suids(None, now, 1)
    assert suid_ticks(suid) == ticks(now)


def test_a_seeded_watermark_from_the_future_is_respected() -> None:
    seed = format_suid(ticks(datetime(2200, 1, 1, tzinfo=UTC)) * 10**11 + 5)
    suids = issue_suids(seed, datetime.now(UTC) - timedelta(days=1), 2)
    assert suids == [format_suid(parse_suid(seed) + 1), format_suid(parse_suid(seed) + 2)]


@pytest.mark.parametrize("bad", ["", "123", "x" * 30, "1" * 31, "\uff11" * 30, "-" + "1" * 29])
def test_malformed_suids_are_typed_errors(bad: str) -> None:
    with pytest.raises(InvalidSuidError) as info:
        parse_suid(bad)
    assert info.value.code == "invalid_suid"


@given(st.lists(st.text(max_size=12), min_size=1, max_size=40))
def test_canonical_tags_are_a_trimmed_sorted_set(tags: list[str]) -> None:
    expected = sorted({t.strip() for t in tags if t.strip()})
    if not expected:
        with pytest.raises(TagSetEmptyError):
            canonical_tags(tags)
        return
    if len(expected) > MAX_TAGS:
        with pytest.raises(TooManyTagsError):
            canonical_tags(tags)
        return
    result = canonical_tags(tags)
    assert list(result) == expected
    assert canonical_tags(reversed(result)) == result  # idempotent, order-free


def test_tags_sort_by_code_point_not_locale() -> None:
    # U+005A < U+0061 < U+00E9 < U+FF5A < U+1F600: UTF-16 order would put the emoji first
    assert canonical_tags(["é", "a", "Z", "😀", "\uff5a"]) == ("Z", "a", "é", "\uff5a", "😀")


def test_tag_bounds_give_typed_errors() -> None:
    with pytest.raises(TagSetEmptyError) as empty:
        canonical_tags(["  ", ""])
    assert empty.value.code == "tags_empty"
    with pytest.raises(TooManyTagsError) as many:
        canonical_tags([f"t{i}" for i in range(MAX_TAGS + 1)])
    assert many.value.code == "too_many_tags"
    assert len(canonical_tags([f"t{i}" for i in range(MAX_TAGS)])) == MAX_TAGS
    with pytest.raises(TagTooLongError) as long:
        canonical_tags(["x" * (MAX_TAG_LENGTH + 1)])
    assert long.value.code == "tag_too_long"
    assert canonical_tags(["x" * MAX_TAG_LENGTH]) == ("x" * MAX_TAG_LENGTH,)


_tag_lists = st.lists(st.sampled_from(["a", " b", "b", "c ", "z:1", "é"]), min_size=1, max_size=4)


@given(
    st.lists(_tag_lists, min_size=1, max_size=3),
    st.none()
    | st.lists(
        st.tuples(st.lists(st.sampled_from("XYX")), _tag_lists),
        min_size=1,
        max_size=MAX_CONDITION_ITEMS,  # more is refused (tested apart): not this property's
    ),
)
def test_a_validated_attempt_is_canonical_and_validating_it_again_changes_nothing(
    event_tags: list[list[str]], items: list[tuple[list[str], list[str]]] | None
) -> None:
    attempt = CommitAttempt(
        attempt_id="a",
        writer_epoch=0,
        events=[
            EventData(event_id=f"e{i}", event_type="T", tags=tags, payload="{}", timestamp=_NOW)
            for i, tags in enumerate(event_tags)
        ],
        condition=None
        if items is None
        else AppendCondition(
            fail_if_events_match=[QueryItem(types=types, tags=tags) for types, tags in items]
        ),
    )
    valid = validate_attempt(attempt)
    assert [e.tags for e in valid.events] == [sorted({t.strip() for t in ts}) for ts in event_tags]
    assert [e.tags for e in attempt.events] == event_tags  # the caller's attempt is left as given
    if items is not None:
        assert valid.condition is not None
        assert [(i.types, i.tags) for i in valid.condition.fail_if_events_match] == [
            (sorted(set(types)), sorted({t.strip() for t in tags})) for types, tags in items
        ]
    # Canonical already: the very same object back (the SDK and the ledger both validate).
    assert validate_attempt(valid) is valid
