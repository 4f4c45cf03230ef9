"""Crypto-shredding: payloads sealed per subject, erased by destroying the subject's key."""

from streams.erasure.exceptions import KeyStoreError
from streams.erasure.keys import FileKeyStore, KeyStore, MemoryKeyStore, SubjectErasedError
from streams.settings import DcbSettings


def open_key_store(settings: DcbSettings) -> KeyStore:
    """The key store the settings name (``DCB_ERASURE__KEY_STORE``)."""
    config = settings.erasure
    if config.key_store == "postgres":
        if not config.key_store_dsn:
            raise KeyStoreError("the postgres key store needs DCB_ERASURE__KEY_STORE_DSN")
        from streams.erasure.postgres import PostgresKeyStore

        return PostgresKeyStore(config.key_store_dsn)
    return FileKeyStore(config.key_path(settings.broker.cache_dir))


__all__ = ["FileKeyStore", "KeyStore", "MemoryKeyStore", "SubjectErasedError", "open_key_store"]
