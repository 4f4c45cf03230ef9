"""How a tag table is kept in tables: a small header per (service, tag), a row per installed event.

A tag's installed events grow with every event committed at the tag (until archived
ones are trimmed), so storing the whole table per step made a delivery cost O(events at
the tag) in JSON and changelog bytes, and a busy tag (an invoice sequence, a unique-name
registry) would outgrow Kafka's record size after a few thousand events: the worker
could no longer commit.
Installed events are append-only, so a step writes the header (epoch, head,
reservations, tombstones, how many are installed) and the rows it appended; the two
tables always join back into the state. A trim (the events are archived) deletes rows
from the front: the header then says from which index the rows are kept. Rows are JSON
bytes (:mod:`streams.model.table_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streams.errors import CorruptTagTableError
from streams.model import table_rows
from streams.tags.table import INSTALLED_ROW, TagTableState

INSTALLED_COUNT = "installed_count"


def installed_key(table_key: str, index: int) -> str:
    """The row of the ``index``-th installed event (the index has no ``/``: keys never clash)."""
    return f"{table_key}/{index}"


@dataclass
class TagWrites:
    header: bytes
    installed: dict[str, bytes] = field(default_factory=dict)  # key -> InstalledEvent


def installed_count(state: TagTableState) -> int:
    """How many events the table ever installed: its store indexes run up to this (those
    below ``installed_offset`` were trimmed)."""
    return state.installed_offset + len(state.installed)


def writes_for(state: TagTableState, table_key: str, installed_before: int) -> TagWrites:
    """What to store after a step: rows before ``installed_before`` are stored already."""
    count = installed_count(state)
    header = table_rows.dump(state, exclude={"installed"}, extra={INSTALLED_COUNT: count})
    offset = state.installed_offset
    return TagWrites(
        header=header,
        installed={
            installed_key(table_key, i): table_rows.dump(state.installed[i - offset])
            for i in range(max(installed_before, offset), count)
        },
    )


def rows_stored(header: bytes | None) -> int:
    """How many installed rows the stored ``header`` counts: a step writes the rows after them.

    A whole table written before this layout (its events inline, no count) has none, so
    its first step here writes them all.
    """
    return 0 if header is None else int(table_rows.load(header).get(INSTALLED_COUNT, 0))


def restore(table_key: str, header: bytes, row: Callable[[str], bytes | None]) -> TagTableState:
    """Join a header with its installed rows (``row(key)``) into the tag table's state."""
    fields = table_rows.load(header)
    if INSTALLED_COUNT not in fields:
        return TagTableState.model_validate(fields)  # a whole table of the earlier layout
    count = fields.pop(INSTALLED_COUNT)
    installed = []
    for index in range(fields.get("installed_offset", 0), count):
        stored = row(installed_key(table_key, index))
        if stored is None:
            raise CorruptTagTableError(
                f"installed event {index} of {fields.get('tag')!r} is counted but not stored",
                tag=fields.get("tag"),
                index=index,
            )
        installed.append(INSTALLED_ROW.validate_json(stored))
    return TagTableState.model_validate({**fields, "installed": installed})
