"""PostgreSQL through psycopg (the ``postgres`` extra) for the stores kept there: one
connection per call, one transaction per call, driver errors as the store's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from streams.errors import DcbError

if TYPE_CHECKING:
    import psycopg

Failure = Callable[[str], DcbError]  # the store's error for a message


@contextmanager
def pg_transaction(dsn: str, failure: Failure) -> Iterator[psycopg.Cursor[Any]]:
    """A cursor in a transaction of its own connection, committed on leaving; a driver
    error (a server down, a statement refused) raised as ``failure``'s error."""
    try:
        import psycopg
    except ImportError as exc:
        raise failure("psycopg is not installed: pip install 'dcb-streams[postgres]'") from exc
    try:
        with psycopg.connect(dsn) as conn, conn.transaction(), conn.cursor() as cur:
            yield cur
    except psycopg.Error as exc:
        raise failure(f"PostgreSQL: {exc}") from exc


def ensure_schema(dsn: str, schema: str, failure: Failure) -> None:
    """Create ``schema`` (idempotent DDL) once, whoever else starts at the same time."""
    with pg_transaction(dsn, failure) as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema,))
        cur.execute(schema)
