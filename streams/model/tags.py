"""Canonical tag sets: the one spelling of an event's consistency boundaries.

Trimmed, blanks dropped, de-duplicated, sorted by Unicode code point (Python's
``str`` order; never locale or UTF-16 order), at most 32 tags of at most 256
code points. Two spellings of the same set canonicalize to the same tuple, so
digests and membership checks compare canonical forms only.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.errors import TagSetEmptyError, TagTooLongError, TooManyTagsError

MAX_TAGS = 32
MAX_TAG_LENGTH = 256


def canonical_tags(tags: Iterable[str]) -> tuple[str, ...]:
    unique = sorted({tag.strip() for tag in tags} - {""})
    if not unique:
        raise TagSetEmptyError("an event needs at least one non-blank tag")
    if len(unique) > MAX_TAGS:
        raise TooManyTagsError(
            f"{len(unique)} distinct tags exceed the bound of {MAX_TAGS}",
            count=len(unique),
            bound=MAX_TAGS,
        )
    for tag in unique:
        if len(tag) > MAX_TAG_LENGTH:
            raise TagTooLongError(
                f"a tag of {len(tag)} characters exceeds the bound of {MAX_TAG_LENGTH}",
                tag=tag[:64] + "…",
                length=len(tag),
                bound=MAX_TAG_LENGTH,
            )
    return tuple(unique)
