"""SafeWindow: how far behind the newest events a projection may be, from what it saw.

The lag bound is the longest a certificate's prefix SUID waited to be certified (from the
SUID's issue time to the certificate's), decaying by half every ``HALF_LIFE_S`` of wall
time, so one slow moment does not stay the estimate forever and a rebuild over old
history does not inherit old waits. SafeWindow publishes it, never below ``FLOOR_S``;
above ``CEILING_S`` the estimate means nothing useful, so a pass is *indeterminate* and
advances nothing until the bound has decayed below the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

CEILING_S = 120.0
FLOOR_S = 1.0
HALF_LIFE_S = 60.0


@dataclass
class LagBound:
    peak_s: float = 0.0
    at: float | None = None  # wall time (epoch seconds) of the peak's observation

    def observe(self, delay_s: float, at: float) -> None:
        if delay_s >= self.bound(at):
            self.peak_s, self.at = delay_s, at

    def bound(self, now: float) -> float:
        if self.at is None:
            return 0.0
        return float(self.peak_s * 0.5 ** (max(0.0, now - self.at) / HALF_LIFE_S))


def safe_window_s(bound_s: float) -> float:
    return min(max(bound_s, FLOOR_S), CEILING_S)


def indeterminate(bound_s: float) -> bool:
    return bound_s > CEILING_S
