"""The contract every peer bench system keeps: one test class each backend's tests subclass.

A subclass provides a class-scoped ``system`` fixture (started); each test works on tags
of its own, so the tests share one running system.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest

from streams.bench.peers.api import (
    AsyncPeerStore,
    Condition,
    Event,
    PeerStore,
    PeerSystem,
    Query,
    QueryItem,
    Sequenced,
)
from streams.errors import AppendConditionFailed

T = TypeVar("T")


class MemoryStore(PeerStore):
    """The reference: the DCB rules over a list, under one lock."""

    def __init__(self, log: list[Sequenced], lock: threading.Lock) -> None:
        self.log, self.lock = log, lock

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        with self.lock:
            return [
                e
                for e in self.log
                if (after is None or e.position > after) and query.matches(e.event)
            ]

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        with self.lock:
            if condition is not None and any(
                (condition.after is None or e.position > condition.after)
                and condition.query.matches(e.event)
                for e in self.log
            ):
                raise AppendConditionFailed("the append condition failed")
            for event in events:
                self.log.append(Sequenced(len(self.log) + 1, event))
            return len(self.log)


class AsyncMemoryStore(AsyncPeerStore):
    """The reference for coroutine writers: each call lets the other coroutines run first."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        await asyncio.sleep(0)
        return self.store.read(query, after)

    async def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        await asyncio.sleep(0)
        return self.store.append(events, condition)


class MemorySystem(PeerSystem):
    name = "memory"
    durability = "none (in process)"

    def __init__(self, coroutines: bool = False) -> None:
        self.log: list[Sequenced] = []
        self.lock = threading.Lock()
        self.writes_in_asyncio = coroutines

    def start(self) -> None:
        pass

    def store(self) -> PeerStore:
        return MemoryStore(self.log, self.lock)

    def async_store(self) -> AsyncPeerStore:
        return AsyncMemoryStore(MemoryStore(self.log, self.lock))

    def server_pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        pass


def _tag(kind: str) -> str:
    return f"{kind}:{uuid.uuid4().hex[:12]}"


class PeerStoreContract:
    @pytest.fixture(scope="class")
    @classmethod
    def system(cls) -> PeerSystem:
        raise NotImplementedError("a subclass provides the started system")

    @pytest.fixture
    def store(self, system: PeerSystem) -> PeerStore:
        return system.store()

    def test_appended_events_read_back_in_order_with_increasing_positions(
        self, store: PeerStore
    ) -> None:
        tag = _tag("a")
        first = store.append([Event("Made", (tag,), b"1"), Event("Made", (tag,), b"2")])
        second = store.append([Event("Made", (tag,), b"3")])
        read = store.read(Query((QueryItem(tags=(tag,)),)))
        assert [e.event.data for e in read] == [b"1", b"2", b"3"]
        positions = [e.position for e in read]
        assert positions == sorted(set(positions))
        assert positions[1] == first and positions[2] == second

    def test_an_item_matches_any_listed_type_and_all_its_tags(self, store: PeerStore) -> None:
        a, b = _tag("a"), _tag("b")
        store.append(
            [
                Event("X", (a,), b'"a"'),
                Event("Y", (a, b), b'"ab"'),
                Event("Z", (a, b), b'"z"'),
                Event("X", (b,), b'"b"'),
            ]
        )
        both = store.read(Query((QueryItem(("X", "Y"), (a, b)),)))
        assert [e.event.data for e in both] == [b'"ab"']
        either = store.read(Query((QueryItem(("X",), (a,)), QueryItem(("Z",), (b,)))))
        assert [e.event.data for e in either] == [b'"a"', b'"z"']

    def test_read_after_a_position_leaves_it_and_earlier_out(self, store: PeerStore) -> None:
        tag = _tag("a")
        first = store.append([Event("E", (tag,), b"1")])
        store.append([Event("E", (tag,), b"2")])
        assert [e.event.data for e in store.read(Query((QueryItem(tags=(tag,)),)), first)] == [b"2"]

    def test_condition_fails_on_a_match_after_its_position(self, store: PeerStore) -> None:
        tag = _tag("a")
        query = Query((QueryItem(("E",), (tag,)),))
        seen = store.append([Event("E", (tag,), b"1")])
        store.append([Event("E", (tag,), b"2")])
        with pytest.raises(AppendConditionFailed):
            store.append([Event("E", (tag,), b"3")], Condition(query, seen))
        assert [e.event.data for e in store.read(query)] == [b"1", b"2"]

    def test_condition_passes_when_matches_are_at_or_before_its_position(
        self, store: PeerStore
    ) -> None:
        tag, other = _tag("a"), _tag("b")
        query = Query((QueryItem(("E",), (tag,)),))
        seen = store.append([Event("E", (tag,), b"1")])
        store.append([Event("E", (other,), b'"elsewhere"'), Event("F", (tag,), b'"other type"')])
        store.append([Event("E", (tag,), b"2")], Condition(query, seen))
        assert [e.event.data for e in store.read(query)] == [b"1", b"2"]

    def test_condition_without_a_position_fails_on_any_match(self, store: PeerStore) -> None:
        tag = _tag("a")
        query = Query((QueryItem(("E",), (tag,)),))
        store.append([Event("E", (tag,), b"1")], Condition(query))
        with pytest.raises(AppendConditionFailed):
            store.append([Event("E", (tag,), b"2")], Condition(query))

    def test_read_all_holds_every_event_in_position_order(self, store: PeerStore) -> None:
        tag = _tag("a")
        last = store.append([Event("E", (tag,), b"1")])
        log = store.read_all()
        assert log[-1].position >= last
        assert any(e.position == last and tag in e.event.tags for e in log)
        assert [e.position for e in log] == sorted({e.position for e in log})


class BlockingStore(PeerStore):
    """A system's coroutine store (:meth:`PeerSystem.async_store`) called from blocking
    code, on an event loop of its own in a thread: so the contract tests it too."""

    def __init__(self, system: PeerSystem) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def made() -> AsyncPeerStore:
            return system.async_store()

        self._store = self._call(made())

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(60)

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        return self._call(self._store.read(query, after))

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        return self._call(self._store.append(events, condition))

    def close(self) -> None:
        self._call(self._store.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
