"""Subjects' keys in PostgreSQL (``psycopg``, the ``postgres`` extra): one row per subject,
its key, or NULL once erased. Erasure is an UPDATE that overwrites the key in place; the
database's own retention of old row versions (VACUUM, WAL, backups) is the operator's to
bound, as for any store of secrets."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from streams.erasure.exceptions import KeyStoreError
from streams.erasure.keys import KeyMissingError, KeyStore, SubjectErasedError
from streams.erasure.sealing import new_key
from streams.infra.pg_session import ensure_schema, pg_transaction

if TYPE_CHECKING:
    import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS dcb_subject_keys (
    subject text COLLATE "C" PRIMARY KEY,
    key bytea
);
"""


class PostgresKeyStore(KeyStore):
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        ensure_schema(dsn, SCHEMA, KeyStoreError)

    def _transaction(self) -> AbstractContextManager[psycopg.Cursor[Any]]:
        return pg_transaction(self.dsn, KeyStoreError)

    def key_for_writing(self, subject: str) -> bytes:
        with self._transaction() as cur:
            cur.execute(
                "INSERT INTO dcb_subject_keys (subject, key) VALUES (%s, %s) "
                "ON CONFLICT (subject) DO NOTHING",
                (subject, new_key()),
            )
            cur.execute("SELECT key FROM dcb_subject_keys WHERE subject = %s", (subject,))
            row = cur.fetchone()
        if row is None or row[0] is None:
            raise SubjectErasedError(f"{subject} was erased", subject=subject)
        return bytes(row[0])

    def key_for_reading(self, subject: str) -> bytes | None:
        with self._transaction() as cur:
            cur.execute("SELECT key FROM dcb_subject_keys WHERE subject = %s", (subject,))
            row = cur.fetchone()
        if row is None:
            raise KeyMissingError(f"no key was ever made for {subject}", subject=subject)
        return None if row[0] is None else bytes(row[0])

    def destroy(self, subject: str) -> bool:
        with self._transaction() as cur:
            cur.execute(
                "SELECT key FROM dcb_subject_keys WHERE subject = %s FOR UPDATE", (subject,)
            )
            row = cur.fetchone()
            cur.execute(  # erased also when never made: no key is made for it later
                "INSERT INTO dcb_subject_keys (subject, key) VALUES (%s, NULL) "
                "ON CONFLICT (subject) DO UPDATE SET key = NULL",
                (subject,),
            )
        return row is not None and row[0] is not None
