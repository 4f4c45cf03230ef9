"""The archive's rules, shared by every backend (pure: no I/O).

A segment's canonical bytes are its records in order, each prefixed by its length as
four big-endian bytes; its digest is the SHA-256 of those bytes. A backend may store the
canonical bytes as they are, so checking a read is hashing what was stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from streams.archive.exceptions import (
    ArchiveConflictError,
    ArchiveDigestError,
    ArchiveIncarnationError,
    ArchiveKeyInvalidError,
    ArchiveSegmentInvalidError,
)
from streams.errors import InvalidSuidError
from streams.model.suid import parse_suid

if TYPE_CHECKING:
    from streams.archive.api import Segment, SegmentHeader

DIGEST_PREFIX = "sha256:"
_LENGTH_BYTES = 4


def canonical_bytes(records: Sequence[bytes]) -> bytes:
    return b"".join(len(r).to_bytes(_LENGTH_BYTES, "big") + r for r in records)


def digest_of(canonical: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(canonical).hexdigest()


def segment_digest(records: Sequence[bytes]) -> str:
    return digest_of(canonical_bytes(records))


def split_records(canonical: bytes) -> Iterator[bytes]:
    """The records of canonical bytes (a truncated tail raises ``ValueError``)."""
    at = 0
    while at < len(canonical):
        size = int.from_bytes(canonical[at : at + _LENGTH_BYTES], "big")
        at += _LENGTH_BYTES
        if at + size > len(canonical):
            raise ValueError("truncated record")
        yield canonical[at : at + size]
        at += size


def check_segment(key: str, segment: Segment) -> None:
    """Bounds are SUIDs, not inverted; at least one record; count and digest match."""
    header = segment.header
    try:
        low, high = parse_suid(header.from_suid), parse_suid(header.through_suid)
    except InvalidSuidError as exc:
        raise ArchiveSegmentInvalidError(f"archive {key!r}: {exc.message}", key=key) from exc
    if low > high:
        raise ArchiveSegmentInvalidError(
            f"archive {key!r}: segment {header.describe()} is inverted", key=key
        )
    if not segment.records or header.count != len(segment.records):
        raise ArchiveSegmentInvalidError(
            f"archive {key!r}: segment {header.describe()} counts {header.count} records "
            f"and holds {len(segment.records)} (at least one)",
            key=key,
        )
    if header.digest != segment_digest(segment.records):
        raise ArchiveSegmentInvalidError(
            f"archive {key!r}: segment {header.describe()}'s digest is not its records'",
            key=key,
        )


def classify_append(
    key: str, stored: Sequence[SegmentHeader], header: SegmentHeader
) -> Literal["append", "noop"]:
    """``noop`` for an exact repeat of a stored segment, ``append`` when it starts after
    the last one; anything else is a conflict (nothing may be written)."""
    for held in stored:
        check_incarnation(key, held.incarnation, header.incarnation)
    for held in stored:
        same = (held.from_suid, held.through_suid, held.digest)
        if same == (header.from_suid, header.through_suid, header.digest):
            return "noop"
    if stored and header.from_suid <= stored[-1].through_suid:
        raise ArchiveConflictError(
            f"archive {key!r}: segment {header.describe()} does not start after the last "
            f"archived SUID {stored[-1].through_suid} and repeats no archived segment; "
            "segments are append-only; nothing was written",
            key=key,
            attempted=header.describe(),
            last_through=stored[-1].through_suid,
        )
    return "append"


def check_incarnation(key: str, archived: str, offered: str) -> None:
    if archived != offered:
        raise ArchiveIncarnationError(
            f"archive {key!r} holds incarnation {archived}, not {offered}: a re-created "
            "service does not inherit a history (delete the key to start afresh)",
            key=key,
            archived=archived,
            offered=offered,
        )


def check_key(key: str) -> None:
    """A key is a non-empty, well-formed Unicode string without NUL (what every backend
    can store and order by code point)."""
    try:
        key.encode()
    except UnicodeEncodeError as exc:
        raise ArchiveKeyInvalidError(f"archive key {key!r} is not well-formed Unicode") from exc
    if not key or "\x00" in key:
        raise ArchiveKeyInvalidError(f"archive key {key!r} is empty or holds NUL")


def check_range(key: str, from_suid: str | None, through_suid: str | None) -> None:
    try:
        for bound in (from_suid, through_suid):
            if bound is not None:
                parse_suid(bound)
    except InvalidSuidError as exc:
        raise ArchiveSegmentInvalidError(f"archive {key!r}: {exc.message}", key=key) from exc


def check_sequence(
    key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
) -> None:
    """Replacement ``segments`` are valid, ascending, non-overlapping, and of
    ``expected``'s incarnation."""
    previous: str | None = None
    for segment in segments:
        check_segment(key, segment)
        header = segment.header
        if previous is not None and header.from_suid <= previous:
            raise ArchiveSegmentInvalidError(
                f"archive {key!r}: replacement segment {header.describe()} does not follow "
                f"{previous}: segments must ascend without overlapping",
                key=key,
            )
        previous = header.through_suid
        if expected:
            check_incarnation(key, expected[0].incarnation, header.incarnation)


def check_unchanged(
    key: str, stored: Sequence[SegmentHeader], expected: Sequence[SegmentHeader]
) -> None:
    """The compare of a replace-all's compare-and-swap."""
    if list(stored) != list(expected):
        raise ArchiveConflictError(
            f"archive {key!r} changed since it was read ({len(stored)} segment(s) now, "
            f"{len(expected)} read): nothing was written; read the headers again and retry",
            key=key,
        )


def verified(key: str, header: SegmentHeader, canonical: bytes) -> list[bytes]:
    """The records of a stored segment, or :class:`ArchiveDigestError` naming its range."""
    actual = digest_of(canonical)
    records = list(split_records(canonical)) if actual == header.digest else []
    if actual != header.digest or len(records) != header.count:
        raise ArchiveDigestError(
            f"archive {key!r}: segment {header.describe()} does not match its header "
            f"(digest recorded {header.digest}, computed {actual}; {header.count} records "
            "counted): it was altered or corrupted",
            key=key,
            from_suid=header.from_suid,
            through_suid=header.through_suid,
            expected=header.digest,
            actual=actual,
        )
    return records
