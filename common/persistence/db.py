"""Database engine and session factories (PostgreSQL through psycopg 3)."""

from __future__ import annotations

from typing import Any

from psycopg import Connection as PgConnection
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


def sqlalchemy_url(url: str) -> str:
    """Use the psycopg 3 driver whatever PostgreSQL URL form was configured."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise ValueError(f"not a PostgreSQL URL: {url.rsplit('@', maxsplit=1)[-1]!r}")


def libpq_url(url: str) -> str:
    """The URL as psycopg's own ``connect`` takes it (no SQLAlchemy driver name)."""
    return "postgresql://" + sqlalchemy_url(url).removeprefix("postgresql+psycopg://")


def make_engine(url: str, pool_size: int = 5, *, pre_ping: bool = True) -> Engine:
    """An engine; pre-ping makes a restarted server harmless to a long-lived process.

    The stellwerk engine turns pre-ping off: it costs a round trip per transaction, and
    a batch that fails on a dead connection is requeued and retried anyway.
    """
    return create_engine(
        sqlalchemy_url(url), pool_pre_ping=pre_ping, pool_size=pool_size, max_overflow=10
    )


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def driver(session: Session) -> PgConnection[Any]:
    """The psycopg connection under the session's current transaction.

    For the hot paths (the engine's batches, the beat's fires): hand-written SQL with
    arrays costs a fraction of the ORM's Python for hundreds of rows.
    """
    connection = session.connection().connection.driver_connection
    assert isinstance(connection, PgConnection)
    return connection
