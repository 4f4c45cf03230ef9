"""When a worker commits next: the commit interval, stretched under load.

A commit closes the step gate while it fixes what it commits, and most of its cost is
per transaction (several broker requests per partition's transaction). faust's timer
fires every interval counted from the previous *start*, so once a commit takes longer
than the interval (under load) commits run back to back: the agents get little time
between them and each transaction carries few steps. Counting the pause from the
commit's *end*, and making it at least as long as the commit took (up to a cap), keeps
the commits' share of the time at most half under load and leaves the quiet-load
latency as it was. Measured with ``dcb bench commit`` (paired runs, 64 writers, 1 tag):
38.7 → 53.8 events/s; 8 writers unchanged (23.3 → 23.5 events/s, p99 ~540 ms both).

The pause is only the latest the next commit comes: it starts as soon as the agents
have gone quiet after a step (no step for ``QUIET_S``). A step that follows a commit
(the next hop of an attempt, whose input that commit made visible) otherwise waited a
whole pause for its own: the tag's answer waited 33 ms at p50 for its commit, a PREPARE
sent at a random moment 16 ms. Under steady load the agents are rarely quiet, and the
pause applies as before. Paired runs at 8 writers, 1 tag: 82 / 80 against 61 / 67
events/s, p50 93 / 94 against 125 / 116 ms; 64 writers unchanged.
"""

from __future__ import annotations

QUIET_S = 0.001  # a step's next record, already fetched, starts well within this


def pause_after_commit(took_s: float, interval_s: float, max_interval_s: float) -> float:
    """Seconds from a commit's end to the next commit's start."""
    return max(interval_s, min(max_interval_s, took_s))
