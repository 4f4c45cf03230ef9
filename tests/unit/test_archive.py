"""The archive conformance suite on the in-memory reference and the local directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.archive import ArchiveStore, DirectoryArchive, MemoryArchive
from tests.archive_conformance import ArchiveConformance


class TestMemoryArchive(ArchiveConformance):
    @pytest.fixture
    def store(self) -> Iterator[ArchiveStore]:
        yield MemoryArchive()

    def tamper(self, store: ArchiveStore, key: str, index: int, body: bytes) -> None:
        assert isinstance(store, MemoryArchive)
        header, _ = store._keys[key][index]
        store._keys[key][index] = (header, body)


class TestDirectoryArchive(ArchiveConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[ArchiveStore]:
        yield DirectoryArchive(tmp_path / "archive")

    def tamper(self, store: ArchiveStore, key: str, index: int, body: bytes) -> None:
        assert isinstance(store, DirectoryArchive)
        folder = store.root / "keys" / key.encode().hex()
        store.segment_file(folder, store.headers(key)[index]).write_bytes(body)

    def test_a_new_store_on_the_same_folder_reads_what_was_archived(self, tmp_path: Path) -> None:
        from tests.archive_conformance import segment

        DirectoryArchive(tmp_path / "a").append("svc", segment(1, 2))
        assert DirectoryArchive(tmp_path / "a").read("svc") == [segment(1, 2)]
