"""Crypto-shredding: payloads sealed per subject, erased by destroying the subject's key."""

from streams.erasure.keys import FileKeyStore, KeyStore, MemoryKeyStore, SubjectErasedError
from streams.settings import DcbSettings


def open_key_store(settings: DcbSettings) -> KeyStore:
    return FileKeyStore(settings.erasure.key_path(settings.broker.cache_dir))


__all__ = ["FileKeyStore", "KeyStore", "MemoryKeyStore", "SubjectErasedError", "open_key_store"]
