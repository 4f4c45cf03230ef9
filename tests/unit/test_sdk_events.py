"""What a program writes with: ``Event(type, data, tags)``, ``Query``, the package's names."""

from __future__ import annotations

import json
import os
import threading
import uuid
from contextlib import suppress
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

import streams.model.records
from streams.model.records import AppendCondition, QueryItem
from streams.model.uuid7 import uuid7
from streams.sdk.event_index import EventIndex, SequencedEvent
from streams.sdk.events import Event, Query, ReadResult, json_text


def test_the_dcb_names_come_from_the_package() -> None:
    from streams import (
        AppendCondition,
        AppendConditionFailed,
        AsyncDcbClient,
        DcbClient,
        Event,
        Query,
        QueryItem,
        SequencedEvent,
    )

    assert AppendConditionFailed.code == "append_condition_failed"
    from streams import sdk

    for cls in (DcbClient, AsyncDcbClient, Event, Query, SequencedEvent):
        assert getattr(sdk, cls.__name__) is cls
    assert QueryItem is streams.model.records.QueryItem
    assert AppendCondition is streams.model.records.AppendCondition


def test_an_event_needs_a_type_data_and_tags_only() -> None:
    before = datetime.now(UTC)
    first = Event("Registered", {"name": "bob"}, ["user:bob"])
    second = Event("Registered", {"name": "ann"}, ["user:ann"])
    stored = first.stored()
    assert uuid.UUID(stored.event_id).version == 7
    assert uuid.UUID(second.id) > uuid.UUID(first.id) or second.id[:13] == first.id[:13]
    assert before <= stored.timestamp <= datetime.now(UTC)
    assert json.loads(stored.payload) == {"name": "bob"} == stored.data
    assert stored.type == "Registered" and stored.tags == ["user:bob"]


def no_constant(constant: str) -> object:
    """NaN and Infinity: Python's ``json`` reads them, JSON (RFC 8259) has none."""
    raise ValueError(constant)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), st.lists, max_leaves=5))
def test_data_becomes_json_text_that_reads_back(data: object) -> None:
    """A string that is JSON text already is taken as such ("0" is the number 0); any
    other value, a plain string included ("NaN" is not JSON), is what the payload reads
    back as."""
    expected = data
    if isinstance(data, str):
        with suppress(ValueError):
            expected = json.loads(data, parse_constant=no_constant)
    assert json.loads(json_text(data)) == expected


def test_json_text_and_bytes_are_kept_other_text_is_a_json_string() -> None:
    assert json_text('{"a": 1}') == '{"a": 1}'
    assert json_text(b"[1, 2]") == "[1, 2]"
    assert json_text("hello") == '"hello"'
    assert json_text("NaN") == '"NaN"' and json_text(" -Infinity") == '" -Infinity"'
    assert json_text(None) == "null"


def test_uuid7_is_time_ordered_version_7() -> None:
    ids = [uuid7(unix_ms=ms) for ms in (1, 2, 1_700_000_000_000, 2**48 - 1)]
    assert ids == sorted(ids)
    assert {i.version for i in ids} == {7} and {i.variant for i in ids} == {uuid.RFC_4122}
    assert int(ids[2].hex[:12], 16) == 1_700_000_000_000


def test_uuid7s_of_one_millisecond_differ_across_threads() -> None:
    made: list[uuid.UUID] = []

    def draw() -> None:
        made.extend(uuid7(unix_ms=5) for _ in range(2_000))  # past a pool's 512 each

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == len(made) == 16_000


def test_a_forked_child_draws_other_uuid7_bits_than_its_parent() -> None:
    uuid7()  # the parent's pool is filled: a child inheriting it would draw the same
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(writer, uuid7(unix_ms=9).bytes)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(writer)
    childs = uuid.UUID(bytes=os.read(reader, 16))
    os.close(reader)
    assert childs != uuid7(unix_ms=9)


def test_a_query_is_a_list_of_items_wherever_one_is_taken() -> None:
    query = Query.of(types=["Registered"], tags=["user:bob"])
    assert list(query) == [QueryItem(types=["Registered"], tags=["user:bob"])]
    condition = AppendCondition(fail_if_events_match=query, after=None)
    assert condition.fail_if_events_match == list(query)
    assert len(Query.all()) == 0


def test_a_read_gives_the_head_of_everything_read_not_only_of_what_matched() -> None:
    index = EventIndex()
    for n, tag in enumerate(["a", "b", "a", "c"], start=1):
        stored = Event("E", {}, [tag]).stored()
        index.add(SequencedEvent(position=f"{n:030d}", event=stored))
    found = ReadResult(index.select([QueryItem(tags=["a"])]), index.head)
    assert [e.position for e in found] == [f"{1:030d}", f"{3:030d}"]
    assert found.head == f"{4:030d}"
    assert ReadResult([], EventIndex().head).head is None
