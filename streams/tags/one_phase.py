"""A tag partition's step over a batch of deliveries, and the one-phase rule.

A batch is handled one step at a time, in order, so a later item sees what an earlier
one reserved, installed or fenced (the outcome equals handling the items in separate
batches). A step is one two-phase item (a vote, or the ledger's decision carried out),
or every PREPARE of a one-phase attempt: all its targets lie in this partition, so the
partition decides alone. It checks each target in order (a later target sees the
earlier ones' reservations, as separate PREPAREs would), then installs them all when
every check passed, or fences them all with the first refusal as the reason. The
answers are terminal evidence, so the ledger needs no vote round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from streams.errors import TagProtocolError
from streams.model.digests import obligation_digest
from streams.model.records import TagDelivery, TagResolution
from streams.tags.table import TagTable

# A tombstone the partition leaves itself (no ledger fence epoch is involved).
ONE_PHASE_FENCE_EPOCH = 0


def is_one_phase(delivery: TagDelivery) -> bool:
    return delivery.one_phase and delivery.action == "PREPARE"


def steps(items: Sequence[TagDelivery]) -> Iterator[list[int]]:
    """The indexes of ``items`` grouped into steps, in order: a one-phase attempt's
    adjacent PREPAREs together, every other item alone."""
    group: list[int] = []
    for index, item in enumerate(items):
        if group and not (
            is_one_phase(item)
            and item.attempt_id == items[group[0]].attempt_id
            and item.service_id == items[group[0]].service_id
        ):
            yield group
            group = []
        if is_one_phase(item):
            group.append(index)
        else:
            yield [index]
    if group:
        yield group


def decide_together(targets: Sequence[tuple[TagTable, TagDelivery]]) -> list[TagResolution]:
    """Install every target of a one-phase attempt, or fence every one; the same evidence
    again when they are terminal already (a redelivered batch)."""
    terminal = [table.terminal_answer(delivery) for table, delivery in targets]
    if all(answer is not None for answer in terminal):
        return [answer for answer in terminal if answer is not None]
    if any(answer is not None for answer in terminal):
        first = targets[0][1]
        raise TagProtocolError(
            f"one-phase attempt {first.attempt_id} is terminal at some targets only",
            attempt_id=first.attempt_id,
        )
    # Every target of an event reserves the same obligation: its digest is taken once.
    digests: dict[str, str] = {}
    for _, delivery in targets:
        if delivery.event is not None and delivery.suid not in digests:
            digests[delivery.suid] = obligation_digest(delivery.event)
    refusals = [table.reserve(delivery, digests.get(delivery.suid)) for table, delivery in targets]
    refused = next((refusal for refusal in refusals if refusal is not None), None)
    if refused is None:
        return [table.install(delivery) for table, delivery in targets]
    return [table.fence(delivery, ONE_PHASE_FENCE_EPOCH, refused) for table, delivery in targets]
