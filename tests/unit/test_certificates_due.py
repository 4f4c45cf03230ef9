"""The ledger's certificates owed at the commit: one per service whose prefix moved in the round."""

from __future__ import annotations

import asyncio
from typing import Any

from streams.ledger.agent import CertificatesDue, Due


def test_a_round_certifies_each_service_once_with_its_last_events_and_source() -> None:
    certified: list[tuple[str, Any, Any]] = []

    async def certify(service_id: str, due: Due) -> None:
        certified.append((service_id, due.source, due.events_end))

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        due = CertificatesDue(certify)
        due.add("shop", "command", None)  # a fence moved the prefix, no events
        due.add("shop", "evidence-1", first)
        due.add("bank", "evidence-2", second)
        due.add("shop", "evidence-3", None)  # the events of evidence-1 stay owed
        await due.before_commit()
        assert certified == [("shop", "evidence-3", first), ("bank", "evidence-2", second)]
        await due.before_commit()  # the next round owes nothing
        assert len(certified) == 2

    asyncio.run(scenario())


def test_an_aborted_round_owes_nothing() -> None:
    certified: list[str] = []

    async def certify(service_id: str, due: Due) -> None:
        certified.append(service_id)

    async def scenario() -> None:
        due = CertificatesDue(certify)
        due.add("shop", "evidence", None)
        due.discard()  # its transaction was aborted: the steps run again
        await due.before_commit()

    asyncio.run(scenario())
    assert certified == []
