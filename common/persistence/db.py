"""Database engine and session factories (PostgreSQL through psycopg 3)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import psycopg
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


def make_engine(
    url: str, pool_size: int = 5, *, pre_ping: bool = True, driver_prepares: bool = True,
) -> Engine:
    """An engine; pre-ping makes a restarted server harmless to a long-lived process.

    The stellwerk engine turns pre-ping off: it costs a round trip per transaction, and
    a batch that fails on a dead connection is requeued and retried anyway. It also
    turns psycopg's own prepared statements off (``driver_prepares``): its statements
    are prepared by ``common.persistence.pipelined``, whose prepared statements psycopg
    would deallocate with its own at a rollback. JSON columns are read with orjson: the
    beat reads each due job's spec, schedule and params.
    """
    connect_args: dict[str, Any] = {} if driver_prepares else {"prepare_threshold": None}
    return create_engine(
        sqlalchemy_url(url), pool_pre_ping=pre_ping, pool_size=pool_size, max_overflow=10,
        json_deserializer=orjson.loads, connect_args=connect_args,
    )


@contextmanager
def raw_transaction(sessions: sessionmaker[Session]) -> Iterator[PgConnection[Any]]:
    """A psycopg connection of the sessions' pool, for one transaction without a Session.

    For the engine's batches, whose SQL is all hand-written: a Session around each cost
    5-6% of the engine's CPU for nothing it used. Committed at the end unless the caller
    committed already (the engine's writer ends its pipeline with ``COMMIT``); rolled
    back on an error. A connection that broke is dropped from the pool, not returned.
    """
    pooled = _engine_of(sessions).raw_connection()
    conn = _driver_of(pooled)
    try:
        yield conn
        conn.commit()
    except BaseException:
        try:
            conn.rollback()
        except psycopg.Error:
            pooled.invalidate()  # the server or the network dropped it
        raise
    finally:
        pooled.close()


class HeldConnection:
    """A pooled psycopg connection held in autocommit, for a loop's frequent reads.

    The beat's probe runs five times a second. A Session for each cost a pool checkout,
    a pre-ping round trip and the Session's own bookkeeping: more than half an idle
    beat's CPU. Any error drops the connection; the next call takes another.
    """

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._bind = _engine_of(sessions)
        self._pooled: Any = None

    def execute(self, query: str, params: Any, row_factory: Any) -> Any:
        """The statement's first row, made by ``row_factory`` (``psycopg.rows``)."""
        conn = self._connection()
        try:
            return conn.cursor(row_factory=row_factory).execute(query, params).fetchone()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Drop the connection: closed, not returned to the pool (after an error, or at the end)."""
        if self._pooled is not None:
            self._pooled.invalidate()
            self._pooled = None

    def _connection(self) -> PgConnection[Any]:
        if self._pooled is None:
            self._pooled = self._bind.raw_connection()
            _driver_of(self._pooled).autocommit = True
        return _driver_of(self._pooled)


def _engine_of(sessions: sessionmaker[Session]) -> Engine:
    bind = sessions.kw["bind"]
    assert isinstance(bind, Engine)
    return bind


def _driver_of(pooled: Any) -> PgConnection[Any]:
    """The psycopg connection of a pooled connection (``Engine.raw_connection``)."""
    conn = pooled.driver_connection
    assert isinstance(conn, PgConnection)
    return conn


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def driver(session: Session) -> PgConnection[Any]:
    """The psycopg connection under the session's current transaction.

    For the hot paths (the engine's batches, the beat's fires): hand-written SQL with
    arrays costs a fraction of the ORM's Python for hundreds of rows.
    """
    return _driver_of(session.connection().connection)
