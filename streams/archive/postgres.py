"""The archive in PostgreSQL (``psycopg``, the ``postgres`` extra).

Keys and SUIDs are ``text COLLATE "C"``: byte order of UTF-8, which is code-point order,
so key pages come from the primary key's b-tree. A write locks its key's row
(``SELECT ... FOR UPDATE``) and checks the rules inside the same transaction: two
writers of one key take turns, and a refused write leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from streams.archive.api import ArchiveStore, KeyPage, Segment, SegmentHeader
from streams.archive.exceptions import ArchiveUnavailableError
from streams.archive.rules import (
    canonical_bytes,
    check_unchanged,
    classify_append,
    verified,
)
from streams.infra.pg_session import ensure_schema, pg_transaction

if TYPE_CHECKING:
    import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS dcb_archive_keys (
    key text COLLATE "C" PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS dcb_archive_segments (
    key text COLLATE "C" NOT NULL REFERENCES dcb_archive_keys (key) ON DELETE CASCADE,
    from_suid text COLLATE "C" NOT NULL,
    through_suid text COLLATE "C" NOT NULL,
    count integer NOT NULL,
    digest text NOT NULL,
    incarnation text NOT NULL,
    kind text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (key, from_suid)
);
"""
_HEADER = "from_suid, through_suid, count, digest, incarnation, kind"


def _header(row: Sequence[Any]) -> SegmentHeader:
    from_suid, through_suid, count, digest, incarnation, kind = row[:6]
    return SegmentHeader(
        from_suid=from_suid,
        through_suid=through_suid,
        count=count,
        digest=digest,
        incarnation=incarnation,
        kind=kind,
    )


class PostgresArchive(ArchiveStore):
    """One connection per call: calls from many threads or processes run side by side,
    and the key's row lock orders the writers."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        ensure_schema(dsn, SCHEMA, ArchiveUnavailableError)

    def _transaction(self) -> AbstractContextManager[psycopg.Cursor[Any]]:
        return pg_transaction(self.dsn, ArchiveUnavailableError)

    @staticmethod
    def _lock(cur: psycopg.Cursor[Any], key: str) -> list[SegmentHeader]:
        """Lock ``key``'s row (made if new) and return its headers as they stand."""
        cur.execute("INSERT INTO dcb_archive_keys (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        cur.execute("SELECT key FROM dcb_archive_keys WHERE key = %s FOR UPDATE", (key,))
        cur.execute(
            f"SELECT {_HEADER} FROM dcb_archive_segments WHERE key = %s ORDER BY from_suid",
            (key,),
        )
        return [_header(row) for row in cur.fetchall()]

    @staticmethod
    def _insert(cur: psycopg.Cursor[Any], key: str, segments: Sequence[Segment]) -> None:
        cur.executemany(
            f"INSERT INTO dcb_archive_segments (key, {_HEADER}, body) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [(key, *s.header.model_dump().values(), canonical_bytes(s.records)) for s in segments],
        )

    def _append(self, key: str, segment: Segment) -> None:
        with self._transaction() as cur:
            if classify_append(key, self._lock(cur, key), segment.header) == "append":
                self._insert(cur, key, [segment])

    def _headers(self, key: str) -> list[SegmentHeader]:
        with self._transaction() as cur:
            cur.execute(
                f"SELECT {_HEADER} FROM dcb_archive_segments WHERE key = %s ORDER BY from_suid",
                (key,),
            )
            return [_header(row) for row in cur.fetchall()]

    def _read(
        self, key: str, from_suid: str | None = None, through_suid: str | None = None
    ) -> list[Segment]:
        with self._transaction() as cur:
            cur.execute(
                f"SELECT {_HEADER}, body FROM dcb_archive_segments WHERE key = %s "
                "AND (%s::text IS NULL OR through_suid >= %s) "
                "AND (%s::text IS NULL OR from_suid <= %s) ORDER BY from_suid",
                (key, from_suid, from_suid, through_suid, through_suid),
            )
            rows = cur.fetchall()
        segments = []
        for row in rows:
            header = _header(row)
            segments.append(Segment(header=header, records=tuple(verified(key, header, row[6]))))
        return segments

    def _list_keys(self, cursor: str | None = None, limit: int = 100) -> KeyPage:
        with self._transaction() as cur:
            cur.execute(
                "SELECT k.key FROM dcb_archive_keys k WHERE (%s::text IS NULL OR k.key > %s) "
                "AND EXISTS (SELECT 1 FROM dcb_archive_segments s WHERE s.key = k.key) "
                "ORDER BY k.key LIMIT %s",
                (cursor, cursor, limit + 1),
            )
            keys = [row[0] for row in cur.fetchall()]
        page = keys[:limit]
        return KeyPage(keys=page, next_cursor=page[-1] if len(keys) > limit else None)

    def _replace_all(
        self, key: str, expected: Sequence[SegmentHeader], segments: Sequence[Segment]
    ) -> None:
        with self._transaction() as cur:
            check_unchanged(key, self._lock(cur, key), expected)
            cur.execute("DELETE FROM dcb_archive_segments WHERE key = %s", (key,))
            self._insert(cur, key, segments)

    def _delete_key(self, key: str) -> None:
        with self._transaction() as cur:
            cur.execute("DELETE FROM dcb_archive_keys WHERE key = %s", (key,))
