"""Statements sent in one round trip on libpq's pipeline, below psycopg's cursors.

The engine sends some fifteen statements a batch, all pipelined. Through psycopg's
cursors each cost 45-60 µs of the engine's CPU (the cursor's query, prepare and result
bookkeeping around libpq), where libpq itself, given the same converted query and
parameters, costs ~11 µs: measured on ten pipelined statements, 0.59 ms against 0.11.
Here the statements go straight to libpq (``PGconn.send_query_params``), converted and
dumped by psycopg's own ``PostgresQuery`` and ``Transformer``, so parameters and rows
mean what they mean through a cursor; the rows are loaded by psycopg's loaders when
asked for.

The connection stays psycopg's: the transaction is begun here when none is open (as a
cursor would), and a pipeline that ends with ``COMMIT`` leaves it idle, so psycopg's
``commit`` sends nothing. An error in any statement aborts the rest (PostgreSQL's
pipeline rule) and is raised as psycopg raises it, after the pipeline is drained, so
the caller's rollback works as after a cursor's error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar

from psycopg import Connection, errors, pq
from psycopg._queries import PostgresQuery
from psycopg.abc import Transformer
from psycopg.adapt import Transformer as make_transformer
from psycopg.generators import fetch_many, send

_STARTS_TRANSACTION = b"BEGIN"
R = TypeVar("R")


class Rows(Protocol):
    """What a statement answers: a psycopg cursor, or a :class:`Reply` here."""

    def fetchall(self) -> list[Any]: ...  # noqa: D102


class Executes(Protocol):
    """Where a statement can be sent: a psycopg connection or cursor, or a pipeline here."""

    def execute(self, query: str, params: Any = ...) -> Any: ...  # noqa: D102


class Reply:
    """One statement's result, readable once its pipeline is over."""

    __slots__ = ("_result", "_transformer")

    def __init__(self, transformer: Transformer) -> None:
        self._transformer = transformer
        self._result: pq.abc.PGresult | None = None

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The rows as tuples, loaded as a cursor would load them."""
        return self.fetch_as(tuple)

    def fetch_as(self, make: Callable[[Sequence[Any]], R]) -> list[R]:
        """The rows, each made by ``make`` from its values (a named tuple's ``_make``)."""
        result = self._done()
        if result.ntuples == 0:
            return []
        self._transformer.set_pgresult(result)
        rows: list[R] = self._transformer.load_rows(0, result.ntuples, make)
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        rows = self.fetchall()
        return rows[0] if rows else None

    @property
    def rowcount(self) -> int:
        """Rows the statement returned or changed."""
        status = self._done().command_status or b""
        tail = status.rsplit(b" ", 1)[-1]
        return int(tail) if tail.isdigit() else -1

    def _done(self) -> pq.abc.PGresult:
        if self._result is None:
            raise RuntimeError("the pipeline of this statement has not been synced")
        return self._result


class Pipelined:
    """A pipeline of statements on ``conn``: ``with Pipelined(conn) as p: p.execute(...)``.

    Leaving the block sends everything, waits for every result and raises the first
    error. Statements use psycopg's placeholders (``%s``, ``%b``, ``%(name)s``).
    """

    def __init__(self, conn: Connection[Any]) -> None:
        self._conn = conn
        self._pgconn = conn.pgconn
        self._transformer: Transformer = make_transformer(conn)
        self._replies: list[Reply] = []

    def __enter__(self) -> Pipelined:
        self._pgconn.enter_pipeline_mode()
        if not self._conn.autocommit and (
                self._pgconn.transaction_status == pq.TransactionStatus.IDLE):
            _require_default_transaction(self._conn)
            self._pgconn.send_query_params(_STARTS_TRANSACTION, None)
            self._replies.append(Reply(self._transformer))
        return self

    def execute(self, query: str | bytes, params: Sequence[Any] | None = None) -> Reply:
        """Send one statement (buffered until the block ends); its reply comes after."""
        converted = PostgresQuery(self._transformer)
        converted.convert(query, params)
        self._pgconn.send_query_params(
            converted.query, converted.params, param_formats=converted.formats,
            param_types=converted.types,
        )
        reply = Reply(self._transformer)
        self._replies.append(reply)
        return reply

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._pgconn.status == pq.ConnStatus.BAD:
            return
        try:
            self._pgconn.pipeline_sync()
            self._conn.wait(send(self._pgconn))
            failure = self._collect()
        finally:
            self._leave()
        if failure is not None and error is None:
            raise failure

    def _leave(self) -> None:
        """Out of pipeline mode, or closed if it cannot leave it.

        Results left unread after a lost server keep it in; closed, its pool drops it
        rather than hand it out again.
        """
        if self._pgconn.status == pq.ConnStatus.BAD:
            return
        try:
            self._pgconn.exit_pipeline_mode()
        except errors.OperationalError:
            self._conn.close()

    def _collect(self) -> errors.Error | None:
        """Every statement's result up to the sync; the first error, if any."""
        failure: errors.Error | None = None
        replies = iter(self._replies)
        while True:
            results = self._conn.wait(fetch_many(self._pgconn))
            last = results[-1]
            if last.status == pq.ExecStatus.PIPELINE_SYNC:
                return failure
            if last.status == pq.ExecStatus.FATAL_ERROR and failure is None:
                failure = errors.error_from_result(last, encoding=self._conn.info.encoding)
            reply = next(replies, None)
            if reply is not None:
                reply._result = last


def _require_default_transaction(conn: Connection[Any]) -> None:
    """A plain ``BEGIN`` is what psycopg would send only with the default settings."""
    if (conn.isolation_level, conn.read_only, conn.deferrable) != (None, None, None):
        raise ValueError("Pipelined begins only default transactions")
