"""The closed prefix: the greatest SUID at or below which every issued SUID is settled."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


def closed_prefix(
    issued: Sequence[str],
    least_unresolved: str | None,
    watermark: str | None,
    floor: str | None,
) -> str | None:
    """Compute the prefix from the issued SUIDs (sorted) above the last certified ``floor``.

    With an unresolved candidate the boundary is exclusive: the greatest issued SUID
    (or the floor) strictly below the least unresolved one, never the hole itself.
    With none, everything issued is settled and the watermark is the prefix.
    ``floor`` is the previous prefix: every SUID at or below it stays settled, which
    keeps the prefix monotone even when the issued list has been pruned below it.
    """
    if least_unresolved is None:
        return watermark if watermark is not None else floor
    below = bisect_left(issued, least_unresolved)
    candidate = issued[below - 1] if below else None
    if floor is not None and floor < least_unresolved and (candidate is None or floor > candidate):
        return floor
    return candidate
