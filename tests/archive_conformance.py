"""The contract every archive backend keeps: one test class each backend's tests subclass.

A subclass provides a ``store`` fixture (a fresh, empty store) and ``tamper`` (alter a
stored segment's bytes behind the store's back, as bit rot or an intruder would).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.archive import ArchiveStore, Segment, SegmentHeader
from streams.archive.exceptions import (
    ArchiveConflictError,
    ArchiveDigestError,
    ArchiveIncarnationError,
    ArchiveKeyInvalidError,
    ArchiveSegmentInvalidError,
)
from streams.model.suid import format_suid

INCARNATION = "inc-1"


def suid(n: int) -> str:
    return format_suid(n)


def segment(low: int, high: int, *records: bytes, incarnation: str = INCARNATION) -> Segment:
    body = records or tuple(f"event {n}".encode() for n in range(low, high + 1))
    return Segment.of(suid(low), suid(high), body, incarnation)


def fresh_key() -> str:
    return f"svc-{uuid.uuid4().hex[:12]}"


def race(write: Callable[[int], None], writers: int = 8) -> list[str]:
    """``write(n)`` from ``writers`` threads at once: each one's "done" or "refused"."""
    outcomes: list[str] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        try:
            write(n)
            outcome = "done"
        except ArchiveConflictError:
            outcome = "refused"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


