"""The history archive's interface: segments of a service's events, and the store SPI.

An archive keeps what the hot log may drop: per key (a service id), contiguous,
append-only segments of the exact record bytes ``dcb.events`` held, each with a header
that says what it covers without reading it. Every backend (:mod:`.memory`,
:mod:`.directory`, :mod:`.postgres`) applies the same rules (:mod:`.rules`) and passes the
same conformance suite (``tests/archive_conformance.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from streams.archive.rules import (
    check_key,
    check_range,
    check_segment,
    check_sequence,
    segment_digest,
)

EVENTS_KIND = "events"


class SegmentHeader(BaseModel):
    """What a segment says about itself: its inclusive SUID bounds (SUIDs inside them
    need not all be present), how many records it holds, their digest, and the
    incarnation of the history it belongs to."""

    model_config = ConfigDict(frozen=True)

    from_suid: str
    through_suid: str
    count: int
    digest: str
    incarnation: str
    kind: str = EVENTS_KIND

    def overlaps(self, from_suid: str | None, through_suid: str | None) -> bool:
        return (from_suid is None or self.through_suid >= from_suid) and (
            through_suid is None or self.from_suid <= through_suid
        )

    def describe(self) -> str:
        return f"[{self.from_suid}..{self.through_suid}]"


class Segment(BaseModel):
    """A header and the records it covers, in SUID order, byte for byte."""

    model_config = ConfigDict(frozen=True)

    header: SegmentHeader
    records: tuple[bytes, ...]

    @classmethod
    def of(
        cls,
        from_suid: str,
        through_suid: str,
        records: Sequence[bytes],
        incarnation: str,
        kind: str = EVENTS_KIND,
    ) -> Segment:
        """A segment whose count and digest are computed from ``records``."""
        header = SegmentHeader(
            from_suid=from_suid,
            through_suid=through_suid,
            count=len(records),
            digest=segment_digest(records),
            incarnation=incarnation,
            kind=kind,
        )
        return cls(header=header, records=tuple(records))


class KeyPage(BaseModel):
    """One page of keys in Unicode code-point order; ``next_cursor`` (exclusive) asks for
    the next page, ``None`` at the end."""

    keys: list[str]
    next_cursor: str | None = None


class ArchiveStore(ABC):
    """Where a service's history goes before the hot log drops it.

    - ``append`` is idempotent for a segment identical to one held (same bounds and
      digest), so a crash between archiving and truncating is retried safely; any other
      segment must start after the last one's ``through_suid``, or it is refused with
      :class:`~.exceptions.ArchiveConflictError` and nothing is written.
    - ``headers`` and ``read`` return segments in ascending order; ``read`` returns every
      segment overlapping the range, whole, after checking its digest.
    - An unknown key reads as empty.
    """

    # --- the contract: inputs are checked here, the rules applied by each backend ------

    def append(self, key: str, segment: Segment) -> None:
        check_key(key)
        check_segment(key, segment)
        self._append(key, segment)

    def headers(self, key: str) -> list[SegmentHeader]:
        """The key's segment headers, ascending; no records are read."""
        check_key(key)
        return self._headers(key)

    def read(
        self, key: str, from_suid: str | None = None, through_suid: str | None = None
    ) -> list[Segment]:
        """The segments overlapping ``[from_suid, through_suid]`` (open where ``None``);
        :class:`~.exceptions.ArchiveDigestError` names the first altered one."""
        check_key(key)
        check_range(key, from_suid, through_suid)
        return self._read(key, from_suid, through_suid)

    def list_keys(self, cursor: str | None = None, limit: int = 100) -> KeyPage:
        """Keys holding at least one segment, after ``cursor``, in code-point order."""
        if limit < 1:
            raise ValueError(f"a page holds at least one key, not {limit}")
        return self._list_keys(cursor, limit)

    def replace_all(
        self, key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
    ) -> None:
        """Replace every segment of ``key`` with ``segments`` if its headers are exactly
        ``expected``: one compare-and-swap, so a concurrent append makes it fail with
        :class:`~.exceptions.ArchiveConflictError` and write nothing."""
        check_key(key)
        check_sequence(key, expected, segments)
        self._replace_all(key, expected, segments)

    def delete_key(self, key: str) -> None:
        """Drop every segment of ``key`` (retention of a whole service)."""
        check_key(key)
        self._delete_key(key)

    def close(self) -> None:  # noqa: B027 - most backends hold nothing open
        """Release what the store holds open."""

    # --- what a backend provides ----------------------------------------------------

    @abstractmethod
    def _append(self, key: str, segment: Segment) -> None:
        """Under the key's lock: :func:`~.rules.classify_append`, then store if new."""

    @abstractmethod
    def _headers(self, key: str) -> list[SegmentHeader]: ...

    @abstractmethod
    def _read(self, key: str, from_suid: str | None, through_suid: str | None) -> list[Segment]:
        """Overlapping segments, each through :func:`~.rules.verified`."""

    @abstractmethod
    def _list_keys(self, cursor: str | None, limit: int) -> KeyPage: ...

    @abstractmethod
    def _replace_all(
        self, key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
    ) -> None:
        """Under the key's lock: :func:`~.rules.check_unchanged`, then swap."""

    @abstractmethod
    def _delete_key(self, key: str) -> None: ...
