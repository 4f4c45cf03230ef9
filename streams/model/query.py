"""DCB queries and append conditions: which events match, and where a condition is checked.

An event matches a query item when its type is one of the item's types (any type
when none are given) and it carries every tag of the item. A query matches when
any item does; a query without items matches every event (read everything).

An append condition is checked per tag, by the tag processors. An event that
matches an item carries all the item's tags, so it is installed in the item's
*guard tag* (its first tag in code-point order): checking each item at its guard
tag sees every event that could match it. An item without tags could match an
event in any tag, so a condition must give every item at least one tag.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from streams.errors import InvalidConditionError, ValidationError
from streams.model.records import AppendCondition, QueryItem
from streams.model.suid import parse_suid
from streams.model.tags import canonical_tags

MAX_CONDITION_ITEMS = 32


def item_matches(item: QueryItem, event_type: str, tags: Collection[str]) -> bool:
    return (not item.types or event_type in item.types) and all(t in tags for t in item.tags)


def query_matches(query: Sequence[QueryItem], event_type: str, tags: Collection[str]) -> bool:
    return not query or any(item_matches(item, event_type, tags) for item in query)


def canonical_condition(condition: AppendCondition) -> AppendCondition:
    """The condition with canonical item tags; refuses what cannot be checked per tag."""
    items = condition.fail_if_events_match
    if not items:
        raise InvalidConditionError("a condition needs at least one query item")
    if len(items) > MAX_CONDITION_ITEMS:
        raise InvalidConditionError(
            f"{len(items)} query items exceed the bound of {MAX_CONDITION_ITEMS}",
            count=len(items),
        )
    if condition.after is not None:
        parse_suid(condition.after)
    canonical = []
    for index, item in enumerate(items):
        try:
            tags = canonical_tags(item.tags)
        except ValidationError as exc:
            raise InvalidConditionError(
                f"query item {index}: {exc.message}; every condition item names at least one "
                "tag, because a condition is checked at the tags it names",
                item=index,
                reason=exc.code,
            ) from exc
        types = sorted(set(item.types))
        same = types == item.types and list(tags) == item.tags
        canonical.append(item if same else QueryItem(types=types, tags=list(tags)))
    if all(c is item for c, item in zip(canonical, items, strict=True)):
        return condition  # already canonical (a condition built by the SDK, say)
    return AppendCondition(fail_if_events_match=canonical, after=condition.after)


def guard_tag(item: QueryItem) -> str:
    """The tag where an item of a canonical condition is checked."""
    return item.tags[0]


def guard_tags(condition: AppendCondition) -> set[str]:
    return {guard_tag(item) for item in condition.fail_if_events_match}


def items_guarded_at(condition: AppendCondition, tag: str) -> list[QueryItem]:
    return [item for item in condition.fail_if_events_match if guard_tag(item) == tag]