class ArchiveConformance:
    @pytest.fixture
    def store(self) -> Iterator[ArchiveStore]:
        raise NotImplementedError

    def tamper(self, store: ArchiveStore, key: str, index: int, body: bytes) -> None:
        raise NotImplementedError

    # --- reading what was appended --------------------------------------------------

    def test_an_unknown_key_reads_as_empty(self, store: ArchiveStore) -> None:
        assert store.headers("nobody") == []
        assert store.read("nobody") == []
        assert store.list_keys().keys == []

    def test_segments_read_back_byte_for_byte_in_order(self, store: ArchiveStore) -> None:
        key = fresh_key()
        first = segment(1, 3, b"", b"\x00\xff binary", "ünïcödé ✓".encode())
        second = segment(7, 9)
        store.append(key, first)
        store.append(key, second)
        assert store.headers(key) == [first.header, second.header]
        assert store.read(key) == [first, second]

    def test_a_ranged_read_returns_every_overlapping_segment_whole(
        self, store: ArchiveStore
    ) -> None:
        key = fresh_key()
        a, b, c = segment(1, 3), segment(5, 8), segment(10, 12)
        for s in (a, b, c):
            store.append(key, s)
        assert store.read(key, suid(3), suid(5)) == [a, b]
        assert store.read(key, suid(6), suid(6)) == [b]
        assert store.read(key, suid(9), suid(9)) == []
        assert store.read(key, from_suid=suid(11)) == [c]
        assert store.read(key, through_suid=suid(1)) == [a]

    # --- append-only ----------------------------------------------------------------

    def test_an_identical_segment_appended_again_changes_nothing(self, store: ArchiveStore) -> None:
        key = fresh_key()
        a, b = segment(1, 3), segment(4, 6)
        store.append(key, a)
        store.append(key, b)
        store.append(key, b)  # the retry after a crash between archiving and truncating
        store.append(key, a)  # an earlier one, too
        assert store.headers(key) == [a.header, b.header]

    @pytest.mark.parametrize(
        "offered",
        [
            segment(3, 5),  # starts at the last through
            segment(0, 1),  # rewinds
            segment(2, 9),  # overlaps
            segment(1, 3, b"other bytes"),  # the same bounds, another digest
        ],
        ids=["touching", "rewind", "overlap", "same-bounds-other-bytes"],
    )
    def test_an_overlap_or_rewind_is_refused_and_writes_nothing(
        self, store: ArchiveStore, offered: Segment
    ) -> None:
        key = fresh_key()
        held = segment(1, 3)
        store.append(key, held)
        with pytest.raises(ArchiveConflictError) as refused:
            store.append(key, offered)
        assert refused.value.code == "archive_conflict"
        assert store.headers(key) == [held.header]
        assert store.read(key) == [held]

    def test_malformed_segments_are_refused_and_write_nothing(self, store: ArchiveStore) -> None:
        key = fresh_key()
        good = segment(1, 2)
        inverted = Segment.of(suid(5), suid(4), [b"x"], INCARNATION)
        not_suids = Segment(
            header=good.header.model_copy(update={"from_suid": "1"}), records=good.records
        )
        miscounted = Segment(
            header=good.header.model_copy(update={"count": 3}), records=good.records
        )
        misdigested = Segment(header=good.header, records=(b"forged", b"x"))
        empty = Segment.of(suid(1), suid(2), [], INCARNATION)
        for bad in (inverted, not_suids, miscounted, misdigested, empty):
            with pytest.raises(ArchiveSegmentInvalidError):
                store.append(key, bad)
        with pytest.raises(ArchiveSegmentInvalidError):
            store.read(key, from_suid="12")
        assert store.headers(key) == []

    def test_bad_keys_are_refused(self, store: ArchiveStore) -> None:
        for key in ("", "a\x00b", "lone \ud800 surrogate"):
            with pytest.raises(ArchiveKeyInvalidError):
                store.append(key, segment(1, 1))

    def test_another_incarnation_is_refused_until_the_key_is_deleted(
        self, store: ArchiveStore
    ) -> None:
        key = fresh_key()
        store.append(key, segment(1, 3))
        reborn = segment(10, 11, incarnation="inc-2")
        with pytest.raises(ArchiveIncarnationError):
            store.append(key, reborn)
        assert [h.incarnation for h in store.headers(key)] == [INCARNATION]
        store.delete_key(key)
        assert store.headers(key) == [] and store.read(key) == []
        store.append(key, reborn)
        assert store.headers(key) == [reborn.header]

    # --- keys -----------------------------------------------------------------------

    def test_keys_page_in_code_point_order(self, store: ArchiveStore) -> None:
        # UTF-16 code units would put the astral emoji below U+E000 and U+FFFD; code points
        # (and UTF-8 bytes) put it above them.
        keys = ["b", "a", "a\U0001f600", "a\ue000", "a\ufffd", "Z", "ä", "a-1", "a_1"]
        for key in keys:
            store.append(key, segment(1, 1))
        store.append("gone", segment(1, 1))
        store.delete_key("gone")
        seen, cursor = [], None
        while True:
            page = store.list_keys(cursor, limit=2)
            assert len(page.keys) <= 2
            seen += page.keys
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == sorted(keys, key=lambda k: k.encode())
        assert seen == sorted(keys)  # Python orders str by code point
        assert store.list_keys("a\ue000").keys[:2] == ["a\ufffd", "a\U0001f600"]

    # --- replace-all ----------------------------------------------------------------

    def test_replace_all_swaps_the_whole_list_when_unchanged(self, store: ArchiveStore) -> None:
        key = fresh_key()
        store.append(key, segment(1, 3))
        store.append(key, segment(4, 6))
        redacted = [segment(1, 6, b"one", b"merged")]
        store.replace_all(key, store.headers(key), redacted)
        assert store.read(key) == redacted

    def test_replace_all_after_a_concurrent_append_fails_and_writes_nothing(
        self, store: ArchiveStore
    ) -> None:
        key = fresh_key()
        store.append(key, segment(1, 3))
        read = store.headers(key)
        store.append(key, segment(4, 6))  # lands between the read and the swap
        before = store.read(key)
        with pytest.raises(ArchiveConflictError):
            store.replace_all(key, read, [segment(1, 3, b"redacted")])
        assert store.read(key) == before

    def test_replace_all_refuses_unordered_or_foreign_replacements(
        self, store: ArchiveStore
    ) -> None:
        key = fresh_key()
        store.append(key, segment(1, 3))
        read = store.headers(key)
        with pytest.raises(ArchiveSegmentInvalidError):
            store.replace_all(key, read, [segment(4, 6), segment(1, 3)])
        with pytest.raises(ArchiveIncarnationError):
            store.replace_all(key, read, [segment(1, 3, incarnation="inc-2")])
        assert store.headers(key) == read

    def test_racing_writers_of_one_key_take_turns(self, store: ArchiveStore) -> None:
        """Eight writers offer eight different segments at the same bounds at once, and
        eight replace-alls race on one read: one of each wins, the others are refused."""
        key = fresh_key()
        store.append(key, segment(1, 1))
        offers = race(lambda n: store.append(key, segment(2, 4, f"writer {n}".encode())))
        assert sorted(offers) == ["done"] + ["refused"] * 7
        read = store.headers(key)
        assert len(read) == 2
        swaps = race(lambda n: store.replace_all(key, read, [segment(1, 9, f"{n}".encode())]))
        assert sorted(swaps) == ["done"] + ["refused"] * 7
        assert len(store.headers(key)) == 1

    # --- integrity ------------------------------------------------------------------

    def test_an_altered_segment_is_named_when_read(self, store: ArchiveStore) -> None:
        key = fresh_key()
        a, b = segment(1, 3), segment(4, 6)
        store.append(key, a)
        store.append(key, b)
        original = b"".join(len(r).to_bytes(4, "big") + r for r in b.records)
        self.tamper(store, key, 1, original.replace(b"event 5", b"event 9"))
        with pytest.raises(ArchiveDigestError) as altered:
            store.read(key)
        assert altered.value.details["from_suid"] == suid(4)
        assert altered.value.details["through_suid"] == suid(6)
        assert f"[{suid(4)}..{suid(6)}]" in altered.value.message
        assert store.read(key, through_suid=suid(3)) == [a]  # the rest still reads
        assert store.headers(key) == [a.header, b.header]

    # --- any sequence of appends ------------------------------------------------------

    # Every example works on a key of its own, so the store fixture may be shared, and each
    # backend's subclass runs the same examples.
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4), st.booleans()), max_size=8))
    def test_any_appends_keep_segments_contiguous_and_append_only(
        self, store: ArchiveStore, offers: list[tuple[int, int, bool]]
    ) -> None:
        """Against a model: an offer is stored iff it starts after the last one, a no-op iff
        it repeats one, refused otherwise; what is stored ascends without overlapping."""
        key = fresh_key()
        model: list[SegmentHeader] = []
        for low, width, alternate in offers:
            offered = segment(low, low + width, *([b"alt"] if alternate else []))
            repeat = any(
                (h.from_suid, h.through_suid, h.digest)
                == (offered.header.from_suid, offered.header.through_suid, offered.header.digest)
                for h in model
            )
            if repeat:
                store.append(key, offered)
            elif model and offered.header.from_suid <= model[-1].through_suid:
                with pytest.raises(ArchiveConflictError):
                    store.append(key, offered)
            else:
                store.append(key, offered)
                model.append(offered.header)
            assert store.headers(key) == model
        assert [s.header for s in store.read(key)] == model
