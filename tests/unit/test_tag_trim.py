"""Trimming a tag table (its events are archived): what it still decides, it decides as the
whole table would; what it can no longer check, it refuses with its own code; its rows
restore to the trimmed state. The oracle is the same table never trimmed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.errors import TagProtocolError, TrimRefusedError
from streams.ledger.ledger import IssuanceLedger
from streams.ledger.state import LedgerState
from streams.model.records import AppendCondition, QueryItem, TagDelivery
from streams.tags import store as tag_store
from streams.tags.table import TagTable, TagTableState
from tests.unit.test_ledger import delivery, event, suid

KEY = "svc\x1ft"


@dataclass(frozen=True)
class History:
    """Events 1..n at tag ``t`` (some also at ``u``), of type A or B, decided in ``order``
    (two-phase installs come out of SUID order): installed, or fenced (a tombstone)."""

    types: list[str]
    also_u: list[bool]
    order: list[int]
    fenced: list[bool]

    @property
    def installed(self) -> list[int]:
        """The installed events' SUID numbers in store order."""
        return [n + 1 for n in self.order if not self.fenced[n]]

    def table(self) -> TagTable:
        table = TagTable(TagTableState(service_id="svc", tag="t"))
        for n in range(1, len(self.types) + 1):
            ev = event(n, *(["t", "u"] if self.also_u[n - 1] else ["t"]))
            ev = ev.model_copy(update={"event_type": self.types[n - 1]})
            assert table.handle(delivery("PREPARE", suid(n), event=ev)).status == "PREPARED"
        for n in self.order:
            action = "FENCE" if self.fenced[n] else "INSTALL"
            table.handle(delivery(action, suid(n + 1), fence_epoch=1))
        return table


@st.composite
def histories(draw: st.DrawFn) -> History:
    n = draw(st.integers(1, 14))
    return History(
        types=draw(st.lists(st.sampled_from("AB"), min_size=n, max_size=n)),
        also_u=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        order=draw(st.permutations(range(n))),
        fenced=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
    )


items = st.lists(
    st.tuples(st.lists(st.sampled_from("AB"), max_size=2), st.sampled_from([["t"], ["t", "u"]])),
    min_size=1,
    max_size=2,
)


def vote(
    table: TagTable, n: int, query: list[tuple[list[str], list[str]]], after: int | None
) -> tuple[str, str | None]:
    """The table's vote on a new event guarded by ``query`` after ``after``; the table is
    left as it was (a reservation is fenced again)."""
    condition = AppendCondition(
        fail_if_events_match=[QueryItem(types=ty, tags=tags) for ty, tags in query],
        after=None if after is None else suid(after),
    )
    answer = table.handle(delivery("PREPARE", suid(n), event=event(n, "v"), condition=condition))
    if answer.status == "PREPARED":
        table.handle(delivery("FENCE", suid(n), fence_epoch=0))
    return answer.status, answer.rejection.code if answer.rejection else None


@given(
    histories(),
    st.integers(0, 15),
    st.lists(st.tuples(items, st.none() | st.integers(0, 15)), min_size=1, max_size=6),
)
def test_a_trimmed_table_decides_as_the_whole_one_or_refuses_with_its_own_code(
    history: History,
    through: int,
    checks: list[tuple[list[tuple[list[str], list[str]]], int | None]],
) -> None:
    whole, trimmed = history.table(), history.table()
    dropped = trimmed.trim(suid(through))
    # Dropped: the longest front of the store order at or below the trim, nothing else,
    # and every tombstone at or below it.
    installed, front = history.installed, 0
    while front < len(installed) and installed[front] <= through:
        front += 1
    assert list(dropped) == list(range(front))
    assert [e.suid for e in trimmed.state.installed] == [suid(n) for n in installed[front:]]
    newest = max(installed[:front], default=None)
    assert trimmed.state.trimmed_through == (None if newest is None else suid(newest))
    fenced = [n + 1 for n in history.order if history.fenced[n]]
    assert sorted(trimmed.state.tombstones) == [suid(n) for n in sorted(fenced) if n > through]
    for n in fenced:  # a delivery of a dropped tombstone can no longer come: an error
        if n <= through:
            with pytest.raises(TagProtocolError):
                trimmed.handle(delivery("FENCE", suid(n), fence_epoch=1))
    for i, (query, after) in enumerate(checks):
        n = 100 + i
        expected, got = vote(whole, n, query, after), vote(trimmed, n, query, after)
        if newest is None or (after is not None and after >= newest):
            assert got == expected  # exactly as if nothing was trimmed
        elif got[0] == "PREPARED":
            pytest.fail(f"a trimmed table passed a condition below its trim: {query} {after}")
        elif got != expected:
            # It cannot see the dropped events: it refuses, and the whole table refuses too
            # or would have passed (the SDK then re-reads over the archive and decides).
            assert got == ("REJECTED", "condition_below_archive"), got
    # Its rows: the header and the rows a store keeps restore exactly the trimmed table.
    rows = dict(tag_store.writes_for(whole.state, KEY, 0).installed)  # stored before the trim
    for index in dropped:
        del rows[tag_store.installed_key(KEY, index)]
    writes = tag_store.writes_for(trimmed.state, KEY, len(installed))
    assert writes.installed == {}  # a trim writes no row: it deletes
    restored = tag_store.restore(KEY, writes.header, rows.get)
    assert restored == trimmed.state
    assert tag_store.installed_count(restored) == len(installed)


def test_a_delivery_for_a_trimmed_suid_is_a_protocol_error_and_a_trim_again_drops_nothing() -> None:
    history = History(types=["A"] * 3, also_u=[False] * 3, order=[0, 1, 2], fenced=[False] * 3)
    table = history.table()
    assert list(table.trim(suid(2))) == [0, 1]
    for action in ("PREPARE", "INSTALL", "FENCE"):
        with pytest.raises(TagProtocolError):
            table.handle(delivery(action, suid(1), event=event(1, "t"), fence_epoch=0))
    assert table.handle(delivery("INSTALL", suid(3))).status == "INSTALLED_AND_COVERED"
    assert list(table.trim(suid(2))) == []
    assert table.state.trimmed_through == suid(2)


def _trim(step_deliveries: list[TagDelivery]) -> TagDelivery:
    (only,) = step_deliveries
    return only


def test_the_ledger_sends_a_trim_only_of_certified_history() -> None:
    ledger = IssuanceLedger(
        LedgerState(service_id="svc", allocator_lineage_id="L", certified_prefix=suid(7)), 1000
    )
    trim = _trim(ledger.trim(suid(7), "r1").deliveries)
    assert (trim.action, trim.suid, trim.tag, trim.attempt_id) == ("TRIM", suid(7), "", "r1")
    with pytest.raises(TrimRefusedError) as above:
        ledger.trim(suid(8), "r2")
    assert above.value.code == "trim_refused"
    bare = IssuanceLedger(LedgerState(service_id="svc", allocator_lineage_id="L"), 1000)
    with pytest.raises(TrimRefusedError) as none_yet:
        bare.trim(suid(1), "r3")
    assert none_yet.value.code == "trim_refused"
