"""Work an agent leaves to its commit round: done under the closed step gate, before the commit.

Some outputs are only known once a step's own sends are acknowledged: the ledger's
certificate names where the service's committed events end on ``dcb.events``, an offset
the broker gives in its answer to the produce. Waiting for that answer inside the step
held the ledger agent — one loop over all its partitions — for a round trip at every
step that committed events: half the agent's time at 64 writers over 100 services. A
hook runs once per commit round, when no step runs, and writes into the transaction
being committed; when that transaction is aborted instead (its steps will run again),
the hook is told to forget what it was owed.
"""

from __future__ import annotations

from typing import Protocol


class CommitHook(Protocol):
    async def before_commit(self) -> None:
        """Write what the round's steps left owed, into the transaction about to commit."""

    def discard(self) -> None:
        """The open transaction was aborted: nothing of it is owed any more."""
