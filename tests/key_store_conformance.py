"""The contract every key store keeps (crypto-shredding): one class each backend's tests
subclass, providing a ``keys`` fixture (a fresh, empty store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.erasure import KeyStore, SubjectErasedError
from streams.erasure.keys import KeyMissingError


class KeyStoreConformance:
    @pytest.fixture
    def keys(self) -> Iterator[KeyStore]:
        raise NotImplementedError

    def test_a_subject_keeps_its_key_until_erased_and_stays_erased(self, keys: KeyStore) -> None:
        first = keys.key_for_writing("user:1")
        assert keys.key_for_writing("user:1") == first == keys.key_for_reading("user:1")
        with pytest.raises(KeyMissingError):  # never made: not the same as erased
            keys.key_for_reading("user:2")
        assert keys.destroy("user:1") is True
        assert keys.destroy("user:1") is False  # idempotent
        assert keys.key_for_reading("user:1") is None
        with pytest.raises(SubjectErasedError):
            keys.key_for_writing("user:1")
        assert keys.key_for_writing("user:2") != first

    def test_racing_writers_of_a_new_subject_get_one_key(self, keys: KeyStore) -> None:
        import threading

        found: list[bytes] = []
        lock = threading.Lock()

        def write() -> None:
            key = keys.key_for_writing("user:race")
            with lock:
                found.append(key)

        threads = [threading.Thread(target=write) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(found) == 8 and len(set(found)) == 1

    def test_erasing_a_subject_never_written_keeps_it_from_being_written(
        self, keys: KeyStore
    ) -> None:
        assert keys.destroy("user:never") is False
        assert keys.key_for_reading("user:never") is None
        with pytest.raises(SubjectErasedError):
            keys.key_for_writing("user:never")
