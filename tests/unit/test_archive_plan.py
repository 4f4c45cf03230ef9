"""What an archive run appends and how far the log may drop (pure rules)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.archive.exceptions import ArchiveIncarnationError, ArchiveNotCertifiedError
from streams.archive.plan import LogRecord, plan_segments, truncation_offset
from streams.model.suid import format_suid


def rec(offset: int, service: str, n: int, lineage: str = "L1") -> LogRecord:
    return LogRecord(offset, service, format_suid(n), lineage, f"{service}:{n}".encode())


LOG = [rec(0, "a", 1), rec(1, "b", 2), rec(2, "a", 3), rec(3, "a", 5), rec(4, "b", 6)]


def test_only_certified_history_is_archived() -> None:
    with pytest.raises(ArchiveNotCertifiedError):
        plan_segments("a", LOG, [], format_suid(5), format_suid(4), 10)
    with pytest.raises(ArchiveNotCertifiedError):
        plan_segments("a", LOG, [], format_suid(5), None, 10)


def test_segments_hold_the_service_s_events_in_chunks_the_last_ending_at_through() -> None:
    segments = plan_segments("a", LOG, [], format_suid(6), format_suid(9), 2)
    assert [list(s.records) for s in segments] == [[b"a:1", b"a:3"], [b"a:5"]]
    assert [(s.header.from_suid, s.header.through_suid) for s in segments] == [
        (format_suid(1), format_suid(3)),
        (format_suid(5), format_suid(6)),
    ]
    assert {s.header.incarnation for s in segments} == {"L1"}
    again = plan_segments("a", LOG, [s.header for s in segments], format_suid(6), format_suid(9), 2)
    assert again == []  # a retry after a crash appends nothing
    later = plan_segments("a", LOG, [segments[0].header], format_suid(6), format_suid(9), 2)
    assert later == segments[1:]  # a retry after a crash mid-run: the same remaining segment


def test_another_lineage_is_not_archived_as_this_history() -> None:
    reborn = [*LOG, rec(5, "a", 7, lineage="L2")]
    with pytest.raises(ArchiveIncarnationError):
        plan_segments("a", reborn, [], format_suid(8), format_suid(9), 10)


def test_the_log_drops_only_below_the_first_unarchived_record() -> None:
    both = {"a": format_suid(5), "b": format_suid(2)}
    assert truncation_offset(LOG, both, 5, None) == 4  # b's 6 is not archived
    assert truncation_offset(LOG, {"a": format_suid(5)}, 5, None) == 1  # b has no archive
    assert truncation_offset(LOG, {"a": format_suid(9), "b": format_suid(9)}, 7, None) == 7
    assert truncation_offset(LOG, {"a": format_suid(9), "b": format_suid(9)}, 7, 3) == 3


@given(
    st.lists(st.sampled_from("abc"), max_size=30),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 30)),
    st.one_of(st.none(), st.integers(0, 40)),
)
def test_everything_below_the_cut_is_archived_and_the_cut_is_as_high_as_allowed(
    owners: list[str], archived_to: dict[str, int], keep_from: int | None
) -> None:
    log = [rec(offset, owner, offset + 1) for offset, owner in enumerate(owners)]
    archived = {s: format_suid(n) for s, n in archived_to.items()}
    cut = truncation_offset(log, archived, len(log), keep_from)

    def covered(r: LogRecord) -> bool:
        return r.service_id in archived and r.suid <= archived[r.service_id]

    assert all(covered(r) for r in log[:cut])
    assert keep_from is None or cut <= keep_from
    assert cut == len(log) or not covered(log[cut]) or cut == keep_from
