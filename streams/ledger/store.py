"""How a ledger is kept in tables: a small header per service, one entry per attempt in flight.

Writing the whole ledger per step made every step cost O(attempts in flight) in JSON,
changelog bytes and broker work, and a commit takes several ledger steps (the command,
then one vote and one piece of evidence per tag). A step changes at most the attempt
its record names, except a reconcile pass, which may change any; attempts that leave
the ledger (answered and certified) are deleted. So a step writes the header and the
attempts it may have touched, and the two tables always join back into the state.
Rows are JSON bytes (:mod:`streams.model.table_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from streams.errors import CorruptLedgerError
from streams.ledger.state import AttemptState, LedgerState
from streams.model import table_rows
from streams.model.records import AvroRecord, Command, TagResolution

ATTEMPT_IDS = "attempt_ids"


def attempt_key(service_id: str, attempt_id: str) -> str:
    return f"{service_id}/{attempt_id}"


def touched_by(record: AvroRecord) -> set[str] | None:
    """The attempts a ledger step on ``record`` may change; ``None``: any of them."""
    if isinstance(record, TagResolution):
        return {record.attempt_id}
    if isinstance(record, Command) and record.commit is not None:
        return {record.commit.attempt_id}
    return None  # a reconcile pass


@dataclass
class LedgerWrites:
    header: bytes
    attempts: dict[str, bytes] = field(default_factory=dict)  # key -> AttemptState
    removed: list[str] = field(default_factory=list)  # keys


def writes_for(
    state: LedgerState, touched: Collection[str] | None, before: Collection[str]
) -> LedgerWrites:
    """What to store after a step: ``before`` are the attempt ids in flight before it."""
    header = header_row(state)
    ids = state.attempts.keys() if touched is None else state.attempts.keys() & set(touched)
    return LedgerWrites(
        header=header,
        attempts={
            attempt_key(state.service_id, i): table_rows.dump(state.attempts[i])
            for i in sorted(ids)
        },
        removed=[attempt_key(state.service_id, i) for i in before if i not in state.attempts],
    )


def header_row(state: LedgerState) -> bytes:
    """The service's header: the state without its attempts, which have rows of their own."""
    return table_rows.dump(state, exclude={"attempts"}, extra={ATTEMPT_IDS: sorted(state.attempts)})


def restore(header: bytes, attempt: Callable[[str], bytes | None]) -> LedgerState:
    """Join a header with its attempts (``attempt(key)``) into the ledger state."""
    fields = table_rows.load(header)
    attempts = {}
    for attempt_id in fields.pop(ATTEMPT_IDS, []):
        stored = attempt(attempt_key(fields["service_id"], attempt_id))
        if stored is None:
            raise CorruptLedgerError(
                f"attempt {attempt_id} is in the ledger header but not stored",
                attempt_id=attempt_id,
            )
        attempts[attempt_id] = AttemptState.model_validate_json(stored)
    return LedgerState.model_validate({**fields, "attempts": attempts})


def recovery_due_ms(header: bytes) -> int | None:
    """When the stored ledger wants a reconcile pass (ms since the epoch), if it does."""
    due = table_rows.load(header).get("recovery_due_ms")
    return None if due is None else int(due)
