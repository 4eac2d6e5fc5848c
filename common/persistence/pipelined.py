"""Statements sent in one round trip on libpq's pipeline, below psycopg's cursors.

The engine sends some fifteen statements a batch, all pipelined. Through psycopg's
cursors each cost 45-60 µs of the engine's CPU (the cursor's query, prepare and result
bookkeeping around libpq), where libpq itself, given the same converted query and
parameters, costs ~11 µs: measured on ten pipelined statements, 0.59 ms against 0.11.
Here the statements go straight to libpq (``PGconn.send_query_params``), converted and
dumped by psycopg's own ``PostgresQuery`` and ``Transformer``, so parameters and rows
mean what they mean through a cursor; the rows are loaded by psycopg's loaders when
asked for.

A statement with parameters is prepared on its first use on a server session and
executed by name afterwards, as psycopg's cursors do from a statement's fifth use: the
server then parses and plans it once (or, pinned to its generic plan, plans it once),
not at every batch. psycopg clears the server's prepared statements (``DEALLOCATE
ALL``) when it rolls back a transaction in which it prepared its own, which would drop
these too: statements are prepared here only on a connection with psycopg's own
preparation off (``prepare_threshold=None``: :func:`common.persistence.db.make_engine`'s
``driver_prepares=False``, as the engine's), and sent unnamed on any other. Should the
server lose them anyway (a ``DISCARD ALL``), the error clears this session's names, so
that the transaction that failed is the only one.

The connection stays psycopg's: the transaction is begun here when none is open (as a
cursor would), and a pipeline that ends with ``COMMIT`` leaves it idle, so psycopg's
``commit`` sends nothing. An error in any statement aborts the rest (PostgreSQL's
pipeline rule) and is raised as psycopg raises it, after the pipeline is drained, so
the caller's rollback works as after a cursor's error.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar
from weakref import WeakKeyDictionary

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


_Key = tuple[bytes, tuple[int, ...]]  # a statement's text and its parameters' types


class _Prepared:
    """The statements prepared on one server session, named by their text and types."""

    def __init__(self) -> None:
        self.names: dict[_Key, bytes] = {}
        self._numbers = itertools.count()

    def add(self, key: _Key) -> bytes:
        """A new name for ``key``, taken at once (a statement may repeat in a pipeline)."""
        name = b"stellwerk_%d" % next(self._numbers)
        self.names[key] = name
        return name


# By libpq connection: a new connection (after a server restart, say) starts empty.
_SESSIONS: WeakKeyDictionary[pq.abc.PGconn, _Prepared] = WeakKeyDictionary()


class Reply:
    """One statement's result, readable once its pipeline is over."""

    __slots__ = ("_prepares", "_result", "_transformer")

    def __init__(self, transformer: Transformer, prepares: _Key | None = None) -> None:
        self._transformer = transformer
        self._result: pq.abc.PGresult | None = None
        self._prepares = prepares  # the reply to a prepare of this statement

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

    def _done(self) -> pq.abc.PGresult:
        if self._result is None:
            raise RuntimeError("the pipeline of this statement has not been synced")
        return self._result


class Pipelined:
    """A pipeline of statements on ``conn``: ``with Pipelined(conn) as p: p.execute(...)``.

    Leaving the block sends everything, waits for every result and raises the first
    error. Statements wait in libpq's buffer until then: flushed one by one, they made
    a one-message batch slower and a large one no faster (docs/decisions.md).
    Statements use psycopg's placeholders (``%s``, ``%b``, ``%(name)s``).
    """

    def __init__(self, conn: Connection[Any]) -> None:
        self._conn = conn
        self._pgconn = conn.pgconn
        self._transformer: Transformer = make_transformer(conn)
        self._replies: list[Reply] = []
        self._prepared = _prepared_on(conn)

    def __enter__(self) -> Pipelined:
        self._pgconn.enter_pipeline_mode()
        if not self._conn.autocommit and (
                self._pgconn.transaction_status == pq.TransactionStatus.IDLE):
            _require_default_transaction(self._conn)
            self._pgconn.send_query_params(_STARTS_TRANSACTION, None)
            self._replies.append(Reply(self._transformer))
        return self

    def execute(self, query: str | bytes, params: Sequence[Any] | None = None) -> Reply:
        """Send one statement (buffered until the block ends); its reply comes after.

        One without parameters (``COMMIT``, ``SET LOCAL``) is sent as it is.
        """
        reply = Reply(self._transformer)
        self._replies.append(reply)
        if params is None:
            self._pgconn.send_query_params(query.encode() if isinstance(query, str) else query,
                                           None)
            return reply
        converted = PostgresQuery(self._transformer)
        converted.convert(query, params)
        if self._prepared is None:
            self._pgconn.send_query_params(
                converted.query, converted.params, param_formats=converted.formats,
                param_types=converted.types)
            return reply
        key = (converted.query, converted.types)
        name = self._prepared.names.get(key)
        if name is None:
            name = self._prepared.add(key)
            self._pgconn.send_prepare(name, converted.query, param_types=converted.types)
            self._replies.insert(-1, Reply(self._transformer, prepares=key))
        self._pgconn.send_query_prepared(name, converted.params,
                                         param_formats=converted.formats)
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
                if (isinstance(failure, errors.InvalidSqlStatementName)
                        and self._prepared is not None):
                    self._prepared.names.clear()  # the server lost them: prepared anew
            reply = next(replies, None)
            if reply is not None:
                self._answer(reply, last)

    def _answer(self, reply: Reply, result: pq.abc.PGresult) -> None:
        """Give ``reply`` its result; a prepare that failed is tried again next time."""
        reply._result = result
        if (reply._prepares is not None and self._prepared is not None
                and result.status != pq.ExecStatus.COMMAND_OK):
            self._prepared.names.pop(reply._prepares, None)


def _prepared_on(conn: Connection[Any]) -> _Prepared | None:
    """The statements prepared on ``conn``'s session; None if psycopg prepares its own."""
    if conn.prepare_threshold is not None:
        return None
    prepared = _SESSIONS.get(conn.pgconn)
    if prepared is None:
        prepared = _SESSIONS[conn.pgconn] = _Prepared()
    return prepared


def _require_default_transaction(conn: Connection[Any]) -> None:
    """A plain ``BEGIN`` is what psycopg would send only with the default settings."""
    if (conn.isolation_level, conn.read_only, conn.deferrable) != (None, None, None):
        raise ValueError("Pipelined begins only default transactions")
