"""Per-subject keys: the key store SPI and its backends (in memory, a local file).

Destroying a key is what erasure is: once ``destroy`` returns, no reader can open that
subject's payloads, wherever their ciphertext lies. A destroyed subject stays destroyed:
its key is never created again (a later event of that subject is refused a key, so
nothing new is written that a reader could open while the old stays shredded).
"""

from __future__ import annotations

import base64
import fcntl
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.erasure.exceptions import ErasureError, KeyStoreError
from streams.erasure.sealing import new_key
from streams.infra.durable_file import write_durably


class SubjectErasedError(ErasureError):
    """The subject was erased: no new payload of it is sealed (and so written)."""

    code = "subject_erased"


class KeyMissingError(KeyStoreError):
    """A sealed payload's subject has no key here, erased or not: this is not the key
    store its writer used, or that store lost the key."""

    code = "key_missing"


class KeyStore(ABC):
    @abstractmethod
    def key_for_writing(self, subject: str) -> bytes:
        """The subject's key, made on first use; :class:`SubjectErasedError` once erased."""

    @abstractmethod
    def key_for_reading(self, subject: str) -> bytes | None:
        """The subject's key, or ``None`` once erased; :class:`KeyMissingError` for a
        subject this store never had a key of (the wrong key store, or a lost one: a
        reader must not show such payloads as erased)."""

    @abstractmethod
    def destroy(self, subject: str) -> bool:
        """Erase the subject's key; True if there was one to destroy (idempotent)."""


class MemoryKeyStore(KeyStore):
    def __init__(self) -> None:
        self._keys: dict[str, bytes | None] = {}  # None: destroyed
        self._lock = threading.Lock()

    def key_for_writing(self, subject: str) -> bytes:
        with self._lock:
            if subject in self._keys and self._keys[subject] is None:
                raise SubjectErasedError(f"{subject} was erased", subject=subject)
            key = self._keys.setdefault(subject, new_key())
            assert key is not None
            return key

    def key_for_reading(self, subject: str) -> bytes | None:
        with self._lock:
            if subject not in self._keys:
                raise KeyMissingError(f"no key was ever made for {subject}", subject=subject)
            return self._keys[subject]

    def destroy(self, subject: str) -> bool:
        with self._lock:
            had = self._keys.get(subject) is not None
            self._keys[subject] = None
            return had


class FileKeyStore(KeyStore):
    """Keys in one JSON file (mode 0600), rewritten whole under an ``flock`` and replaced
    atomically (fsynced): the embedded default. Every read looks at the file afresh, so an
    erasure holds for the next read of every reader on the machine; it is parsed again only
    when its bytes changed, not once per sealed payload read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._parsed: tuple[bytes, dict[str, str | None]] | None = None

    @contextmanager
    def _locked(self) -> Iterator[dict[str, str | None]]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield dict(self._load())

    def _load(self) -> dict[str, str | None]:
        """The keys as the file holds them now (not to be changed: it is shared)."""
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        parsed = self._parsed
        if parsed is not None and parsed[0] == text:
            return parsed[1]
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise KeyStoreError(f"the key file {self.path} is not JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise KeyStoreError(f"the key file {self.path} is not a JSON object")
        self._parsed = (text, loaded)
        return loaded

    def _save(self, keys: dict[str, str | None]) -> None:
        write_durably(self.path, json.dumps(keys).encode(), mode=0o600)

    def key_for_writing(self, subject: str) -> bytes:
        with self._locked() as keys:
            if subject in keys and keys[subject] is None:
                raise SubjectErasedError(f"{subject} was erased", subject=subject)
            if keys.get(subject) is None:
                keys[subject] = base64.b64encode(new_key()).decode()
                self._save(keys)
            stored = keys[subject]
            assert stored is not None
            return base64.b64decode(stored)

    def key_for_reading(self, subject: str) -> bytes | None:
        keys = self._load()
        if subject not in keys:
            raise KeyMissingError(
                f"{self.path} has no key for {subject}: is this the key store its writer "
                "used (DCB_ERASURE__KEY_FILE)?",
                subject=subject,
                key_file=str(self.path),
            )
        stored = keys[subject]
        return None if stored is None else base64.b64decode(stored)

    def destroy(self, subject: str) -> bool:
        with self._locked() as keys:
            had = keys.get(subject) is not None
            keys[subject] = None
            self._save(keys)
            return had
