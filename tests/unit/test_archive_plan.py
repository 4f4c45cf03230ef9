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
    assert truncation_offset(LOG, both, 5) == 4  # b's 6 is not archived
    assert truncation_offset(LOG, {"a": format_suid(5)}, 5) == 1  # b has no archive
    assert truncation_offset(LOG, {"a": format_suid(9), "b": format_suid(9)}, 7) == 7


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=30),
    st.integers(1, 30),
    st.sampled_from("abc"),
)
def test_a_run_never_lets_the_log_drop_an_event_the_archive_lacks(
    log_spec: list[tuple[str, bool]], through: int, service: str
) -> None:
    """Plan a run's segments for ``service``, keep what they hold as the archive (the
    other services' archives: every other event marked True), cut: every event below
    the cut is in an archive, byte for byte (an oracle that reads the segments)."""
    log = [rec(offset, owner, offset + 1) for offset, (owner, _) in enumerate(log_spec)]
    segments = plan_segments(service, log, [], format_suid(through), format_suid(40), 4)
    held: dict[str, set[bytes]] = {service: {r for s in segments for r in s.records}}
    for record, (owner, archived) in zip(log, log_spec, strict=True):
        if owner != service and archived:
            held.setdefault(owner, set()).add(record.value)
    # What each service's archive covers: through its last archived SUID, if contiguous.
    covered_to: dict[str, str | None] = {}
    for owner in "abc":
        mine = [r for r in log if r.service_id == owner]
        upto = None
        for r in mine:
            if r.value not in held.get(owner, set()):
                break
            upto = r.suid
        covered_to[owner] = upto
    if segments:
        covered_to[service] = segments[-1].header.through_suid
    cut = truncation_offset(log, covered_to, len(log))
    assert all(r.value in held.get(r.service_id, set()) for r in log[:cut])
    assert (
        cut == len(log)
        or log[cut].value not in held.get(log[cut].service_id, set())
        or (log[cut].suid > (covered_to[log[cut].service_id] or ""))
    )
