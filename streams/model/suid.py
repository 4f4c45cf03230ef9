"""Sortable unique ids: 19 digits of .NET ticks, then 11 digits issued by the allocator.

A SUID is a 30-digit decimal string, so string order is numeric order and a SUID
written by Sekiban's C# stores sorts with ours. The allocator never issues a SUID
at or below its watermark: when the clock stands still or steps back, it counts on
from the watermark instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from streams.errors import InvalidSuidError

SUID_DIGITS = 30
TICK_DIGITS = 19
SEQUENCE_DIGITS = SUID_DIGITS - TICK_DIGITS
_SEQUENCE_SPAN: int = 10**SEQUENCE_DIGITS
_MAX: int = 10**SUID_DIGITS - 1
_DOTNET_EPOCH = datetime(1, 1, 1, tzinfo=UTC)


def ticks(at: datetime) -> int:
    """100-nanosecond intervals since 0001-01-01 UTC (the .NET ``DateTime.Ticks``)."""
    delta = at.astimezone(UTC) - _DOTNET_EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10


def parse_suid(suid: str) -> int:
    if len(suid) != SUID_DIGITS or not suid.isascii() or not suid.isdigit():
        raise InvalidSuidError(f"a SUID is {SUID_DIGITS} decimal digits, got {suid!r}", suid=suid)
    return int(suid)


def format_suid(value: int) -> str:
    if not 0 <= value <= _MAX:
        raise InvalidSuidError(f"{value} does not fit in {SUID_DIGITS} digits", value=value)
    return f"{value:0{SUID_DIGITS}d}"


def issue_suids(watermark: str | None, now: datetime, count: int) -> list[str]:
    """``count`` strictly increasing SUIDs above ``watermark``, starting at ``now``'s tick."""
    floor = -1 if watermark is None else parse_suid(watermark)
    first = max(ticks(now) * _SEQUENCE_SPAN, floor + 1)
    return [format_suid(first + i) for i in range(count)]


def suid_ticks(suid: str) -> int:
    """The tick part of a SUID: when (at the earliest) it was issued."""
    return parse_suid(suid) // _SEQUENCE_SPAN
