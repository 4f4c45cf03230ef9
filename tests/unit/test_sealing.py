"""Sealing payloads per subject (pure): what opens, what reads as shredded, what is refused."""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.erasure import FileKeyStore, KeyStore, MemoryKeyStore
from streams.erasure.exceptions import SealedPayloadCorruptError
from streams.erasure.sealing import (
    SHREDDED,
    new_key,
    open_payload,
    seal,
    sealed_subject,
    subject_of,
)
from tests.key_store_conformance import KeyStoreConformance

KEY = new_key()


@given(st.text(), st.text(min_size=1), st.text(min_size=1))
def test_a_sealed_payload_opens_with_its_key_and_hides_its_text(
    payload: str, subject: str, event_id: str
) -> None:
    sealed = seal(payload, subject, event_id, KEY)
    assert sealed_subject(sealed) == subject
    assert open_payload(sealed, event_id, lambda _s: KEY) == payload
    if len(payload.encode()) >= 8:  # what is stored holds no run of the plain text
        assert payload.encode() not in base64.b64decode(json.loads(sealed)["data"])


def test_without_its_key_a_payload_reads_as_shredded() -> None:
    sealed = seal('{"name": "Ada"}', "user:1", "e1", KEY)
    marker = json.loads(open_payload(sealed, "e1", lambda _s: None))
    assert marker == {SHREDDED: True, "subject": "user:1"}


def test_an_altered_or_moved_seal_is_refused_not_shredded() -> None:
    sealed = seal('{"name": "Ada"}', "user:1", "e1", KEY)
    with pytest.raises(SealedPayloadCorruptError):
        open_payload(sealed, "e2", lambda _s: KEY)  # copied onto another event
    with pytest.raises(SealedPayloadCorruptError):
        open_payload(sealed, "e1", lambda _s: new_key())  # another subject's key
    forged = json.loads(sealed)
    forged["data"] = forged["data"][:-4] + "AAA="
    with pytest.raises(SealedPayloadCorruptError):
        open_payload(json.dumps(forged), "e1", lambda _s: KEY)


def test_only_the_sealed_form_counts_as_sealed() -> None:
    for clear in ("{}", '{"$sealed": 2, "subject": "s"}', '"$sealed"', "[1]", "{bad"):
        assert sealed_subject(clear) is None
        assert open_payload(clear, "e", lambda _s: None) == clear
    assert subject_of(["course:1", "user:9", "user:2"], "user:") == "user:2"
    assert subject_of(["course:1"], "user:") is None


class TestMemoryKeyStore(KeyStoreConformance):
    @pytest.fixture
    def keys(self) -> Iterator[KeyStore]:
        yield MemoryKeyStore()


class TestFileKeyStore(KeyStoreConformance):
    @pytest.fixture
    def keys(self, tmp_path: Path) -> Iterator[KeyStore]:
        yield FileKeyStore(tmp_path / "keys.json")

    def test_another_process_s_store_on_the_file_sees_keys_and_erasures(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "keys.json"
        key = FileKeyStore(path).key_for_writing("user:1")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        other = FileKeyStore(path)
        assert other.key_for_reading("user:1") == key
        FileKeyStore(path).destroy("user:1")
        assert other.key_for_reading("user:1") is None

    def test_the_file_is_parsed_again_only_once_it_changed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "keys.json"
        writer, reader = FileKeyStore(path), FileKeyStore(path)
        key = writer.key_for_writing("user:1")
        parses: list[object] = []
        real_loads = json.loads

        def loads_counted(text: str | bytes) -> object:
            parses.append(text)
            return real_loads(text)

        monkeypatch.setattr(json, "loads", loads_counted)
        assert [reader.key_for_reading("user:1") for _ in range(5)] == [key] * 5
        assert len(parses) == 1
        writer.destroy("user:1")  # another store, as another process would
        assert reader.key_for_reading("user:1") is None
        assert len(parses) == 3  # the destroy's read (its store had seen no file), the reader's
